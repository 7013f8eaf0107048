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
