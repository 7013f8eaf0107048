//! `cuda`: NVIDIA GPUs through the CUDA driver API, like libomptarget's CUDA plugin. The driver is loaded at run time
//! by cudarc (`dynamic-loading`), so a binary built here runs where no NVIDIA driver is installed: the plugin then
//! reports no devices and says why.
//!
//! Layered as cudarc is: its `sys` (raw FFI) and `result` (each call a `Result<_, DriverError>`) underneath, and here
//! messages naming the driver call that failed and its error, in the [`PluginError`] of the device method. Every device uses its primary
//! context, made current on the calling thread at the start of each method (a region may be called from any host
//! thread). Each zero-fill, copy and launch runs on a lane (`lane`: a non-blocking stream with pinned staging) that
//! the calling thread holds alone for it, and waits for it, so threads (tasks) using one device overlap on it while
//! each thread's operations stay in order. Allocating and freeing use the driver's synchronous calls, which may wait
//! for the device: tasks that overlap map their data before (`target_data!`, `target_enter_data!`).
//!
//! A panic in region code traps, which leaves the context unusable; what panicked is read from the device's panic
//! record ([`offload_model::gpu_panic`]), which lives in mapped pinned host memory, so the host reads it without the
//! context. What region code prints goes to the device's print buffer ([`offload_model::device_print`]), mapped
//! pinned host memory too, drained after each launch.
//!
//! One file per concern: `device` (the context, memory and launches), `lane` (a stream and its staging buffer),
//! `image` (a loaded module), `rank` (which images
//! a device runs), `error` (what a failed call says), and `host_slot` (mapped host memory an image's global points
//! at, the GPU protocols' blocks, whose host sides are `plugin::gpu`'s).

use crate::plugin::discovery::{guarded, opened};
use crate::plugin::error::PluginError;
use crate::plugin::interface::{Device, Discovered, Plugin};
use cudarc::driver::result;
use cudarc::driver::sys;
use offload_model::device_kind::DeviceKind;

mod device;
mod error;
mod host_slot;
mod image;
mod lane;
mod rank;
#[cfg(test)]
mod tests;

use device::*;
use error::*;

pub struct Cuda;

/// Every driver entry point this plugin calls through cudarc. cudarc's `sys` resolves each on its first call and
/// panics when the library lacks it (an old driver), so discovery checks them all first: after that no call can
/// panic, even in a build with `panic = "abort"`.
const REQUIRED_SYMBOLS: &[&str] = &[
    "cuInit",
    "cuGetErrorString",
    "cuDeviceGetCount",
    "cuDeviceGet",
    "cuDeviceGetName",
    "cuDeviceGetAttribute",
    "cuDeviceTotalMem_v2",
    "cuDevicePrimaryCtxRetain",
    "cuCtxSetCurrent",
    "cuModuleLoadDataEx",
    "cuModuleGetFunction",
    "cuFuncGetAttribute",
    "cuFuncSetAttribute",
    "cuLaunchKernel",
    "cuStreamCreate",
    "cuStreamSynchronize",
    "cuStreamDestroy_v2",
    "cuEventCreate",
    "cuEventRecord",
    "cuEventSynchronize",
    "cuEventDestroy_v2",
    "cuMemAlloc_v2",
    "cuMemsetD8Async",
    "cuMemFree_v2",
    "cuMemcpyHtoDAsync_v2",
    "cuMemcpyDtoHAsync_v2",
    // The panic record and the print buffer (all in every driver since CUDA 3.2).
    "cuMemHostAlloc",
    "cuMemHostGetDevicePointer_v2",
    "cuMemFreeHost",
    "cuModuleGetGlobal_v2",
];

impl Plugin for Cuda {
    fn name(&self) -> &'static str {
        DeviceKind::Nvptx.plugin()
    }

    fn discover(&self) -> Result<Discovered, PluginError> {
        // The symbol check makes a panic impossible in practice; the guard catches one anyway (a cudarc change).
        if cfg!(miri) {
            // Miri interprets the host fallback; it cannot load a driver library.
            return Err(PluginError::Unavailable {
                reason: "not under Miri".into(),
            });
        }
        guarded("the CUDA driver library", discover_devices)
    }
}

/// The devices, or why there are none; a device that does not open is skipped with a note.
pub(super) fn discover_devices() -> Result<Discovered, PluginError> {
    let unavailable = |reason: String| PluginError::Unavailable { reason };
    // SAFETY: opens (and closes) the driver library by its usual names, which runs only its initialisers.
    if !unsafe { sys::is_culib_present() } {
        return Err(unavailable(
            "libcuda.so not found: no NVIDIA driver installed (or not on the library search path)"
                .into(),
        ));
    }
    // SAFETY: the library is present (checked above), so `culib` loads it instead of panicking; looking a symbol up
    // runs no code.
    let missing: Vec<&str> = REQUIRED_SYMBOLS
        .iter()
        .copied()
        .filter(|s| unsafe { sys::culib().get::<unsafe extern "C" fn()>(s.as_bytes()) }.is_err())
        .collect();
    if !missing.is_empty() {
        return Err(unavailable(format!(
            "the NVIDIA driver's libcuda.so lacks {}: the driver is too old",
            missing.join(", ")
        )));
    }
    result::init().map_err(|e| unavailable(fail("cuInit", e)))?;
    let count =
        result::device::get_count().map_err(|e| unavailable(fail("cuDeviceGetCount", e)))?;
    if count <= 0 {
        return Err(unavailable(
            "the NVIDIA driver reports no CUDA devices".into(),
        ));
    }
    let mut notes = Vec::new();
    let mut found = opened((0..count).map(|ordinal| {
        CudaDevice::open(ordinal)
            .map(|d| {
                for why in [d.panics.unrecorded(), d.prints.unprinted()]
                    .into_iter()
                    .flatten()
                {
                    notes.push(format!("CUDA device {ordinal}: {why}"));
                }
                Box::new(d) as Box<dyn Device>
            })
            .map_err(|reason| PluginError::Open {
                device: format!("CUDA device {ordinal}"),
                reason,
            })
    }))?;
    found.notes.extend(notes);
    Ok(found)
}
