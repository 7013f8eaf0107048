// `&Cell<u32>` is `Copy`: a per-thread counter through `Cell::from_mut` would be shared by a thread's iterations.
use core::cell::Cell;
use offload::target;

#[target(teams_distribute_parallel_for)]
fn cell_from_mut(y: &mut [u32]) {
    let mut x = 0u32;
    let c = Cell::from_mut(&mut x);
    let n = y.len();
    for i in 0..n {
        c.set(c.get() + 1);
        y[i] = c.get();
    }
}

fn main() {}
