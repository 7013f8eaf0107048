//! Device data environments: what `target_data!` expands to (its guards, and the view a `map(to: ..)` slice is
//! passed on as), and, re-exported from their own modules, what `target_enter_data!`/`target_exit_data!`
//! (`mapped.rs`) and `target_update!` (`update.rs`) expand to, and the sources all of them name (`source.rs`). Every
//! map goes through the runtime the program runs on (`backend.rs`).

use super::backend;
pub use super::backend::DataDevice;
use super::maplist::{Held, MapArg};
pub use super::mapped::{enter_data, exit_data, MapOwner, Mapped};
pub use super::source::{MapSource, MapSourceMut, MapTarget, Section};
use super::types::DeviceCopy;
pub use super::update::{update_from, update_to, MapWriteAtomic};
use crate::device::{RefKind, Target};
use offload_model::abi::map_type::{ALWAYS, PRESENT};
use std::marker::PhantomData;

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
