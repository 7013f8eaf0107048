//! The team step of a reduction value that is not small (`offload_model::reduce::is_small`: a 256-bin histogram), on
//! every image: a slot per thread would not fit a GPU's team memory, so the team's threads combine their partials in
//! turn, in thread order, straight into the team's output slot in device memory.

use super::backend::{barrier, geometry};
use offload_model::reduce::ReduceOp;

/// The end of a reduction region's thread for a value that is not small: thread `k` combines its partial into
/// `out[team]` in turn `k`, after a barrier; team 0's first thread writes the identity as `out[teams]`, the initial
/// value being in its own partial (`__reduce_init` started its copy there).
///
/// # Safety
/// `out` is the device address of `teams + 1` slots of `T`, and every thread of the team calls this.
pub unsafe fn reduce_team<Op: ReduceOp<T>, T: Copy>(partial: &T, out: u64) {
    let (team, teams, thread, threads) = geometry();
    let out = out as *mut T;
    // SAFETY: `team < teams`: inside the output, per the contract.
    let slot = unsafe { out.add(team as usize) };
    for k in 0..threads {
        if k > 0 {
            barrier();
        }
        if k == thread {
            // SAFETY: the team's own slot, this thread's alone during its turn; thread `k - 1` wrote it in its turn,
            // which the barrier orders before this read.
            // In place, through pointers: no copy of a large value in the frame.
            unsafe {
                if k == 0 {
                    core::ptr::copy_nonoverlapping(partial as *const T, slot, 1);
                } else {
                    Op::combine_into(slot, partial);
                }
            }
        }
    }
    if team == 0 && thread == 0 {
        // SAFETY: slot `teams` of the output, written by this thread alone.
        unsafe { Op::write_identity(out.add(teams as usize)) };
    }
}
