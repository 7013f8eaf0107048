//! Panics crossing the host's threads: the message a payload carries, and the unwind that takes a failure to start
//! the host fallback's threads out of the expansion's fallback closure (which knows only values and panics) to the
//! region call, which returns it as an error.

use super::pool::SpawnError;
use std::any::Any;

/// A panic payload's message.
pub fn panic_message(p: &(dyn Any + Send)) -> &str {
    p.downcast_ref::<&str>()
        .copied()
        .or_else(|| p.downcast_ref::<String>().map(|s| s.as_str()))
        .unwrap_or("(non-string panic)")
}

/// The payload [`unwind_no_threads`] unwinds with.
pub struct NoThreads(pub SpawnError);

/// Leaves the fallback closure with `e`: an unwind (no panic message, no hook) that the region call catches and turns
/// into its error; see [`no_threads`].
pub fn unwind_no_threads(e: SpawnError) -> ! {
    std::panic::resume_unwind(Box::new(NoThreads(e)))
}

/// The failure to start threads a caught unwind carries, if that is what it is.
pub fn no_threads(p: &(dyn Any + Send)) -> Option<&SpawnError> {
    p.downcast_ref::<NoThreads>().map(|n| &n.0)
}
