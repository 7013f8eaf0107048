//! What the data constructs name: a data source ([`MapSource`], [`MapSourceMut`]) and what it re-binds to
//! ([`MapTarget`], [`MapOne`]): its map-list entries, for all of it or a section of a slice.

use super::maplist::MapArg;
use super::types::DeviceCopy;

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
