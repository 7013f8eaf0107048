// A task borrows for its scope: returning its handle out of `task_scope` would let it outlive the data it uses.
fn main() {
    let y = vec![1u32; 4];
    let t = offload::task_scope(|s| s.spawn(|| y.iter().sum::<u32>()));
    let _ = t.wait();
}
