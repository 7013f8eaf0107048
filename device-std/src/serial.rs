//! What a plain check of offload-device compiles (no image target): one team of one thread, with the fallback's meaning.

pub fn geometry() -> (u32, u32, u32, u32) {
    (0, 1, 0, 1)
}

pub fn barrier() {}

pub fn launch_kind() -> u32 {
    offload_model::abi::launch_kind::NONE
}

/// Notes which kind of launch the running kernel is (`offload_model::abi::launch_kind`); nothing to note here.
pub fn enter(_kind: u32) {}

pub fn team_shared() -> (*mut u8, usize) {
    (core::ptr::null_mut(), 0)
}

pub fn team_shared_claim() -> *const core::sync::atomic::AtomicU32 {
    core::ptr::null()
}

pub fn record_init<T: Copy>(_: T) {}

/// # Safety
/// As the host image's.
pub unsafe fn reduce_team<Op: offload_model::reduce::ReduceOp<T>, T: Copy>(partial: &T, out: u64) {
    // SAFETY: per the contract: `out` holds `teams + 1` slots.
    unsafe { core::ptr::write_unaligned(out as *mut T, *partial) };
}

/// No clock in a plain check: no image uses this backend.
pub fn wtime() -> f64 {
    0.0
}

pub fn wtick() -> f64 {
    1e-9
}

/// No launch-wide counter: `schedule(dynamic)` chunks are dealt round-robin here.
pub fn chunk_counter() -> *const core::sync::atomic::AtomicUsize {
    core::ptr::null()
}
