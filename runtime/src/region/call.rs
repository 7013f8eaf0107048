//! A region call: choose the device, map the arguments, launch, unmap; or run the host fallback.
//!
//! The host runs a region only when it could not start on a device (no device, no image or kernel, a mapping
//! failure) or when asked to (`if(false)`, the initial device, `OMP_TARGET_OFFLOAD=DISABLED`). Once a kernel has
//! started, a failure is never retried on the host: its mappings are released without copying back and the call
//! fails.

use super::backend;
use super::error::Error;
use super::maplist::MapArg;
use super::run::NotRun;
use crate::device::directory::Directory;
use crate::device::present::writes_device;
use crate::device::{initial_device, is_initial, select, Host, MapError, Selection};
use crate::env::{icv, Policy};
use crate::host::geometry::{host_limits, Launch};
use crate::host::panic::{no_threads, panic_message};
use crate::observe::{self, Watch};
use offload_model::abi::map_type::{HOST_ATOMIC_MASK, LITERAL, PRIVATE};
use std::any::TypeId;
use std::mem::{size_of, MaybeUninit};
use std::panic::{catch_unwind, AssertUnwindSafe};

pub use super::run::RegionInfo;

/// A region call, as the macro's expansion makes it: the one request the runtime takes ([`call`]).
pub struct Call<'a, R> {
    /// The kernel that runs it on a device.
    pub kernel: Callee<'a>,
    /// The construct, `device`/`if` clauses and geometry.
    pub launch: Launch,
    /// The map list, in the kernel ABI's order, each entry naming its variable and line.
    pub maps: &'a [MapArg],
    /// The slot the map list's return entry points at (if the region returns a value).
    pub ret: *mut MaybeUninit<R>,
    /// A reduction region's combination of the teams' partials and the initial value.
    pub reduce: Option<fn(R, &[R]) -> R>,
    /// The region takes device memory (`DevicePtr`, `&DeviceBuffer`): it runs on that memory's device, or on the
    /// host where it is the initial device's (host memory, as clang runs an `is_device_ptr` region's host version),
    /// never in a fallback elsewhere, since the host cannot reach a device's memory.
    pub device_memory: bool,
}

/// Which kernel a call runs.
pub enum Callee<'a> {
    /// The region's.
    Of(&'static RegionInfo),
    /// None: a generic region called with arguments (`args`, as `T = i32`) its `instantiate(..)` did not list, so
    /// the host runs it (an error under `MANDATORY`).
    Missing {
        /// The generic region.
        generic: &'static GenericRegion,
        /// Its arguments in this call.
        args: &'a dyn Fn() -> String,
    },
}

/// Runs a region call: on a device, or in `fallback` on the host where the rules say (see the module's doc).
///
/// # Safety
/// Every non-literal `MapArg` describes memory valid for its size (writable if `FROM`) until the call returns, and
/// `ret` is the slot the map list's return entry points at (if the region returns a value).
pub unsafe fn call<R>(c: Call<'_, R>, fallback: impl FnOnce() -> R) -> Result<R, Error> {
    let region = match c.kernel {
        Callee::Of(region) => region,
        // SAFETY: forwarded from the caller.
        Callee::Missing { generic, args } => {
            return unsafe { without_kernel(generic, args, &c, fallback) }
        }
    };
    if !c.device_memory {
        // SAFETY: forwarded from the caller.
        return unsafe { target(region, c.launch, c.maps, c.ret, c.reduce, fallback) };
    }
    let host_memory = c
        .maps
        .iter()
        .filter_map(MapArg::memory_device)
        .all(is_initial);
    if host_memory {
        // Host memory: the region runs on the host, by request (no other device could use it).
        let launch = Launch {
            device: Some(initial_device()),
            ..c.launch
        };
        // SAFETY: forwarded from the caller.
        unsafe { target(region, launch, c.maps, c.ret, c.reduce, fallback) }
    } else {
        // SAFETY: forwarded from the caller.
        unsafe { on_device_only(region, &c) }
    }
}

/// Runs a region on a device, or on the host if it could not start on one.
///
/// # Safety
/// As [`call`].
unsafe fn target<R>(
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
/// As [`call`] (the map list is only read, to find data present on the device).
unsafe fn without_kernel<R>(
    generic: &'static GenericRegion,
    args: &dyn Fn() -> String,
    c: &Call<'_, R>,
    fallback: impl FnOnce() -> R,
) -> Result<R, Error> {
    let w = Watch::now();
    let short = generic.name.rsplit("::").next().unwrap_or(generic.name);
    let why = match select(c.launch.device, c.launch.cond) {
        Selection::Host(h) => h,
        Selection::Device(t) => {
            let reason = format!(
                "region `{short}` has no kernel for `{}`: its `instantiate(..)` lists {}",
                args(),
                generic.listed
            );
            match backend::no_kernel(t, generic.name, c.maps, reason) {
                NotRun::Host(h) => h,
                NotRun::Failed(e) => return Err(e),
            }
        }
    };
    run_host(w, generic.name, why, c.launch, c.maps, fallback)
}

/// Runs a region that takes another device's memory: on its device, or not at all (no host fallback: the host
/// cannot dereference device memory).
///
/// # Safety
/// As [`call`].
unsafe fn on_device_only<R>(region: &'static RegionInfo, c: &Call<'_, R>) -> Result<R, Error> {
    // SAFETY: forwarded from the caller.
    match unsafe { run_on_device(Watch::now(), region, c.launch, c.maps) } {
        // SAFETY: forwarded from the caller.
        Ok(reduced) => Ok(unsafe { finish(reduced, c.reduce, c.ret) }),
        Err(NotRun::Failed(e)) => Err(e),
        Err(NotRun::Host(why)) => Err(Error::DeviceRequired {
            region: region.name,
            reason: why.reason().to_string(),
        }),
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
    match select(launch.device, launch.cond) {
        // SAFETY: forwarded from the caller.
        Selection::Device(t) => unsafe { backend::run(w, region, launch, maps, t) },
        Selection::Host(h) => Err(NotRun::Host(h)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::geometry::hardware_threads;
    use crate::host::pool::refuse_spawns_after;
    use crate::host::run_fallback;
    use offload_model::fatbin::OffloadEntry;

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
