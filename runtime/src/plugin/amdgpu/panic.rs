//! One GPU's panic record ([`offload_model::gpu_panic`]): a [`PanicRecord`] in a [`HostGlobal`], each image's
//! [`gpu_panic::SYMBOL`] pointing at it; after a failed dispatch the plugin takes it. An image without the global
//! (built before panic reports) runs as before, and a record that cannot be set up fails no load: the reason is
//! kept, and a trap says it.

use super::error::Error;
use super::host_global::HostGlobal;
use super::image::AmdGpuImage;
use super::memory::Memory;
use super::sys::{Agent, Hsa, MemoryPool};
use offload_model::gpu_panic::{self, PanicRecord, Taken};

pub struct PanicRecords(HostGlobal);

/// Sets up a fresh record.
///
/// # Safety
/// `p` is a record's bytes, page-aligned, that no one else knows of.
unsafe fn init(p: *mut u8) {
    // SAFETY: per the contract.
    unsafe { p.cast::<PanicRecord>().write(PanicRecord::new()) }
}

impl PanicRecords {
    /// The record of GPU `agent`, to be allocated from the host's fine-grained `pool`.
    pub fn new(hsa: &'static Hsa, agent: Agent, pool: MemoryPool) -> PanicRecords {
        PanicRecords(HostGlobal::new(
            hsa,
            agent,
            pool,
            gpu_panic::SYMBOL,
            size_of::<PanicRecord>(),
            init,
        ))
    }

    /// Points `image`'s panic-record global at the record (allocated first if need be), copying its address through
    /// `memory`; `Ok(false)` if the image has no such global.
    pub fn point(&self, image: &AmdGpuImage, memory: &Memory) -> Result<bool, Error> {
        self.0.point(image, memory)
    }

    /// Notes the first reason a panic may trap without its record.
    pub fn note_unrecorded(&self, why: String) {
        self.0.note_unset(why)
    }

    /// Why a panic may trap without its record, if it may.
    pub fn unrecorded(&self) -> Option<String> {
        self.0.unset()
    }

    /// What the record holds after a failed dispatch, if a thread wrote it; the record is reset for the next.
    pub fn take(&self) -> Option<Taken> {
        self.0
            .with(|record| {
                // SAFETY: the record lives while `self` does; the dispatch that could write it has ended (it failed,
                // and the GPU's launches are serialised), and takers are serialised by the mutex.
                unsafe { gpu_panic::take(record.cast()) }
            })
            .flatten()
    }
}
