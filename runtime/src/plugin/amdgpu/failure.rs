//! How a failure of the GPU reaches the plugin (what it tells the runtime is [`super::error::Lost`]). Failures of a
//! kernel that started arrive two ways, and both are watched while a launch or copy waits (in one-second slices, so
//! a dead queue never hangs the caller): the queue's error callback (a trap, which is what a panic in region code
//! is, or an illegal instruction; see [`super::safe::OwnedQueue`]), and the runtime's system events (a GPU memory
//! fault or hardware exception), for which the plugin registers [`on_system_event`] so they become an error of the
//! region instead of ROCr's `abort()`. A [`Watcher`] does these waits for the parts of a device that wait.

use super::error::{Fault, Lost};
use super::safe::{OwnedQueue, OwnedSignal};
use super::sys::*;
use std::ffi::c_void;
use std::sync::Mutex;

/// The agents of this plugin's devices, and the first fault the runtime reported for each.
struct SystemEvents {
    agents: Vec<u64>,
    faults: Vec<(u64, Fault)>,
}

static EVENTS: Mutex<SystemEvents> = Mutex::new(SystemEvents {
    agents: Vec::new(),
    faults: Vec::new(),
});

fn events() -> std::sync::MutexGuard<'static, SystemEvents> {
    // Each update is one push: a panic elsewhere cannot have left the lists half-changed.
    EVENTS.lock().unwrap_or_else(|p| p.into_inner())
}

/// Claims the system events of `agent`, a GPU this plugin drives.
pub fn watch(agent: Agent) {
    events().agents.push(agent.handle);
}

/// The first fault reported for `agent`.
pub fn fault_of(agent: Agent) -> Option<Fault> {
    events()
        .faults
        .iter()
        .find(|(a, _)| *a == agent.handle)
        .map(|&(_, f)| f)
}

/// The runtime's system event handler (it runs on the runtime's event thread). A memory fault or hardware exception
/// on one of this plugin's GPUs is recorded for the launch or copy waiting on it, and claimed (`SUCCESS`), which
/// keeps ROCr from aborting the process; anything else is left to the runtime's default handling.
pub unsafe extern "C" fn on_system_event(event: *const SystemEvent, _data: *mut c_void) -> Status {
    if event.is_null() {
        return HSA_STATUS_ERROR;
    }
    // SAFETY: the runtime passes a valid event for the duration of the call.
    let event = unsafe { &*event };
    let (agent, fault) = match event.event_type {
        // SAFETY: the event type says which member of the union the runtime wrote.
        HSA_AMD_GPU_MEMORY_FAULT_EVENT => unsafe {
            let m = event.data.memory_fault;
            (
                m.agent,
                Fault::Memory {
                    address: m.virtual_address,
                    reasons: m.fault_reason_mask,
                },
            )
        },
        // SAFETY: as above.
        HSA_AMD_GPU_HW_EXCEPTION_EVENT => unsafe {
            let h = event.data.hw_exception;
            (
                h.agent,
                Fault::Hardware {
                    cause: h.reset_cause,
                },
            )
        },
        _ => return HSA_STATUS_ERROR,
    };
    let mut events = events();
    if !events.agents.contains(&agent.handle) {
        return HSA_STATUS_ERROR;
    }
    if !events.faults.iter().any(|(a, _)| *a == agent.handle) {
        events.faults.push((agent.handle, fault));
    }
    HSA_STATUS_SUCCESS
}

/// What a wait on one GPU watches for: its faults, and (for a dispatch) its queue's errors. Copied into each part of
/// the device that waits.
#[derive(Clone, Copy, Debug)]
pub struct Watcher {
    agent: Agent,
    /// A wait slice, in timestamp ticks.
    wait_ticks: u64,
}

impl Watcher {
    /// Waits on `agent`, in slices of `wait_ticks`; its system events are claimed by [`watch`].
    pub fn new(agent: Agent, wait_ticks: u64) -> Watcher {
        Watcher { agent, wait_ticks }
    }

    /// Waits until `signal` drops below 1, in slices, checking between them for a fault on this GPU and, for a
    /// dispatch, for an error of its `queue`: a failure that leaves the signal unchanged ends the wait.
    pub fn wait(&self, signal: &OwnedSignal, queue: Option<&OwnedQueue>) -> Result<(), Lost> {
        // A short kernel or copy is done within a millisecond: spin that long, then sleep in one-second slices.
        let mut slice = (self.wait_ticks / 1000).max(1);
        let mut state = HSA_WAIT_STATE_ACTIVE;
        loop {
            let value = signal.wait_below(1, slice, state);
            (slice, state) = (self.wait_ticks, HSA_WAIT_STATE_BLOCKED);
            if value == 0 {
                return Ok(());
            }
            if value < 0 {
                return Err(Lost::Signal(value));
            }
            if let Some(s) = queue.and_then(OwnedQueue::error) {
                return Err(Lost::Queue(s));
            }
            if let Some(f) = fault_of(self.agent) {
                return Err(Lost::Fault(f));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_first_fault_of_a_watched_gpu_is_kept() {
        let gpu = Agent { handle: 0x3001 };
        let event = |address| SystemEvent {
            event_type: HSA_AMD_GPU_MEMORY_FAULT_EVENT,
            data: SystemEventData {
                memory_fault: MemoryFaultInfo {
                    agent: gpu,
                    virtual_address: address,
                    fault_reason_mask: 0,
                },
            },
        };
        // SAFETY: valid events for the calls' duration.
        unsafe {
            assert_eq!(
                on_system_event(&event(1), std::ptr::null_mut()),
                HSA_STATUS_ERROR
            );
            watch(gpu);
            assert_eq!(
                on_system_event(&event(2), std::ptr::null_mut()),
                HSA_STATUS_SUCCESS
            );
            assert_eq!(
                on_system_event(&event(3), std::ptr::null_mut()),
                HSA_STATUS_SUCCESS
            );
            assert_eq!(
                on_system_event(std::ptr::null(), std::ptr::null_mut()),
                HSA_STATUS_ERROR
            );
        }
        assert_eq!(
            fault_of(gpu),
            Some(Fault::Memory {
                address: 2,
                reasons: 0
            })
        );
    }
}
