//! Region calls and data constructs under `OFFLOAD_RUNTIME=llvm`: the map list handed to LLVM's libomptarget, which
//! maps it in its present table (the one C and C++ code compiled by clang shares) and launches the kernel on its host
//! plugin.
//!
//! Our map types are LLVM's bits (`offload_model::abi::map_type`), with three differences handled here: every entry
//! of ours is a kernel argument (LLVM's `TARGET_PARAM`); the return slot is ours `FROM | PRIVATE` (a private copy
//! LLVM would never copy back), so it goes as a plain `FROM`; and our own bits (atomics, device writes) are not
//! passed on. LLVM's host plugin calls a kernel once, on the calling thread; the kernel's first argument is our
//! launch description, which runs its threads on our host team executor (`device::llvm`), so teams, barriers,
//! team-shared memory and reductions work as on host-elf. Integer atomics are never copied: its host plugin's kernels
//! use them in place, at their host address (a GPU plugin's cannot, and the call is refused); device memory
//! (`DevicePtr`, from libomptarget's `omp_target_alloc`) is passed as is. What cannot run there yet is an error
//! naming it: map sections, over-aligned elements.

use super::error::{Error, Location};
use super::maplist::MapArg;
use super::run::{memory_elsewhere, NotRun, Outputs, RegionInfo};
use crate::device::directory::{Directory, Holder};
use crate::device::llvm::{Launched, Libomptarget, Map};
use crate::device::present::{writes_device, MapError};
use crate::device::Host;
use crate::host::geometry::Launch;
use crate::observe::{self, Label, LaunchName, Watch};
use crate::registry::entry_symbol;
use offload_model::abi::map_type::{
    ALWAYS, CLOSE, DELETE, FROM, HOST_ATOMIC_MASK, LITERAL, PRESENT, PRIVATE, RETURN_PARAM, TO,
};
use offload_model::fatbin::OffloadEntry;
use std::mem::MaybeUninit;

/// The bits libomptarget takes from ours. Not `IMPLICIT`: with it, libomptarget takes data that only partly
/// overlaps a mapping as present, and the region would address past the device copy's end (`extends_present`
/// refuses what it can see; without the bit libomptarget refuses the rest).
const LLVM_BITS: u64 = TO | FROM | ALWAYS | DELETE | PRIVATE | CLOSE | PRESENT;

/// Integer atomics, which are never copied (see `maplist::in_place_atomics`): libomptarget never sees them.
fn in_place(m: &MapArg) -> bool {
    m.map_type & LITERAL == 0 && m.map_type & HOST_ATOMIC_MASK != 0
}

/// Why a region cannot run under `OFFLOAD_RUNTIME=llvm` yet, if it cannot.
pub(super) fn unsupported(maps: &[MapArg]) -> Option<&'static str> {
    unsupported_entries(maps)
}

/// Why entries of a data construct's map list cannot go to libomptarget yet, if they cannot: what our runtime does
/// for them and it does not.
pub(super) fn unsupported_entries(maps: &[MapArg]) -> Option<&'static str> {
    let data = || {
        maps.iter()
            .filter(|m| m.map_type & LITERAL == 0 && !in_place(m))
    };
    if data().any(|m| m.size != m.base_size && m.map_type & PRIVATE == 0) {
        // LLVM allocates the section alone, where the region addresses the whole slice.
        Some("a map section (`x[lo..hi]`) is not mapped on LLVM's libomptarget yet")
    } else if data().any(|m| m.align > 16) {
        // Its host plugin's device memory is `malloc`'s, aligned for 16 bytes.
        Some("an element type aligned for more than 16 bytes is not mapped on LLVM's libomptarget")
    } else {
        None
    }
}

/// `m` as libomptarget takes it, a kernel argument (`kernel`) or a data construct's entry.
fn to_llvm(m: &MapArg, kernel: bool) -> Map {
    if m.map_type & LITERAL != 0 {
        return Map::literal(m.literal);
    }
    // Nothing to map (an empty slice): its own dangling, aligned address, as our runtime passes it.
    if m.size == 0 && m.base_size == 0 && kernel {
        return Map::literal(std::mem::MaybeUninit::new(m.begin as u64));
    }
    let mut bits = m.map_type & LLVM_BITS;
    // The return slot (`FROM | PRIVATE`, never `TO`): LLVM copies a private entry in, never back.
    if bits & (PRIVATE | FROM) == PRIVATE | FROM {
        bits &= !PRIVATE;
    }
    let map = Map::data(m.base.cast(), m.begin.cast(), m.size, bits & !RETURN_PARAM);
    if kernel {
        map.argument()
    } else {
        map
    }
}

/// The map list of a data construct (`construct`) on libomptarget's device `d`, as libomptarget takes it; what it
/// cannot take yet, and `present` data that is not mapped, stop the program with the reason (as our runtime's
/// data constructs do; libomptarget itself would abort the process).
#[track_caller]
pub(super) fn data_maps(
    construct: &str,
    (lib, d): (&Libomptarget, i32),
    maps: &[MapArg],
) -> Vec<Map> {
    if let Some(why) = unsupported_entries(maps) {
        panic!("offload: {construct} cannot map its data under OFFLOAD_RUNTIME=llvm: {why}")
    }
    if let Some(e) = not_present(lib, d, maps) {
        panic!("offload: {construct} on device {d} (llvm): {e}")
    }
    if let Some(e) = extends_present(lib, d, maps, false) {
        panic!("offload: {construct} on device {d} (llvm): {e}")
    }
    maps.iter()
        .filter(|m| m.size > 0 && !in_place(m))
        .map(|m| to_llvm(m, false))
        .collect()
}

/// The first `present` entry of `maps` that libomptarget's device `d` does not hold, as our runtime reports it.
pub(super) fn not_present(lib: &Libomptarget, d: i32, maps: &[MapArg]) -> Option<MapError> {
    maps.iter()
        .filter(|m| m.map_type & (PRESENT | LITERAL) == PRESENT && m.size > 0 && !in_place(m))
        .find(|m| !lib.is_present(m.begin.cast(), d))
        .map(|m| MapError::NotPresent {
            begin: m.begin as usize,
            size: m.size,
        })
}

/// The first entry of `maps` whose data is partly mapped on libomptarget's device `d` (one end of it in a mapping
/// that does not hold it whole), as a message: libomptarget would take the mapping for it, and the region would
/// address past its end, or stop the process. A region's read-only data is not asked (`launch` gives it a private
/// copy instead, as our runtime does), unless it must be present.
pub(super) fn extends_present(
    lib: &Libomptarget,
    d: i32,
    maps: &[MapArg],
    region: bool,
) -> Option<String> {
    maps.iter()
        .filter(|m| m.map_type & (LITERAL | PRIVATE) == 0 && m.base_size > 0 && !in_place(m))
        .filter(|m| !region || m.map_type & (FROM | PRESENT) != 0)
        .find(|m| partly_held(lib, d, m) == Some(false))
        .map(|m| {
            format!(
                "host range {:#x}..{:#x} is partly mapped on the device (another construct mapped a part of it): \
                 map it whole there, or pass only the part that is mapped",
                m.base as usize,
                m.base as usize + m.base_size
            )
        })
}

/// Whether device `d` holds `m`'s data whole (`Some(true)`), a part of it (`Some(false)`, as far as its ends tell:
/// a mapping strictly inside it, libomptarget refuses itself), or none (`None`).
fn partly_held(lib: &Libomptarget, d: i32, m: &MapArg) -> Option<bool> {
    let (lo, last) = (m.base as usize, m.base as usize + m.base_size - 1);
    let (a, b) = (
        lib.mapped_ptr(lo as *const _, d) as usize,
        lib.mapped_ptr(last as *const _, d) as usize,
    );
    match (a, b) {
        (0, 0) => None,
        (0, _) | (_, 0) => Some(false),
        _ => Some(b.wrapping_sub(a) == m.base_size - 1),
    }
}

/// Whether any data of `maps` is present on libomptarget's device `d`.
pub(super) fn any_present(lib: &Libomptarget, d: i32, maps: &[MapArg]) -> bool {
    maps.iter()
        .filter(|m| m.map_type & LITERAL == 0 && m.size > 0 && !in_place(m))
        .any(|m| lib.is_present(m.begin.cast(), d))
}

/// A region's run on a device of LLVM's libomptarget (`OFFLOAD_RUNTIME=llvm`), which maps the arguments in its
/// present table and launches the kernel ([`launch`]).
///
/// # Safety
/// As `call::target`.
pub(super) unsafe fn run(
    w: Watch,
    region: &'static RegionInfo,
    launch: Launch,
    maps: &[MapArg],
    lib: &'static Libomptarget,
    d: i32,
) -> Result<Vec<u8>, NotRun> {
    refusals(region, maps, lib, d)?;
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
        || unsafe { self::launch(lib, d, region.entry, out.maps(maps), geometry) },
    );
    launched
        .map(|()| out.reduced)
        .map_err(|e| not_run(region, lib, d, maps, e))
}

/// What refuses a region on libomptarget's device `d` before anything is mapped: device memory of another device,
/// what libomptarget cannot do, and `present` or extension violations (errors under every policy: libomptarget
/// would abort the process).
fn refusals(
    region: &'static RegionInfo,
    maps: &[MapArg],
    lib: &'static Libomptarget,
    d: i32,
) -> Result<(), NotRun> {
    // A `DevicePtr` from libomptarget's `omp_target_alloc` is passed as is (our `DeviceBuffer`s are not made for
    // its devices).
    memory_elsewhere(region, maps, d)?;
    if let Some(why) = unsupported(maps) {
        return Err(NotRun::Failed(unsupported_error(region.name, d, why)));
    }
    let message = match not_present(lib, d, maps) {
        Some(e) => Some(e.to_string()),
        None => extends_present(lib, d, maps, true),
    };
    match message {
        Some(message) => Err(llvm_mapping_error(region, d, message)),
        None => Ok(()),
    }
}

/// A mapping error of region `region` on libomptarget's device `d`.
fn llvm_mapping_error(region: &'static RegionInfo, d: i32, message: String) -> NotRun {
    NotRun::Failed(Error::Mapping {
        what: format!("region {}", region.name),
        device: d,
        plugin: "llvm",
        message,
    })
}

/// Why a region launched on libomptarget's device `d` did not run there, as the call reports it.
fn not_run(
    region: &'static RegionInfo,
    lib: &'static Libomptarget,
    d: i32,
    maps: &[MapArg],
    e: Launched,
) -> NotRun {
    match e {
        // libomptarget did not run it (its own failures after a start stop the process): the host may.
        // Not with data present there: the fallback would compute on the host's stale copy.
        e @ Launched::NotRun(_) if any_present(lib, d, maps) => llvm_mapping_error(
            region,
            d,
            format!(
                "{e}; some of its data is present on the device, so the host fallback, which would compute on the \
                 host's stale copy, does not run"
            ),
        ),
        e @ Launched::NotRun(_) => NotRun::Host(Host::Unavailable(e.to_string().into())),
        Launched::Busy(why) => llvm_mapping_error(region, d, why),
        Launched::Refused(why) => NotRun::Failed(unsupported_error(region.name, d, &why)),
        // It failed while it ran: libomptarget released the arguments without copying back.
        Launched::Failed(f) => NotRun::Failed(Error::RegionFailed {
            region: region.name,
            device: d,
            plugin: "llvm",
            message: f.to_string(),
            location: Location {
                place: f.location().cloned(),
                thread: f.thread(),
            },
        }),
    }
}

/// Runs the kernel of `entry` on libomptarget's device `device` with the region's map list as `geometry` (teams,
/// threads per team, team-shared bytes per team): on our host team executor on its host plugin, as a grid on a GPU
/// plugin.
///
/// # Safety
/// As `call::target`: every non-literal entry describes memory valid for its size (writable where `FROM`) until the
/// call returns.
pub(super) unsafe fn launch(
    lib: &Libomptarget,
    device: i32,
    entry: &OffloadEntry,
    maps: &[MapArg],
    geometry: (u32, u32, usize),
) -> Result<(), Launched> {
    // Integer atomics are used in place, at their host address (its host plugin's kernels run on the host); a GPU
    // plugin's kernels cannot reach them, and the call is refused.
    let mut maps = maps.to_vec();
    for m in maps.iter_mut().filter(|m| in_place(m)) {
        if !lib.runs_on_host(device) {
            return Err(Launched::Refused(
                "integer atomics are never copied, and this device's memory is not the host's"
                    .into(),
            ));
        }
        *m = MapArg::literal(m.base as usize as u64);
    }
    // Read-only data the device does not hold whole goes as a private copy (libomptarget's `PRIVATE`), never entered
    // in its present table: calls running at once on overlapping parts of one buffer, or on a buffer a data
    // construct holds a part of, then never extend each other's mappings (libomptarget would stop the process), and
    // the region gets a copy of the whole, as our runtime gives it.
    for m in maps.iter_mut().filter(|m| {
        m.map_type & (LITERAL | FROM | PRIVATE | PRESENT | HOST_ATOMIC_MASK) == 0 && m.base_size > 0
    }) {
        if partly_held(lib, device, m) != Some(true) {
            m.map_type |= PRIVATE;
        }
    }
    // SAFETY: forwarded.
    let copies =
        unsafe { before_launch(lib, device, &maps) }.map_err(|e| Launched::Busy(e.to_string()))?;
    let args: Vec<Map> = maps.iter().map(|m| to_llvm(m, true)).collect();
    // SAFETY: forwarded; the entry was registered with the program's images.
    unsafe { lib.kernel(device, entry, &args, geometry) }?;
    after_launch(device, &maps, &copies);
    Ok(())
}

/// The host range of an entry the coherence directory tracks (`device::directory`): host data a construct maps,
/// not literals, private copies, empty data or atomics.
fn tracked(m: &MapArg) -> Option<(usize, usize)> {
    let data = m.map_type & (LITERAL | PRIVATE | HOST_ATOMIC_MASK) == 0 && m.size > 0;
    data.then(|| (m.begin as usize, m.begin as usize + m.size))
}

/// The host range a region can reach through `m` (its whole slice).
fn reach(m: &MapArg) -> (usize, usize) {
    let (b, e) = (m.begin as usize, m.begin as usize + m.size);
    (b.min(m.base as usize), e.max(m.base as usize + m.base_size))
}

/// Refreshes the stale parts of libomptarget's copy `copy` on `d` within `[begin, end)` from the host, as our
/// present table does before a region uses a copy or an exit copies it back: refused where another device holds
/// newer data.
///
/// # Safety
/// The host range is readable.
unsafe fn refresh(
    lib: &Libomptarget,
    d: i32,
    copy: (usize, usize),
    (begin, end): (usize, usize),
) -> Result<(), MapError> {
    let dir = Directory::global();
    let (begin, end) = (begin.max(copy.0), end.min(copy.1));
    for (sb, se) in dir.stale_parts(d, copy.0, begin, end) {
        if let Some(h) = dir.newer(Some(d), sb, se) {
            return Err(MapError::stale(sb, se, h));
        }
        let p = sb as *mut std::ffi::c_void;
        // SAFETY: per the contract; the part lies in the present copy.
        unsafe { lib.update(d, &[Map::data(p, p, se - sb, TO)]) };
        dir.copied_in(d, copy.0, sb, se, false);
    }
    Ok(())
}

/// Before a region's launch on `d`: what the coherence directory asks (see `device::directory`), as our present
/// tables do. A copy libomptarget will make from the host is refused where another device holds newer data; a
/// present copy's stale parts the region can reach are refreshed first. Returns each entry's present copy, if any.
///
/// # Safety
/// As [`launch`].
unsafe fn before_launch(
    lib: &Libomptarget,
    d: i32,
    maps: &[MapArg],
) -> Result<Vec<Option<(usize, usize)>>, MapError> {
    let dir = Directory::global();
    let mut copies = Vec::with_capacity(maps.len());
    for m in maps {
        let copy = tracked(m).and_then(|(b, e)| dir.copy_holding(d, b, e));
        match (tracked(m), copy) {
            // SAFETY: forwarded.
            (Some(_), Some(c)) => unsafe { refresh(lib, d, c, reach(m)) }?,
            (Some((b, e)), None) => {
                if let Some(h) = dir.newer(Some(d), b, e) {
                    return Err(MapError::stale(b, e, h));
                }
            }
            (None, _) if m.map_type & (PRIVATE | LITERAL) == PRIVATE && m.base_size > 0 => {
                // A private copy of host data: the host's must be current.
                let (b, e) = reach(m);
                if let Some(h) = dir.newer(None, b, e) {
                    return Err(MapError::stale(b, e, h));
                }
            }
            (None, _) => {}
        }
        copies.push(copy);
    }
    Ok(copies)
}

/// After a region ran on `d`: a present copy it may have written is newer than the host's where it holds what the
/// region can reach, and every other device's copy of those bytes is stale; the part it mapped through a copy of
/// its own reached the host, so every device's copy of that is stale.
fn after_launch(d: i32, maps: &[MapArg], copies: &[Option<(usize, usize)>]) {
    let dir = Directory::global();
    for (m, copy) in maps.iter().zip(copies) {
        let Some((b, e)) = tracked(m) else { continue };
        if !writes_device(m.map_type) {
            continue;
        }
        let (lo, hi) = reach(m);
        match copy {
            Some(c) => dir.device_writes(d, c.0, lo.max(c.0), hi.min(c.1)),
            None if m.map_type & FROM != 0 => dir.host_writes(b, e),
            None => {}
        }
    }
}

/// A data construct's entry of `maps` on libomptarget's device `d` (`construct` names it in a refusal): refused
/// where a copy would be made from host data another device holds newer; the copies it makes are tracked.
///
/// # Safety
/// As [`Libomptarget::enter`].
#[track_caller]
pub(super) unsafe fn enter(lib: &Libomptarget, d: i32, construct: &str, maps: &[MapArg]) {
    let llvm_maps = data_maps(construct, (lib, d), maps);
    let dir = Directory::global();
    let fresh: Vec<(usize, usize)> = maps
        .iter()
        .filter_map(tracked)
        .filter(|&(b, _)| !lib.is_present(b as *const _, d))
        .collect();
    for &(b, e) in &fresh {
        if let Some(h) = dir.newer(Some(d), b, e) {
            panic!(
                "offload: {construct} on device {d} (llvm): {}",
                MapError::stale(b, e, h)
            );
        }
    }
    // SAFETY: forwarded.
    unsafe { lib.enter(d, &llvm_maps) };
    for (b, e) in fresh {
        if lib.is_present(b as *const _, d) {
            dir.track(d, b, e, false);
        }
    }
}

/// A data construct's exit of `maps` on `d`, copying back (`copy_back`) as their map types say: libomptarget copies a
/// copy back whole, so the host's bytes where the copy is stale are kept aside and put back after it (the construct
/// holds the host data exclusively), and older data never stays over newer; the copies that end are no longer
/// tracked.
///
/// # Safety
/// As [`Libomptarget::exit`].
#[track_caller]
pub(super) unsafe fn exit(
    lib: &Libomptarget,
    d: i32,
    construct: &str,
    maps: &[MapArg],
    copy_back: bool,
) {
    let mut llvm_maps = data_maps(construct, (lib, d), maps);
    if !copy_back {
        llvm_maps.iter_mut().for_each(|m| m.clear(FROM));
    }
    let dir = Directory::global();
    // As `MaybeUninit` bytes: a `DeviceCopy` struct's padding is uninitialised.
    let mut kept: Vec<(usize, Vec<MaybeUninit<u8>>)> = Vec::new();
    let copies: Vec<(usize, usize)> = maps
        .iter()
        .filter_map(|m| {
            let (b, e) = tracked(m)?;
            let c = dir.copy_holding(d, b, e)?;
            if copy_back && m.map_type & FROM != 0 {
                for (sb, se) in dir.stale_parts(d, c.0, b, e) {
                    let mut bytes = vec![MaybeUninit::<u8>::uninit(); se - sb];
                    // SAFETY: per the contract, the host range is live and (with `FROM`) held exclusively.
                    unsafe {
                        std::ptr::copy_nonoverlapping(
                            sb as *const MaybeUninit<u8>,
                            bytes.as_mut_ptr(),
                            se - sb,
                        )
                    };
                    kept.push((sb, bytes));
                }
            }
            Some(c)
        })
        .collect();
    // SAFETY: forwarded.
    unsafe { lib.exit(d, &llvm_maps) };
    for (at, bytes) in kept {
        // SAFETY: as above: the host bytes the copy back overwrote with the stale copy's, put back.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), at as *mut MaybeUninit<u8>, bytes.len())
        };
    }
    for (b, _) in copies {
        if !lib.is_present(b as *const _, d) {
            let _ = dir.untrack(d, b);
        }
    }
}

/// `target_update!` of `m` on `d`: `to` is refused where another device holds newer data; `from` copies only the
/// parts of the copy that are not stale (refused where another device holds them newer).
///
/// # Safety
/// As [`Libomptarget::update`].
#[track_caller]
pub(super) unsafe fn update(lib: &Libomptarget, d: i32, m: MapArg) {
    let llvm_maps = data_maps("target_update!", (lib, d), &[m]);
    let dir = Directory::global();
    let Some((b, e)) = tracked(&m) else {
        // SAFETY: forwarded.
        return unsafe { lib.update(d, &llvm_maps) };
    };
    let Some(c) = dir.copy_holding(d, b, e) else {
        // SAFETY: forwarded.
        return unsafe { lib.update(d, &llvm_maps) };
    };
    let refuse = |h: Holder| -> ! {
        panic!(
            "offload: target_update! on device {d} (llvm): {}",
            MapError::stale(b, e, h)
        )
    };
    let whole = (b, e) == c;
    if m.map_type & TO != 0 {
        if let Some(h) = dir.newer(Some(d), b, e) {
            refuse(h)
        }
        // SAFETY: forwarded.
        unsafe { lib.update(d, &llvm_maps) };
        dir.copied_in(d, c.0, b, e, whole);
    }
    if m.map_type & FROM != 0 {
        let parts = dir.stale_parts(d, c.0, b, e);
        for &(sb, se) in &parts {
            if let Some(h) = dir.newer(Some(d), sb, se) {
                refuse(h)
            }
        }
        let mut at = b;
        for &(sb, se) in parts.iter().chain(std::iter::once(&(e, e))) {
            if sb > at {
                let p = at as *mut std::ffi::c_void;
                // SAFETY: forwarded; the part lies in the updated range.
                unsafe { lib.update(d, &[Map::data(p, p, sb - at, m.map_type & (FROM | ALWAYS))]) };
            }
            at = at.max(se);
        }
        if whole {
            dir.copied_out(d, c.0);
        }
    }
}

/// A region that cannot run under `OFFLOAD_RUNTIME=llvm`, as the call's error.
pub(super) fn unsupported_error(region: &'static str, device: i32, why: &str) -> Error {
    Error::Device {
        device,
        plugin: "llvm",
        message: format!(
            "region {region} cannot run under OFFLOAD_RUNTIME=llvm: {why}; run it with our runtime (unset \
             OFFLOAD_RUNTIME)"
        ),
    }
}
