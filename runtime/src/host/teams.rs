//! Runs a launch's teams on the thread pool: each team's threads at once, as many teams at a time as the host has
//! hardware threads for.

use super::barrier::TeamBarrier;
use super::geometry::{hardware_threads, host_max_threads};
use super::pool::{self, SpawnError};
use std::sync::Mutex;

/// Runs `f(team, thread)` for every thread of `teams` x `threads` on the thread pool: each team's threads at once,
/// as many teams at a time as the host has hardware threads for (`threads` is at most [`host_max_threads`], so a
/// wave never runs more threads than the host runs at once). Returns every result in (team, thread) order, or
/// the first failure (recorded before the failing thread's team barrier is poisoned, so the others leaving it never
/// mask the cause), or the pool's failure to start a thread, before any thread of that wave ran.
pub fn run_teams<R: Send, E: Send + From<SpawnError>>(
    teams: u32,
    threads: u32,
    f: &(dyn Fn(u32, u32, &TeamBarrier) -> Result<R, E> + Sync),
) -> Result<Vec<R>, E> {
    let hw = hardware_threads();
    debug_assert!(threads <= host_max_threads(), "{threads} threads per team");
    let wave = (hw / threads).max(1);
    let first_failure: Mutex<Option<E>> = Mutex::new(None);
    let mut all: Vec<R> = Vec::with_capacity((teams * threads) as usize);
    let mut team = 0;
    while team < teams
        && first_failure
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_none()
    {
        let end = (team + wave).min(teams);
        let barriers: Vec<TeamBarrier> = (team..end).map(|_| TeamBarrier::new(threads)).collect();
        let failure = &first_failure;
        // One slot per thread, each set by its thread alone (a `Mutex` because results are only `Send`).
        let results: Vec<Mutex<Option<R>>> = (0..(end - team) * threads)
            .map(|_| Mutex::new(None))
            .collect();
        pool::run(results.len(), &|k| {
            let (t, i) = (team + k as u32 / threads, k as u32 % threads);
            let b = &barriers[(t - team) as usize];
            // A panic poisons the team's barrier too, so no thread of it waits for this one forever.
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(t, i, b)))
                .unwrap_or_else(|p| {
                    b.poison();
                    std::panic::resume_unwind(p)
                });
            match r {
                Ok(v) => {
                    // The others may wait at a barrier this thread will never reach: they fail now.
                    b.finish(i);
                    *results[k].lock().unwrap_or_else(|p| p.into_inner()) = Some(v)
                }
                Err(e) => {
                    failure
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .get_or_insert(e);
                    b.poison();
                }
            }
        })?;
        all.extend(
            results
                .into_iter()
                .filter_map(|r| r.into_inner().unwrap_or_else(|p| p.into_inner())),
        );
        team = end;
    }
    match first_failure
        .into_inner()
        .unwrap_or_else(|p| p.into_inner())
    {
        Some(e) => Err(e),
        None => Ok(all),
    }
}
