//! How one thread runs its share of a work-shared loop (what the macro and the outliner lower the loop to, on every
//! target): the body becomes a closure, run over the share in groups of [`LANES`] iterations below the lengths of the
//! slices it indexes with the loop variable, where `x[i]` needs no bounds check, then one by one.

use crate::abi::{FlatBlock, Nest, NestLevel, StridedNest, MAX_COLLAPSE};
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

/// Which chunks of `c` positions of `0..n` a thread runs: `schedule(static, c)` deals them round-robin, thread `g`
/// of `total` running chunks `g`, `g + total`, ..; `schedule(dynamic, c)` has each thread claim the next chunk from a
/// counter the launch's threads share, as it finishes one (on the host; GPUs deal dynamic chunks round-robin).
#[derive(Clone, Debug)]
struct Dealer {
    n: usize,
    chunk: usize,
    /// The next chunk this thread runs (round-robin).
    next: usize,
    stride: usize,
    /// The launch's shared counter of claimed chunks (dynamic), or null.
    counter: *const core::sync::atomic::AtomicUsize,
}

impl Dealer {
    fn new(n: usize, chunk: usize, g: usize, total: usize) -> Self {
        Dealer {
            n,
            chunk: chunk.max(1),
            next: g,
            stride: total.max(1),
            counter: core::ptr::null(),
        }
    }

    /// This thread's next chunk, `lo..hi` with `lo < hi <= n`.
    #[inline(always)]
    fn next_span(&mut self) -> Option<(usize, usize)> {
        let k = if self.counter.is_null() {
            let k = self.next;
            self.next = self.next.saturating_add(self.stride);
            k
        } else {
            // SAFETY: `dynamic`'s contract: the launch's counter, alive for the loop.
            unsafe { &*self.counter }.fetch_add(1, core::sync::atomic::Ordering::Relaxed)
        };
        let lo = k.checked_mul(self.chunk).filter(|&lo| lo < self.n)?;
        Some((lo, lo.saturating_add(self.chunk).min(self.n)))
    }
}

/// A chunked schedule's share of one loop: its chunks, each run as the loop's part ([`NestLevel::part`]).
#[derive(Clone, Debug)]
pub struct Chunks<L: NestLevel> {
    level: L,
    deal: Dealer,
    /// What is left of the current chunk, for item-by-item iteration.
    cur: Option<L::Part>,
}

impl<L: NestLevel> Chunks<L> {
    /// This thread's next chunk, as the loop's part.
    #[inline(always)]
    pub fn next_part(&mut self) -> Option<L::Part> {
        let (lo, hi) = self.deal.next_span()?;
        // `lo < hi <= n`: inside the loop.
        Some(self.level.part(lo, hi - lo))
    }
}

impl<L: NestLevel> Iterator for Chunks<L> {
    type Item = L::Item;
    // Item by item; the loop drivers go chunk by chunk (`Lanes`).
    fn next(&mut self) -> Option<L::Item> {
        loop {
            if let Some(i) = self.cur.as_mut().and_then(Iterator::next) {
                return Some(i);
            }
            self.cur = Some(self.next_part()?);
        }
    }
}

// SAFETY: each chunk's items once, in order, the chunks in order.
unsafe impl<L: NestLevel> Lanes for Chunks<L>
where
    L::Part: Lanes,
{
    /// Each chunk runs as the loop's part does (a range's vectorises).
    #[inline(always)]
    fn run_lanes<T, const K: usize>(
        mut self,
        lens: [usize; K],
        acc: &mut [T; LANES],
        mut body: impl FnMut(L::Item, &mut T),
    ) {
        while let Some(r) = self.next_part() {
            r.run_lanes(lens, acc, &mut body);
        }
    }

    #[inline(always)]
    fn run<const K: usize>(mut self, lens: [usize; K], mut body: impl FnMut(L::Item)) {
        while let Some(r) = self.next_part() {
            r.run(lens, &mut body);
        }
    }
}

/// A chunked schedule's share of a `collapse(n)` nest: chunks of its flattened space, each walked as a block.
#[derive(Clone, Debug)]
pub struct NestChunks<N> {
    nest: N,
    deal: Dealer,
}

// SAFETY: each chunk is a block of the flattened space, walked as `FlatBlock` walks one; the chunks in order.
unsafe impl<N: Nest> NestShare for NestChunks<N>
where
    N::Item: Iteration,
{
    type Item = N::Item;
    #[inline(always)]
    unsafe fn walk<const S: usize>(
        mut self,
        strides: &[usize; S],
        mut f: impl for<'t> FnMut(Self::Item, Own<'t>),
    ) {
        while let Some((lo, hi)) = self.deal.next_span() {
            // SAFETY: this thread's chunk of its exclusive share (the caller's contract).
            unsafe { FlatBlock::span(self.nest.clone(), lo, hi).walk(strides, &mut f) };
        }
    }
}

/// A loop, or a `collapse(n)` nest, that a `schedule(static, c)` or `schedule(dynamic, c)` deals out in chunks.
///
/// # Safety
/// As [`Share`](crate::abi::Share): chunks dealt to distinct `g` are disjoint, and so are the chunks claimed from one
/// counter.
pub unsafe trait ChunkShare: Sized {
    /// A thread's chunks.
    type Chunked;
    /// The chunks of `chunk` iterations thread `g` of `total` runs, dealt round-robin.
    fn chunks(self, chunk: usize, g: usize, total: usize) -> Self::Chunked;
    /// The chunks this thread claims from `counter`, one after another.
    ///
    /// # Safety
    /// `counter` starts at 0, outlives the chunks, and is shared by the launch's threads alone, all dealing the same
    /// loop with the same chunk size.
    unsafe fn dynamic(
        self,
        chunk: usize,
        counter: &core::sync::atomic::AtomicUsize,
    ) -> Self::Chunked;
}

// SAFETY: chunk `k` goes to `k % total` alone, or to the thread whose claim returned `k`.
unsafe impl<L: NestLevel> ChunkShare for L {
    type Chunked = Chunks<L>;
    #[inline(always)]
    fn chunks(self, chunk: usize, g: usize, total: usize) -> Chunks<L> {
        Chunks {
            deal: Dealer::new(self.size_hint().1.unwrap_or(0), chunk, g, total),
            level: self,
            cur: None,
        }
    }
    #[inline(always)]
    unsafe fn dynamic(self, chunk: usize, counter: &core::sync::atomic::AtomicUsize) -> Chunks<L> {
        let mut c = self.chunks(chunk, 0, 1);
        c.deal.counter = counter;
        c
    }
}

macro_rules! chunk_nests {
    ($($l:ident),+) => {
        // SAFETY: as for one loop, over the flattened space.
        unsafe impl<$($l: NestLevel),+> ChunkShare for ($($l,)+) {
            type Chunked = NestChunks<Self>;
            #[inline(always)]
            fn chunks(self, chunk: usize, g: usize, total: usize) -> NestChunks<Self> {
                NestChunks {
                    deal: Dealer::new(self.count(), chunk, g, total),
                    nest: self,
                }
            }
            #[inline(always)]
            unsafe fn dynamic(
                self,
                chunk: usize,
                counter: &core::sync::atomic::AtomicUsize,
            ) -> NestChunks<Self> {
                let mut c = self.chunks(chunk, 0, 1);
                c.deal.counter = counter;
                c
            }
        }
    };
}
chunk_nests!(A, B);
chunk_nests!(A, B, C);
chunk_nests!(A, B, C, D);
chunk_nests!(A, B, C, D, E);
chunk_nests!(A, B, C, D, E, F);

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
                // `is_empty`, not `start > end`: an exhausted range (`NestLevel::part`'s empty one) has its bounds still.
                if self.is_empty() {
                    return;
                }
                let (start, end) = (*self.start(), *self.end());
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
                // `is_empty`, not `start > end`: an exhausted range (`NestLevel::part`'s empty one) has its bounds still.
                if self.is_empty() {
                    return;
                }
                let (start, end) = (*self.start(), *self.end());
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
/// combined in order at the end. A value that is not small ([`crate::reduce::is_small`]) has one copy: `start` may be
/// the initial value then, and several copies of a histogram would only cost memory.
#[inline(always)]
pub fn reduce<Op: ReduceOp<T>, T: Copy, I: Lanes, const K: usize, const S: usize>(
    op: Op,
    share: Exclusive<I>,
    lens: [usize; K],
    rows: [usize; S],
    start: T,
    body: impl for<'t> FnMut(I::Item, &mut T, Own<'t>),
) -> T
where
    I::Item: Iteration,
{
    if crate::reduce::is_small(core::mem::size_of::<T>()) {
        reduce_lanes(op, share, lens, rows, start, body)
    } else {
        let mut acc = start;
        let mut body = body;
        // SAFETY: as in `reduce_lanes`.
        share
            .0
            .run(lens, |i| body(i, &mut acc, unsafe { i.own(&rows) }));
        acc
    }
}

/// [`reduce`]'s [`LANES`] copies, in a function of their own (inlined where optimised, not `always`) so that an
/// unoptimised frame of a large value's loop does not hold them.
#[inline]
fn reduce_lanes<Op: ReduceOp<T>, T: Copy, I: Lanes, const K: usize, const S: usize>(
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

/// A reduction over a `collapse(n)` nest, lowered: `var = reduce_nest(Op, share, [m, ..], [plane?], var, |(i, j), s,
/// __t| BODY)`, one private copy.
#[inline(always)]
pub fn reduce_nest<Op: ReduceOp<T>, T: Copy, I: NestShare, const S: usize, const P: usize>(
    _op: Op,
    share: Exclusive<I>,
    strides: [usize; S],
    planes: [usize; P],
    start: T,
    mut body: impl for<'t> FnMut(I::Item, &mut T, Own<'t>),
) -> T {
    let mut acc = start;
    // SAFETY: this thread's exclusive share; the lowering computes `strides` and `planes` from uniform values.
    unsafe {
        share.0.walk(&strides, |i, t: Own<'_>| {
            body(i, &mut acc, in_column(t, &planes))
        })
    };
    acc
}

/// A `collapse(n)` nest, lowered: `each_nest(share, [m, p, ..], [plane?], |(i, j, ..), __t| BODY)`, over the
/// thread's tuples; `[m, p, ..]` are the strides of the flat index the body writes, `(i * m + j) * p + k`, and
/// `plane` (where the body writes a column of it, `x * plane + flat`) the column's, computed once.
#[inline(always)]
pub fn each_nest<I: NestShare, const S: usize, const P: usize>(
    share: Exclusive<I>,
    strides: [usize; S],
    planes: [usize; P],
    mut body: impl for<'t> FnMut(I::Item, Own<'t>),
) {
    // SAFETY: as in `reduce_nest`.
    unsafe {
        share
            .0
            .walk(&strides, |i, t: Own<'_>| body(i, in_column(t, &planes)))
    };
}

/// A nest's token, owning its column where the body writes one (`planes` is `[plane]`).
///
/// # Safety
/// `t` is a nest's walk's token for an item of the calling thread's exclusive share, and `planes` the same in every
/// thread of the launch.
#[inline(always)]
unsafe fn in_column<'t, const P: usize>(t: Own<'t>, planes: &[usize; P]) -> Own<'t> {
    match planes.first() {
        // SAFETY: the caller's contract.
        Some(&plane) => unsafe { t.column(plane) },
        None => t,
    }
}

/// A thread's share of a `collapse(n)` nest, as [`each_nest`] and [`reduce_nest`] walk it.
///
/// # Safety
/// `walk` calls `f` once per item of the share, in order, each with the token [`Iteration::own`] gives it.
pub unsafe trait NestShare: Sized {
    /// One item of the share: the tuple of the nest's loop values.
    type Item: Iteration;
    /// Runs `f` on every item with its token.
    ///
    /// # Safety
    /// `self` is the calling thread's [`Exclusive`] share, and `strides` are the same in every thread of the launch.
    unsafe fn walk<const S: usize>(
        self,
        strides: &[usize; S],
        f: impl for<'t> FnMut(Self::Item, Own<'t>),
    );
}

// SAFETY: every item of every run once, in order; a run's tokens are `own`'s, by `Run::own`'s contract or by
// `own` itself.
unsafe impl<N: Nest> NestShare for FlatBlock<N>
where
    N::Item: Iteration,
{
    type Item = N::Item;
    /// Run by run of the innermost loop: where a run's first and last tokens show that its tokens are consecutive
    /// elements, they are made by an add and the run is a plain loop the optimiser vectorises; otherwise item by item.
    #[inline(always)]
    unsafe fn walk<const S: usize>(
        self,
        strides: &[usize; S],
        mut f: impl for<'t> FnMut(Self::Item, Own<'t>),
    ) {
        self.rows(|nest, digits, n| {
            let Some(row) = nest.row(digits, n) else {
                return;
            };
            let run = if N::CONSECUTIVE && n > 0 {
                let mut last = *digits;
                last[MAX_COLLAPSE - 1] += n - 1;
                match (nest.item(digits), nest.item(&last)) {
                    // SAFETY: items of this thread's exclusive share (the caller's contract).
                    (Some(a), Some(b)) => {
                        let (ta, tb) = unsafe { (a.own(strides), b.own(strides)) };
                        ta.run(tb, n - 1, a.inner())
                    }
                    _ => None,
                }
            } else {
                None
            };
            for item in row {
                let t = match run {
                    // SAFETY: `run` came from the run's first and last tokens, and `item` is one of its items.
                    Some(run) => unsafe { run.own(item.inner()) },
                    // SAFETY: an item of this thread's exclusive share.
                    None => unsafe { item.own(strides) },
                };
                f(item, t);
            }
        })
    }
}

// SAFETY: every item once, in order, with `own`'s token.
unsafe impl<N: Nest> NestShare for StridedNest<N>
where
    N::Item: Iteration,
{
    type Item = N::Item;
    #[inline(always)]
    unsafe fn walk<const S: usize>(
        self,
        strides: &[usize; S],
        mut f: impl for<'t> FnMut(Self::Item, Own<'t>),
    ) {
        for item in self {
            // SAFETY: an item of this thread's exclusive share (the caller's contract).
            f(item, unsafe { item.own(strides) });
        }
    }
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

/// A stride or row length of the flat index an iteration writes, computed in the loop's own integer type (C's `int`
/// ports as `i32`): as a `usize`, or 0, which no inner index is below (so nothing is owned and every write fails
/// the region), where it is negative or does not fit.
#[inline(always)]
pub fn stride<T: PrimInt>(x: T) -> usize
where
    usize: TryFrom<T>,
{
    usize::try_from(x).unwrap_or(0)
}

/// What has a length a loop's bounds may use, whatever methods its user adds.
///
/// # Safety
/// `length` returns the same value on every thread for the whole launch and calls no user code.
pub unsafe trait Length {
    /// The number of elements.
    fn length(&self) -> usize;
}

// SAFETY: a slice's length is fixed.
unsafe impl<T> Length for [T] {
    #[inline(always)]
    fn length(&self) -> usize {
        <[T]>::len(self)
    }
}

// SAFETY: an array's length is its type's.
unsafe impl<T, const N: usize> Length for [T; N] {
    #[inline(always)]
    fn length(&self) -> usize {
        N
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

/// What a work-shared loop may share across its iterations of what each thread declared before it (a per-thread
/// `let` the body uses, or one it is made from): a value no iteration can change. The body sees such a value as an
/// immutable copy, and `Copy` is the type-level proof that nothing can change it through `&self` either: interior
/// mutability needs `UnsafeCell` (under `Cell`, `RefCell` and the atomics), which is never `Copy`. A shared reference
/// to one is `Copy` (`Cell::from_mut(&mut x)` is a `&Cell<u32>`), but not `Sync` for `Cell` and `RefCell`, so `Sync` is
/// asked too. (A `&AtomicU32` is both: one made per thread, as `Box::leak` makes one, is not caught.)
// The fix is in the message: where the check sits in a macro's expansion, rustc shows no label or note.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is declared before the work-shared loop and used in it, but it is not `Copy` and `Sync`, so it \
               may have interior mutability (`Cell`, `RefCell`, atomics, or a `&Cell<T>` to one) and each thread would change its own copy: declare it \
               inside the loop, combine per-thread results with `reduction(op: var)`, write shared results through a \
               `&mut [T]` parameter's element or a `&[AtomicT]` parameter, or derive `Clone, Copy` for a plain type"
)]
pub trait AcrossLoop {}
#[diagnostic::do_not_recommend]
impl<T: Copy + Sync> AcrossLoop for T {}

/// The check the lowering places after each `let` whose value a work-shared loop uses (see [`AcrossLoop`]), given
/// its address (a raw one: a reference would have rustc suggest borrowing in the user's pattern).
#[inline(always)]
pub fn across<T: AcrossLoop>(_: *const T) {}
