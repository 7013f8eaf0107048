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

    /// A float `f32` or `f64`, for the free math functions.
    pub trait Float: Copy {
        fn sqrt(self) -> Self;
        fn exp(self) -> Self;
        fn ln(self) -> Self;
        fn log2(self) -> Self;
        fn sin(self) -> Self;
        fn cos(self) -> Self;
        fn tan(self) -> Self;
        fn tanh(self) -> Self;
        fn powf(self, n: Self) -> Self;
        fn powi(self, n: i32) -> Self;
        fn mul_add(self, a: Self, b: Self) -> Self;
        fn abs(self) -> Self;
        fn floor(self) -> Self;
        fn ceil(self) -> Self;
        fn min(self, other: Self) -> Self;
        fn max(self, other: Self) -> Self;
    }

    macro_rules! impl_float {
        ($($t:ident),*) => {$(
            impl Float for $t {
                fn sqrt(self) -> Self { $t::sqrt(self) }
                fn exp(self) -> Self { $t::exp(self) }
                fn ln(self) -> Self { $t::ln(self) }
                fn log2(self) -> Self { $t::log2(self) }
                fn sin(self) -> Self { $t::sin(self) }
                fn cos(self) -> Self { $t::cos(self) }
                fn tan(self) -> Self { $t::tan(self) }
                fn tanh(self) -> Self { $t::tanh(self) }
                fn powf(self, n: Self) -> Self { $t::powf(self, n) }
                fn powi(self, n: i32) -> Self { $t::powi(self, n) }
                fn mul_add(self, a: Self, b: Self) -> Self { $t::mul_add(self, a, b) }
                fn abs(self) -> Self { $t::abs(self) }
                fn floor(self) -> Self { $t::floor(self) }
                fn ceil(self) -> Self { $t::ceil(self) }
                fn min(self, other: Self) -> Self { $t::min(self, other) }
                fn max(self, other: Self) -> Self { $t::max(self, other) }
            }
        )*};
    }
    impl_float!(f32, f64);

    macro_rules! free_fns {
        ($($name:ident($($arg:ident: $ty:ty),*);)*) => {$(
            #[doc = concat!("`x.", stringify!($name), "(..)` as a function, the same in region and host code.")]
            #[inline]
            pub fn $name<F: Float>(x: F $(, $arg: $ty)*) -> F { F::$name(x $(, $arg)*) }
        )*};
    }
    free_fns! {
        sqrt(); exp(); ln(); log2(); sin(); cos(); tan(); tanh(); powf(n: F); powi(n: i32); mul_add(a: F, b: F);
        abs(); floor(); ceil(); min(other: F); max(other: F);
    }
}
#[cfg(feature = "host")]
pub use free::*;
