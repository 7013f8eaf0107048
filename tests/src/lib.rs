//! Regions shared by the integration tests and the probe binary; a library's regions reach every crate that links it.

pub mod kernels;

/// Where a region ran, as the region itself sees it.
pub fn ran_on(initial: bool) -> &'static str {
    if initial {
        "host"
    } else {
        "device"
    }
}

#[cfg(test)]
mod unit {
    use offload::{omp_is_initial_device, target};

    /// A region in a library's own unit tests.
    #[target]
    fn cube_all(y: &mut [i32]) -> bool {
        for v in y.iter_mut() {
            *v = *v * *v * *v;
        }
        omp_is_initial_device()
    }

    #[test]
    fn regions_in_unit_tests_run_on_the_device() {
        let mut y = [1, 2, 3];
        assert!(!cube_all(&mut y), "ran in the host fallback");
        assert_eq!(y, [1, 8, 27]);
    }
}
