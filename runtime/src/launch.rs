//! A region call: choose the device, map the arguments, launch, unmap; or run the host fallback.
//!
//! The host runs a region only when it could not start on a device (no device, no image or kernel, a mapping
//! failure) or when asked to (`if(false)`, the initial device, `OMP_TARGET_OFFLOAD=DISABLED`). Once a kernel has
//! started, a failure is never retried on the host: its mappings are released without copying back and the call
//! fails.

use crate::device::{devices, DeviceEntry};
use crate::error::{Error, Location};
use crate::icv::{icv, info, info_level, Policy};
use crate::mapping::RefKind;
use crate::plugin::{DevicePtr, LaunchParams};
use crate::tables::{entry_index, entry_symbol};
use offload_model::abi::map_type::{FROM, LITERAL, PRIVATE, TO};
use offload_model::abi::OffloadEntry;
use std::mem::{size_of, MaybeUninit};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// A region's static description, written by the macro.
pub struct RegionInfo {
    /// The region's identity, `crate::module::function`.
    pub name: &'static str,
    pub file: &'static str,
    pub line: u32,
    pub entry: &'static OffloadEntry,
}

/// One kernel argument as the host sees it: libomptarget's (begin, size, map type) triple. A literal carries its
/// value in `begin`.
#[derive(Clone, Copy, Debug)]
pub struct MapArg {
    pub begin: *mut u8,
    pub size: usize,
    pub map_type: u64,
}

impl MapArg {
    #[inline]
    pub fn literal(v: u64) -> Self {
        MapArg {
            begin: v as usize as *mut u8,
            size: 0,
            map_type: LITERAL,
        }
    }

    #[inline]
    pub fn slice<T>(p: *const [T], map_type: u64) -> Self {
        MapArg {
            begin: p as *const T as *mut u8,
            size: size_of::<T>() * p.len(),
            map_type,
        }
    }

    #[inline]
    pub fn object<T>(p: *const T, map_type: u64) -> Self {
        MapArg {
            begin: p as *mut u8,
            size: size_of::<T>(),
            map_type,
        }
    }

    /// A firstprivate value: its bits if it fits in 8 bytes, else a private device copy.
    ///
    /// # Safety
    /// `T` is `Firstprivate` (the expansion checks it separately, so a wrong type gets one error, not two).
    #[inline]
    pub unsafe fn value<T>(v: &T) -> Self {
        if size_of::<T>() <= 8 {
            let mut bits = 0u64;
            // SAFETY: `T` fits in `bits`; `Firstprivate` types are plain data.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    v as *const T as *const u8,
                    &mut bits as *mut u64 as *mut u8,
                    size_of::<T>(),
                )
            };
            Self::literal(bits)
        } else {
            MapArg {
                begin: v as *const T as *mut u8,
                size: size_of::<T>(),
                map_type: TO | PRIVATE,
            }
        }
    }

    /// The return slot, a private `from` copy.
    #[inline]
    pub fn ret<R>(slot: &mut MaybeUninit<R>) -> Self {
        MapArg {
            begin: slot.as_mut_ptr() as *mut u8,
            size: size_of::<R>(),
            map_type: FROM | PRIVATE,
        }
    }
}

/// Why a region runs on the host.
enum Host {
    /// The program asked for the host (`if(false)`, the initial device, offloading disabled).
    Chosen(&'static str),
    /// No device could start it; an error under `MANDATORY`.
    Unavailable(String),
}

enum NotRun {
    Host(Host),
    Failed(Error),
}

/// Runs a region. The macro passes the map list in kernel-argument order, a return slot, and the host fallback.
///
/// # Safety
/// Every non-literal `MapArg` describes memory valid for its size (writable if `FROM`) until the call returns, and
/// `ret` is the slot the map list's return entry points at (if the region returns a value).
pub unsafe fn target<R>(
    region: &'static RegionInfo,
    device: Option<i32>,
    cond: bool,
    maps: &[MapArg],
    ret: &mut MaybeUninit<R>,
    fallback: impl FnOnce() -> R,
) -> Result<R, Error> {
    // SAFETY: forwarded from the caller.
    let why = match unsafe { run_on_device(region, device, cond, maps) } {
        // SAFETY: the kernel wrote the return slot (or `R` is `()`).
        Ok(()) => return Ok(unsafe { ret.assume_init_read() }),
        Err(NotRun::Failed(e)) => return Err(e),
        Err(NotRun::Host(why)) => why,
    };
    let reason = match &why {
        Host::Chosen(r) => r,
        Host::Unavailable(r) => {
            if icv().policy == Policy::Mandatory {
                return Err(Error::Mandatory {
                    region: region.name,
                    reason: r.clone(),
                });
            }
            r.as_str()
        }
    };
    if info() >= info_level::LAUNCH {
        eprintln!(
            "offload: launch {} on the host (host-fallback): {reason}",
            region.name
        );
    }
    match catch_unwind(AssertUnwindSafe(fallback)) {
        Ok(r) => Ok(r),
        Err(payload) => {
            panic!(
                "offload: region {} panicked in the host fallback: {}",
                region.name,
                panic_message(&*payload)
            )
        }
    }
}

fn panic_message(p: &(dyn std::any::Any + Send)) -> &str {
    p.downcast_ref::<&str>()
        .copied()
        .or_else(|| p.downcast_ref::<String>().map(|s| s.as_str()))
        .unwrap_or("(non-string panic)")
}

/// Panics with a region failure (`saxpy` calls this when `try_saxpy` fails).
#[cold]
#[track_caller]
pub fn fail(e: Error) -> ! {
    panic!("{e}")
}

unsafe fn run_on_device(
    region: &'static RegionInfo,
    device: Option<i32>,
    cond: bool,
    maps: &[MapArg],
) -> Result<(), NotRun> {
    let host = |h| Err(NotRun::Host(h));
    if !cond {
        return host(Host::Chosen("the if clause is false"));
    }
    if icv().policy == Policy::Disabled {
        return host(Host::Chosen("OMP_TARGET_OFFLOAD=DISABLED"));
    }
    let devs = devices();
    let n = devs.len() as i32;
    let d = match device {
        Some(d) if d == n => return host(Host::Chosen("device(n) names the initial device")),
        Some(d) => d,
        None => {
            let d = crate::api::omp_get_default_device();
            if n == 0 {
                return host(Host::Unavailable("no offload device is available".into()));
            }
            if d == n {
                return host(Host::Chosen("the default device is the initial device"));
            }
            d
        }
    };
    if d < 0 || d >= n {
        return host(Host::Unavailable(format!(
            "device {d} does not exist (there are {n} devices)"
        )));
    }
    let dev = &devs[d as usize];
    if dev.is_lost() {
        return host(Host::Unavailable(format!(
            "device {d} ({}) was lost after an earlier failure",
            dev.plugin
        )));
    }
    let Some(kernel) = dev.kernel(entry_index(region.entry)) else {
        return host(Host::Unavailable(format!(
            "no image loaded on device {d} ({}) has the kernel {}",
            dev.plugin,
            entry_symbol(region.entry).to_string_lossy()
        )));
    };
    let mut args = Vec::with_capacity(maps.len());
    // SAFETY: forwarded from the caller.
    if let Err(e) = unsafe { map_in(dev, maps, &mut args) } {
        return host(Host::Unavailable(format!(
            "mapping the arguments on device {d} failed: {e}"
        )));
    }
    if info() >= info_level::LAUNCH {
        eprintln!(
            "offload: launch {} (entry {}) on device {d} ({})",
            region.name,
            entry_symbol(region.entry).to_string_lossy(),
            dev.plugin
        );
    }
    let params = LaunchParams {
        num_teams: 1,
        num_threads: 1,
    };
    // SAFETY: the kernel came from this device and the arguments follow the region's calling convention.
    let launched = unsafe { dev.dev.launch(kernel, &args, params) };
    let ok = launched.is_ok();
    // SAFETY: forwarded from the caller; nothing is copied back after a failure.
    let unmapped = unsafe { map_out(dev, maps, &args, ok) };
    let failed = |message: String, location: Option<(String, u32, u32)>| {
        Err(NotRun::Failed(Error::RegionFailed {
            region: region.name,
            device: d,
            plugin: dev.plugin,
            message,
            location: Location(location),
        }))
    };
    match (launched, unmapped) {
        (Ok(()), Ok(())) => Ok(()),
        (Err(f), _) => {
            if f.device_lost {
                dev.mark_lost();
            }
            failed(f.message, f.location)
        }
        (Ok(()), Err(e)) => failed(format!("copying results back failed: {e}"), None),
    }
}

/// Maps every argument in, pushing one kernel argument each; on error undoes what it did.
unsafe fn map_in(dev: &DeviceEntry, maps: &[MapArg], args: &mut Vec<u64>) -> Result<(), String> {
    let mut table = None;
    for (i, m) in maps.iter().enumerate() {
        let r = if m.map_type & LITERAL != 0 {
            Ok(m.begin as usize as u64)
        } else if m.size == 0 {
            // Zero-length data skips the table; the entry gets a dangling, aligned pointer.
            Ok(m.begin as usize as u64)
        } else if m.map_type & PRIVATE != 0 {
            private_in(dev, m)
        } else {
            let t =
                table.get_or_insert_with(|| dev.mapping.lock().unwrap_or_else(|p| p.into_inner()));
            // SAFETY: the caller guarantees the host range.
            unsafe {
                t.enter(
                    &*dev.dev,
                    m.begin as usize,
                    m.size,
                    m.map_type,
                    RefKind::Structured,
                )
            }
            .map_err(|e| e.to_string())
        };
        match r {
            Ok(a) => args.push(a),
            Err(e) => {
                drop(table);
                // SAFETY: undo exactly the first `i` entries, copying nothing back.
                let _ = unsafe { map_out(dev, &maps[..i], args, false) };
                return Err(e);
            }
        }
    }
    Ok(())
}

fn private_in(dev: &DeviceEntry, m: &MapArg) -> Result<DevicePtr, String> {
    let p = dev.dev.alloc(m.size)?;
    if m.map_type & TO != 0 {
        // SAFETY: the macro passes a live value of `size` bytes; `p` was just allocated.
        if let Err(e) = unsafe { dev.dev.copy_to_device(p, m.begin, m.size) } {
            // SAFETY: ours, unused.
            unsafe { dev.dev.free(p) };
            return Err(e);
        }
    }
    Ok(p)
}

/// Unmaps the arguments `map_in` mapped (`args[i]` is the kernel argument of `maps[i]`).
unsafe fn map_out(
    dev: &DeviceEntry,
    maps: &[MapArg],
    args: &[u64],
    copy_out: bool,
) -> Result<(), String> {
    let mut result = Ok(());
    let mut table = None;
    for (m, &a) in maps.iter().zip(args) {
        if m.map_type & LITERAL != 0 || m.size == 0 {
            continue;
        }
        if m.map_type & PRIVATE != 0 {
            if copy_out && m.map_type & FROM != 0 {
                // SAFETY: the return slot is writable for `size` bytes.
                if let Err(e) = unsafe { dev.dev.copy_from_device(m.begin, a, m.size) } {
                    result = Err(e);
                }
            }
            // SAFETY: allocated by `private_in` for this call.
            unsafe { dev.dev.free(a) };
            continue;
        }
        let t = table.get_or_insert_with(|| dev.mapping.lock().unwrap_or_else(|p| p.into_inner()));
        // SAFETY: the caller guarantees the host range.
        if let Err(e) = unsafe {
            t.exit(
                &*dev.dev,
                m.begin as usize,
                m.size,
                m.map_type,
                RefKind::Structured,
                copy_out,
            )
        } {
            result = Err(e.to_string());
        }
    }
    result
}
