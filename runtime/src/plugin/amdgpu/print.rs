//! One GPU's print buffer ([`offload_model::device_print`], `offload::println!`): a [`device_print::Header`] and
//! [`device_print::DATA_BYTES`] of room in a [`HostGlobal`], each image's [`device_print::SYMBOL`] pointing at it;
//! drained after each launch. An image without the global runs as before, and a buffer that cannot be set up fails
//! no load: the reason is kept, and what region code prints is dropped.

use super::error::Error;
use super::host_global::HostGlobal;
use super::image::AmdGpuImage;
use super::memory::Memory;
use super::sys::{Agent, Hsa, MemoryPool};
use offload_model::device_print;

/// The bytes of a print buffer: its header and its room.
pub const BYTES: usize = size_of::<device_print::Header>() + device_print::DATA_BYTES;

pub struct PrintBuffer(HostGlobal);

/// Sets up a fresh buffer: room for [`device_print::DATA_BYTES`] of lines.
///
/// # Safety
/// `p` is [`BYTES`] of zeroed memory, page-aligned, that no one else knows of.
unsafe fn init(p: *mut u8) {
    // SAFETY: per the contract.
    unsafe { (*p.cast::<device_print::Header>()).cap = device_print::DATA_BYTES as u32 };
}

impl PrintBuffer {
    /// The print buffer of GPU `agent`, to be allocated from the host's fine-grained `pool`.
    pub fn new(hsa: &'static Hsa, agent: Agent, pool: MemoryPool) -> PrintBuffer {
        PrintBuffer(HostGlobal::new(
            hsa,
            agent,
            pool,
            device_print::SYMBOL,
            BYTES,
            init,
        ))
    }

    /// Points `image`'s print-buffer global at the buffer (allocated first if need be), copying its address through
    /// `memory`; `Ok(false)` if the image has no such global.
    pub fn point(&self, image: &AmdGpuImage, memory: &Memory) -> Result<bool, Error> {
        self.0.point(image, memory)
    }

    /// Notes the first reason what region code prints may be dropped.
    pub fn note_unprinted(&self, why: String) {
        self.0.note_unset(why)
    }

    /// Why what region code prints may be dropped, if it may.
    #[cfg(test)]
    pub fn unprinted(&self) -> Option<String> {
        self.0.unset()
    }

    /// What the buffer holds, and how many lines did not fit; emptied. Nothing before any image pointed at it.
    ///
    /// # Safety
    /// No dispatch that could write the buffer runs (the caller holds what serialises the GPU's launches).
    pub unsafe fn take(&self) -> (Vec<u8>, u32) {
        let mut out = Vec::new();
        let lost = self.0.with(|buffer| {
            // SAFETY: a buffer as `device_print` lays it out (set up by `init`), in host memory; per the contract no
            // dispatch writes it, and drains are serialised by the mutex.
            unsafe { device_print::drain(buffer.cast(), |l| out.extend_from_slice(l)) }
        });
        (out, lost.unwrap_or(0))
    }
}
