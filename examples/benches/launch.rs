//! Cost of calling an empty `#[target]` region: on the host-elf device, in the host fallback (`if(false)`), and a
//! direct call of an empty function, measured side by side in one run (best of several rounds, since the machine is
//! noisy). `cargo bench -p offload-examples --bench launch`
//!
//! Targets: under 350 ns per call on the device (libomptarget's x86_64 host plugin takes about 690 ns
//! for an empty `#pragma omp target`), under 50 ns of fallback overhead over a direct call.
//!
//! Launch geometry: a 4096-element work-shared loop under `thread_limit(256)` within 2x of the same loop
//! under `thread_limit(2)`, and a `teams, parallel` launch of 64 teams x 128 threads with one barrier under 5 ms, on
//! the device and in the host fallback: the host devices never run more threads than the host can run at once.

use core::sync::atomic::{AtomicU32, Ordering::Relaxed};
use offload::{barrier, omp_get_num_threads, omp_get_team_num, omp_get_thread_num, target};
use std::hint::black_box;
use std::time::Instant;

#[target(if(on_device))]
fn empty(on_device: bool) {}

#[target(if(on_device))]
fn one_slice(on_device: bool, x: &mut [f32]) {
    x[0] += 1.0;
}

/// A parallel region over a handful of elements: what a launch of teams costs when the work is nothing.
#[target(teams_distribute_parallel_for, if(on_device))]
fn small_parallel(on_device: bool, x: &mut [f32]) {
    for i in 0..x.len() {
        x[i] += 1.0;
    }
}

/// A 4096-element loop under a given `thread_limit`.
#[target(teams_distribute_parallel_for, thread_limit(threads), if(on_device))]
fn limited(on_device: bool, threads: u32, x: &mut [f32]) {
    for i in 0..x.len() {
        x[i] += 1.0;
    }
}

/// Every thread counts itself, meets its team at a barrier, and counts again.
#[target(
    teams,
    parallel,
    num_teams(teams),
    thread_limit(threads),
    if(on_device)
)]
fn one_barrier(on_device: bool, teams: u32, threads: u32, seen: &[AtomicU32]) {
    let me = (omp_get_team_num() * omp_get_num_threads() + omp_get_thread_num()) as usize;
    seen[me].fetch_add(1, Relaxed);
    barrier();
    seen[me].fetch_add(1, Relaxed);
}

#[inline(never)]
fn direct() {
    black_box(());
}

fn ns_per_call(iters: u32, mut f: impl FnMut()) -> f64 {
    let mut best = f64::INFINITY;
    for _ in 0..7 {
        let t = Instant::now();
        for _ in 0..iters {
            f();
        }
        best = best.min(t.elapsed().as_nanos() as f64 / iters as f64);
    }
    best
}

/// Best time per call in microseconds of `a` and of `b`, measured in alternating rounds (this machine's load
/// drifts), each round as many calls as fill about 10 ms: a launch may cost anywhere from a microsecond to a
/// quarter of a second.
fn us_per_call_pair(mut a: impl FnMut(), mut b: impl FnMut()) -> (f64, f64) {
    let round = |f: &mut dyn FnMut(), iters: u32| {
        let t = Instant::now();
        for _ in 0..iters {
            f();
        }
        t.elapsed().as_secs_f64() * 1e6 / iters as f64
    };
    // Warm up (pool threads, the image's first calls), then size the rounds from a few calls.
    let calls = |f: &mut dyn FnMut()| {
        round(f, 3);
        ((1e4 / round(f, 5).max(1e-3)) as u32).clamp(1, 20_000)
    };
    let (ia, ib) = (calls(&mut a), calls(&mut b));
    let mut best = (f64::INFINITY, f64::INFINITY);
    for _ in 0..15 {
        best.0 = best.0.min(round(&mut a, ia));
        best.1 = best.1.min(round(&mut b, ib));
    }
    best
}

/// The geometry figures: work-shared `thread_limit(2)` against `thread_limit(256)`, and 64 x 128 SPMD with a barrier,
/// on the device and in the host fallback.
fn geometry() {
    let mut x = vec![0f32; 4096];
    let seen: Vec<AtomicU32> = (0..64 * 128).map(|_| AtomicU32::new(0)).collect();
    println!(
        "launch geometry ({} hardware threads):",
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    let mut ratio = [0.0; 2];
    for (k, on_device) in [true, false].into_iter().enumerate() {
        let x = std::cell::RefCell::new(&mut x);
        let (two, many) = us_per_call_pair(
            || limited(black_box(on_device), 2, &mut x.borrow_mut()),
            || limited(black_box(on_device), 256, &mut x.borrow_mut()),
        );
        ratio[k] = many / two;
        println!(
            "  4096-element loop, {:8}: thread_limit(2) {two:8.1} us, thread_limit(256) {many:8.1} us",
            ["device", "fallback"][k]
        );
    }
    println!(
        "  thread_limit(256) / thread_limit(2): device {:.2}, fallback {:.2}  (target < 2)",
        ratio[0], ratio[1]
    );
    let (dev, host) = us_per_call_pair(
        || one_barrier(black_box(true), 64, 128, &seen),
        || one_barrier(black_box(false), 64, 128, &seen),
    );
    println!(
        "  64 teams x 128 threads, one barrier: device {:.3} ms, fallback {:.3} ms  (target < 5)",
        dev / 1e3,
        host / 1e3
    );
}

fn main() {
    assert_eq!(
        offload::omp_get_num_devices(),
        1,
        "run with the host-elf device available"
    );
    // Load the image and warm up every path before timing.
    empty(true);
    empty(false);
    let mut x = vec![0f32; 16];
    one_slice(true, &mut x);

    let iters = 200_000;
    let device = ns_per_call(iters, || empty(black_box(true)));
    let fallback = ns_per_call(iters, || empty(black_box(false)));
    let direct = ns_per_call(iters, direct);
    let slice_dev = ns_per_call(iters / 4, || one_slice(black_box(true), &mut x));
    let slice_host = ns_per_call(iters, || one_slice(black_box(false), &mut x));
    let par_dev = ns_per_call(iters / 100, || small_parallel(black_box(true), &mut x));
    let par_host = ns_per_call(iters / 100, || small_parallel(black_box(false), &mut x));

    println!("empty region on host-elf device : {device:8.1} ns/call  (target < 350)");
    println!("empty region in host fallback   : {fallback:8.1} ns/call");
    println!("16-element parallel for, device : {par_dev:8.1} ns/call");
    println!("16-element parallel for, host   : {par_host:8.1} ns/call");
    println!("direct call of an empty function: {direct:8.1} ns/call");
    println!(
        "fallback overhead over direct   : {:8.1} ns/call  (target < 50)",
        fallback - direct
    );
    println!("1 mapped slice (64 B) on device : {slice_dev:8.1} ns/call  (map, launch, copy back, unmap)");
    println!("1 mapped slice in host fallback : {slice_host:8.1} ns/call");
    println!("device / 350 ns target          : {:8.2}", device / 350.0);
    geometry();
}
