// A task's handle borrows for its scope: keeping it in a collection that outlives `task_scope` would let its
// result (which may borrow) outlive the data.
fn main() {
    let y = vec![1u32; 4];
    let mut kept = Vec::new();
    offload::task_scope(|s| kept.push(s.spawn(|| &y[0])));
    let _ = kept.pop().map(|t| t.wait());
}
