//! The reduction's team step on GPUs, where there are no thread-locals: the same structure as the host image's
//! (partials through team-shared slots, combined in order by the team's first thread into `out[team]`; team 0 adds
//! the initial value as `out[teams]`), over the backend's geometry, barrier and team-shared memory.

use super::backend::{barrier, geometry, team_shared};

/// The reduction's slot `k` in team-shared memory (one per thread, then the initial value's).
fn slot<T>(k: u32) -> *mut T {
    let bytes = offload_model::reduce::slot_bytes(core::mem::size_of::<T>());
    team_shared().0.wrapping_add(k as usize * bytes) as *mut T
}

/// Keeps a small reduction value's initial value for [`reduce_team`]: thread 0 puts it in the slot after the
/// threads' (every thread computed the same value). A larger one starts the first thread's copy instead.
pub fn record_init<T: Copy>(v: T) {
    let (_, _, thread, threads) = geometry();
    if thread == 0 {
        // SAFETY: the runtime gives a reduction launch `threads + 1` slots; slot `threads` is this one's.
        unsafe { core::ptr::write_unaligned(slot(threads), v) };
    }
}

/// The end of a reduction region's thread. A value that is not small goes through `out[team]` alone
/// (`reduce_turns`): a slot per thread would not fit team-shared memory.
///
/// # Safety
/// `out` is the device address of `teams + 1` slots of `T`, and for a small value the launch gave each team
/// `threads + 1` slots of `slot_bytes(size_of::<T>())` bytes of team-shared memory.
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
