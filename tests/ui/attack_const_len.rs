// A user's trait giving `usize` a `len` cannot stand in for a length in a loop's bounds.
use offload::{omp_get_thread_num, target};

trait Evil {
    fn len(&self) -> usize;
}

impl Evil for usize {
    fn len(&self) -> usize {
        *self * (1 + omp_get_thread_num() as usize)
    }
}

const K: usize = 64;

#[target(teams_distribute_parallel_for)]
fn const_len(y: &mut [u32]) {
    for i in 0..K.len() {
        y[i] += 1;
    }
}

fn main() {}
