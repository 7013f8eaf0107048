use offload::__view::Iteration;
use offload::target;

// An iteration token for another element cannot be made in safe code.
#[target(teams_distribute_parallel_for)]
fn forge(n: usize, y: &mut [u32]) {
    for i in 0..n {
        let _ = i;
        let t = 0usize.own(&[]);
        let _ = t.at(0);
    }
}

fn main() {}
