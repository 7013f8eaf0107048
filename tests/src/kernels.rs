use offload::{declare_target, omp_is_initial_device, target};

/// Doubles every element and reports whether it ran on the initial device (the host).
#[target]
pub fn double(y: &mut [i64]) -> bool {
    for v in y.iter_mut() {
        *v *= 2;
    }
    omp_is_initial_device()
}

#[declare_target]
pub const SCALE: i64 = 3;

#[target(device(dev))]
pub fn scale_on(dev: i32, y: &mut [i64]) -> bool {
    for v in y.iter_mut() {
        *v *= SCALE;
    }
    omp_is_initial_device()
}

/// `init + y[0] + .. + y[n-1]`, work-shared over every team and thread; on the device unless `on_device` is false.
#[target(teams_distribute_parallel_for, reduction(+: s), if(on_device))]
pub fn sum_from(on_device: bool, init: i64, y: &[i64]) -> i64 {
    let mut s = init;
    for i in 0..y.len() {
        s += y[i];
    }
    s
}

/// A device function of the package's library, which regions of its other targets (the integration tests) call as
/// `offload_tests::kernels::saturating_step` (tests/tests/region_code.rs).
#[declare_target]
pub fn saturating_step(v: i64, limit: i64) -> i64 {
    if v + SCALE > limit {
        limit
    } else {
        v + SCALE
    }
}
