use offload::target;

#[target(teams_distribute_parallel_for, collapse(3))]
fn layers(n: usize, m: usize, p: usize, y: &mut [f32]) {
    for i in 0..n {
        for j in 0..m {
            for k in 0..p {
                y[i * m + j] = k as f32;
            }
        }
    }
}

#[target(teams_distribute_parallel_for, collapse(3))]
fn ragged(n: usize, y: &mut [f32]) {
    for i in 0..n {
        for j in 0..i {
            for k in 0..n {
                y[(i * i + j) * n + k] = 1.0;
            }
        }
    }
}

#[target(teams_distribute_parallel_for, collapse(7))]
fn too_deep(y: &mut [f32]) {
    for i in 0..y.len() {
        y[i] = 1.0;
    }
}

fn main() {}

#[target(teams_distribute_parallel_for, collapse(3))]
fn skips_a_row(n: usize, y: &mut [f32]) {
    for i in 0..n {
        'rows: for j in 0..n {
            for k in 0..n {
                if k == 1 {
                    continue 'rows;
                }
                y[(i * n + j) * n + k] = 1.0;
            }
        }
    }
}
