//! Team-shared memory under one atomic type per launch, in the host fallback, for Miri (CI runs this file under
//! Stacked and Tree Borrows). Two threads of a team asking for the block as `AtomicU64` and as `AtomicU8` would be a
//! mixed-size race, which Miri reports as undefined behaviour; instead the second type's call fails the region.

use core::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering::Relaxed};
use offload::{barrier, declare_target, omp_get_thread_num, target, team_shared};

#[declare_target]
fn add_wide() -> u64 {
    team_shared(1, |w: &[AtomicU64]| w[0].fetch_add(0x0101, Relaxed))
}

#[declare_target]
fn read_narrow() -> u8 {
    team_shared(1, |b: &[AtomicU8]| b[0].load(Relaxed))
}

/// Thread 0 views the block as 64-bit atomics, thread 1 as bytes, with nothing ordering the two: whichever claims the
/// block first, the other fails without touching it. .ci/run gives Miri two CPUs, so a team has two threads.
#[target(teams, parallel, num_teams(1), thread_limit(2))]
fn two_widths(seen: &[AtomicU32]) {
    let v = if omp_get_thread_num() == 0 {
        add_wide() as u32
    } else {
        read_narrow() as u32
    };
    seen[omp_get_thread_num() as usize].store(v + 1, Relaxed);
}

/// One type over several calls and a barrier.
#[target(teams, parallel, num_teams(2), thread_limit(2))]
fn one_width(sums: &[AtomicU64]) {
    add_wide();
    barrier();
    let total = add_wide();
    barrier();
    if omp_get_thread_num() == 0 {
        sums[offload::omp_get_team_num() as usize].store(total, Relaxed);
    }
}

#[test]
fn a_second_atomic_type_fails_the_region() {
    let seen = [AtomicU32::new(0), AtomicU32::new(0)];
    let p = std::panic::catch_unwind(|| two_widths(&seen)).expect_err("two types in one launch");
    let msg = p.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(
        msg.contains("`AtomicU64`") && msg.contains("`AtomicU8`"),
        "{msg}"
    );
    assert!(
        seen.iter().any(|s| s.load(Relaxed) == 0),
        "one thread failed before it stored"
    );
}

#[test]
fn one_atomic_type_per_launch_is_fine() {
    let sums = [AtomicU64::new(0), AtomicU64::new(0)];
    one_width(&sums);
    for s in &sums {
        // Each of a team's (one or two) threads adds 0x0101 before the barrier and again after it; thread 0 stores
        // what its second add found: the first round's sum, plus the other thread's second add if that came first.
        let v = s.load(Relaxed);
        assert!(v == 0x0101 || v == 2 * 0x0101 || v == 3 * 0x0101, "{v:#x}");
    }
}
