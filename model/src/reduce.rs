//! Reduction operators, shared by device images and the host: each is a type implementing [`ReduceOp<T>`] for the
//! `T`s it applies to, so `reduction(&: x)` on an `f32` is a compile error rather than a wrong answer.

/// A reduction operator gives its identity (what private copies start at) and how two values combine. The built-in
/// ones implement it for the types they apply to, so an operator that does not fit the type is a compile error.
#[diagnostic::on_unimplemented(
    message = "`reduction` with this operator does not apply to `{T}`",
    label = "the reduction variable's type",
    note = "`+ *` apply to numbers, `min max` to numbers and not `bool`, `& | ^` to integers and `bool`, `&& ||` to \
            `bool`; arrays of these reduce element by element",
    note = "in a generic region, bound the type parameter: `T: offload::Numeric` (`offload::Integer` for `& | ^`), \
            or make it a supertrait of your trait"
)]
pub trait ReduceOp<T> {
    /// The value every private copy starts at: `combine(identity(), x)` is `x`.
    fn identity() -> T;
    /// Combines two partial results. Partials are grouped by team, thread and lane, so it should be associative.
    fn combine(a: T, b: T) -> T;
    /// `*acc = combine(*acc, *b)` in place (arrays element by element, so that an unoptimised GPU frame holds no
    /// temporary copy of a large value).
    ///
    /// # Safety
    /// `acc` is valid for reads and writes of a `T`, `b` for reads; either may be unaligned.
    #[inline(always)]
    unsafe fn combine_into(acc: *mut T, b: *const T) {
        // SAFETY: per the contract.
        unsafe {
            core::ptr::write_unaligned(
                acc,
                Self::combine(core::ptr::read_unaligned(acc), core::ptr::read_unaligned(b)),
            )
        }
    }
    /// `*p = identity()` in place (arrays element by element).
    ///
    /// # Safety
    /// `p` is valid for writes of a `T`, perhaps unaligned.
    #[inline(always)]
    unsafe fn write_identity(p: *mut T) {
        // SAFETY: per the contract.
        unsafe { core::ptr::write_unaligned(p, Self::identity()) }
    }
}

/// `+`: sums, from 0.
pub struct Add;
/// `*`: products, from 1.
pub struct Mul;
/// `min`: the least value, from the type's greatest.
pub struct Min;
/// `max`: the greatest value, from the type's least.
pub struct Max;
/// `&`: bitwise and (logical for `bool`), from all ones.
pub struct BitAnd;
/// `|`: bitwise or (logical for `bool`), from 0.
pub struct BitOr;
/// `^`: bitwise exclusive or (logical for `bool`), from 0.
pub struct BitXor;
/// `&&`: logical and of `bool`s, from `true`.
pub struct And;
/// `||`: logical or of `bool`s, from `false`.
pub struct Or;

/// The numbers `+ * min max` reduce: every integer and float type. A generic region's reduction over its own `T`
/// needs `T: Numeric` (a supertrait of the user's `Real` does it), as its slices need `T: DeviceCopy`. `Send + Sync
/// + 'static`: the host fallback's threads combine the partials.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not `offload::Numeric`, so `reduction(+|*|min|max: ..)` cannot combine it",
    note = "in a generic region, bound the type parameter: `T: offload::Numeric`, or make it a supertrait of your \
            trait (`trait Real: offload::Numeric + offload::DeviceCopy`)"
)]
pub trait Numeric: Copy + Send + Sync + 'static {
    /// `+`'s identity.
    const ZERO: Self;
    /// `*`'s identity.
    const ONE: Self;
    /// `max`'s identity: the least value (negative infinity for floats).
    const LEAST: Self;
    /// `min`'s identity: the greatest value (infinity for floats).
    const GREATEST: Self;
    /// `+` (wrapping for integers, as C's unsigned arithmetic and OpenMP's reductions in practice).
    fn reduce_add(a: Self, b: Self) -> Self;
    /// `*` (wrapping for integers).
    fn reduce_mul(a: Self, b: Self) -> Self;
    /// `min`; for floats, std's `min` (a NaN loses to a number).
    fn reduce_min(a: Self, b: Self) -> Self;
    /// `max`; for floats, std's `max` (a NaN loses to a number).
    fn reduce_max(a: Self, b: Self) -> Self;
}

/// The numbers `& | ^` reduce: every integer type.
pub trait Integer: Numeric {
    /// `&`'s identity.
    const ALL_ONES: Self;
    /// `&`.
    fn reduce_and(a: Self, b: Self) -> Self;
    /// `|`.
    fn reduce_or(a: Self, b: Self) -> Self;
    /// `^`.
    fn reduce_xor(a: Self, b: Self) -> Self;
}

macro_rules! ints {
    ($($t:ty),*) => {$(
        impl Numeric for $t {
            const ZERO: $t = 0;
            const ONE: $t = 1;
            const LEAST: $t = <$t>::MIN;
            const GREATEST: $t = <$t>::MAX;
            #[inline(always)] fn reduce_add(a: $t, b: $t) -> $t { a.wrapping_add(b) }
            #[inline(always)] fn reduce_mul(a: $t, b: $t) -> $t { a.wrapping_mul(b) }
            #[inline(always)] fn reduce_min(a: $t, b: $t) -> $t { if b < a { b } else { a } }
            #[inline(always)] fn reduce_max(a: $t, b: $t) -> $t { if b > a { b } else { a } }
        }
        impl Integer for $t {
            const ALL_ONES: $t = !0;
            #[inline(always)] fn reduce_and(a: $t, b: $t) -> $t { a & b }
            #[inline(always)] fn reduce_or(a: $t, b: $t) -> $t { a | b }
            #[inline(always)] fn reduce_xor(a: $t, b: $t) -> $t { a ^ b }
        }
    )*};
}
ints!(u8, u16, u32, u64, u128, usize, i8, i16, i32, i64, i128, isize);

macro_rules! floats {
    ($($t:ident),*) => {$(
        impl Numeric for $t {
            const ZERO: $t = 0.0;
            const ONE: $t = 1.0;
            const LEAST: $t = $t::NEG_INFINITY;
            const GREATEST: $t = $t::INFINITY;
            #[inline(always)] fn reduce_add(a: $t, b: $t) -> $t { a + b }
            #[inline(always)] fn reduce_mul(a: $t, b: $t) -> $t { a * b }
            #[inline(always)] fn reduce_min(a: $t, b: $t) -> $t { a.min(b) }
            #[inline(always)] fn reduce_max(a: $t, b: $t) -> $t { a.max(b) }
        }
    )*};
}
floats!(f32, f64);

// Each operator applies to the numbers that have it, generic ones included.
macro_rules! numeric_ops {
    ($($op:ident: $bound:ident, $identity:ident, $combine:ident;)*) => {$(
        impl<T: $bound> ReduceOp<T> for $op {
            #[inline(always)]
            fn identity() -> T {
                T::$identity
            }
            #[inline(always)]
            fn combine(a: T, b: T) -> T {
                T::$combine(a, b)
            }
        }
    )*};
}
numeric_ops! {
    Add: Numeric, ZERO, reduce_add;
    Mul: Numeric, ONE, reduce_mul;
    Min: Numeric, GREATEST, reduce_min;
    Max: Numeric, LEAST, reduce_max;
    BitAnd: Integer, ALL_ONES, reduce_and;
    BitOr: Integer, ZERO, reduce_or;
    BitXor: Integer, ZERO, reduce_xor;
}

impl ReduceOp<bool> for And {
    fn identity() -> bool {
        true
    }
    fn combine(a: bool, b: bool) -> bool {
        a && b
    }
}
impl ReduceOp<bool> for Or {
    fn identity() -> bool {
        false
    }
    fn combine(a: bool, b: bool) -> bool {
        a || b
    }
}
impl ReduceOp<bool> for BitAnd {
    fn identity() -> bool {
        true
    }
    fn combine(a: bool, b: bool) -> bool {
        a & b
    }
}
impl ReduceOp<bool> for BitOr {
    fn identity() -> bool {
        false
    }
    fn combine(a: bool, b: bool) -> bool {
        a | b
    }
}
impl ReduceOp<bool> for BitXor {
    fn identity() -> bool {
        false
    }
    fn combine(a: bool, b: bool) -> bool {
        a ^ b
    }
}

/// `initial op p0 op p1 ...`, in order (deterministic for a given launch geometry).
pub fn fold<Op: ReduceOp<T>, T: Copy>(initial: T, partials: &[T]) -> T {
    partials.iter().fold(initial, |acc, &p| Op::combine(acc, p))
}

// Arrays reduce element by element (`let mut hist = [0u32; 16]; .. reduction(+: hist)`).
macro_rules! arrays {
    ($($op:ident),*) => {$(
        impl<T: Copy, const N: usize> ReduceOp<[T; N]> for $op
        where
            $op: ReduceOp<T>,
        {
            #[inline(always)]
            fn identity() -> [T; N] {
                [<$op as ReduceOp<T>>::identity(); N]
            }
            #[inline(always)]
            fn combine(mut a: [T; N], b: [T; N]) -> [T; N] {
                // In place and by index: an unoptimised build's frame holds no further copy of a large array.
                for k in 0..N {
                    a[k] = <$op as ReduceOp<T>>::combine(a[k], b[k]);
                }
                a
            }
            #[inline(always)]
            unsafe fn combine_into(acc: *mut [T; N], b: *const [T; N]) {
                let (acc, b) = (acc as *mut T, b as *const T);
                for k in 0..N {
                    // SAFETY: element `k` of each array, per the contract.
                    unsafe { <$op as ReduceOp<T>>::combine_into(acc.add(k), b.add(k)) }
                }
            }
            #[inline(always)]
            unsafe fn write_identity(p: *mut [T; N]) {
                let p = p as *mut T;
                for k in 0..N {
                    // SAFETY: element `k`, per the contract.
                    unsafe { <$op as ReduceOp<T>>::write_identity(p.add(k)) }
                }
            }
        }
    )*};
}
arrays!(Add, Mul, Min, Max, BitAnd, BitOr, BitXor, And, Or);

/// The largest small reduction value (an array of 128 `u32`s), see [`is_small`].
pub const SMALL_BYTES: usize = 512;

/// Whether a reduction value of `size` bytes is small. A small value has [`crate::lanes::LANES`] private copies per
/// thread, each thread's partial passes through a team-shared slot, and the device keeps the initial value aside
/// (in team-shared memory on GPUs, which have no thread-locals) for the host to combine first. A larger value (a
/// 256-bin histogram) would not fit GPUs' team memory that way: each thread has one private copy, which on the
/// launch's first thread starts at the initial value (the identity elsewhere, so the result is still `initial op
/// partials`), and a team's threads combine theirs in turn into the team's output slot, in device memory.
pub const fn is_small(size: usize) -> bool {
    size <= SMALL_BYTES
}

/// The bytes of a team-shared slot for a reduction value of `size` bytes: 16-byte aligned for any element.
pub const fn slot_bytes(size: usize) -> usize {
    if size <= 16 {
        16
    } else {
        size.div_ceil(16) * 16
    }
}

// Several reduction variables (`reduction(+: s, t), reduction(max: e)`, tail `(s, t, e)`) reduce as one value: a
// `#[repr(C)]` tuple (a Rust tuple's layout may differ between the compilers of the host and of a GPU image), whose
// operator is the tuple of the variables' operators.
macro_rules! tuples {
    ($($name:ident($($t:ident $k:tt),+);)*) => {$(
        /// Several reduction variables as one value, in the tail's order; as an operator, the tuple of their
        /// operators.
        #[repr(C)]
        #[derive(Clone, Copy, Debug, Default, PartialEq)]
        pub struct $name<$($t),+>(
            $(
                /// One variable's value (in an operator tuple, its operator).
                pub $t
            ),+
        );

        impl<$($t),+> From<($($t,)+)> for $name<$($t),+> {
            #[inline(always)]
            fn from(v: ($($t,)+)) -> Self {
                $name($(v.$k),+)
            }
        }

        impl<$($t),+> From<$name<$($t),+>> for ($($t,)+) {
            #[inline(always)]
            fn from(v: $name<$($t),+>) -> Self {
                ($(v.$k,)+)
            }
        }

    )*};
}
tuples! {
    Tuple2(A 0, B 1);
    Tuple3(A 0, B 1, C 2);
    Tuple4(A 0, B 1, C 2, D 3);
    Tuple5(A 0, B 1, C 2, D 3, E 4);
    Tuple6(A 0, B 1, C 2, D 3, E 4, F 5);
}

macro_rules! tuple_ops {
    ($($name:ident($($op:ident $t:ident $k:tt),+);)*) => {$(
        impl<$($op: ReduceOp<$t>, $t: Copy),+> ReduceOp<$name<$($t),+>> for $name<$($op),+> {
            #[inline(always)]
            fn identity() -> $name<$($t),+> {
                $name($($op::identity()),+)
            }
            #[inline(always)]
            fn combine(a: $name<$($t),+>, b: $name<$($t),+>) -> $name<$($t),+> {
                $name($($op::combine(a.$k, b.$k)),+)
            }
        }
    )*};
}
tuple_ops! {
    Tuple2(OA A 0, OB B 1);
    Tuple3(OA A 0, OB B 1, OC C 2);
    Tuple4(OA A 0, OB B 1, OC C 2, OD D 3);
    Tuple5(OA A 0, OB B 1, OC C 2, OD D 3, OE E 4);
    Tuple6(OA A 0, OB B 1, OC C 2, OD D 3, OE E 4, OF F 5);
}

/// The most reduction variables one region combines.
pub const MAX_VARS: usize = 6;
