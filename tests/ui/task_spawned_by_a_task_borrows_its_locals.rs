// A task may spawn into its scope, but what it spawns lives as long as the scope, not the spawning task: it cannot
// borrow the spawning task's locals.
fn main() {
    offload::task_scope(|s| {
        drop(s.spawn(|| {
            let local = vec![1u32; 4];
            drop(s.spawn(|| local.len()));
        }));
    });
}
