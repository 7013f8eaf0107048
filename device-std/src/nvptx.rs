//! Kernel support on NVIDIA GPUs: teams are blocks and threads are threads, team-shared memory is the launch's
//! dynamic shared memory, the barrier is the block barrier, and a panic writes the GPU panic record, then traps.

use crate::gpu_entry::{self, Gpu};
use core::arch::nvptx;

unsafe extern "C" {
    // From the device linker's IR shim (Rust cannot name address space 3): the dynamic shared memory block, as a
    // generic pointer, and its size in bytes.
    fn __offload_dyn_shared_ptr() -> *mut u8;
    fn __offload_dyn_shared_len() -> u32;
    // `%globaltimer`: nanoseconds, the same counter on every SM.
    fn __offload_globaltimer() -> u64;
}

pub use crate::gpu_entry::{chunk_counter, launch_kind, team_shared_claim};

/// NVIDIA's intrinsics, for what a kernel entry does on every GPU ([`crate::gpu_entry`]).
pub struct Nvptx;

impl Gpu for Nvptx {
    #[inline(always)]
    fn geometry() -> (u32, u32, u32, u32) {
        geometry()
    }

    #[inline(always)]
    fn team_shared() -> (*mut u8, usize) {
        team_shared()
    }

    #[inline(always)]
    fn barrier() {
        barrier()
    }

    #[inline(always)]
    fn trap() -> ! {
        // SAFETY: `trap` ends this thread's kernel; nothing runs after it.
        unsafe { nvptx::trap() }
    }
}

/// What every kernel entry calls first ([`gpu_entry::enter`]).
#[inline(always)]
pub fn enter(kind: u32) {
    gpu_entry::enter::<Nvptx>(kind)
}

// Always inlined, as its body ([`gpu_entry::panic`] says why). rustc warns that `#[inline]` is ignored on an
// exported function, but marks the handler `alwaysinline` all the same, which the device link's inliner needs:
// without it the handler stays out of line and the message with it (the gpu_examples test checks).
#[panic_handler]
#[allow(unused_attributes)]
#[inline(always)]
fn panic(info: &core::panic::PanicInfo) -> ! {
    gpu_entry::panic::<Nvptx>(info)
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
