//! Kernel support on NVIDIA GPUs: teams are blocks and threads are threads, team-shared memory is the launch's
//! dynamic shared memory, the barrier is the block barrier, and a panic traps (the plugin names the region).

use core::arch::nvptx;

unsafe extern "C" {
    // From the device linker's IR shim (Rust cannot name address space 3): the dynamic shared memory block, as a
    // generic pointer, and its size in bytes.
    fn __offload_dyn_shared_ptr() -> *mut u8;
    fn __offload_dyn_shared_len() -> u32;
}

#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    // The message cannot leave the GPU; the trap fails the launch, and the plugin reports the region.
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

/// The reduction's slot `k` in team-shared memory (16 bytes each: one per thread, then the initial value's).
fn slot<T>(k: u32) -> *mut T {
    team_shared()
        .0
        .wrapping_add(k as usize * offload_model::reduce::SLOT) as *mut T
}

/// Keeps the reduction variable's initial value for [`reduce_team`]: there are no thread-locals here, so thread 0
/// puts it in the slot after the threads' (every thread computed the same value).
pub fn record_init<T: Copy>(v: T) {
    let (_, _, thread, threads) = geometry();
    if thread == 0 {
        // SAFETY: the runtime gives a reduction launch `threads + 1` slots; slot `threads` is this one's.
        unsafe { core::ptr::write_unaligned(slot(threads), v) };
    }
}

/// The end of a reduction region's thread, as on the host: partials through team-shared slots, combined in order by
/// the team's first thread into `out[team]`; team 0 adds the initial value as `out[teams]`.
///
/// # Safety
/// `out` is the device address of `teams + 1` slots of `T`, and the launch gave each team `(threads + 1) * 16` bytes
/// of team-shared memory.
pub unsafe fn reduce_team<Op: offload_model::reduce::ReduceOp<T>, T: Copy>(partial: T, out: u64) {
    let (team, teams, thread, threads) = geometry();
    let out = out as *mut T;
    // SAFETY: each thread writes its own slot; the barrier orders the writes before thread 0's reads.
    unsafe { core::ptr::write_unaligned(slot(thread), partial) };
    barrier();
    if thread != 0 {
        return;
    }
    let mut team_value = partial;
    for k in 1..threads {
        // SAFETY: written by thread `k` before the barrier.
        team_value = Op::combine(team_value, unsafe { core::ptr::read_unaligned(slot(k)) });
    }
    // SAFETY: per the contract; one writer per slot.
    unsafe {
        core::ptr::write_unaligned(out.add(team as usize), team_value);
        if team == 0 {
            core::ptr::write_unaligned(
                out.add(teams as usize),
                core::ptr::read_unaligned(slot::<T>(threads)),
            );
        }
    }
}
