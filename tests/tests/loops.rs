//! Work-shared loops as C's `for` ports: `a..=b` (negative ranges, ending at the type's maximum), loop variables of
//! every integer type, and `y[i as usize]` as indexing with the loop variable; on host-elf and in the fallback.

use core::sync::atomic::{AtomicU32, Ordering::Relaxed};
use offload::target;

#[target(
    teams_distribute_parallel_for,
    num_teams(3),
    thread_limit(2),
    if(on_device)
)]
fn inclusive_u64(on_device: bool, n: u64, y: &mut [u32]) {
    for i in 1..=n {
        y[i as usize] += i as u32;
    }
}

#[target(
    teams_distribute_parallel_for,
    num_teams(3),
    thread_limit(2),
    if(on_device)
)]
fn over_i32(on_device: bool, n: i32, x: &[f32], y: &mut [f32]) {
    for i in 0..n {
        y[i as usize] = 2.0 * x[i as usize];
    }
}

#[target(teams_distribute_parallel_for, num_teams(3), thread_limit(2), reduction(+: s), if(on_device))]
fn sum_between(on_device: bool, lo: i32, hi: i32) -> i64 {
    let mut s = 0i64;
    for i in lo..=hi {
        s += i as i64;
    }
    s
}

#[target(
    teams_distribute_parallel_for,
    num_teams(3),
    thread_limit(2),
    if(on_device)
)]
fn to_the_maximum(on_device: bool, lo: u8, hits: &[AtomicU32]) {
    for i in lo..=u8::MAX {
        hits[i as usize].fetch_add(1, Relaxed);
    }
}

#[target(teams_distribute_parallel_for, num_teams(3), thread_limit(2), reduction(+: s), if(on_device))]
fn pi_u64(on_device: bool, steps: u64) -> f64 {
    let step = 1.0 / steps as f64;
    let mut s = 0.0;
    for i in 0..steps {
        let x = (i as f64 + 0.5) * step;
        s += 4.0 / (1.0 + x * x);
    }
    s
}

#[test]
fn loops_of_every_integer_type_share_every_iteration_once() {
    for on_device in [true, false] {
        let mut y = vec![0u32; 102];
        inclusive_u64(on_device, 100, &mut y);
        assert!(
            y.iter()
                .enumerate()
                .all(|(i, &v)| v == if (1..=100).contains(&i) { i as u32 } else { 0 }),
            "device {on_device}: {y:?}"
        );
        let x: Vec<f32> = (0..77).map(|v| v as f32).collect();
        let mut y = vec![-1.0f32; 77];
        over_i32(on_device, 77, &x, &mut y);
        assert!(
            y.iter().zip(&x).all(|(a, b)| *a == 2.0 * b),
            "device {on_device}"
        );
        assert_eq!(
            sum_between(on_device, -50, 20),
            (-50..=20).sum::<i64>(),
            "device {on_device}"
        );
        assert_eq!(sum_between(on_device, 5, 4), 0, "empty, device {on_device}");
        assert_eq!(
            sum_between(on_device, i32::MAX - 10, i32::MAX),
            (i32::MAX as i64 - 10..=i32::MAX as i64).sum::<i64>(),
            "to i32::MAX, device {on_device}"
        );
        let hits: Vec<AtomicU32> = (0..256).map(|_| AtomicU32::new(0)).collect();
        to_the_maximum(on_device, 200, &hits);
        assert!(
            hits.iter()
                .enumerate()
                .all(|(i, h)| h.load(Relaxed) == (i >= 200) as u32),
            "to u8::MAX, device {on_device}"
        );
        let pi = pi_u64(on_device, 100_000) / 100_000.0;
        assert!(
            (pi - std::f64::consts::PI).abs() < 1e-8,
            "device {on_device}: {pi}"
        );
    }
}

/// OpenMP's array reductions: a histogram (`reduction(+: hist)`) and an element-wise maximum.
#[target(teams_distribute_parallel_for, num_teams(3), thread_limit(2), reduction(+: hist), if(on_device))]
fn histogram(on_device: bool, x: &[u32]) -> [u32; 16] {
    let mut hist = [0u32; 16];
    for i in 0..x.len() {
        hist[(x[i] % 16) as usize] += 1;
    }
    hist
}

#[target(teams_distribute_parallel_for, num_teams(3), thread_limit(2), reduction(max: m), if(on_device))]
fn column_max(on_device: bool, rows: usize, x: &[f64]) -> [f64; 4] {
    let mut m = [f64::NEG_INFINITY; 4];
    for r in 0..rows {
        for c in 0..4 {
            m[c] = m[c].max(x[r * 4 + c]);
        }
    }
    m
}

#[test]
fn arrays_reduce_element_by_element() {
    let x: Vec<u32> = (0..10_000).map(|v| (v * 7919) % 1000).collect();
    let mut want = [0u32; 16];
    for v in &x {
        want[(v % 16) as usize] += 1;
    }
    let y: Vec<f64> = (0..4 * 333)
        .map(|v| ((v * 37) % 101) as f64 - 50.0)
        .collect();
    let mut want_max = [f64::NEG_INFINITY; 4];
    for (k, v) in y.iter().enumerate() {
        want_max[k % 4] = want_max[k % 4].max(*v);
    }
    for on_device in [true, false] {
        assert_eq!(histogram(on_device, &x), want, "device {on_device}");
        assert_eq!(
            column_max(on_device, 333, &y),
            want_max,
            "device {on_device}"
        );
    }
}

/// Several reduction variables (OpenMP's `reduction(+: s, n) reduction(max: m)`), returned as a tuple.
#[target(
    teams_distribute_parallel_for,
    num_teams(3),
    thread_limit(2),
    reduction(+: s, n),
    reduction(max: m),
    if(on_device)
)]
fn stats(on_device: bool, x: &[f64]) -> (f64, u64, f64) {
    let mut s = 1.0;
    let mut n = 0u64;
    let mut m = f64::NEG_INFINITY;
    for i in 0..x.len() {
        s += x[i];
        n += 1;
        m = m.max(x[i]);
    }
    (s, n, m)
}

/// A reduction over a `collapse(2)` nest.
#[target(teams_distribute_parallel_for, collapse(2), num_teams(3), thread_limit(2), reduction(+: s), if(on_device))]
fn grid_sum(on_device: bool, n: usize, m: usize, x: &[u64]) -> u64 {
    let mut s = 7;
    for i in 0..n {
        for j in 0..m {
            s += x[i * m + j];
        }
    }
    s
}

#[test]
fn several_variables_and_collapsed_nests_reduce() {
    let x: Vec<f64> = (0..1001).map(|v| ((v * 13) % 97) as f64).collect();
    let want = (1.0 + x.iter().sum::<f64>(), 1001, 96.0);
    let g: Vec<u64> = (0..17 * 23).collect();
    for on_device in [true, false] {
        assert_eq!(stats(on_device, &x), want, "device {on_device}");
        assert_eq!(
            grid_sum(on_device, 17, 23, &g),
            7 + g.iter().sum::<u64>(),
            "device {on_device}"
        );
    }
}

/// A user's reduction (OpenMP's `declare reduction`): a unit struct implementing `offload::ReduceOp` for a
/// `#[declare_target]` type.
#[offload::declare_target]
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Range {
    lo: f64,
    hi: f64,
}

#[offload::declare_target]
#[repr(C)]
pub struct Span;

#[offload::declare_target]
impl offload::ReduceOp<Range> for Span {
    fn identity() -> Range {
        Range {
            lo: f64::INFINITY,
            hi: f64::NEG_INFINITY,
        }
    }
    fn combine(a: Range, b: Range) -> Range {
        Range {
            lo: a.lo.min(b.lo),
            hi: a.hi.max(b.hi),
        }
    }
}

#[target(teams_distribute_parallel_for, num_teams(3), thread_limit(2), reduction(Span: r), if(on_device))]
fn range_of(on_device: bool, x: &[f64]) -> Range {
    let mut r = Range { lo: 0.5, hi: 0.5 };
    for i in 0..x.len() {
        r.lo = r.lo.min(x[i]);
        r.hi = r.hi.max(x[i]);
    }
    r
}

#[test]
fn a_users_reduction_operator_combines_its_type() {
    let x: Vec<f64> = (0..999).map(|v| ((v * 31) % 211) as f64 - 100.0).collect();
    for on_device in [true, false] {
        assert_eq!(
            range_of(on_device, &x),
            Range {
                lo: -100.0,
                hi: 110.0
            },
            "device {on_device}"
        );
    }
}

#[offload::declare_target]
const SCALE: f64 = 0.5;
#[offload::declare_target]
const COUNT: f64 = 12.0;

/// Per-thread `let`s of any type beside the bounds, and a bound cast from a float constant.
#[target(teams_distribute_parallel_for, num_teams(2), if(on_device))]
fn scaled_prefix(on_device: bool, y: &mut [f64]) {
    let k = SCALE;
    let n = COUNT as usize;
    for i in 0..n {
        y[i] = k * i as f64;
    }
}

#[test]
fn lets_of_any_type_sit_beside_uniform_bounds() {
    for on_device in [true, false] {
        let mut y = vec![-1.0; 16];
        scaled_prefix(on_device, &mut y);
        assert!(
            y.iter()
                .enumerate()
                .all(|(i, &v)| v == if i < 12 { 0.5 * i as f64 } else { -1.0 }),
            "device {on_device}: {y:?}"
        );
    }
}
