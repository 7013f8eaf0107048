use offload::declare_target;
use std::sync::atomic::AtomicU32;

#[declare_target]
#[repr(C)]
struct Counter {
    hits: AtomicU32,
}

fn main() {}
