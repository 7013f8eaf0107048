//! Cost of calling an empty `#[target]` region: on the host-elf device, in the host fallback (`if(false)`), and a
//! direct call of an empty function, measured side by side in one run (best of several rounds, since the machine is
//! noisy). `cargo bench -p offload-examples --bench launch`
//!
//! Targets (issue 2): under 350 ns per call on the device (libomptarget's x86_64 host plugin takes about 690 ns
//! for an empty `#pragma omp target`), under 50 ns of fallback overhead over a direct call.

use offload::target;
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
}
