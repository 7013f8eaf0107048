use core::cell::Cell;
use core::sync::atomic::{AtomicU32, Ordering};
use offload::target;

// A count kept in a `Cell` before the loop: each thread would count its own share, and one thread's would be returned.
#[target(teams_distribute_parallel_for)]
fn cell(x: &[u32]) -> u32 {
    let c = Cell::new(0u32);
    for i in 0..x.len() {
        c.set(c.get() + x[i]);
    }
    c.get()
}

// The same with an atomic, reached through a reference and a closure.
#[target(teams_distribute_parallel_for)]
fn atomic(x: &[u32]) -> u32 {
    let a = AtomicU32::new(0);
    let r = &a;
    let add = |v: u32| r.fetch_add(v, Ordering::Relaxed);
    for i in 0..x.len() {
        add(x[i]);
    }
    a.load(Ordering::Relaxed)
}

fn main() {}
