use offload::target;

#[target(parallel_for, num_teams(4))]
fn one_team(y: &mut [f32]) {
    for i in 0..y.len() {
        y[i] = 1.0;
    }
}

#[target(teams_distribute, thread_limit(8))]
fn one_thread(y: &mut [f32]) {
    for i in 0..y.len() {
        y[i] = 1.0;
    }
}

#[target(teams_distribute_parallel_for, parallel_for)]
fn two_loops(y: &mut [f32]) {
    for i in 0..y.len() {
        y[i] = 1.0;
    }
}

#[target(simd, schedule(static, 4))]
fn no_loop(y: &mut [f32]) {
    y[0] = 1.0;
}

#[target(teams_distribute_parallel_for, schedule(guided, 4))]
fn guided(y: &mut [f32]) {
    for i in 0..y.len() {
        y[i] = 1.0;
    }
}

#[target(teams_distribute_parallel_for, private(t))]
fn not_a_local(y: &mut [f32]) {
    for i in 0..y.len() {
        let t = 1.0;
        y[i] = t;
    }
}

fn main() {}
