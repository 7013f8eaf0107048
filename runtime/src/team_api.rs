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
