//! Float methods `core` lacks (`sqrt`, `mul_add`, `floor`, ...), so `x.sqrt()` reads the same in host and region
//! code. On the host image they are std's, so results match the host fallback bit for bit.

macro_rules! float_ext {
    ($($name:ident($($arg:ident: $ty:ident),*) -> $ret:ident;)*) => {
        /// Float math for region code; brought in by `offload::__prelude`.
        pub trait FloatExt: Sized {
            $(fn $name(self $(, $arg: $ty)*) -> $ret;)*
        }
        #[cfg(feature = "host")]
        impl FloatExt for f32 {
            $(#[inline] fn $name(self $(, $arg: float_ext!(@ty f32 $ty))*) -> float_ext!(@ty f32 $ret) { f32::$name(self $(, $arg)*) })*
        }
        #[cfg(feature = "host")]
        impl FloatExt for f64 {
            $(#[inline] fn $name(self $(, $arg: float_ext!(@ty f64 $ty))*) -> float_ext!(@ty f64 $ret) { f64::$name(self $(, $arg)*) })*
        }
    };
    (@ty $f:ident Self) => { $f };
    (@ty $f:ident i32) => { i32 };
}

float_ext! {
    sqrt() -> Self;
    exp() -> Self;
    ln() -> Self;
    log2() -> Self;
    sin() -> Self;
    cos() -> Self;
    tan() -> Self;
    tanh() -> Self;
    powf(n: Self) -> Self;
    powi(n: i32) -> Self;
    mul_add(a: Self, b: Self) -> Self;
    floor() -> Self;
    ceil() -> Self;
}

#[cfg(feature = "host")]
mod free {
    //! The same functions as the host's `offload::sqrt(x)` etc. (device math for GPU targets comes with them).
    offload_model::float_math!();
}
#[cfg(feature = "host")]
pub use free::*;
