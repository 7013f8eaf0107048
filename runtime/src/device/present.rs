//! A device's present table: which host ranges have device copies, and OpenMP's reference counts on them. The logic
//! is plugin-independent (it moves data through the observed device, never a plugin directly) and runs under Miri
//! against a fake device.
//!
//! Each entry covers a host range `[begin, end)` (a whole slice, or a section of one) and the device address of
//! `begin`, with a structured count (target regions, `target_data!`) and a dynamic count (`target_enter_data!` /
//! exit). Data is copied in only when an entry is created (0 to 1) and out only when it dies (1 to 0), unless
//! `always`. A section's allocation covers its whole slice, so a region handed the slice may form it on the device.
//!
//! Which copy is current is the coherence directory's to say (`super::directory`: across the host and every device,
//! newer copies and stale parts); this table reports each copy it makes, drops, writes or refreshes there, and
//! asks it before copying. Each entry also records how many running regions use it, reading or writing. A construct
//! that would write the device copy under a running region (`target_update!(to: ..)`, an `always, to` map, a
//! refresh) or read it while a region writes it (`target_update!(from: ..)`) is refused ([`MapError::InUse`]); a
//! copy made from host data that a newer device copy overlaps is refused ([`MapError::Stale`]). Host atomics never
//! reach the table: they are used in place (the map-list walk).

use super::directory::{Directory, Holder};
use super::observed::ObservedDevice;
use crate::observe::{self, Change};
use crate::plugin::{DevicePtr, PluginError};
use offload_model::abi::map_type::{ALWAYS, DELETE, DEVICE_WRITES, FROM, PRESENT, TO};
use std::collections::BTreeMap;
use std::sync::Arc;

#[derive(Debug)]
struct MapEntry {
    end: usize,
    /// The host range the device allocation covers (a section's whole slice): a region's slice must lie in it.
    extent: (usize, usize),
    /// Device address of the entry's first host byte.
    tgt: DevicePtr,
    /// The allocation to free when the entry dies; `None` for `omp_target_associate_ptr` memory (the user's).
    alloc: Option<DevicePtr>,
    structured: u64,
    dynamic: u64,
    /// The running regions using the entry's device copy (their references are among `structured`), each with the
    /// host range it can reach: a region on one part of a mapping leaves the other parts free to copy.
    uses: Vec<Use>,
}

/// An associated pointer's dynamic count: never reaches zero through exits.
const INFINITE: u64 = u64::MAX;

impl MapEntry {
    fn total(&self) -> u64 {
        self.structured.saturating_add(self.dynamic)
    }

    fn new(end: usize, extent: (usize, usize), tgt: DevicePtr) -> Self {
        MapEntry {
            end,
            extent,
            tgt,
            alloc: None,
            structured: 0,
            dynamic: 0,
            uses: Vec::new(),
        }
    }

    /// A running region starts using the entry with `map_type`: it mapped `r.begin..` (`r.size` bytes) and can reach
    /// its whole slice `r.base..`. Returns whether it may write the device copy.
    fn begin_use(&mut self, r: &Range, map_type: u64) -> bool {
        let writes = writes_device(map_type);
        self.uses.push(Use {
            mapped: (r.begin, r.size),
            reach: reach(r),
            writes,
        });
        writes
    }

    /// The region that mapped `begin..` (`size` bytes) with `map_type` stops using the entry.
    fn end_use(&mut self, begin: usize, size: usize, map_type: u64) {
        let writes = writes_device(map_type);
        if let Some(k) = self
            .uses
            .iter()
            .position(|u| u.mapped == (begin, size) && u.writes == writes)
        {
            self.uses.swap_remove(k);
        }
    }

    /// Running regions that can reach `[begin, end)`; only those that may write it if `writers`.
    fn users_over(&self, begin: usize, end: usize, writers: bool) -> u64 {
        let end = end.max(begin + 1);
        self.uses
            .iter()
            .filter(|u| u.reach.0 < end && begin < u.reach.1 && (u.writes || !writers))
            .count() as u64
    }

    fn written(&self) -> bool {
        self.uses.iter().any(|u| u.writes)
    }
}

/// A running region's use of an entry's device copy.
#[derive(Debug, Clone, Copy)]
struct Use {
    /// The host range it mapped (its exit names the same), as (begin, size).
    mapped: (usize, usize),
    /// The host range it can reach: its whole slice, of which a section maps part.
    reach: (usize, usize),
    /// Whether it may write the device copy ([`writes_device`]).
    writes: bool,
}

/// Whether a region's map of `map_type` may write the device copy (or the host fallback the host's): anything but a
/// plain `to` of data held by `&` (`from`, `tofrom` and `alloc` maps are of `&mut` data, as `DEVICE_WRITES` says a
/// `to` of a `&mut` is; atomics, written through shared borrows, are never mapped).
pub fn writes_device(map_type: u64) -> bool {
    map_type & TO == 0 || map_type & (FROM | DEVICE_WRITES) != 0
}

/// The host range a region mapping `r` can reach: its whole slice, of which a section maps part.
fn reach(r: &Range) -> (usize, usize) {
    (r.base, r.base + r.base_size.max(r.size))
}

impl MapError {
    /// The error for the variable written at `site` (as is without one).
    #[cold]
    pub fn of(self, site: Option<&'static offload_model::abi::VarSite>) -> MapError {
        match (site, self) {
            (
                Some(site),
                e @ (MapError::NotPresent { .. }
                | MapError::Extends { .. }
                | MapError::NotAssociated { .. }
                | MapError::InUse { .. }
                | MapError::Stale { .. }
                | MapError::AtomicsNotShared { .. }
                | MapError::Device(_)),
            ) => MapError::Of {
                site,
                source: Box::new(e),
            },
            (_, e) => e,
        }
    }

    /// What went wrong, whichever variable it was for.
    pub fn cause(&self) -> &MapError {
        match self {
            MapError::Of { source, .. } => source.cause(),
            e => e,
        }
    }

    /// [`MapError::Stale`]: `[begin, end)` meets `holder`'s newer copy.
    pub fn stale(begin: usize, end: usize, holder: Holder) -> MapError {
        MapError::Stale {
            begin,
            end,
            mapped_begin: holder.begin,
            mapped_end: holder.end,
            device: holder.device,
        }
    }
}

/// Copies `[begin, end)` of the copy whose first host byte `b` is at `tgt` back to the host, skipping its `stale`
/// parts (newer data is on the host or another device: an older copy never overwrites it).
///
/// # Safety
/// The host range is writable; it lies in the copy.
#[inline]
unsafe fn retrieve_current(
    dev: &ObservedDevice,
    (b, tgt): (usize, DevicePtr),
    (begin, end): (usize, usize),
    stale: &[(usize, usize)],
    map_type: u64,
) -> Result<(), MapError> {
    if stale.is_empty() {
        // SAFETY: per the contract.
        return Ok(unsafe {
            dev.retrieve(begin, tgt + (begin - b) as u64, end - begin, map_type)
        }?);
    }
    let mut at = begin;
    let stale = stale
        .iter()
        .filter(|&&(sb, se)| sb < end && begin < se)
        .map(|&(sb, se)| (sb.max(begin), se.min(end)));
    for (sb, se) in stale.chain(std::iter::once((end, end))) {
        if sb > at {
            // SAFETY: per the contract; the device range lies in the copy.
            unsafe { dev.retrieve(at, tgt + (at - b) as u64, sb - at, map_type) }?;
        }
        at = at.max(se);
    }
    Ok(())
}

/// Which reference count a construct uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RefKind {
    /// `target_data!` (and the data scopes' structured references).
    Structured,
    /// A target region: a structured reference, and a use of the device copy while the region runs (see
    /// [`MappingTable`]'s rules on which copy is current).
    Region,
    /// `target_enter_data!` / exit.
    Dynamic,
}

/// One host range to map: `[begin, begin+size)` inside the slice `[base, base+base_size)`.
#[derive(Clone, Copy, Debug)]
pub struct Range {
    pub begin: usize,
    pub size: usize,
    pub base: usize,
    pub base_size: usize,
    /// The elements' alignment, which the device copy honours.
    pub align: usize,
}

impl Range {
    /// A whole object or slice.
    #[cfg(test)]
    pub fn whole(begin: usize, size: usize) -> Range {
        Range {
            begin,
            size,
            base: begin,
            base_size: size,
            align: 1,
        }
    }
}

#[derive(Debug, Clone, thiserror::Error)]
pub enum MapError {
    #[error("`present` data is not mapped on the device: host address {begin:#x}, {size} bytes")]
    NotPresent { begin: usize, size: usize },
    #[error(
        "host range {begin:#x}..{end:#x} overlaps the mapped range {mapped_begin:#x}..{mapped_end:#x} without being \
         inside it; OpenMP does not allow extending a mapping (map the whole range first, or the same section)"
    )]
    Extends {
        begin: usize,
        end: usize,
        mapped_begin: usize,
        mapped_end: usize,
    },
    #[error("host address {begin:#x} is not an associated pointer")]
    NotAssociated { begin: usize },
    #[error(
        "the device copy of host range {begin:#x}..{end:#x} is in use by {regions} running region(s) on other \
         threads; {what} would race with them (wait for those regions to return first)"
    )]
    InUse {
        begin: usize,
        end: usize,
        regions: u64,
        /// What was refused: "copying host data into it", "copying it to the host while a region writes it".
        what: &'static str,
    },
    #[error(
        "host range {begin:#x}..{end:#x} overlaps host range {mapped_begin:#x}..{mapped_end:#x}, whose copy on device \
         {device} a region may have changed, so the host's copy is stale and using it would compute on, or copy, \
         old data; bring that range to the host first (`target_update!(from: ..)` on device {device}), or use it on \
         device {device}"
    )]
    Stale {
        begin: usize,
        end: usize,
        mapped_begin: usize,
        mapped_end: usize,
        /// The device holding the current data.
        device: i32,
    },
    #[error(
        "integer atomics at host range {begin:#x}..{end:#x} cannot be used by this device: atomics are never copied \
         (host threads may update them while a region runs, and a copy would lose updates), and this device's \
         memory is not the host's; use them on a device that shares the host's memory (host-elf, gpu-sim, the host \
         fallback), or keep the counts in a `DeviceBuffer` of atomics or a `reduction`"
    )]
    AtomicsNotShared { begin: usize, end: usize },
    /// The device could not allocate or copy.
    #[error(transparent)]
    Device(#[from] PluginError),
    /// One of the above, for the variable written at `site`.
    #[error("`{}` ({}:{}): {source}", site.name, site.file, site.line)]
    Of {
        site: &'static offload_model::abi::VarSite,
        source: Box<MapError>,
    },
}

#[derive(Debug)]
pub struct MappingTable {
    /// The device whose table this is, as the directory knows it.
    device: i32,
    /// Which copies are current, across every device (`super::directory`).
    dir: Arc<Directory>,
    entries: BTreeMap<usize, MapEntry>,
    /// Allocations that regions use without a reference count of their own (zero-length sections of present data):
    /// allocation -> (pins, whether its entry has died). A pinned block outlives its entry until the last pin goes,
    /// so a kernel never runs on freed memory, while copies still follow OpenMP's counts. A pin is a running
    /// region's use of its entry's device copy, as the entry's `uses` are.
    pins: BTreeMap<DevicePtr, (u64, bool)>,
}

/// A table of its own, with a directory of its own (the unit tests'), as device 0.
impl Default for MappingTable {
    fn default() -> Self {
        MappingTable::new(0, Arc::default())
    }
}

enum Found {
    /// The entry starting at this host address contains the range.
    Inside(usize),
    Absent,
}

impl MappingTable {
    /// The empty table of `device`, which reports its copies to `dir`.
    pub fn new(device: i32, dir: Arc<Directory>) -> Self {
        MappingTable {
            device,
            dir,
            entries: BTreeMap::new(),
            pins: BTreeMap::new(),
        }
    }

    /// The directory this table reports to.
    pub fn directory(&self) -> &Directory {
        &self.dir
    }

    /// [`MapError::Stale`] for `[begin, end)` if another device's copy of it may be newer than the host's.
    fn newer_elsewhere(&self, begin: usize, end: usize) -> Result<(), MapError> {
        match self.dir.newer(Some(self.device), begin, end) {
            Some(h) => Err(MapError::stale(begin, end, h)),
            None => Ok(()),
        }
    }

    /// Brings the stale parts of the entry at `b` within `[begin, end)` up to date from the host before a region
    /// uses them: refused if another device holds newer data there ([`MapError::Stale`]) or a running region uses
    /// them ([`MapError::InUse`]).
    ///
    /// # Safety
    /// The host range is readable.
    unsafe fn refresh(
        &self,
        dev: &ObservedDevice,
        b: usize,
        begin: usize,
        end: usize,
    ) -> Result<(), MapError> {
        let e = &self.entries[&b];
        let (begin, end) = (begin.max(b), end.min(e.end));
        for (sb, se) in self.dir.stale_parts(self.device, b, begin, end) {
            self.newer_elsewhere(sb, se)?;
            let users = self.users(e, sb, se);
            if users > 0 {
                return Err(MapError::InUse {
                    begin: sb,
                    end: se,
                    regions: users,
                    what: "refreshing its stale part from the host",
                });
            }
            // SAFETY: per the contract; the device range lies in the entry.
            unsafe { dev.submit(e.tgt + (sb - b) as u64, sb, se - sb, TO) }?;
            self.dir.copied_in(self.device, b, sb, se, false);
        }
        Ok(())
    }

    fn find(&self, begin: usize, size: usize) -> Result<Found, MapError> {
        let end = begin + size.max(1);
        if let Some((&b, e)) = self.entries.range(..=begin).next_back() {
            if begin < e.end {
                if end <= e.end {
                    return Ok(Found::Inside(b));
                }
                return Err(MapError::Extends {
                    begin,
                    end,
                    mapped_begin: b,
                    mapped_end: e.end,
                });
            }
        }
        if let Some((&b, e)) = self.entries.range(begin..end).next() {
            return Err(MapError::Extends {
                begin,
                end,
                mapped_begin: b,
                mapped_end: e.end,
            });
        }
        Ok(Found::Absent)
    }

    /// Device address of host address `begin`, if `[begin, begin+size)` is mapped.
    pub fn lookup(&self, begin: usize, size: usize) -> Option<DevicePtr> {
        match self.find(begin, size) {
            Ok(Found::Inside(b)) => Some(self.entries[&b].tgt + (begin - b) as u64),
            _ => None,
        }
    }

    /// A zero-length section's slice, if it lies in a present entry's allocation: the device address of its base
    /// `r.base`, with the allocation pinned (`Some`) until [`MappingTable::unpin`] so it cannot be freed under the
    /// region; `None` for an associated pointer's memory, which is the user's to keep. The region uses the copy as
    /// a region mapping the slice would: its stale parts are refreshed first (refused where another device holds
    /// newer data), and a region whose map of `map_type` may write the slice makes the copy newer there.
    ///
    /// # Safety
    /// The slice's host range is readable.
    pub unsafe fn pin_slice(
        &mut self,
        dev: &ObservedDevice,
        r: Range,
        map_type: u64,
    ) -> Result<Option<(DevicePtr, Option<DevicePtr>)>, MapError> {
        let Some((&b, e)) = self.entries.range(..=r.begin).next_back() else {
            return Ok(None);
        };
        let inside = r.begin >= b
            && r.begin <= e.end
            && r.base >= e.extent.0
            && r.base + r.base_size <= e.extent.1;
        if !inside {
            return Ok(None);
        }
        let (lo, hi) = (r.base.max(b), (r.base + r.base_size).min(e.end));
        // SAFETY: per the contract.
        unsafe { self.refresh(dev, b, lo, hi) }?;
        let e = &self.entries[&b];
        let base = e.tgt + (r.begin - b) as u64 - (r.begin - r.base) as u64;
        let alloc = e.alloc;
        if writes_device(map_type) && lo < hi {
            self.dir.device_writes(self.device, b, lo, hi);
        }
        if let Some(a) = alloc {
            self.pins.entry(a).or_insert((0, false)).0 += 1;
        }
        Ok(Some((base, alloc)))
    }

    /// Drops a pin [`MappingTable::pin_slice`] took; frees the allocation if its entry died meanwhile.
    ///
    /// # Safety
    /// `alloc` was pinned on this table and device, and the region using it is over.
    pub unsafe fn unpin(&mut self, dev: &ObservedDevice, alloc: DevicePtr) {
        let Some(p) = self.pins.get_mut(&alloc) else {
            return;
        };
        p.0 -= 1;
        if p.0 == 0 {
            let orphaned = p.1;
            self.pins.remove(&alloc);
            if orphaned {
                // SAFETY: its entry is gone and this was the last pin.
                unsafe { dev.free(alloc) };
            }
        }
    }

    /// Whether any present entry's host range intersects `[begin, end)`: the device may hold the current copy of
    /// some of that data.
    pub fn intersects(&self, begin: usize, end: usize) -> bool {
        let end = end.max(begin + 1);
        self.entries
            .range(..end)
            .next_back()
            .is_some_and(|(_, e)| e.end > begin)
    }

    /// Running regions using `e`'s device copy of `[begin, end)`: those that can reach it, and the pins on its
    /// allocation (a pinned region can reach the whole allocation).
    fn users(&self, e: &MapEntry, begin: usize, end: usize) -> u64 {
        let pins = e.alloc.and_then(|a| self.pins.get(&a)).map_or(0, |p| p.0);
        e.users_over(begin, end, false) + pins
    }

    /// Whether the entry holding `begin` records a device copy newer than the host's.
    #[cfg(test)]
    pub fn device_newer(&self, begin: usize) -> Option<bool> {
        match self.find(begin, 1) {
            Ok(Found::Inside(b)) => Some(self.dir.is_newer(self.device, b)),
            _ => None,
        }
    }

    /// The reference counts (structured, dynamic) of the entry holding `begin`.
    #[cfg(test)]
    pub fn counts(&self, begin: usize) -> Option<(u64, u64)> {
        match self.find(begin, 1) {
            Ok(Found::Inside(b)) => self.entries.get(&b).map(|e| (e.structured, e.dynamic)),
            _ => None,
        }
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Enters a mapping (creating it, or adding a reference) and returns the device address of `r.begin`. A
    /// region's entry ([`RefKind::Region`]) also starts its use of the device copy, which its exit ends.
    ///
    /// # Safety
    /// `r`'s host range is readable.
    pub unsafe fn enter(
        &mut self,
        dev: &ObservedDevice,
        r: Range,
        map_type: u64,
        kind: RefKind,
    ) -> Result<DevicePtr, MapError> {
        match self.find(r.begin, r.size)? {
            Found::Inside(b) => {
                let e = &self.entries[&b];
                // The region forms the whole slice on the device: it must lie in the existing allocation.
                if r.base < e.extent.0 || r.base + r.base_size > e.extent.1 {
                    return Err(MapError::Extends {
                        begin: r.base,
                        end: r.base + r.base_size,
                        mapped_begin: e.extent.0,
                        mapped_end: e.extent.1,
                    });
                }
                let tgt = e.tgt + (r.begin - b) as u64;
                let end = r.begin + r.size;
                if map_type & (TO | ALWAYS) == TO | ALWAYS {
                    let users = self.users(e, r.begin, end);
                    if users > 0 {
                        return Err(MapError::InUse {
                            begin: r.begin,
                            end,
                            regions: users,
                            what: "an `always, to` map copying host data into it",
                        });
                    }
                    self.newer_elsewhere(r.begin, end)?;
                    // SAFETY: per the contract; the device range lies inside the entry.
                    unsafe { dev.submit(tgt, r.begin, r.size, map_type) }?;
                    let whole = r.begin == b && end == e.end;
                    self.dir.copied_in(self.device, b, r.begin, end, whole);
                }
                if kind == RefKind::Region {
                    // The region may use its whole slice: what of it this copy holds must be current first.
                    // SAFETY: per the contract, the region's slice is readable.
                    unsafe { self.refresh(dev, b, r.base, reach(&r).1) }?;
                }
                let Some(e) = self.entries.get_mut(&b) else {
                    unreachable!("`find` returns the key of an entry")
                };
                match kind {
                    RefKind::Structured => e.structured += 1,
                    RefKind::Region => {
                        e.structured += 1;
                        if e.begin_use(&r, map_type) {
                            // What it writes that the copy holds (the rest of its slice is never copied back).
                            let (lo, hi) = reach(&r);
                            self.dir
                                .device_writes(self.device, b, lo.max(b), hi.min(e.end));
                        }
                    }
                    RefKind::Dynamic => e.dynamic = e.dynamic.saturating_add(1),
                }
                observe::mapping(Change::Up, b, e.end - b, e.tgt, e.structured, e.dynamic);
                Ok(tgt)
            }
            Found::Absent => {
                if map_type & PRESENT != 0 {
                    return Err(MapError::NotPresent {
                        begin: r.begin,
                        size: r.size,
                    });
                }
                // A copy made from host data another device has changed would be stale from the start.
                self.newer_elsewhere(r.begin, r.begin + r.size)?;
                let alloc = dev.alloc(r.base_size.max(r.size), r.align)?;
                let tgt = alloc + (r.begin - r.base) as u64;
                if map_type & TO != 0 {
                    // SAFETY: per the contract; `tgt..tgt+size` lies in the new allocation.
                    if let Err(e) = unsafe { dev.submit(tgt, r.begin, r.size, map_type) } {
                        // SAFETY: ours, unused.
                        unsafe { dev.free(alloc) };
                        return Err(e.into());
                    }
                }
                let extent = (r.base, r.base + r.base_size.max(r.size));
                let mut e = MapEntry::new(r.begin + r.size, extent, tgt);
                e.alloc = Some(alloc);
                let end = r.begin + r.size;
                let written = match kind {
                    RefKind::Structured => {
                        e.structured = 1;
                        false
                    }
                    RefKind::Region => {
                        e.structured = 1;
                        e.begin_use(&r, map_type)
                    }
                    RefKind::Dynamic => {
                        e.dynamic = 1;
                        false
                    }
                };
                if kind == RefKind::Region {
                    // A region's own copy is not tracked: while the region runs it holds the data (`&mut` if it
                    // may write it), so no other device or host fallback can use or write those bytes, and
                    // whoever enters this copy meanwhile shares a `&` borrow with it, under which nothing writes
                    // them either. Its writes still make other devices' copies stale.
                    if written {
                        // Only the section is ever copied back: the rest of the slice is unspecified.
                        self.dir.device_writes(self.device, r.begin, r.begin, end);
                    }
                } else {
                    self.dir.track(self.device, r.begin, end, false);
                }
                observe::mapping(Change::New, r.begin, r.size, tgt, e.structured, e.dynamic);
                self.entries.insert(r.begin, e);
                Ok(tgt)
            }
        }
    }

    /// Exits a mapping: drops a reference (`delete`: all of them), copies out (`from`, when the entry dies or with
    /// `always`) unless `copy_out` is false (a failed region), and frees the device copy when no reference is left.
    /// A dying entry of host atomics that a region wrote is copied out (the range this exit holds) whatever
    /// `map_type` says, but for `delete` and a failed region's exit (`copy_out` false with [`RefKind::Region`]).
    /// Exiting data that is not mapped does nothing, unless `present` asks for it. A region's exit
    /// ([`RefKind::Region`], with the map type it entered with) ends its use of the device copy.
    ///
    /// # Safety
    /// The host range is writable if `copy_out` and `map_type` has `FROM`; it is live if the host data is atomics
    /// (which are stored to through shared borrows).
    pub unsafe fn exit(
        &mut self,
        dev: &ObservedDevice,
        begin: usize,
        size: usize,
        map_type: u64,
        kind: RefKind,
        copy_out: bool,
    ) -> Result<(), MapError> {
        let b = match self.find(begin, size)? {
            Found::Inside(b) => b,
            Found::Absent if map_type & PRESENT != 0 => {
                return Err(MapError::NotPresent { begin, size })
            }
            Found::Absent => return Ok(()),
        };
        let Some(e) = self.entries.get_mut(&b) else {
            unreachable!("`find` returns the key of an entry")
        };
        if kind == RefKind::Region {
            e.end_use(begin, size, map_type);
        }
        if map_type & DELETE != 0 {
            e.structured = 0;
            // An associated pointer stays until it is disassociated, as in libomptarget.
            if e.dynamic != INFINITE {
                e.dynamic = 0;
            }
        } else {
            match kind {
                RefKind::Structured | RefKind::Region => {
                    e.structured = e.structured.saturating_sub(1)
                }
                RefKind::Dynamic if e.dynamic != INFINITE => {
                    e.dynamic = e.dynamic.saturating_sub(1)
                }
                RefKind::Dynamic => {}
            }
        }
        let dies = e.total() == 0;
        let copy = (b, e.tgt);
        // A dying copy leaves the directory first (one lock for that and its stale parts): no other thread can make
        // it stale meanwhile, as that needs a writer of the bytes this exit holds.
        let copies = copy_out && map_type & FROM != 0 && (dies || map_type & ALWAYS != 0);
        let stale = if dies {
            self.dir.untrack(self.device, b)
        } else if copies {
            self.dir.stale_parts(self.device, b, begin, begin + size)
        } else {
            Vec::new()
        };
        let result = if copies {
            // SAFETY: per the contract; the range lies in the entry.
            unsafe { retrieve_current(dev, copy, (begin, begin + size), &stale, map_type) }
        } else {
            Ok(())
        };
        if dies {
            let (end, tgt, alloc) = (e.end, e.tgt, e.alloc);
            self.entries.remove(&b);
            observe::mapping(Change::Removed, b, end - b, tgt, 0, 0);
            if let Some(a) = alloc {
                match self.pins.get_mut(&a) {
                    // A region still runs on it: the last unpin frees it.
                    Some(p) => p.1 = true,
                    // SAFETY: the entry owned this allocation and no reference or pin is left.
                    None => unsafe { dev.free(a) },
                }
            }
        } else {
            if copy_out
                && map_type & FROM != 0
                && map_type & ALWAYS != 0
                && begin == b
                && begin + size == e.end
                && !e.written()
            {
                // The host holds what the copy holds (its stale parts' current data is elsewhere).
                self.dir.copied_out(self.device, b);
            }
            observe::mapping(Change::Down, b, e.end - b, e.tgt, e.structured, e.dynamic);
        }
        result
    }

    /// `target_update!`: copies a mapped range to (`TO`) or from (`FROM`) the device; nothing if it is not mapped.
    /// Refused ([`MapError::InUse`]) while a running region that can reach the range uses it (`TO`) or may write it
    /// (`FROM`); regions on other parts of the mapping do not count.
    ///
    /// # Safety
    /// The host range is readable (`TO`) or writable (`FROM`).
    pub unsafe fn update(
        &mut self,
        dev: &ObservedDevice,
        begin: usize,
        size: usize,
        motion: u64,
    ) -> Result<(), MapError> {
        let b = match self.find(begin, size)? {
            Found::Inside(b) => b,
            Found::Absent if motion & PRESENT != 0 => {
                return Err(MapError::NotPresent { begin, size })
            }
            Found::Absent => return Ok(()),
        };
        let e = &self.entries[&b];
        let (busy, what) = if motion & TO != 0 {
            (
                self.users(e, begin, begin + size),
                "`target_update!(to: ..)` writing it",
            )
        } else {
            (
                e.users_over(begin, begin + size, true),
                "`target_update!(from: ..)` reading it while they write it",
            )
        };
        if busy > 0 {
            return Err(MapError::InUse {
                begin,
                end: begin + size,
                regions: busy,
                what,
            });
        }
        let (tgt, end) = (e.tgt + (begin - b) as u64, begin + size);
        // Both copies are equal again where it was all of the copy (no region writes it: checked above).
        let whole = begin == b && end == e.end;
        if motion & TO != 0 {
            // The host's data must be the current data.
            self.newer_elsewhere(begin, end)?;
            // SAFETY: per the contract; the device range lies inside the entry.
            unsafe { dev.submit(tgt, begin, size, motion) }?;
            self.dir.copied_in(self.device, b, begin, end, whole);
        }
        if motion & FROM != 0 {
            // Where this copy is stale the host's data is current, unless another device's is newer: then neither
            // copy here is, and the update says where the current data is.
            for (sb, se) in self.dir.stale_parts(self.device, b, begin, end) {
                self.newer_elsewhere(sb, se)?;
            }
            let stale = self.dir.stale_parts(self.device, b, begin, end);
            // SAFETY: per the contract; the range lies in the entry.
            unsafe { retrieve_current(dev, (b, e.tgt), (begin, end), &stale, motion) }?;
            if whole {
                self.dir.copied_out(self.device, b);
            }
        }
        Ok(())
    }

    /// `omp_target_associate_ptr`: `[begin, begin+size)` is present at `tgt` (the user's device memory, never freed
    /// here) until disassociated. Its device copy may be newer than the host's from the start: the user writes it.
    pub fn associate(&mut self, begin: usize, size: usize, tgt: DevicePtr) -> Result<(), MapError> {
        match self.find(begin, size)? {
            Found::Inside(b) if b == begin && self.entries[&b].tgt == tgt => Ok(()),
            Found::Inside(b) => {
                let e = &self.entries[&b];
                Err(MapError::Extends {
                    begin,
                    end: begin + size,
                    mapped_begin: b,
                    mapped_end: e.end,
                })
            }
            Found::Absent => {
                let end = begin + size.max(1);
                let mut e = MapEntry::new(end, (begin, end), tgt);
                e.dynamic = INFINITE;
                self.dir.track(self.device, begin, end, true);
                observe::mapping(Change::New, begin, e.end - begin, tgt, 0, INFINITE);
                self.entries.insert(begin, e);
                Ok(())
            }
        }
    }

    /// `omp_target_disassociate_ptr`.
    pub fn disassociate(&mut self, begin: usize) -> Result<(), MapError> {
        match self.entries.get(&begin) {
            Some(e) if e.alloc.is_none() => {
                observe::mapping(Change::Removed, begin, e.end - begin, e.tgt, 0, 0);
                self.entries.remove(&begin);
                let _ = self.dir.untrack(self.device, begin);
                Ok(())
            }
            _ => Err(MapError::NotAssociated { begin }),
        }
    }
}

#[cfg(test)]
mod tests;
