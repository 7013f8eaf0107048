// `r#n` is `n`: the resolver binds raw identifiers by their name.
use offload::{omp_get_thread_num, target};

#[target(teams_distribute_parallel_for)]
fn raw_bound(n: usize, y: &mut [u32]) {
    let r#n = n * (1 + omp_get_thread_num() as usize);
    for i in 0..n {
        y[i] += 1;
    }
}

#[target(teams_distribute_parallel_for)]
fn raw_outer_state(y: &mut [u32]) {
    let mut r#acc = 0u32;
    let n = y.len();
    for i in 0..n {
        acc += 1;
        y[i] = acc;
    }
}

fn main() {}
