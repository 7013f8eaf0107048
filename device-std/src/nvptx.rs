//! Kernel support on NVIDIA GPUs: teams are blocks and threads are threads, team-shared memory is the launch's
//! dynamic shared memory, the barrier is the block barrier, and a panic writes the GPU panic record, then traps.

use core::arch::nvptx;

unsafe extern "C" {
    // From the device linker's IR shim (Rust cannot name address space 3): the dynamic shared memory block, as a
    // generic pointer, and its size in bytes.
    fn __offload_dyn_shared_ptr() -> *mut u8;
    fn __offload_dyn_shared_len() -> u32;
    // A word of static shared memory (one per block) holding the running kernel's `launch_kind`.
    fn __offload_set_launch_kind(kind: u32);
    fn __offload_launch_kind() -> u32;
    // A word of static shared memory (one per block): which atomic type `team_shared` hands the block's
    // team-shared memory out as.
    fn __offload_team_shared_claim() -> *const core::sync::atomic::AtomicU32;
    // `%globaltimer`: nanoseconds, the same counter on every SM.
    fn __offload_globaltimer() -> u64;
}

/// What every kernel entry calls first: records the region's `launch_kind` for this block. Every thread writes the
/// same value before it reads it, so no barrier is needed. A `teams, parallel` kernel also clears the block's
/// team-shared claim word (static shared memory keeps whatever the last block on the unit left there), and waits
/// at a barrier so that no thread's `team_shared` claims it before every thread has cleared it.
#[inline(always)]
pub fn enter(kind: u32) {
    // SAFETY: the shim's function stores to the block's own word.
    unsafe { __offload_set_launch_kind(kind) }
    if kind == offload_model::abi::launch_kind::SPMD {
        // Every thread of a `teams, parallel` kernel runs its entry, so every thread reaches its barrier.
        crate::clear_team_shared();
    }
}

/// The block's team-shared claim word.
#[inline(always)]
pub fn team_shared_claim() -> *const core::sync::atomic::AtomicU32 {
    // SAFETY: the shim's function only forms the address.
    unsafe { __offload_team_shared_claim() }
}

/// The running kernel's `launch_kind`.
#[inline(always)]
pub fn launch_kind() -> u32 {
    // SAFETY: the shim's function loads the block's own word, written by this thread at entry.
    unsafe { __offload_launch_kind() }
}

// Always inlined, into `core`'s `panic_fmt` and `panic_nounwind_fmt` at the device link, and reading only the
// location of the `PanicInfo` they build: their message argument (a formatting template and its arguments) is then
// dead, and so are the formatting arguments every panicking caller builds. Were any read (even `as_str()`), their
// formatting functions would stay address-taken, and ptxas and the AMDGPU backend count the registers and stack of
// every address-taken function against every kernel (a 20-register kernel became 56). rustc warns that `#[inline]`
// is ignored on an exported function, but marks the handler `alwaysinline` all the same, which the device link's
// inliner needs: without it the handler stays out of line and the message with it (the gpu_examples test checks).
#[panic_handler]
#[allow(unused_attributes)]
#[inline(always)]
fn panic(info: &core::panic::PanicInfo) -> ! {
    // Where, and which thread, go to the plugin's record (an out-of-line, cold call); the trap then fails the
    // launch, and the plugin reads the record.
    crate::panic_record::report_location(info.location());
    // SAFETY: `trap` ends this thread's kernel; nothing runs after it.
    unsafe { nvptx::trap() }
}

/// (team, teams, thread, threads).
#[inline(always)]
pub fn geometry() -> (u32, u32, u32, u32) {
    // SAFETY: special registers, readable by any thread.
    unsafe {
        (
            nvptx::_block_idx_x() as u32,
            nvptx::_grid_dim_x() as u32,
            nvptx::_thread_idx_x() as u32,
            nvptx::_block_dim_x() as u32,
        )
    }
}

#[inline(always)]
pub fn barrier() {
    // SAFETY: every thread of the block reaches it (regions call it in SPMD bodies, the lowering at a region's end).
    unsafe { nvptx::_syncthreads() }
}

#[inline(always)]
pub fn team_shared() -> (*mut u8, usize) {
    // SAFETY: the shim's functions only read the block's address and size.
    unsafe {
        (
            __offload_dyn_shared_ptr(),
            __offload_dyn_shared_len() as usize,
        )
    }
}

/// `%globaltimer` in seconds.
#[inline(always)]
pub fn wtime() -> f64 {
    // SAFETY: the shim's function reads a special register.
    (unsafe { __offload_globaltimer() }) as f64 * 1e-9
}

/// `%globaltimer` counts nanoseconds (as LLVM's device runtime reports it; hardware may update it more coarsely).
#[inline(always)]
pub fn wtick() -> f64 {
    1e-9
}

/// No launch-wide counter: `schedule(dynamic)` chunks are dealt round-robin here.
pub fn chunk_counter() -> *const core::sync::atomic::AtomicUsize {
    core::ptr::null()
}
