//! The histogram through team-shared atomics, as `--bench openmp` times it against clang's and `--bench reduction`
//! against `reduction(+: hist)`: one region, included by both benches (`#[path]`, which the outliner follows).

use core::sync::atomic::{AtomicU32, Ordering::Relaxed};
use offload::{
    barrier, declare_target, omp_get_num_teams, omp_get_num_threads, omp_get_team_num,
    omp_get_thread_num, target,
};

#[declare_target]
pub const BINS: usize = 256;

/// Each thread counts its block of `data` into its team's shared bins; after the team's barrier the threads add the
/// bins into the global histogram.
#[target(
    teams,
    parallel,
    num_teams(teams),
    thread_limit(threads),
    if(on_device)
)]
pub fn histogram(on_device: bool, teams: u32, threads: u32, data: &[u32], hist: &[AtomicU32]) {
    let (nth, tid) = (
        omp_get_num_threads() as usize,
        omp_get_thread_num() as usize,
    );
    let all = omp_get_num_teams() as usize * nth;
    let me = omp_get_team_num() as usize * nth + tid;
    let chunk = data.len().div_ceil(all);
    let lo = (me * chunk).min(data.len());
    let hi = (lo + chunk).min(data.len());
    offload::team_shared(BINS, |local: &[AtomicU32]| {
        for &v in &data[lo..hi] {
            local[v as usize % BINS].fetch_add(1, Relaxed);
        }
        barrier();
        for b in (tid..BINS).step_by(nth) {
            hist[b].fetch_add(local[b].load(Relaxed), Relaxed);
        }
    });
}
