//! Finding the GPUs, and what a device is made from: each GPU's properties and limits, and the memory pools it uses.
//!
//! One device per GPU agent that can dispatch kernels. Each has device memory from the GPU's coarse-grained pool and
//! two kinds of host memory from a CPU agent's fine-grained pools the GPU may reach: kernel-argument blocks (a
//! kernarg pool, as LLVM's plugin uses; else the GPU's own) and staging buffers for copies.

use super::dispatch::Limits;
use super::error::Error;
use super::image::base_arch;
use super::safe::{agent, info, system_get_info, HsaError};
use super::sys::*;

/// Packets in each of a device's queues (fewer if the agent allows fewer). A queue's launches wait for each other,
/// so one would do; this is what the runtime would round small sizes up to anyway.
const QUEUE_PACKETS: u32 = 1024;

/// Local data share per workgroup where the agent reports no group-segment pool: 64 KiB on every GCN, CDNA and
/// RDNA GPU.
const DEFAULT_LDS_BYTES: u32 = 64 * 1024;

/// A memory pool and the properties the plugin chooses by.
#[derive(Clone, Copy, Debug)]
pub struct Pool {
    pool: MemoryPool,
    segment: u32,
    flags: u32,
    alloc_allowed: bool,
    size: usize,
}

impl Pool {
    fn is_global(&self) -> bool {
        self.segment == HSA_AMD_SEGMENT_GLOBAL
    }
    /// A global pool with `flag`, from which the plugin may allocate.
    fn allocatable(&self, flag: u32) -> bool {
        self.is_global() && self.flags & flag != 0 && self.alloc_allowed
    }
}

/// The memory pools of `agent`.
fn pools_of(hsa: &Hsa, agent: Agent) -> Result<Vec<Pool>, HsaError> {
    agent::iterate_memory_pools(hsa, agent)?
        .into_iter()
        .map(|pool| {
            let segment = agent::pool_info(hsa, pool, info::SEGMENT)?;
            let (flags, alloc_allowed) = if segment == HSA_AMD_SEGMENT_GLOBAL {
                (
                    agent::pool_info(hsa, pool, info::GLOBAL_FLAGS)?,
                    agent::pool_info(hsa, pool, info::RUNTIME_ALLOC_ALLOWED)? != 0,
                )
            } else {
                (0, false)
            };
            Ok(Pool {
                pool,
                segment,
                flags,
                alloc_allowed,
                size: agent::pool_info(hsa, pool, info::SIZE)?,
            })
        })
        .collect()
}

/// Whether `agent` may use buffers of `pool` (possibly after `hsa_amd_agents_allow_access`).
fn can_access(hsa: &Hsa, agent: Agent, pool: MemoryPool) -> bool {
    agent::pool_access_info(hsa, agent, pool, info::ACCESS)
        .is_ok_and(|a| a != HSA_AMD_MEMORY_POOL_ACCESS_NEVER_ALLOWED)
}

/// What the runtime shows of the machine: its GPUs and the host's memory pools.
pub struct Machine {
    pub gpus: Vec<Agent>,
    host_pools: Vec<Pool>,
    /// A wait slice (one second), in timestamp ticks.
    wait_ticks: u64,
}

/// Finds the GPU agents that can dispatch kernels and the CPU agents' memory pools.
pub fn machine(hsa: &Hsa) -> Result<Machine, Error> {
    let mut gpus = Vec::new();
    let mut host_pools = Vec::new();
    for a in agent::iterate(hsa)? {
        match agent::get_info(hsa, a, info::DEVICE)? {
            HSA_DEVICE_TYPE_GPU => {
                let features = agent::get_info(hsa, a, info::FEATURE)?;
                if features & HSA_AGENT_FEATURE_KERNEL_DISPATCH != 0 {
                    gpus.push(a);
                }
            }
            HSA_DEVICE_TYPE_CPU => host_pools.extend(pools_of(hsa, a)?),
            _ => {}
        }
    }
    if gpus.is_empty() {
        return Err(Error::NoGpu);
    }
    // Waits are hinted in timestamp ticks: one second's worth (a guess where the runtime does not say).
    let wait_ticks = match system_get_info(hsa, info::TIMESTAMP_FREQUENCY) {
        Ok(f) if f != 0 => f,
        _ => 1_000_000_000,
    };
    Ok(Machine {
        gpus,
        host_pools,
        wait_ticks,
    })
}

/// A NUL-terminated name in a fixed buffer (`char[64]` attributes).
pub fn c_name(buf: &[u8]) -> String {
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).trim().to_string()
}

/// The queue size: [`QUEUE_PACKETS`] within the agent's limits, a power of two as `hsa_queue_create` requires.
pub fn queue_size(min: u32, max: u32) -> u32 {
    let wanted = QUEUE_PACKETS.min(max.max(1));
    // The largest power of two not above `wanted`.
    let size = 1u32 << (31 - wanted.leading_zeros());
    size.max(min.max(1).checked_next_power_of_two().unwrap_or(1 << 31))
}

/// One GPU as discovery finds it: its properties and limits, and the memory pools its device uses.
pub struct Gpu {
    /// `gfx90a`: the processor images are built for.
    pub arch: String,
    pub product: String,
    pub profile: u32,
    pub compute_units: u32,
    pub limits: Limits,
    /// Packets in each of its queues (see [`queue_size`]).
    pub queue_packets: u32,
    pub total_mem: usize,
    /// Coarse-grained device memory: allocations.
    pub device_pool: MemoryPool,
    /// Kernel-argument blocks; `kernarg_from_host`: a CPU agent's pool, which the GPU needs access granted to.
    pub kernarg_pool: MemoryPool,
    pub kernarg_from_host: bool,
    /// Fine-grained host memory the GPU can reach: the staging buffers.
    pub host_pool: MemoryPool,
    /// A wait slice, in timestamp ticks.
    pub wait_ticks: u64,
}

/// Reads a GPU's properties and picks its memory pools.
pub fn describe(hsa: &Hsa, gpu: Agent, machine: &Machine) -> Result<Gpu, Error> {
    let get = |attribute| agent::get_info(hsa, gpu, attribute);
    let arch = base_arch(&c_name(&agent::get_info(hsa, gpu, info::NAME)?)).to_string();
    let product = agent::get_info(hsa, gpu, info::PRODUCT_NAME)
        .map(|n| c_name(&n))
        .unwrap_or_default();
    let profile = get(info::PROFILE)?;
    let compute_units = get(info::COMPUTE_UNIT_COUNT)?;
    let max_size = get(info::WORKGROUP_MAX_SIZE)?;
    let max_dim = agent::get_info(hsa, gpu, info::WORKGROUP_MAX_DIM)?;
    let grid = agent::get_info(hsa, gpu, info::GRID_MAX_DIM)?;
    let queue_min = get(info::QUEUE_MIN_SIZE)?;
    let queue_max = get(info::QUEUE_MAX_SIZE)?;
    let max_threads = max_size.min(u32::from(max_dim[0])).max(1);

    let own = pools_of(hsa, gpu)?;
    let device = own
        .iter()
        .find(|p| p.allocatable(HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED))
        .ok_or(Error::NoDevicePool)?;
    let lds_bytes = own
        .iter()
        .find(|p| p.segment == HSA_AMD_SEGMENT_GROUP)
        .map_or(DEFAULT_LDS_BYTES, |p| {
            u32::try_from(p.size).unwrap_or(u32::MAX)
        });
    // A host pool is checked for access last: the query is a runtime call, made only for a pool that would do.
    let host = |flag| {
        machine
            .host_pools
            .iter()
            .find(|p| p.allocatable(flag) && can_access(hsa, gpu, p.pool))
    };
    let (kernarg_pool, kernarg_from_host) = match host(HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_KERNARG_INIT)
    {
        Some(p) => (p.pool, true),
        None => (
            own.iter()
                .find(|p| p.allocatable(HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_KERNARG_INIT))
                .ok_or(Error::NoKernargPool)?
                .pool,
            false,
        ),
    };
    let host_pool = host(HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED)
        .ok_or(Error::NoHostPool)?
        .pool;
    Ok(Gpu {
        arch,
        product,
        profile,
        compute_units: compute_units.max(1),
        limits: Limits {
            max_threads,
            max_grid: grid.x.max(1),
            lds_bytes,
        },
        queue_packets: queue_size(queue_min, queue_max),
        total_mem: device.size,
        device_pool: device.pool,
        kernarg_pool,
        kernarg_from_host,
        host_pool,
        wait_ticks: machine.wait_ticks,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queues_are_a_power_of_two_within_the_agents_limits() {
        assert_eq!(queue_size(64, 131_072), 1024);
        assert_eq!(queue_size(64, 512), 512);
        assert_eq!(queue_size(64, 1000), 512);
        assert_eq!(queue_size(4096, 131_072), 4096);
        assert_eq!(queue_size(0, 0), 1);
        assert_eq!(queue_size(u32::MAX, u32::MAX), 1 << 31);
    }

    #[test]
    fn names_end_at_the_first_nul() {
        let mut buf = [0u8; 64];
        buf[..6].copy_from_slice(b"gfx90a");
        assert_eq!(c_name(&buf), "gfx90a");
        assert_eq!(c_name(b"gfx942"), "gfx942");
    }
}
