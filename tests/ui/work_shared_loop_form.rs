use offload::target;

#[target(teams_distribute_parallel_for)]
fn halve(y: &mut [f32]) {
    for v in y.iter_mut() {
        *v *= 0.5;
    }
}

fn main() {}
