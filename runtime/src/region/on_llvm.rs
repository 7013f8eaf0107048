//! Region calls and data constructs under `OFFLOAD_RUNTIME=llvm`: the map list handed to LLVM's libomptarget, which
//! maps it in its present table (the one C and C++ code compiled by clang shares) and launches the kernel on its host
//! plugin.
//!
//! Our map types are LLVM's bits (`offload_model::abi::map_type`), with three differences handled here: every entry
//! of ours is a kernel argument (LLVM's `TARGET_PARAM`); the return slot is ours `FROM | PRIVATE` (a private copy LLVM
//! would never copy back), so it goes as a plain `FROM`; and our own bits (atomics, device writes) are not passed on.
//! LLVM's host plugin calls a kernel once, on the calling thread; the kernel's first argument is our launch plan,
//! which runs its threads on our host team executor (`device::llvm`), so teams, barriers, team-shared memory and
//! reductions work as on host-elf. Integer atomics are never copied: its host plugin's kernels use them in place,
//! at their host address (a GPU plugin's cannot, and the call is refused); device memory (`DevicePtr`, from
//! libomptarget's `omp_target_alloc`) is passed as is. What cannot run there yet is an error naming it: map sections,
//! over-aligned elements.

use super::error::Error;
use super::maplist::MapArg;
use crate::device::llvm::{Launched, Libomptarget, Map};
use crate::device::present::MapError;
use offload_model::abi::map_type::{
    ALWAYS, CLOSE, DELETE, FROM, HOST_ATOMIC_MASK, LITERAL, PRESENT, PRIVATE, RETURN_PARAM, TO,
};
use offload_model::fatbin::OffloadEntry;

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
    let args: Vec<Map> = maps.iter().map(|m| to_llvm(m, true)).collect();
    // SAFETY: forwarded; the entry was registered with the program's images.
    unsafe { lib.kernel(device, entry, &args, geometry) }
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
