//! What may cross into a region.

/// Data the runtime may copy byte for byte between host and device memory.
///
/// # Safety
/// Every bit pattern of the type's size must be a valid value (a device can write any bytes back), and the type must
/// hold no pointers and need no `Drop`. Integers, floats, integer atomics and arrays of them qualify;
/// `#[declare_target]` implements it for `#[repr(C)]` structs whose fields all do.
pub unsafe trait DeviceCopy: 'static {}

/// Values a region may take by value (firstprivate): every `Copy` [`DeviceCopy`] type, and `bool`, `char` and
/// `#[declare_target]` enums, which are only ever copied from a valid host value and never written back.
///
/// # Safety
/// The type must hold no pointers: its bytes are what the device sees.
pub unsafe trait Firstprivate: Copy + 'static {}

macro_rules! device_copy {
    ($($t:ty),*) => { $(unsafe impl DeviceCopy for $t {})* };
}
device_copy!(u8, u16, u32, u64, u128, usize, i8, i16, i32, i64, i128, isize, f32, f64, ());
use core::sync::atomic::*;
device_copy!(AtomicU8, AtomicU16, AtomicU32, AtomicU64, AtomicUsize, AtomicI8, AtomicI16, AtomicI32, AtomicI64, AtomicIsize);
unsafe impl<T: DeviceCopy, const N: usize> DeviceCopy for [T; N] {}

unsafe impl<T: DeviceCopy + Copy> Firstprivate for T {}
unsafe impl Firstprivate for bool {}
unsafe impl Firstprivate for char {}

#[diagnostic::on_unimplemented(
    message = "`{T}` cannot be mapped to a device: it is not `offload::DeviceCopy`",
    label = "mapped data must be plain numbers, arrays of them, or `#[declare_target]` `#[repr(C)]` structs",
    note = "device memory receives and returns raw bytes, so every bit pattern must be valid and no pointers inside"
)]
#[doc(hidden)]
pub trait MappableData<T: ?Sized> {}
impl<T: DeviceCopy> MappableData<T> for () {}

#[doc(hidden)]
#[diagnostic::on_unimplemented(
    message = "`{T}` cannot cross into or out of a region by value: it is not `offload::Firstprivate`",
    label = "by-value parameters and return values must be numbers, bool, char, arrays, or `#[declare_target]` structs and enums",
    note = "such values are copied between host and device as bytes; types holding pointers or owning memory cannot be"
)]
pub trait ByValue<T: ?Sized> {}
impl<T: Firstprivate> ByValue<T> for () {}

/// Compile-time check, spanned at the parameter's type by the expansion.
#[inline(always)]
pub const fn assert_device_copy<T: ?Sized>()
where
    (): MappableData<T>,
{
}

#[inline(always)]
pub const fn assert_firstprivate<T: ?Sized>()
where
    (): ByValue<T>,
{
}

/// A `device(expr)` value: any integer; numbers that fit no device are simply not a device.
pub trait DeviceNum {
    fn device_num(self) -> i32;
}

macro_rules! device_num {
    ($($t:ty),*) => { $(impl DeviceNum for $t {
        #[inline]
        fn device_num(self) -> i32 { i32::try_from(self).unwrap_or(i32::MAX) }
    })* };
}
device_num!(i8, i16, i32, i64, isize, u8, u16, u32, u64, usize);
