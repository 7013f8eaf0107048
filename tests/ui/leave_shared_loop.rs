use offload::target;

// OpenMP forbids leaving a work-shared loop early: each thread runs only its share, so a `break` would end one
// thread's share and a `return` one thread's region.
#[target(teams_distribute_parallel_for)]
fn first_negative(x: &[f32], y: &mut [f32]) {
    for i in 0..y.len() {
        if x[i] < 0.0 {
            break;
        }
        y[i] = x[i];
    }
}

#[target(teams_distribute_parallel_for, reduction(+: s))]
fn sum_until(x: &[f32]) -> f32 {
    let mut s = 0.0;
    'all: for i in 0..x.len() {
        for _ in 0..2 {
            if x[i] < 0.0 {
                break 'all;
            }
        }
        if x[i] > 1.0 {
            return s;
        }
        s += x[i];
    }
    s
}

fn main() {}
