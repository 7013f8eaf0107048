use offload::target;

// Each of these reaches element 0 (or 0 to 3) from every iteration: a name that is not the loop variable's binding,
// whatever it is spelt.
#[target(teams_distribute_parallel_for)]
fn shadowed(y: &mut [u32]) {
    for i in 0..y.len() {
        let _ = i;
        let i = 0usize;
        y[i] += 1;
    }
}

#[allow(clippy::redundant_closure_call)]
#[target(teams_distribute_parallel_for)]
fn through_closure(y: &mut [u32]) {
    for i in 0..y.len() {
        let _ = i;
        (|i: usize| y[i] += 1)(0);
    }
}

#[target(teams_distribute_parallel_for)]
fn inner_loop_reuses_the_name(y: &mut [u32]) {
    for i in 0..y.len() {
        let _ = i;
        for i in 0..4 {
            y[i] += 1;
        }
    }
}

fn main() {}
