//! Lanes: what one launch or copy on a GPU needs to itself (a CUDA stream with its pinned staging buffer, an HSA
//! queue with its completion signal and kernel-argument buffer), pooled per device. Host threads (tasks on helper
//! threads, or the program's own) that use one device at once each take a lane of their own, so their kernels and
//! copies overlap on the GPU instead of queueing behind one another, as libomptarget's plugins give each of them a
//! stream or queue from a pool. An operation takes an idle lane, makes one when every lane is busy, and past
//! [`LANES_PER_DEVICE`] waits for one to come back: a lane is held for one operation only, which ends (or fails)
//! without needing another, so waiting never deadlocks.

use std::sync::{Condvar, Mutex, MutexGuard};

/// The most lanes a device makes: beyond the task pool's default 8 helper threads and the program's own threads,
/// more streams or queues would buy no more overlap than the GPU gives.
pub const LANES_PER_DEVICE: usize = 16;

/// A device's lanes of type `L`.
pub struct Lanes<L> {
    idle: Mutex<Idle<L>>,
    returned: Condvar,
    cap: usize,
}

struct Idle<L> {
    lanes: Vec<L>,
    /// Lanes in existence: idle, held, or being made.
    made: usize,
}

impl<L> Lanes<L> {
    /// A pool that makes at most `cap` lanes (at least one).
    pub fn new(cap: usize) -> Lanes<L> {
        Lanes {
            idle: Mutex::new(Idle {
                lanes: Vec::new(),
                made: 0,
            }),
            returned: Condvar::new(),
            cap: cap.max(1),
        }
    }

    /// A pool holding `lane` (made eagerly, so a device that cannot make one fails to open), which makes up to
    /// [`LANES_PER_DEVICE`].
    pub fn with_first(lane: L) -> Lanes<L> {
        let lanes = Lanes::new(LANES_PER_DEVICE);
        lanes.put_back(lane);
        lanes
    }

    fn lock(&self) -> MutexGuard<'_, Idle<L>> {
        self.idle.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `f` on a lane no other thread holds: an idle one, else one `make` makes (its error is returned, and
    /// the pool may make another later), else, at the cap, the first one given back. The lane goes back to the
    /// pool afterwards, also when `f` panics.
    pub fn with<R, E>(
        &self,
        make: impl FnOnce() -> Result<L, E>,
        f: impl FnOnce(&mut L) -> R,
    ) -> Result<R, E> {
        let mut idle = self.lock();
        let lane = loop {
            if let Some(lane) = idle.lanes.pop() {
                drop(idle);
                break lane;
            }
            if idle.made < self.cap {
                idle.made += 1;
                drop(idle);
                // Until the lane exists, a failure (an error or a panic) gives its place in the count back.
                let making = Making { pool: self };
                match make() {
                    Ok(lane) => {
                        std::mem::forget(making);
                        break lane;
                    }
                    Err(e) => return Err(e),
                }
            }
            idle = self.returned.wait(idle).unwrap_or_else(|p| p.into_inner());
        };
        let mut held = Held {
            pool: self,
            lane: Some(lane),
        };
        Ok(f(held.lane.as_mut().expect("held until dropped")))
    }

    fn put_back(&self, lane: L) {
        let mut idle = self.lock();
        idle.lanes.push(lane);
        if idle.made < idle.lanes.len() {
            // `with_first`'s lane was made outside the count.
            idle.made = idle.lanes.len();
        }
        drop(idle);
        self.returned.notify_one();
    }

    /// The lanes made so far (idle or held): for tests.
    #[cfg(test)]
    pub fn made(&self) -> usize {
        self.lock().made
    }
}

/// A lane being made: dropped before it exists (the maker failed or panicked), it gives its place in the count back,
/// and wakes a waiter, which may make the lane this one could not.
struct Making<'a, L> {
    pool: &'a Lanes<L>,
}

impl<L> Drop for Making<'_, L> {
    fn drop(&mut self) {
        self.pool.lock().made -= 1;
        self.pool.returned.notify_one();
    }
}

/// A held lane, given back on drop (also on unwind).
struct Held<'a, L> {
    pool: &'a Lanes<L>,
    lane: Option<L>,
}

impl<L> Drop for Held<'_, L> {
    fn drop(&mut self) {
        if let Some(lane) = self.lane.take() {
            self.pool.put_back(lane);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Barrier;

    #[test]
    fn threads_at_once_hold_lanes_of_their_own() {
        let lanes = Lanes::new(4);
        let next = AtomicUsize::new(0);
        let together = Barrier::new(3);
        let held: Vec<usize> = std::thread::scope(|s| {
            let run = || {
                lanes
                    .with(
                        || Ok::<_, ()>(next.fetch_add(1, Ordering::Relaxed)),
                        |lane| {
                            // All three hold a lane here at once.
                            together.wait();
                            *lane
                        },
                    )
                    .unwrap()
            };
            let handles: Vec<_> = (0..3).map(|_| s.spawn(run)).collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let mut held = held;
        held.sort();
        assert_eq!(held, [0, 1, 2], "three distinct lanes");
        assert_eq!(lanes.made(), 3);
        // Idle lanes are reused, not made again.
        lanes
            .with(|| Err::<usize, _>("made"), |_| ())
            .expect("an idle lane, not a new one");
        assert_eq!(lanes.made(), 3);
    }

    #[test]
    fn past_the_cap_an_operation_waits_for_a_lane_to_come_back() {
        let lanes = Lanes::new(1);
        let inside = AtomicUsize::new(0);
        let most = AtomicUsize::new(0);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    lanes
                        .with(
                            || Ok::<_, ()>(()),
                            |_| {
                                let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                                most.fetch_max(now, Ordering::SeqCst);
                                std::thread::yield_now();
                                inside.fetch_sub(1, Ordering::SeqCst);
                            },
                        )
                        .unwrap()
                });
            }
        });
        assert_eq!(
            most.load(Ordering::SeqCst),
            1,
            "one lane, one holder at a time"
        );
        assert_eq!(lanes.made(), 1);
    }

    #[test]
    fn a_lane_that_cannot_be_made_is_an_error_and_does_not_count() {
        let lanes: Lanes<u8> = Lanes::new(1);
        assert_eq!(lanes.with(|| Err("no stream"), |_| ()), Err("no stream"));
        assert_eq!(lanes.made(), 0);
        assert_eq!(lanes.with(|| Ok::<_, ()>(7), |l| *l), Ok(7));
    }

    #[test]
    fn a_maker_that_panics_gives_its_place_back() {
        let lanes: Lanes<u8> = Lanes::new(1);
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            lanes.with(|| -> Result<u8, ()> { panic!("no stream") }, |_| ())
        }));
        assert!(caught.is_err());
        assert_eq!(lanes.made(), 0);
        // Not waiting forever for a lane that was never made.
        assert_eq!(lanes.with(|| Ok::<_, ()>(3), |l| *l), Ok(3));
    }

    #[test]
    fn a_panic_gives_the_lane_back() {
        let lanes = Lanes::with_first(5u8);
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            lanes.with(|| Err::<u8, ()>(()), |_| panic!("in the operation"))
        }));
        assert!(caught.is_err());
        assert_eq!(lanes.with(|| Err::<u8, ()>(()), |l| *l), Ok(5));
        assert_eq!(lanes.made(), 1);
    }
}
