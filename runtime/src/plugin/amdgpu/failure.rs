//! How a failure of the GPU reaches the plugin, and what it tells the runtime. Failures of a kernel that started
//! arrive two ways, and both are watched while a launch or copy waits (in one-second slices, so a dead queue never
//! hangs the caller): the queue's error callback (a trap, which is what a panic in region code is, or an illegal
//! instruction; see [`super::safe::OwnedQueue`]), and the runtime's system events (a GPU memory fault or hardware
//! exception), for which the plugin registers [`on_system_event`] so they become an error of the region instead of
//! ROCr's `abort()`.

use super::discovery::AmdGpuDevice;
use super::safe::OwnedSignal;
use super::sys::*;
use std::ffi::c_void;
use std::fmt;
use std::sync::Mutex;

/// A GPU failure the runtime reported through a system event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    Memory { address: u64, reasons: u32 },
    Hardware { cause: u32 },
}

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

/// Why a dispatch (or a copy) did not finish; the device cannot be used any more.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lost {
    /// The queue's error callback reported this status; the queue is unusable.
    Queue(Status),
    /// The runtime reported a fault through a system event.
    Fault(Fault),
    /// The completion signal went negative: the runtime's way of failing a dispatch or an asynchronous copy.
    Signal(SignalValue),
}

impl fmt::Display for Lost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Lost::Queue(status) => {
                let name =
                    status_name(status).map_or_else(|| format!("HSA status {status:#x}"), String::from);
                match status {
                    HSA_STATUS_ERROR_EXCEPTION | HSA_STATUS_ERROR_ILLEGAL_INSTRUCTION => write!(
                        f,
                        "the kernel trapped ({name}): a panic in region code, such as an index out of bounds; the GPU \
                         does not report its message"
                    ),
                    HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION | HSA_STATUS_ERROR_MEMORY_FAULT => {
                        write!(f, "the kernel accessed an invalid device address ({name})")
                    }
                    HSA_STATUS_ERROR_OUT_OF_REGISTERS => write!(
                        f,
                        "the kernel needs more registers than the GPU has for its team size ({name}): use fewer \
                         threads per team"
                    ),
                    HSA_STATUS_ERROR_INVALID_PACKET_FORMAT => {
                        write!(f, "the GPU rejected the dispatch packet ({name})")
                    }
                    _ => write!(f, "the kernel failed ({name})"),
                }?;
                f.write_str("; the HSA queue is unusable, so the device is marked lost")
            }
            Lost::Fault(Fault::Memory { address, reasons }) => write!(
                f,
                "the kernel accessed an invalid device address (GPU memory fault at {address:#x}: {}); the device is \
                 marked lost",
                fault_reasons(reasons)
            ),
            Lost::Fault(Fault::Hardware { cause }) => write!(
                f,
                "the GPU stopped with a hardware exception ({}); the device is marked lost",
                match cause {
                    HSA_AMD_HW_EXCEPTION_CAUSE_ECC => "an ECC error",
                    HSA_AMD_HW_EXCEPTION_CAUSE_GPU_HANG => "the GPU hung and was reset",
                    _ => "of unknown cause",
                }
            ),
            Lost::Signal(value) => write!(
                f,
                "the dispatch's completion signal reads {value}; the device is marked lost"
            ),
        }
    }
}

/// Why a fault happened, from the reason bits of a memory fault.
fn fault_reasons(mask: u32) -> String {
    let names = [
        (HSA_AMD_MEMORY_FAULT_PAGE_NOT_PRESENT, "page not present"),
        (HSA_AMD_MEMORY_FAULT_READ_ONLY, "write to a read-only page"),
        (HSA_AMD_MEMORY_FAULT_NX, "execute on a no-execute page"),
        (HSA_AMD_MEMORY_FAULT_HOST_ONLY, "host-only page"),
        (HSA_AMD_MEMORY_FAULT_DRAMECC, "DRAM ECC error"),
        (HSA_AMD_MEMORY_FAULT_IMPRECISE, "imprecise address"),
        (HSA_AMD_MEMORY_FAULT_SRAMECC, "SRAM ECC error"),
        (HSA_AMD_MEMORY_FAULT_HANG, "GPU reset after a hang"),
    ];
    let found: Vec<&str> = names
        .iter()
        .filter(|(bit, _)| mask & bit != 0)
        .map(|&(_, n)| n)
        .collect();
    if found.is_empty() {
        format!("reason {mask:#x}")
    } else {
        found.join(", ")
    }
}

impl AmdGpuDevice {
    /// Waits until `signal` drops below 1, in slices, checking between them for a fault on this GPU and, for a
    /// dispatch (`queue`), for an error of its queue: a failure that leaves the signal unchanged ends the wait.
    pub(super) fn wait(&self, signal: &OwnedSignal, queue: bool) -> Result<(), Lost> {
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
            if queue {
                if let Some(s) = self.queue.error() {
                    return Err(Lost::Queue(s));
                }
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
    fn a_trap_is_a_panic_in_region_code() {
        for status in [
            HSA_STATUS_ERROR_EXCEPTION,
            HSA_STATUS_ERROR_ILLEGAL_INSTRUCTION,
        ] {
            let message = Lost::Queue(status).to_string();
            let name = status_name(status).unwrap();
            assert!(
                message.starts_with(&format!(
                    "the kernel trapped ({name}): a panic in region code, such as an index out of bounds; the GPU \
                     does not report its message"
                )),
                "{message}"
            );
        }
    }

    #[test]
    fn every_queue_error_names_the_status() {
        for status in [
            HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION,
            HSA_STATUS_ERROR_MEMORY_FAULT,
            HSA_STATUS_ERROR_OUT_OF_REGISTERS,
            HSA_STATUS_ERROR_INVALID_PACKET_FORMAT,
            HSA_STATUS_ERROR,
            0x7777,
        ] {
            let message = Lost::Queue(status).to_string();
            let name = status_name(status).map_or_else(|| format!("{status:#x}"), String::from);
            assert!(message.contains(&name), "{message}");
            assert!(
                message.ends_with("so the device is marked lost"),
                "{message}"
            );
        }
        assert!(Lost::Queue(HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION)
            .to_string()
            .starts_with("the kernel accessed an invalid device address"));
    }

    #[test]
    fn faults_name_the_address_and_reason() {
        let f = Lost::Fault(Fault::Memory {
            address: 0x7f00_1000,
            reasons: HSA_AMD_MEMORY_FAULT_PAGE_NOT_PRESENT | HSA_AMD_MEMORY_FAULT_IMPRECISE,
        })
        .to_string();
        assert!(
            f.contains("GPU memory fault at 0x7f001000: page not present, imprecise address"),
            "{f}"
        );
        let hang = Lost::Fault(Fault::Hardware {
            cause: HSA_AMD_HW_EXCEPTION_CAUSE_GPU_HANG,
        })
        .to_string();
        assert!(hang.contains("the GPU hung and was reset"), "{hang}");
        let ecc = Lost::Fault(Fault::Hardware {
            cause: HSA_AMD_HW_EXCEPTION_CAUSE_ECC,
        })
        .to_string();
        assert!(ecc.contains("an ECC error"), "{ecc}");
        assert_eq!(fault_reasons(0), "reason 0x0");
        assert_eq!(
            Lost::Signal(-1).to_string(),
            "the dispatch's completion signal reads -1; the device is marked lost"
        );
    }

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
