use offload::target;

// Each iteration writes its own `p[i]`, and reads its neighbour's, which another thread may be writing.
#[target(teams_distribute_parallel_for)]
fn smooth(p: &mut [f32]) {
    for i in 1..p.len() - 1 {
        let j = i - 1;
        p[i] = 0.5 * (p[j] + p[i]);
    }
}

fn main() {}
