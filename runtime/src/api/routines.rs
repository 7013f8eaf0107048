//! OpenMP's device runtime routines, with OpenMP's names and meanings.

use crate::device::{default_device, device_or_host, devices, initial_device, is_initial};
use crate::env;
use crate::observe::Label;
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
    match llvm() {
        Some(lib) => lib.num_devices(),
        None => devices().len() as i32,
    }
}

/// Under `OFFLOAD_RUNTIME=llvm` (and `OMP_TARGET_OFFLOAD` not `DISABLED`), the libomptarget whose devices and present
/// table answer the routines.
fn llvm() -> Option<&'static crate::device::llvm::Libomptarget> {
    if crate::env::icv().policy == crate::env::Policy::Disabled {
        return None;
    }
    crate::device::llvm::active()?.ok()
}

/// libomptarget, if `device` is one of its devices (under `OFFLOAD_RUNTIME=llvm`; not the initial device).
fn llvm_device(device: i32) -> Option<&'static crate::device::llvm::Libomptarget> {
    llvm().filter(|lib| (0..lib.num_devices()).contains(&device))
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
    if let Some(lib) = llvm_device(device) {
        // A device of LLVM's host plugin, whose launches run on the host's cores as host-elf's do; a GPU plugin's
        // takes our GPU geometry, for the multiprocessors libomptarget does not tell.
        let (name, arch) = match lib.runs_on_host(device) {
            true => ("its host plugin", std::env::consts::ARCH),
            false => ("a GPU plugin's", "gpu"),
        };
        return Some(info(
            "llvm",
            crate::plugin::DeviceDescription {
                name: format!("device {device} of LLVM's libomptarget ({name})"),
                arch: arch.into(),
                memory: 0,
            },
            &lib.limits(device),
        ));
    }
    match device_or_host(device).ok()? {
        Some(d) => Some(info(d.plugin, d.describe(), d.limits())),
        None => Some(info(
            "host",
            crate::plugin::DeviceDescription {
                name: "the host (the initial device)".into(),
                arch: std::env::consts::ARCH.into(),
                memory: 0,
            },
            &crate::host::geometry::host_limits(),
        )),
    }
}

/// What a device of `limits` offers.
fn info(
    plugin: &'static str,
    description: crate::plugin::DeviceDescription,
    limits: &crate::plugin::LaunchLimits,
) -> DeviceInfo {
    DeviceInfo {
        plugin,
        description,
        max_threads: limits.max_threads,
        max_teams: limits.max_teams,
        loop_geometry: limits.defaults(Construct::TeamsDistributeParallelFor),
        spmd_geometry: limits.defaults(Construct::Spmd),
    }
}

/// True on the host, including inside a region's host fallback; false in code running on an offload device (which
/// sees offload-device's twin of this function).
pub fn omp_is_initial_device() -> bool {
    true
}

/// Whether the host data at `ptr` has a device copy on `device`. Always true for the initial device.
pub fn omp_target_is_present(ptr: *const c_void, device: i32) -> bool {
    if is_initial(device) {
        return true;
    }
    if let Some(lib) = llvm() {
        return lib.is_present(ptr, device);
    }
    match usize::try_from(device).ok().and_then(|d| devices().get(d)) {
        Some(dev) => dev.table().lookup(ptr as usize, 1).is_some(),
        None => false,
    }
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
    if let Some(lib) = llvm_device(device) {
        // SAFETY: libomptarget's routine, with its C signature.
        return unsafe { (lib.memory.alloc)(size, device) };
    }
    match device_or_host(device) {
        Ok(Some(d)) => {
            let _scope = d.scope(Label::Construct("omp_target_alloc"));
            d.alloc(size, 1)
                .map_or(std::ptr::null_mut(), |p| p as usize as *mut c_void)
        }
        // SAFETY: plain malloc; freed by `omp_target_free` on the initial device.
        Ok(None) => unsafe { libc::calloc(size.max(1), 1) },
        Err(()) => std::ptr::null_mut(),
    }
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
    if let Some(lib) = llvm_device(device) {
        // SAFETY: per the contract, memory libomptarget's `omp_target_alloc` gave.
        return unsafe { (lib.memory.free)(ptr, device) };
    }
    match device_or_host(device) {
        Ok(Some(d)) => {
            let _scope = d.scope(Label::Construct("omp_target_free"));
            // SAFETY: per the contract.
            unsafe { d.free(ptr as usize as u64) }
        }
        // SAFETY: per the contract: it came from calloc.
        Ok(None) => unsafe { libc::free(ptr) },
        Err(()) => {}
    }
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
    if let Some(lib) = llvm_device(dst_device).or(llvm_device(src_device)) {
        // libomptarget's own, which knows its devices and the initial device (the same number as ours).
        // SAFETY: per the contract.
        return unsafe {
            (lib.memory.memcpy)(
                dst, src, length, dst_offset, src_offset, dst_device, src_device,
            )
        };
    }
    let (Ok(dd), Ok(sd)) = (device_or_host(dst_device), device_or_host(src_device)) else {
        return -1;
    };
    let d = dst as usize + dst_offset;
    let s = src as usize + src_offset;
    let label = Label::Construct("omp_target_memcpy");
    // Plain copies (map type 0) through the devices, which observe them as transfers.
    // SAFETY: per the contract.
    let r = unsafe {
        match (dd, sd) {
            (None, None) => {
                std::ptr::copy(s as *const u8, d as *mut u8, length);
                Ok(())
            }
            (Some(dd), None) => {
                let _scope = dd.scope(label);
                dd.submit(d as u64, s, length, 0)
            }
            (None, Some(sd)) => {
                let _scope = sd.scope(label);
                sd.retrieve(d, s as u64, length, 0)
            }
            (Some(dd), Some(sd)) => {
                let mut staging = vec![0u8; length];
                let from = {
                    let _scope = sd.scope(label);
                    sd.retrieve(staging.as_mut_ptr() as usize, s as u64, length, 0)
                };
                from.and_then(|()| {
                    let _scope = dd.scope(label);
                    dd.submit(d as u64, staging.as_ptr() as usize, length, 0)
                })
            }
        }
    };
    if r.is_ok() {
        0
    } else {
        -1
    }
}

/// The device address of mapped host data, `ptr` itself on the initial device, and null if it is not mapped.
pub fn omp_get_mapped_ptr(ptr: *const c_void, device: i32) -> *mut c_void {
    if let Some(lib) = llvm().filter(|_| !is_initial(device)) {
        return lib.mapped_ptr(ptr, device);
    }
    match device_or_host(device) {
        Ok(None) => ptr as *mut c_void,
        Ok(Some(d)) => d
            .table()
            .lookup(ptr as usize, 1)
            .map_or(std::ptr::null_mut(), |t| t as usize as *mut c_void),
        Err(()) => std::ptr::null_mut(),
    }
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
    if let Some(lib) = llvm_device(device) {
        // SAFETY: per the contract.
        return unsafe {
            (lib.memory.associate)(host_ptr, device_ptr, size, device_offset, device)
        };
    }
    match device_or_host(device) {
        Ok(Some(d)) => {
            let tgt = device_ptr as usize as u64 + device_offset as u64;
            let _scope = d.scope(Label::Construct("omp_target_associate_ptr"));
            let mut t = d.table();
            if t.associate(host_ptr as usize, size, tgt).is_ok() {
                0
            } else {
                -1
            }
        }
        _ => -1,
    }
}

/// Ends an association made by [`omp_target_associate_ptr`]. Returns 0 on success, nonzero if `host_ptr` is not an
/// associated pointer.
///
/// # Safety
/// No region may be using the association.
pub unsafe fn omp_target_disassociate_ptr(host_ptr: *const c_void, device: i32) -> i32 {
    if let Some(lib) = llvm_device(device) {
        // SAFETY: per the contract.
        return unsafe { (lib.memory.disassociate)(host_ptr, device) };
    }
    match device_or_host(device) {
        Ok(Some(d)) => {
            let _scope = d.scope(Label::Construct("omp_target_disassociate_ptr"));
            let mut t = d.table();
            if t.disassociate(host_ptr as usize).is_ok() {
                0
            } else {
                -1
            }
        }
        _ => -1,
    }
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
