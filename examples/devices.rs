//! Several devices at once: 1000 iterations dealt over every device (`device(i % n)`), each mapping the shared
//! input `c` to its device and its own slot `red[i]` to it and back (`map(tofrom: red[i])`), first from host threads
//! (one per device, as the C original does), then from one thread with `nowait` tasks. Checked against the host's
//! sums; exits non-zero on any mismatch.
//!
//! `OFFLOAD_HOST_DEVICES=2 OFFLOAD_INFO=1 cargo run --release --example devices` shows the launches on both devices.

use offload::{omp_get_initial_device, omp_get_num_devices, target, task_scope};
use std::time::Instant;

const ITERATIONS: usize = 1000;
const LEN: usize = 4096;

/// `red[i] += (i + 1) * sum(c)` on device `dev`: `c` is mapped to it, the one slot `red[i]` to it and back.
#[target(device(dev), map(to: c), map(tofrom: r))]
fn accumulate(dev: i32, i: usize, c: &[f64], r: &mut f64) {
    for cj in c {
        *r += cj * (i + 1) as f64;
    }
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
    // Each slot starts at its index, so a slot not copied in (or not back) shows.
    let start_of = |i: usize| i as f64;
    let want: Vec<f64> = (0..ITERATIONS)
        .map(|i| start_of(i) + (i + 1) as f64 * total)
        .collect();

    // Host threads, one per device: thread t takes the iterations i with i % threads == t.
    let threads = devices.max(1) as usize;
    let mut red: Vec<f64> = (0..ITERATIONS).map(start_of).collect();
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
                    accumulate(device_of(i, devices), i, c, r);
                }
            });
        }
    });
    let threaded = start.elapsed();
    check("host threads", &red, &want);

    // One thread, every iteration a `nowait` region; the scope waits for them all.
    let mut red: Vec<f64> = (0..ITERATIONS).map(start_of).collect();
    let start = Instant::now();
    task_scope(|s| {
        let tasks: Vec<_> = red
            .iter_mut()
            .enumerate()
            .map(|(i, r)| nowait_accumulate(s, device_of(i, devices), i, &c, r))
            .collect();
        for t in tasks {
            t.wait().expect("an iteration failed");
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
