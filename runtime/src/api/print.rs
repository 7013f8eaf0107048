//! `offload::println!` and `offload::print!`: printing that works in region code on every device. In host code and
//! a region's host fallback they are `std`'s; on a device they are offload-device's twins (on the host image a line
//! per call, on GPUs and gpu-sim a line at a time through the device's print buffer, printed by the runtime after
//! the launch, so lines from different threads never mix).

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
