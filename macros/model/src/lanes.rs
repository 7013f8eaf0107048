//! How one thread runs its share of a work-shared loop (what the macro and the outliner lower the loop to, on every
//! target): the body becomes a closure, run over the share in groups of [`LANES`] iterations below the lengths of the
//! slices it indexes with the loop variable, where `x[i]` needs no bounds check, then one by one.

use crate::reduce::{fold, ReduceOp};
use crate::view::{Exclusive, Iteration, Own};

/// Private copies per thread in a reduction loop: independent chains that hide the operator's latency (a float add
/// takes 4 cycles and two can start per cycle), and, for a range, one vector's worth of lanes for the SLP vectoriser.
pub const LANES: usize = 8;

/// A thread's share of a work-shared loop, as the lowering runs it.
///
/// # Safety
/// The drivers hand an iteration token to each item: `run` and `run_lanes` call `body` once per item the iterator
/// yields, and no item twice.
pub unsafe trait Lanes: Iterator + Sized {
    /// Runs `body` on every item, in order, feeding the [`LANES`] private copies in turn; `lens` are the lengths of
    /// the slices the body indexes with the item.
    #[inline(always)]
    fn run_lanes<T, const K: usize>(
        mut self,
        _lens: [usize; K],
        acc: &mut [T; LANES],
        mut body: impl FnMut(Self::Item, &mut T),
    ) {
        'all: loop {
            for a in acc.iter_mut() {
                let Some(i) = self.next() else { break 'all };
                body(i, a);
            }
        }
    }

    /// Runs `body` on every item, in order.
    #[inline(always)]
    fn run<const K: usize>(self, _lens: [usize; K], body: impl FnMut(Self::Item)) {
        self.for_each(body)
    }
}

/// The part of `r` below every length in `lens`, and that bound: one bound for all the slices, because LLVM carries
/// `i < min(lens)` to each of them but not a per-slice assumption made in a loop over `lens`.
#[inline(always)]
fn fast_part<const K: usize>(r: &core::ops::Range<usize>, lens: [usize; K]) -> (usize, usize) {
    let lim = lens.iter().fold(usize::MAX, |e, &l| e.min(l));
    (r.end.min(lim), lim)
}

// SAFETY: each item once, in order.

unsafe impl Lanes for core::ops::Range<usize> {
    /// Whole groups of [`LANES`] indices first, below every length in `lens`: there the lanes have no bounds checks
    /// and no control flow between them, so they vectorise. The rest runs one by one, so an index past a slice's end
    /// still panics at the same iteration.
    #[inline(always)]
    fn run_lanes<T, const K: usize>(
        self,
        lens: [usize; K],
        acc: &mut [T; LANES],
        mut body: impl FnMut(usize, &mut T),
    ) {
        let (fast, lim) = fast_part(&self, lens);
        // A counted loop, not a comparison against the end per group: LLVM unrolls and interleaves it.
        let groups = fast.saturating_sub(self.start) / LANES;
        for g in 0..groups {
            let i = self.start + g * LANES;
            // SAFETY: `i + LANES <= start + groups * LANES <= fast <= lim`, so the sum does not wrap either. Said
            // with `unchecked_add`: a wrapping sum tells LLVM nothing about `i + k`, and a region's slices taken as
            // `&[T]` parameters (the host fallback) carry no length range to prove it from.
            unsafe { core::hint::assert_unchecked(i.unchecked_add(LANES) <= lim) };
            for (k, a) in acc.iter_mut().enumerate() {
                body(i + k, a);
            }
        }
        for i in self.start + groups * LANES..self.end {
            body(i, &mut acc[0]);
        }
    }

    /// The indices below every length in `lens` first, where the body needs no bounds checks (so the loop
    /// vectoriser may take it), then the rest, in order.
    #[inline(always)]
    fn run<const K: usize>(self, lens: [usize; K], mut body: impl FnMut(usize)) {
        let (fast, lim) = fast_part(&self, lens);
        let mut i = self.start;
        while i < fast {
            // SAFETY: `i < fast <= lim`.
            unsafe { core::hint::assert_unchecked(i < lim) };
            body(i);
            i += 1;
        }
        for i in i..self.end {
            body(i);
        }
    }
}

// Every other integer type runs as `usize` does: whole groups of [`LANES`] first, computed as offsets from the start
// (in `usize`, so the group loop is the same counted loop), each item `start + k` in the loop's own type. Where the
// body indexes slices with `i as usize`, the groups stay below their lengths (`start` is not negative there) and say
// so, which drops the bounds checks: a `u64` or `i32` loop vectorises like a `usize` one.
macro_rules! lanes {
    ($($t:ty: $u:ty),*) => {$(
        // SAFETY: each item once, in order.
        unsafe impl Lanes for core::ops::Range<$t> {
            #[inline(always)]
            fn run_lanes<T, const K: usize>(
                self,
                lens: [usize; K],
                acc: &mut [T; LANES],
                mut body: impl FnMut($t, &mut T),
            ) {
                let (start, n, fast, lim) = int_parts!(self, lens, $t, $u);
                let groups = fast / LANES;
                for g in 0..groups {
                    let k = g * LANES;
                    for (j, a) in acc.iter_mut().enumerate() {
                        let i = start.wrapping_add((k + j) as $t);
                        if K > 0 {
                            // SAFETY: `k + j < fast`, so `i` is `start + k + j` below `lim` (see `int_parts`).
                            unsafe { core::hint::assert_unchecked((i as usize) < lim) };
                        }
                        body(i, a);
                    }
                }
                for k in groups * LANES..n {
                    body(start.wrapping_add(k as $t), &mut acc[0]);
                }
            }

            #[inline(always)]
            fn run<const K: usize>(self, lens: [usize; K], mut body: impl FnMut($t)) {
                let (start, n, fast, lim) = int_parts!(self, lens, $t, $u);
                for k in 0..fast {
                    let i = start.wrapping_add(k as $t);
                    if K > 0 {
                        // SAFETY: as in `run_lanes`.
                        unsafe { core::hint::assert_unchecked((i as usize) < lim) };
                    }
                    body(i);
                }
                for k in fast..n {
                    body(start.wrapping_add(k as $t));
                }
            }
        }
        // SAFETY: each item once, in order.
        unsafe impl Lanes for core::iter::Take<core::iter::Skip<core::iter::StepBy<core::ops::Range<$t>>>> {}
    )*};
}

/// `schedule(static, c)`: chunks of `c` iterations of `start..start + n`, dealt round-robin: thread `g` of `total`
/// runs chunks `g`, `g + total`, ..; `schedule(dynamic, c)`: each thread claims the next chunk from a counter the
/// launch's threads share, as it finishes one (on the host; GPUs deal dynamic chunks round-robin).
#[derive(Clone, Debug)]
pub struct Chunks<T> {
    start: T,
    n: usize,
    chunk: usize,
    /// The next chunk this thread runs (round-robin).
    next: usize,
    stride: usize,
    /// The launch's shared counter of claimed chunks (dynamic), or null.
    counter: *const core::sync::atomic::AtomicUsize,
    /// What is left of the current chunk, for item-by-item iteration.
    cur: core::ops::Range<T>,
}

/// A loop a `schedule(static, c)` or `schedule(dynamic, c)` deals out in chunks.
///
/// # Safety
/// As [`Share`](crate::abi::Share): chunks dealt to distinct `g` are disjoint.
pub unsafe trait ChunkShare: Sized {
    type Item;
    fn chunks(self, chunk: usize, g: usize, total: usize) -> Chunks<Self::Item>;

    /// The chunks this thread claims from `counter`, one after another.
    ///
    /// # Safety
    /// `counter` starts at 0, outlives the chunks, and is shared by the launch's threads alone, all dealing the same
    /// loop with the same chunk size.
    unsafe fn dynamic(
        self,
        chunk: usize,
        counter: &core::sync::atomic::AtomicUsize,
    ) -> Chunks<Self::Item> {
        let mut c = self.chunks(chunk, 0, 1);
        c.counter = counter;
        c
    }
}

macro_rules! chunk_ranges {
    ($($t:ty: $u:ty),*) => {$(
        // SAFETY: chunk `k` goes to `k % total` alone.
        unsafe impl ChunkShare for core::ops::Range<$t> {
            type Item = $t;
            #[inline(always)]
            fn chunks(self, chunk: usize, g: usize, total: usize) -> Chunks<$t> {
                let n = if self.start < self.end { self.end.wrapping_sub(self.start) as $u as usize } else { 0 };
                Chunks {
                    start: self.start,
                    n,
                    chunk: chunk.max(1),
                    next: g,
                    stride: total.max(1),
                    counter: core::ptr::null(),
                    cur: 0..0,
                }
            }
        }
        impl Chunks<$t> {
            /// This thread's next chunk, as a range.
            #[inline(always)]
            pub fn next_range(&mut self) -> Option<core::ops::Range<$t>> {
                let k = if self.counter.is_null() {
                    let k = self.next;
                    self.next = self.next.saturating_add(self.stride);
                    k
                } else {
                    // SAFETY: `dynamic`'s contract: the launch's counter, alive for the loop.
                    unsafe { &*self.counter }.fetch_add(1, core::sync::atomic::Ordering::Relaxed)
                };
                let lo = k.checked_mul(self.chunk).filter(|&lo| lo < self.n)?;
                let hi = lo.saturating_add(self.chunk).min(self.n);
                // `lo < hi <= n`: both ends lie in the loop's range.
                Some(self.start.wrapping_add(lo as $t)..self.start.wrapping_add(hi as $t))
            }
        }
        impl Iterator for Chunks<$t> {
            type Item = $t;
            // Item by item; the loop drivers go chunk by chunk (see `lanes`).
            fn next(&mut self) -> Option<$t> {
                loop {
                    if let Some(i) = self.cur.next() {
                        return Some(i);
                    }
                    self.cur = self.next_range()?;
                }
            }
        }
    )*};
}
chunk_ranges!(u8: u8, u16: u16, u32: u32, u64: u64, usize: usize, i8: u8, i16: u16, i32: u32, i64: u64, isize: usize);

// `schedule(static, c)`: each chunk runs as a range does.
macro_rules! chunk_lanes {
    ($($t:ty),*) => {$(
        // SAFETY: each item once, in order.
        unsafe impl Lanes for Chunks<$t> {
            #[inline(always)]
            fn run_lanes<T, const K: usize>(
                mut self,
                lens: [usize; K],
                acc: &mut [T; LANES],
                mut body: impl FnMut($t, &mut T),
            ) {
                while let Some(r) = self.next_range() {
                    r.run_lanes(lens, acc, &mut body);
                }
            }

            #[inline(always)]
            fn run<const K: usize>(mut self, lens: [usize; K], mut body: impl FnMut($t)) {
                while let Some(r) = self.next_range() {
                    r.run(lens, &mut body);
                }
            }
        }
    )*};
}
chunk_lanes!(u8, u16, u32, u64, usize, i8, i16, i32, i64, isize);

// `a..=b` runs as `a..b + 1` where that exists; a part ending at the type's maximum, one by one.
macro_rules! inclusive_lanes {
    ($($t:ty),*) => {$(
        // SAFETY: each item once, in order.
        unsafe impl Lanes for core::ops::RangeInclusive<$t> {
            #[inline(always)]
            fn run_lanes<T, const K: usize>(
                self,
                lens: [usize; K],
                acc: &mut [T; LANES],
                mut body: impl FnMut($t, &mut T),
            ) {
                let (start, end) = (*self.start(), *self.end());
                if start > end {
                    return;
                }
                match end.checked_add(1) {
                    Some(e) => (start..e).run_lanes(lens, acc, body),
                    None => {
                        let mut i = start;
                        loop {
                            body(i, &mut acc[0]);
                            if i == end {
                                break;
                            }
                            i += 1;
                        }
                    }
                }
            }

            #[inline(always)]
            fn run<const K: usize>(self, lens: [usize; K], mut body: impl FnMut($t)) {
                let (start, end) = (*self.start(), *self.end());
                if start > end {
                    return;
                }
                match end.checked_add(1) {
                    Some(e) => (start..e).run(lens, body),
                    None => {
                        let mut i = start;
                        loop {
                            body(i);
                            if i == end {
                                break;
                            }
                            i += 1;
                        }
                    }
                }
            }
        }
    )*};
}
inclusive_lanes!(u8, u16, u32, u64, usize, i8, i16, i32, i64, isize);

/// `(start, n, fast, lim)` of a range share: its start, its item count, how many items from the start lie below
/// every length in `lens` as `usize` (all of them when there are none; none when the start is negative), and the
/// least length.
macro_rules! int_parts {
    ($r:expr, $lens:expr, $t:ty, $u:ty) => {{
        let r = $r;
        let n = if r.start < r.end { r.end.wrapping_sub(r.start) as $u as usize } else { 0 };
        let lim = $lens.iter().fold(usize::MAX, |e, &l| e.min(l));
        #[allow(unused_comparisons)]
        let fast = if $lens.is_empty() {
            n
        } else if r.start >= 0 as $t {
            // `start` is not negative and at most `$u`'s maximum, so `as usize` keeps its value on 64-bit targets
            // and below (`u64`, `i64` and `isize` are as wide as `usize` there).
            n.min(lim.saturating_sub(r.start as usize))
        } else {
            0
        };
        (r.start, n, fast, lim)
    }};
}
lanes!(u8: u8, u16: u16, u32: u32, u64: u64, i8: u8, i16: u16, i32: u32, i64: u64, isize: usize);
// SAFETY: each item once, in order.
unsafe impl Lanes
    for core::iter::Take<core::iter::Skip<core::iter::StepBy<core::ops::Range<usize>>>>
{
}

// A GPU thread's grid-stride share: one private copy (the GPU hides latency with other threads, and each copy costs
// registers every thread of a block pays for).
macro_rules! strided_lanes {
    ($($t:ty),*) => {$(
        strided_lanes!(@one core::iter::StepBy<core::ops::Range<$t>>);
        strided_lanes!(@one core::iter::StepBy<core::iter::Skip<core::iter::StepBy<core::ops::Range<$t>>>>);
        strided_lanes!(@one core::iter::StepBy<core::ops::RangeInclusive<$t>>);
    )*};
    (@one $share:ty) => {
        // SAFETY: each item once, in order.
        unsafe impl Lanes for $share {
            #[inline(always)]
            fn run_lanes<T, const K: usize>(
                self,
                _lens: [usize; K],
                acc: &mut [T; LANES],
                mut body: impl FnMut(Self::Item, &mut T),
            ) {
                for i in self {
                    body(i, &mut acc[0]);
                }
            }
        }
    };
}
strided_lanes!(u8, u16, u32, u64, usize, i8, i16, i32, i64, isize);

/// A reduction loop, lowered: `var = reduce(Op, share, [x.len(), ..], [m?], var, |i, __offload_s, __t| BODY)` with
/// `var` in `BODY` as `(*__offload_s)` and `__t` the iteration's token (see [`crate::view`]; `[m]` when each iteration
/// owns a row of `m`). The copies start at `start` (the identity, once the initial value was recorded) and are
/// combined in order at the end.
#[inline(always)]
pub fn reduce<Op: ReduceOp<T>, T: Copy, I: Lanes, const K: usize, const S: usize>(
    _op: Op,
    share: Exclusive<I>,
    lens: [usize; K],
    rows: [usize; S],
    start: T,
    mut body: impl for<'t> FnMut(I::Item, &mut T, Own<'t>),
) -> T
where
    I::Item: Iteration,
{
    let mut acc = [start; LANES];
    // SAFETY: `i` is an item of this thread's exclusive share; the lowering computes `rows` from uniform values.
    share
        .0
        .run_lanes(lens, &mut acc, |i, s| body(i, s, unsafe { i.own(&rows) }));
    fold::<Op, T>(acc[0], &acc[1..])
}

/// Any other work-shared loop, lowered: `each(share, [x.len(), ..], [m?], |i, __t| BODY)`.
#[inline(always)]
pub fn each<I: Lanes, const K: usize, const S: usize>(
    share: Exclusive<I>,
    lens: [usize; K],
    rows: [usize; S],
    mut body: impl for<'t> FnMut(I::Item, Own<'t>),
) where
    I::Item: Iteration,
{
    // SAFETY: as in `reduce`.
    share.0.run(lens, |i| body(i, unsafe { i.own(&rows) }))
}

/// A reduction over a `collapse(n)` nest, lowered: `var = reduce_nest(Op, share, [m, ..], var, |(i, j), s, __t|
/// BODY)`, one private copy.
#[inline(always)]
pub fn reduce_nest<Op: ReduceOp<T>, T: Copy, I: Iterator, const S: usize>(
    _op: Op,
    share: Exclusive<I>,
    strides: [usize; S],
    start: T,
    mut body: impl for<'t> FnMut(I::Item, &mut T, Own<'t>),
) -> T
where
    I::Item: Iteration,
{
    let mut acc = start;
    // SAFETY: as in `each_nest`.
    share
        .0
        .for_each(|i| body(i, &mut acc, unsafe { i.own(&strides) }));
    acc
}

/// A `collapse(n)` nest, lowered: `each_nest(share, [m, p, ..], |(i, j, ..), __t| BODY)`, over the thread's tuples;
/// `[m, p, ..]` are the strides of the flat index the body writes, `(i * m + j) * p + k`, computed once.
#[inline(always)]
pub fn each_nest<I: Iterator, const S: usize>(
    share: Exclusive<I>,
    strides: [usize; S],
    mut body: impl for<'t> FnMut(I::Item, Own<'t>),
) where
    I::Item: Iteration,
{
    // SAFETY: `i` is an item of this thread's exclusive share; the lowering computes `strides` from uniform values.
    share.0.for_each(|i| body(i, unsafe { i.own(&strides) }))
}

mod sealed {
    pub trait Sealed {}
}

/// The primitive integers, and only they: what a loop's bounds are computed from.
#[diagnostic::on_unimplemented(
    message = "a work-shared loop's bounds are computed from primitive integers only, not `{Self}`",
    note = "every thread computes the bounds itself, and they must agree: a user type's operators could make them differ"
)]
pub trait PrimInt: sealed::Sealed + Copy {}
macro_rules! prim_ints {
    ($($t:ty),*) => {$( impl sealed::Sealed for $t {} impl PrimInt for $t {} )*};
}
prim_ints!(u8, u16, u32, u64, u128, usize, i8, i16, i32, i64, i128, isize);

/// The primitive numbers, and only they: what a cast in a loop's bounds may convert.
#[diagnostic::on_unimplemented(
    message = "a work-shared loop's bounds are computed from primitive numbers only, not `{Self}`",
    note = "every thread computes the bounds itself, and they must agree: a user type's operators could make them differ"
)]
pub trait PrimNum: sealed::Sealed + Copy {}
impl<T: PrimInt> PrimNum for T {}
impl sealed::Sealed for f32 {}
impl sealed::Sealed for f64 {}
impl PrimNum for f32 {}
impl PrimNum for f64 {}

/// A leaf cast to an integer in a value every thread must compute alike: any primitive number.
#[inline(always)]
pub fn num<T: PrimNum>(x: T) -> T {
    x
}

/// A leaf of a value every thread must compute alike (a bound, step, stride or chunk size, or a `let` they use): a
/// primitive integer, so only the built-in operators apply to it, never a user's `impl Add`.
#[inline(always)]
pub fn int<T: PrimInt>(x: T) -> T {
    x
}

/// What has a length a loop's bounds may use, whatever methods its user adds.
///
/// # Safety
/// `length` returns the same value on every thread for the whole launch and calls no user code.
pub unsafe trait Length {
    fn length(&self) -> usize;
}

// SAFETY: a slice's length is fixed.
unsafe impl<T> Length for [T] {
    #[inline(always)]
    fn length(&self) -> usize {
        <[T]>::len(self)
    }
}

// SAFETY: as the view's own `len`, fixed at its making.
unsafe impl<T> Length for crate::view::View<'_, T> {
    #[inline(always)]
    fn length(&self) -> usize {
        crate::view::View::len(self)
    }
}

// SAFETY: as above.
unsafe impl<T> Length for crate::view::UnsafeView<'_, T> {
    #[inline(always)]
    fn length(&self) -> usize {
        crate::view::UnsafeView::len(self)
    }
}

// SAFETY: the referent's.
unsafe impl<L: Length + ?Sized> Length for &L {
    #[inline(always)]
    fn length(&self) -> usize {
        L::length(self)
    }
}

// SAFETY: the referent's.
unsafe impl<L: Length + ?Sized> Length for &mut L {
    #[inline(always)]
    fn length(&self) -> usize {
        L::length(self)
    }
}

/// `x.len()` in a value every thread must compute alike, called without method lookup.
#[inline(always)]
pub fn len<L: Length + ?Sized>(x: &L) -> usize {
    x.length()
}
