//! The float math of region and host code, written once and expanded on each side against that side's `f32`/`f64`
//! (the host's std in `offload`, offload-device's on the host image): the `Float` trait and the free functions
//! `sqrt(x)`, `powi(x, n)`, `min(a, b)`... that read the same in region and host code.

#[macro_export]
#[doc(hidden)]
macro_rules! float_math {
    ($(via $via:path)?) => {
        /// A float `f32` or `f64`, for the free math functions.
        pub trait Float: Copy {
            /// The square root.
            fn sqrt(self) -> Self;
            /// `e` to the power `self`.
            fn exp(self) -> Self;
            /// The natural logarithm.
            fn ln(self) -> Self;
            /// The base-2 logarithm.
            fn log2(self) -> Self;
            /// The sine (radians).
            fn sin(self) -> Self;
            /// The cosine (radians).
            fn cos(self) -> Self;
            /// The tangent (radians).
            fn tan(self) -> Self;
            /// The hyperbolic tangent.
            fn tanh(self) -> Self;
            /// `self` to the float power `n`.
            fn powf(self, n: Self) -> Self;
            /// `self` to the integer power `n`.
            fn powi(self, n: i32) -> Self;
            /// `self * a + b` with one rounding.
            fn mul_add(self, a: Self, b: Self) -> Self;
            /// The absolute value.
            fn abs(self) -> Self;
            /// The largest integer at most `self`.
            fn floor(self) -> Self;
            /// The smallest integer at least `self`.
            fn ceil(self) -> Self;
            /// The smaller of the two (the other one if either is NaN).
            fn min(self, other: Self) -> Self;
            /// The larger of the two (the other one if either is NaN).
            fn max(self, other: Self) -> Self;
        }
        $crate::__float_impl!(f32 $(via $via)?);
        $crate::__float_impl!(f64 $(via $via)?);
        $crate::__float_fns! {
            sqrt(); exp(); ln(); log2(); sin(); cos(); tan(); tanh(); powf(n: F); powi(n: i32);
            mul_add(a: F, b: F); abs(); floor(); ceil(); min(other: F); max(other: F);
        }
    };
}

#[macro_export]
#[doc(hidden)]
macro_rules! __float_impl {
    ($t:ident) => {
        $crate::__float_impl!(@impl $t, $t);
    };
    // Where `core` lacks the methods (GPU targets), the extension trait `$via` has them.
    ($t:ident via $via:path) => {
        $crate::__float_impl!(@impl $t, <$t as $via>);
    };
    (@impl $t:ident, $($q:tt)+) => {
        impl Float for $t {
            fn sqrt(self) -> Self {
                $($q)+::sqrt(self)
            }
            fn exp(self) -> Self {
                $($q)+::exp(self)
            }
            fn ln(self) -> Self {
                $($q)+::ln(self)
            }
            fn log2(self) -> Self {
                $($q)+::log2(self)
            }
            fn sin(self) -> Self {
                $($q)+::sin(self)
            }
            fn cos(self) -> Self {
                $($q)+::cos(self)
            }
            fn tan(self) -> Self {
                $($q)+::tan(self)
            }
            fn tanh(self) -> Self {
                $($q)+::tanh(self)
            }
            fn powf(self, n: Self) -> Self {
                $($q)+::powf(self, n)
            }
            fn powi(self, n: i32) -> Self {
                $($q)+::powi(self, n)
            }
            fn mul_add(self, a: Self, b: Self) -> Self {
                $($q)+::mul_add(self, a, b)
            }
            fn abs(self) -> Self {
                $t::abs(self)
            }
            fn floor(self) -> Self {
                $($q)+::floor(self)
            }
            fn ceil(self) -> Self {
                $($q)+::ceil(self)
            }
            fn min(self, other: Self) -> Self {
                $t::min(self, other)
            }
            fn max(self, other: Self) -> Self {
                $t::max(self, other)
            }
        }
    };
}

#[macro_export]
#[doc(hidden)]
macro_rules! __float_fns {
    ($($name:ident($($arg:ident: $ty:ty),*);)*) => {$(
        #[doc = concat!("`x.", stringify!($name), "(..)` as a function, the same in region and host code.")]
        #[inline]
        pub fn $name<F: Float>(x: F $(, $arg: $ty)*) -> F { F::$name(x $(, $arg)*) }
    )*};
}
