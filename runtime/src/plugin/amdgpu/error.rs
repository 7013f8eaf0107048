//! What goes wrong in the plugin below the device trait: an HSA call, or one of the plugin's own checks. The trait
//! glue (`mod.rs`) is the only place these become the trait's error type.
//!
//! The parts' own error values are here too, so that every part can name [`Error`] and none is named by it:
//! [`ImageError`] (an image the loader cannot be given), [`TooBig`] (a launch the GPU cannot take), and [`Lost`]
//! (a failure of the GPU, with the [`Fault`] a system event reported). This module names only `result` and `sys`.

use super::result::HsaError;
use super::sys::*;
use offload_model::fatbin::ImageFormat;
use std::fmt;

#[derive(Clone, Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Hsa(#[from] HsaError),
    #[error("the HSA runtime found no AMD GPU (no GPU agent that can dispatch kernels)")]
    NoGpu,
    #[error("the GPU has no coarse-grained memory pool to allocate device memory from")]
    NoDevicePool,
    #[error("no memory pool for kernel arguments (HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_KERNARG_INIT)")]
    NoKernargPool,
    #[error("no fine-grained host memory pool the GPU can reach, to copy through")]
    NoHostPool,
    #[error("cannot allocate {0} bytes")]
    TooLarge(usize),
    /// Device memory could not be allocated; `total`: the GPU's memory, for scale.
    #[error("{source} ({} MiB of device memory in all)", .total >> 20)]
    OutOfMemory { source: HsaError, total: usize },
    #[error("the copy of {size} bytes failed (hsa_amd_memory_async_copy's signal reads {value})")]
    CopyFailed { size: usize, value: SignalValue },
    /// A copy was ended by a failure of the GPU.
    #[error("{0}")]
    Lost(Lost),
    #[error(transparent)]
    Image(#[from] ImageError),
    #[error("the loaded executable does not validate (hsa_executable_validate reports {0:#x})")]
    Invalid(u32),
    /// A kernel symbol's properties could not be read.
    #[error("{source} for {symbol}")]
    Symbol { symbol: String, source: HsaError },
    #[error("{0} is not a kernel symbol")]
    NotAKernel(String),
    #[error("{0} is not a variable symbol")]
    NotAVariable(String),
    /// An image's global for the panic record or the print buffer is not a device address.
    #[error("the image's {symbol} is {size} bytes, not a device address")]
    NotAPointer { symbol: String, size: u32 },
    #[error("no kernel with handle {0}")]
    NoKernel(usize),
    #[error(
        "{why} (a launch of {teams} teams of {threads} threads with {team_shared} bytes of team-shared memory)"
    )]
    TooBig {
        why: TooBig,
        teams: u32,
        threads: u32,
        team_shared: usize,
    },
    #[error("the kernel-argument block is not 16-byte aligned")]
    MisalignedKernargs,
}

/// Why an image is not a code object the loader can be given.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ImageError {
    #[error("a {0} image is not an HSA code object")]
    Format(ImageFormat),
    #[error("the HSA code object is not an ELF file")]
    NotElf,
    #[error("the HSA code object is truncated: {0} bytes, less than an ELF header")]
    Truncated(usize),
    #[error("the HSA code object is not a 64-bit little-endian ELF file")]
    NotElf64Le,
    #[error("the code object is an ELF file for machine {0}, not AMDGPU (EM_AMDGPU = 224)")]
    Machine(u16),
}

/// What of a launch the GPU cannot take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TooBig {
    Threads {
        threads: u32,
        max: u32,
    },
    Teams {
        teams: u32,
        threads: u32,
        max_grid: u32,
    },
    TeamShared {
        team_shared: usize,
        static_lds: u32,
        max: u32,
    },
}

impl fmt::Display for TooBig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            TooBig::Threads { threads, max } => write!(
                f,
                "too many threads per team: {threads}, and the GPU allows {max}"
            ),
            TooBig::Teams {
                teams,
                threads,
                max_grid,
            } => write!(
                f,
                "too many teams: {teams} teams of {threads} threads are more work-items than the GPU's grid holds \
                 ({max_grid})"
            ),
            TooBig::TeamShared {
                team_shared,
                static_lds,
                max,
            } => write!(
                f,
                "the launch asks for {team_shared} bytes of team-shared memory and the kernel has {static_lds} bytes \
                 of static LDS; the GPU allows at most {max} bytes per team"
            ),
        }
    }
}

/// A GPU failure the runtime reported through a system event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    Memory { address: u64, reasons: u32 },
    Hardware { cause: u32 },
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
}
