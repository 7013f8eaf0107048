use core::sync::atomic::AtomicU32;
use offload::{barrier, target, team_shared};

// A thread with no iteration never reaches the barrier.
#[target(teams_distribute_parallel_for)]
fn waits(y: &mut [u32]) {
    for i in 0..y.len() {
        barrier();
        y[i] = 1;
    }
}

// A reduction keeps its partials in the team's memory.
#[target(teams_distribute_parallel_for, reduction(+: s))]
fn shares(x: &[u32]) -> u32 {
    let mut s = 0;
    for i in 0..x.len() {
        offload::team_shared(1, |a: &[AtomicU32]| a[0].store(1, core::sync::atomic::Ordering::Relaxed));
        s += x[i];
    }
    s
}

#[target]
fn serial() -> u32 {
    team_shared(1, |a: &[AtomicU32]| a.len() as u32)
}

fn main() {}
