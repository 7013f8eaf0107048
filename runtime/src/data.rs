//! Device data environments: what `target_data!`, `target_enter_data!`, `target_exit_data!` and `target_update!`
//! expand to, and the map-list walk regions share. Plugin-independent: everything goes through the device's
//! [`MappingTable`](crate::mapping::MappingTable) and the [`Device`](crate::plugin::Device) trait.

use crate::device::{select, DeviceEntry, Host, Selection};
use crate::icv::{icv, Policy};
use crate::launch::MapArg;
use crate::mapping::{copy_in, copy_to_host, MapError, RefKind};
use crate::observe::{self, Label, Watch};
use crate::plugin::{Arg, DevicePtr};
use crate::DeviceCopy;
use offload_model::abi::map_type::{DELETE, FROM, LITERAL, PRESENT, PRIVATE, TO};
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};

/// Maps every entry of a map list in and returns one kernel argument each (a slice's is the device address of its
/// base). On error, undoes what it did, copying nothing back.
///
/// # Safety
/// Every non-literal entry describes live host memory.
pub(crate) unsafe fn enter_list(
    dev: &DeviceEntry,
    maps: &[MapArg],
    kind: RefKind,
) -> Result<Vec<Arg>, MapError> {
    let mut args = Vec::with_capacity(maps.len());
    let mut t = None;
    for (i, m) in maps.iter().enumerate() {
        let r = if m.map_type & LITERAL != 0 {
            Ok(m.literal)
        } else if m.base_size == 0 {
            // Zero-length data: no table entry; the kernel gets a dangling, aligned pointer.
            Ok(Arg::new(m.begin as usize as u64))
        } else if m.size == 0 && m.map_type & PRIVATE == 0 {
            // A zero-length section of a non-empty slice: the present copy if its slice is mapped (as libomptarget
            // looks it up), else storage of the slice's size so the region's slice is valid, contents unspecified.
            match t.get_or_insert_with(|| dev.table()).slice_base(m.range()) {
                Some(base) => Ok(Arg::new(base)),
                None if m.map_type & PRESENT != 0 => Err(MapError::NotPresent {
                    begin: m.begin as usize,
                    size: 0,
                }),
                None => private_in(dev, m).map(Arg::new).map_err(MapError::Device),
            }
        } else if m.map_type & PRIVATE != 0 {
            private_in(dev, m).map(Arg::new).map_err(MapError::Device)
        } else {
            let t = t.get_or_insert_with(|| dev.table());
            // SAFETY: the caller guarantees the host range.
            unsafe { t.enter(&*dev.dev, m.range(), m.map_type, kind) }
                .map(|tgt| Arg::new(tgt - (m.begin as usize - m.base as usize) as u64))
        };
        match r {
            Ok(a) => args.push(a),
            Err(e) => {
                drop(t);
                // SAFETY: undo exactly the first `i` entries.
                let _ = unsafe { exit_list(dev, &maps[..i], &args, kind, false) };
                return Err(e);
            }
        }
    }
    Ok(args)
}

fn private_in(dev: &DeviceEntry, m: &MapArg) -> Result<DevicePtr, String> {
    let p = observe::alloc(&*dev.dev, m.base_size.max(m.size))?;
    if m.map_type & PRIVATE != 0 && m.map_type & TO != 0 {
        // SAFETY: the macro passes a live value of `size` bytes; `p` was just allocated.
        if let Err(e) = unsafe { copy_in(&*dev.dev, p, m.begin as usize, m.size, 0) } {
            // SAFETY: ours, unused.
            unsafe { observe::free(&*dev.dev, p) };
            return Err(e);
        }
    }
    Ok(p)
}

/// Unmaps what [`enter_list`] mapped (`args[i]` belongs to `maps[i]`); copies back unless `copy_out` is false.
///
/// # Safety
/// As [`enter_list`]; `FROM` ranges are writable.
pub(crate) unsafe fn exit_list(
    dev: &DeviceEntry,
    maps: &[MapArg],
    args: &[Arg],
    kind: RefKind,
    copy_out: bool,
) -> Result<(), MapError> {
    let mut result = Ok(());
    let mut t = None;
    // Last to first, as libomptarget's targetDataEnd: a section exits before the slice holding it.
    for (m, &a) in maps.iter().zip(args).rev() {
        if m.map_type & LITERAL != 0 || m.base_size == 0 {
            continue;
        }
        // SAFETY: `enter_list` wrote a device address for every non-literal entry.
        let addr = unsafe { a.assume_init() };
        if m.size == 0 && m.map_type & PRIVATE == 0 {
            let tt = t.get_or_insert_with(|| dev.table());
            if tt.slice_base(m.range()) != Some(addr) {
                // SAFETY: our private block for this call, not the present copy.
                unsafe { observe::free(&*dev.dev, addr) };
            }
            continue;
        }
        if m.map_type & PRIVATE != 0 {
            let a = addr;
            if copy_out && m.map_type & PRIVATE != 0 && m.map_type & FROM != 0 {
                // SAFETY: the return slot is writable for `size` bytes.
                if let Err(e) = unsafe { copy_to_host(&*dev.dev, m.begin as usize, a, m.size, 0) } {
                    result = Err(MapError::Device(e));
                }
            }
            // SAFETY: allocated by `private_in` for this call.
            unsafe { observe::free(&*dev.dev, a) };
            continue;
        }
        let t = t.get_or_insert_with(|| dev.table());
        // SAFETY: the caller guarantees the host range.
        if let Err(e) = unsafe {
            t.exit(
                &*dev.dev,
                m.begin as usize,
                m.size,
                m.map_type,
                kind,
                copy_out,
            )
        } {
            result = Err(e);
        }
    }
    result
}

/// The device a data construct acts on, or `None` for the host (where every map is already satisfied).
/// Under `MANDATORY` a construct that could not reach a device stops the program.
#[track_caller]
fn data_device(construct: &str, device: Option<i32>, cond: bool) -> Option<&'static DeviceEntry> {
    match select(device, cond) {
        Selection::Device(dev) => Some(dev),
        Selection::Host(Host::Unavailable(r)) if icv().policy == Policy::Mandatory => panic!(
            "offload: {construct} could not reach a device and OMP_TARGET_OFFLOAD=MANDATORY forbids running on the \
             host: {r}"
        ),
        Selection::Host(_) => None,
    }
}

#[track_caller]
fn mapping_failed(construct: &str, dev: &DeviceEntry, e: MapError) -> ! {
    panic!(
        "offload: {construct} on device {} ({}): {e}",
        dev.number, dev.plugin
    )
}

/// The device a data construct acts on (`None`: the host, where every map is already satisfied), chosen once for
/// all its variables. Under `MANDATORY` a construct that could not reach a device stops the program.
#[derive(Clone, Copy)]
pub struct DataDevice(Option<&'static DeviceEntry>);

impl DataDevice {
    #[track_caller]
    pub fn select(construct: &'static str, device: Option<i32>, cond: bool) -> Self {
        DataDevice(data_device(construct, device, cond))
    }
}

/// What one variable of a `target_data!` region holds: its map-list entry and kernel argument on the device.
struct Entered {
    dev: Option<&'static DeviceEntry>,
    map: MapArg,
    arg: Arg,
    /// The region began during an unwind (inside a destructor): its own exit still copies back.
    began_unwinding: bool,
}

impl Entered {
    #[track_caller]
    fn enter<T: ?Sized + MapTarget>(
        dev: DataDevice,
        p: *const T,
        section: Section,
        map_type: u64,
    ) -> Self {
        let map = T::map_arg(p, section, map_type);
        let arg = match dev.0 {
            Some(d) => {
                let _scope = Watch::now().scope(Label::Construct("target_data!"), d);
                // SAFETY: the guard holding this borrows the data until the exit.
                unsafe { enter_list(d, &[map], RefKind::Structured) }
                    .unwrap_or_else(|e| mapping_failed("target_data!", d, e))[0]
            }
            None => Arg::new(0),
        };
        Entered {
            dev: dev.0,
            map,
            arg,
            began_unwinding: std::thread::panicking(),
        }
    }

    fn exit(&mut self) {
        let Some(dev) = self.dev.take() else { return };
        let unwinding = std::thread::panicking() && !self.began_unwinding;
        let scope = Watch::now().scope(Label::Construct("target_data! exit"), dev);
        // SAFETY: the guard still borrows the data (its `Drop` keeps the borrow alive until now).
        let r = unsafe {
            exit_list(
                dev,
                &[self.map],
                &[self.arg],
                RefKind::Structured,
                !unwinding,
            )
        };
        drop(scope);
        if let (Err(e), false) = (r, unwinding) {
            mapping_failed("target_data! exit", dev, e)
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
    #[track_caller]
    pub fn enter(dev: DataDevice, data: &'a T, section: Section, map_type: u64) -> Self {
        MappedRef {
            inner: Entered::enter(dev, data, section, map_type),
            data,
        }
    }

    pub fn get(&self) -> &T {
        self.data
    }
}

// Implementing `Drop` on the guard itself (not only on a field) makes the borrow last until the exit.
impl<T: ?Sized> Drop for MappedRef<'_, T> {
    fn drop(&mut self) {
        self.inner.exit()
    }
}

/// A `map(from|tofrom|alloc: y)` variable of `target_data!`: borrows `y` exclusively until the region's exit, which
/// copies back into it; the block sees it through [`MappedMut::get_mut`], which cannot outlive the guard.
pub struct MappedMut<'a, T: ?Sized> {
    inner: Entered,
    data: *mut T,
    _borrow: PhantomData<&'a mut T>,
}

impl<'a, T: ?Sized + MapTarget> MappedMut<'a, T> {
    #[track_caller]
    pub fn enter(dev: DataDevice, data: &'a mut T, section: Section, map_type: u64) -> Self {
        let data: *mut T = data;
        MappedMut {
            inner: Entered::enter(dev, data, section, map_type),
            data,
            _borrow: PhantomData,
        }
    }

    pub fn get_mut(&mut self) -> &mut T {
        // SAFETY: the guard holds the exclusive borrow; the runtime touches the data only at entry and exit.
        unsafe { &mut *self.data }
    }
}

impl<T: ?Sized> Drop for MappedMut<'_, T> {
    fn drop(&mut self) {
        self.inner.exit()
    }
}

/// `target_update!(to: x)` for one variable; data that is not mapped is left alone.
#[track_caller]
pub fn update_to<T: ?Sized + MapTarget>(dev: DataDevice, data: &T, section: Section) {
    // SAFETY: `data` is borrowed for the call.
    unsafe { update_one(dev, T::map_arg(data, section, TO)) }
}

/// `target_update!(from: y)` for one variable.
#[track_caller]
pub fn update_from<T: ?Sized + MapTarget>(dev: DataDevice, data: &mut T, section: Section) {
    // SAFETY: `data` is borrowed exclusively for the call.
    unsafe { update_one(dev, T::map_arg(data, section, FROM)) }
}

#[track_caller]
unsafe fn update_one(dev: DataDevice, m: MapArg) {
    let Some(d) = dev.0 else { return };
    if m.size == 0 {
        return;
    }
    let scope = Watch::now().scope(Label::Construct("target_update!"), d);
    let t = d.table();
    // SAFETY: per the callers.
    if let Err(e) = unsafe { t.update(&*d.dev, m.begin as usize, m.size, m.map_type) } {
        drop(t);
        drop(scope);
        mapping_failed("target_update!", d, e)
    }
}

/// A buffer `target_enter_data!` mapped (OpenMP's `target enter data`): owns it, so its memory can be neither freed
/// nor reused while the mapping lives. Derefs to the host copy. Dropping it exits with `release` (no copy back);
/// [`Mapped::exit_from`] copies back, [`Mapped::exit_delete`] removes the mapping whatever its reference count. A
/// forgotten `Mapped` leaks its buffer too.
pub struct Mapped<V: MapOwner> {
    value: Option<V>,
    dev: Option<&'static DeviceEntry>,
}

/// What `target_enter_data!` takes by value: an owned buffer whose heap address does not move.
///
/// # Safety
/// The slices returned must be the value's own storage, at one address for the value's whole life and freed only
/// when it is dropped: `Mapped` relies on it to keep the mapping's host memory alive.
pub unsafe trait MapOwner {
    type Elem: DeviceCopy;
    fn as_slice(&self) -> &[Self::Elem];
    fn as_mut_slice(&mut self) -> &mut [Self::Elem];
}

// SAFETY: a Vec's buffer moves only when it grows, which `Mapped` never lets happen.
unsafe impl<T: DeviceCopy> MapOwner for Vec<T> {
    type Elem = T;
    fn as_slice(&self) -> &[T] {
        self
    }
    fn as_mut_slice(&mut self) -> &mut [T] {
        self
    }
}

// SAFETY: a boxed slice's storage never moves.
unsafe impl<T: DeviceCopy> MapOwner for Box<[T]> {
    type Elem = T;
    fn as_slice(&self) -> &[T] {
        self
    }
    fn as_mut_slice(&mut self) -> &mut [T] {
        self
    }
}

impl<V: MapOwner> Mapped<V> {
    /// `target_enter_data!(map(TYPE: v))`: maps `v` with `map_type` (to or alloc, and modifiers).
    #[track_caller]
    pub fn enter(mut value: V, map_type: u64, device: Option<i32>, cond: bool) -> Self {
        let dev = data_device("target_enter_data!", device, cond);
        if let Some(d) = dev {
            let _scope = Watch::now().scope(Label::Construct("target_enter_data!"), d);
            let m = MapArg::slice(value.as_mut_slice() as *const [V::Elem], map_type);
            // SAFETY: `value` is owned by the returned `Mapped` for as long as the mapping can live.
            unsafe { enter_list(d, &[m], RefKind::Dynamic) }
                .unwrap_or_else(|e| mapping_failed("target_enter_data!", d, e));
        }
        Mapped {
            value: Some(value),
            dev,
        }
    }

    /// `target_exit_data!` with `map_type` (from, release or delete, and modifiers); returns the buffer.
    #[track_caller]
    pub fn exit(mut self, map_type: u64) -> V {
        let mut value = self.value.take().expect("present until exit");
        if let Some(d) = self.dev {
            let _scope = Watch::now().scope(Label::Construct("target_exit_data!"), d);
            let m = MapArg::slice(value.as_mut_slice() as *const [V::Elem], map_type);
            // SAFETY: we own the buffer; `from` writes into it through `&mut`.
            unsafe { exit_list(d, &[m], &[Arg::new(0)], RefKind::Dynamic, true) }
                .unwrap_or_else(|e| mapping_failed("target_exit_data!", d, e));
        }
        value
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
        self.dev.map(|d| d.number)
    }
}

impl<V: MapOwner> Drop for Mapped<V> {
    fn drop(&mut self) {
        if let (Some(mut value), Some(d)) = (self.value.take(), self.dev) {
            let _scope = Watch::now().scope(Label::Construct("Mapped drop (release)"), d);
            let m = MapArg::slice(value.as_mut_slice() as *const [V::Elem], 0);
            // SAFETY: we own the buffer; `release` copies nothing.
            let _ = unsafe { exit_list(d, &[m], &[Arg::new(0)], RefKind::Dynamic, false) };
        }
    }
}

impl<V: MapOwner> Deref for Mapped<V> {
    type Target = [V::Elem];
    fn deref(&self) -> &[V::Elem] {
        self.value.as_ref().expect("present until exit").as_slice()
    }
}

impl<V: MapOwner> DerefMut for Mapped<V> {
    fn deref_mut(&mut self) -> &mut [V::Elem] {
        self.value
            .as_mut()
            .expect("present until exit")
            .as_mut_slice()
    }
}

/// A data source a data construct may name: `Vec<T>`, arrays, slices, `&[T]`, `&mut [T]`, `Mapped<V>`, and
/// `DeviceCopy` scalars; `target_data!` re-binds the name to [`MapSource::Target`] by reference.
pub trait MapSource {
    type Target: ?Sized + MapTarget;
    fn map_ref(&self) -> &Self::Target;
}

/// A writable data source (`from`, `tofrom`, `alloc` in `target_data!`, `target_update!(from: ..)`).
pub trait MapSourceMut: MapSource {
    fn map_mut(&mut self) -> &mut Self::Target;
}

/// What a source re-binds to: a slice or a single `DeviceCopy` value.
/// A section `[lo, hi)` (`hi` `None`: to the end), or `None` for all of the data.
pub type Section = Option<(usize, Option<usize>)>;

pub trait MapTarget {
    /// The map-list entry for all of it, or for a section of a slice.
    fn map_arg(this: *const Self, section: Section, map_type: u64) -> MapArg;
}

impl<T: DeviceCopy> MapTarget for [T] {
    #[track_caller]
    fn map_arg(this: *const Self, section: Section, map_type: u64) -> MapArg {
        match section {
            Some((lo, hi)) => MapArg::section(this, lo, hi.unwrap_or(this.len()), map_type),
            None => MapArg::slice(this, map_type),
        }
    }
}

macro_rules! scalar_sources {
    ($($t:ty),*) => {$(
        impl MapTarget for $t {
            #[track_caller]
            fn map_arg(this: *const Self, section: Section, map_type: u64) -> MapArg {
                assert!(section.is_none(), "offload: a section needs a slice, not a `{}`", stringify!($t));
                MapArg::object(this, map_type)
            }
        }
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
    type Target = [V::Elem];
    fn map_ref(&self) -> &[V::Elem] {
        self
    }
}

impl<V: MapOwner> MapSourceMut for Mapped<V> {
    fn map_mut(&mut self) -> &mut [V::Elem] {
        self
    }
}
