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

/// Where this thread panicked: the location, and its block and number.
#[inline(always)]
fn site<'a>(location: Option<&core::panic::Location<'a>>) -> Site<'a> {
    let (block, _, thread, _) = super::backend::geometry();
    Site {
        file: location.map_or("", |l| l.file()),
        line: location.map_or(0, |l| l.line()),
        column: location.map_or(0, |l| l.column()),
        block,
        thread,
    }
}

/// Records a panic of this thread, if it is the launch's first, with the thread's block and number.
#[cfg(feature = "gpu-sim")]
#[cold]
#[inline(never)]
pub fn report(message: &dyn core::fmt::Display, location: Option<&core::panic::Location<'_>>) {
    let site = site(location);
    // The launch's own record where the plugin passes one (launches side by side keep their panics apart), else the
    // image's.
    let record = crate::host_env::env()
        .map(|e| e.panic_record)
        .filter(|p| !p.is_null())
        .unwrap_or_else(|| __offload_panic_record.load(Ordering::Relaxed));
    // SAFETY: the plugin's record (the launch's, alive until its grid has finished, or the image's, which outlives
    // every launch, stored before it launches a kernel of this image) is written only by this protocol.
    unsafe { gpu_panic::record(record, message, &site) };
}

/// Reads of the record's state a thread that lost the claim makes while the winner writes, at most: each crosses
/// the bus to host memory (about a microsecond), so this bounds the wait to tens of milliseconds, spent only by a
/// kernel that is failing. Bounded, because the winner may never finish: on AMD (and on NVIDIA before Volta) the
/// waiting threads of its wavefront hold it up until they give up.
#[cfg(not(feature = "gpu-sim"))]
const WAIT_READS: u32 = 1 << 14;

/// On a GPU: records where this thread panicked, if it is the launch's first, with its block and number, and no
/// message (the handlers read none, and even copying a constant one would unroll into dozens of registers; the
/// plugin says a GPU records none). A thread that finds another's record being written waits for it to be
/// published before it returns and traps: its trap would otherwise end the kernel before the record is complete.
#[cfg(not(feature = "gpu-sim"))]
#[cold]
#[inline(never)]
pub fn report_location(location: Option<&core::panic::Location<'_>>) {
    let site = site(location);
    let p = __offload_panic_record.load(Ordering::Relaxed);
    // A misaligned address is no record (a broken plugin). Checked here, it also lets the optimiser drop the
    // debug-build alignment check of the dereference below, whose panic would call back into the panic handler: a
    // cycle in the call graph, which costs every kernel an unbounded (dynamic) stack on AMD.
    if p.is_null() || !p.is_aligned() {
        return;
    }
    // SAFETY: the plugin stores the address of its record, which outlives every launch, before it launches a
    // kernel of this image; the record is written only by this protocol.
    if unsafe { gpu_panic::record_str(p, "", &site) } {
        return;
    }
    // SAFETY: as above; the state is only accessed atomically.
    let claimed = unsafe { &(*p).state };
    let mut reads = 0;
    while claimed.load(Ordering::Acquire) == gpu_panic::state::WRITING && reads < WAIT_READS {
        core::hint::spin_loop();
        reads += 1;
    }
}
