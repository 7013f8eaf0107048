//! `teams, parallel` (SPMD) regions on the host-elf device and in the host fallback (CONFORMANCE 24, 26, and 28 for
//! parallel regions): every thread of every team runs the body, team and thread numbers are in range and distinct,
//! a barrier orders a team's writes before its reads, and a failing thread never leaves its team waiting.
//!
//! The host devices give a team at most as many threads as the host has hardware threads (`thread_limit` is an upper
//! bound): the tests index by `omp_get_num_threads()` and expect `min(thread_limit, hw)` threads per team.

use core::sync::atomic::{AtomicU32, Ordering::Relaxed};
use offload::{
    barrier, omp_get_num_teams, omp_get_num_threads, omp_get_team_num, omp_get_thread_num,
    omp_is_initial_device, target,
};
use offload_tests::{default_device_name, team_limit};

/// The host's hardware threads: the most threads a host team gets.
fn hw() -> u32 {
    std::thread::available_parallelism().map_or(1, |n| n.get() as u32)
}

/// The tests of failing barriers need teams of at least two threads, which a one-core host never runs.
fn multicore(test: &str) -> bool {
    let ok = hw() >= 2;
    if !ok {
        eprintln!(
            "{test}: skipped, the host runs one thread at a time, so every team has one thread"
        );
    }
    ok
}

/// Each thread counts itself in `slots[team * threads + thread]`; returns the geometry it saw.
#[target(
    teams,
    parallel,
    num_teams(teams),
    thread_limit(threads),
    if(on_device)
)]
fn census(
    on_device: bool,
    teams: u32,
    threads: u32,
    slots: &[AtomicU32],
    bad: &[AtomicU32],
) -> u32 {
    let (t, n, i, m) = (
        omp_get_team_num(),
        omp_get_num_teams(),
        omp_get_thread_num(),
        omp_get_num_threads(),
    );
    if t < 0 || t >= n || i < 0 || i >= m || omp_is_initial_device() == on_device {
        bad[0].fetch_add(1, Relaxed);
    }
    slots[(t * m + i) as usize].fetch_add(1, Relaxed);
    (n * 1000 + m) as u32
}

#[test]
fn every_thread_of_every_team_runs_once() {
    for on_device in [true, false] {
        for (teams, threads) in [(1, 1), (3, 4), (7, 1), (2, 5)] {
            let slots: Vec<AtomicU32> = (0..teams * threads).map(|_| AtomicU32::new(0)).collect();
            let bad = [AtomicU32::new(0)];
            let seen = census(on_device, teams, threads, &slots, &bad);
            let m = threads.min(team_limit(on_device));
            assert_eq!(seen, teams * 1000 + m, "geometry (device: {on_device})");
            assert_eq!(bad[0].load(Relaxed), 0, "numbers in range, right device");
            let ran = (teams * m) as usize;
            assert!(
                slots[..ran].iter().all(|s| s.load(Relaxed) == 1)
                    && slots[ran..].iter().all(|s| s.load(Relaxed) == 0),
                "each (team, thread) once: {slots:?}"
            );
        }
    }
}

/// Phase 1: each thread writes its slot. Barrier. Phase 2: each reads its neighbour's, which must be written.
#[target(teams, parallel, num_teams(2), thread_limit(4), if(on_device))]
fn ordered(on_device: bool, stage: &[AtomicU32], seen: &[AtomicU32]) {
    let m = omp_get_num_threads();
    let me = (omp_get_team_num() * m + omp_get_thread_num()) as usize;
    stage[me].store(me as u32 + 1, Relaxed);
    barrier();
    let neighbour = (omp_get_team_num() * m + (omp_get_thread_num() + 1) % m) as usize;
    seen[me].store(stage[neighbour].load(Relaxed), Relaxed);
}

#[test]
fn a_barrier_orders_writes_before_reads() {
    for on_device in [true, false] {
        for _ in 0..20 {
            let stage: Vec<AtomicU32> = (0..8).map(|_| AtomicU32::new(0)).collect();
            let seen: Vec<AtomicU32> = (0..8).map(|_| AtomicU32::new(0)).collect();
            ordered(on_device, &stage, &seen);
            let ran = 2 * 4.min(team_limit(on_device)) as usize;
            assert!(
                seen[..ran].iter().all(|s| s.load(Relaxed) != 0),
                "read before the neighbour wrote: {seen:?}"
            );
        }
    }
}

/// Thread 1 of team 0 fails before the barrier the others wait at.
#[target(teams, parallel, num_teams(2), thread_limit(3), if(on_device))]
fn one_fails(on_device: bool, reached: &[AtomicU32]) {
    if omp_get_team_num() == 0 && omp_get_thread_num() == 1 {
        panic!("thread 1 gives up");
    }
    barrier();
    reached[0].fetch_add(1, Relaxed);
}

#[test]
fn a_failing_thread_does_not_hang_its_team() {
    if !multicore("a_failing_thread_does_not_hang_its_team") {
        return;
    }
    let reached = [AtomicU32::new(0)];
    let err = try_one_fails(true, &reached).expect_err("a thread panicked");
    let msg = err.to_string();
    assert!(
        msg.contains(&format!(
            "region parallel::one_fails failed on {}: thread 1 gives up",
            default_device_name()
        )),
        "{msg}"
    );
    // Team 1 never saw the failure; team 0's others left the barrier instead of waiting.
    let p = std::panic::catch_unwind(|| one_fails(false, &reached))
        .expect_err("the fallback fails too");
    let msg = p.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(
        msg.contains("region parallel::one_fails panicked in the host fallback: thread 1 gives up"),
        "{msg}"
    );
}

/// `unsafe fn` opts out of the SPMD rule against `&mut`: the region keeps its threads' writes apart itself.
#[target(teams, parallel, num_teams(2), thread_limit(2))]
unsafe fn disjoint(out: &mut [u32]) {
    let me = (omp_get_team_num() * omp_get_num_threads() + omp_get_thread_num()) as usize;
    // SAFETY (the region's contract): each thread writes only its own element.
    unsafe { *(out.as_ptr() as *mut u32).add(me) = me as u32 * 10 };
}

#[test]
fn an_unsafe_spmd_region_may_take_mut() {
    if !multicore("an_unsafe_spmd_region_may_take_mut") {
        return;
    }
    let mut out = [0u32; 4];
    // SAFETY: `disjoint` writes one element per thread.
    unsafe { disjoint(&mut out) };
    assert_eq!(out, [0, 10, 20, 30]);
}

// 23. teams_distribute_parallel_for: every iteration exactly once, across all teams and threads.
#[target(
    teams_distribute_parallel_for,
    num_teams(teams),
    thread_limit(threads),
    if(on_device)
)]
fn iterate(on_device: bool, teams: u32, threads: u32, hits: &[AtomicU32], out: &mut [u64]) -> u64 {
    let base = 1000u64 * teams as u64;
    for i in 0..out.len() {
        hits[i].fetch_add(1, Relaxed);
        out[i] = base + i as u64;
    }
    base
}

#[target(teams_distribute_parallel_for, num_teams(3), if(on_device))]
fn every_fourth(on_device: bool, start: usize, hits: &[AtomicU32], out: &mut [u32]) {
    for i in (start..out.len()).step_by(4) {
        hits[i].fetch_add(1, Relaxed);
        out[i] = i as u32;
    }
}

#[test]
fn each_iteration_runs_exactly_once() {
    for on_device in [true, false] {
        for (teams, threads) in [(1, 1), (3, 2), (4, 1), (2, 3)] {
            for n in [0usize, 1, 97, 10_007] {
                let hits: Vec<AtomicU32> = (0..n).map(|_| AtomicU32::new(0)).collect();
                let mut out = vec![0u64; n];
                let r = iterate(on_device, teams, threads, &hits, &mut out);
                assert_eq!(r, 1000 * teams as u64, "team 0 thread 0's tail value");
                let where_ = format!("device {on_device}, {teams}x{threads}, n = {n}");
                assert!(
                    hits.iter().all(|h| h.load(Relaxed) == 1),
                    "{where_}: {:?}",
                    &hits[..n.min(8)]
                );
                assert!(
                    out.iter().enumerate().all(|(i, &v)| v == r + i as u64),
                    "{where_}"
                );
            }
        }
        let hits: Vec<AtomicU32> = (0..103).map(|_| AtomicU32::new(0)).collect();
        let mut out = vec![u32::MAX; 103];
        every_fourth(on_device, 2, &hits, &mut out);
        for (i, (h, &o)) in hits.iter().zip(&out).enumerate() {
            let mine = i >= 2 && (i - 2) % 4 == 0;
            assert_eq!(h.load(Relaxed), mine as u32, "step_by: iteration {i}");
            assert_eq!(o, if mine { i as u32 } else { u32::MAX });
        }
    }
}

// 25. Reductions: private copies start at the identity; the result is `initial op combine(partials)`.
#[target(teams_distribute_parallel_for, num_teams(teams), thread_limit(threads), reduction(+: s), if(on_device))]
fn sum_ones(on_device: bool, teams: u32, threads: u32, x: &[f64]) -> f64 {
    let mut s = 10.0;
    for i in 0..x.len() {
        s += x[i];
    }
    s
}

#[target(teams_distribute_parallel_for, num_teams(3), thread_limit(2), reduction(*: p), if(on_device))]
fn product(on_device: bool, x: &[i64]) -> i64 {
    let mut p = 3;
    for i in 0..x.len() {
        p *= x[i];
    }
    p
}

#[target(teams_distribute_parallel_for, num_teams(4), reduction(min: m), if(on_device))]
fn minimum(on_device: bool, x: &[i32]) -> i32 {
    let mut m: i32 = 0;
    for i in 0..x.len() {
        m = m.min(x[i]);
    }
    m
}

#[target(teams_distribute_parallel_for, num_teams(4), reduction(max: m), if(on_device))]
fn maximum(on_device: bool, x: &[f32]) -> f32 {
    let mut m: f32 = -1.0e30;
    for i in 0..x.len() {
        m = m.max(x[i]);
    }
    m
}

#[target(teams_distribute_parallel_for, num_teams(3), thread_limit(3), reduction(&: a), if(on_device))]
fn all_bits(on_device: bool, x: &[u32]) -> u32 {
    let mut a = 0xffff_fff0;
    for i in 0..x.len() {
        a &= x[i];
    }
    a
}

#[target(teams_distribute_parallel_for, num_teams(3), reduction(|: o), if(on_device))]
fn any_bits(on_device: bool, x: &[u32]) -> u32 {
    let mut o = 0x1_0000;
    for i in 0..x.len() {
        o |= x[i];
    }
    o
}

#[target(teams_distribute_parallel_for, num_teams(5), reduction(^: h), if(on_device))]
fn parity(on_device: bool, x: &[u64]) -> u64 {
    let mut h = 0xabc;
    for i in 0..x.len() {
        h ^= x[i];
    }
    h
}

#[target(teams_distribute_parallel_for, num_teams(3), thread_limit(2), reduction(&&: ok), if(on_device))]
fn all_even(on_device: bool, x: &[u32]) -> bool {
    let mut ok = true;
    for i in 0..x.len() {
        ok = ok && x[i].is_multiple_of(2);
    }
    ok
}

#[target(teams_distribute_parallel_for, num_teams(3), reduction(||: any), if(on_device))]
fn any_seven(on_device: bool, x: &[u32]) -> bool {
    let mut any = false;
    for i in 0..x.len() {
        any = any || x[i] == 7;
    }
    any
}

#[test]
fn every_reduction_operator_matches_the_sequential_loop() {
    for on_device in [true, false] {
        for (teams, threads) in [(1, 1), (3, 2), (7, 3)] {
            for n in [0usize, 1, 97, 10_007] {
                let ones = vec![1.0f64; n];
                assert_eq!(
                    sum_ones(on_device, teams, threads, &ones),
                    10.0 + n as f64,
                    "+ with initial 10"
                );
            }
        }
        let x: Vec<i64> = (0..40).map(|i| if i % 7 == 0 { -2 } else { 1 }).collect();
        assert_eq!(product(on_device, &x), 3 * x.iter().product::<i64>());
        let y: Vec<i32> = (0..1000).map(|i| (i * 37 % 1001) - 500).collect();
        assert_eq!(minimum(on_device, &y), *y.iter().min().unwrap());
        assert_eq!(
            minimum(on_device, &[5, 9]),
            0,
            "the initial value takes part"
        );
        let f: Vec<f32> = (0..1000).map(|i| ((i * 13) % 997) as f32 * 0.5).collect();
        assert_eq!(
            maximum(on_device, &f),
            f.iter().cloned().fold(f32::MIN, f32::max)
        );
        let b: Vec<u32> = (0..64).map(|i| !(1u32 << (i % 4))).collect();
        assert_eq!(
            all_bits(on_device, &b),
            b.iter().fold(0xffff_fff0, |a, &v| a & v)
        );
        assert_eq!(any_bits(on_device, &[1, 2, 4, 64]), 0x1_0000 | 71);
        let h: Vec<u64> = (0..999).map(|i| i * 0x9e37_79b9).collect();
        assert_eq!(parity(on_device, &h), h.iter().fold(0xabc, |a, &v| a ^ v));
        assert!(all_even(on_device, &[2, 4, 6, 8, 10]));
        assert!(!all_even(on_device, &[2, 4, 6, 8, 11]));
        assert!(any_seven(on_device, &[1, 2, 7, 3]));
        assert!(!any_seven(on_device, &[1, 2, 3]));
        assert!(all_even(on_device, &[]), "identity of &&");
    }
}

#[test]
fn float_sums_are_within_a_stated_tolerance() {
    let x: Vec<f64> = (0..100_000).map(|i| 1.0 / (1.0 + i as f64)).collect();
    let seq = 10.0 + x.iter().sum::<f64>();
    for on_device in [true, false] {
        let par = sum_ones(on_device, 7, 3, &x);
        assert!((par - seq).abs() <= 1e-12 * seq.abs(), "{par} vs {seq}");
    }
}

// collapse(2): the (i, j) space is shared out as one; each pair exactly once.
#[target(
    teams_distribute_parallel_for,
    collapse(2),
    num_teams(teams),
    thread_limit(2),
    if(on_device)
)]
fn grid(on_device: bool, teams: u32, n: usize, m: usize, hits: &[AtomicU32], out: &mut [u32]) {
    for i in 0..n {
        for j in 0..m {
            hits[i * m + j].fetch_add(1, Relaxed);
            out[i * m + j] = (i * 1000 + j) as u32;
        }
    }
}

#[test]
fn collapse_2_runs_each_pair_exactly_once() {
    for on_device in [true, false] {
        for (teams, n, m) in [(1, 1, 1), (3, 0, 5), (3, 7, 0), (4, 13, 17), (5, 101, 3)] {
            let hits: Vec<AtomicU32> = (0..n * m).map(|_| AtomicU32::new(0)).collect();
            let mut out = vec![u32::MAX; n * m];
            grid(on_device, teams, n, m, &hits, &mut out);
            assert!(
                hits.iter().all(|h| h.load(Relaxed) == 1),
                "device {on_device}, {n}x{m}"
            );
            for i in 0..n {
                for j in 0..m {
                    assert_eq!(out[i * m + j], (i * 1000 + j) as u32);
                }
            }
        }
    }
}

// collapse(3): the (i, j, k) space is shared out as one, including a stepped inner loop and a labelled one.
#[target(
    teams_distribute_parallel_for,
    collapse(3),
    num_teams(teams),
    thread_limit(2),
    if(on_device)
)]
fn cube(
    on_device: bool,
    teams: u32,
    n: usize,
    m: usize,
    p: usize,
    hits: &[AtomicU32],
    out: &mut [u32],
) {
    for i in 0..n {
        for j in 0..m {
            'cells: for k in (0..p).step_by(1) {
                hits[(i * m + j) * p + k].fetch_add(1, Relaxed);
                if k == 1 {
                    continue 'cells;
                }
                out[(i * m + j) * p + k] = (i * 10_000 + j * 100 + k) as u32;
            }
        }
    }
}

#[test]
fn collapse_3_runs_each_triple_exactly_once() {
    for on_device in [true, false] {
        for (teams, n, m, p) in [
            (1, 1, 1, 1),
            (3, 0, 5, 2),
            (3, 7, 0, 3),
            (4, 5, 7, 11),
            (5, 13, 3, 2),
        ] {
            let hits: Vec<AtomicU32> = (0..n * m * p).map(|_| AtomicU32::new(0)).collect();
            let mut out = vec![u32::MAX; n * m * p];
            cube(on_device, teams, n, m, p, &hits, &mut out);
            let where_ = format!("device {on_device}, {n}x{m}x{p}");
            assert!(hits.iter().all(|h| h.load(Relaxed) == 1), "{where_}");
            for i in 0..n {
                for j in 0..m {
                    for k in 0..p {
                        let want = if k == 1 {
                            u32::MAX
                        } else {
                            (i * 10_000 + j * 100 + k) as u32
                        };
                        assert_eq!(out[(i * m + j) * p + k], want, "{where_}");
                    }
                }
            }
        }
    }
}

// 26. A barrier orders a team's writes to team-shared memory before its reads; each team has its own block.
#[target(teams, parallel, num_teams(3), thread_limit(4), if(on_device))]
fn shared_stages(on_device: bool, seen: &[AtomicU32]) -> u32 {
    let (t, i, m) = (
        omp_get_team_num() as u32,
        omp_get_thread_num() as u32,
        omp_get_num_threads() as u32,
    );
    let next = offload::team_shared(4, |slots: &[AtomicU32]| {
        slots[i as usize].store(t * 100 + i + 1, Relaxed);
        barrier();
        slots[((i + 1) % m) as usize].load(Relaxed)
    });
    seen[(t * m + i) as usize].store(next, Relaxed);
    m
}

#[test]
fn a_barrier_orders_team_shared_memory() {
    for on_device in [true, false] {
        for _ in 0..10 {
            let seen: Vec<AtomicU32> = (0..12).map(|_| AtomicU32::new(0)).collect();
            let m = shared_stages(on_device, &seen);
            assert_eq!(m, 4.min(team_limit(on_device)), "threads per team");
            for t in 0..3u32 {
                for i in 0..m {
                    let want = t * 100 + (i + 1) % m + 1;
                    assert_eq!(
                        seen[(t * m + i) as usize].load(Relaxed),
                        want,
                        "team {t} thread {i} (device {on_device})"
                    );
                }
            }
        }
    }
}

/// `continue` skips an iteration of a work-shared loop, plain or reduction, labelled or not.
#[target(teams_distribute_parallel_for, num_teams(3), if(on_device))]
fn odd_only(on_device: bool, y: &mut [u32]) {
    for i in 0..y.len() {
        if i.is_multiple_of(2) {
            continue;
        }
        y[i] = 1;
    }
}

#[target(teams_distribute_parallel_for, num_teams(3), reduction(+: s), if(on_device))]
fn sum_odd(on_device: bool, x: &[u64]) -> u64 {
    let mut s = 5;
    'items: for i in 0..x.len() {
        for _ in 0..1 {
            if x[i].is_multiple_of(2) {
                continue 'items;
            }
        }
        s += x[i];
    }
    s
}

#[test]
fn continue_skips_one_iteration() {
    for on_device in [true, false] {
        let mut y = vec![0u32; 101];
        odd_only(on_device, &mut y);
        assert!(
            y.iter().enumerate().all(|(i, &v)| v == (i % 2) as u32),
            "device {on_device}"
        );
        let x: Vec<u64> = (0..1001).collect();
        let want = 5 + x.iter().filter(|v| *v % 2 == 1).sum::<u64>();
        assert_eq!(sum_odd(on_device, &x), want, "device {on_device}");
    }
}

// Work-shared loops run groups of iterations below the indexed slices' lengths without bounds checks first; a
// slice shorter than the loop still fails at the first index past its end, as the sequential loop does.
#[target(teams_distribute_parallel_for, num_teams(1), reduction(+: s), if(on_device))]
fn dot_u32(on_device: bool, x: &[u32], y: &[u32]) -> u32 {
    let mut s = 0;
    for i in 0..x.len() {
        s += x[i] * y[i];
    }
    s
}

#[target(teams_distribute_parallel_for, num_teams(1), if(on_device))]
fn copy_u32(on_device: bool, x: &[u32], y: &mut [u32]) {
    for i in 0..y.len() {
        y[i] = x[i];
    }
}

#[test]
fn a_short_slice_fails_at_its_first_missing_index() {
    let (x, y) = (vec![2u32; 100], vec![3u32; 37]);
    for on_device in [true, false] {
        assert_eq!(dot_u32(on_device, &x[..37], &y), 37 * 6);
        // A device failure is an `Err` of the `try_` entry point; the host fallback's panic is re-raised.
        let failure = |f: &dyn Fn() -> Result<(), offload::Error>| match std::panic::catch_unwind(
            std::panic::AssertUnwindSafe(f),
        ) {
            Ok(r) => r
                .expect_err("the loop runs past the short slice")
                .to_string(),
            Err(p) => p.downcast_ref::<String>().cloned().unwrap_or_default(),
        };
        let msg = failure(&|| try_dot_u32(on_device, &x, &y).map(drop));
        assert!(
            msg.contains("the len is 37 but the index is 37"),
            "device {on_device}: {msg}"
        );
        let msg = failure(&|| try_copy_u32(on_device, &y, &mut vec![0u32; 100]));
        assert!(
            msg.contains("the len is 37 but the index is 37"),
            "device {on_device}: {msg}"
        );
    }
}

// `barrier()` and `team_shared()` belong to `teams, parallel` regions. Called anywhere else (here through a
// `#[declare_target]` helper the macro cannot see into) they fail the region with a message naming the call,
// instead of hanging (a work-shared thread with no iterations never reaches a barrier) or handing out memory the
// launch uses for something else (a reduction's partials).

/// Runs `f` on its own thread and waits a bounded time for it: a region that hangs fails the test instead of CI.
fn bounded<R: Send + 'static>(what: &str, f: impl FnOnce() -> R + Send + 'static) -> R {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)));
    });
    match rx.recv_timeout(std::time::Duration::from_secs(120)) {
        Ok(Ok(r)) => r,
        Ok(Err(p)) => std::panic::resume_unwind(p),
        Err(_) => panic!("{what} hung: a barrier that can no longer complete must fail the region"),
    }
}

/// The message of the host fallback's panic (re-raised with the region's name).
fn fallback_failure(f: impl FnOnce() + std::panic::UnwindSafe) -> String {
    let p = std::panic::catch_unwind(f).expect_err("the host fallback fails");
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

#[offload::declare_target]
fn sync_team() {
    barrier();
}

#[offload::declare_target]
fn poke_team_shared() -> u32 {
    offload::team_shared(4, |slots: &[AtomicU32]| {
        slots[0].fetch_add(1_000_000, Relaxed)
    })
}

#[target(
    teams_distribute_parallel_for,
    num_teams(2),
    thread_limit(4),
    reduction(+: s),
    if(on_device)
)]
fn sum_poking_team_shared(on_device: bool, x: &[u32]) -> u64 {
    let mut s = 0;
    for i in 0..x.len() {
        poke_team_shared();
        s += x[i] as u64;
    }
    s
}

#[test]
fn team_shared_in_a_work_shared_loop_fails_the_region() {
    let x = vec![1u32; 4096];
    let err = try_sum_poking_team_shared(true, &x)
        .expect_err("team_shared() in a work-shared loop fails the region")
        .to_string();
    assert!(
        err.contains(&format!(
            "sum_poking_team_shared failed on {}",
            default_device_name()
        )) && err.contains("offload::team_shared()")
            && err.contains("`teams, parallel`"),
        "{err}"
    );
    let msg = fallback_failure(|| {
        sum_poking_team_shared(false, &x);
    });
    assert!(
        msg.contains("offload::team_shared()") && msg.contains("`teams, parallel`"),
        "{msg}"
    );
}

#[target(
    teams_distribute_parallel_for,
    num_teams(1),
    thread_limit(4),
    if(on_device)
)]
fn barrier_in_a_loop(on_device: bool, y: &mut [u32]) {
    for i in 0..y.len() {
        sync_team();
        y[i] = 1;
    }
}

#[test]
fn a_barrier_in_a_work_shared_loop_fails_instead_of_hanging() {
    // One iteration for four threads: three of them never reach the barrier.
    for on_device in [true, false] {
        let msg = bounded("a barrier in a work-shared loop", move || {
            let mut y = [0u32; 1];
            if on_device {
                try_barrier_in_a_loop(true, &mut y)
                    .expect_err("barrier() in a work-shared loop fails the region")
                    .to_string()
            } else {
                fallback_failure(move || barrier_in_a_loop(false, &mut y))
            }
        });
        assert!(
            msg.contains("offload::barrier()") && msg.contains("`teams, parallel`"),
            "device {on_device}: {msg}"
        );
    }
}

#[target(if(on_device))]
fn barrier_in_a_serial_region(on_device: bool) -> u32 {
    sync_team();
    7
}

#[test]
fn a_barrier_in_a_serial_region_fails_the_region() {
    let err = try_barrier_in_a_serial_region(true)
        .expect_err("barrier() in a serial region fails the region")
        .to_string();
    assert!(
        err.contains("offload::barrier()") && err.contains("serial region"),
        "{err}"
    );
    // The host fallback of a serial region is a plain call: outside any `teams, parallel` region, so it fails too.
    let msg = fallback_failure(|| {
        barrier_in_a_serial_region(false);
    });
    assert!(
        msg.contains("offload::barrier()") && msg.contains("`teams, parallel`"),
        "{msg}"
    );
}

// A barrier that some thread of the team can no longer reach fails the region on the host devices, naming the
// thread that finished without it, instead of leaving the others waiting forever.
#[target(teams, parallel, num_teams(2), thread_limit(3), if(on_device))]
fn divergent_barrier(on_device: bool) {
    if omp_get_thread_num() == 0 {
        barrier();
    }
}

#[target(teams, parallel, num_teams(1), thread_limit(4), if(on_device))]
fn early_return(on_device: bool, reached: &[AtomicU32]) {
    barrier();
    if omp_get_thread_num() == omp_get_num_threads() - 1 {
        return;
    }
    barrier();
    reached[0].fetch_add(1, Relaxed);
}

#[test]
fn a_divergent_barrier_fails_instead_of_hanging() {
    if !multicore("a_divergent_barrier_fails_instead_of_hanging") {
        return;
    }
    for on_device in [true, false] {
        let last = 4.min(team_limit(on_device)) - 1;
        let msg = bounded("a divergent barrier", move || {
            if on_device {
                try_divergent_barrier(true)
                    .expect_err("thread 0 waits for threads that finished")
                    .to_string()
            } else {
                fallback_failure(|| divergent_barrier(false))
            }
        });
        assert!(
            msg.contains("of team") && msg.contains("finished without reaching the barrier"),
            "device {on_device}: {msg}"
        );
        let msg = bounded("an early return", move || {
            let reached = [AtomicU32::new(0)];
            if on_device {
                try_early_return(true, &reached)
                    .expect_err("the others wait for the last thread, which returned")
                    .to_string()
            } else {
                fallback_failure(|| early_return(false, &reached))
            }
        });
        assert!(
            msg.contains(&format!(
                "thread {last} of team 0 finished without reaching the barrier"
            )),
            "device {on_device}: {msg}"
        );
    }
}

// Launch geometry: the host devices never run more threads than the host runs at once. `thread_limit` is
// an upper bound: a team gets at most the host's hardware threads, all running at once, and
// `omp_get_num_threads()` says how many; a work-shared loop shares its iterations over the threads it got.

/// A loop asking for 256 threads per team: each iteration records the team size its thread saw.
#[target(teams_distribute_parallel_for, thread_limit(256), if(on_device))]
fn wide_loop(on_device: bool, hits: &[AtomicU32], sizes: &[AtomicU32]) -> u32 {
    let m = omp_get_num_threads() as u32;
    let ok = omp_get_thread_num() >= 0 && omp_get_thread_num() < omp_get_num_threads();
    for i in 0..hits.len() {
        hits[i].fetch_add(1, Relaxed);
        sizes[i].store(if ok { m } else { u32::MAX }, Relaxed);
    }
    m
}

#[test]
fn a_wide_work_shared_loop_gets_at_most_the_hardware_threads_and_runs_every_iteration_once() {
    for on_device in [true, false] {
        let n = 4096;
        let hits: Vec<AtomicU32> = (0..n).map(|_| AtomicU32::new(0)).collect();
        let sizes: Vec<AtomicU32> = (0..n).map(|_| AtomicU32::new(0)).collect();
        let m = wide_loop(on_device, &hits, &sizes);
        assert_eq!(
            m,
            256.min(team_limit(on_device)),
            "device {on_device}: threads per team"
        );
        assert!(
            hits.iter().all(|h| h.load(Relaxed) == 1),
            "device {on_device}: every iteration exactly once"
        );
        assert!(
            sizes.iter().all(|s| s.load(Relaxed) == m),
            "device {on_device}: every thread saw the same team size, its number below it"
        );
    }
}

/// 64 teams of 128 threads asked: each team sums its thread numbers by a tree over team-shared memory, a barrier per
/// level, indexing by `omp_get_num_threads()`; thread `i` of team `t` writes `seen[t * m + i]`. Returns
/// `teams * 1000 + threads per team`.
#[target(teams, parallel, num_teams(64), thread_limit(128), if(on_device))]
fn tree_sums(on_device: bool, seen: &[AtomicU32]) -> u32 {
    let (t, n, i, m) = (
        omp_get_team_num() as u32,
        omp_get_num_teams() as u32,
        omp_get_thread_num() as u32,
        omp_get_num_threads() as u32,
    );
    let total = offload::team_shared(128, |slots: &[AtomicU32]| {
        slots[i as usize].store(i, Relaxed);
        barrier();
        let mut stride = 1;
        while stride < m {
            if i % (2 * stride) == 0 && i + stride < m {
                let other = slots[(i + stride) as usize].load(Relaxed);
                slots[i as usize].fetch_add(other, Relaxed);
            }
            barrier();
            stride *= 2;
        }
        slots[0].load(Relaxed)
    });
    seen[(t * m + i) as usize].store(total + 1, Relaxed);
    n * 1000 + m
}

#[test]
fn an_spmd_region_with_barriers_is_correct_with_the_reduced_geometry() {
    for on_device in [true, false] {
        for _ in 0..5 {
            let seen: Vec<AtomicU32> = (0..64 * 128).map(|_| AtomicU32::new(0)).collect();
            let geometry = tree_sums(on_device, &seen);
            let (n, m) = (geometry / 1000, geometry % 1000);
            assert_eq!(
                m,
                128.min(team_limit(on_device)),
                "device {on_device}: threads per team"
            );
            assert!(
                (1..=64).contains(&n),
                "device {on_device}: {n} teams (num_teams is an upper bound)"
            );
            let want = m * (m - 1) / 2 + 1;
            let ran = (n * m) as usize;
            assert!(
                seen[..ran].iter().all(|s| s.load(Relaxed) == want)
                    && seen[ran..].iter().all(|s| s.load(Relaxed) == 0),
                "device {on_device}: every thread of every team saw its team's sum {want}"
            );
        }
    }
}
