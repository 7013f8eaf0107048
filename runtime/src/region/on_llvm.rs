//! Region calls and data constructs under `OFFLOAD_RUNTIME=llvm`: the map list handed to LLVM's libomptarget, which
//! maps it in its present table (the one C and C++ code compiled by clang shares) and launches the kernel on its host
//! plugin.
//!
//! Our map types are LLVM's bits (`offload_model::abi::map_type`), with three differences handled here: every entry
//! of ours is a kernel argument (LLVM's `TARGET_PARAM`); the return slot is ours `FROM | PRIVATE` (a private copy LLVM
//! would never copy back), so it goes as a plain `FROM`; and our own bits (atomics, device writes) are not passed on.
//! LLVM's host plugin calls a kernel once, on the calling thread; the kernel's first argument is our launch plan,
//! which runs its threads on our host team executor (`device::llvm`), so teams, barriers, team-shared memory and
//! reductions work as on host-elf. A region's integer atomics go through a staging copy read and written with atomic
//! accesses; device memory (`DevicePtr`, from libomptarget's `omp_target_alloc`) is passed as is. What cannot run
//! there yet is an error naming it: map sections, a data construct's atomics, over-aligned elements.

use super::error::Error;
use super::maplist::MapArg;
use crate::device::llvm::{Launched, Libomptarget, Map};
use crate::device::observed::{atomic_copy, atomic_elements};
use crate::device::present::MapError;
use offload_model::abi::map_type::{
    ALWAYS, CLOSE, DELETE, FROM, HOST_ATOMIC_MASK, IMPLICIT, LITERAL, PRESENT, PRIVATE,
    RETURN_PARAM, TO,
};
use offload_model::fatbin::OffloadEntry;
use std::sync::{Condvar, Mutex};

/// The bits libomptarget takes from ours.
const LLVM_BITS: u64 = TO | FROM | ALWAYS | DELETE | PRIVATE | IMPLICIT | CLOSE | PRESENT;

/// Why a region cannot run under `OFFLOAD_RUNTIME=llvm` yet, if it cannot.
pub(super) fn unsupported(maps: &[MapArg]) -> Option<&'static str> {
    let atomics = |m: &&MapArg| m.map_type & LITERAL == 0 && m.map_type & HOST_ATOMIC_MASK != 0;
    if maps
        .iter()
        .filter(atomics)
        .any(|m| m.map_type & ALWAYS != 0)
    {
        Some("an `always` map of integer atomics would be copied by LLVM's libomptarget with a plain `memcpy`")
    } else if maps.iter().any(|m| atomics(&m)) {
        // A region's atomics are staged (`launch`); a data construct's are refused.
        let plain: Vec<MapArg> = maps.iter().filter(|m| !atomics(m)).cloned().collect();
        unsupported_entries(&plain)
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
    maps.iter()
        .filter(|m| m.size > 0)
        .map(|m| to_llvm(m, false))
        .collect()
}

/// The first `present` entry of `maps` that libomptarget's device `d` does not hold, as our runtime reports it.
pub(super) fn not_present(lib: &Libomptarget, d: i32, maps: &[MapArg]) -> Option<MapError> {
    maps.iter()
        .filter(|m| m.map_type & (PRESENT | LITERAL) == PRESENT && m.size > 0)
        .find(|m| !lib.is_present(m.begin.cast(), d))
        .map(|m| MapError::NotPresent {
            begin: m.begin as usize,
            size: m.size,
        })
}

/// Runs the kernel of `entry` on libomptarget's device `device` with the region's map list as `geometry` (teams,
/// threads per team, team-shared bytes per team) on our host team executor.
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
    // Integer atomics that are not present go through a staging copy of our own, read and written back with atomic
    // accesses: libomptarget's plain `memcpy` of them would race with host threads using them meanwhile (present
    // ones it does not copy; `always` ones `unsupported` refused). Launches staging the same atomics take turns, so
    // none counts into a private copy while another does and one's updates overwrite the other's.
    let mut maps = maps.to_vec();
    let atomic = |m: &MapArg| {
        atomic_elements(m.map_type) != 0
            && m.map_type & LITERAL == 0
            && m.size > 0
            && !lib.is_present(m.begin.cast(), device)
    };
    let stage: Vec<bool> = maps.iter().map(atomic).collect();
    let _turn = Staging::take(maps.iter().zip(&stage).filter(|(_, &s)| s).map(|(m, _)| {
        let at = m.begin as usize;
        at..at + m.size
    }));
    let mut staged = Vec::new();
    for (m, _) in maps.iter_mut().zip(&stage).filter(|(_, &s)| s) {
        let mut copy = vec![0u128; m.size.div_ceil(16)];
        let at = copy.as_mut_ptr().cast::<u8>();
        // SAFETY: `m` describes `m.size` bytes of aligned atomics (the map list's contract), and the staging copy
        // as many, 16-aligned.
        unsafe {
            atomic_copy(
                at as usize,
                m.begin as usize,
                m.size,
                atomic_elements(m.map_type),
            )
        };
        staged.push((m.begin, m.size, m.map_type, copy));
        (m.begin, m.base, m.base_size) = (at, at, m.size);
    }
    let args: Vec<Map> = maps.iter().map(|m| to_llvm(m, true)).collect();
    // SAFETY: forwarded; the entry was registered with the program's images, and the staging copies live until
    // the launch returns.
    unsafe { lib.kernel(device, entry, &args, geometry) }?;
    for (host, size, map_type, copy) in &staged {
        if map_type & FROM != 0 {
            // SAFETY: as above, back.
            unsafe {
                atomic_copy(
                    *host as usize,
                    copy.as_ptr() as usize,
                    *size,
                    atomic_elements(*map_type),
                )
            };
        }
    }
    Ok(())
}

/// The host ranges of integer atomics that running launches have staged (`launch`), and a turn at them.
struct Staging(Vec<std::ops::Range<usize>>);

static STAGED: Mutex<Vec<std::ops::Range<usize>>> = Mutex::new(Vec::new());
static STAGING_ENDED: Condvar = Condvar::new();

impl Staging {
    /// Waits until no running launch has staged any of `ranges`, then holds them until dropped.
    fn take(ranges: impl Iterator<Item = std::ops::Range<usize>>) -> Staging {
        let ranges: Vec<_> = ranges.collect();
        if ranges.is_empty() {
            return Staging(ranges);
        }
        let overlaps = |held: &Vec<std::ops::Range<usize>>| {
            held.iter()
                .any(|h| ranges.iter().any(|r| r.start < h.end && h.start < r.end))
        };
        let mut held = STAGED.lock().unwrap_or_else(|p| p.into_inner());
        while overlaps(&held) {
            held = STAGING_ENDED.wait(held).unwrap_or_else(|p| p.into_inner());
        }
        held.extend(ranges.iter().cloned());
        Staging(ranges)
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        if self.0.is_empty() {
            return;
        }
        let mut held = STAGED.lock().unwrap_or_else(|p| p.into_inner());
        for r in &self.0 {
            if let Some(k) = held.iter().position(|h| h == r) {
                held.swap_remove(k);
            }
        }
        STAGING_ENDED.notify_all();
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
