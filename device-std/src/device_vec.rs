//! What a `Vec<T>` field of a struct that owns its arrays (`#[derive(offload::Mapper)]`) is in region code on a
//! device: the mapped elements, a slice of the device copy. The outliner writes the field's type as
//! `offload::DeviceVec<T>` in the device crate; region code reads and writes it as it would the `Vec` (`v[k]`,
//! `v.len()`, `v.iter()`, `&v[a..b]`), but cannot grow it: a device has no allocator.

use core::marker::PhantomData;
use core::ops::{Deref, DerefMut};

/// A `Vec<T>` field of an owning mapper struct, on a device: its elements' device copy, as a slice.
///
/// It is rebuilt by the kernel entry from the field's two kernel arguments and lives for the kernel's run. Like
/// `&mut [T]` it gives shared access through `&` and exclusive access through `&mut`, and is never `Clone` (two
/// handles could then write one element at once).
pub struct DeviceVec<T> {
    ptr: *mut T,
    len: usize,
    _elems: PhantomData<T>,
}

// SAFETY: as `&mut [T]`: a shared handle only reads, an exclusive one is the only path to the elements.
unsafe impl<T: Send> Send for DeviceVec<T> {}
// SAFETY: as above.
unsafe impl<T: Sync> Sync for DeviceVec<T> {}

impl<T> DeviceVec<T> {
    /// # Safety
    /// `p` is the device address of `len` `T`s (any value when `len` is 0), valid for the kernel's run and reached
    /// only through this handle while it lives.
    #[doc(hidden)]
    #[inline(always)]
    pub unsafe fn __from_raw(p: u64, len: u64) -> Self {
        DeviceVec {
            ptr: if len == 0 {
                core::ptr::NonNull::dangling().as_ptr()
            } else {
                p as *mut T
            },
            len: len as usize,
            _elems: PhantomData,
        }
    }

    /// The elements.
    #[inline(always)]
    pub fn as_slice(&self) -> &[T] {
        // SAFETY: `__from_raw`'s contract; the borrow of `self` bounds the slice's.
        unsafe { core::slice::from_raw_parts(self.ptr, self.len) }
    }

    /// The elements, to write.
    #[inline(always)]
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        // SAFETY: as above, and `&mut self` is the only path to them.
        unsafe { core::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl<T> DeviceVec<T> {
    /// After a region that took its struct as `&mut S`: the field still holds the elements the kernel entry gave
    /// it. Swapped with another field (or replaced by a moved-in one), its writes would reach another host `Vec`
    /// than in the host fallback, so the region fails instead.
    #[doc(hidden)]
    #[track_caller]
    pub fn __check(&self, p: u64, len: u64) {
        if self.len as u64 != len || (len > 0 && self.ptr as u64 != p) {
            panic!(
                "offload: a region moved a `Vec` field of its `&mut` mapper struct (a swap or an assignment of \
                 another field's): the host's fields keep their own elements, so its writes would not come back \
                 where the host fallback puts them"
            )
        }
    }
}

impl<T> Deref for DeviceVec<T> {
    type Target = [T];
    #[inline(always)]
    fn deref(&self) -> &[T] {
        self.as_slice()
    }
}

impl<T> DerefMut for DeviceVec<T> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut [T] {
        self.as_mut_slice()
    }
}

impl<T: core::fmt::Debug> core::fmt::Debug for DeviceVec<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        self.as_slice().fmt(f)
    }
}

impl<T: PartialEq> PartialEq for DeviceVec<T> {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl<T: Eq> Eq for DeviceVec<T> {}

impl<T: PartialOrd> PartialOrd for DeviceVec<T> {
    fn partial_cmp(&self, other: &Self) -> Option<core::cmp::Ordering> {
        self.as_slice().partial_cmp(other.as_slice())
    }
}

impl<T: Ord> Ord for DeviceVec<T> {
    fn cmp(&self, other: &Self) -> core::cmp::Ordering {
        self.as_slice().cmp(other.as_slice())
    }
}

impl<T: core::hash::Hash> core::hash::Hash for DeviceVec<T> {
    fn hash<H: core::hash::Hasher>(&self, state: &mut H) {
        self.as_slice().hash(state)
    }
}

impl<'a, T> IntoIterator for &'a DeviceVec<T> {
    type Item = &'a T;
    type IntoIter = core::slice::Iter<'a, T>;
    fn into_iter(self) -> Self::IntoIter {
        self.as_slice().iter()
    }
}

impl<'a, T> IntoIterator for &'a mut DeviceVec<T> {
    type Item = &'a mut T;
    type IntoIter = core::slice::IterMut<'a, T>;
    fn into_iter(self) -> Self::IntoIter {
        self.as_mut_slice().iter_mut()
    }
}

/// Written by the outliner for each owning mapper struct in the device crate, so a kernel entry can tell one from an
/// object ([`RefProbe`]).
#[doc(hidden)]
pub trait OwnedMapper {}

/// Written by the outliner for each mapper struct in the device crate: how many kernel arguments it takes, from its
/// definition, as the host's derive states it. A kernel entry that rebuilds such a struct checks at compile time
/// that it takes as many, through the parameter's type as Rust resolves it, so a struct the outliner found by the
/// wrong name fails the build instead of reading arguments that disagree with the host's.
#[doc(hidden)]
pub trait MapperSlots {
    /// The struct's kernel arguments.
    const SLOTS: usize;
}

/// A region parameter `&T` the outliner passes as one object: if `T` is an owning mapper struct after all (named
/// through a `type` alias, which the outliner does not follow), the host passed its fields instead, so the device
/// build must fail. Autoref specialisation on the entry's concrete type: `(&&RefProbe::of(&r)).one_object()`.
#[doc(hidden)]
pub struct RefProbe<T: ?Sized>(PhantomData<*const T>);

impl<T: ?Sized> RefProbe<T> {
    #[inline(always)]
    pub fn of<R: Deref<Target = T>>(_: &R) -> Self {
        RefProbe(PhantomData)
    }
}

#[doc(hidden)]
pub trait ProbeOwned {
    fn one_object(&self);
}

struct NotOneObject<T: ?Sized>(PhantomData<*const T>);

impl<T: ?Sized> NotOneObject<T> {
    const FAIL: () = panic!(
        "offload: a region parameter `&S` names an owning mapper struct (`Vec` fields, `#[derive(Mapper)]`) the \
         outliner cannot find by that name: write the struct's own name in the region's signature (not a `type` \
         alias), give it a name no other mapper struct of the package has, and keep its fields out of `#[cfg]`"
    );
}

impl<T: ?Sized + OwnedMapper> ProbeOwned for &RefProbe<T> {
    #[inline(always)]
    fn one_object(&self) {
        #[allow(clippy::let_unit_value)]
        let () = NotOneObject::<T>::FAIL;
    }
}

#[doc(hidden)]
pub trait ProbeObject {
    fn one_object(&self);
}

impl<T: ?Sized> ProbeObject for RefProbe<T> {
    #[inline(always)]
    fn one_object(&self) {}
}
