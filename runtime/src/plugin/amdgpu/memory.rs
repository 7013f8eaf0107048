//! Device memory and copies. Device memory comes from the GPU's coarse-grained pool, zero-filled. Copies go
//! through a staging buffer in fine-grained host memory the GPU can reach, in chunks: the CPU copies between the
//! caller's memory and the staging buffer, and the GPU's copy engine (`hsa_amd_memory_async_copy`, waited for on a
//! signal) between it and device memory. So any host memory works (read-only, stack, unaligned) without pinning
//! it, as LLVM's plugin does for transfers below its pinning threshold. Each staging buffer and its signal is a copy
//! lane (`plugin::gpu::lanes`): host threads copying at once each hold one, so their copies overlap.

use super::error::{Error, Lost};
use super::failure::Watcher;
use super::safe::{self, HsaError, OwnedSignal, PoolBlock};
use super::sys::{Agent, Hsa, MemoryPool};
use crate::plugin::gpu::lanes::{Lanes, LANES_PER_DEVICE};
use std::ptr;

/// The size of each staging buffer a device copies through (one per copy running at once, made when a copy finds
/// none idle).
pub const STAGING_BYTES: usize = 4 << 20;

/// Allocates `bytes` from `pool` and, for a pool of another agent (`grant`), lets GPU `agent` use them.
pub fn allocate(
    hsa: &'static Hsa,
    agent: Agent,
    pool: MemoryPool,
    bytes: usize,
    grant: bool,
) -> Result<PoolBlock, HsaError> {
    let block = PoolBlock::allocate(hsa, pool, bytes)?;
    if grant {
        block.allow_access(agent)?;
    }
    Ok(block)
}

/// A copy lane: a staging buffer and the signal its copies complete, used by one copy at a time (the lane's holder).
struct Staging {
    buffer: PoolBlock,
    signal: OwnedSignal,
}

/// One GPU's memory: allocations from its device pool, and copies through its staging buffers (a copy at a time
/// through each).
pub struct Memory {
    hsa: &'static Hsa,
    agent: Agent,
    /// Coarse-grained device memory: allocations.
    device_pool: MemoryPool,
    /// The device pool's size, for messages.
    total: usize,
    /// Fine-grained host memory the GPU can reach: the staging buffers.
    host_pool: MemoryPool,
    watcher: Watcher,
    staging: Lanes<Staging>,
}

impl Memory {
    /// The memory of GPU `agent`: device memory from `device_pool` (`total` bytes), copies through staging buffers
    /// from `host_pool` (the first made by the first copy), waited for with `watcher`.
    pub fn new(
        hsa: &'static Hsa,
        agent: Agent,
        device_pool: MemoryPool,
        total: usize,
        host_pool: MemoryPool,
        watcher: Watcher,
    ) -> Memory {
        Memory {
            hsa,
            agent,
            device_pool,
            total,
            host_pool,
            watcher,
            staging: Lanes::new(LANES_PER_DEVICE),
        }
    }

    /// `size` bytes of device memory, zero-filled.
    pub fn alloc_zeroed(&self, size: usize) -> Result<u64, Error> {
        // The zero-fill writes whole 32-bit words.
        let bytes = size
            .max(1)
            .checked_next_multiple_of(4)
            .ok_or(Error::TooLarge(size))?;
        let mut block =
            allocate(self.hsa, self.agent, self.device_pool, bytes, false).map_err(|source| {
                Error::OutOfMemory {
                    source,
                    total: self.total,
                }
            })?;
        // Synchronous, so it is done before any later copy or launch.
        block.fill(0, bytes / 4)?;
        Ok(block.into_raw() as u64)
    }

    /// # Safety
    /// `ptr` came from [`Memory::alloc_zeroed`] and is not used afterwards.
    pub unsafe fn free_memory(&self, ptr: u64) {
        // SAFETY: per the contract, a block given up by `alloc_zeroed`.
        unsafe { safe::free_raw(self.hsa, ptr as *mut u8) }
    }

    /// Copies `size` bytes between device memory and the staging buffer with the GPU's copy engine, and waits.
    ///
    /// # Safety
    /// One of `dst` and `src` is `staging`'s buffer and the other `size` bytes of one allocation of this GPU;
    /// `size` is at most [`STAGING_BYTES`]; the caller holds the lane `staging`.
    unsafe fn engine_copy(
        &self,
        staging: &Staging,
        dst: *mut u8,
        src: *const u8,
        size: usize,
    ) -> Result<(), Error> {
        // Nothing else waits on the signal: the lane is held.
        staging.signal.store_relaxed(1);
        // SAFETY: per the contract; this GPU can reach both buffers (the staging buffer by the access granted), and
        // both stay valid until the wait below says the copy is done.
        unsafe { safe::async_copy(self.hsa, self.agent, dst, src, size, &staging.signal) }?;
        match self.watcher.wait(&staging.signal, None) {
            Ok(()) => Ok(()),
            Err(Lost::Signal(value)) => Err(Error::CopyFailed { size, value }),
            Err(lost) => Err(Error::Lost(lost)),
        }
    }

    /// Runs `chunk(staging, offset, len)` over `size` bytes in staging-buffer-sized chunks, holding a copy lane (an
    /// idle one, or one made for it) throughout; a copy of nothing needs none.
    fn staged(
        &self,
        size: usize,
        mut chunk: impl FnMut(&Staging, usize, usize) -> Result<(), Error>,
    ) -> Result<(), Error> {
        if size == 0 {
            return Ok(());
        }
        let make = || -> Result<Staging, Error> {
            Ok(Staging {
                buffer: allocate(self.hsa, self.agent, self.host_pool, STAGING_BYTES, true)?,
                signal: OwnedSignal::new(self.hsa, 1)?,
            })
        };
        self.staging.with(make, |staging| {
            let mut done = 0;
            while done < size {
                let n = (size - done).min(STAGING_BYTES);
                chunk(staging, done, n)?;
                done += n;
            }
            Ok(())
        })?
    }

    /// # Safety
    /// `src` is readable for `size` bytes and `dst..dst+size` lies in one allocation of this GPU.
    pub unsafe fn copy_in(&self, dst: u64, src: *const u8, size: usize) -> Result<(), Error> {
        self.staged(size, |staging, done, n| {
            // SAFETY: per the contract `src..src+size` is readable; the staging buffer holds STAGING_BYTES and is
            // ours while its lane is held (the previous chunk's copy has completed).
            unsafe { ptr::copy_nonoverlapping(src.add(done), staging.buffer.as_ptr(), n) };
            let to = (dst as usize + done) as *mut u8;
            // SAFETY: `to..to+n` lies in the caller's device allocation; `n` fits the staging buffer, whose lane is
            // held.
            unsafe { self.engine_copy(staging, to, staging.buffer.as_ptr(), n) }
        })
    }

    /// # Safety
    /// `dst` is writable for `size` bytes and `src..src+size` lies in one allocation of this GPU.
    pub unsafe fn copy_out(&self, dst: *mut u8, src: u64, size: usize) -> Result<(), Error> {
        self.staged(size, |staging, done, n| {
            let from = (src as usize + done) as *const u8;
            // SAFETY: `from..from+n` lies in the caller's device allocation; `n` fits the staging buffer, whose lane
            // is held.
            unsafe { self.engine_copy(staging, staging.buffer.as_ptr(), from, n) }?;
            // SAFETY: per the contract `dst..dst+size` is writable; the copy into the staging buffer has completed
            // (its signal was waited for with acquire ordering).
            unsafe { ptr::copy_nonoverlapping(staging.buffer.as_ptr(), dst.add(done), n) };
            Ok(())
        })
    }
}
