//! Reductions as C programmers write them: a tail that is an expression of the reduction variables and of
//! values computed before the loop, evaluated once after the reduction; on host-elf (or gpu-sim under
//! `OFFLOAD_PLUGINS=gpu-sim`) and in the host fallback (`if(on_device)` false).

use offload::target;

/// pi as the OpenMP tutorials write it: the tail scales the sum by a value computed before the loop.
#[target(teams_distribute_parallel_for, reduction(+: sum), if(on_device))]
fn pi(on_device: bool, n: u64) -> f64 {
    let step = 1.0 / n as f64;
    let mut sum = 0.0;
    for i in 0..n {
        let x = (i as f64 + 0.5) * step;
        sum += 4.0 / (1.0 + x * x);
    }
    sum * step
}

/// Mean and maximum: the tail divides by a parameter and passes the other variable through.
#[target(teams_distribute_parallel_for, reduction(+: s), reduction(max: m), if(on_device))]
fn mean_max(on_device: bool, n: usize, x: &[f64]) -> (f64, f64) {
    let mut s = 0.0;
    let mut m = f64::NEG_INFINITY;
    for i in 0..n {
        s += x[i];
        m = m.max(x[i]);
    }
    (s / n as f64, m)
}

/// An integer count with an annotated type, the tail a comparison (a type the reduction does not have).
#[target(teams_distribute_parallel_for, reduction(+: hits), if(on_device))]
fn mostly_even(on_device: bool, n: u32) -> bool {
    let half = n / 2;
    let mut hits: u32 = 0;
    for i in 0..n {
        if i % 2 == 0 {
            hits += 1;
        }
    }
    hits >= half
}

#[test]
fn pi_tail_is_scaled_once_after_the_reduction() {
    for on_device in [true, false] {
        let p = pi(on_device, 1_000_000);
        assert!((p - std::f64::consts::PI).abs() < 1e-9, "{on_device}: {p}");
    }
}

#[test]
fn tuple_tail_of_expressions() {
    let x: Vec<f64> = (0..1000).map(|i| i as f64).collect();
    for on_device in [true, false] {
        assert_eq!(
            mean_max(on_device, x.len(), &x),
            (499.5, 999.0),
            "{on_device}"
        );
    }
}

#[test]
fn tail_of_another_type() {
    for on_device in [true, false] {
        assert!(mostly_even(on_device, 1001), "{on_device}");
    }
}

/// A 256-bin histogram (1 KiB, more than a team's shared memory holds for every thread on a GPU): the bins reduce
/// element by element, after the initial value.
#[target(teams_distribute_parallel_for, reduction(+: hist), if(on_device))]
fn histogram(on_device: bool, data: &[u32]) -> [u32; 256] {
    let mut hist = [3u32; 256];
    for i in 0..data.len() {
        hist[(data[i] % 256) as usize] += 1;
    }
    hist
}

/// A 4096-element `f64` array (32 KiB, far past the 512 bytes a small value has): each iteration adds into a few
/// elements. On AMD GPUs a work-item's private copies must fit a 128 KiB stack frame: an unoptimised build keeps
/// three of them (the thread's partial, the kernel entry's and the wire value's; the team step combines in place),
/// which `gpu_examples` checks.
#[target(teams_distribute_parallel_for, reduction(+: acc), if(on_device))]
fn spread(on_device: bool, x: &[f64]) -> [f64; 4096] {
    let mut acc = [0.5f64; 4096];
    for i in 0..x.len() {
        acc[i % 4096] += x[i];
        acc[(i * 7 + 1) % 4096] += 1.0;
    }
    acc
}

#[test]
fn histogram_of_256_bins() {
    let data: Vec<u32> = (0..100_003u32)
        .map(|i| i.wrapping_mul(2_654_435_761) >> 7)
        .collect();
    let mut want = [3u32; 256];
    for d in &data {
        want[(d % 256) as usize] += 1;
    }
    for on_device in [true, false] {
        assert_eq!(histogram(on_device, &data), want, "{on_device}");
    }
}

#[test]
fn array_of_4096_f64() {
    let x: Vec<f64> = (0..50_000).map(|i| (i % 13) as f64 * 0.25).collect();
    let mut want = [0.5f64; 4096];
    for i in 0..x.len() {
        want[i % 4096] += x[i];
        want[(i * 7 + 1) % 4096] += 1.0;
    }
    for on_device in [true, false] {
        let got = spread(on_device, &x);
        for (k, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!(
                (g - w).abs() <= 1e-9 * w.abs().max(1.0),
                "{on_device}: [{k}] {g} != {w}"
            );
        }
    }
}
