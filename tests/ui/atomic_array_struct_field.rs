use offload::declare_target;
use std::sync::atomic::AtomicU32;

// An array of atomics is atomics too: it would be copied byte by byte while other host threads use it.
#[declare_target]
#[repr(C)]
struct Counters {
    hits: [[AtomicU32; 2]; 3],
}

fn main() {}
