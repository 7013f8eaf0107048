//! Regions shared by the integration tests and the probe binary; a library's regions reach every crate that links it.

pub mod kernels;

/// The default device as a failure names it: `device 0 (host-elf)`, `device 0 (gpu-sim)`.
pub fn default_device_name() -> String {
    let d = offload::omp_get_default_device();
    format!(
        "device {d} ({})",
        offload::device_info(d).map_or("none", |i| i.plugin)
    )
}

/// The most threads a team gets where a region runs: on the default device, or in the host fallback. The host
/// devices give at most the hardware threads, GPUs (and gpu-sim) their block size limit.
pub fn team_limit(on_device: bool) -> u32 {
    let d = if on_device {
        offload::omp_get_default_device()
    } else {
        offload::omp_get_initial_device()
    };
    offload::device_info(d).map_or(1, |i| i.max_threads)
}

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
