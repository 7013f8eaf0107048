//! OpenMP's loop constructs and clauses as C programs use them (`target parallel for`, `teams distribute`, the
//! `simd` forms, `schedule`, `private`, `num_threads`), on host-elf and in the host fallback: every iteration runs
//! once, on the geometry the construct promises.

use core::sync::atomic::{AtomicU32, Ordering::Relaxed};
use offload::{
    declare_target, omp_get_num_teams, omp_get_num_threads, omp_get_team_num, omp_get_thread_num,
    target,
};

/// Records, for iteration `i`, 1 + the global thread that ran it, and the geometry it saw.
#[declare_target]
fn who_ran(i: usize, owner: &[AtomicU32], geometry: &[AtomicU32]) {
    let t = (omp_get_team_num() * omp_get_num_threads() + omp_get_thread_num()) as u32;
    owner[i].store(t + 1, Relaxed);
    geometry[0].fetch_max(omp_get_num_teams() as u32, Relaxed);
    geometry[1].fetch_max(omp_get_num_threads() as u32, Relaxed);
}

#[target(parallel_for, num_threads(3), if(on_device))]
fn parallel_for(on_device: bool, owner: &[AtomicU32], geometry: &[AtomicU32]) {
    for i in 0..owner.len() {
        who_ran(i, owner, geometry);
    }
}

#[target(parallel_for_simd, if(on_device))]
fn parallel_for_simd(on_device: bool, x: &[f32], y: &mut [f32]) {
    for i in 0..y.len() {
        y[i] += 2.0 * x[i];
    }
}

#[target(teams_distribute, num_teams(3), if(on_device))]
fn teams_distribute(on_device: bool, owner: &[AtomicU32], geometry: &[AtomicU32]) {
    for i in 0..owner.len() {
        who_ran(i, owner, geometry);
    }
}

#[target(teams_distribute_parallel_for_simd, reduction(+: s), if(on_device))]
fn dot_simd(on_device: bool, x: &[f32], y: &[f32]) -> f32 {
    let mut s = 0.0;
    for i in 0..x.len() {
        s += x[i] * y[i];
    }
    s
}

#[target(teams_distribute_parallel_for, simd, if(on_device))]
fn scale_simd(on_device: bool, k: f32, y: &mut [f32]) {
    for i in 0..y.len() {
        y[i] *= k;
    }
}

#[target(
    teams_distribute_parallel_for,
    num_teams(2),
    thread_limit(2),
    schedule(static, 4),
    if(on_device)
)]
fn chunked(on_device: bool, owner: &[AtomicU32], geometry: &[AtomicU32]) {
    for i in 0..owner.len() {
        who_ran(i, owner, geometry);
    }
}

#[target(
    teams_distribute_parallel_for,
    num_teams(2),
    thread_limit(2),
    schedule(dynamic, 3),
    if(on_device)
)]
fn dynamic(on_device: bool, hits: &[AtomicU32]) {
    for i in 0..hits.len() {
        hits[i].fetch_add(1, Relaxed);
    }
}

/// `schedule(static, 3)` over a `collapse(2)` nest: chunks of its flattened space, dealt round-robin.
#[target(
    teams_distribute_parallel_for,
    collapse(2),
    num_teams(2),
    thread_limit(2),
    schedule(static, 3),
    if(on_device)
)]
fn chunked_nest(on_device: bool, n: usize, m: usize, owner: &[AtomicU32], geometry: &[AtomicU32]) {
    for i in 0..n {
        for j in 0..m {
            who_ran(i * m + j, owner, geometry);
        }
    }
}

/// A stencil's interior under `collapse(2)` and `schedule(dynamic, 5)`: each cell written once, by its iteration.
#[target(
    teams_distribute_parallel_for,
    collapse(2),
    schedule(dynamic, 5),
    if(on_device)
)]
fn dynamic_stencil(on_device: bool, n: usize, m: usize, a: &[u32], y: &mut [u32]) {
    for j in 1..n - 1 {
        for i in 1..m - 1 {
            y[j * m + i] += a[j * m + i - 1] + a[(j - 1) * m + i] + 1;
        }
    }
}

/// A reduction over a chunked `collapse(2)` nest.
#[target(
    teams_distribute_parallel_for,
    collapse(2),
    schedule(static, 7),
    reduction(+: s),
    if(on_device)
)]
fn chunked_nest_sum(on_device: bool, n: u64, m: u64) -> u64 {
    let mut s = 0;
    for i in 0..n {
        for j in 1..=m {
            s += i * 1000 + j;
        }
    }
    s
}

/// Chunked schedules over `a..=b` (here a negative one), one ending at the type's maximum, and `step_by`.
#[target(
    teams_distribute_parallel_for,
    num_teams(2),
    thread_limit(2),
    schedule(static, 4),
    if(on_device)
)]
fn chunked_inclusive(on_device: bool, owner: &[AtomicU32], geometry: &[AtomicU32]) {
    for i in -20i32..=29 {
        who_ran((i + 20) as usize, owner, geometry);
    }
}

#[target(teams_distribute_parallel_for, schedule(dynamic, 2), if(on_device))]
fn dynamic_to_max(on_device: bool, hits: &[AtomicU32]) {
    for i in 200u8..=255 {
        hits[(i - 200) as usize].fetch_add(1, Relaxed);
    }
}

#[target(teams_distribute_parallel_for, schedule(static, 2), if(on_device))]
fn chunked_steps(on_device: bool, y: &mut [u32]) {
    for i in (1..y.len()).step_by(3) {
        y[i] += 1;
    }
}

/// C's `double t;` with `private(t)`, and a private with a value.
#[target(teams_distribute_parallel_for, private(t, acc), if(on_device))]
fn privates(on_device: bool, x: &[f64], y: &mut [f64]) {
    let mut t: f64;
    let mut acc = 0.0;
    for i in 0..y.len() {
        t = x[i] * 2.0;
        acc += 1.0;
        y[i] = t + 1.0 + 0.0 * acc;
    }
}

fn atomics(n: usize) -> Vec<AtomicU32> {
    (0..n).map(|_| AtomicU32::new(0)).collect()
}

fn loads(v: &[AtomicU32]) -> Vec<u32> {
    v.iter().map(|a| a.load(Relaxed)).collect()
}

#[test]
fn parallel_for_runs_one_team_and_teams_distribute_one_thread_per_team() {
    for on_device in [true, false] {
        let (owner, geometry) = (atomics(97), atomics(2));
        parallel_for(on_device, &owner, &geometry);
        let g = loads(&geometry);
        assert_eq!(g[0], 1, "parallel_for: one team (device {on_device})");
        assert!(
            (1..=3).contains(&g[1]),
            "num_threads(3) bounds the team: {g:?}"
        );
        assert!(
            loads(&owner).iter().all(|&o| (1..=g[1]).contains(&o)),
            "device {on_device}"
        );

        let (owner, geometry) = (atomics(97), atomics(2));
        teams_distribute(on_device, &owner, &geometry);
        let g = loads(&geometry);
        assert_eq!(
            g[1], 1,
            "teams_distribute: one thread per team (device {on_device})"
        );
        assert!((1..=3).contains(&g[0]), "num_teams(3): {g:?}");
        assert!(
            loads(&owner).iter().all(|&o| (1..=g[0]).contains(&o)),
            "device {on_device}"
        );
    }
}

#[test]
fn simd_forms_compute_what_the_plain_ones_do() {
    for on_device in [true, false] {
        let x: Vec<f32> = (0..1000).map(|v| (v % 7) as f32).collect();
        let mut y = vec![1.0f32; 1000];
        parallel_for_simd(on_device, &x, &mut y);
        assert!(
            y.iter().zip(&x).all(|(a, b)| *a == 1.0 + 2.0 * b),
            "device {on_device}"
        );
        scale_simd(on_device, 0.5, &mut y);
        assert!(
            y.iter().zip(&x).all(|(a, b)| *a == 0.5 + b),
            "device {on_device}"
        );
        let want: f32 = x.iter().map(|v| v * v).sum();
        assert_eq!(dot_simd(on_device, &x, &x), want, "device {on_device}");
    }
}

#[test]
fn schedule_static_chunk_deals_chunks_round_robin_and_dynamic_runs_each_once() {
    for on_device in [true, false] {
        let (owner, geometry) = (atomics(50), atomics(2));
        chunked(on_device, &owner, &geometry);
        let g = loads(&geometry);
        let total = g[0] * g[1];
        let got = loads(&owner);
        for (i, &o) in got.iter().enumerate() {
            assert_eq!(
                o - 1,
                (i as u32 / 4) % total,
                "iteration {i} of {got:?} ({g:?}, device {on_device})"
            );
        }
        let hits = atomics(101);
        dynamic(on_device, &hits);
        assert!(loads(&hits).iter().all(|&h| h == 1), "device {on_device}");
    }
}

#[test]
fn chunked_schedules_deal_nests_inclusive_ranges_and_steps() {
    for on_device in [true, false] {
        let (n, m) = (7, 9);
        let (owner, geometry) = (atomics(n * m), atomics(2));
        chunked_nest(on_device, n, m, &owner, &geometry);
        let g = loads(&geometry);
        let total = g[0] * g[1];
        let got = loads(&owner);
        for (f, &o) in got.iter().enumerate() {
            assert_eq!(
                o - 1,
                (f as u32 / 3) % total,
                "flat iteration {f} of {got:?} ({g:?}, device {on_device})"
            );
        }

        let (n, m) = (13usize, 17usize);
        let a: Vec<u32> = (0..(n * m) as u32).map(|k| k % 5).collect();
        let mut y = vec![0u32; n * m];
        dynamic_stencil(on_device, n, m, &a, &mut y);
        for j in 0..n {
            for i in 0..m {
                let k = j * m + i;
                let want = if (1..n - 1).contains(&j) && (1..m - 1).contains(&i) {
                    a[k - 1] + a[k - m] + 1
                } else {
                    0
                };
                assert_eq!(y[k], want, "cell ({j}, {i}), device {on_device}");
            }
        }

        let want: u64 = (0..11u64)
            .flat_map(|i| (1..=23u64).map(move |j| i * 1000 + j))
            .sum();
        assert_eq!(
            chunked_nest_sum(on_device, 11, 23),
            want,
            "device {on_device}"
        );

        let (owner, geometry) = (atomics(50), atomics(2));
        chunked_inclusive(on_device, &owner, &geometry);
        let g = loads(&geometry);
        let total = g[0] * g[1];
        let got = loads(&owner);
        for (k, &o) in got.iter().enumerate() {
            assert_eq!(
                o - 1,
                (k as u32 / 4) % total,
                "position {k} of {got:?} ({g:?}, device {on_device})"
            );
        }

        let hits = atomics(56);
        dynamic_to_max(on_device, &hits);
        assert!(loads(&hits).iter().all(|&h| h == 1), "device {on_device}");

        let mut y = vec![0u32; 40];
        chunked_steps(on_device, &mut y);
        for (i, &v) in y.iter().enumerate() {
            assert_eq!(v, u32::from(i % 3 == 1), "element {i}, device {on_device}");
        }
    }
}

#[test]
fn private_locals_are_each_threads_own() {
    for on_device in [true, false] {
        let x: Vec<f64> = (0..300).map(f64::from).collect();
        let mut y = vec![0.0; 300];
        privates(on_device, &x, &mut y);
        assert!(
            y.iter().zip(&x).all(|(a, b)| *a == 2.0 * b + 1.0),
            "device {on_device}"
        );
    }
}

/// `schedule(dynamic, 1)`: chunk 0 waits until chunk 2 has run. Dealt round-robin over two threads, chunk 2 would be
/// chunk 0's own thread's next, and the wait would give up; claimed on demand, the other thread runs it.
#[target(parallel_for, num_threads(2), schedule(dynamic, 1), if(on_device))]
fn waits_for_a_later_chunk(on_device: bool, done: &[AtomicU32], gave_up: &AtomicU32) {
    for i in 0..done.len() {
        if i == 0 {
            let mut spins = 0u64;
            while done[2].load(Relaxed) == 0 {
                spins += 1;
                if spins > 2_000_000_000 {
                    gave_up.store(1, Relaxed);
                    break;
                }
                core::hint::spin_loop();
            }
        }
        done[i].store(1, Relaxed);
    }
}

#[test]
fn schedule_dynamic_hands_chunks_out_on_demand() {
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        return; // one thread per team here: nobody else could take chunk 2
    }
    // GPUs (and gpu-sim) deal `schedule(dynamic)` round-robin: chunk 2 would be the waiting thread's own.
    let on_demand = offload::device_info(0).is_some_and(|d| d.plugin == "host-elf");
    for on_device in [true, false] {
        if on_device && !on_demand {
            continue;
        }
        let (done, gave_up) = (atomics(8), AtomicU32::new(0));
        waits_for_a_later_chunk(on_device, &done, &gave_up);
        assert_eq!(gave_up.load(Relaxed), 0, "device {on_device}");
        assert!(loads(&done).iter().all(|&d| d == 1), "device {on_device}");
    }
}
