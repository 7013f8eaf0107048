//! The team barrier of the host's teams (host-elf launches and the host fallback): a team gets all its threads at
//! once, so a barrier never waits for a thread that is not running; a thread that fails, or finishes the region
//! without reaching a barrier the others wait at, breaks it, so the others fail instead of waiting forever.
//!
//! A thread waiting at it spins a while on the barrier's generation before it sleeps, as the pool's threads do
//! ([`super::wait`]: briefly on a crowded machine); the last to arrive wakes only threads that sleep.

use super::wait::spin_until;
use offload_model::abi::barrier_status;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::*};
use std::sync::{Condvar, Mutex};

/// A team barrier that can be poisoned, and that knows when a thread of its team has finished the region: a
/// barrier that thread did not reach can never complete, so the threads waiting at it (and any that arrive later)
/// fail instead of waiting forever.
pub struct TeamBarrier {
    state: Mutex<BarrierState>,
    cv: Condvar,
    threads: u32,
    /// `state`'s generation, for spinning threads to watch (written under the lock).
    generation: AtomicU64,
    /// `state` is broken (poisoned, or a thread finished), for spinning threads to watch (written under the lock).
    broken: AtomicBool,
}

#[derive(Default)]
struct BarrierState {
    arrived: u32,
    generation: u64,
    poisoned: bool,
    /// The first thread of the team that finished the region.
    finished: Option<u32>,
    /// Threads asleep on `cv`.
    sleeping: u32,
}

impl TeamBarrier {
    pub fn new(threads: u32) -> Self {
        TeamBarrier {
            state: Mutex::new(BarrierState::default()),
            cv: Condvar::new(),
            threads,
            generation: AtomicU64::new(0),
            broken: AtomicBool::new(false),
        }
    }

    /// Waits for the whole team; returns a `barrier_status`: `DONE`, `FAILED` (a thread of the team failed) or
    /// `FINISHED + n` (thread `n` finished the region without reaching this barrier).
    pub fn wait(&self) -> u32 {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(status) = s.broken() {
            return status;
        }
        s.arrived += 1;
        if s.arrived == self.threads {
            s.arrived = 0;
            s.generation += 1;
            self.generation.store(s.generation, Release);
            if s.sleeping > 0 {
                self.cv.notify_all();
            }
            return barrier_status::DONE;
        }
        let generation = s.generation;
        drop(s);
        spin_until(|| self.generation.load(Acquire) != generation || self.broken.load(Acquire));
        // Whatever the spin saw, the lock's state decides; a thread that changes it after this check sees this one
        // asleep (under the same lock) and wakes it.
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        while s.generation == generation && s.broken().is_none() {
            s.sleeping += 1;
            s = self.cv.wait(s).unwrap_or_else(|p| p.into_inner());
            s.sleeping -= 1;
        }
        if s.generation != generation {
            barrier_status::DONE
        } else {
            s.broken().unwrap_or(barrier_status::FAILED)
        }
    }

    /// Releases every waiting thread for good: a thread of the team failed.
    pub fn poison(&self) {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        s.poisoned = true;
        self.broken.store(true, Release);
        self.cv.notify_all();
    }

    /// Thread `thread` of the team returned from the region: no barrier it did not reach can complete.
    pub fn finish(&self, thread: u32) {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if s.finished.is_none() {
            s.finished = Some(thread);
            self.broken.store(true, Release);
            // Only threads asleep at a barrier need waking (a wake costs a system call every launch otherwise).
            if s.sleeping > 0 {
                self.cv.notify_all();
            }
        }
    }

    /// The C-ABI entry the host image's `offload::barrier()` calls: [`TeamBarrier::wait`]'s status.
    ///
    /// # Safety
    /// `ctx` points to a live `TeamBarrier`.
    pub unsafe extern "C" fn wait_c(ctx: *const std::ffi::c_void) -> u32 {
        // SAFETY: per the contract.
        let b = unsafe { &*(ctx as *const TeamBarrier) };
        b.wait()
    }
}

impl BarrierState {
    /// Why no barrier of this team can complete any more, as a `barrier_status`.
    fn broken(&self) -> Option<u32> {
        if self.poisoned {
            Some(barrier_status::FAILED)
        } else {
            self.finished.map(|n| barrier_status::FINISHED + n)
        }
    }
}
