//! Plugins: vendor code only, one per kind of device, behind one interface, as in LLVM's plugin interface. A plugin
//! knows its driver and its devices; it neither prints nor decides what a failure means for a region.

pub mod amdgpu;
pub mod cuda;
pub mod discovery;
pub mod error;
pub mod gpu;
pub mod gpu_sim;
pub mod host_code;
pub mod host_elf;
pub mod interface;

pub use error::PluginError;
pub use interface::{
    Arg, Device, DeviceDescription, DeviceMemory, DevicePtr, Kernel, KernelArgs, LaunchLimits,
    LaunchParams, LoadedImage, LoadedImageOps, Plugin,
};

/// Every plugin this build knows, in device-number order: GPUs first, so the default device 0 is a GPU when there
/// is one, and the host-elf devices follow; gpu-sim, on only when `OFFLOAD_PLUGINS` names it, comes last, so it
/// numbers no other plugin's device differently.
pub fn all() -> Vec<Box<dyn Plugin>> {
    vec![
        Box::new(cuda::Cuda),
        Box::new(amdgpu::AmdGpu),
        Box::new(host_elf::HostElf),
        Box::new(gpu_sim::GpuSim),
    ]
}
