//! Signals and queues, and the packet processor, which runs when a queue's doorbell rings.

use super::machine::OnDispatch;
use super::state::{
    agent_name, enter, meet, new_signal, queue_index, result, set_signal, signal_name, with,
    Dispatched, FakeQueue,
};
use crate::plugin::amdgpu::sys::*;
use std::ffi::c_void;

pub(super) unsafe extern "C" fn hsa_signal_create(
    initial_value: SignalValue,
    num_consumers: u32,
    _consumers: *const Agent,
    signal: *mut Signal,
) -> Status {
    let status = enter(
        "hsa_signal_create",
        format_args!("{initial_value}, {num_consumers} consumers"),
    );
    if status != HSA_STATUS_SUCCESS {
        return status;
    }
    let made = with(|s| new_signal(s, initial_value, None));
    result(format_args!("s{}", made.handle - 0x5000));
    // SAFETY: the plugin passes a pointer to write the signal to.
    unsafe { *signal = made };
    HSA_STATUS_SUCCESS
}

pub(super) unsafe extern "C" fn hsa_signal_destroy(signal: Signal) -> Status {
    let which = with(|s| signal_name(s, signal));
    let status = enter("hsa_signal_destroy", format_args!("{which}"));
    let live = with(|s| {
        s.signals
            .get_mut((signal.handle - 0x5000) as usize)
            .and_then(|v| v.0.take())
            .is_some()
    });
    if !live {
        result(format_args!("not a live signal"));
    }
    status
}

pub(super) unsafe extern "C" fn hsa_signal_store_relaxed(signal: Signal, value: SignalValue) {
    let which = with(|s| signal_name(s, signal));
    enter("hsa_signal_store_relaxed", format_args!("{which}, {value}"));
    with(|s| set_signal(s, signal, value));
}

pub(super) unsafe extern "C" fn hsa_signal_store_screlease(signal: Signal, value: SignalValue) {
    let (which, queue) = with(|s| {
        (
            signal_name(s, signal),
            s.signals
                .get((signal.handle - 0x5000) as usize)
                .and_then(|v| v.1),
        )
    });
    enter(
        "hsa_signal_store_screlease",
        format_args!("{which}, {value}"),
    );
    match queue {
        // SAFETY: the plugin rang this queue's doorbell for packet `value`.
        Some(q) => unsafe { process(q, value as u64) },
        None => with(|s| set_signal(s, signal, value)),
    }
}

pub(super) unsafe extern "C" fn hsa_signal_wait_scacquire(
    signal: Signal,
    condition: u32,
    compare_value: SignalValue,
    timeout_hint: u64,
    wait_state_hint: u32,
) -> SignalValue {
    let (which, value) = with(|s| {
        if let Some(n) = &mut s.done_after_waits {
            *n -= 1;
            if *n == 0 {
                s.done_after_waits = None;
                set_signal(s, signal, 0);
            }
        }
        let value = s
            .signals
            .get((signal.handle - 0x5000) as usize)
            .and_then(|v| v.0)
            .unwrap_or(-99);
        (signal_name(s, signal), value)
    });
    let state = match wait_state_hint {
        HSA_WAIT_STATE_ACTIVE => "ACTIVE",
        HSA_WAIT_STATE_BLOCKED => "BLOCKED",
        _ => "?",
    };
    let condition = match condition {
        HSA_SIGNAL_CONDITION_LT => "LT",
        _ => "?",
    };
    enter(
        "hsa_signal_wait_scacquire",
        format_args!("{which}, {condition} {compare_value}, {timeout_hint} ticks, {state}"),
    );
    result(format_args!("{value}"));
    value
}

pub(super) unsafe extern "C" fn hsa_queue_create(
    agent: Agent,
    size: u32,
    type_: u32,
    callback: Option<QueueCallback>,
    data: *mut c_void,
    private_segment_size: u32,
    group_segment_size: u32,
    queue: *mut *mut Queue,
) -> Status {
    let who = with(|s| agent_name(s, agent));
    let status = enter(
        "hsa_queue_create",
        format_args!(
            "{who}, {size} packets, type {type_}, callback {}, {private_segment_size:#x}, {group_segment_size:#x}",
            if callback.is_some() { "set" } else { "none" }
        ),
    );
    if status != HSA_STATUS_SUCCESS {
        return status;
    }
    let (made, index) = with(|s| {
        let index = s.queues.len();
        let doorbell = new_signal(s, 0, Some(index));
        let invalid = KernelDispatchPacket {
            header: HSA_PACKET_TYPE_INVALID,
            ..Default::default()
        };
        let ring = Box::into_raw(vec![invalid; size as usize].into_boxed_slice())
            .cast::<KernelDispatchPacket>();
        let queue = Box::into_raw(Box::new(Queue {
            type_,
            features: 1,
            base_address: ring.cast(),
            doorbell_signal: doorbell,
            size,
            reserved1: 0,
            id: index as u64,
        }));
        s.queues.push(FakeQueue {
            queue,
            ring,
            size,
            write: 0,
            read: 0,
            callback,
            data,
        });
        (queue, index)
    });
    // Its own index, taken with the push: another thread's queue may come next.
    result(format_args!("q{index}"));
    // SAFETY: the plugin passes a pointer to write the queue's address to.
    unsafe { *queue = made };
    HSA_STATUS_SUCCESS
}

pub(super) unsafe extern "C" fn hsa_queue_destroy(queue: *mut Queue) -> Status {
    let q = with(|s| queue_index(s, queue));
    enter("hsa_queue_destroy", format_args!("q{q}"))
}

pub(super) unsafe extern "C" fn hsa_queue_add_write_index_relaxed(
    queue: *const Queue,
    value: u64,
) -> u64 {
    let q = with(|s| queue_index(s, queue));
    enter(
        "hsa_queue_add_write_index_relaxed",
        format_args!("q{q}, {value}"),
    );
    let old = with(|s| {
        let fq = &mut s.queues[q];
        fq.write += value;
        fq.write - value
    });
    result(format_args!("{old}"));
    old
}

pub(super) unsafe extern "C" fn hsa_queue_load_read_index_scacquire(queue: *const Queue) -> u64 {
    let q = with(|s| queue_index(s, queue));
    enter("hsa_queue_load_read_index_scacquire", format_args!("q{q}"));
    let read = with(|s| s.queues[q].read);
    result(format_args!("{read}"));
    read
}

/// The packet processor: takes packet `index` of queue `q` (published, or it would not have been rung), records
/// it, waits for the others it should be in flight with (`together`), and completes it or fails the queue.
///
/// # Safety
/// The packet's kernarg address is a block of this machine.
unsafe fn process(q: usize, index: u64) {
    let (packet, kernargs, on_dispatch) = with(|s| {
        let fq = &mut s.queues[q];
        let slot = fq
            .ring
            .wrapping_add((index & (u64::from(fq.size) - 1)) as usize);
        // SAFETY: the slot is in the ring; the plugin wrote it before ringing, and writes it no more.
        let packet = unsafe { slot.read() };
        // SAFETY: as above; the processor marks a packet it took as free again.
        unsafe { (*slot).header = HSA_PACKET_TYPE_INVALID };
        fq.read = index + 1;
        let block = s
            .blocks
            .iter()
            .find(|b| b.start() == packet.kernarg_address as usize)
            .map(|b| {
                // SAFETY: the block's storage holds `len` bytes.
                unsafe { std::slice::from_raw_parts(b.storage.as_ptr().cast::<u8>(), b.len) }
                    .to_vec()
            })
            .unwrap_or_default();
        (packet, block, s.config.on_dispatch)
    });
    with(|s| {
        s.dispatched.push(Dispatched {
            queue: q,
            packet,
            kernargs,
        });
    });
    meet();
    match on_dispatch {
        OnDispatch::Complete => with(|s| set_signal(s, packet.completion_signal, 0)),
        OnDispatch::Hang => {}
        OnDispatch::QueueError(status) => {
            let (callback, data, queue) = with(|s| {
                let fq = &s.queues[q];
                (fq.callback, fq.data, fq.queue)
            });
            if let Some(callback) = callback {
                // SAFETY: the plugin's callback with its data, as the runtime calls it.
                unsafe { callback(status, queue, data) };
            }
        }
    }
}
