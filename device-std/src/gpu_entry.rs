//! A kernel's entry on a GPU, NVIDIA and AMD alike, over the target's own intrinsics ([`Gpu`]): the launch kind the
//! entry records, the team-shared claim word a `teams, parallel` kernel clears with its team-shared memory, and the
//! panic handler's body. The launch kind and the claim word are words of static shared memory (one per block or
//! workgroup) that the device linker's IR shim declares and names the same way on both targets.

use core::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

unsafe extern "C" {
    // From the device linker's IR shim (Rust cannot name address space 3): the word holding the running kernel's
    // `launch_kind`.
    fn __offload_set_launch_kind(kind: u32);
    fn __offload_launch_kind() -> u32;
    // The word telling which atomic type `team_shared` hands the team's shared memory out as.
    fn __offload_team_shared_claim() -> *const AtomicU32;
}

/// What a GPU target provides to the entry: its intrinsics, through its IR shim or `core::arch`.
pub trait Gpu {
    /// (team, teams, thread, threads).
    fn geometry() -> (u32, u32, u32, u32);
    /// The team's shared memory: its address and bytes.
    fn team_shared() -> (*mut u8, usize);
    /// Waits for every thread of the team.
    fn barrier();
    /// Ends this thread's kernel, failing the launch.
    fn trap() -> !;
}

/// What every kernel entry calls first: records the region's `launch_kind` for this team. Every thread writes the
/// same value before it reads it, so no barrier is needed. A `teams, parallel` kernel also clears the team's
/// team-shared claim word (static shared memory keeps whatever the last team on the unit left there), and waits
/// at a barrier so that no thread's `team_shared` claims it before every thread has cleared it.
#[inline(always)]
pub fn enter<G: Gpu>(kind: u32) {
    // SAFETY: the shim's function stores to the team's own word.
    unsafe { __offload_set_launch_kind(kind) }
    if kind == offload_model::abi::launch_kind::SPMD {
        // Every thread of a `teams, parallel` kernel runs its entry, so every thread reaches its barrier.
        clear_team_shared::<G>();
    }
}

/// A `teams, parallel` kernel's entry on a GPU. Shared memory keeps whatever the unit's last block left there, so
/// the block's threads clear its team-shared claim word and its team-shared memory (which `team_shared` hands out
/// zeroed, as the host devices and gpu-sim give it), word by word between them, and meet at a barrier before any of
/// them claims or reads either.
#[inline(always)]
fn clear_team_shared<G: Gpu>() {
    let (_, _, thread, threads) = G::geometry();
    let (base, len) = G::team_shared();
    if thread == 0 {
        // SAFETY: the shim's function forms the address of the block's own word, alive for the kernel's run.
        unsafe { &*team_shared_claim() }.store(0, Ordering::Relaxed);
        for k in len / 4 * 4..len {
            // SAFETY: inside the block's team-shared memory; no thread uses it before the barrier below.
            unsafe { base.add(k).write(0) };
        }
    }
    let mut k = thread as usize;
    while k < len / 4 {
        // SAFETY: the block's team-shared memory is 16-byte aligned and `len` bytes long; each word is this thread's
        // alone until the barrier.
        unsafe { base.cast::<u32>().add(k).write(0) };
        k += threads as usize;
    }
    G::barrier();
}

/// The team's team-shared claim word.
#[inline(always)]
pub fn team_shared_claim() -> *const AtomicU32 {
    // SAFETY: the shim's function only forms the address.
    unsafe { __offload_team_shared_claim() }
}

/// The running kernel's `launch_kind`.
#[inline(always)]
pub fn launch_kind() -> u32 {
    // SAFETY: the shim's function loads the team's own word, written by this thread at entry.
    unsafe { __offload_launch_kind() }
}

/// No launch-wide counter: `schedule(dynamic)` chunks are dealt round-robin here.
pub fn chunk_counter() -> *const AtomicUsize {
    core::ptr::null()
}

/// The panic handler's body: where, and which thread, go to the plugin's record (an out-of-line, cold call); the
/// trap then fails the launch, and the plugin reads the record.
///
/// Always inlined, into each target's handler and with it into `core`'s `panic_fmt` and `panic_nounwind_fmt` at
/// the device link, and reading only the location of the `PanicInfo` they build: their message argument (a
/// formatting template and its arguments) is then dead, and so are the formatting arguments every panicking caller
/// builds. Were any read (even `as_str()`), their formatting functions would stay address-taken, and ptxas and the
/// AMDGPU backend count the registers and stack of every address-taken function against every kernel (a 20-register
/// kernel became 56).
#[inline(always)]
pub fn panic<G: Gpu>(info: &core::panic::PanicInfo) -> ! {
    crate::panic_record::report_location(info.location());
    G::trap()
}
