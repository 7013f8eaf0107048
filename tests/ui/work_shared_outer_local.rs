use offload::target;

#[target(teams_distribute_parallel_for)]
fn total(x: &[f32]) -> f32 {
    let mut s = 0.0;
    for i in 0..x.len() {
        s += x[i];
    }
    s
}

fn main() {}
