//! Kernel support on gpu-sim, the simulated GPU: the GPU lowering's intrinsics over what the gpu-sim plugin passes
//! as `dyn_ptr` (a [`HostLaunchEnv`]: block and thread numbers, the grid's and block's sizes, the block's dynamic
//! shared memory, its barrier). The plugin runs a block's threads as user-level threads on one host thread, switched
//! at barriers, so the thread-locals below are the running GPU thread's only between switches: the barrier restores
//! them. A panic writes the GPU panic record, as on a GPU, then "traps": the entry catches it and tells the plugin.

use core::cell::Cell;
use core::ffi::c_void;
use offload_model::abi::{barrier_status, launch_kind, HostLaunchEnv};

std::thread_local! {
    static ENV: Cell<*const HostLaunchEnv> = const { Cell::new(core::ptr::null()) };
    /// The running kernel's `launch_kind`, from its entry.
    static KIND: Cell<u32> = const { Cell::new(launch_kind::NONE) };
}

/// The image's own std reports a panic through the GPU panic record instead of printing.
fn install_hook() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        std::panic::set_hook(std::boxed::Box::new(|info| {
            let message = info.payload_as_str().unwrap_or("a panic without a message");
            crate::panic_record::report(&message, info.location());
        }));
    });
}

/// Runs one GPU thread of a region of `kind`.
///
/// # Safety
/// `dyn_ptr` is the `HostLaunchEnv` the gpu-sim plugin passes, with a failure record.
pub unsafe fn entry(dyn_ptr: *mut c_void, kind: u32, body: impl FnOnce()) {
    install_hook();
    let env = dyn_ptr as *const HostLaunchEnv;
    ENV.with(|e| e.set(env));
    KIND.with(|k| k.set(kind));
    let r = std::panic::catch_unwind(core::panic::AssertUnwindSafe(body));
    ENV.with(|e| e.set(core::ptr::null()));
    KIND.with(|k| k.set(launch_kind::NONE));
    if r.is_err() {
        // The trap: the message is in the panic record (or another thread's is).
        // SAFETY: the plugin passes a valid failure record.
        unsafe { (*(*env).failure).record("trap", "", 0, 0) };
    }
}

fn env() -> Option<&'static HostLaunchEnv> {
    // SAFETY: set by `entry` for the GPU thread this host thread is running.
    ENV.with(|e| unsafe { e.get().as_ref() })
}

/// (block, blocks, thread, threads) of the running GPU thread.
pub fn geometry() -> (u32, u32, u32, u32) {
    env().map_or((0, 1, 0, 1), |e| {
        (e.team_num, e.num_teams, e.thread_num, e.num_threads)
    })
}

pub fn launch_kind() -> u32 {
    KIND.with(|k| k.get())
}

/// The block barrier: the plugin switches to the block's other threads and back once all have arrived.
#[track_caller]
pub fn barrier() {
    let Some(e) = env() else { return };
    let Some(wait) = e.barrier else { return };
    if std::thread::panicking() {
        // A drop during this thread's unwinding: it is trapping, and switching now would hand the image's
        // per-OS-thread panic state to the block's other threads. They see this thread finish instead.
        return;
    }
    let kind = launch_kind();
    // SAFETY: the plugin passes the block's barrier and this thread's context for the kernel's duration.
    let status = unsafe { wait(e.barrier_ctx) };
    // The threads that ran meanwhile on this host thread set their own.
    ENV.with(|c| c.set(e));
    KIND.with(|k| k.set(kind));
    if status != barrier_status::DONE {
        barrier_status::fail(status, e.team_num);
    }
}

/// The block's dynamic shared memory (address, bytes).
pub fn team_shared() -> (*mut u8, usize) {
    env().map_or((core::ptr::null_mut(), 0), |e| {
        (e.team_shared, e.team_shared_len)
    })
}

/// No launch-wide counter, as on GPUs: `schedule(dynamic)` chunks are dealt round-robin.
pub fn chunk_counter() -> *const core::sync::atomic::AtomicUsize {
    core::ptr::null()
}

pub use crate::clock::{wtick, wtime};
