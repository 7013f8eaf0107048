//! What a host thread runs as inside a region's host fallback: its team and thread numbers, its team's barrier and
//! shared memory, the launch's chunk counter. The team queries, `barrier()`, `team_shared()` and the loop shares
//! read it; host code outside a region sees one team of one thread.

use super::barrier::TeamBarrier;
use offload_model::abi::{barrier_status, launch_kind};
use std::cell::Cell;
use std::sync::atomic::{AtomicU32, AtomicUsize};

/// The host fallback's view of where this thread runs.
#[derive(Clone, Copy)]
pub(crate) struct HostThread {
    /// (team, teams, thread, threads).
    pub geometry: (u32, u32, u32, u32),
    /// The team's barrier; null for a team of one thread.
    pub barrier: *const TeamBarrier,
    /// The team's shared memory (address, bytes); null outside a `teams, parallel` region.
    pub shared: (*mut u8, usize),
    /// The shared memory's claim word (`offload_model::abi::shared_atomics`); null where there is none.
    pub shared_claim: *const AtomicU32,
    /// The region's `launch_kind`.
    pub kind: u32,
    /// The launch's `schedule(dynamic)` chunk counter; null outside a parallel region.
    pub chunks: *const AtomicUsize,
}

/// Host code outside any region the team runner started.
pub(crate) const OUTSIDE: HostThread = HostThread {
    geometry: (0, 1, 0, 1),
    barrier: std::ptr::null(),
    shared: (std::ptr::null_mut(), 0),
    shared_claim: std::ptr::null(),
    kind: launch_kind::NONE,
    chunks: std::ptr::null(),
};

thread_local! {
    static HOST: Cell<HostThread> = const { Cell::new(OUTSIDE) };
}

/// Runs `body` as a thread of a fallback region described by `h`, restoring the thread's previous view afterwards
/// (pool threads outlive a region; a region nested in a region's fallback runs inline), on unwind too.
pub(crate) fn as_region_thread<R>(h: HostThread, body: impl FnOnce() -> R) -> R {
    struct Restore(HostThread);
    impl Drop for Restore {
        fn drop(&mut self) {
            HOST.with(|c| c.set(self.0));
        }
    }
    let _restore = Restore(HOST.with(|c| c.replace(h)));
    body()
}

/// This thread's (team, teams, thread, threads): the host twins of the device's team queries.
pub fn host_geometry() -> (u32, u32, u32, u32) {
    HOST.with(|h| h.get().geometry)
}

/// The launch's `schedule(dynamic)` chunk counter; null outside a parallel region.
pub(crate) fn chunk_counter() -> *const AtomicUsize {
    HOST.with(|h| h.get().chunks)
}

/// The host twin of `offload::barrier()`: synchronises the fallback's team (alone, there is nothing to wait for);
/// outside a `teams, parallel` region it fails.
#[track_caller]
pub fn host_barrier() {
    let h = HOST.with(|h| h.get());
    launch_kind::require_spmd("offload::barrier()", h.kind);
    if h.barrier.is_null() {
        return;
    }
    // SAFETY: set by the team runner for the duration of the body, which is running.
    let status = unsafe { &*h.barrier }.wait();
    if status != barrier_status::DONE {
        barrier_status::fail(status, h.geometry.0);
    }
}

/// The host fallback's team-shared memory for this thread's team; `what` (the function called) fails outside a
/// `teams, parallel` region.
#[track_caller]
pub fn host_team_shared(what: &str) -> (*mut u8, usize) {
    let h = HOST.with(|h| h.get());
    launch_kind::require_spmd(what, h.kind);
    h.shared
}

/// As [`host_team_shared`], with the block's claim word, for `team_shared()`'s atomics.
#[track_caller]
pub fn host_team_shared_atomics(what: &str) -> ((*mut u8, usize), *const AtomicU32) {
    let h = HOST.with(|h| h.get());
    launch_kind::require_spmd(what, h.kind);
    (h.shared, h.shared_claim)
}
