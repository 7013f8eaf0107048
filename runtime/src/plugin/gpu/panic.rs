//! The host side of the GPU panic record ([`offload_model::gpu_panic`]), for every GPU plugin: a record in host
//! memory a plugin allocated ([`HostBlock`]), each loaded image's [`gpu_panic::SYMBOL`] pointing at it; after a
//! failed launch it is taken, reset for the next, and turned into the launch's failure.

use super::host_block::{FirstReason, HostBlock, Protocol};
use crate::plugin::error::PluginError;
use offload_model::gpu_panic::{self, PanicRecord, Taken};
use std::fmt::Display;
use std::ptr::NonNull;
use std::sync::Mutex;

/// The panic record's block.
pub const PROTOCOL: Protocol = Protocol {
    symbol: gpu_panic::SYMBOL,
    bytes: size_of::<PanicRecord>(),
    align: align_of::<PanicRecord>(),
    init,
};

/// Sets up a fresh record: empty.
///
/// # Safety
/// As [`Protocol::init`].
unsafe fn init(p: NonNull<u8>) {
    // SAFETY: per the contract, room for a record, aligned for it, unshared.
    unsafe { p.cast::<PanicRecord>().write(PanicRecord::new()) }
}

/// The message of a panic on a GPU: its code records where and which thread, not the message (offload-device's
/// handlers read none: the message's formatting code would cost every kernel registers, panicking or not).
pub const NO_MESSAGE: &str = "panicked (GPU code records where, not the message)";

/// A failed kernel's error on a GPU whose trap loses the device: the panic its record holds, else `trap`.
pub fn panic_or_trap(record: Option<Taken>, trap: impl FnOnce() -> PluginError) -> PluginError {
    match PluginError::from_panic_record(record, true, trap) {
        PluginError::Panic {
            message,
            location,
            thread,
            lost,
        } if message.is_empty() => PluginError::Panic {
            message: NO_MESSAGE.into(),
            location,
            thread,
            lost,
        },
        e => e,
    }
}

/// A GPU's panic record, in the host memory `B` the plugin allocated for it, and why a panic may trap without it
/// (the record, or an image's pointer to it, could not be set up: the first reason, said with every trap).
pub struct PanicReports<B> {
    pub block: B,
    unrecorded: FirstReason,
    /// Taken by one failed launch at a time (launches from several host threads fail together when one traps).
    taking: Mutex<()>,
}

impl<B> PanicReports<B> {
    pub fn new(block: B, unrecorded: Option<String>) -> PanicReports<B> {
        PanicReports {
            block,
            unrecorded: FirstReason::new(unrecorded),
            taking: Mutex::new(()),
        }
    }

    /// Why a panic may trap without its record, if it may.
    pub fn unrecorded(&self) -> Option<String> {
        self.unrecorded.get()
    }

    /// Notes the first reason a panic may trap without its record.
    pub fn note_unrecorded(&self, why: String) {
        self.unrecorded.note(why)
    }

    /// Notes that an image's global could not point at the record (`e`: why not); the image still runs, and its
    /// panics trap without the record.
    pub fn note_unpointed(&self, e: impl Display) {
        self.note_unrecorded(format!(
            "an image's panic record could not be set ({e}): a panic in region code may trap without its location"
        ))
    }
}

impl<B> PanicReports<Option<B>> {
    /// The record the plugin allocated, or, where it could not (`Err`: why), none: the device still runs kernels,
    /// and a panic then traps without saying where.
    pub fn open(block: Result<B, String>) -> PanicReports<Option<B>> {
        match block {
            Ok(block) => PanicReports::new(Some(block), None),
            Err(e) => PanicReports::new(
                None,
                Some(format!(
                    "no panic record ({e}): a panic in region code traps without its location"
                )),
            ),
        }
    }
}

impl<B: HostBlock> PanicReports<B> {
    /// What the record holds, if a thread wrote it; the record is reset for the next launch. Nothing while there is
    /// no record.
    ///
    /// # Safety
    /// No kernel that could write the record runs (the launches that could have ended, or failed).
    pub unsafe fn take(&self) -> Option<Taken> {
        let _one = self.taking.lock().unwrap_or_else(|p| p.into_inner());
        let record = self.block.host_address()?;
        // SAFETY: a record set up by `init`, alive as long as the block; per the contract no kernel writes it, and
        // takers are serialised by the mutex.
        unsafe { gpu_panic::take(record.cast().as_ptr()) }
    }

    /// The failure of a launch whose kernel died and lost the device (`message`: the driver's account of it): the
    /// panic the record holds, if a thread wrote it, else the trap, with why there is no record where that is
    /// known; the record is reset for the next launch.
    ///
    /// # Safety
    /// As [`PanicReports::take`].
    pub unsafe fn failure(&self, message: String) -> PluginError {
        // SAFETY: per the contract.
        let taken = unsafe { self.take() };
        panic_or_trap(taken, || PluginError::Trap {
            message: match self.unrecorded() {
                Some(why) => format!("{message} ({why})"),
                None => message,
            },
        })
    }

    /// A launch's failure: a kernel that died ([`PluginError::Trap`]) is [`PanicReports::failure`]; a refused
    /// launch is itself (and leaves the record alone).
    ///
    /// # Safety
    /// As [`PanicReports::take`], for a kernel that died.
    pub unsafe fn failed(&self, e: PluginError) -> PluginError {
        match e {
            // SAFETY: per the contract.
            PluginError::Trap { message } => unsafe { self.failure(message) },
            e => e,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::host_block::PlainBlock;
    use super::*;
    use offload_model::gpu_panic::{record_str, Site};

    fn trap() -> PluginError {
        PluginError::Trap {
            message: "the kernel trapped".into(),
        }
    }

    #[test]
    fn a_written_record_is_a_panic_that_loses_the_device_and_says_where() {
        let mut r = PanicRecord::new();
        let site = Site {
            file: "src/lib.rs",
            line: 12,
            column: 9,
            block: 3,
            thread: 17,
        };
        // SAFETY: a live record, written as a GPU's panicking thread does, then taken as the plugin does.
        let taken = unsafe {
            record_str(&mut r, "", &site);
            gpu_panic::take(&mut r)
        };
        let e = panic_or_trap(taken, trap);
        assert!(e.device_lost());
        assert_eq!(e.to_string(), NO_MESSAGE);
        assert_eq!(e.location(), Some(&("src/lib.rs".to_string(), 12, 9)));
        assert_eq!(e.thread(), Some((3, 17)));
        // A message, where a device records one, is kept.
        // SAFETY: as above.
        let taken = unsafe {
            record_str(&mut r, "index out of bounds", &site);
            gpu_panic::take(&mut r)
        };
        assert_eq!(
            panic_or_trap(taken, trap).to_string(),
            "index out of bounds"
        );
    }

    #[test]
    fn without_a_record_the_trap_is_the_error() {
        let e = panic_or_trap(None, trap);
        assert!(matches!(e, PluginError::Trap { .. }), "{e:?}");
        assert!(e.device_lost());
    }

    /// What a GPU's first panicking thread leaves in the record (offload-device's `report_location`).
    fn panic_at(reports: &PanicReports<PlainBlock>, line: u32, block: u32, thread: u32) {
        let site = Site {
            file: "examples/saxpy.rs",
            line,
            column: 9,
            block,
            thread,
        };
        let record = reports.block.host_address().unwrap().cast().as_ptr();
        // SAFETY: the live record, written as the kernel would.
        assert!(unsafe { record_str(record, "", &site) });
    }

    #[test]
    fn a_record_is_taken_once_after_the_kernel_that_wrote_it_died() {
        let reports = PanicReports::new(PlainBlock::new(&PROTOCOL), None);
        panic_at(&reports, 12, 3, 17);
        // SAFETY: no kernel runs.
        let e = unsafe { reports.failed(trap()) };
        assert!(matches!(&e, PluginError::Panic { lost: true, .. }), "{e:?}");
        assert_eq!(e.to_string(), NO_MESSAGE);
        assert_eq!(
            e.location(),
            Some(&("examples/saxpy.rs".to_string(), 12, 9))
        );
        assert_eq!(e.thread(), Some((3, 17)));
        // Taken once: the next failure without a panic is the trap.
        // SAFETY: as above.
        let again = unsafe { reports.failed(trap()) };
        assert!(matches!(again, PluginError::Trap { .. }), "{again:?}");
        // SAFETY: no image points at the block any more.
        unsafe { reports.block.free(&PROTOCOL) };
    }

    #[test]
    fn a_refused_launch_leaves_the_record_alone() {
        let reports = PanicReports::new(PlainBlock::new(&PROTOCOL), None);
        panic_at(&reports, 5, 0, 1);
        let refused = PluginError::Launch {
            reason: "too many threads".into(),
        };
        // SAFETY: no kernel runs.
        assert!(matches!(
            unsafe { reports.failed(refused) },
            PluginError::Launch { .. }
        ));
        // SAFETY: as above.
        assert!(unsafe { reports.take() }.is_some());
        // SAFETY: no image points at the block any more.
        unsafe { reports.block.free(&PROTOCOL) };
    }

    #[test]
    fn without_a_record_a_trap_says_why_there_is_none() {
        let reports = PanicReports::<Option<PlainBlock>>::open(Err("cuMemHostAlloc failed".into()));
        // SAFETY: there is no record.
        let e = unsafe { reports.failure("the kernel trapped".into()) };
        assert!(e.device_lost());
        assert_eq!(
            e.to_string(),
            "the kernel trapped (no panic record (cuMemHostAlloc failed): a panic in region code traps without its \
             location)"
        );
        // An image that could not point at the record is noted once, after the first reason.
        let reports = PanicReports::new(PlainBlock::new(&PROTOCOL), None);
        reports.note_unpointed("first");
        reports.note_unrecorded("second".into());
        assert_eq!(
            reports.unrecorded().as_deref(),
            Some(
                "an image's panic record could not be set (first): a panic in region code may trap without its \
                 location"
            )
        );
        // SAFETY: no kernel runs.
        let e = unsafe { reports.failure("the kernel trapped".into()) };
        assert!(e.to_string().ends_with("without its location)"), "{e}");
        // SAFETY: no image points at the block any more.
        unsafe { reports.block.free(&PROTOCOL) };
    }
}
