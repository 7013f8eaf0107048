//! Reduction operators, shared by device images and the host: each is a type implementing [`ReduceOp<T>`] for the
//! `T`s it applies to, so `reduction(&: x)` on an `f32` is a compile error rather than a wrong answer.

/// An operator of `reduction(op: var)`: its identity (what private copies start at) and how two values combine.
#[diagnostic::on_unimplemented(
    message = "`reduction` with this operator does not apply to `{T}`",
    label = "the reduction variable's type",
    note = "`+ *` apply to numbers, `min max` to numbers and not `bool`, `& | ^` to integers and `bool`, `&& ||` to \
            `bool`; arrays of these reduce element by element"
)]
pub trait ReduceOp<T> {
    fn identity() -> T;
    fn combine(a: T, b: T) -> T;
}

pub struct Add;
pub struct Mul;
pub struct Min;
pub struct Max;
pub struct BitAnd;
pub struct BitOr;
pub struct BitXor;
pub struct And;
pub struct Or;

macro_rules! ints {
    ($($t:ty),*) => {$(
        impl ReduceOp<$t> for Add { fn identity() -> $t { 0 } fn combine(a: $t, b: $t) -> $t { a.wrapping_add(b) } }
        impl ReduceOp<$t> for Mul { fn identity() -> $t { 1 } fn combine(a: $t, b: $t) -> $t { a.wrapping_mul(b) } }
        impl ReduceOp<$t> for Min { fn identity() -> $t { <$t>::MAX } fn combine(a: $t, b: $t) -> $t { if b < a { b } else { a } } }
        impl ReduceOp<$t> for Max { fn identity() -> $t { <$t>::MIN } fn combine(a: $t, b: $t) -> $t { if b > a { b } else { a } } }
        impl ReduceOp<$t> for BitAnd { fn identity() -> $t { !0 } fn combine(a: $t, b: $t) -> $t { a & b } }
        impl ReduceOp<$t> for BitOr { fn identity() -> $t { 0 } fn combine(a: $t, b: $t) -> $t { a | b } }
        impl ReduceOp<$t> for BitXor { fn identity() -> $t { 0 } fn combine(a: $t, b: $t) -> $t { a ^ b } }
    )*};
}
ints!(u8, u16, u32, u64, u128, usize, i8, i16, i32, i64, i128, isize);

macro_rules! floats {
    ($($t:ident),*) => {$(
        impl ReduceOp<$t> for Add { fn identity() -> $t { 0.0 } fn combine(a: $t, b: $t) -> $t { a + b } }
        impl ReduceOp<$t> for Mul { fn identity() -> $t { 1.0 } fn combine(a: $t, b: $t) -> $t { a * b } }
        impl ReduceOp<$t> for Min { fn identity() -> $t { $t::INFINITY } fn combine(a: $t, b: $t) -> $t { a.min(b) } }
        impl ReduceOp<$t> for Max { fn identity() -> $t { $t::NEG_INFINITY } fn combine(a: $t, b: $t) -> $t { a.max(b) } }
    )*};
}
floats!(f32, f64);

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
            fn combine(a: [T; N], b: [T; N]) -> [T; N] {
                let mut out = a;
                for (o, b) in out.iter_mut().zip(b) {
                    *o = <$op as ReduceOp<T>>::combine(*o, b);
                }
                out
            }
        }
    )*};
}
arrays!(Add, Mul, Min, Max, BitAnd, BitOr, BitXor, And, Or);

/// The largest reduction value (an array of 128 `u32`s): each thread of a team passes its partial through team-shared
/// memory, which GPUs have little of.
pub const MAX_BYTES: usize = 512;

/// The bytes of a team-shared slot for a reduction value of `size` bytes: 16-byte aligned for any element.
pub const fn slot_bytes(size: usize) -> usize {
    if size <= 16 {
        16
    } else {
        size.div_ceil(16) * 16
    }
}
