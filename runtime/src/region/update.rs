//! `target_update!`: one variable's copy refreshed on the construct's device, `to` from a shared borrow, `from`
//! into an exclusive one or into integer atomics, written atomically.

use super::backend::{self, DataDevice};
use super::maplist::MapArg;
use super::source::{MapSource, MapTarget, Section};
use offload_model::abi::map_type::{FROM, TO};
use std::sync::atomic::{
    AtomicI16, AtomicI32, AtomicI64, AtomicI8, AtomicIsize, AtomicU16, AtomicU32, AtomicU64,
    AtomicU8, AtomicUsize,
};

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
/// resolution tries this `&self` method before [`MapWrite`](super::data::MapWrite)'s `&mut self` one, so
/// `target_update!(from: HITS)` needs no exclusive borrow where the stores are atomic.
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
