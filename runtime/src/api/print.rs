//! `offload::println!` and `offload::print!`: printing that works in region code on every device. In host code and
//! a region's host fallback they are `std`'s; on a device they are offload-device's twins (on the host image a line
//! per call, on GPUs and gpu-sim a line at a time through the device's print buffer, printed by the runtime after
//! the launch, so lines from different threads never mix). On GPUs and gpu-sim each call's output is kept whole
//! however long it is (one over 512 bytes is formatted twice, so its arguments' `Display` runs twice); what does not
//! fit in the buffer's 1 MiB is not printed, and the runtime reports on stderr how many lines it was.

/// Prints to stdout with a newline, in host and region code alike.
///
/// ```
/// offload::println!("{} + {} = {}", 1, 2, 1 + 2);
/// ```
#[macro_export]
macro_rules! println {
    ($($arg:tt)*) => {
        ::std::println!($($arg)*)
    };
}

/// Prints to stdout, in host and region code alike.
#[macro_export]
macro_rules! print {
    ($($arg:tt)*) => {
        ::std::print!($($arg)*)
    };
}
