//! What a region's run on a device is, on either runtime (`on_ours`, `on_llvm`): the region's description, why a
//! run did not happen, the outputs a launch writes besides the mapped data, and the rule for device memory.

use super::error::Error;
use super::maplist::MapArg;
use crate::device::Host;
use crate::host::geometry::Launch;
use offload_model::abi::map_type::REDUCTION;
use offload_model::fatbin::OffloadEntry;

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

/// Why a region did not run on a device: the host may run it (for this reason), or the call fails.
pub(super) enum NotRun {
    Host(Host),
    Failed(Error),
}

/// An error when the region takes device memory of a device other than `d`: device memory is passed as is, so only
/// to a region on its own device.
pub(super) fn memory_elsewhere(
    region: &'static RegionInfo,
    maps: &[MapArg],
    d: i32,
) -> Result<(), NotRun> {
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

/// What a launch writes besides the mapped data, and its team-shared memory: a reduction's output holds a slot per
/// team and the initial value, copied back into `reduced` (the map list's reduction entry is redirected to it),
/// and a small value a slot per thread in team-shared memory; a `teams, parallel` region gets its team-shared block.
pub(super) struct Outputs {
    pub(super) reduced: Vec<u8>,
    pub(super) team_shared: usize,
    /// The map list with its reduction entry pointing at `reduced`, for a reduction region.
    redirected: Option<Vec<MapArg>>,
}

impl Outputs {
    pub(super) fn new(
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
    pub(super) fn maps<'a>(&'a self, maps: &'a [MapArg]) -> &'a [MapArg] {
        self.redirected.as_deref().unwrap_or(maps)
    }
}
