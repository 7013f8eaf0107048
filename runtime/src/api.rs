//! OpenMP's device runtime routines, with OpenMP's names and meanings.

use crate::device::devices;
use crate::icv::icv;
use std::cell::Cell;
use std::ffi::c_void;

thread_local! {
    /// default-device-var: per thread (OpenMP keeps it per data environment), starting at `OMP_DEFAULT_DEVICE`.
    static DEFAULT_DEVICE: Cell<i32> = Cell::new(icv().default_device);
}

/// Number of offload devices (0 under `OMP_TARGET_OFFLOAD=DISABLED`).
pub fn omp_get_num_devices() -> i32 {
    devices().len() as i32
}

/// The host's device number, which OpenMP defines as `omp_get_num_devices()`.
pub fn omp_get_initial_device() -> i32 {
    omp_get_num_devices()
}

/// The device regions without a `device` clause run on.
pub fn omp_get_default_device() -> i32 {
    DEFAULT_DEVICE.with(|d| d.get())
}

/// Sets this thread's default device.
pub fn omp_set_default_device(device: i32) {
    DEFAULT_DEVICE.with(|d| d.set(device));
}

/// True on the host, including inside a region's host fallback; false in code running on an offload device (which
/// sees device-std's twin of this function).
pub fn omp_is_initial_device() -> bool {
    true
}

/// Whether the host data at `ptr` has a device copy on `device`. Always true for the initial device.
pub fn omp_target_is_present(ptr: *const c_void, device: i32) -> bool {
    let devs = devices();
    if device == devs.len() as i32 {
        return true;
    }
    match usize::try_from(device).ok().and_then(|d| devs.get(d)) {
        Some(dev) => dev
            .mapping
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .lookup(ptr as usize, 1)
            .is_some(),
        None => false,
    }
}
