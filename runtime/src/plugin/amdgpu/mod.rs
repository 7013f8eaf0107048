//! `amdgpu`: AMD GPUs through the ROCm HSA runtime, like libomptarget's AMDGPU plugin. `libhsa-runtime64.so.1` is
//! loaded at run time, so a binary built here runs where ROCm is not installed: the plugin then reports no devices
//! and says why.
//!
//! Layered as cudarc is:
//! - [`sys`]: the raw C interface: types, values, and the table of entry points, every one resolved before
//!   anything is called;
//! - [`result`]: one function per entry point, returning `Result<_, HsaError>` (the call, its status and the
//!   runtime's description of it);
//! - [`safe`]: owners of what the runtime makes (signals, queues, pool blocks, code object readers, executables)
//!   that release it on drop;
//! - the plugin, on the safe layer only, by concern: [`library`] (loading the runtime), [`discovery`] (agents,
//!   memory pools, what a GPU is), [`device`] (a GPU opened as a device, composed of the parts that follow),
//!   [`memory`] (allocation and staged copies), [`image`] (code objects, kernel and variable symbols), [`kernargs`]
//!   (the kernel-argument buffer), [`dispatch`] (launch checks, the dispatch packet, the queue),
//!   [`host_global`] (host memory an image's global points at: the panic record, which failed dispatches are read
//!   from, and the print buffer, drained after each launch, whose host sides are `plugin::gpu`'s), and [`failure`]
//!   (traps, faults, and waiting while watching for them), with its errors in [`error`];
//! - this file: the device trait's implementation (and its memory's), the only place the plugin's errors become
//!   the traits'.
//!
//! Imports point one way, down this list: this file; `library` and `device`; `discovery`; `dispatch`; `host_global`;
//! `kernargs`; `memory`; `image` and `failure`; `error`; `safe`; `result`; `sys`. For the
//! tests, `fake` (a fake HSA runtime) names `sys` only, and `tests` (the plugin against it), which only this file
//! declares, names what it needs.
//!
//! One device per GPU agent: device memory from the GPU's coarse-grained pool, and lanes (`plugin::gpu::lanes`) for
//! the host threads using it at once, so their work overlaps: a launch lane is an AQL queue with its completion
//! signal and kernel-argument buffer (host memory the GPU can reach), a copy lane a staging buffer copies go through
//! with its signal. Each launch and copy waits for its signal; the print buffer is drained while no dispatch runs.

mod device;
mod discovery;
mod dispatch;
mod error;
mod failure;
#[cfg(test)]
mod fake;
mod host_global;
mod image;
mod kernargs;
mod library;
mod memory;
mod result;
mod safe;
mod sys;
#[cfg(test)]
mod tests;

use self::device::AmdGpuDevice;
use self::dispatch::LaunchError;
use self::error::Error;
use self::image::AmdGpuImage;
use super::discovery::{guarded, opened};
use super::error::PluginError;
use super::interface::{
    Device, DeviceDescription, DeviceMemory, DevicePtr, Discovered, Global, Kernel, KernelArgs,
    LaunchLimits, LaunchParams, LoadedImage, LoadedImageOps, Plugin,
};
use crate::registry::Image;
use std::ffi::CStr;

pub struct AmdGpu;

impl Plugin for AmdGpu {
    fn name(&self) -> &'static str {
        "amdgpu"
    }

    fn discover(&self) -> Result<Discovered, PluginError> {
        // Nothing below panics by design; the guard catches one anyway.
        if cfg!(miri) {
            // Miri interprets the host fallback; it cannot load a driver library.
            return Err(unavailable("not under Miri"));
        }
        guarded("the HSA runtime", discover_devices)
    }
}

fn unavailable(reason: impl ToString) -> PluginError {
    PluginError::Unavailable {
        reason: reason.to_string(),
    }
}

fn discover_devices() -> Result<Discovered, PluginError> {
    let runtime = library::runtime().map_err(unavailable)?;
    let mut found = devices_of(&runtime.hsa)?;
    if let Some(e) = &runtime.no_event_handler {
        found
            .notes
            .push(format!("{e}; a GPU memory fault will abort the program"));
    }
    Ok(found)
}

/// The devices of an initialised runtime: one per GPU that opens, the others skipped with the reason.
fn devices_of(hsa: &'static sys::Hsa) -> Result<Discovered, PluginError> {
    let machine = discovery::machine(hsa).map_err(unavailable)?;
    opened(machine.gpus.iter().enumerate().map(|(ordinal, &agent)| {
        AmdGpuDevice::open(hsa, ordinal, agent, &machine)
            .map(|d| Box::new(d) as Box<dyn Device>)
            .map_err(|e| PluginError::Open {
                device: format!("AMD GPU {ordinal}"),
                reason: e.to_string(),
            })
    }))
}

impl Device for AmdGpuDevice {
    fn describe(&self) -> DeviceDescription {
        DeviceDescription {
            name: self.product.clone(),
            arch: self.arch.clone(),
            memory: self.total_mem as u64,
        }
    }

    fn rank(&self, image: &Image) -> Option<u32> {
        image::rank_for(&self.arch, image.triple, image.arch, image.format)
    }

    fn limits(&self) -> LaunchLimits {
        LaunchLimits {
            wide: dispatch::default_geometry(self.compute_units, self.limits.max_threads, true),
            narrow: dispatch::default_geometry(self.compute_units, self.limits.max_threads, false),
            ..crate::plugin::gpu::limits(
                self.compute_units,
                self.limits.max_threads,
                crate::plugin::gpu::GPU_LIMITS_WHY,
            )
        }
    }

    fn load_image(&self, image: &Image) -> Result<LoadedImage, PluginError> {
        let load = |reason: String| PluginError::Load { reason };
        let bytes =
            image::code_object(image.format, image.bytes).map_err(|e| load(e.to_string()))?;
        let loaded = self.images.load(bytes).map_err(|e| load(self.on(e)))?;
        // An image whose global cannot point at the record still runs; its panics trap without one.
        if let Err(e) = self.panics.block.point(&loaded, &self.memory) {
            self.panics.note_unpointed(self.on(e));
        }
        // Likewise for the print buffer: what its region code prints is dropped.
        if let Err(e) = self.prints.block.point(&loaded, &self.memory) {
            self.prints.note_unpointed(self.on(e));
        }
        Ok(Box::new(loaded))
    }

    fn memory(&self) -> &dyn DeviceMemory {
        self
    }

    fn take_printed(&self) -> (Vec<u8>, u64) {
        // SAFETY: each launch holds the dispatcher's `running` shared until its dispatch has ended (or failed).
        unsafe { self.prints.drain(self.dispatch.running()) }
    }

    unsafe fn launch(
        &self,
        kernel: Kernel,
        args: &KernelArgs,
        params: LaunchParams,
    ) -> Result<(), PluginError> {
        let LaunchParams {
            num_teams,
            num_threads,
            team_shared,
        } = params;
        // SAFETY: per the trait's contract the arguments match the kernel's parameters.
        unsafe {
            self.dispatch
                .run(kernel.0, args, num_teams, num_threads, team_shared)
        }
        .map_err(|e| match e {
            LaunchError::Refused(e) => PluginError::Launch { reason: self.on(e) },
            // The GPU failed: the device is lost. A panicking thread left its record, read once the launches
            // running beside this one (on other queues, which a trap on this one need not stop) have ended too.
            LaunchError::Lost(lost) => self.dispatch.between_launches(|| {
                // SAFETY: no dispatch runs: this one failed, and every other launch holds what this holds alone
                // until its dispatch has ended (or failed); takers are serialised by the record's own mutex.
                unsafe { self.panics.failure(lost.to_string()) }
            }),
        })
    }
}

impl DeviceMemory for AmdGpuDevice {
    fn alloc(&self, size: usize) -> Result<DevicePtr, PluginError> {
        self.memory.alloc_zeroed(size).map_err(|e| match e {
            Error::OutOfMemory { .. } => PluginError::OutOfMemory {
                bytes: size,
                detail: self.on(e),
            },
            e => PluginError::Alloc {
                bytes: size,
                reason: self.on(e),
            },
        })
    }

    unsafe fn free(&self, ptr: DevicePtr) {
        // SAFETY: per the trait's contract, `ptr` came from `alloc` of this device.
        unsafe { self.memory.free_memory(ptr) }
    }

    unsafe fn copy_to_device(
        &self,
        dst: DevicePtr,
        src: *const u8,
        size: usize,
    ) -> Result<(), PluginError> {
        // SAFETY: the trait's contract is `copy_in`'s.
        unsafe { self.memory.copy_in(dst, src, size) }.map_err(|e| self.transfer(true, size, e))
    }

    unsafe fn copy_from_device(
        &self,
        dst: *mut u8,
        src: DevicePtr,
        size: usize,
    ) -> Result<(), PluginError> {
        // SAFETY: the trait's contract is `copy_out`'s.
        unsafe { self.memory.copy_out(dst, src, size) }.map_err(|e| self.transfer(false, size, e))
    }
}

impl AmdGpuDevice {
    /// A failed copy: the GPU's failure makes the device lost; anything else is the copy's.
    fn transfer(&self, to_device: bool, bytes: usize, e: Error) -> PluginError {
        match e {
            Error::Lost(lost) => PluginError::Trap {
                message: lost.to_string(),
            },
            e => PluginError::Transfer {
                to_device,
                bytes,
                reason: self.on(e),
            },
        }
    }
}

impl LoadedImageOps for AmdGpuImage {
    /// Not a usable kernel: its regions run on the host, and the runtime says why where someone watches.
    fn kernel(&self, symbol: &CStr) -> Result<Option<Kernel>, PluginError> {
        self.find(symbol)
            .map(|found| found.map(Kernel))
            .map_err(|e| PluginError::Lookup {
                symbol: symbol.to_string_lossy().into_owned(),
                reason: e.to_string(),
            })
    }

    fn global(&self, symbol: &CStr) -> Result<Option<Global>, PluginError> {
        self.variable(symbol)
            .map(|found| {
                found.map(|v| Global {
                    address: v.address,
                    size: Some(v.size as usize),
                })
            })
            .map_err(|e| PluginError::Lookup {
                symbol: symbol.to_string_lossy().into_owned(),
                reason: e.to_string(),
            })
    }
}
