//! How a host team thread waits (a worker for work, a caller for its team, a thread at a team barrier): it spins a
//! while, as `OMP_WAIT_POLICY` says, then sleeps until woken. Spinning pays only while the thread it waits for is
//! running: on a crowded machine (other processes on the cores, more ranks than cores) a spinning thread loses its
//! core for a scheduler time slice (milliseconds), where a sleeping one that is woken gets it back at once. A 64 x
//! 128 SPMD launch with one barrier took 55 ms on 2 cores beside six busy processes, and 0.3 ms beside none.
//!
//! So a wait spins only briefly while the machine is crowded, as libomp and libgomp throttle their spinning when
//! they have more threads than cores, but for every thread on the machine. It is crowded
//!
//! - for [`HOLD`] after a spinning thread was descheduled: its clock jumped by more than [`GAP`] between two looks
//!   (an interrupt takes microseconds, a time slice milliseconds); this works wherever the loaded cores are, in a
//!   container too;
//! - while the kernel's run queues hold more threads than there are CPUs (`/proc/loadavg`'s running count, read at
//!   most every [`SAMPLE_EVERY`] by whichever wait comes first): this sees the load before any spin pays for it, and
//!   tells when it is gone.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// A jump of a spinning thread's clock that means it was descheduled.
pub(crate) const GAP: Duration = Duration::from_micros(250);
/// How long a descheduled spin keeps waits from spinning.
pub(crate) const HOLD: Duration = Duration::from_millis(200);
/// How often the run queues are sampled.
pub(crate) const SAMPLE_EVERY: Duration = Duration::from_millis(50);
/// How long a wait spins on a crowded machine: a thread that is running now finishes a short step in that time, and
/// a spin this short rarely loses the core.
pub(crate) const BRIEF: Duration = Duration::from_micros(3);

/// Until when (nanoseconds from [`now_ns`]'s start) the machine counts as crowded.
static CROWDED_UNTIL: AtomicU64 = AtomicU64::new(0);
/// When the run queues were last sampled (nanoseconds from [`now_ns`]'s start).
static SAMPLED_AT: AtomicU64 = AtomicU64::new(0);

/// Nanoseconds since the first call (in the process).
fn now_ns() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

/// Spins until `ready()`, for at most the wait policy's spin time, and only [`BRIEF`]ly on a crowded machine;
/// whether it became ready. The caller sleeps if not.
pub(crate) fn spin_until(ready: impl Fn() -> bool) -> bool {
    if ready() {
        return true;
    }
    let policy = crate::env::icv().spin;
    if policy.is_zero() {
        return false;
    }
    let start = now_ns();
    let limit = if crowded(start) {
        policy.min(BRIEF)
    } else {
        policy
    }
    .as_nanos() as u64;
    let mut last = start;
    loop {
        for _ in 0..64 {
            if ready() {
                return true;
            }
            std::hint::spin_loop();
        }
        let now = now_ns();
        if now - last > GAP.as_nanos() as u64 {
            // Descheduled: the thread this one waits for may well be too. Sleep, and have the others sleep.
            crowd(now);
            return ready();
        }
        last = now;
        if now - start >= limit {
            return ready();
        }
    }
}

/// Whether the machine counts as crowded at `now`, sampling the run queues if it is time.
fn crowded(now: u64) -> bool {
    if now < CROWDED_UNTIL.load(Relaxed) {
        return true;
    }
    let at = SAMPLED_AT.load(Relaxed);
    if now.saturating_sub(at) < SAMPLE_EVERY.as_nanos() as u64
        || SAMPLED_AT
            .compare_exchange(at, now, Relaxed, Relaxed)
            .is_err()
    {
        return false;
    }
    if run_queues_crowded() {
        // Until the next sample at least.
        CROWDED_UNTIL.fetch_max(now + SAMPLE_EVERY.as_nanos() as u64, Relaxed);
        return true;
    }
    false
}

/// Counts the machine as crowded for [`HOLD`] from `now`.
fn crowd(now: u64) {
    CROWDED_UNTIL.fetch_max(now + HOLD.as_nanos() as u64, Relaxed);
}

/// Whether the kernel's run queues hold more threads than the machine has CPUs (one more is tolerated: a kernel
/// thread passing by). Both counts are the whole machine's, so a container's share of a larger machine does not
/// read as crowded; there the descheduled spin tells.
fn run_queues_crowded() -> bool {
    match (runnable(), online_cpus()) {
        (Some(running), Some(cpus)) => running > cpus + 1,
        _ => false,
    }
}

/// `/proc/loadavg`'s count of runnable threads (the fourth field, `running/total`), this one included.
#[cfg(not(miri))]
fn runnable() -> Option<u64> {
    use std::io::Read;
    let mut buf = [0u8; 128];
    let n = std::fs::File::open("/proc/loadavg")
        .ok()?
        .read(&mut buf)
        .ok()?;
    parse_runnable(std::str::from_utf8(&buf[..n]).ok()?)
}

/// Miri has no `/proc`.
#[cfg(miri)]
fn runnable() -> Option<u64> {
    None
}

fn parse_runnable(loadavg: &str) -> Option<u64> {
    loadavg
        .split_whitespace()
        .nth(3)?
        .split('/')
        .next()?
        .parse()
        .ok()
}

/// The machine's online CPUs, read once.
fn online_cpus() -> Option<u64> {
    static CPUS: OnceLock<Option<u64>> = OnceLock::new();
    *CPUS.get_or_init(|| {
        #[cfg(not(miri))]
        {
            // SAFETY: `sysconf` has no preconditions.
            let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
            (n > 0).then_some(n as u64)
        }
        #[cfg(miri)]
        None
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_running_count_is_the_fourth_field() {
        assert_eq!(parse_runnable("4.66 3.50 3.60 5/120 25720\n"), Some(5));
        assert_eq!(parse_runnable("0.00 0.01 0.05 1/99 1"), Some(1));
        assert_eq!(parse_runnable("garbage"), None);
    }

    #[test]
    // Miri's clock runs at its own pace.
    #[cfg_attr(miri, ignore)]
    fn a_crowded_machine_spins_only_briefly() {
        // Crowded for the next HOLD: a wait that never becomes ready gives up after about BRIEF, not the policy's
        // millisecond (a generous bound: this machine may be busy).
        crowd(now_ns());
        let t = Instant::now();
        assert!(!spin_until(|| false));
        assert!(
            t.elapsed() < Duration::from_micros(900),
            "{:?}",
            t.elapsed()
        );
        assert!(spin_until(|| true));
    }
}
