//! What a failed driver call says: the call's name and the driver's own words, and a launch failure's stage.

use crate::plugin::error::PluginError;
use cudarc::driver::result::DriverError;
use cudarc::driver::sys::CUresult;

/// `<call> failed: <error>`.
pub(super) fn fail(call: &str, e: DriverError) -> String {
    format!("{call} failed: {}", describe(e))
}

/// The error's name and the driver's description of it: `CUDA_ERROR_OUT_OF_MEMORY (out of memory)`. Only called
/// once discovery has checked the driver's symbols.
pub(super) fn describe(e: DriverError) -> String {
    match e.error_string() {
        Ok(s) => format!("{:?} ({})", e.0, s.to_string_lossy()),
        Err(_) => format!("{:?}", e.0),
    }
}

/// Where a launch failed: the driver refused it, or the kernel started and failed.
#[derive(Clone, Copy, PartialEq, Debug)]
pub(super) enum Stage {
    Launch,
    Wait,
}

/// Turns a launch's error into what the runtime reports. Errors that mean the kernel started and died leave the
/// context unusable (CUDA fails every later call in it with the same error), so the device is lost; a launch the
/// driver refused (its configuration) leaves it usable. `config` describes the launch, for refusals.
pub(super) fn launch_failure(code: CUresult, stage: Stage, config: &str) -> PluginError {
    use CUresult::*;
    let name = format!("{code:?}");
    let died = match code {
        CUDA_ERROR_ILLEGAL_INSTRUCTION => Some(format!(
            "the kernel trapped ({name}): a panic in region code, such as an index out of bounds; the GPU does not \
             report its message"
        )),
        CUDA_ERROR_ILLEGAL_ADDRESS => Some(format!(
            "the kernel accessed an invalid device address ({name})"
        )),
        CUDA_ERROR_MISALIGNED_ADDRESS => Some(format!(
            "the kernel made a misaligned memory access ({name})"
        )),
        CUDA_ERROR_HARDWARE_STACK_ERROR => Some(format!(
            "the kernel overflowed its stack ({name}): deep recursion or large locals in region code"
        )),
        CUDA_ERROR_ASSERT => Some(format!("a device-side assertion failed ({name})")),
        CUDA_ERROR_LAUNCH_TIMEOUT => Some(format!(
            "the kernel ran too long and the display watchdog stopped it ({name})"
        )),
        CUDA_ERROR_LAUNCH_FAILED | CUDA_ERROR_INVALID_PC | CUDA_ERROR_INVALID_ADDRESS_SPACE => {
            Some(format!("the kernel failed ({name})"))
        }
        // The kernel started: whatever stopped it, the context cannot be trusted any more.
        _ if stage == Stage::Wait => Some(format!("waiting for the kernel failed ({name})")),
        _ => None,
    };
    match died {
        Some(message) => PluginError::Trap {
            message: format!(
                "{message}; the CUDA context is unusable, so the device is marked lost"
            ),
        },
        None => {
            let hint = match code {
                CUDA_ERROR_INVALID_VALUE => ": an invalid launch configuration",
                CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES => {
                    ": too many threads per team for the registers the kernel needs"
                }
                _ => "",
            };
            PluginError::Launch {
                reason: format!("cuLaunchKernel failed: {name}{hint} ({config})"),
            }
        }
    }
}
