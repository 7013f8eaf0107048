use offload::{declare_target, target};

#[declare_target]
fn fill(part: &mut [u32]) {
    for e in part.iter_mut() {
        *e = 1;
    }
}

// The start is not the row form `g * w`: parts of neighbouring iterations overlap.
#[target(teams_distribute_parallel_for)]
fn overlapping(y: &mut [u32]) {
    for g in 0..y.len() / 4 {
        fill(&mut y[g..g + 4]);
    }
}

// `y[lo..]` alone runs to the slice's end, past the row.
#[target(teams_distribute_parallel_for)]
fn to_the_end(y: &mut [u32]) {
    for g in 0..y.len() / 4 {
        fill(&mut y[g * 4..]);
    }
}

fn main() {}
