//! Plugins: vendor code only, one per kind of device, behind one interface, as in LLVM's plugin interface. A plugin
//! knows its driver and its devices; it neither prints nor decides what a failure means for a region.

// The plugins beside host-elf are cargo features (on by default): a host-only build compiles neither cudarc nor the
// coroutines. `gpu` is shared launch code the region layer uses for every device, so it is always built.
#[cfg(feature = "amdgpu")]
pub mod amdgpu;
#[cfg(feature = "cuda")]
pub mod cuda;
#[cfg(any(feature = "cuda", feature = "amdgpu"))]
pub mod discovery;
pub mod error;
pub mod gpu;
#[cfg(feature = "gpu-sim")]
pub mod gpu_sim;
pub mod host_code;
pub mod host_elf;
pub mod interface;
mod not_built;

pub use error::PluginError;
pub use interface::{
    Arg, Device, DeviceDescription, DeviceMemory, DevicePtr, Kernel, KernelArgs, LaunchLimits,
    LaunchParams, LoadedImage, LoadedImageOps, Plugin,
};

/// Every plugin this build knows, in device-number order: GPUs first, so the default device 0 is a GPU when there
/// is one, and the host-elf devices follow; gpu-sim, on only when `OFFLOAD_PLUGINS` names it, comes last, so it
/// numbers no other plugin's device differently.
/// A plugin compiled out (its cargo feature off) keeps its place and name, as [`not_built::NotBuilt`], so that
/// `OFFLOAD_PLUGINS` naming it is told why it has no devices.
pub fn all() -> Vec<Box<dyn Plugin>> {
    vec![
        #[cfg(feature = "cuda")]
        Box::new(cuda::Cuda),
        #[cfg(not(feature = "cuda"))]
        Box::new(not_built::CUDA),
        #[cfg(feature = "amdgpu")]
        Box::new(amdgpu::AmdGpu),
        #[cfg(not(feature = "amdgpu"))]
        Box::new(not_built::AMDGPU),
        Box::new(host_elf::HostElf),
        #[cfg(feature = "gpu-sim")]
        Box::new(gpu_sim::GpuSim),
        #[cfg(not(feature = "gpu-sim"))]
        Box::new(not_built::GPU_SIM),
    ]
}

pub use not_built::not_built;

#[cfg(test)]
mod tests {
    #[test]
    fn every_plugin_keeps_its_name_and_place_whatever_the_features() {
        let names: Vec<_> = super::all().iter().map(|p| p.name()).collect();
        assert_eq!(names, ["cuda", "amdgpu", "host-elf", "gpu-sim"]);
    }
}
