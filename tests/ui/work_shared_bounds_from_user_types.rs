use core::ops::Neg;
use offload::target;

// A constant of a user type whose operator reads the thread number: bounds that differ per thread.
#[derive(Clone, Copy)]
struct Tid;
const TID: Tid = Tid;
impl Neg for Tid {
    type Output = usize;
    fn neg(self) -> usize {
        offload::omp_get_thread_num() as usize
    }
}

#[target(teams_distribute_parallel_for)]
fn per_thread(y: &mut [u32]) {
    for i in (-TID)..8 {
        y[i] += 1;
    }
}

// The lowering's names cannot be written in a region.
#[target(teams_distribute_parallel_for)]
fn reserved(y: &mut [u32]) {
    for i in 0..y.len() {
        let __offload_t = 0;
        y[i] = __offload_t;
    }
}

fn main() {}
