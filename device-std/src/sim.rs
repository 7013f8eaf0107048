//! Kernel support on gpu-sim, the simulated GPU: the GPU lowering's intrinsics over what the gpu-sim plugin passes
//! as `dyn_ptr` (a [`HostLaunchEnv`]: block and thread numbers, the grid's and block's sizes, the block's dynamic
//! shared memory, its barrier). The plugin runs a block's threads as user-level threads on one host thread, switched
//! at barriers, so the thread-locals of `host_env` are the running GPU thread's only between switches: the barrier
//! restores them. A panic writes the GPU panic record, as on a GPU, then "traps": the entry catches it and tells the plugin.

use crate::host_env::{self, env};
pub use crate::host_env::{chunk_counter, geometry, launch_kind, team_shared, team_shared_claim};
use core::ffi::c_void;
use offload_model::abi::{barrier_status, HostLaunchEnv};

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
    let (prev, prev_kind) = host_env::set(env, kind);
    let r = std::panic::catch_unwind(core::panic::AssertUnwindSafe(body));
    host_env::set(prev, prev_kind);
    if r.is_err() {
        // The trap: the message is in the panic record (or another thread's is).
        // SAFETY: the plugin passes a valid failure record.
        unsafe { (*(*env).failure).record("trap", "", 0, 0) };
    }
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
    host_env::set(e, kind);
    if status != barrier_status::DONE {
        barrier_status::fail(status, e.team_num);
    }
}

pub use crate::clock::{wtick, wtime};
