// The task of an `unsafe fn` region is as unsafe to start as the region is to call.
use offload::target;

#[target]
unsafe fn bump(y: &mut [u32]) {
    for v in y.iter_mut() {
        *v += 1;
    }
}

fn main() {
    let mut y = vec![0u32; 4];
    offload::task_scope(|s| nowait_bump(s, &mut y).wait().unwrap());
}
