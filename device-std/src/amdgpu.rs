//! Kernel support on AMD GPUs: teams are workgroups and threads are work-items, team-shared memory is the LDS a
//! launch adds after the kernel's static LDS, the barrier waits for LDS writes, and a panic writes the GPU panic
//! record, then traps.

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
    // A word of static LDS (one per workgroup) holding the running kernel's `launch_kind`.
    fn __offload_set_launch_kind(kind: u32);
    fn __offload_launch_kind() -> u32;
    // A word of static shared memory (one per workgroup): which atomic type `team_shared` hands the workgroup's
    // team-shared memory out as.
    fn __offload_team_shared_claim() -> *const core::sync::atomic::AtomicU32;
    // The real-time counter: a constant 100 MHz clock (gfx9 and later), the same on every compute unit.
    fn __offload_realtime() -> u64;
}

/// What every kernel entry calls first: records the region's `launch_kind` for this workgroup. Every thread writes the
/// same value before it reads it, so no barrier is needed. A `teams, parallel` kernel also clears the workgroup's
/// team-shared claim word (static shared memory keeps whatever the last workgroup on the unit left there), and waits
/// at a barrier so that no thread's `team_shared` claims it before every thread has cleared it.
#[inline(always)]
pub fn enter(kind: u32) {
    // SAFETY: the shim's function stores to the workgroup's own word.
    unsafe { __offload_set_launch_kind(kind) }
    if kind == offload_model::abi::launch_kind::SPMD {
        // Every thread of a `teams, parallel` kernel runs its entry, so every thread reaches its barrier.
        crate::clear_team_shared();
    }
}

/// The workgroup's team-shared claim word.
#[inline(always)]
pub fn team_shared_claim() -> *const core::sync::atomic::AtomicU32 {
    // SAFETY: the shim's function only forms the address.
    unsafe { __offload_team_shared_claim() }
}

/// The running kernel's `launch_kind`.
#[inline(always)]
pub fn launch_kind() -> u32 {
    // SAFETY: the shim's function loads the workgroup's own word, written by this work-item at entry.
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
    // dispatch, and the plugin reads the record.
    crate::panic_record::report_location(info.location());
    // SAFETY: the shim's trap ends this work-item's kernel; nothing runs after it.
    unsafe { __offload_trap() }
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

/// No launch-wide counter: `schedule(dynamic)` chunks are dealt round-robin here.
pub fn chunk_counter() -> *const core::sync::atomic::AtomicUsize {
    core::ptr::null()
}
