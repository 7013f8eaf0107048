//! What the GPU plugins share. What a GPU launch is, shared by the CUDA plugin and gpu-sim, which stands in for it:
//! what a driver does with CUDA's `kernelParams` (gpu-sim's [`unpack`]) and the default geometry and limits of a
//! launch (here). And, shared by the CUDA and AMD plugins and gpu-sim, the host sides of the GPU protocols, each written
//! once over how a plugin gets at the host memory its images point at ([`host_block`]): the panic record, taken and
//! reset after a failed launch and turned into its failure ([`panic`](mod@panic)), and the print buffer, drained
//! after each launch ([`print`](mod@print)). And the CUDA and AMD plugins' pools of [`lanes`]: a stream or queue
//! per host thread using a device at once, so that tasks overlap on one GPU.

// A build with some of the GPU plugins (cargo features) leaves parts of what they share unused, which parts depending
// on the set; the full set, the default, still has every item checked for use.
#![cfg_attr(
    not(all(feature = "cuda", feature = "amdgpu", feature = "gpu-sim")),
    allow(dead_code)
)]

// Each part is built with the plugins that use it; the geometry below is the region layer's too, always built.
#[cfg(any(feature = "cuda", feature = "amdgpu", feature = "gpu-sim"))]
pub mod host_block;
#[cfg(any(feature = "cuda", feature = "amdgpu"))]
pub mod lanes;
#[cfg(any(feature = "cuda", feature = "amdgpu", feature = "gpu-sim"))]
pub mod panic;
#[cfg(any(feature = "cuda", feature = "amdgpu", feature = "gpu-sim"))]
pub mod print;

#[cfg(feature = "gpu-sim")]
use super::interface::Arg;
use super::interface::LaunchLimits;
#[cfg(feature = "gpu-sim")]
use std::ffi::c_void;

/// What a driver does with [`KernelArgs::pointers`](super::KernelArgs::pointers): copies each parameter's 8 bytes;
/// `(dyn_ptr, args)`.
///
/// # Safety
/// `params` came from [`KernelArgs::pointers`](super::KernelArgs::pointers), whose arguments are still alive.
#[cfg(feature = "gpu-sim")]
pub unsafe fn unpack(params: &[*mut c_void]) -> (u64, Vec<Arg>) {
    // SAFETY: per the contract, each pointer points to 8 live bytes (the first an initialised `u64`).
    unsafe {
        (
            params[0].cast::<u64>().read(),
            params[1..].iter().map(|p| p.cast::<Arg>().read()).collect(),
        )
    }
}

/// The most threads a block has on every NVIDIA and AMD GPU we build for (a device may say so itself).
pub const MAX_BLOCK_THREADS: u32 = 1024;

pub use super::interface::MAX_LAUNCH_BLOCKS;

/// (teams, threads per team) of a launch on a GPU of `multiprocessors` whose clauses leave them open: a construct of
/// wide teams (`Construct::wide_teams`: `teams, parallel`, `parallel_for`) gets a block of 256 threads per
/// multiprocessor; a work-shared teams loop is a grid-stride loop, with enough blocks of 128 to fill every
/// multiprocessor several times over.
pub fn default_geometry(multiprocessors: u32, wide: bool) -> (u32, u32) {
    if wide {
        (multiprocessors, 256)
    } else {
        (multiprocessors.saturating_mul(8), 128)
    }
}

/// Why a GPU launch gets at most its device's teams and threads, where the plugin says no more.
pub const GPU_LIMITS_WHY: (&str, &str) = (
    "the most teams the device takes in a launch",
    "the most threads the device takes in a team",
);

/// The launch limits of a GPU of `multiprocessors` taking `max_threads` threads per block: [`default_geometry`],
/// at most [`MAX_LAUNCH_BLOCKS`] blocks, and the arguments CUDA's `kernelParams` passes (no count of its own).
pub fn limits(
    multiprocessors: u32,
    max_threads: u32,
    why: (&'static str, &'static str),
) -> LaunchLimits {
    LaunchLimits {
        wide: default_geometry(multiprocessors, true),
        narrow: default_geometry(multiprocessors, false),
        max_teams: MAX_LAUNCH_BLOCKS,
        max_threads,
        max_args: usize::MAX,
        why,
    }
}

#[cfg(all(test, feature = "gpu-sim"))]
mod tests {
    use super::*;
    use crate::plugin::KernelArgs;
    use std::mem::MaybeUninit;

    #[test]
    fn arguments_come_out_as_they_went_in() {
        let args: Vec<Arg> = [7u64, u64::MAX, 0].map(MaybeUninit::new).to_vec();
        let packed = KernelArgs::from(&args[..]);
        let params = packed.pointers();
        assert_eq!(params.len(), 4);
        // SAFETY: `packed` is alive.
        let (d, out) = unsafe { unpack(&params) };
        assert_eq!(d, 0, "no plugin passes a dynamic pointer");
        // SAFETY: every argument here is initialised.
        let out: Vec<u64> = out.iter().map(|a| unsafe { a.assume_init() }).collect();
        assert_eq!(out, [7, u64::MAX, 0]);
    }
}
