//! One GPU as a device, composed of its parts: [`Loader`] (images and the kernel table), [`Dispatcher`] (launches),
//! [`Memory`] (allocations and copies), [`PanicReports`] (the panic record) and [`Prints`] (the print buffer), each
//! in a [`HostGlobal`], and the queue the dispatcher launches on. Discovery says what the GPU is; opening it makes the runtime objects its parts own.

use super::discovery::{self, Machine};
use super::dispatch::{Dispatcher, Limits};
use super::error::Error;
use super::failure::{self, Watcher};
use super::host_global::HostGlobal;
use super::image::Loader;
use super::kernargs::Kernargs;
use super::memory::Memory;
use super::safe::{OwnedQueue, OwnedSignal};
use super::sys::{Agent, Hsa};
use crate::plugin::gpu::{panic, panic::PanicReports, print, print::Prints};

/// One GPU. Launches are serialised by its dispatcher, copies by its memory's staging buffer.
pub struct AmdGpuDevice {
    /// The GPU's position among the runtime's GPU agents, for messages.
    pub ordinal: usize,
    /// `gfx90a`: the processor images are built for.
    pub arch: String,
    pub product: String,
    pub compute_units: u32,
    pub limits: Limits,
    pub total_mem: usize,
    pub images: Loader,
    /// Released first: the launch state (its signal and kernel-argument buffer), then the staging buffer, then the
    /// queue the dispatches went to (none is left running anyway).
    pub dispatch: Dispatcher,
    /// Before the memory whose copies pointed the images at it; no dispatch that could write it runs any more. An
    /// image without the global (built before panic reports) runs as before, and a record that cannot be set up
    /// fails no load: the reason is kept, and a trap says it.
    pub panics: PanicReports<HostGlobal>,
    /// Likewise; a buffer that cannot be set up drops what region code prints.
    pub prints: Prints<HostGlobal>,
    pub memory: Memory,
    /// Last, so it is destroyed after the launch state that dispatched to it.
    pub queue: OwnedQueue,
}

impl AmdGpuDevice {
    /// Reads a GPU's properties, picks its memory pools and creates its queue and launch signal.
    pub fn open(
        hsa: &'static Hsa,
        ordinal: usize,
        gpu: Agent,
        machine: &Machine,
    ) -> Result<Self, Error> {
        let found = discovery::describe(hsa, gpu, machine)?;
        let queue = OwnedQueue::new(hsa, gpu, found.queue_packets)?;
        let signal = OwnedSignal::new(hsa, 0)?;
        failure::watch(gpu);
        let watcher = Watcher::new(gpu, found.wait_ticks);
        let images = Loader::new(hsa, gpu, found.profile);
        let kernargs = Kernargs::new(hsa, gpu, found.kernarg_pool, found.kernarg_from_host);
        Ok(AmdGpuDevice {
            ordinal,
            arch: found.arch,
            product: found.product,
            compute_units: found.compute_units,
            limits: found.limits,
            total_mem: found.total_mem,
            dispatch: Dispatcher::new(found.limits, images.kernels(), watcher, signal, kernargs),
            images,
            panics: PanicReports::new(
                HostGlobal::new(hsa, gpu, found.host_pool, panic::PROTOCOL),
                None,
            ),
            prints: Prints::new(
                HostGlobal::new(hsa, gpu, found.host_pool, print::PROTOCOL),
                None,
            ),
            memory: Memory::new(
                hsa,
                gpu,
                found.device_pool,
                found.total_mem,
                found.host_pool,
                watcher,
            ),
            queue,
        })
    }

    /// `what` on this device: for messages.
    pub fn on(&self, what: impl std::fmt::Display) -> String {
        format!("{what} on AMD GPU {} ({})", self.ordinal, self.arch)
    }
}
