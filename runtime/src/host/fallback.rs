//! A parallel region's host fallback on teams of host threads: the body sees its team and thread numbers through
//! `omp_get_team_num()` and friends, `barrier()` synchronises its team, and a reduction combines every thread's
//! partial.

use super::geometry::Launch;
use super::panic::{panic_message, unwind_no_threads};
use super::pool::SpawnError;
use super::reduce::recording;
use super::teams::run_teams;
use super::thread::{as_region_thread, HostThread, OUTSIDE};
use offload_model::reduce::{fold, ReduceOp};
use std::sync::atomic::{AtomicU32, AtomicUsize};
use std::sync::Mutex;

/// A team's shared block, in 16-byte units (aligned for any atomic), zero-filled, and its claim word: the atomic
/// type `team_shared` hands the block out as, zero until the first call.
struct TeamBlock {
    bytes: Mutex<Vec<u128>>,
    claim: AtomicU32,
}

/// Each team's shared block for a launch: only `teams, parallel` regions have one.
fn shared_blocks(launch: Launch, teams: u32) -> (Vec<TeamBlock>, usize) {
    let units = if launch.construct.is_spmd() {
        offload_model::abi::TEAM_SHARED_BYTES / 16
    } else {
        0
    };
    let blocks = (0..if units > 0 { teams } else { 0 })
        .map(|_| TeamBlock {
            bytes: Mutex::new(vec![0u128; units]),
            claim: AtomicU32::new(0),
        })
        .collect();
    (blocks, units * 16)
}

/// Team `team`'s block (address, bytes) and claim word, for its threads' `HostThread`.
fn block_of(blocks: &[TeamBlock], team: u32, bytes: usize) -> ((*mut u8, usize), *const AtomicU32) {
    match blocks.get(team as usize) {
        // The block outlives the team's threads, which coordinate through atomics and the team barrier.
        Some(b) => (
            (
                b.bytes
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .as_mut_ptr() as *mut u8,
                bytes,
            ),
            &b.claim,
        ),
        None => ((std::ptr::null_mut(), 0), std::ptr::null()),
    }
}

/// Why the fallback's teams did not all finish.
enum Failed {
    /// A thread panicked: its message.
    Panicked(String),
    NoThreads(SpawnError),
}

impl From<SpawnError> for Failed {
    fn from(e: SpawnError) -> Self {
        Failed::NoThreads(e)
    }
}

/// Runs a parallel region's host fallback on teams of host threads. Returns every thread's result in (team, thread)
/// order, or the first panic's message. A thread that cannot be started unwinds to the region call (see
/// [`super::panic`]), since the expansion's closure, which calls this, can only return a value or panic.
fn run_all<R: Send>(launch: Launch, body: &(dyn Fn() -> R + Sync)) -> Result<Vec<R>, String> {
    let (teams, threads) = launch.host_geometry();
    let (blocks, bytes) = shared_blocks(launch, teams);
    let kind = launch.construct.launch_kind();
    let chunks = AtomicUsize::new(0);
    let all = run_teams(teams, threads, &|t, i, b| {
        let (shared, shared_claim) = block_of(&blocks, t, bytes);
        let h = HostThread {
            geometry: (t, teams, i, threads),
            barrier: b,
            shared,
            shared_claim,
            kind,
            chunks: &chunks,
        };
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| as_region_thread(h, body)))
            .map_err(|p| Failed::Panicked(panic_message(&*p).to_string()))
    });
    match all {
        Ok(all) => Ok(all),
        Err(Failed::Panicked(m)) => Err(m),
        Err(Failed::NoThreads(e)) => unwind_no_threads(e),
    }
}

/// The host fallback of a parallel region: team 0, thread 0's value, or the first panic's message.
pub fn run_fallback<R: Send>(launch: Launch, body: &(dyn Fn() -> R + Sync)) -> Result<R, String> {
    let (teams, threads) = launch.host_geometry();
    if teams * threads == 1 {
        // One thread: inline on the caller, still as a region of its kind (with its team-shared memory).
        let (blocks, bytes) = shared_blocks(launch, 1);
        let (shared, shared_claim) = block_of(&blocks, 0, bytes);
        let h = HostThread {
            shared,
            shared_claim,
            kind: launch.construct.launch_kind(),
            ..OUTSIDE
        };
        return Ok(as_region_thread(h, body));
    }
    Ok(run_all(launch, body)?.swap_remove(0))
}

/// The host fallback of a reduction region: every thread's partial (its private copy started at the identity),
/// combined in order after the initial value team 0, thread 0 computed.
pub fn run_fallback_reduce<Op: ReduceOp<R>, R: Send + Copy + 'static>(
    launch: Launch,
    body: &(dyn Fn() -> R + Sync),
) -> Result<R, String> {
    // Boxed: a partial may be a large array, which the executor's frames would otherwise each hold a copy of.
    let results = run_all(launch, &|| Box::new(recording::<R, R>(body)))?;
    let initial = results[0].1.unwrap_or_else(Op::identity);
    let partials: Vec<R> = results.iter().map(|r| r.0).collect();
    Ok(fold::<Op, R>(initial, &partials))
}
