//! Team and thread queries and the team barrier, as host code (and a region's host fallback) sees them; region code
//! on a device sees device-std's twins with the same names.

use crate::team::{host_barrier, host_geometry};

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

/// Waits until every thread of this team reaches the barrier (a no-op outside a parallel region). Allowed only in
/// `teams, parallel` regions, where every thread reaches it. If another thread of the team failed, this panics so
/// the region ends instead of waiting forever.
pub fn barrier() {
    host_barrier()
}

/// The first `len` atomics of this team's shared memory (zeroed at launch, shared by the team's threads, gone when the
/// region ends). Only `teams, parallel` regions have team-shared memory: 48 KiB per team.
pub fn team_shared<T: offload_model::abi::SharedAtomic>(len: usize) -> &'static [T] {
    // SAFETY: the fallback runner sets this thread's team block for the body's run.
    unsafe { offload_model::abi::shared_atomics(crate::team::host_team_shared(), len) }
}

/// This team's shared memory as raw bytes (address, length), for data that is not atomic.
///
/// # Safety
/// The caller keeps the team's threads' accesses apart (with `barrier()`), and uses the memory only during the
/// region.
pub unsafe fn team_shared_raw() -> (*mut u8, usize) {
    crate::team::host_team_shared()
}
