//! OpenMP's device runtime routines, with OpenMP's names and meanings.

use crate::device::{backend, default_device, initial_device};
use crate::env;
use offload_model::abi::Construct;
use std::ffi::c_void;

pub use crate::device::OMP_INITIAL_DEVICE;

/// Number of offload devices (0 under `OMP_TARGET_OFFLOAD=DISABLED`).
///
/// Devices are numbered `0..omp_get_num_devices()` (NVIDIA GPUs, then AMD GPUs, then host-elf devices); the host,
/// the initial device, is number `omp_get_num_devices()`.
///
/// ```
/// use offload::{omp_get_default_device, omp_get_initial_device, omp_get_num_devices};
///
/// let n = omp_get_num_devices();
/// assert_eq!(omp_get_initial_device(), n);
/// // Regions without `device(..)` run on the default device (device 0 unless `OMP_DEFAULT_DEVICE` says otherwise).
/// println!("{n} offload device(s); regions run on device {}", omp_get_default_device());
/// ```
pub fn omp_get_num_devices() -> i32 {
    backend().num_devices()
}

/// The host's device number, which OpenMP defines as `omp_get_num_devices()`.
pub fn omp_get_initial_device() -> i32 {
    initial_device()
}

/// The device regions without a `device` clause run on (and data constructs map on). Each thread's starts at
/// `OMP_DEFAULT_DEVICE` (0 if unset, which is the host when there are no devices; the host under
/// `OMP_TARGET_OFFLOAD=DISABLED`), and [`omp_set_default_device`] changes it for the calling thread.
///
/// ```
/// use offload::{omp_get_default_device, omp_get_initial_device, omp_set_default_device};
///
/// let before = omp_get_default_device();
/// omp_set_default_device(omp_get_initial_device()); // this thread's regions now run on the host
/// assert_eq!(omp_get_default_device(), omp_get_initial_device());
/// omp_set_default_device(before);
/// ```
pub fn omp_get_default_device() -> i32 {
    default_device()
}

/// Sets this thread's default device.
pub fn omp_set_default_device(device: i32) {
    env::set_default_device(device)
}

/// What a device is and what launches on it get: its plugin, its description, and the geometry of parallel regions.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct DeviceInfo {
    /// The plugin driving it (`cuda`, `amdgpu`, `host-elf`, `gpu-sim`; `llvm` for a device of LLVM's libomptarget
    /// under `OFFLOAD_RUNTIME=llvm`), or `host` for the initial device.
    pub plugin: &'static str,
    /// Its name, architecture and memory.
    pub description: crate::plugin::DeviceDescription,
    /// The most threads a team gets (`thread_limit` is an upper bound).
    pub max_threads: u32,
    /// The most teams a launch gets (`num_teams` is an upper bound).
    pub max_teams: u32,
    /// (teams, threads per team) of a work-shared loop whose clauses leave them open.
    pub loop_geometry: (u32, u32),
    /// (teams, threads per team) of a `teams, parallel` region whose clauses leave them open.
    pub spmd_geometry: (u32, u32),
}

/// What device `device` is and what launches on it get; the initial device (the host, where regions' host fallbacks
/// run) included. `None` for a number that names no device.
///
/// ```
/// use offload::{device_info, omp_get_initial_device};
///
/// let host = device_info(omp_get_initial_device()).unwrap();
/// assert_eq!(host.plugin, "host");
/// assert!(host.max_threads >= 1);
/// if let Some(d) = device_info(0) {
///     println!("device 0 is {} on {}: up to {} threads per team", d.description.name, d.plugin, d.max_threads);
/// }
/// ```
pub fn device_info(device: i32) -> Option<DeviceInfo> {
    let (plugin, description, limits) = backend().describe(device)?;
    Some(DeviceInfo {
        plugin,
        description,
        max_threads: limits.max_threads,
        max_teams: limits.max_teams,
        loop_geometry: limits.defaults(Construct::TeamsDistributeParallelFor),
        spmd_geometry: limits.defaults(Construct::Spmd),
    })
}

/// True on the host, including inside a region's host fallback; false in code running on an offload device (which
/// sees offload-device's twin of this function).
pub fn omp_is_initial_device() -> bool {
    true
}

/// Whether the host data at `ptr` has a device copy on `device`. Always true for the initial device.
pub fn omp_target_is_present(ptr: *const c_void, device: i32) -> bool {
    backend().is_present(ptr, device)
}

/// Allocates `size` bytes of device memory (zero-filled on host-elf); null on failure. On the initial device this is
/// host memory.
///
/// The memory is the caller's to free with [`omp_target_free`]; [`omp_target_memcpy`] moves data in and out, and
/// [`DevicePtr::from_raw`](crate::DevicePtr::from_raw) passes it to regions. [`DeviceBuffer`](crate::DeviceBuffer)
/// is the typed, owning way to do the same.
///
/// ```
/// use offload::{omp_get_default_device, omp_get_initial_device, omp_target_alloc, omp_target_free, omp_target_memcpy};
///
/// let (dev, host) = (omp_get_default_device(), omp_get_initial_device());
/// let data = [1.5f64, 2.5, 3.5];
/// let bytes = size_of_val(&data);
/// let p = omp_target_alloc(bytes, dev);
/// assert!(!p.is_null());
/// let mut back = [0.0f64; 3];
/// // SAFETY: `p` holds `bytes` bytes of `dev`'s memory; `data` and `back` are host memory of that size.
/// unsafe {
///     assert_eq!(omp_target_memcpy(p, data.as_ptr().cast(), bytes, 0, 0, dev, host), 0);
///     assert_eq!(omp_target_memcpy(back.as_mut_ptr().cast(), p, bytes, 0, 0, host, dev), 0);
///     omp_target_free(p, dev);
/// }
/// assert_eq!(back, data);
/// ```
pub fn omp_target_alloc(size: usize, device: i32) -> *mut c_void {
    backend().alloc(size, device)
}

/// Frees memory from [`omp_target_alloc`] on the same device. Null is ignored.
///
/// ```
/// use offload::{omp_get_default_device, omp_target_alloc, omp_target_free};
///
/// let dev = omp_get_default_device();
/// let p = omp_target_alloc(1024, dev);
/// // SAFETY: `p` came from `omp_target_alloc(_, dev)` and is not used again.
/// unsafe { omp_target_free(p, dev) };
/// ```
///
/// # Safety
/// `ptr` came from `omp_target_alloc(_, device)` and is not used afterwards.
pub unsafe fn omp_target_free(ptr: *mut c_void, device: i32) {
    if ptr.is_null() {
        return;
    }
    // SAFETY: forwarded.
    unsafe { backend().free(ptr, device) }
}

/// Copies `length` bytes from `src + src_offset` on `src_device` to `dst + dst_offset` on `dst_device`; either may be
/// the initial device. Returns 0 on success, as OpenMP's does.
///
/// # Safety
/// Both ranges are valid memory of their devices.
#[allow(clippy::too_many_arguments)]
pub unsafe fn omp_target_memcpy(
    dst: *mut c_void,
    src: *const c_void,
    length: usize,
    dst_offset: usize,
    src_offset: usize,
    dst_device: i32,
    src_device: i32,
) -> i32 {
    // SAFETY: forwarded.
    unsafe {
        backend().memcpy(
            dst, src, length, dst_offset, src_offset, dst_device, src_device,
        )
    }
}

/// The device address of mapped host data, `ptr` itself on the initial device, and null if it is not mapped.
pub fn omp_get_mapped_ptr(ptr: *const c_void, device: i32) -> *mut c_void {
    backend().mapped_ptr(ptr, device)
}

/// Makes `[host_ptr, host_ptr+size)` present on `device` at `device_ptr + device_offset` (memory the caller
/// allocated and keeps owning) until [`omp_target_disassociate_ptr`]. Returns 0 on success.
///
/// # Safety
/// The device range is `size` bytes of `device`'s memory that outlives the association.
pub unsafe fn omp_target_associate_ptr(
    host_ptr: *const c_void,
    device_ptr: *const c_void,
    size: usize,
    device_offset: usize,
    device: i32,
) -> i32 {
    // SAFETY: forwarded.
    unsafe { backend().associate(host_ptr, device_ptr, size, device_offset, device) }
}

/// Ends an association made by [`omp_target_associate_ptr`]. Returns 0 on success, nonzero if `host_ptr` is not an
/// associated pointer.
///
/// # Safety
/// No region may be using the association.
pub unsafe fn omp_target_disassociate_ptr(host_ptr: *const c_void, device: i32) -> i32 {
    // SAFETY: forwarded.
    unsafe { backend().disassociate(host_ptr, device) }
}

/// The host's clock (or its resolution) in seconds: `CLOCK_MONOTONIC`, the clock under std's `Instant`, read directly
/// so that host code, the host fallback and the host image (offload-device reads the same clock) share one time line.
fn monotonic(res: bool) -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-parameter; CLOCK_MONOTONIC always exists on Linux.
    unsafe {
        if res {
            libc::clock_getres(libc::CLOCK_MONOTONIC, &mut ts);
        } else {
            libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts);
        }
    }
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// Elapsed wall-clock seconds from a fixed point in the past (OpenMP's `omp_get_wtime`; the point is the system's
/// boot, the same in every thread and in host-image regions). Region code on a GPU reads the GPU's clock.
pub fn omp_get_wtime() -> f64 {
    monotonic(false)
}

/// The resolution of [`omp_get_wtime`]'s clock in seconds.
pub fn omp_get_wtick() -> f64 {
    monotonic(true)
}
