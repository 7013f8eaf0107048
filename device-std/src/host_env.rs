//! The running kernel thread's launch in the host-compiled images (the host image and gpu-sim): the
//! `HostLaunchEnv` its plugin passes as `dyn_ptr`, and the region's `launch_kind`, kept in thread-locals.

use core::cell::Cell;
use offload_model::abi::{launch_kind, HostLaunchEnv};

std::thread_local! {
    static ENV: Cell<*const HostLaunchEnv> = const { Cell::new(core::ptr::null()) };
    /// The running kernel's `launch_kind`, from its entry.
    static KIND: Cell<u32> = const { Cell::new(launch_kind::NONE) };
}

/// Makes `env` (null: none) and `kind` this thread's running kernel's; returns what they replace, for the caller to
/// put back (a nested launch on the host image, a thread switched back in on gpu-sim).
pub fn set(env: *const HostLaunchEnv, kind: u32) -> (*const HostLaunchEnv, u32) {
    (ENV.with(|e| e.replace(env)), KIND.with(|k| k.replace(kind)))
}

/// The running kernel's environment (`None` outside a kernel).
pub fn env() -> Option<&'static HostLaunchEnv> {
    // SAFETY: set by the entry for the kernel call this thread is running, which outlives it.
    ENV.with(|e| unsafe { e.get().as_ref() })
}

/// (team, teams, thread, threads) of the running kernel thread.
pub fn geometry() -> (u32, u32, u32, u32) {
    env().map_or((0, 1, 0, 1), |e| {
        (e.team_num, e.num_teams, e.thread_num, e.num_threads)
    })
}

/// The running kernel's `launch_kind` (`NONE` outside a kernel).
pub fn launch_kind() -> u32 {
    KIND.with(|k| k.get())
}

/// The running team's shared block (address, bytes).
pub fn team_shared() -> (*mut u8, usize) {
    env().map_or((core::ptr::null_mut(), 0), |e| {
        (e.team_shared, e.team_shared_len)
    })
}

/// The running team's claim word for its shared block (null outside a kernel, and where the team has no block).
pub fn team_shared_claim() -> *const core::sync::atomic::AtomicU32 {
    env().map_or(core::ptr::null(), |e| e.team_shared_claim)
}

/// The launch's `schedule(dynamic)` chunk counter: null outside a launch, and where the plugin passes none (gpu-sim,
/// which deals chunks round-robin as GPUs do).
pub fn chunk_counter() -> *const core::sync::atomic::AtomicUsize {
    env().map_or(core::ptr::null(), |e| e.chunks)
}
