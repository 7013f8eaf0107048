//! The rules on resolved bindings, in the host fallback under Miri (CI runs this file under Stacked and Tree Borrows):
//! a by-value mapper struct's fields bound a loop (and its collapsed nest) without two threads owning one element,
//! reduction variables shadowed before and inside the loop, and values declared before the loop read by every
//! iteration as immutable copies.

use offload::{target, Mapper};

#[derive(Mapper)]
struct Rows<'a> {
    x: &'a [u32],
    n: usize,
    m: usize,
}

/// Bounds from the mapper's fields; `x` is shadowed by a `let` of another name's value, which changes nothing.
#[target(teams_distribute_parallel_for, num_teams(2), thread_limit(2))]
fn bump(p: Rows<'_>, y: &mut [u32]) {
    let n = p.n;
    let x = p.x;
    for i in 0..n {
        y[i] += x[i];
    }
}

#[target(
    teams_distribute_parallel_for,
    collapse(2),
    num_teams(2),
    thread_limit(2)
)]
fn bump_nest(p: Rows<'_>, y: &mut [u32]) {
    for i in 0..p.n {
        for j in 0..p.m {
            y[i * p.m + j] += p.x[i];
        }
    }
}

#[allow(unused_mut, unused_variables)]
#[target(teams_distribute_parallel_for, reduction(+: s), num_teams(2), thread_limit(2))]
fn shadowed(x: &[u64]) -> u64 {
    let mut s = 1000u64;
    let mut s = 1u64;
    let step = s + 1;
    for i in 0..x.len() {
        let v = {
            let s = x[i];
            s * step
        };
        s += v;
    }
    s
}

#[target(teams_distribute_parallel_for, num_teams(2), thread_limit(2))]
fn copies(x: &[f32], y: &mut [f32]) {
    let w = [0.5f32, 0.25];
    let xs = &x[1..];
    let f = |v: f32| w[0] * v + w[1];
    for i in 0..y.len() {
        y[i] = f(xs[i]);
    }
}

#[test]
fn resolved_rules_in_the_fallback() {
    let x = [1u32, 2, 3, 4, 5, 6];
    let mut y = [10u32; 6];
    bump(Rows { x: &x, n: 5, m: 1 }, &mut y);
    assert_eq!(y, [11, 12, 13, 14, 15, 10]);
    let mut y = [0u32; 6];
    bump_nest(Rows { x: &x, n: 3, m: 2 }, &mut y);
    assert_eq!(y, [1, 1, 2, 2, 3, 3]);

    assert_eq!(shadowed(&[1, 2, 3, 4, 5]), 1 + 2 * 15);

    let x = [9.0f32, 0.0, 1.0, 2.0, 4.0];
    let mut y = [0.0f32; 4];
    copies(&x, &mut y);
    assert_eq!(y, [0.25, 0.75, 1.25, 2.25]);
}
