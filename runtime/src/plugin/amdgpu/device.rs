//! One GPU as a device, composed of its parts: [`Loader`] (images and the kernel table), [`Dispatcher`] (launches,
//! on its launch lanes' queues), [`Memory`] (allocations and copies), [`PanicReports`] (the panic record) and
//! [`Prints`] (the print buffer), each in a [`HostGlobal`]. Discovery says what the GPU is; opening it makes the
//! runtime objects its parts own, the first launch lane's queue included (a GPU that cannot make one does not open).

use super::discovery::{self, Machine};
use super::dispatch::{Dispatcher, LaneMaker, Limits};
use super::error::Error;
use super::failure::{self, Watcher};
use super::host_global::HostGlobal;
use super::image::Loader;
use super::memory::Memory;
use super::sys::{Agent, Hsa};
use crate::plugin::gpu::{panic, panic::PanicReports, print, print::Prints};

/// One GPU. Host threads using it at once each launch on a lane of its dispatcher's and copy through a staging
/// buffer of its memory's, so their kernels and copies overlap.
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
    /// Released first: the launch lanes (each its signal, its kernel-argument buffer, then the queue they went to),
    /// then the staging buffers (none is left running anyway).
    pub dispatch: Dispatcher,
    /// Before the memory whose copies pointed the images at it; no dispatch that could write it runs any more. An
    /// image without the global (built before panic reports) runs as before, and a record that cannot be set up
    /// fails no load: the reason is kept, and a trap says it.
    pub panics: PanicReports<HostGlobal>,
    /// Likewise; a buffer that cannot be set up drops what region code prints.
    pub prints: Prints<HostGlobal>,
    pub memory: Memory,
}

impl AmdGpuDevice {
    /// Reads a GPU's properties, picks its memory pools and makes its first launch lane (a queue and its signal).
    pub fn open(
        hsa: &'static Hsa,
        ordinal: usize,
        gpu: Agent,
        machine: &Machine,
    ) -> Result<Self, Error> {
        let found = discovery::describe(hsa, gpu, machine)?;
        let maker = LaneMaker {
            hsa,
            agent: gpu,
            packets: found.queue_packets,
            kernarg_pool: found.kernarg_pool,
            kernarg_from_host: found.kernarg_from_host,
        };
        let first = maker.make()?;
        failure::watch(gpu);
        let watcher = Watcher::new(gpu, found.wait_ticks);
        let images = Loader::new(hsa, gpu, found.profile);
        Ok(AmdGpuDevice {
            ordinal,
            arch: found.arch,
            product: found.product,
            compute_units: found.compute_units,
            limits: found.limits,
            total_mem: found.total_mem,
            dispatch: Dispatcher::new(found.limits, images.kernels(), watcher, maker, first),
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
        })
    }

    /// `what` on this device: for messages.
    pub fn on(&self, what: impl std::fmt::Display) -> String {
        format!("{what} on AMD GPU {} ({})", self.ordinal, self.arch)
    }
}
