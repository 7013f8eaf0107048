//! Unstructured mapping of owned buffers: `target_enter_data!` returns a [`Mapped`], which owns the buffer so its
//! memory stays put while mapped, and `target_exit_data!` (or dropping it) ends the mapping.

use super::backend;
use super::maplist::{Held, MapArg};
use super::source::{MapOne, MapSource, MapSourceMut};
use super::types::DeviceCopy;
use crate::device::{default_device, initial_device, RefKind, Target, OMP_INITIAL_DEVICE};
use offload_model::abi::map_type::{DELETE, FROM};
use std::ops::{Deref, DerefMut};

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
