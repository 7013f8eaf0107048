use offload::target;

// A write the lowering cannot see (inside a macro) reaches the view without an iteration's token: a type error.
#[target(teams_distribute_parallel_for)]
fn hidden(n: usize, y: &mut [u32]) {
    for i in 0..n {
        assert!({
            y[0] += 1;
            i < n
        });
    }
}

fn main() {}
