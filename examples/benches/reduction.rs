//! An array reduction against team-shared atomics: a 256-bin `u32` histogram of 2^24 values on
//! the host-elf device, as `reduction(+: hist)` over `let mut hist = [0u32; 256]` and as the `teams, parallel`
//! region of `--bench openmp` (each team counts into its team-shared atomic bins, then adds them into the result),
//! on the same geometry (teams of 2 threads), side by side in one run. The data is present; the bins are mapped per
//! call. Prints the median time per call of each and the ratio reduction/atomics (lower is better).
//!
//! Target: at most 1.5x.
//!
//! `cargo bench -p offload-examples --bench reduction`

#[path = "kernels/histogram.rs"]
mod histogram;

use crate::histogram::{histogram, BINS};
use core::sync::atomic::{AtomicU32, Ordering::Relaxed};
use offload::{target, target_data};
use std::hint::black_box;
use std::time::Instant;

const N: usize = 1 << 24;
const ROUNDS: usize = 21;

/// The histogram as OpenMP's array reduction: each thread counts into its private bins, combined element by element.
#[target(
    teams_distribute_parallel_for,
    num_teams(teams),
    thread_limit(threads),
    reduction(+: hist)
)]
fn by_reduction(teams: u32, threads: u32, data: &[u32]) -> [u32; 256] {
    let mut hist = [0u32; 256];
    for i in 0..data.len() {
        hist[data[i] as usize % BINS] += 1;
    }
    hist
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    assert_eq!(
        offload::omp_get_num_devices(),
        1,
        "run with the host-elf device available"
    );
    // Teams of 2 threads, as `--bench openmp` runs its histogram, so the team-shared atomics are shared.
    let hw = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
    let (teams, threads) = ((hw / 2).max(1), 2.min(hw));
    let data: Vec<u32> = (0..N as u32)
        .map(|i| i.wrapping_mul(2_654_435_761).rotate_left(13))
        .collect();
    let mut want = [0u32; BINS];
    for &v in &data {
        want[v as usize % BINS] += 1;
    }
    let hist: Vec<AtomicU32> = (0..BINS).map(|_| AtomicU32::new(0)).collect();
    let (mut reduced, mut atomic) = (Vec::new(), Vec::new());
    target_data!(map(to: data) => {
        for round in 0..ROUNDS + 1 {
            let t = Instant::now();
            let got = black_box(by_reduction(teams, threads, data));
            let r = t.elapsed().as_secs_f64();
            hist.iter().for_each(|b| b.store(0, Relaxed));
            let t = Instant::now();
            histogram(true, teams, threads, data, &hist);
            let a = t.elapsed().as_secs_f64();
            let bins: Vec<u32> = hist.iter().map(|b| b.load(Relaxed)).collect();
            assert_eq!(got, want, "the reduction's histogram");
            assert_eq!(bins, want, "the atomics' histogram");
            // The first round warms up (images loaded, pages touched).
            if round > 0 {
                reduced.push(r);
                atomic.push(a);
            }
        }
    });
    let (r, a) = (median(reduced), median(atomic));
    println!(
        "256-bin histogram of {N} u32s on host-elf, {teams} team(s) x {threads} threads, median of {ROUNDS}:"
    );
    println!("  reduction(+: hist)   {:8.3} ms", r * 1e3);
    println!("  team-shared atomics  {:8.3} ms", a * 1e3);
    println!("  reduction / atomics  {:8.2} (target <= 1.5)", r / a);
}
