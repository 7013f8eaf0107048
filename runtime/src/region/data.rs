//! Device data environments: what `target_data!`, `target_enter_data!`, `target_exit_data!` and `target_update!`
//! expand to. Plugin-independent: every map goes through the map-list walk and the device's present table.

use super::backend;
use super::maplist::{Held, MapArg};
use super::types::DeviceCopy;
use crate::device::{default_device, initial_device, RefKind, Target, OMP_INITIAL_DEVICE};
use offload_model::abi::map_type::{ALWAYS, DELETE, FROM, PRESENT, TO};
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{
    AtomicI16, AtomicI32, AtomicI64, AtomicI8, AtomicIsize, AtomicU16, AtomicU32, AtomicU64,
    AtomicU8, AtomicUsize,
};

/// The device a data construct acts on (`None`: the host, where every map is already satisfied), chosen once for
/// all its variables. Under `MANDATORY` a construct that could not reach a device stops the program.
#[derive(Clone, Copy)]
pub struct DataDevice(Option<Target>);

impl DataDevice {
    /// Chooses the device for `construct` from its `device(..)` and `if(..)` clauses, as a region chooses its own.
    #[track_caller]
    pub fn select(construct: &'static str, device: Option<i32>, cond: bool) -> Self {
        DataDevice(backend::data_target(construct, device, cond))
    }
}

/// What one variable of a `target_data!` region holds: its map-list entries (one, or a mapper struct's fields) and
/// what entering them holds.
struct Entered {
    /// The device holding the entries; `None` on the host, or once exited.
    on: Option<Target>,
    maps: Vec<MapArg>,
    held: Vec<Held>,
    /// The region began during an unwind (inside a destructor): its own exit still copies back.
    began_unwinding: bool,
    /// The data moved inside the block (see `MappedMut`): the exit releases without copying back.
    moved: bool,
    /// Some of the data was present on the device before this entry: its device copy may be newer than the host's.
    present_before: bool,
}

impl Entered {
    #[track_caller]
    /// `ask_present`: whether to look up, before entering, if some of the data was present already (only a
    /// `to` guard's view needs it: the lookups are kept off every other entry).
    fn enter<T: ?Sized + MapTarget>(
        dev: DataDevice,
        p: *const T,
        section: Section,
        map_type: u64,
        ask_present: bool,
    ) -> Self {
        let mut maps = Vec::new();
        // SAFETY: `p` is the guard's borrow of live data (exclusive if the map type writes it).
        unsafe { T::map_args(p, section, map_type, &mut maps) };
        let present_before = ask_present
            && dev.0.is_some_and(|t| {
                maps.iter()
                    .filter(|m| m.size > 0)
                    .any(|m| backend::is_present(t, m))
            });
        let held = match dev.0 {
            // SAFETY: the guard holding this borrows the data until the exit.
            Some(t) => unsafe { backend::enter(t, "target_data!", &maps, RefKind::Structured) },
            None => Vec::new(),
        };
        Entered {
            on: dev.0,
            maps,
            held,
            began_unwinding: std::thread::panicking(),
            moved: false,
            present_before,
        }
    }

    fn exit(&mut self) {
        let Some(t) = self.on.take() else { return };
        // On unwind a release: nothing copied back.
        let unwinding = std::thread::panicking() && !self.began_unwinding;
        let copy = !unwinding && !self.moved;
        let names = ("target_data!", "target_data! exit");
        // SAFETY: the guard still borrows the data (its `Drop` keeps the borrow alive until now).
        let r =
            unsafe { backend::exit(t, names, &self.maps, &self.held, RefKind::Structured, copy) };
        if let (Err(e), false) = (r, unwinding) {
            e.fail("target_data! exit")
        }
    }
}

/// A `map(to: x)` variable of `target_data!`: borrows `x` until the region's exit; the block sees it through
/// [`MappedRef::get`], which cannot outlive the guard.
pub struct MappedRef<'a, T: ?Sized> {
    inner: Entered,
    data: &'a T,
}

impl<'a, T: ?Sized + MapTarget> MappedRef<'a, T> {
    /// Maps `data` (or its `section`) on `dev` with `map_type`, borrowing it until the guard drops.
    #[track_caller]
    pub fn enter(dev: DataDevice, data: &'a T, section: Section, map_type: u64) -> Self {
        MappedRef {
            inner: Entered::enter(dev, data, section, map_type, true),
            data,
        }
    }

    /// The host data, borrowed from the guard.
    pub fn get(&self) -> &T {
        self.data
    }

    /// What the block's name is re-bound to (the same method name as [`MappedMut::rebind`]).
    pub fn rebind(&self) -> &T {
        self.data
    }
}

// Implementing `Drop` on the guard itself (not only on a field) makes the borrow last until the exit.
impl<T: ?Sized> Drop for MappedRef<'_, T> {
    fn drop(&mut self) {
        self.inner.exit()
    }
}

/// A `map(to: x)` slice, as a block that passes `x` on to functions (`f(x)`) sees it: `&mut ToView`, which is `x`'s
/// elements for a `&[T]` parameter and, for a `&mut [T]` one, the device copy's to write (OpenMP's `to` governs only
/// the copy-in). A macro cannot tell `let mut x` from `let x`, so the source stays borrowed shared, and the first
/// `&mut` taken of the view makes a private host copy of the elements (a shadow), maps it as the source is mapped,
/// and stands for it from then on: regions called with the view write the shadow's device copy (or, on the host,
/// the shadow), later calls read those writes, and the exit discards them with the shadow. The source is never
/// written.
///
/// ```
/// use offload::{target, target_data};
///
/// #[target]
/// fn scale(x: &mut [f32]) {
///     for v in x.iter_mut() {
///         *v *= 2.0;
///     }
/// }
///
/// #[target]
/// fn total(x: &[f32]) -> f32 {
///     x.iter().sum()
/// }
///
/// # // A doctest has no device image: the host stands in.
/// # offload::omp_set_default_device(offload::omp_get_initial_device());
/// let x = vec![1.0f32; 4]; // not `mut`
/// target_data!(map(to: x) => {
///     scale(x); // writes the device copy
///     assert_eq!(total(x), 8.0);
///     assert_eq!(x.len(), 4);
/// });
/// assert_eq!(x, [1.0; 4]); // never written
/// ```
pub struct ToView<'a, T> {
    source: &'a [T],
    shadow: Option<Shadow<T>>,
    dev: DataDevice,
    section: Section,
    map_type: u64,
    /// The source was present on the device before the construct: its device copy may hold writes the host copy
    /// (and so a private copy made from it) lacks.
    present_before: bool,
}

/// The view's private copy of its source, mapped on the construct's device until the view drops.
struct Shadow<T> {
    data: Box<[T]>,
    entered: Option<Entered>,
}

impl<T> Drop for Shadow<T> {
    fn drop(&mut self) {
        if let Some(e) = &mut self.entered {
            e.exit()
        }
    }
}

// SAFETY: through `&ToView` only the elements are read (`Deref`); the shadow's entries (addresses, and the device
// they are on) are used only by `&mut ToView` and the drop.
unsafe impl<T: Sync> Sync for ToView<'_, T> {}
// SAFETY: as above; the shadow owns its elements, and its entries may be exited from any thread (the device table
// and libomptarget take their own locks).
unsafe impl<T: Sync + Send> Send for ToView<'_, T> {}

impl<T> std::ops::Deref for ToView<'_, T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        match &self.shadow {
            Some(s) => &s.data,
            None => self.source,
        }
    }
}

impl<T: Copy> std::ops::DerefMut for ToView<'_, T>
where
    [T]: MapTarget,
{
    #[track_caller]
    fn deref_mut(&mut self) -> &mut [T] {
        if self.shadow.is_none() && self.present_before {
            panic!(
                "offload: target_data!: a `map(to: ..)` slice passed on as `&mut [T]` was already present on the \
                 device when the construct began, so its device copy may be newer than the host's, from which a \
                 private copy would be made: declare the source `let mut` and pass `&mut x` (the region then writes \
                 the present copy), or map it `tofrom` in the construct that made it present"
            );
        }
        // The source's `present` and `always` are for the source: the copy is new.
        let map_type = self.map_type & !(PRESENT | ALWAYS);
        let (dev, section) = (self.dev, self.section);
        let source = self.source;
        let shadow = self.shadow.get_or_insert_with(|| Shadow {
            data: source.into(),
            entered: None,
        });
        if shadow.entered.is_none() {
            // Entered where it stays (a `Box` moved after its address was taken would be retagged).
            let at: *const [T] = &*shadow.data;
            shadow.entered = Some(Entered::enter(dev, at, section, map_type, false));
        }
        &mut shadow.data
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for ToView<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        (**self).fmt(f)
    }
}

impl<T, U> PartialEq<[U]> for ToView<'_, T>
where
    T: PartialEq<U>,
{
    fn eq(&self, other: &[U]) -> bool {
        **self == *other
    }
}

impl<T, U, const N: usize> PartialEq<[U; N]> for ToView<'_, T>
where
    T: PartialEq<U>,
{
    fn eq(&self, other: &[U; N]) -> bool {
        **self == other[..]
    }
}

impl<T, U> PartialEq<Vec<U>> for ToView<'_, T>
where
    T: PartialEq<U>,
{
    fn eq(&self, other: &Vec<U>) -> bool {
        **self == other[..]
    }
}

// The comparisons the `&[T]` it stands in for has (`assert_eq!(x, [1, 2])`, `x == v`; `x == &s[..]` is std's).
macro_rules! view_eq {
    ($($view:ty),*) => {$(
        impl<T: PartialEq<U>, U, const N: usize> PartialEq<[U; N]> for $view {
            fn eq(&self, other: &[U; N]) -> bool {
                ***self == other[..]
            }
        }
        impl<T: PartialEq<U>, U> PartialEq<Vec<U>> for $view {
            fn eq(&self, other: &Vec<U>) -> bool {
                ***self == other[..]
            }
        }
    )*};
}
view_eq!(&ToView<'_, T>, &mut ToView<'_, T>);

// And with the view on the right (`assert_eq!(v, x)`), and two views.
macro_rules! eq_view {
    ($($other:ty),*) => {$(
        impl<T: PartialEq<U>, U> PartialEq<&ToView<'_, U>> for $other {
            fn eq(&self, other: &&ToView<'_, U>) -> bool {
                self[..] == ***other
            }
        }
        impl<T: PartialEq<U>, U> PartialEq<&mut ToView<'_, U>> for $other {
            fn eq(&self, other: &&mut ToView<'_, U>) -> bool {
                self[..] == ***other
            }
        }
    )*};
}
eq_view!(Vec<T>, [T], &[T]);

impl<T: PartialEq<U>, U> PartialEq<ToView<'_, U>> for ToView<'_, T> {
    fn eq(&self, other: &ToView<'_, U>) -> bool {
        **self == **other
    }
}

// A nested construct or update of the name maps what it stands for (the source, or the private copy).
impl<T: DeviceCopy> MapSource for ToView<'_, T> {
    type Target = [T];
    fn map_ref(&self) -> &[T] {
        self
    }
}

impl<T> AsRef<[T]> for ToView<'_, T> {
    fn as_ref(&self) -> &[T] {
        self
    }
}

impl<'v, T> IntoIterator for &'v ToView<'_, T> {
    type Item = &'v T;
    type IntoIter = std::slice::Iter<'v, T>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl<'v, T> IntoIterator for &'v mut ToView<'_, T> {
    type Item = &'v T;
    type IntoIter = std::slice::Iter<'v, T>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl<'a, T> MappedRef<'a, [T]> {
    /// What a block that passes the slice on to functions is re-bound to (through [`Rebind`]).
    pub fn view(&mut self, dev: DataDevice, section: Section, map_type: u64) -> ToView<'a, T> {
        ToView {
            source: self.data,
            shadow: None,
            dev,
            section,
            map_type,
            present_before: self.inner.present_before,
        }
    }
}

/// `view` where the guard holds no slice (a value, a mapper struct) or holds it exclusively: what `rebind` gives.
pub trait ViewFallback {
    /// What the block's name is re-bound to.
    type View<'s>
    where
        Self: 's;
    /// The same as the guard's `rebind`.
    fn view(&mut self, dev: DataDevice, section: Section, map_type: u64) -> Self::View<'_>;
}

impl<'a, T: ?Sized> ViewFallback for MappedRef<'a, T> {
    type View<'s>
        = &'a T
    where
        Self: 's;
    fn view(&mut self, _: DataDevice, _: Section, _: u64) -> &'a T {
        self.data
    }
}

impl<T: ?Sized + MapTarget> ViewFallback for MappedMut<'_, T> {
    type View<'s>
        = &'s mut T
    where
        Self: 's;
    fn view(&mut self, _: DataDevice, _: Section, _: u64) -> &mut T {
        self.get_mut()
    }
}

/// The block's name from what `view` gave: a [`ToView`] by `&mut`, a reference as it is.
pub trait Rebind<'v> {
    /// The name's type.
    type Out;
    /// Re-binds.
    fn rebind(&'v mut self) -> Self::Out;
}

impl<'v, 'a: 'v, T> Rebind<'v> for ToView<'a, T> {
    type Out = &'v mut ToView<'a, T>;
    fn rebind(&'v mut self) -> Self::Out {
        self
    }
}

impl<'v, 'r, T: ?Sized> Rebind<'v> for &'r T {
    type Out = &'r T;
    fn rebind(&'v mut self) -> &'r T {
        self
    }
}

impl<'v, 'r: 'v, T: ?Sized> Rebind<'v> for &'r mut T {
    type Out = &'v mut T;
    fn rebind(&'v mut self) -> &'v mut T {
        self
    }
}

/// A `map(to: x)` source borrowed shared: the block sees `&T` (the block does not write `x`, and the source is
/// not a `&mut`).
pub struct SharedSrc<'a, T: ?Sized>(&'a T);

/// A `map(to: x)` source borrowed exclusively: the block sees `&mut T` and may write the host copy (OpenMP's `to`
/// governs only the copy-in; `target_update!(to: x)` refreshes the device copy).
pub struct ExclSrc<'a, T: ?Sized>(&'a mut T);

/// `x.map_to()` on a source that is not a `&mut`: a shared borrow, so an immutable `let x` still maps `to`.
/// Implemented for every type, the bound on the method: a source that is not one gets `MapSource`'s message.
pub trait MapToShared {
    /// Borrows the source shared, for a `map(to: x)` the block only reads.
    fn map_to(&self) -> SharedSrc<'_, <Self as MapSource>::Target>
    where
        Self: MapSource,
    {
        SharedSrc(self.map_ref())
    }
}
impl<S: ?Sized> MapToShared for S {}

/// `x.map_write()`: [`MapSourceMut::map_mut`] for every type, the bound on the method, so a source that cannot be
/// written gets `MapSourceMut`'s message rather than "method not found".
pub trait MapWrite {
    /// Borrows the source exclusively, for a map or update that writes the host copy.
    fn map_write(&mut self) -> &mut <Self as MapSource>::Target
    where
        Self: MapSourceMut,
    {
        self.map_mut()
    }
}
impl<S: ?Sized> MapWrite for S {}

/// `x.map_to()` on a `&mut` source: method resolution picks this one (its receiver is the `&mut` itself), and
/// reborrowing a `&mut` needs no `let mut`, so the block may pass `x` on to `&mut` parameters.
pub trait MapToExcl: MapSourceMut {
    /// Borrows the `&mut` source exclusively, for a `map(to: x)` the block may write.
    fn map_to(&mut self) -> ExclSrc<'_, Self::Target> {
        ExclSrc(self.map_mut())
    }
}
impl<S: MapSourceMut + ?Sized> MapToExcl for S {}

/// Enters a `map(to: x)` variable with the guard its borrow calls for.
pub trait EnterTo<'a> {
    /// [`MappedRef`] for a shared borrow, [`MappedMut`] for an exclusive one.
    type Guard;
    /// Maps the borrowed source on `dev` and returns the guard that exits it.
    fn enter_to(self, dev: DataDevice, section: Section, map_type: u64) -> Self::Guard;
}

impl<'a, T: ?Sized + MapTarget> EnterTo<'a> for SharedSrc<'a, T> {
    type Guard = MappedRef<'a, T>;
    #[track_caller]
    fn enter_to(self, dev: DataDevice, section: Section, map_type: u64) -> MappedRef<'a, T> {
        MappedRef::enter(dev, self.0, section, map_type)
    }
}

impl<'a, T: ?Sized + MapTarget> EnterTo<'a> for ExclSrc<'a, T> {
    type Guard = MappedMut<'a, T>;
    #[track_caller]
    fn enter_to(self, dev: DataDevice, section: Section, map_type: u64) -> MappedMut<'a, T> {
        MappedMut::enter(dev, self.0, section, map_type)
    }
}

/// A `map(from|tofrom|alloc: y)` variable of `target_data!`: borrows `y` exclusively until the region's exit, which
/// copies back into it; the block sees it through [`MappedMut::get_mut`], which cannot outlive the guard.
pub struct MappedMut<'a, T: ?Sized> {
    inner: Entered,
    data: *mut T,
    /// The entries `data` has at the exit: the block holds `&mut T`, with which it may move what the entries point
    /// at (replace a mapper struct's `Vec` field, re-point a slice field).
    again: Box<dyn Fn() -> Vec<MapArg> + 'a>,
    _borrow: PhantomData<&'a mut T>,
}

impl<'a, T: ?Sized + MapTarget> MappedMut<'a, T> {
    /// Maps `data` (or its `section`) on `dev` with `map_type`, borrowing it exclusively until the guard drops.
    #[track_caller]
    pub fn enter(dev: DataDevice, data: &'a mut T, section: Section, map_type: u64) -> Self {
        let data: *mut T = data;
        MappedMut {
            inner: Entered::enter(dev, data, section, map_type, false),
            data,
            again: Box::new(move || {
                let mut maps = Vec::new();
                // SAFETY: called at the exit, when the guard's exclusive borrow is live and the block's are over.
                unsafe { T::map_args(data, section, map_type, &mut maps) };
                maps
            }),
            _borrow: PhantomData,
        }
    }

    /// The host data, borrowed exclusively from the guard.
    pub fn get_mut(&mut self) -> &mut T {
        // SAFETY: the guard holds the exclusive borrow; the runtime touches the data only at entry and exit.
        unsafe { &mut *self.data }
    }

    /// What the block's name is re-bound to (the same method name as [`MappedRef::rebind`]).
    pub fn rebind(&mut self) -> &mut T {
        self.get_mut()
    }
}

impl<T: ?Sized> Drop for MappedMut<'_, T> {
    fn drop(&mut self) {
        if self.inner.on.is_none() {
            return; // on the host: nothing entered
        }
        // Data the block moved: copying the device values back would write into memory the variable no longer
        // owns (a `Vec` it dropped). The exit releases the entries without copying, and says so.
        let now = (self.again)();
        let same = now.len() == self.inner.maps.len()
            && now
                .iter()
                .zip(&self.inner.maps)
                .all(|(a, b)| (a.begin, a.size) == (b.begin, b.size));
        self.inner.moved = !same;
        self.inner.exit();
        if !same && !std::thread::panicking() {
            panic!(
                "offload: target_data!: a mapped variable's data moved inside the block (a mapper struct's `Vec` \
                 field replaced, or a slice field re-pointed); its device copy was released without copying back"
            )
        }
    }
}

/// `target_update!(to: x)` for one variable; data that is not mapped is left alone.
#[track_caller]
pub fn update_to<T: ?Sized + MapTarget>(dev: DataDevice, data: &T, section: Section) {
    let mut maps = Vec::new();
    // SAFETY: `data` is borrowed for the call.
    unsafe { T::map_args(data, section, TO, &mut maps) };
    for m in maps {
        // SAFETY: as above.
        unsafe { update_one(dev, m) }
    }
}

/// `target_update!(from: y)` for one variable: borrowed exclusively, or shared where it is integer atomics.
#[track_caller]
pub fn update_from<D: UpdateDest>(dev: DataDevice, data: D, section: Section) {
    let mut maps = Vec::new();
    // SAFETY: `dest` is writable for the call (see `UpdateDest`).
    unsafe { D::Target::map_args(data.dest(), section, FROM, &mut maps) };
    for m in maps {
        // SAFETY: as above.
        unsafe { update_one(dev, m) }
    }
}

/// Where `target_update!(from: ..)` writes: an exclusive borrow, or a shared one of integer atomics, which the copy
/// writes with atomic stores (the map type's `HOST_ATOMIC` bits, from the atomics' `DeviceCopy`).
///
/// # Safety
/// `dest` points at data that may be written, as its map type says, while `self`'s borrow lasts.
pub unsafe trait UpdateDest {
    /// The data written.
    type Target: ?Sized + MapTarget;
    /// Where it is.
    fn dest(self) -> *const Self::Target;
}

// SAFETY: an exclusive borrow may be written.
unsafe impl<T: ?Sized + MapTarget> UpdateDest for &mut T {
    type Target = T;
    fn dest(self) -> *const T {
        // Through `*mut`: a `&mut` coerced straight to `*const` may only read (Stacked Borrows), and an owning
        // mapper struct's entries are taken through `&mut` of its `Vec`s.
        std::ptr::from_mut(self).cast_const()
    }
}

/// A shared borrow of integer atomics, written through with atomic stores.
pub struct AtomicDest<'a, T: ?Sized>(&'a T);

// SAFETY: atomics may be stored to through a shared borrow; `HostAtomic` types are integer atomics (at any array
// depth), whose `DeviceCopy::HOST_ATOMIC` makes the copy store element by element, atomically.
unsafe impl<T: ?Sized + MapTarget + HostAtomic> UpdateDest for AtomicDest<'_, T> {
    type Target = T;
    fn dest(self) -> *const T {
        self.0
    }
}

/// Integer atomics, arrays of them and slices of those: data a shared borrow may write.
///
/// # Safety
/// Every byte belongs to an integer atomic, and the type's `DeviceCopy::HOST_ATOMIC` (its elements', for a slice) is
/// that atomic's size.
pub unsafe trait HostAtomic {}

macro_rules! host_atomics {
    ($($t:ty),*) => {$(
        // SAFETY: an integer atomic, whose `HOST_ATOMIC` is its size (`region::types`).
        unsafe impl HostAtomic for $t {}
        impl MapSource for $t {
            type Target = $t;
            fn map_ref(&self) -> &$t { self }
        }
    )*};
}
host_atomics!(
    AtomicU8,
    AtomicU16,
    AtomicU32,
    AtomicU64,
    AtomicUsize,
    AtomicI8,
    AtomicI16,
    AtomicI32,
    AtomicI64,
    AtomicIsize
);
// SAFETY: elements laid out one after another, each `HostAtomic`; `[T; N]`'s `HOST_ATOMIC` is `T`'s.
unsafe impl<T: HostAtomic, const N: usize> HostAtomic for [T; N] {}
// SAFETY: as for arrays; a slice's map entry takes its elements' `HOST_ATOMIC`.
unsafe impl<T: HostAtomic> HostAtomic for [T] {}

/// `x.map_write()` on integer atomics (a `#[declare_target] static HITS: AtomicU32`, a `&[AtomicU32]`): method
/// resolution tries this `&self` method before [`MapWrite`]'s `&mut self` one, so `target_update!(from: HITS)`
/// needs no exclusive borrow where the stores are atomic.
pub trait MapWriteAtomic: MapSource {
    /// Borrows the atomics shared, for an update that stores to them.
    fn map_write(&self) -> AtomicDest<'_, Self::Target>
    where
        Self::Target: HostAtomic,
    {
        AtomicDest(self.map_ref())
    }
}

impl<S: MapSource + ?Sized> MapWriteAtomic for S where S::Target: HostAtomic {}

#[track_caller]
unsafe fn update_one(dev: DataDevice, m: MapArg) {
    if let Some(t) = dev.0 {
        // SAFETY: per the callers.
        unsafe { backend::update(t, m) }
    }
}

/// A buffer `target_enter_data!` mapped (OpenMP's `target enter data`): owns it, so its memory can be neither freed
/// nor reused while the mapping lives. Derefs to the host copy. Dropping it exits with `release` (no copy back);
/// [`Mapped::exit_from`] copies back, [`Mapped::exit_delete`] removes the mapping whatever its reference count. A
/// forgotten `Mapped` leaks its buffer too.
pub struct Mapped<V: MapOwner> {
    value: Option<V>,
    /// The device holding the entry; `None` on the host.
    on: Option<Target>,
    /// The device number the entry named (the default device if it named none), for `target_exit_data!(device(..))`.
    named: i32,
}

/// What `target_enter_data!` takes by value: an owned buffer whose heap address does not move (`Vec<T>`,
/// `Box<[T]>`, or `Box<T>` of a single `DeviceCopy` value).
///
/// # Safety
/// The references returned must be the value's own heap storage, at one address for the value's whole life and freed
/// only when it is dropped: `Mapped` relies on it to keep the mapping's host memory alive.
#[diagnostic::on_unimplemented(
    message = "`target_enter_data!` takes an owned buffer by value, not `{Self}`",
    label = "not a `Vec<T>`, `Box<[T]>` or `Box<T>` of `T: offload::DeviceCopy`",
    note = "the `Mapped` it returns owns the buffer so its memory stays put while mapped; to map borrowed data, use \
            `target_data!`, or enter it in a data scope: `offload::data_scope(|s| {{ let m = \
            target_enter_data!(map(to: r), scope(s)); .. }})`"
)]
pub unsafe trait MapOwner {
    /// What `Mapped` derefs to: a slice, or the boxed value.
    type Target: ?Sized + MapOne;
    /// The owned storage.
    fn target(&self) -> &Self::Target;
    /// The owned storage, mutably (never reallocated).
    fn target_mut(&mut self) -> &mut Self::Target;
}

// SAFETY: a Vec's buffer moves only when it grows, which `Mapped` never lets happen.
unsafe impl<T: DeviceCopy> MapOwner for Vec<T> {
    type Target = [T];
    fn target(&self) -> &[T] {
        self
    }
    fn target_mut(&mut self) -> &mut [T] {
        self
    }
}

// SAFETY: a boxed slice's storage never moves.
unsafe impl<T: DeviceCopy> MapOwner for Box<[T]> {
    type Target = [T];
    fn target(&self) -> &[T] {
        self
    }
    fn target_mut(&mut self) -> &mut [T] {
        self
    }
}

// SAFETY: a box's storage never moves. (A zero-sized `T` is never mapped: empty data skips the table.)
unsafe impl<T: DeviceCopy> MapOwner for Box<T> {
    type Target = T;
    fn target(&self) -> &T {
        self
    }
    fn target_mut(&mut self) -> &mut T {
        self
    }
}

/// What `target_enter_data!` accepts; the error for anything else names the owned buffers it takes. (The bound on
/// `Mapped` itself would repeat the error at every use of the value.)
#[diagnostic::on_unimplemented(
    message = "`target_enter_data!` takes an owned buffer by value, not `{Self}`",
    label = "not a `Vec<T>`, `Box<[T]>` or `Box<T>` of `T: offload::DeviceCopy`",
    note = "the `Mapped` it returns owns the buffer so its memory stays put while mapped; to map borrowed data, use \
            `target_data!`, or enter it in a data scope: `offload::data_scope(|s| {{ let m = \
            target_enter_data!(map(to: r), scope(s)); .. }})`"
)]
pub trait EnterData {
    /// The buffer the [`Mapped`] will own.
    type Owner: MapOwner;
    /// The buffer itself.
    fn into_owner(self) -> Self::Owner;
}

impl<V: MapOwner> EnterData for V {
    type Owner = V;
    fn into_owner(self) -> V {
        self
    }
}

/// `target_enter_data!(map(..: v))`.
#[track_caller]
pub fn enter_data<V: EnterData>(
    value: V,
    map_type: u64,
    device: Option<i32>,
    cond: bool,
) -> Mapped<V::Owner> {
    Mapped::enter(value.into_owner(), map_type, device, cond)
}

/// What `target_exit_data!` accepts: a `Mapped`.
#[diagnostic::on_unimplemented(
    message = "`target_exit_data!` takes the `Mapped` value `target_enter_data!` returned, not `{Self}`",
    label = "not entered by `target_enter_data!`",
    note = "`let m = target_enter_data!(map(to: v));` .. `let v = target_exit_data!(map(from: m));`"
)]
pub trait ExitData {
    /// The buffer the exit returns.
    type Owner;
    /// Exits with `map_type` on the entry's device (`device`, if given, must name it) and returns the buffer.
    fn exit_data(self, map_type: u64, device: Option<i32>) -> Self::Owner;
}

impl<V: MapOwner> ExitData for Mapped<V> {
    type Owner = V;
    #[track_caller]
    fn exit_data(self, map_type: u64, device: Option<i32>) -> V {
        self.exit_on(map_type, device)
    }
}

/// `target_exit_data!(map(..: m), device(..))`.
#[track_caller]
pub fn exit_data<M: ExitData>(mapped: M, map_type: u64, device: Option<i32>) -> M::Owner {
    mapped.exit_data(map_type, device)
}

/// A `target_exit_data!(device(..))` clause must name the device the entry named (`named`, normalized).
#[track_caller]
pub(super) fn exit_device(device: Option<i32>, named: i32) {
    if let Some(d) = device.map(normalize_device) {
        if d != named {
            panic!(
                "offload: target_exit_data! names device {d}, but the data was entered on device {named}; exit on the \
                 device of the entry (or leave out `device(..)`)"
            );
        }
    }
}

/// A device number as OpenMP compares them: `omp_initial_device` (-1) is `omp_get_initial_device()`.
pub(super) fn normalize_device(d: i32) -> i32 {
    if d == OMP_INITIAL_DEVICE {
        initial_device()
    } else {
        d
    }
}

impl<V: MapOwner> Mapped<V> {
    /// `target_enter_data!(map(TYPE: v))`: maps `v` with `map_type` (to or alloc, and modifiers).
    #[track_caller]
    pub fn enter(mut value: V, map_type: u64, device: Option<i32>, cond: bool) -> Self {
        let named = normalize_device(device.unwrap_or_else(default_device));
        let on = backend::data_target("target_enter_data!", device, cond);
        if let Some(t) = on {
            let m = V::Target::map_one(value.target_mut(), None, map_type);
            // SAFETY: `value` is owned by the returned `Mapped` for as long as the mapping can live.
            unsafe { backend::enter(t, "target_enter_data!", &[m], RefKind::Dynamic) };
        }
        Mapped {
            value: Some(value),
            on,
            named,
        }
    }

    /// `target_exit_data!` with `map_type` (from, release or delete, and modifiers); returns the buffer. A
    /// `device(..)` clause must name the device the entry named.
    #[track_caller]
    pub fn exit_on(mut self, map_type: u64, device: Option<i32>) -> V {
        exit_device(device, self.named);
        // `value` leaves only here, which consumes the `Mapped`, and in `drop`.
        let mut value = self.value.take().expect("present until exit");
        if let Some(t) = self.on {
            let m = V::Target::map_one(value.target_mut(), None, map_type);
            let names = ("target_exit_data!", "target_exit_data!");
            // SAFETY: we own the buffer; `from` writes into it through `&mut`.
            unsafe { backend::exit(t, names, &[m], &[exit_held(&m)], RefKind::Dynamic, true) }
                .unwrap_or_else(|e| e.fail("target_exit_data!"));
        }
        value
    }

    /// `target_exit_data!` with `map_type` (from, release or delete, and modifiers); returns the buffer.
    #[track_caller]
    pub fn exit(self, map_type: u64) -> V {
        self.exit_on(map_type, None)
    }

    /// Exits with `from`: copies the device data back if this was the last reference.
    #[track_caller]
    pub fn exit_from(self) -> V {
        self.exit(FROM)
    }

    /// Exits with `delete`: removes the mapping whatever its reference count, copying nothing.
    #[track_caller]
    pub fn exit_delete(self) -> V {
        self.exit(DELETE)
    }

    /// The device the data is mapped on, if any.
    pub fn device(&self) -> Option<i32> {
        self.on.map(Target::number)
    }
}

/// What a dynamic exit undoes for a whole buffer: its table entry (an empty buffer was never mapped).
fn exit_held(m: &MapArg) -> Held {
    if m.base_size == 0 {
        Held::Nothing
    } else {
        Held::Table
    }
}

impl<V: MapOwner> Drop for Mapped<V> {
    fn drop(&mut self) {
        if let (Some(value), Some(t)) = (self.value.as_mut(), self.on) {
            let m = V::Target::map_one(value.target_mut(), None, 0);
            let names = ("Mapped drop", "Mapped drop (release)");
            // SAFETY: we own the buffer; `release` copies nothing but atomics a region wrote, stored atomically.
            let _ =
                unsafe { backend::exit(t, names, &[m], &[exit_held(&m)], RefKind::Dynamic, false) };
        }
    }
}

impl<V: MapOwner> Deref for Mapped<V> {
    type Target = V::Target;
    fn deref(&self) -> &V::Target {
        // `value` leaves only in `exit_on`, which consumes the `Mapped`, and in `drop`: never while it is borrowed.
        self.value.as_ref().expect("present until exit").target()
    }
}

impl<V: MapOwner> DerefMut for Mapped<V> {
    fn deref_mut(&mut self) -> &mut V::Target {
        // As in `deref`.
        self.value
            .as_mut()
            .expect("present until exit")
            .target_mut()
    }
}

/// A data source a data construct may name: `Vec<T>`, arrays, slices, `&[T]`, `&mut [T]`, `Mapped<V>`, and
/// `DeviceCopy` scalars; `target_data!` re-binds the name to [`MapSource::Target`] by reference.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be mapped by a data construct",
    label = "not a mappable buffer",
    note = "map a `Vec<T>`, `Box<[T]>`, an array, a slice, a `Mapped`, a reference to one of these, or a number, with \
            `T: offload::DeviceCopy` (numbers, arrays of them, `#[declare_target]` `#[repr(C)]` structs)"
)]
pub trait MapSource {
    /// The data mapped: a slice, or a single value.
    type Target: ?Sized + MapTarget;
    /// The data, borrowed shared.
    fn map_ref(&self) -> &Self::Target;
}

/// A writable data source (`from`, `tofrom`, `alloc` in `target_data!`, `target_update!(from: ..)`).
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be written by a data construct",
    label = "`from`, `tofrom`, `alloc` and `target_update!(from: ..)` write the host copy here",
    note = "the source must be owned and mutable (`let mut v`) or a `&mut`; a `&` borrow can only be mapped `to` \
            or updated `to`"
)]
pub trait MapSourceMut: MapSource {
    /// The data, borrowed exclusively.
    fn map_mut(&mut self) -> &mut Self::Target;
}

/// A section `[lo, hi)` (`hi` `None`: to the end), or `None` for all of the data.
pub type Section = Option<(usize, Option<usize>)>;

/// What a source re-binds to: a slice, a single `DeviceCopy` value, or a mapper struct (`#[derive(Mapper)]`, whose
/// slice and reference fields are its entries).
pub trait MapTarget {
    /// Pushes the map-list entries for all of it, or for a section of a slice.
    ///
    /// # Safety
    /// `this` points to live data, borrowed (exclusively, or shared for `HostAtomic` data, if `map_type` writes the
    /// host copy) while the entries are used.
    unsafe fn map_args(this: *const Self, section: Section, map_type: u64, out: &mut Vec<MapArg>);
}

/// What `target_enter_data!` maps: one entry, a slice or a single value.
pub trait MapOne {
    /// The map-list entry for all of it, or for a section of a slice.
    fn map_one(this: *const Self, section: Section, map_type: u64) -> MapArg;
}

impl<T: ?Sized + MapOne> MapTarget for T {
    #[track_caller]
    unsafe fn map_args(this: *const Self, section: Section, map_type: u64, out: &mut Vec<MapArg>) {
        out.push(T::map_one(this, section, map_type))
    }
}

impl<T: DeviceCopy> MapOne for [T] {
    #[track_caller]
    fn map_one(this: *const Self, section: Section, map_type: u64) -> MapArg {
        match section {
            Some((lo, hi)) => MapArg::section(this, lo, hi.unwrap_or(this.len()), map_type),
            None => MapArg::slice(this, map_type),
        }
    }
}

/// A single value: a number, an array, a `#[declare_target]` struct.
impl<T: DeviceCopy> MapOne for T {
    #[track_caller]
    fn map_one(this: *const Self, section: Section, map_type: u64) -> MapArg {
        assert!(
            section.is_none(),
            "offload: a section needs a slice, not a `{}`",
            std::any::type_name::<T>()
        );
        MapArg::object(this, map_type)
    }
}

macro_rules! scalar_sources {
    ($($t:ty),*) => {$(
        impl MapSource for $t {
            type Target = $t;
            fn map_ref(&self) -> &$t { self }
        }
        impl MapSourceMut for $t {
            fn map_mut(&mut self) -> &mut $t { self }
        }
    )*};
}
scalar_sources!(u8, u16, u32, u64, u128, usize, i8, i16, i32, i64, i128, isize, f32, f64);

macro_rules! slice_sources {
    ($([$($g:tt)*] $t:ty),*) => {$(
        impl<$($g)*> MapSource for $t {
            type Target = [T];
            fn map_ref(&self) -> &[T] { self }
        }
        impl<$($g)*> MapSourceMut for $t {
            fn map_mut(&mut self) -> &mut [T] { self }
        }
    )*};
}
slice_sources!(
    [T: DeviceCopy] Vec<T>,
    [T: DeviceCopy] Box<[T]>,
    [T: DeviceCopy] [T],
    [T: DeviceCopy, const N: usize] [T; N]
);

// References to sources: a re-bound `&mut [T]`, a `&mut Vec<T>` from a pattern, a `&[T]` parameter.
impl<S: MapSource + ?Sized> MapSource for &S {
    type Target = S::Target;
    fn map_ref(&self) -> &S::Target {
        (**self).map_ref()
    }
}

impl<S: MapSource + ?Sized> MapSource for &mut S {
    type Target = S::Target;
    fn map_ref(&self) -> &S::Target {
        (**self).map_ref()
    }
}

impl<S: MapSourceMut + ?Sized> MapSourceMut for &mut S {
    fn map_mut(&mut self) -> &mut S::Target {
        (**self).map_mut()
    }
}

impl<V: MapOwner> MapSource for Mapped<V> {
    type Target = V::Target;
    fn map_ref(&self) -> &V::Target {
        self
    }
}

impl<V: MapOwner> MapSourceMut for Mapped<V> {
    fn map_mut(&mut self) -> &mut V::Target {
        self
    }
}
