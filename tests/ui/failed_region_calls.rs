//! A region with a mistake reports the mistake once: its callers, of the region and of its `try_` twin, still
//! type-check, so no error repeats at each call site.
use offload::target;

#[target(teams_distribute_parallel_for, schedule(guided, 4))]
fn scale(k: f32, y: &mut [f32]) {
    for i in 0..y.len() {
        y[i] *= k;
    }
}

fn main() {
    let mut y = vec![1.0f32; 4];
    scale(2.0, &mut y);
    let r: Result<(), offload::Error> = try_scale(2.0, &mut y);
    let _ = r;
}
