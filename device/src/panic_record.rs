//! The device side of the GPU panic record ([`offload_model::gpu_panic`]): the image's global the plugin points at
//! its record, and what a panicking thread writes there before it traps.

use core::sync::atomic::{AtomicPtr, Ordering};
use offload_model::gpu_panic::{self, PanicRecord, Site};

/// The record's device address, set by the plugin when it loads the image (null until then: a panic then traps
/// without a message). Exported under [`gpu_panic::SYMBOL`], which the device link keeps.
#[allow(non_upper_case_globals)]
#[unsafe(no_mangle)]
#[used]
pub static __offload_panic_record: AtomicPtr<PanicRecord> = AtomicPtr::new(core::ptr::null_mut());

/// Records a panic of this thread, if it is the launch's first, with the thread's block and number.
#[cold]
#[inline(never)]
pub fn report(message: &dyn core::fmt::Display, location: Option<&core::panic::Location<'_>>) {
    let (block, _, thread, _) = super::backend::geometry();
    let site = Site {
        file: location.map_or("", |l| l.file()),
        line: location.map_or(0, |l| l.line()),
        column: location.map_or(0, |l| l.column()),
        block,
        thread,
    };
    // SAFETY: the plugin stores the address of its record, which outlives every launch, before it launches a
    // kernel of this image; the record is written only by this protocol.
    unsafe {
        gpu_panic::record(
            __offload_panic_record.load(Ordering::Relaxed),
            message,
            &site,
        )
    };
}
