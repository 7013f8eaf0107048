//! An offload-aware library, as a user writes one: its `#[declare_target]` items (and what they reach) are callable
//! from the regions of any package that depends on it; its own region runs from its own image.

use offload::{declare_target, target};

pub mod shapes;

/// Reached from `hypot` and `Circle`'s impl, without an attribute of its own.
const HALF: f64 = 0.5;

#[declare_target]
pub fn sq(x: f64) -> f64 {
    x * x
}

/// Uses a `no_std` dependency of the library (`libm`), which the dependent need not name.
#[declare_target]
pub fn hypot(a: f64, b: f64) -> f64 {
    libm::sqrt(sq(a) + sq(b)) * (HALF + HALF)
}

/// A generic helper: instantiated by the dependent's region code.
#[declare_target]
pub fn sum_of<T: Copy + core::ops::Add<Output = T>>(xs: &[T], zero: T) -> T {
    let mut s = zero;
    for &x in xs {
        s = s + x;
    }
    s
}

/// A host-only function beside the device items: not device code, so its `Vec` is no concern.
pub fn collect_squares(xs: &[f64]) -> Vec<f64> {
    xs.iter().map(|&x| sq(x)).collect()
}

/// The library's own region; says whether it ran on the initial device (the host fallback).
#[target(teams_distribute_parallel_for, map(tofrom: v))]
pub fn scale_all(k: f64, v: &mut [f64]) -> bool {
    for i in 0..v.len() {
        v[i] = sq(v[i]) * k;
    }
    offload::omp_is_initial_device()
}
