// The scope itself cannot leave its closure, to spawn into it once `task_scope` has stopped waiting.
fn main() {
    let y = vec![1u32; 4];
    let mut kept = None;
    offload::task_scope(|s| kept = Some(s));
    if let Some(s) = kept {
        drop(s.spawn(|| y.len()));
    }
}
