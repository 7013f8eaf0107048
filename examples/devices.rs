//! Several devices at once: 1000 iterations dealt over every device (`device(i % n)`), each
//! mapping the shared input `c` to its device and its own slot `red[i]` back, first from host threads (one per
//! device, as the C original does), then from one thread with `nowait` tasks. Checked against the host's sums; exits
//! non-zero on any mismatch.
//!
//! `OFFLOAD_HOST_DEVICES=2 OFFLOAD_INFO=1 cargo run --release --example devices` shows the launches on both devices.

use offload::{omp_get_initial_device, omp_get_num_devices, target, task_scope};
use std::time::Instant;

const ITERATIONS: usize = 1000;
const LEN: usize = 4096;

/// `red = (i + 1) * sum(c)`, work-shared on device `dev`.
#[target(
    teams_distribute_parallel_for,
    device(dev),
    map(to: c),
    reduction(+: s)
)]
fn weighted_sum(dev: i32, i: usize, c: &[f64]) -> f64 {
    let mut s = 0.0;
    for j in 0..c.len() {
        s += c[j] * (i + 1) as f64;
    }
    s
}

/// The device of iteration `i`: dealt round-robin over the devices, or the host where there are none.
fn device_of(i: usize, devices: i32) -> i32 {
    if devices == 0 {
        omp_get_initial_device()
    } else {
        (i % devices as usize) as i32
    }
}

fn main() {
    let devices = omp_get_num_devices();
    let c: Vec<f64> = (0..LEN).map(|j| (j % 7) as f64).collect();
    let total: f64 = c.iter().sum();
    let want: Vec<f64> = (0..ITERATIONS).map(|i| (i + 1) as f64 * total).collect();

    // Host threads, one per device: thread t takes the iterations i with i % threads == t.
    let threads = devices.max(1) as usize;
    let mut red = vec![0.0f64; ITERATIONS];
    let start = Instant::now();
    std::thread::scope(|s| {
        let mut slots: Vec<Vec<(usize, &mut f64)>> = (0..threads).map(|_| Vec::new()).collect();
        for (i, r) in red.iter_mut().enumerate() {
            slots[i % threads].push((i, r));
        }
        for mine in slots {
            let c = &c;
            s.spawn(move || {
                for (i, r) in mine {
                    *r = weighted_sum(device_of(i, devices), i, c);
                }
            });
        }
    });
    let threaded = start.elapsed();
    check("host threads", &red, &want);

    // One thread, every iteration a `nowait` region; the scope waits for them all.
    let mut red = vec![0.0f64; ITERATIONS];
    let start = Instant::now();
    task_scope(|s| {
        let tasks: Vec<_> = (0..ITERATIONS)
            .map(|i| nowait_weighted_sum(s, device_of(i, devices), i, &c))
            .collect();
        for (r, t) in red.iter_mut().zip(tasks) {
            *r = t.wait().expect("an iteration failed");
        }
    });
    let tasked = start.elapsed();
    check("nowait tasks", &red, &want);
    println!(
        "devices: {ITERATIONS} iterations over {devices} device(s): host threads {:.1} ms, nowait tasks {:.1} ms; ok",
        threaded.as_secs_f64() * 1e3,
        tasked.as_secs_f64() * 1e3
    );
}

fn check(how: &str, got: &[f64], want: &[f64]) {
    let wrong = got.iter().zip(want).filter(|(g, w)| g != w).count();
    if wrong > 0 {
        eprintln!("devices: {how}: {wrong} of {} iterations wrong", got.len());
        std::process::exit(1);
    }
}
