//! One GPU's panic record ([`offload_model::gpu_panic`]): a [`PanicRecord`] in fine-grained host memory the GPU may
//! reach (a CPU agent's pool, access granted), so the host reads it whatever became of the queue. It is allocated
//! when the first image that has the record's global is loaded, and each such image's global is pointed at it;
//! after a failed dispatch the plugin takes it. An image without the global (built before panic reports) runs as
//! before, and a record that cannot be set up fails no load: the reason is kept, and a trap says it.

use super::error::Error;
use super::image::AmdGpuImage;
use super::memory::{allocate, Memory};
use super::safe::PoolBlock;
use super::sys::{Agent, Hsa, MemoryPool};
use offload_model::gpu_panic::{self, PanicRecord, Taken};
use std::ffi::CString;
use std::sync::Mutex;

/// Allocated on first use; used under its mutex (loads and failed dispatches of the GPU's threads).
struct State {
    record: Option<PoolBlock>,
    /// Why a panic may trap without its record: the first reason.
    unrecorded: Option<String>,
}

pub struct PanicRecords {
    hsa: &'static Hsa,
    agent: Agent,
    /// Fine-grained host memory the GPU can reach.
    pool: MemoryPool,
    state: Mutex<State>,
}

impl PanicRecords {
    /// The record of GPU `agent`, to be allocated from the host's fine-grained `pool`.
    pub fn new(hsa: &'static Hsa, agent: Agent, pool: MemoryPool) -> PanicRecords {
        PanicRecords {
            hsa,
            agent,
            pool,
            state: Mutex::new(State {
                record: None,
                unrecorded: None,
            }),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // Each update is one assignment: a panic elsewhere cannot have left the state half-changed.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Points `image`'s panic-record global at the record (allocated first if need be), copying its address through
    /// `memory`; `Ok(false)` if the image has no such global.
    pub fn point(&self, image: &AmdGpuImage, memory: &Memory) -> Result<bool, Error> {
        // No interior NUL: the symbol is a Rust identifier.
        let Ok(name) = CString::new(gpu_panic::SYMBOL) else {
            return Ok(false);
        };
        let Some(global) = image.variable(&name)? else {
            return Ok(false);
        };
        if global.size as usize != size_of::<u64>() {
            return Err(Error::NotAPointer {
                symbol: gpu_panic::SYMBOL.into(),
                size: global.size,
            });
        }
        let mut state = self.state();
        let record = match &mut state.record {
            Some(r) => r,
            empty => {
                let block = allocate(
                    self.hsa,
                    self.agent,
                    self.pool,
                    size_of::<PanicRecord>(),
                    true,
                )?;
                // SAFETY: a fresh block (page-aligned) of the record's size, which no one else knows of yet.
                unsafe {
                    block
                        .as_ptr()
                        .cast::<PanicRecord>()
                        .write(PanicRecord::new())
                };
                empty.insert(block)
            }
        };
        let address = record.as_ptr() as u64;
        // SAFETY: `address` is 8 readable bytes; the global is the 8 bytes the loader allocated for it in this GPU's
        // memory, which no dispatch uses yet (its image is being loaded).
        unsafe { memory.copy_in(global.address, (&raw const address).cast(), 8) }?;
        Ok(true)
    }

    /// Notes the first reason a panic may trap without its record.
    pub fn note_unrecorded(&self, why: String) {
        self.state().unrecorded.get_or_insert(why);
    }

    /// Why a panic may trap without its record, if it may.
    pub fn unrecorded(&self) -> Option<String> {
        self.state().unrecorded.clone()
    }

    /// What the record holds after a failed dispatch, if a thread wrote it; the record is reset for the next.
    pub fn take(&self) -> Option<Taken> {
        let state = self.state();
        let record = state.record.as_ref()?;
        // SAFETY: the record lives while `self` does; the dispatch that could write it has ended (it failed, and
        // the GPU's launches are serialised), and takers are serialised by the mutex.
        unsafe { gpu_panic::take(record.as_ptr().cast()) }
    }
}
