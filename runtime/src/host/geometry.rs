//! Launch geometry: where and how a region asks to run (its clauses), and how many teams and threads a launch gets,
//! on any device (its defaults and maxima) and on the host (its hardware threads).

use offload_model::abi::Construct;
/// Where and how a region asks to run: `device(..)`, `if(..)`, its construct, `num_teams`, `thread_limit`.
#[derive(Clone, Copy, Debug, Default)]
pub struct Launch {
    /// The `device(..)` clause's device number; `None`: the default device.
    pub device: Option<i32>,
    /// The `if(..)` clause's value (`true` without one); `false` runs the region on the host.
    pub cond: bool,
    /// What the teams and threads do with the body.
    pub construct: Construct,
    /// The `num_teams(..)` clause's value, an upper bound.
    pub num_teams: Option<u32>,
    /// The `thread_limit(..)` (or `num_threads(..)`) clause's value, an upper bound.
    pub thread_limit: Option<u32>,
}

impl Launch {
    /// (teams, threads per team) on a device of `limits`, the one place a launch's geometry is computed (every
    /// device's launch, LLVM's devices' and the host fallback): a serial region is one team of one thread; a
    /// parallel one takes its clauses as upper bounds (OpenMP lets the implementation run fewer teams and threads),
    /// and what they leave open from the device's defaults, clamped to its maxima. Zero means one.
    #[inline]
    pub fn geometry(self, limits: &LaunchLimits) -> (u32, u32) {
        if !self.construct.is_parallel() {
            return (1, 1);
        }
        let defaults = limits.defaults(self.construct);
        let teams = self
            .num_teams
            .unwrap_or(defaults.0)
            .clamp(1, limits.max_teams.max(1));
        let threads = self
            .thread_limit
            .unwrap_or(defaults.1)
            .clamp(1, limits.max_threads.max(1));
        (teams, threads)
    }

    /// [`Launch::geometry`] on the host (host-elf and the host fallback): [`host_limits`].
    pub fn host_geometry(self) -> (u32, u32) {
        self.geometry(&host_limits())
    }

    /// The `OFFLOAD_INFO` note for a launch that gets `got` (teams, threads per team), fewer than its clauses ask:
    /// each clause cut down, to what, and why (`why`: the device's reasons for its team and thread limits). `None`
    /// when the launch gets what it asks.
    pub(crate) fn reduced(self, got: (u32, u32), why: (&str, &str)) -> Option<String> {
        if !self.construct.is_parallel() {
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

/// What a device takes in a launch: its default geometry for what the clauses leave open, its maxima (and why, for
/// `OFFLOAD_INFO`'s note on a launch cut down), and the most kernel arguments it passes. A plugin says it once per
/// device; the device layer's launch template applies it, so no plugin clamps or checks a launch itself.
#[derive(Clone, Copy, Debug)]
pub struct LaunchLimits {
    /// (teams, threads per team) of a construct of wide teams (`Construct::wide_teams`) whose clauses leave them open.
    pub wide: (u32, u32),
    /// (teams, threads per team) of a work-shared teams loop whose clauses leave them open.
    pub narrow: (u32, u32),
    /// The most teams a launch gets (`num_teams` is an upper bound).
    pub max_teams: u32,
    /// The most threads a team gets.
    pub max_threads: u32,
    /// The most kernel arguments (after `dyn_ptr`) a launch passes.
    pub max_args: usize,
    /// Why a launch gets at most `max_teams` teams and `max_threads` threads: what [`Launch::reduced`] says.
    pub why: (&'static str, &'static str),
}

impl LaunchLimits {
    /// (teams, threads per team) of a parallel launch of `construct` whose clauses leave them open.
    #[inline]
    pub fn defaults(&self, construct: Construct) -> (u32, u32) {
        match construct.wide_teams() {
            true => self.wide,
            false => self.narrow,
        }
    }
}

/// The host's launch limits (host-elf, LLVM's host plugin and the host fallback): [`host_default_geometry`],
/// [`host_max_teams`], [`host_max_threads`].
pub fn host_limits() -> LaunchLimits {
    LaunchLimits {
        wide: host_default_geometry(true),
        narrow: host_default_geometry(false),
        max_teams: host_max_teams(),
        max_threads: host_max_threads(),
        max_args: offload_model::abi::MAX_KERNEL_ARGS,
        why: HOST_LIMITS_WHY,
    }
}

/// The host's defaults: as many teams as it has hardware threads, with one thread each for a work-shared loop and as
/// many as it has for an SPMD body (which exists to use several).
pub fn host_default_geometry(wide: bool) -> (u32, u32) {
    let hw = hardware_threads();
    (hw, if wide { hw } else { 1 })
}

/// The most teams a host launch runs (`num_teams` is an upper bound): a few waves of as many as run at once, so
/// the per-team memory of a launch stays small and `num_teams(u64::MAX)` finishes.
pub fn host_max_teams() -> u32 {
    hardware_threads().saturating_mul(4)
}

/// The most threads a host team gets (`thread_limit` is an upper bound, and `omp_get_num_threads()` tells what a
/// team got): as many as the host runs at once. A team's threads must all run at the same time (a barrier waits for
/// every one), and threads beyond the cores cost about a millisecond each per launch, spinning on cores the others
/// need (`thread_limit(256)` took half a second on 2 cores).
pub fn host_max_threads() -> u32 {
    hardware_threads()
}

/// The host's hardware threads, read once: `available_parallelism` reads cgroup files on Linux, too slow for every
/// launch.
pub(crate) fn hardware_threads() -> u32 {
    static HW: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *HW.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get() as u32))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parallel(spmd: bool, num_teams: Option<u32>, thread_limit: Option<u32>) -> Launch {
        Launch {
            construct: if spmd {
                Construct::Spmd
            } else {
                Construct::TeamsDistributeParallelFor
            },
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
