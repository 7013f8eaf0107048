//! Kernel entries of the host image: geometry from `dyn_ptr`, panics caught and reported to the plugin.

use core::ffi::c_void;
use offload_model::abi::HostLaunchEnv;
use std::cell::{Cell, RefCell};
use std::string::{String, ToString};

std::thread_local! {
    static ENV: Cell<*const HostLaunchEnv> = const { Cell::new(core::ptr::null()) };
    static LAST_PANIC: RefCell<Option<(String, String, u32, u32)>> = const { RefCell::new(None) };
}

/// The image's own std has its own panic hook: it records the message and location for the plugin instead of
/// printing (the runtime reports the failure with the region's name).
fn install_hook() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        std::panic::set_hook(std::boxed::Box::new(|info| {
            let msg = match info.payload().downcast_ref::<&str>() {
                Some(s) => (*s).to_string(),
                None => info
                    .payload()
                    .downcast_ref::<String>()
                    .cloned()
                    .unwrap_or_else(|| "panic".into()),
            };
            let (file, line, col) = info.location().map_or((String::new(), 0, 0), |l| {
                (l.file().into(), l.line(), l.column())
            });
            LAST_PANIC.with(|p| *p.borrow_mut() = Some((msg, file, line, col)));
        }));
    });
}

/// Runs one kernel invocation.
///
/// # Safety
/// `dyn_ptr` is the `HostLaunchEnv` the host-elf plugin passes.
pub unsafe fn entry(dyn_ptr: *mut c_void, body: impl FnOnce()) {
    install_hook();
    let env = dyn_ptr as *const HostLaunchEnv;
    let prev = ENV.with(|e| e.replace(env));
    let r = std::panic::catch_unwind(core::panic::AssertUnwindSafe(body));
    ENV.with(|e| e.set(prev));
    if r.is_err() {
        let (msg, file, line, col) = LAST_PANIC
            .with(|p| p.borrow_mut().take())
            .unwrap_or_else(|| ("panic".into(), String::new(), 0, 0));
        // SAFETY: the plugin passes a valid failure record.
        unsafe { (*(*env).failure).record(&msg, &file, line, col) };
    }
}

fn env() -> Option<&'static HostLaunchEnv> {
    // SAFETY: set by `entry` for the kernel call this thread is running.
    ENV.with(|e| unsafe { e.get().as_ref() })
}

/// (team, teams, thread, threads) of the running kernel thread.
pub fn geometry() -> (u32, u32, u32, u32) {
    env().map_or((0, 1, 0, 1), |e| {
        (e.team_num, e.num_teams, e.thread_num, e.num_threads)
    })
}

pub fn barrier() {
    let Some(e) = env() else { return };
    let Some(wait) = e.barrier else { return };
    // SAFETY: the plugin passes its team barrier and the matching context for the kernel's duration.
    if unsafe { wait(e.barrier_ctx) } != 0 {
        panic!("offload: another thread of this team failed; leaving the barrier");
    }
}
