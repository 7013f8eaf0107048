//! The host fallback of one region of every kind, and the data constructs, for Miri (CI runs this file under Stacked
//! and Tree Borrows): work-shared writes reach each element through the thread's view, reductions combine private
//! copies, SPMD teams share atomics and team-shared memory across a barrier. Sizes are small: Miri interprets.

use core::sync::atomic::{AtomicU32, Ordering::Relaxed};
use offload::{
    barrier, data_scope, omp_get_num_threads, omp_get_team_num, omp_get_thread_num, target,
    target_data, target_enter_data, target_exit_data, target_update, team_shared,
};

#[target(map(tofrom: y))]
fn serial(k: i64, y: &mut [i64]) -> i64 {
    for v in y.iter_mut() {
        *v += k;
    }
    y.iter().sum()
}

#[target(teams_distribute_parallel_for, num_teams(2), thread_limit(2))]
fn scale(k: f32, x: &[f32], y: &mut [f32]) {
    for i in 0..y.len() {
        y[i] = k * x[i] + y[i];
    }
}

#[target(teams_distribute_parallel_for, num_teams(2), thread_limit(2))]
fn stride_two(y: &mut [u32]) {
    for i in (1..y.len()).step_by(2) {
        y[i] += 1;
    }
}

#[target(
    teams_distribute_parallel_for,
    collapse(2),
    num_teams(2),
    thread_limit(2)
)]
fn cells(n: usize, m: usize, y: &mut [u32]) {
    for i in 0..n {
        for j in 0..m {
            y[i * m + j] = (i * 10 + j) as u32;
        }
    }
}

/// A stencil's interior in chunks of the flattened nest, each row of a chunk one run.
#[target(
    teams_distribute_parallel_for,
    collapse(2),
    num_teams(2),
    thread_limit(2),
    schedule(dynamic, 3)
)]
fn interior(n: usize, m: usize, a: &[u32], y: &mut [u32]) {
    for j in 1..n - 1 {
        for i in 1..m - 1 {
            y[j * m + i] = a[j * m + i - 1] + a[(j - 1) * m + i];
        }
    }
}

/// Each iteration owns a row.
#[target(teams_distribute_parallel_for, num_teams(2), thread_limit(2))]
fn rows(n: usize, m: usize, y: &mut [u32]) {
    for j in 0..n {
        for i in 0..m {
            y[j * m + i] = (j * 10 + i) as u32;
        }
    }
}

#[target(teams_distribute_parallel_for, num_teams(2), thread_limit(2), reduction(+: s))]
fn sum(x: &[i64]) -> i64 {
    let mut s = 100;
    for i in 0..x.len() {
        s += x[i];
    }
    s
}

#[target(teams_distribute_parallel_for, num_teams(2), thread_limit(2), reduction(*: p))]
fn product(x: &[i64]) -> i64 {
    let mut p = 2;
    for i in 0..x.len() {
        p *= x[i];
    }
    p
}

#[target(teams_distribute_parallel_for, num_teams(2), thread_limit(2), reduction(min: m))]
fn smallest(x: &[i32]) -> i32 {
    let mut m = i32::MAX;
    for i in 0..x.len() {
        m = m.min(x[i]);
    }
    m
}

#[target(teams_distribute_parallel_for, num_teams(2), thread_limit(2), reduction(max: m))]
fn largest(x: &[f32]) -> f32 {
    let mut m = f32::MIN;
    for i in 0..x.len() {
        m = m.max(x[i]);
    }
    m
}

#[target(teams_distribute_parallel_for, num_teams(2), thread_limit(2), reduction(&: b))]
fn all_bits(x: &[u32]) -> u32 {
    let mut b = u32::MAX;
    for i in 0..x.len() {
        b &= x[i];
    }
    b
}

#[target(teams_distribute_parallel_for, num_teams(2), thread_limit(2), reduction(|: b))]
fn any_bits(x: &[u32]) -> u32 {
    let mut b = 0;
    for i in 0..x.len() {
        b |= x[i];
    }
    b
}

#[target(teams_distribute_parallel_for, num_teams(2), thread_limit(2), reduction(^: b))]
fn parity(x: &[u32]) -> u32 {
    let mut b = 0;
    for i in 0..x.len() {
        b ^= x[i];
    }
    b
}

#[target(teams_distribute_parallel_for, num_teams(2), thread_limit(2), reduction(&&: a))]
fn all_even(x: &[u32]) -> bool {
    let mut a = true;
    for i in 0..x.len() {
        a = a && x[i].is_multiple_of(2);
    }
    a
}

#[target(teams_distribute_parallel_for, num_teams(2), thread_limit(2), reduction(||: a))]
fn any_seven(x: &[u32]) -> bool {
    let mut a = false;
    for i in 0..x.len() {
        a = a || x[i] == 7;
    }
    a
}

/// Each thread publishes in team-shared memory, then reads its neighbour's after the barrier. A host team gets at most
/// the host's hardware threads: .ci/run gives Miri two CPUs.
#[target(teams, parallel, num_teams(2), thread_limit(2))]
fn neighbours(seen: &[AtomicU32]) {
    let (t, i, m) = (
        omp_get_team_num() as u32,
        omp_get_thread_num() as u32,
        omp_get_num_threads() as u32,
    );
    let other = team_shared(m as usize, |shared: &[AtomicU32]| {
        shared[i as usize].store(t * 100 + i + 1, Relaxed);
        barrier();
        shared[((i + 1) % m) as usize].load(Relaxed)
    });
    seen[(t * m + i) as usize].store(other, Relaxed);
}

/// `unsafe fn` opts out of the rule; each thread still touches only its own element of the view.
#[target(teams, parallel, num_teams(2), thread_limit(2))]
unsafe fn own_slot(out: &mut [u32]) {
    let me = (omp_get_team_num() * omp_get_num_threads() + omp_get_thread_num()) as usize;
    out[me] = me as u32 + 1;
}

#[test]
fn serial_and_work_shared_regions() {
    let mut y = vec![1i64, 2, 3];
    assert_eq!(serial(10, &mut y), 36);
    assert_eq!(y, [11, 12, 13]);

    let x = vec![1.0f32; 9];
    let mut y = vec![0.5f32; 9];
    scale(2.0, &x, &mut y);
    assert!(y.iter().all(|&v| v == 2.5), "{y:?}");

    let mut y = vec![0u32; 7];
    stride_two(&mut y);
    assert_eq!(y, [0, 1, 0, 1, 0, 1, 0]);

    let mut y = vec![0u32; 3 * 4];
    cells(3, 4, &mut y);
    assert!(y
        .iter()
        .enumerate()
        .all(|(k, &v)| v == ((k / 4) * 10 + k % 4) as u32));

    let mut z = vec![0u32; 3 * 4];
    rows(3, 4, &mut z);
    assert_eq!(y, z);

    let a: Vec<u32> = (0..5 * 6).collect();
    let mut y = vec![0u32; 5 * 6];
    interior(5, 6, &a, &mut y);
    for (k, &v) in y.iter().enumerate() {
        let (j, i) = (k / 6, k % 6);
        let inside = (1..4).contains(&j) && (1..5).contains(&i);
        assert_eq!(v, if inside { a[k - 1] + a[k - 6] } else { 0 }, "cell {k}");
    }
}

#[test]
fn every_reduction_operator() {
    let x: Vec<i64> = (1..=6).collect();
    assert_eq!(sum(&x), 100 + 21);
    assert_eq!(product(&x), 2 * 720);
    assert_eq!(smallest(&[4, -2, 9, 3, 0]), -2);
    assert_eq!(largest(&[1.5, -2.0, 8.25, 3.0]), 8.25);
    let bits = [0b1110u32, 0b0111, 0b1100, 0b0110];
    assert_eq!(all_bits(&bits), 0b0100);
    assert_eq!(any_bits(&bits), 0b1111);
    assert_eq!(parity(&bits), 0b1110 ^ 0b0111 ^ 0b1100 ^ 0b0110);
    assert!(all_even(&[2, 4, 6, 8, 10]));
    assert!(!all_even(&[2, 4, 5, 8]));
    assert!(any_seven(&[1, 7, 3]));
    assert!(!any_seven(&[1, 2, 3]));
}

#[test]
fn spmd_teams_share_atomics_across_a_barrier() {
    let seen: Vec<AtomicU32> = (0..4).map(|_| AtomicU32::new(0)).collect();
    neighbours(&seen);
    let got: Vec<u32> = seen.iter().map(|a| a.load(Relaxed)).collect();
    assert_eq!(got, [2, 1, 102, 101]);

    let mut out = [0u32; 4];
    // SAFETY: each thread writes its own element.
    unsafe { own_slot(&mut out) };
    assert_eq!(out, [1, 2, 3, 4]);
}

/// On the initial device, as a run without devices (Miri's) has it; on a device, this package's regions (it has no
/// images) would fail rather than compute on the host's stale copy.
#[test]
fn data_environments() {
    let host = offload::omp_get_initial_device();
    let x = vec![1.0f32; 6];
    let mut y = vec![0.0f32; 6];
    target_data!(map(to: x), map(tofrom: y), device(host) => {
        scale(1.0, x, y);
        scale(1.0, x, y);
        target_update!(from: y, device(host));
    });
    assert!(y.iter().all(|&v| v == 2.0), "{y:?}");

    // A `to` slice passed on to a `&mut` parameter: the view's own copy is written, then read; the source never.
    let w = vec![1i64, 2, 3];
    target_data!(map(to: w), device(host) => {
        assert_eq!(serial(1, w), 9);
        assert_eq!(sum(w), 100 + 9);
        assert_eq!(w, [2, 3, 4]);
    });
    assert_eq!(w, [1, 2, 3]);

    let v = vec![1i64, 2, 3];
    let mut m = target_enter_data!(map(to: v), device(host));
    assert_eq!(serial(1, &mut m), 9);
    target_update!(to: m, device(host));
    let v = m.exit_from();
    assert_eq!(v, [2, 3, 4]);
}

/// Borrowed data entered in a data scope: the region and the host work on it through the `ScopedMapped` between the
/// entry and the exit, and a forgotten entry is the scope's to end.
#[test]
fn data_scopes() {
    let host = offload::omp_get_initial_device();
    let mut v = vec![1i64, 2, 3];
    let mut w = vec![5i64; 2];
    data_scope(|s| {
        let (rv, rw) = (&mut v, &mut w[..]);
        let (mut m, n) = target_enter_data!(map(to: rv, rw), device(host), scope(s));
        assert_eq!(serial(1, &mut m), 9);
        m[0] = 10;
        target_update!(to: m, device(host));
        std::mem::forget(n);
        let rv = target_exit_data!(map(from: m));
        rv.push(4);
    });
    assert_eq!(v, [10, 3, 4, 4]);
    assert_eq!(w, [5, 5]);
}

/// A struct that owns its arrays (`#[derive(Mapper)]` with `Vec` fields): read by every thread through `&`, written
/// through `&mut` (a value field included), and mapped by the data constructs.
#[derive(offload::Mapper)]
struct Sim {
    concs: Vec<f64>,
    #[map(to)]
    mats: Vec<u32>,
    lookups: usize,
}

#[target(teams_distribute_parallel_for, num_teams(2), thread_limit(2))]
fn lookup(s: &Sim, out: &mut [f64]) {
    for i in 0..s.lookups {
        out[i] = s.concs[s.mats[i] as usize];
    }
}

#[target]
fn refresh(s: &mut Sim) {
    for c in s.concs.iter_mut() {
        *c += 1.0;
    }
    s.lookups = 2;
}

#[test]
fn a_struct_that_owns_its_arrays() {
    let host = offload::omp_get_initial_device();
    let mut s = Sim {
        concs: vec![1.0, 2.0],
        mats: vec![1, 0, 1],
        lookups: 3,
    };
    let mut out = vec![0.0; 3];
    target_data!(map(tofrom: s), device(host) => {
        // `s: &mut offload::Fixed<Sim>`: regions take it as `&Sim` and `&mut Sim`, the block its elements.
        lookup(s, &mut out);
        s.elems_mut(|s| &s.concs)[1] += 10.0;
        refresh(s);
        target_update!(from: s, device(host));
    });
    assert_eq!(out, [2.0, 1.0, 2.0]);
    assert_eq!((s.concs.as_slice(), s.lookups), ([2.0, 13.0].as_slice(), 2));
}
