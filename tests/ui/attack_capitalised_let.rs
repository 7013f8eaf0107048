// A capitalised `let` is a binding (no constant of that name is in scope).
use core::cell::Cell;
use offload::{omp_get_thread_num, target};

#[allow(non_snake_case)]
#[target(teams_distribute_parallel_for)]
fn capital_bound(n: usize, y: &mut [u32]) {
    let N = n * (1 + omp_get_thread_num() as usize);
    for i in 0..N {
        y[i] += 1;
    }
}

#[allow(non_snake_case)]
#[target(teams_distribute_parallel_for)]
fn capital_cell(y: &mut [u32]) {
    let Acc = Cell::new(0u32);
    let n = y.len();
    for i in 0..n {
        Acc.set(Acc.get() + 1);
        y[i] = Acc.get();
    }
}

fn main() {}
