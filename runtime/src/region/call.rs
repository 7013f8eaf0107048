//! A region call: choose the device, map the arguments, launch, unmap; or run the host fallback.
//!
//! The host runs a region only when it could not start on a device (no device, no image or kernel, a mapping
//! failure) or when asked to (`if(false)`, the initial device, `OMP_TARGET_OFFLOAD=DISABLED`). Once a kernel has
//! started, a failure is never retried on the host: its mappings are released without copying back and the call
//! fails.

use super::error::{Error, Location};
use super::maplist::{enter_list, MapArg};
use super::on_llvm;
use crate::device::directory::Directory;
use crate::device::llvm::{Launched, Libomptarget};
use crate::device::present::writes_device;
use crate::device::{
    initial_device, is_initial, select, DeviceEntry, Host, LoadedKernel, MapError, RefKind,
    Selection,
};
use crate::env::{icv, Policy};
use crate::host::geometry::{host_limits, Launch};
use crate::host::panic::{no_threads, panic_message};
use crate::observe::{self, Label, LaunchName, Watch};
use crate::plugin::{LaunchParams, PluginError};
use crate::registry::{entry_index, entry_symbol};
use offload_model::abi::map_type::{DEVICE_MEMORY, HOST_ATOMIC_MASK, LITERAL, PRIVATE, REDUCTION};
use offload_model::fatbin::OffloadEntry;
use std::any::TypeId;
use std::mem::{size_of, MaybeUninit};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// A region's static description, written by the macro.
pub struct RegionInfo {
    /// The region's identity, `crate::module::function`.
    pub name: &'static str,
    /// The source file of the `#[target]` function (`file!()`).
    pub file: &'static str,
    /// Its line (`line!()`).
    pub line: u32,
    /// Its offload entry in `OFFLOAD_ENTRIES`, by which devices look up its kernel.
    pub entry: &'static OffloadEntry,
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
    run_host(w, region.name, why, launch, maps, fallback)
}

/// The host ranges a map-list entry's region can reach through host data (its whole slice), and whether it may write
/// them; `None` for what is not host data of the caller's (literals, private copies, device memory, atomics, which
/// are used in place).
fn host_data(m: &MapArg) -> Option<((usize, usize), bool)> {
    let data = m.map_type & (LITERAL | PRIVATE | HOST_ATOMIC_MASK) == 0 && m.base_size > 0;
    data.then(|| {
        let r = m.range();
        let lo = r.base.min(r.begin);
        let hi = (r.base + r.base_size).max(r.begin + r.size);
        ((lo, hi), writes_device(m.map_type))
    })
}

/// The host fallback of a region that did not run on a device, for `why`: an error under `MANDATORY` when the
/// region could not start on a device, or where a device's copy of its data may be newer than the host's (the
/// fallback computes on the host's: see `device::directory`); else the fallback, observed, after which the
/// devices' copies of what it may have written are stale.
fn run_host<R>(
    w: Watch,
    name: &'static str,
    why: Host,
    launch: Launch,
    maps: &[MapArg],
    fallback: impl FnOnce() -> R,
) -> Result<R, Error> {
    if let Host::Unavailable(r) = &why {
        if icv().policy == Policy::Mandatory {
            return Err(Error::Mandatory {
                region: name,
                reason: r.to_string(),
            });
        }
    }
    let dir = Directory::global();
    // No device copy anywhere (the common fallback): nothing to ask or to make stale.
    let copies = !dir.is_empty();
    for ((lo, hi), _) in maps.iter().filter(|_| copies).filter_map(host_data) {
        if let Some(h) = dir.newer(None, lo, hi) {
            return Err(Error::Mapping {
                what: format!("region {name}"),
                device: initial_device(),
                plugin: "host-fallback",
                message: format!(
                    "the host fallback would compute on the host's copy: {}",
                    MapError::stale(lo, hi, h)
                ),
            });
        }
    }
    let limits = host_limits();
    let note = || launch.reduced(launch.geometry(&limits), limits.why);
    let ran = observe::fallback(w, name, why.reason(), note, || {
        catch_unwind(AssertUnwindSafe(fallback))
    });
    // Even a panicking fallback may have written some of its data.
    for ((lo, hi), writes) in maps
        .iter()
        .filter(|_| copies || !dir.is_empty())
        .filter_map(host_data)
    {
        if writes {
            dir.host_writes(lo, hi);
        }
    }
    match ran {
        Ok(r) => Ok(r),
        Err(payload) => match no_threads(&*payload) {
            // Threads the region needed could not start: an error of the call, not a panic of the region.
            Some(e) => Err(Error::HostThreads {
                region: name,
                source: e.clone(),
            }),
            None => panic!(
                "offload: region {} panicked in the host fallback: {}",
                name,
                panic_message(&*payload)
            ),
        },
    }
}

/// One kernel of a generic region: the key of its argument list ([`instance_key`]) and its region.
pub type Instance = (fn() -> TypeId, &'static RegionInfo);

/// A generic region's kernels, one per `instantiate(..)` list, written by the macro.
pub struct GenericRegion {
    /// The region's identity without arguments, `crate::module::triad`.
    pub name: &'static str,
    /// Its `instantiate(..)` lists as written, for the message of a call with other arguments (`f32, f64`).
    pub listed: &'static str,
    /// Each list's key (`typeid::of` of the tuple of its arguments) and region.
    pub instances: &'static [Instance],
}

impl GenericRegion {
    /// The instance whose arguments have the key `key`: a `TypeId`, so two types never share a kernel (a type's
    /// name alone could).
    pub fn find(&self, key: TypeId) -> Option<&'static RegionInfo> {
        self.instances
            .iter()
            .find(|(k, _)| k() == key)
            .map(|(_, r)| *r)
    }
}

/// The key of a generic region's argument list: `typeid::of` the tuple of its types (a const argument as its marker
/// type), which, unlike `TypeId::of`, needs no `'static` bound a generic caller would have to repeat. Types that
/// differ only in lifetimes share a key, and a kernel: lifetimes do not change code.
pub fn instance_key<T: ?Sized>() -> TypeId {
    typeid::of::<T>()
}

/// Runs a generic region called with arguments `instantiate(..)` did not list: there is no kernel for them, so the
/// host runs it (an error under `MANDATORY`), with `args` (`T = i32`) in the reason.
///
/// # Safety
/// As [`target`] (the map list is only read, to find data present on the device).
pub unsafe fn target_without_kernel<R>(
    generic: &'static GenericRegion,
    args: impl FnOnce() -> String,
    launch: Launch,
    maps: &[MapArg],
    fallback: impl FnOnce() -> R,
) -> Result<R, Error> {
    let w = Watch::now();
    let short = generic.name.rsplit("::").next().unwrap_or(generic.name);
    let why = match select(launch.device, launch.cond) {
        Selection::Host(h) => h,
        // libomptarget holds no data of a host run's concern here: the host runs it, as with our devices.
        Selection::Llvm(..) => Host::Unavailable(
            format!(
                "region `{short}` has no kernel for `{}`: its `instantiate(..)` lists {}",
                args(),
                generic.listed
            )
            .into(),
        ),
        Selection::Device(dev) => {
            let reason = format!(
                "region `{short}` has no kernel for `{}`: its `instantiate(..)` lists {}",
                args(),
                generic.listed
            );
            if maps.iter().any(|m| m.map_type & DEVICE_MEMORY != 0) {
                return Err(Error::DeviceRequired {
                    region: generic.name,
                    reason,
                });
            }
            match could_not_start(generic.name, dev, maps, reason) {
                NotRun::Host(h) => h,
                NotRun::Failed(e) => return Err(e),
            }
        }
    };
    run_host(w, generic.name, why, launch, maps, fallback)
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
    let host_memory = maps
        .iter()
        .filter_map(MapArg::memory_device)
        .all(is_initial);
    if host_memory {
        // Host memory: the region runs on the host, by request (no other device could use it).
        let launch = Launch {
            device: Some(initial_device()),
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
    // In an MPI job, which rank failed: its log lines are interleaved with the others'.
    match crate::env::icv().rank {
        Some(r) => panic!("rank {} ({}): {e}", r.rank, r.var),
        None => panic!("{e}"),
    }
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

/// A region's run on a device: the device's loaded kernel for it, the arguments mapped in, the launch, the arguments
/// mapped out (or released without copying back after a failure). `Ok` holds what a reduction region's teams wrote.
///
/// # Safety
/// As [`target`].
unsafe fn run_on_device(
    w: Watch,
    region: &'static RegionInfo,
    launch: Launch,
    maps: &[MapArg],
) -> Result<Vec<u8>, NotRun> {
    let dev = match select(launch.device, launch.cond) {
        Selection::Device(dev) => dev,
        // SAFETY: forwarded from the caller.
        Selection::Llvm(lib, d) => return unsafe { run_on_llvm(w, region, launch, maps, lib, d) },
        Selection::Host(h) => return Err(NotRun::Host(h)),
    };
    let kernel = loaded_kernel(region, dev, maps)?;
    let (num_teams, num_threads) = kernel.geometry(launch);
    let out = Outputs::new(
        region,
        (dev.number, dev.plugin),
        launch,
        maps,
        num_teams,
        num_threads,
    )?;
    let _scope = w.scope(Label::Region(region.name), dev.number, dev.plugin);
    // SAFETY: forwarded from the caller. The guard releases the mappings without copying back on every way out,
    // a panic in the plugin or the launch included.
    let mapped = unsafe { enter_list(dev, out.maps(maps), RefKind::Region) }
        .map_err(|e| not_mapped(region, dev, maps, e))?;
    let params = LaunchParams {
        num_teams,
        num_threads,
        team_shared: out.team_shared,
    };
    // SAFETY: the kernel came from this device and the arguments follow the region's calling convention.
    let launched =
        unsafe { kernel.launch(w, (region.name, region.entry), launch, &mapped.args, params) };
    // SAFETY: forwarded from the caller; nothing is copied back after a failure.
    let unmapped = unsafe { mapped.exit(launched.is_ok()) };
    ran(region, dev, launched, unmapped)?;
    Ok(out.reduced)
}

/// A region's run on a device of LLVM's libomptarget (`OFFLOAD_RUNTIME=llvm`), which maps the arguments in its
/// present table and launches the kernel (see `on_llvm`).
///
/// # Safety
/// As [`target`].
unsafe fn run_on_llvm(
    w: Watch,
    region: &'static RegionInfo,
    launch: Launch,
    maps: &[MapArg],
    lib: &'static Libomptarget,
    d: i32,
) -> Result<Vec<u8>, NotRun> {
    // A `DevicePtr` from libomptarget's `omp_target_alloc` is passed as is (our `DeviceBuffer`s are not made for
    // its devices).
    memory_elsewhere(region, maps, d)?;
    if let Some(why) = on_llvm::unsupported(maps) {
        return Err(NotRun::Failed(on_llvm::unsupported_error(
            region.name,
            d,
            why,
        )));
    }
    // `present` violations are errors under every policy (libomptarget would abort the process).
    if let Some(e) = on_llvm::not_present(lib, d, maps) {
        return Err(NotRun::Failed(Error::Mapping {
            what: format!("region {}", region.name),
            device: d,
            plugin: "llvm",
            message: e.to_string(),
        }));
    }
    if let Some(message) = on_llvm::extends_present(lib, d, maps, true) {
        return Err(NotRun::Failed(Error::Mapping {
            what: format!("region {}", region.name),
            device: d,
            plugin: "llvm",
            message,
        }));
    }
    // Its host plugin's device is the host, as host-elf's is: the same geometry. A GPU plugin's takes our GPU
    // plugins' defaults and limits.
    let limits = lib.limits(d);
    let (num_teams, num_threads) = launch.geometry(&limits);
    let out = Outputs::new(region, (d, "llvm"), launch, maps, num_teams, num_threads)?;
    let _scope = w.scope(Label::Region(region.name), d, "llvm");
    let name = || LaunchName {
        region: region.name,
        entry: entry_symbol(region.entry),
        device: d,
        plugin: "llvm",
        teams: num_teams,
        threads: num_threads,
        team_shared: out.team_shared,
    };
    let geometry = (num_teams, num_threads, out.team_shared);
    // SAFETY: forwarded from the caller.
    let launched = observe::launch(
        w,
        name,
        || launch.reduced((num_teams, num_threads), limits.why),
        || unsafe { on_llvm::launch(lib, d, region.entry, out.maps(maps), geometry) },
    );
    match launched {
        Ok(()) => Ok(out.reduced),
        // libomptarget did not run it (its own failures after a start stop the process): the host may.
        // Not with data present there: the fallback would compute on the host's stale copy.
        Err(e @ Launched::NotRun(_)) if on_llvm::any_present(lib, d, maps) => {
            Err(NotRun::Failed(Error::Mapping {
                what: format!("region {}", region.name),
                device: d,
                plugin: "llvm",
                message: format!(
                    "{e}; some of its data is present on the device, so the host fallback, which would compute \
                     on the host's stale copy, does not run"
                ),
            }))
        }
        Err(e @ Launched::NotRun(_)) => Err(NotRun::Host(Host::Unavailable(e.to_string().into()))),
        Err(Launched::Busy(why)) => Err(NotRun::Failed(Error::Mapping {
            what: format!("region {}", region.name),
            device: d,
            plugin: "llvm",
            message: why,
        })),
        Err(Launched::Refused(why)) => Err(NotRun::Failed(on_llvm::unsupported_error(
            region.name,
            d,
            &why,
        ))),
        // It failed while it ran: libomptarget released the arguments without copying back.
        Err(Launched::Failed(f)) => Err(NotRun::Failed(Error::RegionFailed {
            region: region.name,
            device: d,
            plugin: "llvm",
            message: f.to_string(),
            location: Location {
                place: f.location().cloned(),
                thread: f.thread(),
            },
        })),
    }
}

/// An error when the region takes device memory of a device other than `d`: device memory is passed as is, so only
/// to a region on its own device.
fn memory_elsewhere(region: &'static RegionInfo, maps: &[MapArg], d: i32) -> Result<(), NotRun> {
    match maps
        .iter()
        .filter_map(MapArg::memory_device)
        .find(|&m| m != d)
    {
        Some(other) => Err(NotRun::Failed(Error::DeviceRequired {
            region: region.name,
            reason: format!("it takes memory of device {other} but was to run on device {d}"),
        })),
        None => Ok(()),
    }
}

/// The kernel for the region on `dev` (its images loaded on first use); else why not: the host runs it, or the call
/// fails.
fn loaded_kernel(
    region: &'static RegionInfo,
    dev: &'static DeviceEntry,
    maps: &[MapArg],
) -> Result<LoadedKernel<'static>, NotRun> {
    let d = dev.number;
    memory_elsewhere(region, maps, d)?;
    let Some(kernel) = dev.kernel(entry_index(region.entry)) else {
        return Err(could_not_start(
            region.name,
            dev,
            maps,
            format!(
                "no image loaded on device {d} ({}) has the kernel {}{}",
                dev.plugin,
                entry_symbol(region.entry).to_string_lossy(),
                offload_model::device_kind::DeviceKind::ALL
                    .into_iter()
                    .find(|k| k.plugin() == dev.plugin)
                    .map_or(String::new(), |k| format!(
                        " (the program is built for the `{k}` target when OFFLOAD_TARGETS or \
                         [package.metadata.offload] targets lists it)"
                    ))
            ),
        ));
    };
    Ok(kernel)
}

/// Region `region` could not start on the device, for `reason`: the host may run it only if none of its data lives
/// there.
fn could_not_start(
    region: &'static str,
    dev: &DeviceEntry,
    maps: &[MapArg],
    reason: String,
) -> NotRun {
    if present_on(dev, maps) {
        NotRun::Failed(mapping_error(
            region,
            dev,
            format!(
                "{reason}; some of its data is present on the device, so the host fallback, which would compute on \
                 the host's stale copy, does not run"
            ),
        ))
    } else {
        NotRun::Host(Host::Unavailable(reason.into()))
    }
}

/// A mapping error of a call of region `region` on `dev`.
fn mapping_error(region: &'static str, dev: &DeviceEntry, message: String) -> Error {
    Error::Mapping {
        what: format!("region {region}"),
        device: dev.number,
        plugin: dev.plugin,
        message,
    }
}

/// What a launch writes besides the mapped data, and its team-shared memory: a reduction's output holds a slot per
/// team and the initial value, copied back into `reduced` (the map list's reduction entry is redirected to it),
/// and a small value a slot per thread in team-shared memory; a `teams, parallel` region gets its team-shared block.
struct Outputs {
    reduced: Vec<u8>,
    team_shared: usize,
    /// The map list with its reduction entry pointing at `reduced`, for a reduction region.
    redirected: Option<Vec<MapArg>>,
}

impl Outputs {
    fn new(
        region: &'static RegionInfo,
        (device, plugin): (i32, &'static str),
        launch: Launch,
        maps: &[MapArg],
        num_teams: u32,
        num_threads: u32,
    ) -> Result<Outputs, NotRun> {
        let too_big = |what: &str| {
            NotRun::Failed(Error::Mapping {
                what: format!("region {}", region.name),
                device,
                plugin,
                message: format!("{what} for {num_teams} teams of {num_threads} threads overflows"),
            })
        };
        let mut out = Outputs {
            reduced: Vec::new(),
            team_shared: if launch.construct.is_spmd() {
                offload_model::abi::TEAM_SHARED_BYTES
            } else {
                0
            },
            redirected: None,
        };
        let Some(k) = maps.iter().position(|m| m.map_type & REDUCTION != 0) else {
            return Ok(out);
        };
        // Teams are clamped to the device's maximum (no more than run at once, in a few waves), so this stays small.
        let bytes = (num_teams as usize)
            .checked_add(1)
            .and_then(|n| n.checked_mul(maps[k].size))
            .ok_or_else(|| too_big("the reduction's partial results"))?;
        // A small value: a slot per thread for its partial, and one for the initial value (GPUs have no
        // thread-locals). A larger one goes through the team's output slot alone.
        if offload_model::reduce::is_small(maps[k].size) {
            let slots = (num_threads as usize)
                .checked_add(1)
                .and_then(|n| n.checked_mul(offload_model::reduce::slot_bytes(maps[k].size)))
                .ok_or_else(|| too_big("the reduction's team-shared slots"))?;
            out.team_shared = out.team_shared.max(slots);
        }
        out.reduced = vec![0u8; bytes];
        let mut redirected = maps.to_vec();
        let m = &mut redirected[k];
        (m.begin, m.base) = (out.reduced.as_mut_ptr(), out.reduced.as_mut_ptr());
        (m.size, m.base_size) = (out.reduced.len(), out.reduced.len());
        out.redirected = Some(redirected);
        Ok(out)
    }

    /// The map list the launch uses: `maps`, or its redirected copy.
    fn maps<'a>(&'a self, maps: &'a [MapArg]) -> &'a [MapArg] {
        self.redirected.as_deref().unwrap_or(maps)
    }
}

/// Why the region's arguments (`maps`, as the call lists them) could not be mapped in on `dev`: `present` and
/// extension violations are errors under every policy; a device that cannot allocate or copy is one the region
/// could not start on.
fn not_mapped(
    region: &'static RegionInfo,
    dev: &DeviceEntry,
    maps: &[MapArg],
    e: MapError,
) -> NotRun {
    match e {
        MapError::Device(_) | MapError::AtomicsNotShared { .. } => could_not_start(
            region.name,
            dev,
            maps,
            format!("mapping the arguments on device {} failed: {e}", dev.number),
        ),
        e => NotRun::Failed(mapping_error(region.name, dev, e.to_string())),
    }
}

/// The call's outcome once the kernel has run (`launched`) and the arguments were mapped out (`unmapped`): a failed
/// kernel is the region's failure (and a lost device is marked so), else a failed copy back is.
fn ran(
    region: &'static RegionInfo,
    dev: &DeviceEntry,
    launched: Result<(), PluginError>,
    unmapped: Result<(), MapError>,
) -> Result<(), NotRun> {
    let failed = |message: String, location: Location| {
        Err(NotRun::Failed(Error::RegionFailed {
            region: region.name,
            device: dev.number,
            plugin: dev.plugin,
            message,
            location,
        }))
    };
    match (launched, unmapped) {
        (Ok(()), Ok(())) => Ok(()),
        (Err(f), _) => {
            if f.device_lost() {
                dev.mark_lost();
            }
            let location = Location {
                place: f.location().cloned(),
                thread: f.thread(),
            };
            failed(f.to_string(), location)
        }
        (Ok(()), Err(e)) => failed(
            format!("copying results back failed: {e}"),
            Location::default(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::geometry::hardware_threads;
    use crate::host::pool::refuse_spawns_after;
    use crate::host::run_fallback;

    static ENTRY: OffloadEntry = OffloadEntry::kernel(std::ptr::null(), b"__never_loaded\0", 0);
    static REGION: RegionInfo = RegionInfo {
        name: "tests::wide",
        file: file!(),
        line: line!(),
        entry: &ENTRY,
    };

    /// Under Miri too: no thread is started.
    #[test]
    fn a_fallback_that_cannot_start_its_threads_is_an_error_of_the_call() {
        if hardware_threads() < 2 {
            eprintln_whole!(
                "note: one hardware thread: a two-team fallback needs no pool thread; not checked"
            );
            return;
        }
        // Two teams of one thread: one pool thread besides the caller. `if(false)` picks the host.
        let launch = Launch {
            cond: false,
            construct: offload_model::abi::Construct::TeamsDistributeParallelFor,
            num_teams: Some(2),
            ..Launch::default()
        };
        let call = || {
            let mut slot = MaybeUninit::<()>::uninit();
            // SAFETY: no map list; the return slot is a `()`.
            unsafe {
                target(&REGION, launch, &[], &mut slot, None, || {
                    // What the expansion's fallback closure does.
                    match run_fallback(launch, &|| ()) {
                        Ok(r) => r,
                        Err(m) => panic!("{m}"),
                    }
                })
            }
        };
        refuse_spawns_after(Some(0));
        let r = call();
        refuse_spawns_after(None);
        match r {
            Err(
                e @ Error::HostThreads {
                    region: "tests::wide",
                    ..
                },
            ) => assert!(
                e.to_string().contains(
                    "region tests::wide could not run its host fallback: cannot start a host thread"
                ),
                "{e}"
            ),
            other => panic!("{other:?}"),
        }
    }
}
