//! Device memory and copies. Device memory comes from the GPU's coarse-grained pool, zero-filled. Copies go
//! through a staging buffer in fine-grained host memory the GPU can reach, in chunks: the CPU copies between the
//! caller's memory and the staging buffer, and the GPU's copy engine (`hsa_amd_memory_async_copy`, waited for on a
//! signal) between it and device memory. So any host memory works (read-only, stack, unaligned) without pinning
//! it, as LLVM's plugin does for transfers below its pinning threshold.

use super::discovery::AmdGpuDevice;
use super::error::Error;
use super::failure::Lost;
use super::safe::{self, HsaError, OwnedSignal, PoolBlock};
use super::sys::MemoryPool;
use std::ptr;

/// The staging buffer each device copies through, allocated on its first copy.
pub const STAGING_BYTES: usize = 4 << 20;

/// The staging buffer and the signal its copies complete, used under the device's staging mutex.
pub struct Staging {
    buffer: PoolBlock,
    signal: OwnedSignal,
}

impl AmdGpuDevice {
    /// Allocates `bytes` from `pool` and, for a pool of another agent (`grant`), lets this GPU use them.
    pub(super) fn allocate(
        &self,
        pool: MemoryPool,
        bytes: usize,
        grant: bool,
    ) -> Result<PoolBlock, HsaError> {
        let block = PoolBlock::allocate(self.hsa, pool, bytes)?;
        if grant {
            block.allow_access(self.agent)?;
        }
        Ok(block)
    }

    /// `size` bytes of device memory, zero-filled.
    pub(super) fn alloc_zeroed(&self, size: usize) -> Result<u64, Error> {
        // The zero-fill writes whole 32-bit words.
        let bytes = size
            .max(1)
            .checked_next_multiple_of(4)
            .ok_or(Error::TooLarge(size))?;
        let mut block = self
            .allocate(self.device_pool, bytes, false)
            .map_err(|source| Error::OutOfMemory {
                source,
                total: self.total_mem,
            })?;
        // Synchronous, so it is done before any later copy or launch.
        block.fill(0, bytes / 4)?;
        Ok(block.into_raw() as u64)
    }

    /// # Safety
    /// `ptr` came from [`AmdGpuDevice::alloc_zeroed`] and is not used afterwards.
    pub(super) unsafe fn free_memory(&self, ptr: u64) {
        // SAFETY: per the contract, a block given up by `alloc_zeroed`.
        unsafe { safe::free_raw(self.hsa, ptr as *mut u8) }
    }

    /// Copies `size` bytes between device memory and the staging buffer with the GPU's copy engine, and waits.
    ///
    /// # Safety
    /// One of `dst` and `src` is the staging buffer and the other `size` bytes of one allocation of this device;
    /// `size` is at most [`STAGING_BYTES`].
    unsafe fn engine_copy(
        &self,
        staging: &Staging,
        dst: *mut u8,
        src: *const u8,
        size: usize,
    ) -> Result<(), Error> {
        // Nothing else waits on the signal: the staging mutex is held.
        staging.signal.store_relaxed(1);
        // SAFETY: per the contract; this GPU can reach both buffers (the staging buffer by the access granted), and
        // both stay valid until the wait below says the copy is done.
        unsafe { safe::async_copy(self.hsa, self.agent, dst, src, size, &staging.signal) }?;
        match self.wait(&staging.signal, false) {
            Ok(()) => Ok(()),
            Err(Lost::Signal(value)) => Err(Error::CopyFailed { size, value }),
            Err(lost) => Err(Error::Lost(lost)),
        }
    }

    /// Runs `chunk(staging, offset, len)` over `size` bytes in staging-buffer-sized chunks, holding the staging
    /// buffer (made on first use) throughout; a copy of nothing needs none.
    fn staged(
        &self,
        size: usize,
        mut chunk: impl FnMut(&Staging, usize, usize) -> Result<(), Error>,
    ) -> Result<(), Error> {
        if size == 0 {
            return Ok(());
        }
        let mut guard = self.staging.lock().unwrap_or_else(|p| p.into_inner());
        let staging = match guard.take() {
            Some(s) => s,
            None => Staging {
                buffer: self.allocate(self.host_pool, STAGING_BYTES, true)?,
                signal: OwnedSignal::new(self.hsa, 1)?,
            },
        };
        let staging = guard.insert(staging);
        let mut done = 0;
        while done < size {
            let n = (size - done).min(STAGING_BYTES);
            chunk(staging, done, n)?;
            done += n;
        }
        Ok(())
    }

    /// # Safety
    /// `src` is readable for `size` bytes and `dst..dst+size` lies in one allocation of this device.
    pub(super) unsafe fn copy_in(
        &self,
        dst: u64,
        src: *const u8,
        size: usize,
    ) -> Result<(), Error> {
        self.staged(size, |staging, done, n| {
            // SAFETY: per the contract `src..src+size` is readable; the staging buffer holds STAGING_BYTES and is
            // ours while the mutex is held (the previous chunk's copy has completed).
            unsafe { ptr::copy_nonoverlapping(src.add(done), staging.buffer.as_ptr(), n) };
            let to = (dst as usize + done) as *mut u8;
            // SAFETY: `to..to+n` lies in the caller's device allocation; `n` fits the staging buffer.
            unsafe { self.engine_copy(staging, to, staging.buffer.as_ptr(), n) }
        })
    }

    /// # Safety
    /// `dst` is writable for `size` bytes and `src..src+size` lies in one allocation of this device.
    pub(super) unsafe fn copy_out(&self, dst: *mut u8, src: u64, size: usize) -> Result<(), Error> {
        self.staged(size, |staging, done, n| {
            let from = (src as usize + done) as *const u8;
            // SAFETY: `from..from+n` lies in the caller's device allocation; `n` fits the staging buffer.
            unsafe { self.engine_copy(staging, staging.buffer.as_ptr(), from, n) }?;
            // SAFETY: per the contract `dst..dst+size` is writable; the copy into the staging buffer has completed
            // (its signal was waited for with acquire ordering).
            unsafe { ptr::copy_nonoverlapping(staging.buffer.as_ptr(), dst.add(done), n) };
            Ok(())
        })
    }
}
