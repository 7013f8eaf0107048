//! Memory: pool blocks (not zeroed, as device memory is not), access grants, fills and the copy engine.

use super::state::{addr, agent_name, enter, meet, result, set_signal, signal_name, with, Block};
use crate::plugin::amdgpu::sys::*;
use std::ffi::c_void;

pub(super) unsafe extern "C" fn hsa_amd_memory_pool_allocate(
    pool: MemoryPool,
    size: usize,
    flags: u32,
    ptr: *mut *mut c_void,
) -> Status {
    let status = enter(
        "hsa_amd_memory_pool_allocate",
        format_args!("{:#x}, {size} bytes, flags {flags}", pool.handle),
    );
    if status != HSA_STATUS_SUCCESS {
        return status;
    }
    let (p, index) = with(|s| {
        // Not zeroed, as device memory is not, so a test sees whether the plugin fills it; but large blocks (the
        // staging buffer) are, which is much faster under Miri.
        let words = size.div_ceil(16).max(1);
        let storage = match size {
            0..=65536 => vec![u128::from_le_bytes([0xAA; 16]); words],
            _ => vec![0; words],
        };
        s.blocks.push(Block { storage, len: size });
        s.freed.push(false);
        // Its own index, taken with the push: another thread's block may come next.
        let index = s.blocks.len() - 1;
        (s.blocks[index].storage.as_mut_ptr().cast::<c_void>(), index)
    });
    result(format_args!("#{index}"));
    // SAFETY: the plugin passes a pointer to write the block's address to.
    unsafe { *ptr = p };
    HSA_STATUS_SUCCESS
}

pub(super) unsafe extern "C" fn hsa_amd_memory_pool_free(ptr: *mut c_void) -> Status {
    let which = with(|s| addr(s, ptr as usize));
    let status = enter("hsa_amd_memory_pool_free", format_args!("{which}"));
    // A free of anything but a live block's start shows in the trace, so no test can miss it.
    let wrong = with(
        |s| match s.blocks.iter().position(|b| b.start() == ptr as usize) {
            Some(i) => std::mem::replace(&mut s.freed[i], true).then_some("double free"),
            None => Some("not a block"),
        },
    );
    if let Some(wrong) = wrong {
        result(format_args!("{wrong}"));
    }
    status
}

pub(super) unsafe extern "C" fn hsa_amd_agents_allow_access(
    num_agents: u32,
    agents: *const Agent,
    flags: *const u32,
    ptr: *const c_void,
) -> Status {
    let (who, which) = with(|s| {
        // SAFETY: the plugin passes `num_agents` agents.
        let agents = unsafe { std::slice::from_raw_parts(agents, num_agents as usize) };
        let who: Vec<String> = agents.iter().map(|a| agent_name(s, *a)).collect();
        (who.join(" "), addr(s, ptr as usize))
    });
    enter(
        "hsa_amd_agents_allow_access",
        format_args!(
            "[{who}], flags {}, {which}",
            if flags.is_null() { "null" } else { "set" }
        ),
    )
}

pub(super) unsafe extern "C" fn hsa_amd_memory_fill(
    ptr: *mut c_void,
    value: u32,
    count: usize,
) -> Status {
    let which = with(|s| addr(s, ptr as usize));
    let status = enter(
        "hsa_amd_memory_fill",
        format_args!("{which}, {value:#x}, {count} words"),
    );
    if status == HSA_STATUS_SUCCESS {
        for i in 0..count {
            // SAFETY: the plugin fills within its block.
            unsafe { ptr.cast::<u32>().add(i).write_unaligned(value) };
        }
    }
    status
}

pub(super) unsafe extern "C" fn hsa_amd_memory_async_copy(
    dst: *mut c_void,
    dst_agent: Agent,
    src: *const c_void,
    src_agent: Agent,
    size: usize,
    num_dep_signals: u32,
    _dep_signals: *const Signal,
    completion_signal: Signal,
) -> Status {
    let line = with(|s| {
        format!(
            "{}, {}, {}, {}, {size} bytes, {num_dep_signals} deps, {}",
            addr(s, dst as usize),
            agent_name(s, dst_agent),
            addr(s, src as usize),
            agent_name(s, src_agent),
            signal_name(s, completion_signal)
        )
    });
    let status = enter("hsa_amd_memory_async_copy", format_args!("{line}"));
    if status != HSA_STATUS_SUCCESS {
        return status;
    }
    meet();
    // SAFETY: the plugin copies between two blocks of this machine.
    unsafe { std::ptr::copy_nonoverlapping(src.cast::<u8>(), dst.cast::<u8>(), size) };
    with(|s| {
        let leaves = s.config.copy_leaves;
        set_signal(s, completion_signal, leaves)
    });
    HSA_STATUS_SUCCESS
}
