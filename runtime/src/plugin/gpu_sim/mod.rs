//! `gpu-sim`: a simulated GPU on the host, like LLVM's virtual GPU plugin (D113359), so the GPU lowering runs on
//! every machine. Its images are the GPU lowering compiled for the host (`OFFLOAD_TARGETS=host,gpu-sim`: grid-stride
//! loop shares, reductions through team-shared slots, the panic record); it runs a launch as a GPU does
//! ([`grid`]): a grid of blocks, each block's threads all live at once, switched at barriers, with the block's
//! dynamic shared memory sized at launch, separate device memory, the CUDA plugin's default geometry and argument
//! packing, and launches from different host threads (tasks) side by side, as on CUDA streams. Only `OFFLOAD_PLUGINS`
//! turns it on.

mod grid;
mod stacks;

use crate::plugin::error::PluginError;
use crate::plugin::gpu::host_block::{HostBlock, PlainBlock, Protocol};
use crate::plugin::gpu::{self, panic, panic::PanicReports, print, print::Prints};
use crate::plugin::host_code::image;
use crate::plugin::host_code::memory::{physical_memory, HostMemory};
use crate::plugin::interface::{
    Device, DeviceDescription, DeviceMemory, Discovered, Kernel, KernelArgs, LaunchLimits,
    LaunchParams, LoadedImage, Plugin,
};
use crate::registry::Image;
use offload_model::device_kind::{triple_arch, DeviceKind, GPU_SIM_ARCH};
use offload_model::fatbin::ImageFormat;
use offload_model::gpu_panic::{self, PanicRecord};
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::RwLock;

pub struct GpuSim;

/// The simulated GPU: a small one, so a test's default launch (8 blocks per multiprocessor of 128 threads) stays
/// quick on a 2-core machine, with CUDA's per-block limits.
const MULTIPROCESSORS: u32 = 8;
/// CUDA's most threads per block.
const MAX_THREADS: u32 = 1024;
/// An H100's most shared memory per block (with the opt-in the CUDA plugin sets).
const MAX_SHARED: usize = 227 * 1024;
/// What `cudaMalloc` aligns to.
const ALIGN: usize = 256;

impl Plugin for GpuSim {
    fn name(&self) -> &'static str {
        DeviceKind::GpuSim.plugin()
    }

    fn on_by_default(&self) -> bool {
        false
    }

    fn discover(&self) -> Result<Discovered, PluginError> {
        if cfg!(miri) {
            return Err(PluginError::Unavailable {
                reason: "not under Miri".into(),
            });
        }
        Ok(Discovered {
            devices: vec![Box::new(GpuSimDevice {
                // Aligned as `cudaMalloc` aligns, and no more.
                memory: HostMemory::new(crate::env::icv().host_memory, ALIGN, ALIGN),
                // Never freed: images keep their addresses for the life of the process, as devices live.
                panics: PanicReports::new(PlainBlock::new(&panic::PROTOCOL), None),
                prints: Prints::new(PlainBlock::new(&print::PROTOCOL), None),
                streams: RwLock::new(()),
            })],
            notes: Vec::new(),
        })
    }
}

struct GpuSimDevice {
    memory: HostMemory,
    /// The panic record every image of this device points at: plain host memory, which the host reads after a
    /// launch as it reads a GPU's mapped pinned memory; written by kernels through this address alone.
    panics: PanicReports<PlainBlock>,
    /// The print buffer every image of this device points at (`offload::println!`), drained after each launch;
    /// plain host memory, as the record.
    prints: Prints<PlainBlock>,
    /// Shared by running launches, which run side by side (each host thread's launches are a stream of their own);
    /// held alone to drain the print buffer, which no kernel may write meanwhile. Each launch has a panic record of
    /// its own (`HostLaunchEnv::panic_record`), so two that trap together each report their own panic; the image's
    /// record (`panics`) is only for images whose threads cannot find their launch's.
    streams: RwLock<()>,
}

/// Points the image's global of `protocol` (offload-device's `AtomicPtr`) at `block`, as the CUDA plugin sets a
/// module's global; whether the image has it.
///
/// # Safety
/// `block` outlives the image (which is never unloaded).
unsafe fn point_global(so: &image::SharedObject, protocol: &Protocol, block: &PlainBlock) -> bool {
    let name = std::ffi::CString::new(protocol.symbol).unwrap_or_default();
    let global = so.symbol(&name).cast::<AtomicPtr<u8>>();
    let (false, Some(target)) = (global.is_null(), block.host_address()) else {
        return false;
    };
    // SAFETY: the symbol is offload-device's `AtomicPtr` global, alive as long as the image; `block` per the
    // contract.
    unsafe { (*global).store(target.as_ptr(), Ordering::Release) };
    true
}

// SAFETY: the record and the print buffer are only accessed through their protocols (atomic claims, a writer at a time,
// the host reading them with `streams` held alone); everything else in the device is `Send + Sync`.
unsafe impl Send for GpuSimDevice {}
unsafe impl Sync for GpuSimDevice {}

impl Device for GpuSimDevice {
    fn describe(&self) -> DeviceDescription {
        DeviceDescription {
            name: format!(
                "a simulated GPU on the host ({MULTIPROCESSORS} multiprocessors, up to {MAX_THREADS} threads per \
                 block; only when OFFLOAD_PLUGINS names gpu-sim)"
            ),
            arch: GPU_SIM_ARCH.into(),
            memory: physical_memory(),
        }
    }

    fn rank(&self, image: &Image) -> Option<u32> {
        (DeviceKind::of_image(image.triple, image.arch) == Some(DeviceKind::GpuSim)
            && triple_arch(image.triple) == std::env::consts::ARCH
            && image.triple.contains(std::env::consts::OS)
            && image.format == ImageFormat::SharedObject)
            .then_some(1)
    }

    fn limits(&self) -> LaunchLimits {
        LaunchLimits {
            // Its kernels are called as host code: at most as many arguments as host-elf's.
            max_args: crate::plugin::host_code::call::MAX_ARGS,
            ..gpu::limits(
                MULTIPROCESSORS,
                MAX_THREADS,
                (
                    "the most blocks gpu-sim takes in a launch",
                    "CUDA's most threads per block",
                ),
            )
        }
    }

    /// Loads the shared object and points its panic record global at the device's record, as the CUDA plugin sets
    /// a module's global.
    fn load_image(&self, image: &Image) -> Result<LoadedImage, PluginError> {
        let so = image::load(image)?;
        // SAFETY: the record is never freed.
        let record = unsafe { point_global(&so, &panic::PROTOCOL, &self.panics.block) };
        if !record {
            return Err(PluginError::Load {
                reason: format!(
                    "the gpu-sim image of {} has no `{}`: it was built by an older offload; rebuild it",
                    image.package,
                    panic::PROTOCOL.symbol
                ),
            });
        }
        // An image without the print buffer's global (an older build) drops what it prints.
        // SAFETY: the buffer is never freed.
        unsafe { point_global(&so, &print::PROTOCOL, &self.prints.block) };
        Ok(Box::new(so))
    }

    fn memory(&self) -> &dyn DeviceMemory {
        &self.memory
    }

    fn take_printed(&self) -> (Vec<u8>, u64) {
        // SAFETY: each launch holds `streams` shared while its kernel runs.
        unsafe { self.prints.drain(&self.streams) }
    }

    unsafe fn launch(
        &self,
        kernel: Kernel,
        args: &KernelArgs,
        params: LaunchParams,
    ) -> Result<(), PluginError> {
        let (blocks, threads) = (params.num_teams, params.num_threads);
        if params.team_shared > MAX_SHARED {
            return Err(PluginError::Launch {
                reason: format!(
                    "{blocks} blocks of {threads} threads with {} bytes of shared memory; gpu-sim allows {MAX_THREADS} \
                     threads and {MAX_SHARED} bytes of shared memory per block",
                    params.team_shared
                ),
            });
        }
        // The arguments go through CUDA's `kernelParams` and come out as the driver copies them.
        let packed = args.pointers();
        // SAFETY: `args` outlives the call.
        let (_, args) = unsafe { gpu::unpack(&packed) };
        // This launch's own panic record: launches running side by side keep their panics apart.
        let mut record = PanicRecord::new();
        let trapped = {
            let _stream = self.streams.read().unwrap_or_else(|p| p.into_inner());
            // SAFETY: per the trait's contract; the record outlives the grid.
            unsafe {
                grid::run(
                    kernel,
                    &args,
                    grid::Shape {
                        blocks,
                        threads,
                        shared: params.team_shared,
                        record: &raw mut record as usize,
                    },
                )
            }
        }?;
        if !trapped {
            return Ok(());
        }
        // SAFETY: the grid has finished; nothing else knows this record.
        let taken = unsafe { gpu_panic::take(&raw mut record) };
        // The simulated device's memory survives a trap, so the device stays usable.
        Err(PluginError::from_panic_record(taken, false, || {
            PluginError::Panic {
                message: "the kernel trapped without a panic record".into(),
                location: None,
                thread: None,
                lost: false,
            }
        }))
    }
}
