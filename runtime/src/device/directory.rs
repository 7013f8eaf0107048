//! The coherence directory: which copy of host data is current, across the host and every device, as a
//! cache-coherence directory keeps it for caches. Each device's present table says where its copies are and who
//! uses them; this says, for every device copy of a host range, whether it may hold writes the host lacks (it is
//! *newer*) and which of its bytes are older than the current data (its *stale* parts). The host's copy is current
//! wherever no device copy is newer.
//!
//! The rules every construct follows (the present table and the region call apply them):
//! - A device copy is made from host data, refreshed from it, or used by a region only where no other device's copy
//!   is newer: the host's data is stale there, and the construct fails with [`MapError::Stale`](super::MapError)
//!   naming the device that holds the current data (`target_update!(from: ..)` there brings it to the host).
//! - A region that may write a device copy makes it newer, and every other device's copy of those bytes stale; the
//!   host fallback that may write host data makes every device's copy of it stale.
//! - A region uses a copy only after its stale parts are refreshed from the host; a copy back to the host (an exit
//!   or `target_update!(from: ..)`) skips a copy's stale parts, so an older copy never overwrites newer data.
//!
//! Safe code cannot have two writers of one host range at once (a region that writes holds it by `&mut`, and
//! atomics are used in place, never copied), so at most one copy of any byte is newer than the host's. For the same
//! reason the copy a region makes for itself (mapped for one call, not present before) is not tracked: while it
//! lives the region holds its data, so nothing else can write those bytes or find them newer, and the common call
//! costs no lock here (only a writing region's marking of other devices' copies, where any are tracked).
//!
//! Locking: callers may hold one device's present table when they call in; the directory's own lock is taken last
//! and never held while a table is locked or data is copied, so no two locks are ever waited for in opposite order.

#[cfg(loom)]
use loom::sync::{
    atomic::{AtomicUsize, Ordering},
    Mutex, MutexGuard,
};
#[cfg(not(loom))]
use std::sync::{
    atomic::{AtomicUsize, Ordering},
    Mutex, MutexGuard,
};
use std::sync::{Arc, LazyLock};

/// A device copy that may be newer than the host's: the device and the host range the copy covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Holder {
    pub device: i32,
    pub begin: usize,
    pub end: usize,
}

/// Every device's copies of host data and how current each is. One for the process ([`Directory::global`]); the
/// present tables' unit tests make their own.
#[derive(Debug)]
pub struct Directory {
    copies: Mutex<Copies>,
    /// How many copies are tracked, read without the lock: none on the host fallback's common path (no data on any
    /// device), which then skips the lock.
    tracked: AtomicUsize,
}

#[derive(Default, Debug)]
struct Copies {
    /// Sorted by (first host byte, device): one device's copies never overlap, different devices' may. A vector,
    /// not a tree: a region's own copy is added and removed on every call, and the vector keeps its memory where a
    /// tree would allocate a node for the first entry and free it with the last.
    map: Vec<((usize, i32), Copy)>,
    /// The longest copy's length, never lowered: a copy intersecting a range starts at most this far before it.
    longest: usize,
}

/// One device copy of `[begin, end)` (its key's begin).
#[derive(Debug)]
struct Copy {
    end: usize,
    /// It may hold writes the host lacks.
    newer: bool,
    /// Host ranges where it is older than the current data: sorted, disjoint, inside the copy.
    stale: Vec<(usize, usize)>,
}

impl Default for Directory {
    fn default() -> Self {
        Directory {
            copies: Mutex::new(Copies::default()),
            tracked: AtomicUsize::new(0),
        }
    }
}

static GLOBAL: LazyLock<Arc<Directory>> = LazyLock::new(Arc::default);

impl Copies {
    fn at(&self, key: &(usize, i32)) -> Result<usize, usize> {
        self.map.binary_search_by(|(k, _)| k.cmp(key))
    }

    fn insert(&mut self, key: (usize, i32), copy: Copy) -> Option<Copy> {
        match self.at(&key) {
            Ok(k) => Some(std::mem::replace(&mut self.map[k].1, copy)),
            Err(k) => {
                self.map.insert(k, (key, copy));
                None
            }
        }
    }

    fn remove(&mut self, key: &(usize, i32)) -> Option<Copy> {
        self.at(key).ok().map(|k| self.map.remove(k).1)
    }

    fn get(&self, key: &(usize, i32)) -> Option<&Copy> {
        self.at(key).ok().map(|k| &self.map[k].1)
    }

    fn get_mut(&mut self, key: &(usize, i32)) -> Option<&mut Copy> {
        self.at(key).ok().map(|k| &mut self.map[k].1)
    }

    /// The index range of the copies that may intersect `[begin, end)`: those starting from `longest` before it.
    fn window(&self, begin: usize, end: usize) -> std::ops::Range<usize> {
        let from = (begin.saturating_sub(self.longest), i32::MIN);
        let lo = self.map.partition_point(|(k, _)| *k < from);
        let hi = self.map.partition_point(|(k, _)| *k < (end, i32::MIN));
        lo..hi.max(lo)
    }

    /// The copies intersecting `[begin, end)` (`end > begin`), with their keys.
    fn over(&self, begin: usize, end: usize) -> impl Iterator<Item = (&(usize, i32), &Copy)> {
        let w = self.window(begin, end);
        self.map[w]
            .iter()
            .map(|(k, c)| (k, c))
            .filter(move |(_, c)| c.end > begin)
    }

    fn over_mut(
        &mut self,
        begin: usize,
        end: usize,
    ) -> impl Iterator<Item = (&(usize, i32), &mut Copy)> {
        let w = self.window(begin, end);
        self.map[w]
            .iter_mut()
            .map(|(k, c)| (&*k, c))
            .filter(move |(_, c)| c.end > begin)
    }
}

/// A range made non-empty: a zero-length one still names its first byte.
fn span(begin: usize, end: usize) -> (usize, usize) {
    (begin, end.max(begin + 1))
}

impl Directory {
    /// The process's directory, which every device table reports to.
    pub fn global() -> &'static Arc<Directory> {
        &GLOBAL
    }

    fn lock(&self) -> MutexGuard<'_, Copies> {
        self.copies.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `device` made a copy of `[begin, end)`: equal to the host's data, or (`newer`, memory the user associated)
    /// holding data of its own.
    pub fn track(&self, device: i32, begin: usize, end: usize, newer: bool) {
        let (begin, end) = span(begin, end);
        let mut c = self.lock();
        c.longest = c.longest.max(end - begin);
        let old = c.insert(
            (begin, device),
            Copy {
                end,
                newer,
                stale: Vec::new(),
            },
        );
        if old.is_none() {
            self.tracked.fetch_add(1, Ordering::Release);
        }
    }

    /// `device`'s copy starting at `begin` is gone; returns the parts where it was stale.
    #[inline]
    pub fn untrack(&self, device: i32, begin: usize) -> Vec<(usize, usize)> {
        if self.tracked.load(Ordering::Acquire) == 0 {
            return Vec::new();
        }
        self.untrack_tracked(device, begin)
    }

    // The fast paths above are inlined into every map and exit; the rest stays out of line.
    #[inline(never)]
    fn untrack_tracked(&self, device: i32, begin: usize) -> Vec<(usize, usize)> {
        match self.lock().remove(&(begin, device)) {
            Some(c) => {
                self.tracked.fetch_sub(1, Ordering::Release);
                c.stale
            }
            None => Vec::new(),
        }
    }

    /// A copy that may be newer than the host's over some of `[begin, end)`, on a device other than `asker` (any
    /// device for `None`, the host asking).
    #[inline]
    pub fn newer(&self, asker: Option<i32>, begin: usize, end: usize) -> Option<Holder> {
        if self.tracked.load(Ordering::Acquire) == 0 {
            return None;
        }
        self.newer_tracked(asker, begin, end)
    }

    #[inline(never)]
    fn newer_tracked(&self, asker: Option<i32>, begin: usize, end: usize) -> Option<Holder> {
        let (begin, end) = span(begin, end);
        self.lock()
            .over(begin, end)
            .find(|(&(_, d), c)| c.newer && Some(d) != asker)
            .map(|(&(b, d), c)| Holder {
                device: d,
                begin: b,
                end: c.end,
            })
    }

    /// A region that may write `[begin, end)` through `device`'s copy starting at `copy` runs: that copy may be
    /// newer than the host's from now on, and every other device's copy of those bytes is stale.
    #[inline]
    pub fn device_writes(&self, device: i32, copy: usize, begin: usize, end: usize) {
        if self.tracked.load(Ordering::Acquire) == 0 {
            return;
        }
        self.device_writes_tracked(device, copy, begin, end)
    }

    #[inline(never)]
    fn device_writes_tracked(&self, device: i32, copy: usize, begin: usize, end: usize) {
        let (begin, end) = span(begin, end);
        let mut c = self.lock();
        for (&(b, d), other) in c.over_mut(begin, end) {
            if d != device {
                add(&mut other.stale, (begin.max(b), end.min(other.end)));
            }
        }
        if let Some(own) = c.get_mut(&(copy, device)) {
            own.newer = true;
        }
    }

    /// The host's data of `[begin, end)` changed (the host fallback wrote it): every device's copy of it is stale.
    #[inline]
    pub fn host_writes(&self, begin: usize, end: usize) {
        if self.tracked.load(Ordering::Acquire) == 0 {
            return;
        }
        self.host_writes_tracked(begin, end)
    }

    #[inline(never)]
    fn host_writes_tracked(&self, begin: usize, end: usize) {
        let (begin, end) = span(begin, end);
        for (&(b, _), other) in self.lock().over_mut(begin, end) {
            add(&mut other.stale, (begin.max(b), end.min(other.end)));
        }
    }

    /// `device`'s copy starting at `copy` holds the host's data of `[begin, end)` again (copied in): it is no longer
    /// stale there, and no longer newer if that was all of it (`whole`).
    pub fn copied_in(&self, device: i32, copy: usize, begin: usize, end: usize, whole: bool) {
        let (begin, end) = span(begin, end);
        if let Some(own) = self.lock().get_mut(&(copy, device)) {
            remove(&mut own.stale, (begin, end));
            if whole {
                own.newer = false;
            }
        }
    }

    /// The host holds all of `device`'s copy starting at `copy` (copied back whole) and no region writes it: it is no
    /// longer newer.
    pub fn copied_out(&self, device: i32, copy: usize) {
        if let Some(own) = self.lock().get_mut(&(copy, device)) {
            own.newer = false;
        }
    }

    /// The parts of `[begin, end)` where `device`'s copy starting at `copy` is stale, in order.
    pub fn stale_parts(
        &self,
        device: i32,
        copy: usize,
        begin: usize,
        end: usize,
    ) -> Vec<(usize, usize)> {
        let (begin, end) = span(begin, end);
        let c = self.lock();
        let Some(own) = c.get(&(copy, device)) else {
            return Vec::new();
        };
        own.stale
            .iter()
            .filter(|&&(b, e)| b < end && begin < e)
            .map(|&(b, e)| (b.max(begin), e.min(end)))
            .collect()
    }

    /// Whether no copy is tracked: the host fallback's common path skips the directory.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.tracked.load(Ordering::Acquire) == 0
    }

    /// The copy of `device` holding `[begin, end)`, as its host range, if one is tracked (libomptarget's devices,
    /// whose tables are not ours, find their copies here).
    pub fn copy_holding(&self, device: i32, begin: usize, end: usize) -> Option<(usize, usize)> {
        if self.tracked.load(Ordering::Acquire) == 0 {
            return None;
        }
        let (begin, end) = span(begin, end);
        self.lock()
            .over(begin, end)
            .find(|(&(b, d), c)| d == device && b <= begin && end <= c.end)
            .map(|(&(b, _), c)| (b, c.end))
    }

    /// Whether `device`'s copy starting at `copy` may be newer than the host's.
    #[cfg(test)]
    pub fn is_newer(&self, device: i32, copy: usize) -> bool {
        self.lock().get(&(copy, device)).is_some_and(|c| c.newer)
    }
}

/// Adds `part` to the sorted, disjoint ranges `set`, merging what touches it.
fn add(set: &mut Vec<(usize, usize)>, part: (usize, usize)) {
    let (mut b, mut e) = part;
    if b >= e {
        return;
    }
    set.retain(|&(x, y)| {
        if y < b || e < x {
            true
        } else {
            b = b.min(x);
            e = e.max(y);
            false
        }
    });
    let at = set.partition_point(|&(x, _)| x < b);
    set.insert(at, (b, e));
}

/// Removes `part` from the sorted, disjoint ranges `set`.
fn remove(set: &mut Vec<(usize, usize)>, part: (usize, usize)) {
    let (b, e) = part;
    let mut out = Vec::with_capacity(set.len() + 1);
    for &(x, y) in set.iter() {
        if y <= b || e <= x {
            out.push((x, y));
            continue;
        }
        if x < b {
            out.push((x, b));
        }
        if e < y {
            out.push((e, y));
        }
    }
    *set = out;
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::sync::atomic::AtomicBool;
    use loom::sync::Arc;

    /// A copy that became newer before a thread learns of it (here through a flag; in a program through the borrow
    /// it hands over) is seen by that thread's check, fast path (`tracked`) included, in every interleaving; and a
    /// concurrent write elsewhere and refresh leave consistent state.
    #[test]
    fn loom_a_newer_copy_published_before_a_check_is_seen() {
        loom::model(|| {
            let d = Arc::new(Directory::default());
            let published = Arc::new(AtomicBool::new(false));
            let (d1, p1) = (d.clone(), published.clone());
            let writer = loom::thread::spawn(move || {
                d1.track(0, 100, 200, false);
                d1.device_writes(0, 100, 100, 200);
                p1.store(true, Ordering::Release);
            });
            let (d2, p2) = (d.clone(), published.clone());
            let reader = loom::thread::spawn(move || {
                // Another device's copy of other bytes, made meanwhile.
                d2.track(1, 300, 400, false);
                if p2.load(Ordering::Acquire) {
                    assert_eq!(d2.newer(Some(1), 150, 160).map(|h| h.device), Some(0));
                    assert_eq!(d2.newer(None, 300, 400), None);
                }
            });
            writer.join().unwrap();
            reader.join().unwrap();
            assert!(d.newer(None, 0, 1000).is_some());
            let _ = d.untrack(0, 100);
            let _ = d.untrack(1, 300);
            assert_eq!(d.newer(None, 0, 1000), None);
        });
    }

    /// Regions on two devices writing the two halves of one buffer at once (disjoint `&mut` halves), while a third
    /// device holds a copy of the whole (a data region): both halves' writes mark the whole's copy stale there, in
    /// every interleaving, and neither half's copy is stale.
    #[test]
    fn loom_concurrent_writers_of_disjoint_parts_both_make_a_third_copy_stale() {
        loom::model(|| {
            let d = Arc::new(Directory::default());
            d.track(2, 0, 64, false);
            let handles: Vec<_> = [(0, 0), (1, 32)]
                .into_iter()
                .map(|(dev, lo)| {
                    let d = d.clone();
                    loom::thread::spawn(move || {
                        d.track(dev, lo, lo + 32, false);
                        d.device_writes(dev, lo, lo, lo + 32);
                    })
                })
                .collect();
            for h in handles {
                h.join().unwrap();
            }
            assert_eq!(d.stale_parts(2, 0, 0, 64), [(0, 64)]);
            assert!(d.stale_parts(0, 0, 0, 64).is_empty());
            assert!(d.stale_parts(1, 32, 0, 64).is_empty());
            assert!(d.is_newer(0, 0) && d.is_newer(1, 32) && !d.is_newer(2, 0));
        });
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn ranges_merge_and_split() {
        let mut s = Vec::new();
        add(&mut s, (10, 20));
        add(&mut s, (30, 40));
        add(&mut s, (20, 30));
        assert_eq!(s, [(10, 40)]);
        remove(&mut s, (15, 25));
        assert_eq!(s, [(10, 15), (25, 40)]);
        add(&mut s, (0, 5));
        assert_eq!(s, [(0, 5), (10, 15), (25, 40)]);
        remove(&mut s, (0, 100));
        assert!(s.is_empty());
    }

    #[test]
    fn a_write_on_one_device_makes_the_others_copies_stale_there() {
        let d = Directory::default();
        d.track(0, 100, 200, false);
        d.track(1, 150, 180, false);
        d.track(2, 300, 400, false);
        d.device_writes(0, 100, 100, 200);
        assert_eq!(
            d.newer(Some(1), 160, 170),
            Some(Holder {
                device: 0,
                begin: 100,
                end: 200
            })
        );
        assert_eq!(d.newer(Some(0), 100, 200), None, "its own copy");
        assert_eq!(d.stale_parts(1, 150, 0, 1000), [(150, 180)]);
        assert!(d.stale_parts(0, 100, 0, 1000).is_empty());
        assert!(d.stale_parts(2, 300, 0, 1000).is_empty());
        // Device 0's data reaches the host; device 1 refreshes part of its copy from it.
        d.copied_out(0, 100);
        assert_eq!(d.newer(None, 0, 1000), None);
        d.copied_in(1, 150, 150, 160, false);
        assert_eq!(d.stale_parts(1, 150, 0, 1000), [(160, 180)]);
        // The host fallback writes: every copy of those bytes is stale.
        d.host_writes(190, 310);
        assert_eq!(d.stale_parts(0, 100, 0, 1000), [(190, 200)]);
        assert_eq!(d.stale_parts(2, 300, 0, 1000), [(300, 310)]);
        let _ = d.untrack(0, 100);
        let _ = d.untrack(1, 150);
        let _ = d.untrack(2, 300);
        assert_eq!(d.tracked.load(Ordering::Relaxed), 0);
    }
}
