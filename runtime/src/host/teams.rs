//! Runs a launch's teams on the thread pool: each team's threads at once, as many teams at a time as the host has
//! hardware threads for.

use super::barrier::TeamBarrier;
use super::geometry::{hardware_threads, host_max_threads};
use super::pool::{self, SpawnError};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering::*};
use std::sync::Mutex;

/// A team's state in [`run_teams`].
const UNSTARTED: u8 = 0;
const STARTED: u8 = 1;
const SKIPPED: u8 = 2;

/// Runs `f(team, thread)` for every thread of `teams` x `threads` on the thread pool: each team's threads at once,
/// as many teams at a time as the host has hardware threads for (`threads` is at most [`host_max_threads`], so a
/// wave never runs more threads than the host runs at once). Returns every result in (team, thread) order, or
/// the first failure (recorded before the failing thread's team barrier is poisoned, so the others leaving it never
/// mask the cause), or the pool's failure to start a thread, before any thread ran.
///
/// The waves are one hand-out to the pool: a group of `threads` pool threads runs teams `g`, `g + groups`, .. one
/// after the other, so a launch wakes its threads once rather than once a wave (8 waves took 8 wake-ups, each tens of
/// microseconds on a busy machine). A thread moves to its group's next team without waiting for the others (each
/// team has its own barrier). After a failure no team starts that no thread has started: a thread breaks the barrier
/// of each it skips; a team one of whose threads started runs all of them, as a GPU's block does.
pub fn run_teams<R: Send, E: Send + From<SpawnError>>(
    teams: u32,
    threads: u32,
    f: &(dyn Fn(u32, u32, &TeamBarrier) -> Result<R, E> + Sync),
) -> Result<Vec<R>, E> {
    debug_assert!(threads <= host_max_threads(), "{threads} threads per team");
    let groups = (hardware_threads() / threads).max(1).min(teams);
    let first_failure: Mutex<Option<E>> = Mutex::new(None);
    let failed = AtomicBool::new(false);
    let barriers: Vec<TeamBarrier> = (0..teams).map(|_| TeamBarrier::new(threads)).collect();
    // Each team's state: not started, started (a thread of it runs, so all of them run), or skipped after a failure.
    let states: Vec<AtomicU8> = (0..teams).map(|_| AtomicU8::new(UNSTARTED)).collect();
    // One slot per thread, each set by its thread alone (a `Mutex` because results are only `Send`).
    let results: Vec<Mutex<Option<R>>> = (0..teams as usize * threads as usize)
        .map(|_| Mutex::new(None))
        .collect();
    pool::run(groups as usize * threads as usize, &|k| {
        let (group, i) = (k as u32 / threads, k as u32 % threads);
        // A panic ends this thread's part: the teams it would still run are broken, so no thread of them waits
        // for this one; the pool resumes the panic once every thread has finished.
        let mut panicked = None;
        for t in (group..teams).step_by(groups as usize) {
            let b = &barriers[t as usize];
            // After a failure no new team starts, but a team one of whose threads started runs all of them, as a
            // GPU's block does.
            let state = &states[t as usize];
            let skip = if panicked.is_some() || failed.load(Acquire) {
                state
                    .compare_exchange(UNSTARTED, SKIPPED, AcqRel, Acquire)
                    .map_or_else(|now| now == SKIPPED, |_| true)
            } else {
                state
                    .compare_exchange(UNSTARTED, STARTED, AcqRel, Acquire)
                    .map_or_else(|now| now == SKIPPED, |_| false)
            };
            if skip || panicked.is_some() {
                b.poison();
                continue;
            }
            match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(t, i, b))) {
                Ok(Ok(v)) => {
                    // The others may wait at a barrier this thread will never reach: they fail now.
                    b.finish(i);
                    *results[(t * threads + i) as usize]
                        .lock()
                        .unwrap_or_else(|p| p.into_inner()) = Some(v)
                }
                Ok(Err(e)) => {
                    first_failure
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .get_or_insert(e);
                    failed.store(true, Release);
                    b.poison();
                }
                Err(p) => {
                    failed.store(true, Release);
                    b.poison();
                    panicked = Some(p);
                }
            }
        }
        if let Some(p) = panicked {
            std::panic::resume_unwind(p);
        }
    })?;
    match first_failure
        .into_inner()
        .unwrap_or_else(|p| p.into_inner())
    {
        Some(e) => Err(e),
        None => Ok(results
            .into_iter()
            .filter_map(|r| r.into_inner().unwrap_or_else(|p| p.into_inner()))
            .collect()),
    }
}

#[cfg(test)]
// The pool's threads outlive a test by design, which Miri reports as a leak.
#[cfg(not(miri))]
mod tests {
    use super::*;

    #[test]
    fn every_team_runs_once_in_order_and_a_panic_hangs_no_later_team() {
        let (teams, threads) = (4 * hardware_threads(), hardware_threads().min(2));
        let all = run_teams::<(u32, u32), SpawnError>(teams, threads, &|t, i, b| {
            assert_eq!(b.wait(), offload_model::abi::barrier_status::DONE);
            Ok((t, i))
        })
        .unwrap();
        let want: Vec<(u32, u32)> = (0..teams)
            .flat_map(|t| (0..threads).map(move |i| (t, i)))
            .collect();
        assert_eq!(all, want);
        // Team 0's thread 0 panics: the others of its group meet broken barriers in the teams it skips.
        let r = std::panic::catch_unwind(|| {
            run_teams::<(), SpawnError>(teams, threads, &|t, i, b| {
                if (t, i) == (0, 0) {
                    panic!("team zero");
                }
                b.wait();
                Ok(())
            })
        });
        assert!(r.is_err());
    }
}
