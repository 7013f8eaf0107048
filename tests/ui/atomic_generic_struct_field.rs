use offload::declare_target;
use std::sync::atomic::AtomicU32;

// A generic struct's fields are checked where it is used with its arguments: a device global of `W<AtomicU32>`
// would be copied byte by byte while host threads use its atomic.
#[declare_target]
#[repr(C)]
pub struct W<T: offload::DeviceCopy> {
    pub a: T,
}

#[declare_target]
static G: W<AtomicU32> = W { a: AtomicU32::new(0) };

fn main() {
    let _ = &G;
}
