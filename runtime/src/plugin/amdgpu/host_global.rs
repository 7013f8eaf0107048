//! A block of fine-grained host memory the GPU may reach (a CPU agent's pool, access granted), which each loaded
//! image's global of a GPU protocol points at, so the host reads it whatever became of the queues: the panic record and
//! the print buffer, whose host sides are [`crate::plugin::gpu`]'s, reading the block through [`HostBlock`]. It is
//! allocated when the first image that has the global is loaded. An image without the global runs as before, and a
//! block that cannot be set up fails no load: the caller keeps the reason.

use super::error::Error;
use super::image::AmdGpuImage;
use super::memory::{allocate, Memory};
use super::safe::PoolBlock;
use super::sys::{Agent, Hsa, MemoryPool};
use crate::plugin::gpu::host_block::{HostBlock, Protocol};
use std::ffi::CString;
use std::ptr::NonNull;
use std::sync::{Mutex, MutexGuard};

pub struct HostGlobal {
    hsa: &'static Hsa,
    agent: Agent,
    /// Fine-grained host memory the GPU can reach.
    pool: MemoryPool,
    /// The global's name, the block's size, and how it is set up.
    protocol: Protocol,
    /// Allocated on first use, then kept (at its address) as long as `self`.
    block: Mutex<Option<PoolBlock>>,
}

impl HostGlobal {
    /// `protocol`'s block for GPU `agent`, from the host's fine-grained `pool`, which images' global of the protocol
    /// points at.
    pub fn new(
        hsa: &'static Hsa,
        agent: Agent,
        pool: MemoryPool,
        protocol: Protocol,
    ) -> HostGlobal {
        HostGlobal {
            hsa,
            agent,
            pool,
            protocol,
            block: Mutex::new(None),
        }
    }

    fn block(&self) -> MutexGuard<'_, Option<PoolBlock>> {
        // Each update is one assignment: a panic elsewhere cannot have left the block half-changed.
        self.block.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Points `image`'s global at the block (allocated first if need be), copying its address through `memory`;
    /// `Ok(false)` if the image has no such global.
    pub fn point(&self, image: &AmdGpuImage, memory: &Memory) -> Result<bool, Error> {
        let symbol = self.protocol.symbol;
        // No interior NUL: the symbol is a Rust identifier.
        let Ok(name) = CString::new(symbol) else {
            return Ok(false);
        };
        let Some(global) = image.variable(&name)? else {
            return Ok(false);
        };
        if global.size as usize != size_of::<u64>() {
            return Err(Error::NotAPointer {
                symbol: symbol.into(),
                size: global.size,
            });
        }
        let mut block = self.block();
        let block = match &mut *block {
            Some(b) => b,
            empty => {
                let bytes = self.protocol.bytes;
                let block = allocate(self.hsa, self.agent, self.pool, bytes, true)?;
                // SAFETY: a fresh block (page-aligned) of `bytes` bytes, which no one else knows of yet; zeroed, it is
                // what the protocol's `init` sets up.
                unsafe {
                    block.as_ptr().write_bytes(0, bytes);
                    self.protocol.init(block.as_non_null());
                }
                empty.insert(block)
            }
        };
        let address = block.as_ptr() as u64;
        // SAFETY: `address` is 8 readable bytes; the global is the 8 bytes the loader allocated for it in this GPU's
        // memory, which no dispatch uses yet (its image is being loaded).
        unsafe { memory.copy_in(global.address, (&raw const address).cast(), 8) }?;
        Ok(true)
    }
}

impl HostBlock for HostGlobal {
    fn host_address(&self) -> Option<NonNull<u8>> {
        self.block().as_ref().map(PoolBlock::as_non_null)
    }
}
