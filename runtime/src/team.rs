//! Teams of host threads: what the host-elf plugin and the host fallback run a parallel region on. A team gets all
//! its threads at once (a barrier never waits for a thread that is not running), and a thread that fails poisons
//! its team's barrier, so the others stop instead of waiting forever.

use std::cell::Cell;
use std::sync::{Condvar, Mutex};

/// Launch geometry a region asks for (`num_teams`, `thread_limit`, and whether it is SPMD).
#[derive(Clone, Copy, Debug, Default)]
pub struct Launch {
    pub spmd: bool,
    pub work_shared: bool,
    pub num_teams: Option<u32>,
    pub thread_limit: Option<u32>,
}

/// More threads than this in one team would only thrash a host.
const MAX_TEAM_THREADS: u32 = 256;

impl Launch {
    /// (teams, threads per team). A serial region is one team of one thread. A parallel one defaults to as many
    /// teams as the host has hardware threads, with one thread each for a work-shared loop and as many as the host
    /// has for an SPMD body (which exists to use several). Zero means one.
    pub fn geometry(self) -> (u32, u32) {
        if !self.spmd && !self.work_shared {
            return (1, 1);
        }
        let hw = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
        let teams = self.num_teams.unwrap_or(hw).max(1);
        let default_threads = if self.spmd { hw } else { 1 };
        let threads = self
            .thread_limit
            .unwrap_or(default_threads)
            .clamp(1, MAX_TEAM_THREADS);
        (teams, threads)
    }
}

/// A team barrier that can be poisoned.
pub struct TeamBarrier {
    state: Mutex<(u32, u64, bool)>, // (arrived, generation, poisoned)
    cv: Condvar,
    threads: u32,
}

impl TeamBarrier {
    pub fn new(threads: u32) -> Self {
        TeamBarrier {
            state: Mutex::new((0, 0, false)),
            cv: Condvar::new(),
            threads,
        }
    }

    /// Waits for the whole team; `false` if a thread of the team failed.
    pub fn wait(&self) -> bool {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if s.2 {
            return false;
        }
        s.0 += 1;
        if s.0 == self.threads {
            s.0 = 0;
            s.1 += 1;
            self.cv.notify_all();
            return true;
        }
        let generation = s.1;
        while s.1 == generation && !s.2 {
            s = self.cv.wait(s).unwrap_or_else(|p| p.into_inner());
        }
        !s.2 || s.1 != generation
    }

    /// Releases every waiting thread for good: a thread of the team failed.
    pub fn poison(&self) {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).2 = true;
        self.cv.notify_all();
    }

    /// The C-ABI entry the host image's `offload::barrier()` calls.
    ///
    /// # Safety
    /// `ctx` points to a live `TeamBarrier`.
    pub unsafe extern "C" fn wait_c(ctx: *const std::ffi::c_void) -> u32 {
        // SAFETY: per the contract.
        let b = unsafe { &*(ctx as *const TeamBarrier) };
        u32::from(!b.wait())
    }
}

/// Runs `f(team, thread)` for every thread of `teams` x `threads`: each team's threads at once, as many teams at a
/// time as the host has hardware threads for. Returns `f(0, 0)`'s result, or the first failure (recorded before the
/// failing thread's team barrier is poisoned, so the others leaving it never mask the cause).
pub fn run_teams<R: Send, E: Send>(
    teams: u32,
    threads: u32,
    f: &(dyn Fn(u32, u32, &TeamBarrier) -> Result<R, E> + Sync),
) -> Result<R, E> {
    let hw = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
    let wave = (hw / threads).max(1);
    let first_failure: Mutex<Option<E>> = Mutex::new(None);
    let mut first: Option<R> = None;
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
        let zero: Option<R> = std::thread::scope(|s| {
            let handles: Vec<_> = (team..end)
                .flat_map(|t| (0..threads).map(move |i| (t, i)))
                .map(|(t, i)| {
                    let b = &barriers[(t - team) as usize];
                    s.spawn(move || match f(t, i, b) {
                        Ok(v) => (t == 0 && i == 0).then_some(v),
                        Err(e) => {
                            failure
                                .lock()
                                .unwrap_or_else(|p| p.into_inner())
                                .get_or_insert(e);
                            b.poison();
                            None
                        }
                    })
                })
                .collect();
            let mut zero = None;
            for h in handles {
                if let Some(v) = h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)) {
                    zero = Some(v);
                }
            }
            zero
        });
        first = first.or(zero);
        team = end;
    }
    match first_failure
        .into_inner()
        .unwrap_or_else(|p| p.into_inner())
    {
        Some(e) => Err(e),
        None => Ok(first.expect("team 0 thread 0 ran")),
    }
}

thread_local! {
    /// The host fallback's view of where this thread runs: (team, teams, thread, threads, barrier).
    static HOST: Cell<(u32, u32, u32, u32, *const TeamBarrier)> = const { Cell::new((0, 1, 0, 1, std::ptr::null())) };
}

/// Runs a parallel region's host fallback on teams of host threads; the body sees its team and thread numbers
/// through `omp_get_team_num()` and friends, and `barrier()` synchronises its team.
pub fn run_fallback<R: Send>(launch: Launch, body: &(dyn Fn() -> R + Sync)) -> Result<R, String> {
    let (teams, threads) = launch.geometry();
    if teams * threads == 1 {
        return Ok(body());
    }
    run_teams(teams, threads, &|t, i, b| {
        let prev = HOST.with(|h| h.replace((t, teams, i, threads, b as *const TeamBarrier)));
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(body));
        HOST.with(|h| h.set(prev));
        r.map_err(|p| {
            p.downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "panic".into())
        })
    })
}

/// The host twins of the device's team queries.
pub fn host_geometry() -> (u32, u32, u32, u32) {
    HOST.with(|h| {
        let (t, n, i, m, _) = h.get();
        (t, n, i, m)
    })
}

/// The host twin of `offload::barrier()`: synchronises the fallback's team; alone, nothing to wait for.
pub fn host_barrier() {
    let b = HOST.with(|h| h.get().4);
    if b.is_null() {
        return;
    }
    // SAFETY: set by `run_fallback` for the duration of the body, which is running.
    if !unsafe { &*b }.wait() {
        panic!("offload: another thread of this team failed; leaving the barrier");
    }
}

/// The share of a work-shared loop's iterations this thread runs (the host fallback's threads; the host image has
/// its twin in device-std). The outliner and the macro wrap the loop's `a..b` / `(a..b).step_by(s)` in this.
#[doc(hidden)]
pub fn share<I: Iterator>(it: I) -> core::iter::Take<core::iter::Skip<I>> {
    let (t, n, i, m) = host_geometry();
    let len = it.size_hint().1.unwrap_or(usize::MAX);
    let (lo, hi) = offload_model::abi::block_share(len, (t * m + i) as usize, (n * m) as usize);
    it.skip(lo).take(hi - lo)
}
