//! A device's present table: which host ranges have device copies, and OpenMP's reference counts on them.
//!
//! Each entry covers a host range `[begin, end)` and its device allocation, with a structured count (target regions,
//! `target data`) and a dynamic count (`target enter/exit data`). Data is copied in only when an entry is created
//! (count 0 to 1) and out only when it is destroyed (1 to 0), unless `always`.

use crate::plugin::{Device, DevicePtr};
use offload_model::abi::map_type::{ALWAYS, FROM, PRESENT, TO};
use std::collections::BTreeMap;

#[derive(Debug)]
struct MapEntry {
    end: usize,
    tgt: DevicePtr,
    structured: u64,
    dynamic: u64,
}

impl MapEntry {
    fn total(&self) -> u64 {
        self.structured + self.dynamic
    }
}

/// Which reference count a construct uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RefKind {
    /// Target regions and `target data`.
    Structured,
    /// `target enter data` / `target exit data`, which the data-environment constructs add.
    #[allow(dead_code)]
    Dynamic,
}

#[derive(Debug, thiserror::Error)]
pub enum MapError {
    #[error("`present` data is not mapped: host address {begin:#x}, {size} bytes")]
    NotPresent { begin: usize, size: usize },
    #[error(
        "host range {begin:#x}..{end:#x} overlaps a mapped range {mapped_begin:#x}..{mapped_end:#x} without being \
         inside it; OpenMP does not allow extending a mapping"
    )]
    Extends {
        begin: usize,
        end: usize,
        mapped_begin: usize,
        mapped_end: usize,
    },
    #[error("{0}")]
    Device(String),
}

#[derive(Default, Debug)]
pub struct MappingTable {
    entries: BTreeMap<usize, MapEntry>,
}

enum Found {
    Inside(usize),
    Absent,
}

impl MappingTable {
    fn find(&self, begin: usize, size: usize) -> Result<Found, MapError> {
        let end = begin + size;
        // The entry starting at or before `begin`, and any starting inside the range.
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

    /// Device address of `begin` if `[begin, begin+size)` is mapped.
    pub fn lookup(&self, begin: usize, size: usize) -> Option<DevicePtr> {
        match self.find(begin, size.max(1)) {
            Ok(Found::Inside(b)) => Some(self.entries[&b].tgt + (begin - b) as u64),
            _ => None,
        }
    }

    /// Enters a mapping (creating it, or adding a reference) and returns the device address of `begin`.
    ///
    /// # Safety
    /// `[begin, begin+size)` is readable host memory.
    pub unsafe fn enter(
        &mut self,
        dev: &dyn Device,
        begin: usize,
        size: usize,
        map_type: u64,
        kind: RefKind,
    ) -> Result<DevicePtr, MapError> {
        match self.find(begin, size)? {
            Found::Inside(b) => {
                let e = self.entries.get_mut(&b).expect("found above");
                match kind {
                    RefKind::Structured => e.structured += 1,
                    RefKind::Dynamic => e.dynamic += 1,
                }
                let tgt = e.tgt + (begin - b) as u64;
                if map_type & (TO | ALWAYS) == TO | ALWAYS {
                    // SAFETY: per the contract; the device range lies in the entry's allocation.
                    unsafe { dev.copy_to_device(tgt, begin as *const u8, size) }
                        .map_err(MapError::Device)?;
                }
                Ok(tgt)
            }
            Found::Absent => {
                if map_type & PRESENT != 0 {
                    return Err(MapError::NotPresent { begin, size });
                }
                let tgt = dev.alloc(size).map_err(MapError::Device)?;
                if map_type & TO != 0 {
                    // SAFETY: per the contract; `tgt` was just allocated with `size` bytes.
                    if let Err(e) = unsafe { dev.copy_to_device(tgt, begin as *const u8, size) } {
                        // SAFETY: `tgt` is ours and unused.
                        unsafe { dev.free(tgt) };
                        return Err(MapError::Device(e));
                    }
                }
                let (structured, dynamic) = match kind {
                    RefKind::Structured => (1, 0),
                    RefKind::Dynamic => (0, 1),
                };
                self.entries.insert(
                    begin,
                    MapEntry {
                        end: begin + size,
                        tgt,
                        structured,
                        dynamic,
                    },
                );
                Ok(tgt)
            }
        }
    }

    /// Exits a mapping: drops a reference, copies out (if `from` and the entry dies, or `always`) unless
    /// `copy_out` is false (a failed region), and frees the device copy when no reference is left.
    ///
    /// # Safety
    /// `[begin, begin+size)` is writable host memory if `copy_out`.
    pub unsafe fn exit(
        &mut self,
        dev: &dyn Device,
        begin: usize,
        size: usize,
        map_type: u64,
        kind: RefKind,
        copy_out: bool,
    ) -> Result<(), MapError> {
        let b = match self.find(begin, size)? {
            Found::Inside(b) => b,
            Found::Absent => return Ok(()),
        };
        let e = self.entries.get_mut(&b).expect("found above");
        let count = match kind {
            RefKind::Structured => &mut e.structured,
            RefKind::Dynamic => &mut e.dynamic,
        };
        *count = count.saturating_sub(1);
        let dies = e.total() == 0;
        let tgt = e.tgt + (begin - b) as u64;
        let result = if copy_out && map_type & FROM != 0 && (dies || map_type & ALWAYS != 0) {
            // SAFETY: per the contract.
            unsafe { dev.copy_from_device(begin as *mut u8, tgt, size) }.map_err(MapError::Device)
        } else {
            Ok(())
        };
        if dies {
            let e = self.entries.remove(&b).expect("found above");
            // SAFETY: the entry owned this allocation and no reference is left.
            unsafe { dev.free(e.tgt) };
        }
        result
    }
}
