//! What goes wrong in the plugin below the device trait: an HSA call, or one of the plugin's own checks. The trait
//! glue (`mod.rs`) is the only place these become the trait's error type.

use super::dispatch::TooBig;
use super::failure::Lost;
use super::image::ImageError;
use super::result::HsaError;
use super::sys::SignalValue;

#[derive(Clone, Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Hsa(#[from] HsaError),
    #[error("the HSA runtime found no AMD GPU (no GPU agent that can dispatch kernels)")]
    NoGpu,
    #[error("the GPU has no coarse-grained memory pool to allocate device memory from")]
    NoDevicePool,
    #[error("no memory pool for kernel arguments (HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_KERNARG_INIT)")]
    NoKernargPool,
    #[error("no fine-grained host memory pool the GPU can reach, to copy through")]
    NoHostPool,
    #[error("cannot allocate {0} bytes")]
    TooLarge(usize),
    /// Device memory could not be allocated; `total`: the GPU's memory, for scale.
    #[error("{source} ({} MiB of device memory in all)", .total >> 20)]
    OutOfMemory { source: HsaError, total: usize },
    #[error("the copy of {size} bytes failed (hsa_amd_memory_async_copy's signal reads {value})")]
    CopyFailed { size: usize, value: SignalValue },
    /// A copy was ended by a failure of the GPU.
    #[error("{0}")]
    Lost(Lost),
    #[error(transparent)]
    Image(#[from] ImageError),
    #[error("the loaded executable does not validate (hsa_executable_validate reports {0:#x})")]
    Invalid(u32),
    /// A kernel symbol's properties could not be read.
    #[error("{source} for {symbol}")]
    Symbol { symbol: String, source: HsaError },
    #[error("{0} is not a kernel symbol")]
    NotAKernel(String),
    #[error("no kernel with handle {0}")]
    NoKernel(usize),
    #[error(
        "{why} (a launch of {teams} teams of {threads} threads with {team_shared} bytes of team-shared memory)"
    )]
    TooBig {
        why: TooBig,
        teams: u32,
        threads: u32,
        team_shared: usize,
    },
    #[error("the kernel-argument block is not 16-byte aligned")]
    MisalignedKernargs,
}
