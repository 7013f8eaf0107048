//! The host side of the device print buffer ([`offload_model::device_print`]): drained after each launch.

use super::host_slot::HostSlot;
use offload_model::device_print;
use std::ptr::NonNull;
use std::sync::Mutex;

/// The bytes of a print buffer: its header and [`device_print::DATA_BYTES`] of room.
pub(super) const PRINT_BUFFER_BYTES: usize =
    size_of::<device_print::Header>() + device_print::DATA_BYTES;

/// Sets up a zeroed print buffer's header: room for [`device_print::DATA_BYTES`] of lines.
///
/// # Safety
/// `header` is [`PRINT_BUFFER_BYTES`] of zeroed memory, aligned for a header, that no one else uses yet.
pub(super) unsafe fn init_print_buffer(header: NonNull<device_print::Header>) {
    // SAFETY: per the contract.
    unsafe { (*header.as_ptr()).cap = device_print::DATA_BYTES as u32 };
}

/// A device's print buffer (`offload::println!`): a [`device_print`] buffer in a [`HostSlot`], each loaded image's
/// [`device_print::SYMBOL`] pointing at it, drained after each launch; and why lines may be dropped (the buffer,
/// or an image's pointer to it, could not be set up: the first reason).
pub(super) struct Prints {
    pub(super) slot: Option<HostSlot<device_print::Header>>,
    pub(super) unprinted: Mutex<Option<String>>,
}

impl Prints {
    pub(super) fn new(
        slot: Option<HostSlot<device_print::Header>>,
        unprinted: Option<String>,
    ) -> Prints {
        Prints {
            slot,
            unprinted: Mutex::new(unprinted),
        }
    }

    /// Allocates the buffer in the current context (`current`: whether the device's context was made current);
    /// without one, lines are dropped, and the reason kept.
    pub(super) fn open(current: Result<(), String>) -> Prints {
        let slot = current.and_then(|()| {
            HostSlot::new(PRINT_BUFFER_BYTES, |header| {
                // SAFETY: `HostSlot::new` hands over fresh zeroed memory of the buffer's size, page-aligned.
                unsafe { init_print_buffer(header) }
            })
        });
        match slot {
            Ok(slot) => Prints::new(Some(slot), None),
            Err(e) => Prints::new(
                None,
                Some(format!(
                    "no print buffer ({e}): what region code prints is dropped"
                )),
            ),
        }
    }

    /// Why lines region code prints may be dropped, if they may.
    pub(super) fn unprinted(&self) -> Option<String> {
        self.unprinted
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Notes the first reason lines may be dropped.
    pub(super) fn note_unprinted(&self, why: String) {
        self.unprinted
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_or_insert(why);
    }

    /// What the buffer holds, and how many lines did not fit; emptied.
    ///
    /// # Safety
    /// No kernel that could write the buffer runs (the launches that did have synchronised or failed), and no one
    /// else drains it meanwhile.
    pub(super) unsafe fn take(&self) -> (Vec<u8>, u32) {
        let Some(slot) = &self.slot else {
            return (Vec::new(), 0);
        };
        let mut out = Vec::new();
        // SAFETY: a buffer as `device_print` lays it out (set up by `open`), host memory the host reads whatever
        // became of the context; per the contract no kernel writes it.
        let lost = unsafe { device_print::drain(slot.host.as_ptr(), |l| out.extend_from_slice(l)) };
        (out, lost)
    }
}
