use offload::target;

#[target(teams_distribute_parallel_for, collapse(2))]
fn rows(n: usize, m: usize, y: &mut [f32]) {
    for i in 0..n {
        for j in 0..m {
            y[i] = j as f32;
        }
    }
}

fn main() {}
