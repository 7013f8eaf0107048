//! Region calls and data constructs under `OFFLOAD_RUNTIME=llvm`: the map list handed to LLVM's libomptarget, which
//! maps it in its present table (the one C and C++ code compiled by clang shares) and launches the kernel on its host
//! plugin.
//!
//! Our map types are LLVM's bits (`offload_model::abi::map_type`), with three differences handled here: every entry
//! of ours is a kernel argument (LLVM's `TARGET_PARAM`); the return slot is ours `FROM | PRIVATE` (a private copy LLVM
//! would never copy back), so it goes as a plain `FROM`; and our own bits (atomics, device writes) are not passed on.
//! LLVM's host plugin calls a kernel once, on the calling thread: every construct then runs as one team of one
//! thread (the image's entry does that when it gets no launch environment of ours). What cannot run there yet is an
//! error naming it: reductions, device memory, and `teams, parallel` regions (team-shared memory).

use super::error::Error;
use super::maplist::MapArg;
use crate::device::llvm::{Libomptarget, Map};
use crate::host::geometry::Launch;
use offload_model::abi::map_type::{
    ALWAYS, CLOSE, DELETE, DEVICE_MEMORY, FROM, HOST_ATOMIC_MASK, IMPLICIT, LITERAL, PRESENT,
    PRIVATE, REDUCTION, RETURN_PARAM, TO,
};
use offload_model::fatbin::OffloadEntry;

/// The bits libomptarget takes from ours.
const LLVM_BITS: u64 = TO | FROM | ALWAYS | DELETE | PRIVATE | IMPLICIT | CLOSE | PRESENT;

/// Why a region cannot run under `OFFLOAD_RUNTIME=llvm` yet, if it cannot.
pub(super) fn unsupported(launch: &Launch, maps: &[MapArg]) -> Option<&'static str> {
    if maps.iter().any(|m| m.map_type & REDUCTION != 0) {
        Some("a reduction (`reduction(..)`) does not run on LLVM's libomptarget yet")
    } else if maps.iter().any(|m| m.map_type & DEVICE_MEMORY != 0) {
        Some("device memory (`DevicePtr`, `DeviceBuffer`) is not passed to LLVM's libomptarget yet")
    } else if launch.construct.is_spmd() {
        Some(
            "a `teams, parallel` region (team-shared memory, barriers across threads) does not run on LLVM's \
             libomptarget yet",
        )
    } else {
        unsupported_entries(maps)
    }
}

/// Why entries of a map list cannot go to libomptarget yet, if they cannot: what our runtime does for them and it
/// does not.
pub(super) fn unsupported_entries(maps: &[MapArg]) -> Option<&'static str> {
    let data = || maps.iter().filter(|m| m.map_type & LITERAL == 0);
    if data().any(|m| m.map_type & HOST_ATOMIC_MASK != 0) {
        // Ours copies them element by element with atomic accesses; libomptarget's `memcpy` would race with the
        // host threads that may use them meanwhile.
        Some("integer atomics are not copied atomically by LLVM's libomptarget")
    } else if data().any(|m| m.size != m.base_size && m.map_type & PRIVATE == 0) {
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

/// The map list of a data construct (`construct`), as libomptarget takes it; what it cannot take yet stops the
/// program with the reason.
#[track_caller]
pub(super) fn data_maps(construct: &str, maps: &[MapArg]) -> Vec<Map> {
    if let Some(why) = unsupported_entries(maps) {
        panic!("offload: {construct} cannot map its data under OFFLOAD_RUNTIME=llvm: {why}")
    }
    maps.iter()
        .filter(|m| m.size > 0)
        .map(|m| to_llvm(m, false))
        .collect()
}

/// Runs the kernel of `entry` on libomptarget's device `device` with the region's map list; `Err` with libomptarget's
/// status if it did not run.
///
/// # Safety
/// As `call::target`: every non-literal entry describes memory valid for its size (writable where `FROM`) until the
/// call returns.
pub(super) unsafe fn launch(
    lib: &Libomptarget,
    device: i32,
    entry: &OffloadEntry,
    maps: &[MapArg],
) -> Result<(), i32> {
    let args: Vec<Map> = maps.iter().map(|m| to_llvm(m, true)).collect();
    // SAFETY: forwarded; the entry was registered with the program's images.
    match unsafe { lib.kernel(device, entry, &args) } {
        0 => Ok(()),
        status => Err(status),
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
