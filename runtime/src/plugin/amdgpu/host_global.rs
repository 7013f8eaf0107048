//! A block of fine-grained host memory the GPU may reach (a CPU agent's pool, access granted), which each loaded
//! image's global of a given name points at, so the host reads it whatever became of the queue: the panic record
//! ([`super::panic`]) and the print buffer ([`super::print`]). It is allocated when the first image that has the
//! global is loaded. An image without the global runs as before, and a block that cannot be set up fails no load:
//! the reason is kept.

use super::error::Error;
use super::image::AmdGpuImage;
use super::memory::{allocate, Memory};
use super::safe::PoolBlock;
use super::sys::{Agent, Hsa, MemoryPool};
use std::ffi::CString;
use std::sync::Mutex;

/// Allocated on first use; used under its mutex.
struct State {
    block: Option<PoolBlock>,
    /// Why an image's global may not point at the block: the first reason.
    unset: Option<String>,
}

pub struct HostGlobal {
    hsa: &'static Hsa,
    agent: Agent,
    /// Fine-grained host memory the GPU can reach.
    pool: MemoryPool,
    /// The global's name.
    symbol: &'static str,
    bytes: usize,
    /// Sets up a fresh block: it is given `bytes` of zeroed memory, page-aligned, that no one else knows of.
    init: unsafe fn(*mut u8),
    state: Mutex<State>,
}

impl HostGlobal {
    /// `bytes` of memory for GPU `agent` from the host's fine-grained `pool`, set up by `init` (given them zeroed,
    /// page-aligned and unshared), which images' global `symbol` points at.
    pub fn new(
        hsa: &'static Hsa,
        agent: Agent,
        pool: MemoryPool,
        symbol: &'static str,
        bytes: usize,
        init: unsafe fn(*mut u8),
    ) -> HostGlobal {
        HostGlobal {
            hsa,
            agent,
            pool,
            symbol,
            bytes,
            init,
            state: Mutex::new(State {
                block: None,
                unset: None,
            }),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // Each update is one assignment: a panic elsewhere cannot have left the state half-changed.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Points `image`'s global at the block (allocated first if need be), copying its address through `memory`;
    /// `Ok(false)` if the image has no such global.
    pub fn point(&self, image: &AmdGpuImage, memory: &Memory) -> Result<bool, Error> {
        // No interior NUL: the symbol is a Rust identifier.
        let Ok(name) = CString::new(self.symbol) else {
            return Ok(false);
        };
        let Some(global) = image.variable(&name)? else {
            return Ok(false);
        };
        if global.size as usize != size_of::<u64>() {
            return Err(Error::NotAPointer {
                symbol: self.symbol.into(),
                size: global.size,
            });
        }
        let mut state = self.state();
        let block = match &mut state.block {
            Some(b) => b,
            empty => {
                let block = allocate(self.hsa, self.agent, self.pool, self.bytes, true)?;
                // SAFETY: a fresh block (page-aligned) of `bytes` bytes, which no one else knows of yet; zeroed, then
                // set up by `init` as its contract says.
                unsafe {
                    block.as_ptr().write_bytes(0, self.bytes);
                    (self.init)(block.as_ptr());
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

    /// Notes the first reason an image's global may not point at the block.
    pub fn note_unset(&self, why: String) {
        self.state().unset.get_or_insert(why);
    }

    /// Why an image's global may not point at the block, if it may not.
    pub fn unset(&self) -> Option<String> {
        self.state().unset.clone()
    }

    /// `f` of the block, under the mutex (so one caller at a time), if it has been allocated.
    pub fn with<R>(&self, f: impl FnOnce(*mut u8) -> R) -> Option<R> {
        let state = self.state();
        state.block.as_ref().map(|b| f(b.as_ptr()))
    }
}
