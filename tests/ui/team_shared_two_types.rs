use core::sync::atomic::{AtomicU64, AtomicU8, Ordering::Relaxed};
use offload::{target, team_shared};

// One launch's team-shared memory as 64-bit atomics, then as bytes: a mixed-size race.
#[target(teams, parallel)]
fn two_widths(out: &[AtomicU64]) {
    let wide = team_shared(1, |w: &[AtomicU64]| w[0].fetch_add(1, Relaxed));
    let narrow = team_shared(8, |b: &[AtomicU8]| b[0].load(Relaxed));
    out[0].store(wide + narrow as u64, Relaxed);
}

// The same through the turbofish.
#[target(teams, parallel)]
fn turbofish(out: &[AtomicU64]) {
    let wide = team_shared::<AtomicU64, _>(1, |w| w[0].load(Relaxed));
    let narrow = team_shared::<AtomicU8, _>(1, |b| b[0].load(Relaxed));
    out[0].store(wide + narrow as u64, Relaxed);
}

fn main() {}
