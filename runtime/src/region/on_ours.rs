//! A region's run on one of our devices: its loaded kernel, the map list entered in the device's present table, the
//! launch through the device layer's launch template, the map list exited; or why it could not start.

use super::error::{Error, Location};
use super::maplist::{enter_list, MapArg};
use super::run::{memory_elsewhere, NotRun, Outputs, RegionInfo};
use crate::device::{DeviceEntry, Host, LoadedKernel, MapError, RefKind};
use crate::host::geometry::Launch;
use crate::observe::{Label, Watch};
use crate::plugin::{LaunchParams, PluginError};
use crate::registry::{entry_index, entry_symbol};
use offload_model::abi::map_type::{DEVICE_MEMORY, LITERAL, PRIVATE};

/// A region's run on our device `dev`: the device's loaded kernel for it, the arguments mapped in, the launch, the
/// arguments mapped out (or released without copying back after a failure). `Ok` holds what a reduction region's
/// teams wrote.
///
/// # Safety
/// As `call::target`.
pub(super) unsafe fn run(
    w: Watch,
    region: &'static RegionInfo,
    launch: Launch,
    maps: &[MapArg],
    dev: &'static DeviceEntry,
) -> Result<Vec<u8>, NotRun> {
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

/// Why a generic region with no kernel for its arguments (`reason`) does not run on our device `dev`: one that takes
/// device memory cannot run on the host; another may, unless some of its data lives on the device.
pub(super) fn no_kernel_on(
    dev: &DeviceEntry,
    name: &'static str,
    maps: &[MapArg],
    reason: String,
) -> NotRun {
    if maps.iter().any(|m| m.map_type & DEVICE_MEMORY != 0) {
        return NotRun::Failed(Error::DeviceRequired {
            region: name,
            reason,
        });
    }
    could_not_start(name, dev, maps, reason)
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

/// Why the region's arguments (`maps`, as the call lists them) could not be mapped in on `dev`: `present` and
/// extension violations are errors under every policy; a device that cannot allocate or copy is one the region
/// could not start on.
fn not_mapped(
    region: &'static RegionInfo,
    dev: &DeviceEntry,
    maps: &[MapArg],
    e: MapError,
) -> NotRun {
    match e.cause() {
        MapError::Device(_) | MapError::AtomicsNotShared { .. } => could_not_start(
            region.name,
            dev,
            maps,
            format!("mapping the arguments on device {} failed: {e}", dev.number),
        ),
        _ => NotRun::Failed(mapping_error(region.name, dev, e.to_string())),
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
