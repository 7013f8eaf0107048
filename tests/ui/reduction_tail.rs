// A reduction's tail that is an expression of its variables is evaluated on the host after the reduction: it may
// read by-value parameters, slices' lengths and the `let`s before the loop made of these, which the host computes
// again; a value only the device has is an error, as is a variable whose type the tail does not fix.
use offload::target;

// A slice's element: only the device read it.
#[target(teams_distribute_parallel_for, reduction(+: s))]
fn scaled_by_element(x: &[f64]) -> f64 {
    let first = x[0];
    let mut s = 0.0;
    for i in 0..x.len() {
        s += x[i];
    }
    s * first
}

// A slice read in the tail itself.
#[target(teams_distribute_parallel_for, reduction(+: s))]
fn slice_in_tail(x: &[f64]) -> f64 {
    let mut s = 0.0;
    for i in 0..x.len() {
        s += x[i];
    }
    s / x[0]
}

// `s as f64` does not say what `s` is.
#[target(teams_distribute_parallel_for, reduction(+: s))]
fn untyped(n: u32) -> f64 {
    let mut s = 0;
    for i in 0..n {
        s += i;
    }
    s as f64 / 2.0
}

// The tail may compute from slices' lengths and parameters: this one compiles.
#[target(teams_distribute_parallel_for, reduction(+: s))]
fn mean(x: &[f64], k: f64) -> f64 {
    let n = x.len() as f64 * k;
    let mut s = 0.0;
    for i in 0..x.len() {
        s += x[i];
    }
    s / n
}

fn main() {}
