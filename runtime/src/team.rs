//! Teams of host threads: what the host-elf plugin and the host fallback run a parallel region on. A team gets all
//! its threads at once (a barrier never waits for a thread that is not running), and a thread that fails, or
//! finishes the region without reaching a barrier the others wait at, breaks its team's barrier, so the others
//! fail instead of waiting forever.

use offload_model::abi::{barrier_status, flat_share, launch_kind, Nest};
use offload_model::reduce::{fold, ReduceOp};
use std::cell::Cell;
use std::sync::{Condvar, Mutex};

/// Where and how a region asks to run: `device(..)`, `if(..)`, its construct, `num_teams`, `thread_limit`.
#[derive(Clone, Copy, Debug, Default)]
pub struct Launch {
    pub device: Option<i32>,
    pub cond: bool,
    pub spmd: bool,
    pub work_shared: bool,
    /// `parallel_for`: one team, with as many threads as a parallel team gets by default.
    pub one_team: bool,
    pub num_teams: Option<u32>,
    pub thread_limit: Option<u32>,
}

/// More threads than this in one team would only thrash a device that names no limit of its own.
pub(crate) const MAX_TEAM_THREADS: u32 = 256;

impl Launch {
    /// (teams, threads per team): a serial region is one team of one thread; a parallel one takes its clauses, and
    /// what they leave open from `defaults` (the device's [`crate::plugin::Device::default_geometry`]), with at
    /// most `max_threads` per team. Zero means one.
    pub fn geometry(self, defaults: (u32, u32), max_threads: u32) -> (u32, u32) {
        if !self.spmd && !self.work_shared {
            return (1, 1);
        }
        let teams = self.num_teams.unwrap_or(defaults.0).max(1);
        let threads = self
            .thread_limit
            .unwrap_or(defaults.1)
            .clamp(1, max_threads);
        (teams, threads)
    }

    /// [`Launch::geometry`] on the host (host-elf and the host fallback): at most [`host_max_threads`] threads per
    /// team and [`host_max_teams`] teams.
    pub fn host_geometry(self) -> (u32, u32) {
        let (teams, threads) = self.geometry(
            host_default_geometry(self.spmd || self.one_team),
            host_max_threads(),
        );
        (teams.min(host_max_teams()), threads)
    }

    /// The `OFFLOAD_INFO` note for a launch that gets `got` (teams, threads per team), fewer than its clauses ask:
    /// each clause cut down, to what, and why (`why`: the device's reasons for its team and thread limits). `None`
    /// when the launch gets what it asks.
    pub(crate) fn reduced(self, got: (u32, u32), why: (&str, &str)) -> Option<String> {
        if !self.spmd && !self.work_shared {
            return None;
        }
        let teams = self
            .num_teams
            .filter(|&n| n > got.0)
            .map(|n| format!("num_teams({n}) is more than {}, {}", got.0, why.0));
        let threads = self
            .thread_limit
            .filter(|&n| n > got.1)
            .map(|n| format!("thread_limit({n}) is more than {}, {}", got.1, why.1));
        let parts: Vec<String> = teams.into_iter().chain(threads).collect();
        (!parts.is_empty())
            .then(|| format!("{} teams of {} threads: {}", got.0, got.1, parts.join("; ")))
    }
}

/// Why the host devices cap a launch's teams and a team's threads, for [`Launch::reduced`].
pub(crate) const HOST_LIMITS_WHY: (&str, &str) = (
    "4 x the host's hardware threads (teams run in waves of as many as the cores run at once; this bounds a \
     launch's per-team memory)",
    "the host's hardware threads (a team's threads all run at once, for its barriers; more would fight for the \
     cores)",
);

/// The host's defaults: as many teams as it has hardware threads, with one thread each for a work-shared loop and as
/// many as it has for an SPMD body (which exists to use several).
pub fn host_default_geometry(spmd: bool) -> (u32, u32) {
    let hw = hardware_threads();
    (hw, if spmd { hw } else { 1 })
}

/// The most teams a host launch runs (`num_teams` is an upper bound): a few waves of as many as run at once, so
/// the per-team memory of a launch stays small and `num_teams(u64::MAX)` finishes.
pub(crate) fn host_max_teams() -> u32 {
    hardware_threads().saturating_mul(4)
}

/// The most threads a host team gets (`thread_limit` is an upper bound, and `omp_get_num_threads()` tells what a
/// team got): as many as the host runs at once. A team's threads must all run at the same time (a barrier waits for
/// every one), and threads beyond the cores cost about a millisecond each per launch, spinning on cores the others
/// need (`thread_limit(256)` took half a second on 2 cores).
pub(crate) fn host_max_threads() -> u32 {
    hardware_threads()
}

/// The host's hardware threads, read once: `available_parallelism` reads cgroup files on Linux, too slow for every
/// launch.
fn hardware_threads() -> u32 {
    static HW: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *HW.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get() as u32))
}

/// A team barrier that can be poisoned, and that knows when a thread of its team has finished the region: a
/// barrier that thread did not reach can never complete, so the threads waiting at it (and any that arrive later)
/// fail instead of waiting forever.
pub struct TeamBarrier {
    state: Mutex<BarrierState>,
    cv: Condvar,
    threads: u32,
}

#[derive(Default)]
struct BarrierState {
    arrived: u32,
    generation: u64,
    poisoned: bool,
    /// The first thread of the team that finished the region.
    finished: Option<u32>,
}

impl TeamBarrier {
    pub fn new(threads: u32) -> Self {
        TeamBarrier {
            state: Mutex::new(BarrierState::default()),
            cv: Condvar::new(),
            threads,
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
            self.cv.notify_all();
            return barrier_status::DONE;
        }
        let generation = s.generation;
        while s.generation == generation && s.broken().is_none() {
            s = self.cv.wait(s).unwrap_or_else(|p| p.into_inner());
        }
        if s.generation != generation {
            barrier_status::DONE
        } else {
            s.broken().unwrap_or(barrier_status::FAILED)
        }
    }

    /// Releases every waiting thread for good: a thread of the team failed.
    pub fn poison(&self) {
        self.state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .poisoned = true;
        self.cv.notify_all();
    }

    /// Thread `thread` of the team returned from the region: no barrier it did not reach can complete.
    pub fn finish(&self, thread: u32) {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if s.finished.is_none() {
            s.finished = Some(thread);
            // Only threads waiting at a barrier need waking (a wake costs a system call every launch otherwise).
            if s.arrived > 0 {
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

/// Runs `f(team, thread)` for every thread of `teams` x `threads` on the thread pool: each team's threads at once,
/// as many teams at a time as the host has hardware threads for (`threads` is at most [`host_max_threads`], so a
/// wave never runs more threads than the host runs at once). Returns every result in (team, thread) order, or
/// the first failure (recorded before the failing thread's team barrier is poisoned, so the others leaving it never
/// mask the cause).
pub fn run_teams<R: Send, E: Send>(
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
        crate::pool::run(results.len(), &|k| {
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
        });
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

/// The host fallback's view of where this thread runs.
#[derive(Clone, Copy)]
struct HostThread {
    /// (team, teams, thread, threads).
    geometry: (u32, u32, u32, u32),
    /// The team's barrier; null for a team of one thread.
    barrier: *const TeamBarrier,
    /// The team's shared memory (address, bytes); null outside a `teams, parallel` region.
    shared: (*mut u8, usize),
    /// The region's `launch_kind`.
    kind: u32,
    /// The launch's `schedule(dynamic)` chunk counter; null outside a parallel region.
    chunks: *const std::sync::atomic::AtomicUsize,
}

/// Host code outside any region the team runner started.
const OUTSIDE: HostThread = HostThread {
    geometry: (0, 1, 0, 1),
    barrier: std::ptr::null(),
    shared: (std::ptr::null_mut(), 0),
    kind: launch_kind::NONE,
    chunks: std::ptr::null(),
};

thread_local! {
    static HOST: Cell<HostThread> = const { Cell::new(OUTSIDE) };
}

/// Runs `body` as a thread of a fallback region described by `h`, restoring the thread's previous view afterwards
/// (pool threads outlive a region; a region nested in a region's fallback runs inline), on unwind too.
fn as_region_thread<R>(h: HostThread, body: impl FnOnce() -> R) -> R {
    struct Restore(HostThread);
    impl Drop for Restore {
        fn drop(&mut self) {
            HOST.with(|c| c.set(self.0));
        }
    }
    let _restore = Restore(HOST.with(|c| c.replace(h)));
    body()
}

/// Each team's shared block for a launch, in 16-byte units (aligned for any atomic), zero-filled: only
/// `teams, parallel` regions have one.
fn shared_blocks(launch: Launch, teams: u32) -> (Vec<Mutex<Vec<u128>>>, usize) {
    let units = if launch.spmd {
        offload_model::abi::TEAM_SHARED_BYTES / 16
    } else {
        0
    };
    let blocks = (0..if units > 0 { teams } else { 0 })
        .map(|_| Mutex::new(vec![0u128; units]))
        .collect();
    (blocks, units * 16)
}

fn block_of(blocks: &[Mutex<Vec<u128>>], team: u32, bytes: usize) -> (*mut u8, usize) {
    match blocks.get(team as usize) {
        // The block outlives the team's threads, which coordinate through atomics and the team barrier.
        Some(m) => (
            m.lock().unwrap_or_else(|p| p.into_inner()).as_mut_ptr() as *mut u8,
            bytes,
        ),
        None => (std::ptr::null_mut(), 0),
    }
}

/// Runs a parallel region's host fallback on teams of host threads; the body sees its team and thread numbers
/// through `omp_get_team_num()` and friends, and `barrier()` synchronises its team. Returns every thread's result in
/// (team, thread) order.
fn run_all<R: Send>(launch: Launch, body: &(dyn Fn() -> R + Sync)) -> Result<Vec<R>, String> {
    let (teams, threads) = launch.host_geometry();
    let (blocks, bytes) = shared_blocks(launch, teams);
    let kind = launch_kind::of(launch.spmd, launch.work_shared);
    let chunks = std::sync::atomic::AtomicUsize::new(0);
    run_teams(teams, threads, &|t, i, b| {
        let h = HostThread {
            geometry: (t, teams, i, threads),
            barrier: b,
            shared: block_of(&blocks, t, bytes),
            kind,
            chunks: &chunks,
        };
        let r =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| as_region_thread(h, body)));
        r.map_err(|p| {
            p.downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "panic".into())
        })
    })
}

/// The host fallback of a parallel region: team 0, thread 0's value.
pub fn run_fallback<R: Send>(launch: Launch, body: &(dyn Fn() -> R + Sync)) -> Result<R, String> {
    let (teams, threads) = launch.host_geometry();
    if teams * threads == 1 {
        // One thread: inline on the caller, still as a region of its kind (with its team-shared memory).
        let (blocks, bytes) = shared_blocks(launch, 1);
        let h = HostThread {
            shared: block_of(&blocks, 0, bytes),
            kind: launch_kind::of(launch.spmd, launch.work_shared),
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
    let results = run_all(launch, &|| {
        // No initial value recorded before this region counts for it (pool threads outlive a region), and one the
        // caller's own thread recorded for an enclosing reduction survives it.
        let outer = REDUCE_INIT.with(|r| r.borrow_mut().take());
        let partial = body();
        let init = REDUCE_INIT
            .with(|r| std::mem::replace(&mut *r.borrow_mut(), outer))
            .and_then(|b| b.downcast::<R>().ok());
        (partial, init.map(|b| *b))
    })?;
    let initial = results[0].1.unwrap_or_else(Op::identity);
    let partials: Vec<R> = results.iter().map(|r| r.0).collect();
    Ok(fold::<Op, R>(initial, &partials))
}

thread_local! {
    /// The initial value of this thread's reduction variable, recorded by `__reduce_init`.
    static REDUCE_INIT: std::cell::RefCell<Option<Box<dyn std::any::Any>>> = const { std::cell::RefCell::new(None) };
}

/// What a reduction variable's initial value is rewritten to: records `init` (combined once, at the end) and
/// starts the thread's private copy at the operator's identity.
#[doc(hidden)]
pub fn reduce_init<Op: ReduceOp<T>, T: 'static>(init: T) -> T {
    REDUCE_INIT.with(|r| *r.borrow_mut() = Some(Box::new(init)));
    Op::identity()
}

/// The host twins of the device's team queries.
pub fn host_geometry() -> (u32, u32, u32, u32) {
    HOST.with(|h| h.get().geometry)
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

/// The share of a work-shared loop's iterations this thread runs (the host fallback's threads; the host image has
/// its twin in device-std). The outliner and the macro wrap the loop's `a..b` / `(a..b).step_by(s)` in this.
#[doc(hidden)]
pub fn share<I: offload_model::abi::Share>(it: I) -> I::Part {
    let (t, n, i, m) = host_geometry();
    it.share((t * m + i) as usize, (n * m) as usize)
}

/// `schedule(dynamic, c)`: the chunks of `c` iterations this thread claims as it goes, from the launch's counter.
#[doc(hidden)]
pub fn share_dynamic<I: offload_model::lanes::ChunkShare>(it: I, chunk: usize) -> I::Chunked {
    let counter = HOST.with(|h| h.get().chunks);
    if counter.is_null() {
        return share_chunks(it, chunk);
    }
    // SAFETY: `run_all`'s counter for this launch, shared by its threads alone, alive until they have all finished.
    unsafe { it.dynamic(chunk, &*counter) }
}

/// `schedule(static, c)`: the chunks of `c` iterations this thread runs, dealt round-robin over every thread.
#[doc(hidden)]
pub fn share_chunks<I: offload_model::lanes::ChunkShare>(it: I, chunk: usize) -> I::Chunked {
    let (t, n, i, m) = host_geometry();
    it.chunks(chunk, (t * m + i) as usize, (n * m) as usize)
}

/// The share of a `collapse(n)` loop nest `(a, b, ..)` this thread runs: a block of the flattened iteration space,
/// as `(i, j, ..)` tuples.
#[doc(hidden)]
pub fn share_nest<N: Nest>(nest: N) -> offload_model::abi::FlatBlock<N> {
    let (t, n, i, m) = host_geometry();
    flat_share(nest, (t * m + i) as usize, (n * m) as usize)
}

/// The host fallback's team-shared memory for this thread's team; `what` (the function called) fails outside a
/// `teams, parallel` region.
#[track_caller]
pub fn host_team_shared(what: &str) -> (*mut u8, usize) {
    let h = HOST.with(|h| h.get());
    launch_kind::require_spmd(what, h.kind);
    h.shared
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parallel(spmd: bool, num_teams: Option<u32>, thread_limit: Option<u32>) -> Launch {
        Launch {
            spmd,
            work_shared: !spmd,
            num_teams,
            thread_limit,
            ..Launch::default()
        }
    }

    #[test]
    fn a_host_team_gets_at_most_the_hardware_threads() {
        let hw = hardware_threads();
        for spmd in [true, false] {
            let (teams, threads) = parallel(spmd, Some(64), Some(256)).host_geometry();
            assert_eq!(threads, hw.min(256));
            assert_eq!(teams, 64.min(host_max_teams()));
            // Asking for no more than the host runs gets exactly that.
            assert_eq!(parallel(spmd, Some(3), Some(1)).host_geometry(), (3, 1));
        }
    }

    #[test]
    fn the_note_names_each_clause_cut_down_and_why() {
        let why = ("TEAMS", "THREADS");
        let asked = parallel(true, Some(64), Some(128));
        assert_eq!(
            asked.reduced((8, 2), why).as_deref(),
            Some(
                "8 teams of 2 threads: num_teams(64) is more than 8, TEAMS; thread_limit(128) is more than \
                 2, THREADS"
            )
        );
        assert_eq!(
            parallel(false, None, Some(256))
                .reduced((2, 2), why)
                .as_deref(),
            Some("2 teams of 2 threads: thread_limit(256) is more than 2, THREADS")
        );
        // Defaults are never "asked", and a launch that gets what it asks has no note.
        assert_eq!(parallel(false, None, None).reduced((2, 1), why), None);
        assert_eq!(parallel(true, Some(2), Some(2)).reduced((2, 2), why), None);
        assert_eq!(Launch::default().reduced((1, 1), why), None);
    }
}
