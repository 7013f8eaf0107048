//! `offload::println!` and `offload::print!` in region code (also as plain `println!`/`print!`, through the prelude
//! the outliner adds). The host image prints at once, a line per call under the stdout lock; GPUs and gpu-sim
//! append the formatted line, whole however long, to the plugin's print buffer ([`offload_model::device_print`]),
//! which the runtime prints after the launch; a line that does not fit is counted, and the runtime says how many.

/// Prints to the device's output, with a newline.
#[macro_export]
macro_rules! println {
    () => {
        $crate::__print(::core::format_args!(""), true)
    };
    ($($arg:tt)*) => {
        $crate::__print(::core::format_args!($($arg)*), true)
    };
}

/// Prints to the device's output.
#[macro_export]
macro_rules! print {
    ($($arg:tt)*) => {
        $crate::__print(::core::format_args!($($arg)*), false)
    };
}

/// What the macros call.
#[doc(hidden)]
#[cfg(feature = "host")]
pub fn __print(args: core::fmt::Arguments<'_>, newline: bool) {
    use std::io::Write;
    // The image's own std buffers its own stdout, which nothing flushes at exit: each call writes through.
    let mut out = std::io::stdout().lock();
    let _ = out.write_fmt(args);
    if newline {
        let _ = out.write_all(b"\n");
    }
    let _ = out.flush();
}

/// The print buffer's device address, set by the plugin when it loads the image (null: lines are dropped).
#[cfg(not(feature = "host"))]
#[allow(non_upper_case_globals)]
#[unsafe(no_mangle)]
#[used]
pub static __offload_print_buffer: core::sync::atomic::AtomicPtr<
    offload_model::device_print::Header,
> = core::sync::atomic::AtomicPtr::new(core::ptr::null_mut());

/// What the macros call.
#[doc(hidden)]
#[cfg(not(feature = "host"))]
pub fn __print(args: core::fmt::Arguments<'_>, newline: bool) {
    let p = __offload_print_buffer.load(core::sync::atomic::Ordering::Relaxed);
    // SAFETY: the plugin points the global at its buffer, which outlives every launch, before it launches a kernel
    // of this image; only the print protocol touches it.
    unsafe { offload_model::device_print::print(p, args, newline) }
}
