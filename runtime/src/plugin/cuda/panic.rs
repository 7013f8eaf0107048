//! The host side of the GPU panic record ([`offload_model::gpu_panic`]): the device's slot, and turning what a
//! trapped launch left there into the region's failure.

use super::host_slot::HostSlot;
use crate::plugin::error::PluginError;
use crate::plugin::gpu;
use offload_model::gpu_panic::{self, PanicRecord};
use std::ptr::NonNull;
use std::sync::Mutex;

/// A device's panic record: a [`PanicRecord`] in a [`HostSlot`], each loaded image's [`gpu_panic::SYMBOL`]
/// pointing at it.
pub(super) struct PanicSlot {
    pub(super) slot: HostSlot<PanicRecord>,
    /// Taken by one failed launch at a time (launches from several host threads fail together when one traps).
    pub(super) taking: Mutex<()>,
}

impl PanicSlot {
    /// Allocates and initialises the record, mapped into the current context's address space.
    pub(super) fn new() -> Result<PanicSlot, String> {
        let slot = HostSlot::new(size_of::<PanicRecord>(), |record: NonNull<PanicRecord>| {
            // SAFETY: page-aligned memory of the record's size, ours alone (`HostSlot::new`'s promise).
            unsafe { record.write(PanicRecord::new()) }
        })?;
        Ok(PanicSlot {
            slot,
            taking: Mutex::new(()),
        })
    }

    /// The failure of a launch whose kernel died (`trap`, the driver's account): the panic the record holds, if a
    /// thread wrote it, and the record reset for the next launch.
    pub(super) fn failure(&self, trap: PluginError) -> PluginError {
        let _one = self.taking.lock().unwrap_or_else(|p| p.into_inner());
        // SAFETY: the record lives as long as the device; the kernel that could write it has ended (its launch
        // failed, and the context that ran it is unusable).
        let taken = unsafe { gpu_panic::take(self.slot.host.as_ptr()) };
        gpu::panic_or_trap(taken, || trap)
    }
}

/// What a device knows of its panics: its record, and why a panic may trap without one (the record, or an image's
/// pointer to it, could not be set up: the first reason, said once at discovery and with every trap).
pub(super) struct PanicReports {
    pub(super) slot: Option<PanicSlot>,
    pub(super) unrecorded: Mutex<Option<String>>,
}

impl PanicReports {
    pub(super) fn new(slot: Option<PanicSlot>, unrecorded: Option<String>) -> PanicReports {
        PanicReports {
            slot,
            unrecorded: Mutex::new(unrecorded),
        }
    }

    /// Why a panic may trap without its record, if it may.
    pub(super) fn unrecorded(&self) -> Option<String> {
        self.unrecorded
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Notes the first reason a panic may trap without its record.
    pub(super) fn note_unrecorded(&self, why: String) {
        self.unrecorded
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_or_insert(why);
    }

    /// A launch's failure: a kernel that died is the panic its record holds, else the driver's account of it (with
    /// why there is no record, where that is known); a refused launch is itself.
    pub(super) fn failed(&self, e: PluginError) -> PluginError {
        let PluginError::Trap { message } = e else {
            return e;
        };
        let trap = PluginError::Trap {
            message: match self.unrecorded() {
                Some(why) => format!("{message} ({why})"),
                None => message,
            },
        };
        match &self.slot {
            Some(slot) => slot.failure(trap),
            None => trap,
        }
    }
}
