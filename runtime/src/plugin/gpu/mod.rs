//! What the GPU plugins share. What a GPU launch is, shared by the CUDA plugin and gpu-sim, which stands in for it:
//! how kernel arguments are packed (CUDA's `kernelParams`) and the geometry of a launch whose clauses leave it open
//! (here). And, shared by the CUDA and AMD plugins and gpu-sim, the host sides of the GPU protocols, each written
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

#[cfg(any(feature = "cuda", feature = "gpu-sim"))]
use super::interface::Arg;
#[cfg(any(feature = "cuda", feature = "gpu-sim"))]
use std::ffi::c_void;

/// CUDA's `kernelParams` for the calling convention `(dyn_ptr, a0, .., ak)`: a pointer to each parameter's 8 bytes,
/// `dyn_ptr` first. Whoever launches copies the bytes each points to (the driver, or gpu-sim's [`unpack`]); they
/// are never read as numbers here (a small by-value argument's padding is uninitialised).
#[cfg(any(feature = "cuda", feature = "gpu-sim"))]
pub fn kernel_params(dyn_ptr: &u64, args: &[Arg]) -> Vec<*mut c_void> {
    let mut params: Vec<*mut c_void> = Vec::with_capacity(args.len() + 1);
    params.push((dyn_ptr as *const u64).cast_mut().cast());
    params.extend(args.iter().map(|a| a.as_ptr().cast_mut().cast::<c_void>()));
    params
}

/// What a driver does with [`kernel_params`]: copies each parameter's 8 bytes; `(dyn_ptr, args)`.
///
/// # Safety
/// `params` came from [`kernel_params`], whose `dyn_ptr` and arguments are still alive.
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

#[cfg(all(test, feature = "gpu-sim"))]
mod tests {
    use super::*;
    use std::mem::MaybeUninit;

    #[test]
    fn arguments_come_out_as_they_went_in() {
        let args: Vec<Arg> = [7u64, u64::MAX, 0].map(MaybeUninit::new).to_vec();
        let dyn_ptr = 0x1000;
        let params = kernel_params(&dyn_ptr, &args);
        assert_eq!(params.len(), 4);
        // SAFETY: `dyn_ptr` and `args` are alive.
        let (d, out) = unsafe { unpack(&params) };
        assert_eq!(d, 0x1000);
        // SAFETY: every argument here is initialised.
        let out: Vec<u64> = out.iter().map(|a| unsafe { a.assume_init() }).collect();
        assert_eq!(out, [7, u64::MAX, 0]);
    }
}
