use core::cell::Cell;
use core::sync::atomic::{AtomicU32, Ordering};
use offload::target;

// The temporaries the `let`s keep alive are each thread's own: their types cannot be checked, so they are refused.
#[target(teams_distribute_parallel_for)]
fn temporaries(x: &[u32]) -> u32 {
    let a = &AtomicU32::new(0);
    let (c, _) = (&Cell::new(0u32), 1);
    for i in 0..x.len() {
        a.fetch_add(x[i], Ordering::Relaxed);
        c.set(c.get() + 1);
    }
    a.load(Ordering::Relaxed) + c.get()
}

// A `ref` binding is a reference to what it matched.
#[target(teams_distribute_parallel_for)]
fn by_ref(x: &[u32]) -> u32 {
    let ref c = Cell::new(0u32);
    for i in 0..x.len() {
        c.set(c.get() + x[i]);
    }
    c.get()
}

fn main() {}
