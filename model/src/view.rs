//! What a `&mut [T]` parameter is inside a parallel region's body, on every target.
//!
//! Every thread of a parallel region runs the body on the same parameters. Handing each a `&mut [T]` over the whole
//! slice would be undefined behaviour even if their writes were disjoint (each `&mut` claims the whole slice), so the
//! lowering gives each thread a [`View`] instead: it has `len()` and element access, and an element can be reached
//! only through an [`Owned`] index, which only the current iteration's [`Own`] token makes, and only for the element
//! that iteration owns. The token is a closure parameter with a name user code cannot write (mixed-site hygiene), so an
//! access the lowering did not rewrite is a type error (no `Index<usize>`), never a race.
//!
//! Why the elements a thread reaches are its own: the loop's bounds are uniform (the macro checks they depend only on
//! the region's parameters and constants), so every thread computes the same iteration space, and [`Exclusive`] wraps
//! only the thread's part of it (the runtime shares it out as a partition). An iteration's own element is its index,
//! or under `collapse(n)` its row-major flat index with strides the region's uniform values give, each inner index
//! below its stride: distinct iterations own distinct elements. `IndexMut` borrows the view mutably, so one thread
//! cannot hold two `&mut` to one element either.
//!
//! `unsafe fn` regions, which keep their threads' writes apart themselves, get an [`UnsafeView`]: indexable by
//! `usize`, one element at a time, so the lowering still never creates overlapping `&mut [T]`.

use core::marker::PhantomData;
use core::ops::{Index, IndexMut};

/// One iteration of a work-shared loop: the elements it owns, `[own, own + len)`: one element (its index, or under
/// `collapse(n)` its flat index), or a row of `len` (a loop over `i` writing `y[i * m + e]`); none (`len` 0) where the
/// loop variable is negative or an index does not fit. Made only by the loop drivers in [`crate::lanes`].
///
/// `'t` is the iteration's: the drivers hand tokens to a closure that takes any lifetime (`for<'t>`), so neither a
/// token nor an index it made can be kept past its iteration, and neither is `Send`, so no other thread gets one.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Own<'t> {
    own: usize,
    len: usize,
    /// Not 0: the iteration owns the column `{ e : e % plane == own }` too ([`Own::column`]).
    plane: usize,
    _iteration: PhantomData<(&'t mut (), *const ())>,
}

/// The tokens of a run of iterations ([`Own::run`]): the flat index less the innermost value.
#[derive(Clone, Copy)]
pub struct Run<'t> {
    base: usize,
    _iteration: PhantomData<(&'t mut (), *const ())>,
}

impl<'t> Run<'t> {
    /// The token of the run's iteration whose innermost value is `inner` (as [`Iteration::inner`] gives it): what
    /// [`Iteration::own`] gives it, without the per-level checks. Written as the outer part plus the value, so that
    /// the optimiser sees `y[j * m + i]`'s check against it as the same for the whole run, and hoists it.
    ///
    /// # Safety
    /// The run's first and last tokens were [`Iteration::own`]'s (with the same strides) for the first and the last
    /// item of a run (the innermost value counting up by one, the outer ones fixed), and `inner` is the value of one
    /// of its items.
    #[inline(always)]
    pub unsafe fn own(self, inner: usize) -> Own<'t> {
        Own::new(self.base.wrapping_add(inner), 1)
    }
}

/// A sub-slice of the elements an iteration owns (a part of its row); only [`Own`] makes one.
#[derive(Clone, Copy)]
pub struct OwnedRange<'t>(usize, usize, PhantomData<(&'t mut (), *const ())>);

/// An element index an iteration owns; only [`Own`] makes one.
#[derive(Clone, Copy)]
pub struct Owned<'t>(usize, PhantomData<(&'t mut (), *const ())>);

impl<'t> Own<'t> {
    const NONE: Own<'static> = Own {
        own: 0,
        len: 0,
        plane: 0,
        _iteration: PhantomData,
    };

    fn new(own: usize, len: usize) -> Self {
        Own {
            own,
            len,
            plane: 0,
            _iteration: PhantomData,
        }
    }

    /// The token of a `collapse(n)` iteration that writes its column `x * plane + flat` (hotspot3D's
    /// `t[k * plane + j * m + i]`): where its flat index `f` (this token's one element) is below `plane`, it owns
    /// every element `e` with `e % plane == f`, `f` among them; otherwise nothing. Distinct iterations have distinct
    /// flat indices, so distinct residues below `plane`: their columns are disjoint, and an iteration whose flat index
    /// is not below the plane (the nest is larger than the plane) fails at its first access.
    ///
    /// # Safety
    /// `self` is [`Iteration::own`]'s token (or [`Run::own`]'s) for an item of the calling thread's [`Exclusive`]
    /// share of a `collapse(n)` nest, and `plane` is the same in every thread of the launch.
    #[inline(always)]
    pub unsafe fn column(self, plane: usize) -> Own<'t> {
        if self.len == 1 && self.own < plane {
            Own { plane, ..self }
        } else {
            Own::NONE
        }
    }

    /// The tokens of a run of a `collapse(n)` nest's iterations that differ only in the innermost loop's value,
    /// which counts up by one, from the run's first token (this one) and its last, `k_last` iterations apart, the
    /// first's innermost value being `first_inner`: where both own one element, `last`'s `k_last` after this one's,
    /// every innermost value between lies between theirs, so below its stride and not negative, and the flat index
    /// grows with it one for one. Otherwise `None`, and the caller asks [`Iteration::own`] item by item.
    #[inline(always)]
    pub fn run(self, last: Own<'t>, k_last: usize, first_inner: usize) -> Option<Run<'t>> {
        let whole = self.len == 1 && last.len == 1 && last.own.wrapping_sub(self.own) == k_last;
        // The flat index is the outer part plus the innermost value, so the first's is at least its value.
        (whole && self.own >= first_inner).then(|| Run {
            base: self.own - first_inner,
            _iteration: PhantomData,
        })
    }

    /// `y[e]`: `e` must be an element this iteration owns. (The lowering calls it by its path,
    /// `Own::at(&token, e)`, so no method a user gives `Own` can stand in for it.)
    #[inline(always)]
    #[track_caller]
    pub fn at(&self, e: usize) -> Owned<'t> {
        // One comparison: `e == own` for a single element; a column's other elements are asked after it.
        if e.wrapping_sub(self.own) >= self.len && (self.plane == 0 || e % self.plane != self.own) {
            not_owned(e, self.own, self.len);
        }
        Owned(e, PhantomData)
    }

    /// `y[x * plane + flat]`, the index written as a column of a `collapse(n)` nest's flat index: where `flat` is
    /// this iteration's own flat index and `plane` its column's, the element is its own unless the index overflows
    /// (then its remainder by `plane` would not be `flat`). A compare the optimiser hoists out of an inner serial
    /// loop, and a multiplication, where [`Own::at`] divides. Anything else is asked of [`Own::at`].
    #[inline(always)]
    #[track_caller]
    pub fn at_column(
        &self,
        x: impl ColumnPart,
        plane: impl ColumnPart,
        flat: impl ColumnPart,
    ) -> Owned<'t> {
        let (x, plane, flat) = (x.get(), plane.get(), flat.get());
        let e = x.checked_mul(plane).and_then(|c| c.checked_add(flat));
        match e {
            Some(e) if self.plane != 0 && plane == self.plane && flat == self.own => {
                Owned(e, PhantomData)
            }
            Some(e) => self.at(e),
            None => not_owned(usize::MAX, self.own, self.len),
        }
    }
}

/// A part of a column index, `x`, `plane` or `flat` in `y[x * plane + flat]`: a `usize` or a reference to one, as
/// the index's own arithmetic takes them.
pub trait ColumnPart {
    /// The value.
    fn get(self) -> usize;
}

impl ColumnPart for usize {
    #[inline(always)]
    fn get(self) -> usize {
        self
    }
}

impl ColumnPart for &usize {
    #[inline(always)]
    fn get(self) -> usize {
        *self
    }
}

impl<'t> Own<'t> {
    /// `y[lo..hi]`: a sub-slice of the row this iteration owns (miniBUDE's `&mut energies[g * w..g * w + w]`).
    /// (The lowering calls it by its path, as [`Own::at`].)
    #[inline(always)]
    #[track_caller]
    pub fn range(&self, r: core::ops::Range<usize>) -> OwnedRange<'t> {
        // An empty range reaches no element, but must still lie in the row (`lo` no further than its end).
        let (lo, hi) = (r.start, r.end);
        let inside = lo <= hi && lo >= self.own && hi - self.own <= self.len;
        if !inside {
            not_owned_range(lo, hi, self.own, self.len);
        }
        OwnedRange(lo, hi, PhantomData)
    }

    /// `y[lo..][..n]`: the sub-slice `lo..lo + n` of the row this iteration owns.
    #[inline(always)]
    #[track_caller]
    pub fn range_len(&self, lo: usize, n: usize) -> OwnedRange<'t> {
        match lo.checked_add(n) {
            Some(hi) => self.range(lo..hi),
            None => not_owned_range(lo, usize::MAX, self.own, self.len),
        }
    }
}

#[cold]
#[inline(never)]
#[track_caller]
fn not_owned_range(lo: usize, hi: usize, own: usize, len: usize) -> ! {
    if len == 0 {
        panic!(
            "offload: elements {lo}..{hi} of a `&mut` parameter are not this iteration's, which owns none: in a \
             work-shared loop writing `y[i * m + e]` or `&mut y[i * m..i * m + m]` each iteration may take a \
             sub-slice of its own row only"
        )
    }
    panic!(
        "offload: elements {lo}..{hi} of a `&mut` parameter are not this iteration's, which owns the row of {len} \
         from {own}: in a work-shared loop writing `y[i * m + e]` or `&mut y[i * m..i * m + m]` each iteration may \
         take a sub-slice of its own row only"
    )
}

#[cold]
#[inline(never)]
#[track_caller]
fn not_owned(e: usize, own: usize, len: usize) -> ! {
    match len {
        0 => panic!(
            "offload: element {e} of a `&mut` parameter is not this iteration's: in a work-shared loop an iteration \
             owns its index (under `collapse(n)`, its flat index `(i * m + j) * p + k`, each inner index below its \
             stride, and in a nest writing `y[x * plane + flat]`, the flat index's column, the flat index below \
             `plane`; in a loop writing `y[i * m + e]`, the row `i * m ..`, `e` below `m`)"
        ),
        1 => panic!(
            "offload: element {e} of a `&mut` parameter is not this iteration's, which owns element {own} (and, \
             written `y[x * plane + flat]`, its column): in a work-shared loop each iteration may touch only its own \
             element",
        ),
        n => panic!(
            "offload: element {e} of a `&mut` parameter is not this iteration's, which owns the row of {n} from {own}: \
             in a work-shared loop each iteration may touch only its own row",
        ),
    }
}

/// A loop variable, or a `collapse(n)` tuple of them, as an iteration token.
pub trait Iteration: Copy {
    /// The elements this iteration owns: for a loop variable `i`, the element `i`, or with `strides` `[m]` the row
    /// `[i * m, i * m + m)`; for a `collapse(n)` tuple, the element at the row-major flat index with `strides`
    /// (`[m, p]` for `(i * m + j) * p + k`), each inner index below its stride. Distinct iterations own disjoint
    /// elements.
    ///
    /// # Safety
    /// A token grants access to its element through any view of the launch: `self` must be an item of the calling
    /// thread's [`Exclusive`] share, and `strides` the same for every thread of the launch.
    unsafe fn own<'t>(self, strides: &[usize]) -> Own<'t>;
    /// The innermost loop's value as an index: a loop variable's (0 where it does not fit a `usize`), a tuple's last.
    fn inner(self) -> usize;
}

macro_rules! iteration_ints {
    ($($t:ty),*) => {$(
        impl Iteration for $t {
            #[inline(always)]
            #[allow(irrefutable_let_patterns)]
            unsafe fn own<'t>(self, strides: &[usize]) -> Own<'t> {
                let Ok(i) = usize::try_from(self) else {
                    return Own::NONE;
                };
                match strides {
                    [] => Own::new(i, 1),
                    // The whole row below `usize::MAX`: `at` compares `e - own` wrapping, so a row past the end
                    // would own the low elements too.
                    [m] => i
                        .checked_mul(*m)
                        .filter(|own| own.checked_add(*m).is_some())
                        .map_or(Own::NONE, |own| Own::new(own, *m)),
                    _ => Own::NONE,
                }
            }
            #[inline(always)]
            fn inner(self) -> usize {
                usize::try_from(self).unwrap_or(0)
            }
        }
    )*};
}
iteration_ints!(u8, u16, u32, u64, usize, i8, i16, i32, i64, isize, u128, i128);

macro_rules! iteration_tuples {
    ($a:ident $av:ident $($t:ident $v:ident $k:tt),+) => {
        impl<$a: Iteration, $($t: Iteration),+> Iteration for ($a, $($t,)+) {
            #[inline(always)]
            unsafe fn own<'t>(self, strides: &[usize]) -> Own<'t> {
                let ($av, $($v,)+) = self;
                // SAFETY: the parts' single elements, combined into the tuple's.
                let first = unsafe { $av.own(&[]) };
                if first.len == 0 {
                    return Own::NONE;
                }
                let mut own = first.own;
                $(
                    // SAFETY: as above.
                    let j = unsafe { $v.own(&[]) };
                    own = match strides.get($k) {
                        Some(&m) if j.len == 1 && j.own < m => {
                            match own.checked_mul(m).and_then(|o| o.checked_add(j.own)) {
                                Some(o) => o,
                                None => return Own::NONE,
                            }
                        }
                        _ => return Own::NONE,
                    };
                )+
                Own::new(own, 1)
            }
            #[inline(always)]
            fn inner(self) -> usize {
                iteration_tuples!(@last self; $av $($v)+).inner()
            }
        }
    };
    (@last $x:expr; $($v:ident)+) => {{
        // Only the last is used.
        #[allow(unused_variables)]
        let ($($v,)+) = $x;
        iteration_tuples!(@pick $($v)+)
    }};
    (@pick $l:ident) => { $l };
    (@pick $f:ident $($r:ident)+) => { iteration_tuples!(@pick $($r)+) };
}
iteration_tuples!(A a B b 0);
iteration_tuples!(A a B b 0, C c 1);
iteration_tuples!(A a B b 0, C c 1, D d 2);
iteration_tuples!(A a B b 0, C c 1, D d 2, E e 3);
iteration_tuples!(A a B b 0, C c 1, D d 2, E e 3, F f 4);

/// A thread's part of a work-shared loop's iteration space, which no other thread of the launch runs.
pub struct Exclusive<I>(pub(crate) I);

impl<I> Exclusive<I> {
    /// Marks `share` as this thread's exclusive part.
    ///
    /// # Safety
    /// `share` is this thread's part of a partition of one iteration space among the launch's threads: what the
    /// runtime's `__share`/`__share_nest` return for bounds every thread computes alike.
    #[inline(always)]
    pub unsafe fn new(share: I) -> Self {
        Exclusive(share)
    }
}

/// A thread's view of a `&mut [T]` parameter in a work-shared loop: `len()`, and the elements its iterations own.
pub struct View<'a, T> {
    ptr: *mut T,
    len: usize,
    _slice: PhantomData<&'a mut [T]>,
}

impl<'a, T> View<'a, T> {
    /// The same view for a shorter borrow: the lowering rebinds a view in each driver call so that its address and
    /// length are the call's own values, which the body's stores cannot change (captured by reference, they would be
    /// reloaded after every store, and the loop would not vectorise).
    #[inline(always)]
    pub fn reborrow(&mut self) -> View<'_, T> {
        View {
            ptr: self.ptr,
            len: self.len,
            _slice: PhantomData,
        }
    }

    /// A view of the `len` elements at `ptr`.
    ///
    /// # Safety
    /// `ptr` is valid for reads and writes of `len` `T`s for `'a` (any value when `len` is 0), and nothing but the
    /// launch's views reaches them meanwhile; every thread of the launch gets its own view and runs its iterations'
    /// tokens only from an [`Exclusive`] share.
    #[inline(always)]
    pub unsafe fn new(ptr: *mut T, len: usize) -> Self {
        View {
            ptr,
            len,
            _slice: PhantomData,
        }
    }

    /// Elements in the viewed slice.
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the viewed slice has no elements.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

#[cold]
#[inline(never)]
#[track_caller]
fn out_of_bounds(index: usize, len: usize) -> ! {
    // The words of a slice's own message, so a view fails as the slice it stands for would.
    panic!("index out of bounds: the len is {len} but the index is {index}")
}

impl<'t, T> Index<Owned<'t>> for View<'_, T> {
    type Output = T;
    #[inline(always)]
    #[track_caller]
    fn index(&self, i: Owned<'t>) -> &T {
        if i.0 >= self.len {
            out_of_bounds(i.0, self.len);
        }
        // SAFETY: in bounds; the element is this iteration's (see the module doc), so no other thread touches it.
        unsafe { &*self.ptr.add(i.0) }
    }
}

impl<'t, T> IndexMut<Owned<'t>> for View<'_, T> {
    #[inline(always)]
    #[track_caller]
    fn index_mut(&mut self, i: Owned<'t>) -> &mut T {
        if i.0 >= self.len {
            out_of_bounds(i.0, self.len);
        }
        // SAFETY: as for `index`; `&mut self` keeps this thread from holding two references to it.
        unsafe { &mut *self.ptr.add(i.0) }
    }
}

impl<'t, T> Index<OwnedRange<'t>> for View<'_, T> {
    type Output = [T];
    #[inline(always)]
    #[track_caller]
    fn index(&self, r: OwnedRange<'t>) -> &[T] {
        if r.1 > self.len {
            out_of_bounds_range(r.0, r.1, self.len);
        }
        if r.0 == r.1 {
            // The view's address may be any value where it is empty.
            return &[];
        }
        // SAFETY: in bounds (`r.0 < r.1`, `Own::range`); the elements are this iteration's (its row's), so no other
        // thread touches them.
        unsafe { core::slice::from_raw_parts(self.ptr.add(r.0), r.1 - r.0) }
    }
}

impl<'t, T> IndexMut<OwnedRange<'t>> for View<'_, T> {
    #[inline(always)]
    #[track_caller]
    fn index_mut(&mut self, r: OwnedRange<'t>) -> &mut [T] {
        if r.1 > self.len {
            out_of_bounds_range(r.0, r.1, self.len);
        }
        if r.0 == r.1 {
            return &mut [];
        }
        // SAFETY: as for `index`; `&mut self` keeps this thread from holding two references into the row.
        unsafe { core::slice::from_raw_parts_mut(self.ptr.add(r.0), r.1 - r.0) }
    }
}

#[cold]
#[inline(never)]
#[track_caller]
fn out_of_bounds_range(lo: usize, hi: usize, len: usize) -> ! {
    // The words of a slice's own message.
    panic!("range end index {hi} out of range for slice of length {len} (the range starts at {lo})")
}

/// A thread's view of a `&mut [T]` parameter in an `unsafe fn` parallel region: any element by `usize` (bounds
/// checked), one at a time; the region's contract is that its threads' accesses do not race.
pub struct UnsafeView<'a, T> {
    ptr: *mut T,
    len: usize,
    _slice: PhantomData<&'a mut [T]>,
}

impl<'a, T> UnsafeView<'a, T> {
    /// The same view for a shorter borrow: the lowering rebinds a view in each driver call so that its address and
    /// length are the call's own values, which the body's stores cannot change (captured by reference, they would be
    /// reloaded after every store, and the loop would not vectorise).
    #[inline(always)]
    pub fn reborrow(&mut self) -> UnsafeView<'_, T> {
        UnsafeView {
            ptr: self.ptr,
            len: self.len,
            _slice: PhantomData,
        }
    }

    /// An unchecked view of the `len` elements at `ptr`.
    ///
    /// # Safety
    /// As [`View::new`], but the region, not the tokens, keeps the threads' accesses apart.
    #[inline(always)]
    pub unsafe fn new(ptr: *mut T, len: usize) -> Self {
        UnsafeView {
            ptr,
            len,
            _slice: PhantomData,
        }
    }

    /// Elements in the viewed slice.
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the viewed slice has no elements.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The first element's address.
    #[inline(always)]
    pub fn as_ptr(&self) -> *const T {
        self.ptr
    }

    /// The first element's address, for writes the region keeps apart itself.
    #[inline(always)]
    pub fn as_mut_ptr(&mut self) -> *mut T {
        self.ptr
    }

    /// The whole slice.
    ///
    /// # Safety
    /// No other thread of the launch reads or writes any of it while the returned borrow lives.
    #[inline(always)]
    pub unsafe fn as_mut_slice(&mut self) -> &mut [T] {
        if self.len == 0 {
            &mut []
        } else {
            // SAFETY: per `new` and the caller's promise.
            unsafe { core::slice::from_raw_parts_mut(self.ptr, self.len) }
        }
    }
}

impl<T> Index<usize> for UnsafeView<'_, T> {
    type Output = T;
    #[inline(always)]
    #[track_caller]
    fn index(&self, i: usize) -> &T {
        if i >= self.len {
            out_of_bounds(i, self.len);
        }
        // SAFETY: in bounds; the region keeps its threads' accesses apart (its `unsafe fn` contract).
        unsafe { &*self.ptr.add(i) }
    }
}

impl<T> IndexMut<usize> for UnsafeView<'_, T> {
    #[inline(always)]
    #[track_caller]
    fn index_mut(&mut self, i: usize) -> &mut T {
        if i >= self.len {
            out_of_bounds(i, self.len);
        }
        // SAFETY: as for `index`.
        unsafe { &mut *self.ptr.add(i) }
    }
}
