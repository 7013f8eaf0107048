// While a `nowait` region holds `&mut y`, the host cannot touch `y` (OpenMP's `depend(out: y)`, by the borrow rules).
use offload::target;

#[target]
fn bump(y: &mut [u32]) {
    for v in y.iter_mut() {
        *v += 1;
    }
}

fn main() {
    let mut y = vec![0u32; 4];
    offload::task_scope(|s| {
        let t = nowait_bump(s, &mut y);
        y[0] = 5;
        t.wait().unwrap();
    });
}
