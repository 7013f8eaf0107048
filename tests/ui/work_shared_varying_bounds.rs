use offload::{omp_get_thread_num, target};

// Each thread would take its share of a different range: shares could overlap.
#[target(teams_distribute_parallel_for)]
fn per_thread_bounds(y: &mut [u32]) {
    let n = y.len() / (1 + omp_get_thread_num() as usize);
    for i in 0..n {
        y[i] = 1;
    }
}

#[target(teams_distribute_parallel_for)]
fn called_bound(y: &mut [u32]) {
    for i in 0..y.len().min(omp_get_thread_num() as usize) {
        y[i] = 1;
    }
}

fn main() {}
