//! Tasks, side by side in one run (best of several rounds, since the machine is noisy):
//!
//! - two compute-bound serial regions on two host-elf devices, both `nowait` and then waited for, against calling
//!   them one after the other (target: at most 0.6 on 2 cores); run it with `OFFLOAD_HOST_DEVICES=2`;
//! - the round trip of `nowait_empty(s).wait()` against a synchronous empty region (target: at most 20 us on
//!   host-elf).
//!
//! `OFFLOAD_HOST_DEVICES=2 cargo bench -p offload-examples --bench tasks`. The chunked pipeline against one
//! synchronous region is `examples/pipeline.rs` (CI runs it on gpu-sim too).

use offload::{omp_get_num_devices, target, task_scope};
use std::hint::black_box;
use std::time::{Duration, Instant};

/// A serial region that only computes: a linear congruential walk of `n` steps.
#[target(device(dev))]
fn walk(dev: i32, n: u64, seed: u64) -> u64 {
    let mut x = seed;
    for i in 0..n {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(i | 1);
    }
    x
}

#[target]
fn empty() {}

/// The best of `rounds` timings of `f`.
fn best(rounds: usize, mut f: impl FnMut()) -> Duration {
    (0..rounds)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .min()
        .unwrap_or_default()
}

fn main() {
    let devices = omp_get_num_devices();
    let second = if devices >= 2 { 1 } else { 0 };
    if devices < 2 {
        println!("tasks: {devices} device(s); set OFFLOAD_HOST_DEVICES=2 to put the two regions on two devices");
    }
    const STEPS: u64 = 40_000_000;
    let (a, b) = (walk(0, 1000, 1), walk(second, 1000, 2));
    black_box((a, b));
    let serial = best(5, || {
        black_box(walk(0, STEPS, 1));
        black_box(walk(second, STEPS, 2));
    });
    let mut results = (0, 0);
    let overlapped = best(5, || {
        results = task_scope(|s| {
            let ta = nowait_walk(s, 0, STEPS, 1);
            let tb = nowait_walk(s, second, STEPS, 2);
            (ta.wait().unwrap(), tb.wait().unwrap())
        });
    });
    assert_eq!(
        results,
        (walk(0, STEPS, 1), walk(second, STEPS, 2)),
        "tasks give the calls' results"
    );
    println!("two serial regions on devices 0 and {second}:");
    println!(
        "  one after the other   {:8.2} ms",
        serial.as_secs_f64() * 1e3
    );
    println!(
        "  both nowait, waited   {:8.2} ms",
        overlapped.as_secs_f64() * 1e3
    );
    println!(
        "  nowait / sequential: {:.2} (target <= 0.6 on 2 cores)",
        overlapped.as_secs_f64() / serial.as_secs_f64()
    );

    const CALLS: u32 = 2000;
    let per = |d: Duration| d.as_secs_f64() * 1e6 / CALLS as f64;
    let sync = best(5, || (0..CALLS).for_each(|_| empty()));
    let round_trip = best(5, || {
        task_scope(|s| (0..CALLS).for_each(|_| nowait_empty(s).wait().unwrap()))
    });
    println!("empty region, mean of {CALLS} calls (best of 5 rounds):");
    println!("  synchronous           {:8.2} us", per(sync));
    println!(
        "  nowait(s).wait()      {:8.2} us (target <= 20 us)",
        per(round_trip)
    );
}
