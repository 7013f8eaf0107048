//! A region call: choose the device, map the arguments, launch, unmap; or run the host fallback.
//!
//! The host runs a region only when it could not start on a device (no device, no image or kernel, a mapping
//! failure) or when asked to (`if(false)`, the initial device, `OMP_TARGET_OFFLOAD=DISABLED`). Once a kernel has
//! started, a failure is never retried on the host: its mappings are released without copying back and the call
//! fails.

use crate::data::enter_list;
use crate::device::{select, DeviceEntry, Host, Selection};
use crate::error::{Error, Location};
use crate::icv::{icv, Policy};
use crate::mapping::{MapError, Range, RefKind};
use crate::observe::{self, Label, Watch};
use crate::plugin::{Arg, LaunchParams};
use crate::tables::{entry_index, entry_symbol};
use crate::team::Launch;
use crate::DeviceCopy;
use offload_model::abi::map_type::{
    DEVICE_MEMORY, FROM, HOST_ATOMIC_SHIFT, IMPLICIT, LITERAL, PRIVATE, REDUCTION, TO,
};
use offload_model::fatbin::OffloadEntry;
use std::mem::{align_of, size_of, MaybeUninit};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// A region's static description, written by the macro.
pub struct RegionInfo {
    /// The region's identity, `crate::module::function`.
    pub name: &'static str,
    pub file: &'static str,
    pub line: u32,
    pub entry: &'static OffloadEntry,
}

/// One map-list entry as the host sees it: libomptarget's (base, begin, size, map type). `[begin, begin+size)` is
/// what is mapped (a section, or all of `[base, base+base_size)`); a region gets the device address of `base`. A
/// literal carries its kernel argument in `literal`.
#[derive(Clone, Copy, Debug)]
pub struct MapArg {
    pub begin: *mut u8,
    pub size: usize,
    pub map_type: u64,
    pub base: *mut u8,
    pub base_size: usize,
    /// The element type's alignment: a device copy must honour it (a `#[repr(align(128))]` element in a block
    /// aligned only for 64 bytes would make a misaligned slice).
    pub align: usize,
    pub literal: Arg,
}

impl MapArg {
    #[inline]
    pub fn literal(v: u64) -> Self {
        Self::literal_bits(Arg::new(v))
    }

    fn literal_bits(literal: Arg) -> Self {
        let null = std::ptr::null_mut();
        MapArg {
            begin: null,
            size: 0,
            map_type: LITERAL,
            base: null,
            base_size: 0,
            align: 1,
            literal,
        }
    }

    /// Atomic element data (see `DeviceCopy::HOST_ATOMIC`): flagged for atomic copies, and an implicit `to` map
    /// of a shared reference becomes `tofrom`, since the region writes through it.
    const fn with_atomics<T: DeviceCopy>(map_type: u64) -> u64 {
        if T::HOST_ATOMIC == 0 {
            return map_type;
        }
        let implicit_from = if map_type & IMPLICIT != 0 { FROM } else { 0 };
        map_type | implicit_from | (T::HOST_ATOMIC << HOST_ATOMIC_SHIFT)
    }

    #[inline]
    pub fn slice<T: DeviceCopy>(p: *const [T], map_type: u64) -> Self {
        let size = size_of::<T>() * p.len();
        let begin = p as *const T as *mut u8;
        MapArg {
            begin,
            size,
            map_type: Self::with_atomics::<T>(map_type),
            base: begin,
            base_size: size,
            align: align_of::<T>(),
            literal: Arg::uninit(),
        }
    }

    /// The section `[lo, hi)` of a slice; out-of-bounds sections panic, as slicing does.
    #[inline]
    #[track_caller]
    pub fn section<T: DeviceCopy>(p: *const [T], lo: usize, hi: usize, map_type: u64) -> Self {
        let len = p.len();
        if lo > hi || hi > len {
            panic!(
                "offload: map section [{lo}..{hi}] is out of bounds for a slice of length {len}"
            );
        }
        let base = p as *const T as *mut u8;
        let sz = size_of::<T>();
        // SAFETY: `lo <= len`, so the offset stays within (or one past) the slice.
        let begin = unsafe { base.add(lo * sz) };
        let map_type = Self::with_atomics::<T>(map_type);
        MapArg {
            begin,
            size: (hi - lo) * sz,
            map_type,
            base,
            base_size: len * sz,
            align: align_of::<T>(),
            literal: Arg::uninit(),
        }
    }

    #[inline]
    pub fn object<T: DeviceCopy>(p: *const T, map_type: u64) -> Self {
        Self::raw_object(p, Self::with_atomics::<T>(map_type))
    }

    fn raw_object<T>(p: *const T, map_type: u64) -> Self {
        MapArg {
            begin: p as *mut u8,
            size: size_of::<T>(),
            map_type,
            base: p as *mut u8,
            base_size: size_of::<T>(),
            align: align_of::<T>(),
            literal: Arg::uninit(),
        }
    }

    /// Device memory passed as is: its address, and the device it must run on.
    #[inline]
    pub fn device_ptr<T>(p: crate::DevicePtr<T>) -> Self {
        let mut m = Self::literal(p.addr());
        m.map_type |= DEVICE_MEMORY;
        m.base_size = p.device() as u32 as usize;
        m
    }

    /// A firstprivate value: its bits if it fits in 8 bytes, else a private device copy.
    ///
    /// # Safety
    /// `T` is `Firstprivate` (the expansion checks it separately, so a wrong type gets one error, not two).
    #[inline]
    pub unsafe fn value<T>(v: &T) -> Self {
        if size_of::<T>() <= 8 {
            // The value's bytes, padding (uninitialised) included: they travel as `Arg`, never read as a number.
            let mut bits = Arg::zeroed();
            // SAFETY: `T` fits in `bits`; `Firstprivate` types hold no pointers.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    v as *const T as *const u8,
                    bits.as_mut_ptr() as *mut u8,
                    size_of::<T>(),
                )
            };
            Self::literal_bits(bits)
        } else {
            Self::raw_object(v, TO | PRIVATE)
        }
    }

    /// A reduction's output: one slot of `R` per team, then the initial value; the runtime sizes it at launch.
    #[inline]
    pub fn reduction<R>() -> Self {
        let null = std::ptr::null_mut();
        let size = size_of::<R>();
        MapArg {
            begin: null,
            size,
            map_type: FROM | PRIVATE | REDUCTION,
            base: null,
            base_size: size,
            align: align_of::<R>(),
            literal: Arg::uninit(),
        }
    }

    /// The return slot, a private `from` copy.
    #[inline]
    pub fn ret<R>(slot: *mut MaybeUninit<R>) -> Self {
        Self::raw_object(slot as *mut R, FROM | PRIVATE)
    }

    pub(crate) fn range(&self) -> Range {
        Range {
            begin: self.begin as usize,
            size: self.size,
            base: self.base as usize,
            base_size: self.base_size,
            align: self.align,
        }
    }
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
    launch: Launch,
    maps: &[MapArg],
    ret: *mut MaybeUninit<R>,
    reduce: Option<fn(R, &[R]) -> R>,
    fallback: impl FnOnce() -> R,
) -> Result<R, Error> {
    let w = Watch::now();
    // SAFETY: forwarded from the caller.
    let why = match unsafe { run_on_device(w, region, launch, maps) } {
        // SAFETY: forwarded from the caller.
        Ok(reduced) => return Ok(unsafe { finish(reduced, reduce, ret) }),
        Err(NotRun::Failed(e)) => return Err(e),
        Err(NotRun::Host(why)) => why,
    };
    if let Host::Unavailable(r) = &why {
        if icv().policy == Policy::Mandatory {
            return Err(Error::Mandatory {
                region: region.name,
                reason: r.to_string(),
            });
        }
    }
    match observe::fallback(w, region, why.reason(), launch, || {
        catch_unwind(AssertUnwindSafe(fallback))
    }) {
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

pub(crate) fn panic_message(p: &(dyn std::any::Any + Send)) -> &str {
    p.downcast_ref::<&str>()
        .copied()
        .or_else(|| p.downcast_ref::<String>().map(|s| s.as_str()))
        .unwrap_or("(non-string panic)")
}

/// Runs a region that takes device memory: on its device, or not at all (no host fallback: the host cannot
/// dereference device memory).
///
/// # Safety
/// As [`target`].
pub unsafe fn target_on_device<R>(
    region: &'static RegionInfo,
    launch: Launch,
    maps: &[MapArg],
    ret: *mut MaybeUninit<R>,
    reduce: Option<fn(R, &[R]) -> R>,
) -> Result<R, Error> {
    // SAFETY: forwarded from the caller.
    match unsafe { run_on_device(Watch::now(), region, launch, maps) } {
        // SAFETY: forwarded from the caller.
        Ok(reduced) => Ok(unsafe { finish(reduced, reduce, ret) }),
        Err(NotRun::Failed(e)) => Err(e),
        Err(NotRun::Host(why)) => Err(Error::DeviceRequired {
            region: region.name,
            reason: why.reason().to_string(),
        }),
    }
}

/// Runs a region that takes device memory and has a host body: when all its device memory is the initial device's
/// (host memory), as [`target`] does, so it runs on the host where the host is chosen (`DISABLED`, the initial
/// device as the default device or in `device(..)`), as clang runs an `is_device_ptr` region's host version; else as
/// [`target_on_device`]. (The `#[target]` expansion calls [`target_on_device`] until it emits host bodies for such
/// regions.)
///
/// # Safety
/// As [`target`].
pub unsafe fn target_device_memory<R>(
    region: &'static RegionInfo,
    launch: Launch,
    maps: &[MapArg],
    ret: *mut MaybeUninit<R>,
    reduce: Option<fn(R, &[R]) -> R>,
    fallback: impl FnOnce() -> R,
) -> Result<R, Error> {
    let initial = crate::api::omp_get_initial_device();
    let host_memory = maps
        .iter()
        .filter(|m| m.map_type & DEVICE_MEMORY != 0)
        .all(|m| {
            let d = m.base_size as u32 as i32;
            d == initial || d == crate::api::OMP_INITIAL_DEVICE
        });
    if host_memory {
        // Host memory: the region runs on the host, by request (no other device could use it).
        let launch = Launch {
            device: Some(initial),
            ..launch
        };
        // SAFETY: forwarded from the caller.
        unsafe { target(region, launch, maps, ret, reduce, fallback) }
    } else {
        // SAFETY: forwarded from the caller.
        unsafe { target_on_device(region, launch, maps, ret, reduce) }
    }
}

/// A region's value after a device run: the reduction of the teams' partials and the initial value, or the return
/// slot.
///
/// # Safety
/// `reduced` holds what the device wrote for a reduction region, `ret` the return slot otherwise.
unsafe fn finish<R>(
    reduced: Vec<u8>,
    reduce: Option<fn(R, &[R]) -> R>,
    ret: *mut MaybeUninit<R>,
) -> R {
    match reduce {
        Some(fold) => {
            let n = reduced.len() / size_of::<R>().max(1);
            // SAFETY: `reduced` holds `n` values of `R` (the teams' partials, then the initial value), each written
            // by the device; the byte buffer need not be aligned for `R`.
            let at = |k: usize| unsafe {
                std::ptr::read_unaligned((reduced.as_ptr() as *const R).add(k))
            };
            let partials: Vec<R> = (0..n - 1).map(at).collect();
            fold(at(n - 1), &partials)
        }
        // SAFETY: the kernel wrote the return slot (or `R` is `()`).
        None => unsafe { (*ret).assume_init_read() },
    }
}

/// Panics with a region failure (`saxpy` calls this when `try_saxpy` fails).
#[cold]
#[track_caller]
pub fn fail(e: Error) -> ! {
    panic!("{e}")
}

/// Whether any mapped argument of `maps` has data present on `dev`: its current copy may live there, so the host
/// fallback, which computes on the host copy, must not run (the data region's exit would overwrite its result).
fn present_on(dev: &DeviceEntry, maps: &[MapArg]) -> bool {
    let t = dev.table();
    maps.iter()
        .filter(|m| m.map_type & (LITERAL | PRIVATE) == 0 && m.base_size > 0)
        .any(|m| {
            let r = m.range();
            t.intersects(
                r.base.min(r.begin),
                (r.base + r.base_size).max(r.begin + r.size),
            )
        })
}

/// The geometry a launch on `dev` gets: the clauses' values are upper bounds (OpenMP lets the implementation run
/// fewer teams and threads), clamped to the device's maxima.
fn device_geometry(launch: Launch, dev: &DeviceEntry) -> (u32, u32) {
    let max_teams = dev.dev.max_teams().max(1);
    let clamped = Launch {
        num_teams: launch.num_teams.map(|t| t.min(max_teams)),
        ..launch
    };
    let (teams, threads) = clamped.geometry(
        dev.dev.default_geometry(launch.spmd || launch.one_team),
        dev.dev.max_threads(),
    );
    (teams.min(max_teams), threads)
}

unsafe fn run_on_device(
    w: Watch,
    region: &'static RegionInfo,
    launch: Launch,
    maps: &[MapArg],
) -> Result<Vec<u8>, NotRun> {
    let host = |h| Err(NotRun::Host(h));
    let dev = match select(launch.device, launch.cond) {
        Selection::Device(dev) => dev,
        Selection::Host(h) => return host(h),
    };
    let d = dev.number;
    if let Some(m) = maps
        .iter()
        .find(|m| m.map_type & DEVICE_MEMORY != 0 && m.base_size as u32 as i32 != d)
    {
        return Err(NotRun::Failed(Error::DeviceRequired {
            region: region.name,
            reason: format!(
                "it takes memory of device {} but was to run on device {d}",
                m.base_size as u32 as i32
            ),
        }));
    }
    // The region could not start on the device: the host may run it only if none of its data lives there.
    let could_not_start = |reason: String| {
        if present_on(dev, maps) {
            Err(NotRun::Failed(Error::Mapping {
                what: format!("region {}", region.name),
                device: d,
                plugin: dev.plugin,
                message: format!(
                    "{reason}; some of its data is present on the device, so the host fallback, which would compute \
                     on the host's stale copy, does not run"
                ),
            }))
        } else {
            host(Host::Unavailable(reason.into()))
        }
    };
    let Some(kernel) = dev.kernel(entry_index(region.entry)) else {
        return could_not_start(format!(
            "no image loaded on device {d} ({}) has the kernel {}",
            dev.plugin,
            entry_symbol(region.entry).to_string_lossy()
        ));
    };
    let (num_teams, num_threads) = device_geometry(launch, dev);
    let too_big = |what: &str| {
        Err(NotRun::Failed(Error::Mapping {
            what: format!("region {}", region.name),
            device: d,
            plugin: dev.plugin,
            message: format!("{what} for {num_teams} teams of {num_threads} threads overflows"),
        }))
    };
    // A reduction's output holds a slot per team and the initial value, copied back into `reduced`. Teams are
    // clamped to the device's maximum (no more than run at once, in a few waves), so this stays small.
    let mut reduced = Vec::new();
    let mut team_shared = if launch.spmd {
        offload_model::abi::TEAM_SHARED_BYTES
    } else {
        0
    };
    let mut owned;
    let maps = match maps.iter().position(|m| m.map_type & REDUCTION != 0) {
        None => maps,
        Some(k) => {
            let Some(bytes) = (num_teams as usize)
                .checked_add(1)
                .and_then(|n| n.checked_mul(maps[k].size))
            else {
                return too_big("the reduction's partial results");
            };
            reduced = vec![0u8; bytes];
            // A slot per thread for its partial, and one for the initial value (GPUs have no thread-locals).
            let Some(slots) = (num_threads as usize)
                .checked_add(1)
                .and_then(|n| n.checked_mul(offload_model::reduce::slot_bytes(maps[k].size)))
            else {
                return too_big("the reduction's team-shared slots");
            };
            team_shared = team_shared.max(slots);
            owned = maps.to_vec();
            let m = &mut owned[k];
            (m.begin, m.base) = (reduced.as_mut_ptr(), reduced.as_mut_ptr());
            (m.size, m.base_size) = (reduced.len(), reduced.len());
            &owned[..]
        }
    };
    let _scope = w.scope(Label::Region(region.name), dev);
    // SAFETY: forwarded from the caller. The guard releases the mappings without copying back on every way out,
    // a panic in the plugin or the launch included.
    let mapped = match unsafe { enter_list(dev, maps, RefKind::Structured) } {
        Ok(g) => g,
        // `present` and extension violations are errors under every policy; a device that cannot allocate or
        // copy is one the region could not start on.
        Err(e @ MapError::Device(_)) => {
            return could_not_start(format!("mapping the arguments on device {d} failed: {e}"))
        }
        Err(e) => {
            return Err(NotRun::Failed(Error::Mapping {
                what: format!("region {}", region.name),
                device: d,
                plugin: dev.plugin,
                message: e.to_string(),
            }))
        }
    };
    let params = LaunchParams {
        num_teams,
        num_threads,
        team_shared,
    };
    let launched = observe::launch(w, region, dev, launch, params, || {
        // SAFETY: the kernel came from this device and the arguments follow the region's calling convention.
        unsafe { dev.dev.launch(kernel, &mapped.args, params) }
    });
    let ok = launched.is_ok();
    // SAFETY: forwarded from the caller; nothing is copied back after a failure.
    let unmapped = unsafe { mapped.exit(ok) };
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
        (Ok(()), Ok(())) => Ok(reduced),
        (Err(f), _) => {
            if f.device_lost {
                dev.mark_lost();
            }
            failed(f.message, f.location)
        }
        (Ok(()), Err(e)) => failed(format!("copying results back failed: {e}"), None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Padded {
        tag: u8,
        value: u32,
    }

    /// Under Miri: building a literal from a value with padding reads no uninitialised byte as a number.
    #[test]
    fn small_values_with_padding_become_literals_without_reading_padding() {
        let p = Padded { tag: 7, value: 42 };
        // SAFETY: `Padded` is plain data.
        let m = unsafe { MapArg::value(&p) };
        assert_eq!(m.map_type, LITERAL);
        // The initialised bytes are the value's fields.
        let bytes = m.literal.as_ptr() as *const u8;
        // SAFETY: bytes 0 and 4..8 were copied from initialised fields.
        let (tag, value) = unsafe { (*bytes, (bytes.add(4) as *const u32).read_unaligned()) };
        assert_eq!((tag, value), (7, 42));
        assert_eq!(p.tag + p.value as u8, 49);
    }
}
