//! Kernel support on AMD GPUs: teams are workgroups and threads are work-items, team-shared memory is the LDS a
//! launch adds after the kernel's static LDS, the barrier waits for LDS writes, and a panic writes the GPU panic
//! record, then traps.

use crate::gpu_entry::{self, Gpu};
use core::arch::amdgpu;

unsafe extern "C" {
    // From the device linker's IR shim (Rust cannot name address spaces 3 and 4): fields of the dispatch packet
    // (`workgroup_size_x`, `grid_size_x` in work-items, `group_segment_size`), the launch's dynamic LDS, a barrier
    // fenced on both sides, and a trap.
    fn __offload_workgroup_size_x() -> u32;
    fn __offload_grid_size_x() -> u32;
    fn __offload_group_segment_size() -> u32;
    fn __offload_dyn_lds_ptr() -> *mut u8;
    fn __offload_barrier();
    fn __offload_trap() -> !;
    // The real-time counter: a constant 100 MHz clock (gfx9 and later), the same on every compute unit.
    fn __offload_realtime() -> u64;
}

pub use crate::gpu_entry::{chunk_counter, launch_kind, team_shared_claim};

/// AMD's intrinsics, for what a kernel entry does on every GPU ([`crate::gpu_entry`]).
pub struct Amdgpu;

impl Gpu for Amdgpu {
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
        // SAFETY: the shim's trap ends this work-item's kernel; nothing runs after it.
        unsafe { __offload_trap() }
    }
}

/// What every kernel entry calls first ([`gpu_entry::enter`]).
#[inline(always)]
pub fn enter(kind: u32) {
    gpu_entry::enter::<Amdgpu>(kind)
}

// Always inlined, as its body ([`gpu_entry::panic`] says why). rustc warns that `#[inline]` is ignored on an
// exported function, but marks the handler `alwaysinline` all the same, which the device link's inliner needs:
// without it the handler stays out of line and the message with it (the gpu_examples test checks).
#[panic_handler]
#[allow(unused_attributes)]
#[inline(always)]
fn panic(info: &core::panic::PanicInfo) -> ! {
    gpu_entry::panic::<Amdgpu>(info)
}

/// (team, teams, thread, threads).
#[inline(always)]
pub fn geometry() -> (u32, u32, u32, u32) {
    // SAFETY: the shim's functions read the dispatch packet, readable by every work-item for the kernel's run.
    let (threads, grid) = unsafe { (__offload_workgroup_size_x(), __offload_grid_size_x()) };
    (
        amdgpu::workgroup_id_x(),
        grid / threads.max(1),
        amdgpu::workitem_id_x(),
        threads,
    )
}

#[inline(always)]
pub fn barrier() {
    // SAFETY: every work-item of the workgroup reaches it (SPMD bodies, or the reduction step at a region's end).
    unsafe { __offload_barrier() }
}

#[inline(always)]
pub fn team_shared() -> (*mut u8, usize) {
    // group_segment_size covers the kernel's static LDS and the launch's team-shared memory after it, which starts
    // at the next 16-byte boundary (the shim's alignment).
    // SAFETY: as in `geometry`.
    let total = unsafe { __offload_group_segment_size() } as usize;
    let fixed = (amdgpu::groupstaticsize() as usize).next_multiple_of(16);
    // SAFETY: the shim only forms the address.
    (
        unsafe { __offload_dyn_lds_ptr() },
        total.saturating_sub(fixed),
    )
}

/// Ticks of the 100 MHz real-time counter.
const REALTIME_TICK: f64 = 1e-8;

/// The real-time counter in seconds.
#[inline(always)]
pub fn wtime() -> f64 {
    // SAFETY: the shim's function reads a hardware counter.
    (unsafe { __offload_realtime() }) as f64 * REALTIME_TICK
}

#[inline(always)]
pub fn wtick() -> f64 {
    REALTIME_TICK
}
