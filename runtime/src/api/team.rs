//! Team and thread queries and the team barrier, as host code (and a region's host fallback) sees them; region code
//! on a device sees offload-device's twins with the same names.

use crate::host::thread::{
    host_barrier, host_geometry, host_team_shared, host_team_shared_atomics,
};

/// The team this thread belongs to (0 outside a parallel region).
pub fn omp_get_team_num() -> i32 {
    host_geometry().0 as i32
}

/// Teams in the current parallel region (1 outside one).
pub fn omp_get_num_teams() -> i32 {
    host_geometry().1 as i32
}

/// This thread's number in its team (0 outside a parallel region).
pub fn omp_get_thread_num() -> i32 {
    host_geometry().2 as i32
}

/// Threads in this thread's team (1 outside a parallel region).
pub fn omp_get_num_threads() -> i32 {
    host_geometry().3 as i32
}

/// Waits until every thread of this team reaches the barrier. Only for `teams, parallel` regions, where every thread
/// runs the whole body: called anywhere else (a work-shared loop, a serial region, host code) it panics, which fails
/// the region. If another thread of the team failed, or finished the region without reaching this barrier, it panics
/// too, so the region fails instead of waiting forever.
///
/// Every thread of a team must reach the same barriers. Here each thread publishes a value, and after the barrier
/// reads its neighbour's:
///
/// ```
/// use core::sync::atomic::{AtomicU32, Ordering::Relaxed};
/// use offload::{barrier, omp_get_num_threads, omp_get_team_num, omp_get_thread_num, target};
///
/// #[target(teams, parallel, num_teams(2), thread_limit(2))]
/// fn neighbours(posted: &[AtomicU32], seen: &[AtomicU32]) -> i32 {
///     // A team may get fewer threads than `thread_limit` asks: index by what it got.
///     let (t, i, m) = (omp_get_team_num() as usize, omp_get_thread_num() as usize, omp_get_num_threads() as usize);
///     posted[t * m + i].store((t * 10 + i) as u32, Relaxed);
///     barrier(); // the team's writes before its reads
///     seen[t * m + i].store(posted[t * m + (i + 1) % m].load(Relaxed), Relaxed);
///     omp_get_num_threads()
/// }
///
/// fn main() {
///     let posted: Vec<AtomicU32> = (0..4).map(|_| AtomicU32::new(0)).collect();
///     let seen: Vec<AtomicU32> = (0..4).map(|_| AtomicU32::new(0)).collect();
///     let m = neighbours(&posted, &seen) as usize;
///     for t in 0..2 {
///         for i in 0..m {
///             assert_eq!(seen[t * m + i].load(Relaxed), (t * 10 + (i + 1) % m) as u32);
///         }
///     }
/// }
/// ```
#[track_caller]
pub fn barrier() {
    host_barrier()
}

/// Calls `f` with the first `len` atomics of this team's shared memory (zeroed at launch, shared by the team's
/// threads) and returns what it returns. The slice cannot outlive the call, as the memory dies with the region.
/// Only `teams, parallel` regions have team-shared memory (48 KiB per team): anywhere else this panics, which fails
/// the region.
///
/// A launch's memory has one element type, the first call's: a later call of the launch asking for another type
/// (`AtomicU8` after `AtomicU64`) panics, naming both, since the same bytes as atomics of two widths are a
/// mixed-size race. Threads that call at once agree on the first type through one compare-exchange.
///
/// Each team gets its own memory, so the teams here sum their threads' numbers independently:
///
/// ```
/// use core::sync::atomic::{AtomicU32, Ordering::Relaxed};
/// use offload::{barrier, omp_get_num_threads, omp_get_team_num, omp_get_thread_num, target, team_shared};
///
/// #[target(teams, parallel, num_teams(3), thread_limit(4))]
/// fn team_sums(sums: &[AtomicU32]) -> i32 {
///     let me = omp_get_thread_num() as u32;
///     let total = team_shared(1, |acc: &[AtomicU32]| {
///         acc[0].fetch_add(me, Relaxed); // the memory starts zeroed
///         barrier(); // every thread of the team has added
///         acc[0].load(Relaxed)
///     });
///     if me == 0 {
///         sums[omp_get_team_num() as usize].store(total, Relaxed);
///     }
///     omp_get_num_threads()
/// }
///
/// fn main() {
///     let sums: Vec<AtomicU32> = (0..3).map(|_| AtomicU32::new(0)).collect();
///     let m = team_sums(&sums) as u32; // threads per team, at most 4
///     assert!(sums.iter().all(|s| s.load(Relaxed) == m * (m - 1) / 2));
/// }
/// ```
#[track_caller]
pub fn team_shared<T: offload_model::abi::SharedAtomic, R>(
    len: usize,
    f: impl FnOnce(&[T]) -> R,
) -> R {
    let (block, claim) = host_team_shared_atomics("offload::team_shared()");
    // SAFETY: the team runner set this thread's team block and its claim word, which live until the region's
    // threads have all returned, so past this call; only `shared_atomics` writes the word.
    f(unsafe { offload_model::abi::shared_atomics(block, claim, len) })
}

/// This team's shared memory as raw bytes (address, length), for data that is not atomic. Only for
/// `teams, parallel` regions: anywhere else this panics, which fails the region.
///
/// # Safety
/// The caller keeps the team's threads' accesses apart (with `barrier()`), and uses the memory only during the
/// region.
#[track_caller]
pub unsafe fn team_shared_raw() -> (*mut u8, usize) {
    host_team_shared("offload::team_shared_raw()")
}
