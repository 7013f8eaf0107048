//! Kernel entries of the host image: geometry from `dyn_ptr`, panics caught and reported to the plugin.

use crate::host_env::{self, env};
pub use crate::host_env::{chunk_counter, geometry, launch_kind, team_shared, team_shared_claim};
use core::ffi::c_void;
use offload_model::abi::{barrier_status, HostLaunchEnv, LlvmLaunch};
use std::cell::{Cell, RefCell};
use std::string::{String, ToString};

std::thread_local! {
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

/// Runs one kernel invocation of a region of `kind` (a `launch_kind`, which the outliner knows from the region).
///
/// `dyn_ptr` is this thread's `HostLaunchEnv` on host-elf. Under LLVM's libomptarget, whose host plugin calls a kernel
/// once on the calling thread, it is our runtime's tagged [`LlvmLaunch`] plan: the body then goes to the plan's
/// team executor, which runs it once per thread of the launch (so `body` is `Fn + Sync`: it captures only the
/// kernel's `u64` arguments). Null or all ones (a launch not made by our runtime) runs it as one team of one thread,
/// which every construct's lowering handles, and a panic, which nothing could report, then aborts the process
/// after saying where it was.
///
/// # Safety
/// `dyn_ptr` is the `HostLaunchEnv` the host-elf plugin passes, a live plan tagged by [`LlvmLaunch::tagged`], or null,
/// or all ones.
pub unsafe fn entry<F: Fn() + Sync>(dyn_ptr: *mut c_void, kind: u32, body: F) {
    install_hook();
    // SAFETY: per the contract.
    if let Some(plan) = unsafe { LlvmLaunch::untag(dyn_ptr) } {
        // SAFETY: `body` outlives the call, which runs `thread::<F>` on it alone.
        unsafe { (plan.run)(plan, &body as *const F as *const c_void, thread::<F>, kind) };
        return;
    }
    let env = if dyn_ptr.is_null() || dyn_ptr as usize == usize::MAX {
        core::ptr::null_mut()
    } else {
        dyn_ptr as *mut HostLaunchEnv
    };
    // SAFETY: per the contract.
    unsafe { run(env, kind, &body) }
}

/// One thread of a launch under LLVM's libomptarget, as the plan's executor calls it.
///
/// # Safety
/// `body` is the `F` that [`entry`] passed with this function, and `env` a launch environment valid for the call.
unsafe extern "C" fn thread<F: Fn() + Sync>(
    body: *const c_void,
    env: *mut HostLaunchEnv,
    kind: u32,
) {
    // SAFETY: per the contract.
    unsafe { run(env, kind, &*(body as *const F)) }
}

/// Runs `body` as one thread of a kernel whose launch environment is `env` (null: none), reporting a panic in it.
///
/// # Safety
/// `env` is null or a launch environment valid for the call.
unsafe fn run(env: *mut HostLaunchEnv, kind: u32, body: &dyn Fn()) {
    // A nested launch runs inline on this thread: restore the enclosing kernel's view afterwards.
    let (prev, prev_kind) = host_env::set(env, kind);
    let r = std::panic::catch_unwind(core::panic::AssertUnwindSafe(body));
    host_env::set(prev, prev_kind);
    if r.is_err() {
        let (msg, file, line, col) = LAST_PANIC
            .with(|p| p.borrow_mut().take())
            .unwrap_or_else(|| ("panic".into(), String::new(), 0, 0));
        if env.is_null() {
            std::eprintln!(
                "offload: a region panicked on a device of LLVM's libomptarget, which cannot report it: {msg} at \
                 {file}:{line}:{col}"
            );
            std::process::abort();
        }
        // SAFETY: the plugin passes a valid failure record.
        unsafe { (*(*env).failure).record(&msg, &file, line, col) };
    }
}

#[track_caller]
pub fn barrier() {
    let Some(e) = env() else { return };
    let Some(wait) = e.barrier else { return };
    // SAFETY: the plugin passes its team barrier and the matching context for the kernel's duration.
    let status = unsafe { wait(e.barrier_ctx) };
    if status != barrier_status::DONE {
        barrier_status::fail(status, e.team_num);
    }
}

std::thread_local! {
    /// This thread's reduction variable's initial value, recorded by `__reduce_init`.
    static REDUCE_INIT: Cell<[u8; offload_model::reduce::SMALL_BYTES]> =
        const { Cell::new([0; offload_model::reduce::SMALL_BYTES]) };
}

/// Keeps a small reduction value's initial value for [`reduce_team`] (a larger one starts the first thread's copy).
pub fn record_init<T: Copy>(v: T) {
    assert!(
        offload_model::reduce::is_small(core::mem::size_of::<T>()),
        "only a small reduction value is kept aside"
    );
    let mut b = [0u8; offload_model::reduce::SMALL_BYTES];
    // SAFETY: `T` fits (asserted); reduction types are plain numbers without padding.
    unsafe { core::ptr::write_unaligned(b.as_mut_ptr() as *mut T, v) };
    REDUCE_INIT.with(|c| c.set(b));
}

fn recorded_init<T: Copy>() -> T {
    let b = REDUCE_INIT.with(|c| c.get());
    // SAFETY: written by `record_init::<T>` on this thread for this kernel.
    unsafe { core::ptr::read_unaligned(b.as_ptr() as *const T) }
}

/// The end of a reduction region's thread: its partial goes into the team's shared slots, the team's first thread
/// combines them in order into `out[team]`, and team 0's first thread adds the initial value as `out[teams]`; the
/// host combines the teams. A value that is not small goes through `out[team]` alone (`reduce_turns`).
///
/// # Safety
/// `out` is the device address of `teams + 1` slots of `T`, and for a small value the launch gave each team
/// `threads` slots of `slot_bytes(size_of::<T>())` bytes of team-shared memory.
pub unsafe fn reduce_team<Op: offload_model::reduce::ReduceOp<T>, T: Copy>(partial: &T, out: u64) {
    if offload_model::reduce::is_small(core::mem::size_of::<T>()) {
        // SAFETY: per the contract, for a small value.
        unsafe { through_slots::<Op, T>(*partial, out) }
    } else {
        // SAFETY: per the contract; every thread of the team ends here.
        unsafe { crate::reduce_turns::reduce_team::<Op, T>(partial, out) }
    }
}

/// [`reduce_team`] for a small value, in a function of its own so that an unoptimised frame of a large value's
/// does not hold its copies.
///
/// # Safety
/// As [`reduce_team`]'s, for a small value.
unsafe fn through_slots<Op: offload_model::reduce::ReduceOp<T>, T: Copy>(partial: T, out: u64) {
    let (team, teams, thread, threads) = geometry();
    let out = out as *mut T;
    let mut team_value = partial;
    if threads > 1 {
        let e = env().expect("a parallel launch");
        let bytes = offload_model::reduce::slot_bytes(core::mem::size_of::<T>());
        let slot = |k: u32| e.team_shared.wrapping_add(k as usize * bytes) as *mut T;
        // SAFETY: each thread writes its own slot; the barrier orders the writes before thread 0's reads.
        unsafe { core::ptr::write_unaligned(slot(thread), partial) };
        barrier();
        if thread != 0 {
            return;
        }
        team_value = unsafe { core::ptr::read_unaligned(slot(0)) };
        for k in 1..threads {
            team_value = Op::combine(team_value, unsafe { core::ptr::read_unaligned(slot(k)) });
        }
    }
    // SAFETY: per the contract; one writer per slot.
    unsafe {
        core::ptr::write_unaligned(out.add(team as usize), team_value);
        if team == 0 {
            core::ptr::write_unaligned(out.add(teams as usize), recorded_init::<T>());
        }
    }
}

pub use crate::clock::{wtick, wtime};
