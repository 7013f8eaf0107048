use offload::target;

// A histogram declared before the loop: every thread would fill its own, and one thread's would be returned.
#[target(teams_distribute_parallel_for)]
fn histogram(x: &[u32]) -> [u32; 4] {
    let mut hist = [0u32; 4];
    for i in 0..x.len() {
        hist[(x[i] % 4) as usize] += 1;
    }
    hist
}

// Through `&mut`, and a field.
#[target(teams_distribute_parallel_for)]
fn through_mut(x: &[u32]) -> u32 {
    let mut acc = (0u32, 0u32);
    for i in 0..x.len() {
        acc.0 += x[i];
        let r = &mut acc;
        r.1 += 1;
    }
    acc.0
}

fn main() {}
