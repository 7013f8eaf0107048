//! What a region call and a data construct need from a runtime, over the device ([`Target`]) the construct selected:
//! ours (the map-list walk over the device's present table, the kernel through the device layer's launch template)
//! or LLVM's libomptarget (`on_llvm`). Which one is the device layer's choice, made once (`device::backend`); this is
//! the region layer's one place that tells the two apart, so `call.rs`, `data.rs` and `scope.rs` never do.

use super::maplist::{enter_list, exit_list, Held, MapArg};
use super::run::{NotRun, RegionInfo};
use super::{on_llvm, on_ours};
use crate::device::{select, DeviceEntry, Host, MapError, RefKind, Selection, Target};
use crate::env::{icv, Policy};
use crate::host::geometry::Launch;
use crate::observe::{Label, Watch};

/// A data construct's refusal on our device `dev`, which stops the program.
#[track_caller]
pub(super) fn mapping_failed(construct: &str, dev: &DeviceEntry, e: MapError) -> ! {
    panic!(
        "offload: {construct} on device {} ({}): {e}",
        dev.number, dev.plugin
    )
}

/// The device a data construct acts on, chosen from its `device(..)` and `if(..)` clauses as a region chooses its
/// own; `None` for the host (where every map is already satisfied). Under `MANDATORY` a construct that could not
/// reach a device stops the program.
#[track_caller]
pub(super) fn data_target(construct: &str, device: Option<i32>, cond: bool) -> Option<Target> {
    match select(device, cond) {
        Selection::Device(t) => Some(t),
        Selection::Host(Host::Unavailable(r)) if icv().policy == Policy::Mandatory => panic!(
            "offload: {construct} could not reach a device and OMP_TARGET_OFFLOAD=MANDATORY forbids running on the \
             host: {r}"
        ),
        Selection::Host(_) => None,
    }
}

/// The device a data construct acts on (`None`: the host, where every map is already satisfied), chosen once for
/// all its variables. Under `MANDATORY` a construct that could not reach a device stops the program.
#[derive(Clone, Copy)]
pub struct DataDevice(pub(super) Option<Target>);

impl DataDevice {
    /// Chooses the device for `construct` from its `device(..)` and `if(..)` clauses, as a region chooses its own.
    #[track_caller]
    pub fn select(construct: &'static str, device: Option<i32>, cond: bool) -> Self {
        DataDevice(data_target(construct, device, cond))
    }
}

/// [`data_target`] for a construct in a data scope, which only our runtime runs.
#[track_caller]
pub(super) fn scoped_device(
    construct: &str,
    device: Option<i32>,
    cond: bool,
) -> Option<&'static DeviceEntry> {
    match data_target(construct, device, cond)? {
        Target::Ours(dev) => Some(dev),
        Target::Llvm(..) => panic!(
            "offload: {construct} in a data scope does not run under OFFLOAD_RUNTIME=llvm yet; enter the data with \
             `target_enter_data!` outside a scope, or use `target_data!`"
        ),
    }
}

/// Whether some of `[begin, begin + size)` is present on `t`.
pub(super) fn is_present(t: Target, m: &MapArg) -> bool {
    match t {
        Target::Ours(d) => d.table().lookup(m.begin as usize, m.size).is_some(),
        Target::Llvm(lib, d) => lib.is_present(m.begin.cast(), d),
    }
}

/// A data construct's entry of `maps` on `t` (`construct` names it): what each entry holds on our device (nothing
/// on libomptarget's, whose present table holds it). A failure stops the program.
///
/// # Safety
/// The host data of `maps` is live (and held exclusively where the map types write it) until the exit.
#[track_caller]
pub(super) unsafe fn enter(
    t: Target,
    construct: &'static str,
    maps: &[MapArg],
    kind: RefKind,
) -> Vec<Held> {
    match t {
        Target::Ours(d) => {
            let _scope = d.scope(Label::Construct(construct));
            // SAFETY: forwarded.
            unsafe { enter_list(d, maps, kind) }
                .unwrap_or_else(|e| mapping_failed(construct, d, e))
                .keep()
                .1
        }
        Target::Llvm(lib, d) => {
            // SAFETY: forwarded.
            unsafe { on_llvm::enter(lib, d, construct, maps) };
            Vec::new()
        }
    }
}

/// Our device's refusal of a data construct's exit, for the caller to report or, on an unwind, drop.
pub(super) struct ExitFailed(&'static DeviceEntry, MapError);

impl ExitFailed {
    /// Stops the program with the refusal of `construct`'s exit.
    #[track_caller]
    pub(super) fn fail(self, construct: &str) -> ! {
        mapping_failed(construct, self.0, self.1)
    }
}

/// A data construct's exit of `maps` (whose entry held `held`) on `t`, copying back (`copy`) as their map types
/// say. `construct` names it to libomptarget's refusals (which stop the program), `label` to our device's observer.
///
/// # Safety
/// The host data of `maps` is still live (and held exclusively where the map types write it).
#[track_caller]
pub(super) unsafe fn exit(
    t: Target,
    (construct, label): (&'static str, &'static str),
    maps: &[MapArg],
    held: &[Held],
    kind: RefKind,
    copy: bool,
) -> Result<(), ExitFailed> {
    match t {
        Target::Ours(d) => {
            let _scope = d.scope(Label::Construct(label));
            // SAFETY: forwarded.
            unsafe { exit_list(d, maps, held, kind, copy) }.map_err(|e| ExitFailed(d, e))
        }
        Target::Llvm(lib, d) => {
            // SAFETY: forwarded.
            unsafe { on_llvm::exit(lib, d, construct, maps, copy) };
            Ok(())
        }
    }
}

/// `target_update!` of one entry on `t`; data that is not mapped is left alone. A refusal stops the program.
///
/// # Safety
/// The host data of `m` is live (and held exclusively for `from`, or atomics written atomically).
#[track_caller]
pub(super) unsafe fn update(t: Target, m: MapArg) {
    match t {
        Target::Ours(d) => {
            if m.size == 0 {
                return;
            }
            let scope = d.scope(Label::Construct("target_update!"));
            let mut table = d.table();
            // SAFETY: forwarded.
            if let Err(e) = unsafe { table.update(d, m.begin as usize, m.size, m.map_type) } {
                drop(table);
                drop(scope);
                mapping_failed("target_update!", d, e)
            }
        }
        // SAFETY: forwarded.
        Target::Llvm(lib, d) => unsafe { on_llvm::update(lib, d, m) },
    }
}

/// A region's run on `t`: the arguments mapped in, the launch, the arguments mapped out. `Ok` holds what a reduction
/// region's teams wrote.
///
/// # Safety
/// As `call::target`.
pub(super) unsafe fn run(
    w: Watch,
    region: &'static RegionInfo,
    launch: Launch,
    maps: &[MapArg],
    t: Target,
) -> Result<Vec<u8>, NotRun> {
    match t {
        // SAFETY: forwarded.
        Target::Ours(dev) => unsafe { on_ours::run(w, region, launch, maps, dev) },
        // SAFETY: forwarded.
        Target::Llvm(lib, d) => unsafe { on_llvm::run(w, region, launch, maps, lib, d) },
    }
}

/// Why a generic region with no kernel for its arguments (`reason`) does not run on `t`: the host may run it, or
/// the call fails.
pub(super) fn no_kernel(t: Target, name: &'static str, maps: &[MapArg], reason: String) -> NotRun {
    match t {
        Target::Ours(dev) => on_ours::no_kernel_on(dev, name, maps, reason),
        // libomptarget holds no data of a host run's concern here: the host runs it, as with our devices.
        Target::Llvm(..) => NotRun::Host(Host::Unavailable(reason.into())),
    }
}
