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
    ALWAYS, CLOSE, DELETE, FROM, HOST_ATOMIC_MASK, LITERAL, PRESENT, PRIVATE, RETURN_PARAM, TO,
};
use offload_model::fatbin::OffloadEntry;
use std::ops::Range;
use std::sync::{Condvar, Mutex};

/// The bits libomptarget takes from ours. Not `IMPLICIT`: with it, libomptarget takes data that only partly
/// overlaps a mapping as present, and the region would address past the device copy's end (`extends_present`
/// refuses what it can see; without the bit libomptarget refuses the rest).
const LLVM_BITS: u64 = TO | FROM | ALWAYS | DELETE | PRIVATE | CLOSE | PRESENT;

/// Why a region cannot run under `OFFLOAD_RUNTIME=llvm` yet, if it cannot.
pub(super) fn unsupported(maps: &[MapArg]) -> Option<&'static str> {
    let atomics = |m: &&MapArg| m.map_type & LITERAL == 0 && m.map_type & HOST_ATOMIC_MASK != 0;
    if maps
        .iter()
        .filter(atomics)
        .any(|m| m.map_type & ALWAYS != 0)
    {
        Some("an `always` map of integer atomics would be copied by LLVM's libomptarget with a plain `memcpy`")
    } else {
        // A region's atomics are staged (`launch`); a data construct's are refused.
        unsupported_map(maps, true)
    }
}

/// Why entries of a data construct's map list cannot go to libomptarget yet, if they cannot: what our runtime does
/// for them and it does not.
pub(super) fn unsupported_entries(maps: &[MapArg]) -> Option<&'static str> {
    unsupported_map(maps, false)
}

/// [`unsupported_entries`], with integer atomics allowed (`atomics_staged`: a region call's, which `launch` stages).
fn unsupported_map(maps: &[MapArg], atomics_staged: bool) -> Option<&'static str> {
    let data = || maps.iter().filter(|m| m.map_type & LITERAL == 0);
    if !atomics_staged && data().any(|m| m.map_type & HOST_ATOMIC_MASK != 0) {
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
    if let Some(e) = extends_present(lib, d, maps, false) {
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
        .filter(|m| m.map_type & (LITERAL | PRIVATE) == 0 && m.base_size > 0)
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
        .filter(|m| m.map_type & LITERAL == 0 && m.size > 0)
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
    // Integer atomics that are not present go through a staging copy of our own, read and written back with atomic
    // accesses: libomptarget's plain `memcpy` of them would race with host threads using them meanwhile (present
    // ones it does not copy; `always` ones `unsupported` refused). One copy per host range, shared by the launches
    // using it at once, as a present mapping is: libomptarget finds the copy present and shares its device copy.
    let mut maps = maps.to_vec();
    let atomic = |m: &MapArg| {
        atomic_elements(m.map_type) != 0
            && m.map_type & LITERAL == 0
            && m.size > 0
            && !lib.is_present(m.begin.cast(), device)
    };
    let wanted: Vec<(usize, Range<usize>, usize)> = maps
        .iter()
        .enumerate()
        .filter(|(_, m)| atomic(m))
        .map(|(k, m)| {
            let at = m.begin as usize;
            (k, at..at + m.size, atomic_elements(m.map_type))
        })
        .collect();
    let mut staged = Staged::take(wanted.iter().map(|(_, r, e)| (r.clone(), *e)))
        .map_err(|why| Launched::Refused(why.into()))?;
    for (k, range, _) in &wanted {
        let at = staged.copy_of(range);
        let m = &mut maps[*k];
        (m.begin, m.base, m.base_size) = (at, at, m.size);
        // Both ways: the device's atomic writes come back whatever the map type, as on our runtime.
        m.map_type |= TO | FROM;
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
    // SAFETY: forwarded; the entry was registered with the program's images, and the staging copies live until
    // `staged` is dropped, after the launch.
    unsafe { lib.kernel(device, entry, &args, geometry) }?;
    staged.ran = true;
    Ok(())
}

/// A region call's staged integer atomics: each host range it passes with the range of the staged copy holding it.
/// Dropped after its launch; the last user of a copy writes it back to the host with atomic stores, if its launch
/// ran.
struct Staged {
    ranges: Vec<(Range<usize>, Range<usize>)>,
    ran: bool,
}

/// One staged copy: its host range, element size, the copy (16-aligned) and its address, taken once, and how many
/// running launches use it.
struct Stage {
    range: Range<usize>,
    elem: usize,
    /// Owns the memory `at` points into.
    _copy: Box<[u128]>,
    at: *mut u8,
    users: usize,
}

// SAFETY: `copy` is owned memory that `at` points into; the host range is only an address, read and written with
// atomic accesses.
unsafe impl Send for Stage {}

static STAGES: Mutex<Vec<Stage>> = Mutex::new(Vec::new());
static STAGE_ENDED: Condvar = Condvar::new();

/// Whether `a` lies inside `b`.
fn inside(a: &Range<usize>, b: &Range<usize>) -> bool {
    b.start <= a.start && a.end <= b.end
}

fn overlap(a: &Range<usize>, b: &Range<usize>) -> bool {
    a.start < b.end && b.start < a.end
}

impl Staged {
    /// Takes a staged copy for each `(range, element size)`: the copy of a range holding it (a launch's or another
    /// running launch's), or a new one read from the host with atomic loads. A range overlapping another launch's
    /// copy that does not hold it waits for that launch to end; two such ranges in one call are refused (one launch
    /// cannot wait for itself).
    fn take(wanted: impl Iterator<Item = (Range<usize>, usize)>) -> Result<Staged, &'static str> {
        let mut ranges: Vec<(Range<usize>, usize)> = wanted.collect();
        if ranges.is_empty() {
            return Ok(Staged {
                ranges: Vec::new(),
                ran: false,
            });
        }
        // The largest first: a range inside another of the call shares its copy.
        ranges.sort_by_key(|(r, _)| std::cmp::Reverse(r.len()));
        let tangled =
            |a: &Range<usize>, b: &Range<usize>| overlap(a, b) && !inside(a, b) && !inside(b, a);
        if ranges
            .iter()
            .any(|(a, _)| ranges.iter().any(|(b, _)| tangled(a, b)))
        {
            return Err("overlapping slices of the same integer atomics, neither holding the other, in one region \
                        call are not staged under OFFLOAD_RUNTIME=llvm: pass one slice");
        }
        let mut stages = STAGES.lock().unwrap_or_else(|p| p.into_inner());
        let blocked = |stages: &Vec<Stage>| {
            ranges.iter().any(|(r, _)| {
                !stages.iter().any(|s| inside(r, &s.range))
                    && stages.iter().any(|s| overlap(r, &s.range))
            })
        };
        while blocked(&stages) {
            stages = STAGE_ENDED.wait(stages).unwrap_or_else(|p| p.into_inner());
        }
        let mut taken = Vec::with_capacity(ranges.len());
        for (r, elem) in ranges {
            match stages.iter_mut().find(|s| inside(&r, &s.range)) {
                Some(s) => {
                    s.users += 1;
                    taken.push((r, s.range.clone()));
                }
                None => {
                    let mut copy = vec![0u128; r.len().div_ceil(16)].into_boxed_slice();
                    let at = copy.as_mut_ptr().cast::<u8>();
                    // SAFETY: the host range is aligned atomics of `elem` bytes (the map list's contract), live for
                    // the call; the copy as many bytes, 16-aligned.
                    unsafe { atomic_copy(at as usize, r.start, r.len(), elem) };
                    stages.push(Stage {
                        range: r.clone(),
                        elem,
                        _copy: copy,
                        at,
                        users: 1,
                    });
                    taken.push((r.clone(), r));
                }
            }
        }
        Ok(Staged {
            ranges: taken,
            ran: false,
        })
    }

    /// The address of the staged copy of `range` (one this call took): inside the copy holding it.
    fn copy_of(&self, range: &Range<usize>) -> *mut u8 {
        let (_, held) = self
            .ranges
            .iter()
            .find(|(r, _)| r == range)
            .expect("taken by this call");
        let stages = STAGES.lock().unwrap_or_else(|p| p.into_inner());
        let s = stages
            .iter()
            .find(|s| s.range == *held)
            .expect("held while this call runs");
        s.at.wrapping_add(range.start - held.start)
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if self.ranges.is_empty() {
            return;
        }
        let mut stages = STAGES.lock().unwrap_or_else(|p| p.into_inner());
        for (_, held) in &self.ranges {
            let Some(k) = stages.iter().position(|s| s.range == *held) else {
                continue;
            };
            stages[k].users -= 1;
            if stages[k].users == 0 {
                let s = stages.swap_remove(k);
                if self.ran {
                    // SAFETY: as in `take`, back. The whole range lives and is only shared: the last user borrows
                    // a part of it, and that borrow was made while the copy's first user borrowed the whole
                    // (shared), so it keeps the whole allocation shared-borrowed (safe code cannot have split off
                    // a `&mut` part meanwhile).
                    unsafe { atomic_copy(held.start, s.at as usize, held.len(), s.elem) };
                }
            }
        }
        STAGE_ENDED.notify_all();
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
