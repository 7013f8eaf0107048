//! What may cross into a region: the traits that say which data a region may take by copy or by value, and device
//! memory passed as is.

use std::marker::PhantomData;

/// Data the runtime may copy byte for byte between host and device memory.
///
/// # Safety
/// Every bit pattern of the type's size must be a valid value (a device can write any bytes back), and the type must
/// hold no pointers and need no `Drop`. Integers, floats, integer atomics and arrays of them qualify;
/// `#[declare_target]` implements it for `#[repr(C)]` structs whose fields all do.
///
/// Mapped data (`&[T]`, `&mut [T]`, `&T`, `&mut T` parameters, the data constructs' variables,
/// [`DeviceBuffer<T>`](crate::DeviceBuffer)) needs `T: DeviceCopy`, because the runtime moves it as raw bytes.
///
/// ```
/// use offload::{declare_target, target};
///
/// #[declare_target]
/// #[repr(C)]
/// #[derive(Clone, Copy, Debug, PartialEq)]
/// pub struct Particle {
///     pos: [f32; 3],
///     vel: [f32; 3],
/// }
///
/// #[target(map(tofrom: ps))]
/// fn step(dt: f32, ps: &mut [Particle]) {
///     for p in ps.iter_mut() {
///         for k in 0..3 {
///             p.pos[k] += dt * p.vel[k];
///         }
///     }
/// }
///
/// fn main() {
///     let mut ps = vec![Particle { pos: [0.0; 3], vel: [1.0, 2.0, 3.0] }; 8];
///     step(0.5, &mut ps);
///     assert_eq!(ps[7].pos, [0.5, 1.0, 1.5]);
/// }
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not `offload::DeviceCopy`, so it cannot be copied to or from a device",
    label = "not plain data: device memory receives and returns raw bytes",
    note = "use numbers, arrays of them, integer atomics, or a `#[declare_target]` `#[repr(C)]` struct of those",
    note = "in a generic region, bound the type parameter: `T: offload::DeviceCopy`, or make `offload::DeviceCopy` a supertrait of your trait (`trait Real: offload::DeviceCopy + Copy`)"
)]
pub unsafe trait DeviceCopy: 'static {
    /// For integer atomics and arrays of them (any depth), the atomic's size: the runtime then copies host data
    /// with atomic loads and stores, and a shared `&[AtomicT]` / `&[AtomicT; N]` is mapped `tofrom` (the region
    /// writes through it). 0 for everything else.
    #[doc(hidden)]
    const HOST_ATOMIC: u64 = 0;
}

/// Values a region may take by value (firstprivate): every `Copy` [`DeviceCopy`] type, and `bool`, `char` and
/// `#[declare_target]` enums, which are only ever copied from a valid host value and never written back.
///
/// # Safety
/// The type must hold no pointers: its bytes are what the device sees.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot cross into or out of a region by value",
    label = "not a plain `Copy` value",
    note = "by-value parameters and return values must be numbers, bool, char, arrays, or `#[declare_target]` structs and enums",
    note = "in a generic region, bound the type parameter: `T: offload::DeviceCopy + Copy`, or make them supertraits of your trait (`trait Real: offload::DeviceCopy + Copy`)"
)]
pub unsafe trait Firstprivate: Copy + 'static {}

macro_rules! device_copy {
    ($($t:ty),*) => { $(unsafe impl DeviceCopy for $t {})* };
}
device_copy!(
    u8,
    u16,
    u32,
    u64,
    u128,
    usize,
    i8,
    i16,
    i32,
    i64,
    i128,
    isize,
    f32,
    f64,
    ()
);
use core::sync::atomic::*;
macro_rules! atomics {
    ($($t:ty),*) => { $(unsafe impl DeviceCopy for $t { const HOST_ATOMIC: u64 = core::mem::size_of::<$t>() as u64; })* };
}
atomics!(
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
// An array of atomics is atomics too, at any depth (`[[AtomicU32; 2]; 3]`): its elements are laid out one after
// another, so the element-by-element atomic copy and the `tofrom` of a shared reference apply to it unchanged.
unsafe impl<T: DeviceCopy, const N: usize> DeviceCopy for [T; N] {
    const HOST_ATOMIC: u64 = T::HOST_ATOMIC;
}

unsafe impl<T: DeviceCopy + Copy> Firstprivate for T {}
unsafe impl Firstprivate for bool {}
unsafe impl Firstprivate for char {}

/// Compile-time check the expansion spans at a mapped parameter's type, so a type that is not [`DeviceCopy`] gets
/// one error there.
#[inline(always)]
pub const fn assert_device_copy<T: ?Sized + DeviceCopy>() {}

/// Compile-time check the expansion spans at a by-value parameter's or the return value's type, for
/// [`Firstprivate`].
#[inline(always)]
pub const fn assert_firstprivate<T: Firstprivate>() {}

/// A `num_teams(expr)` / `thread_limit(expr)` value: any integer; zero or less means one.
#[doc(hidden)]
pub fn count(n: impl DeviceNum) -> u32 {
    n.device_num().max(1) as u32
}

/// A `device(expr)` value: any integer; numbers that fit no device are simply not a device.
pub trait DeviceNum {
    /// The value as a device number (`i32::MAX` if it does not fit).
    fn device_num(self) -> i32;
}

macro_rules! device_num {
    ($($t:ty),*) => { $(impl DeviceNum for $t {
        #[inline]
        fn device_num(self) -> i32 { i32::try_from(self).unwrap_or(i32::MAX) }
    })* };
}
device_num!(i8, i16, i32, i64, isize, u8, u16, u32, u64, usize);

/// The device address of `T`s on device `device`. Copy; only region code may dereference it.
///
/// A region taking a `DevicePtr<T>` gets the address as is (OpenMP's `is_device_ptr`) and runs on the device that
/// holds the memory, or fails with [`Error::DeviceRequired`](crate::Error::DeviceRequired): the host cannot
/// dereference another device's memory, so there is no host fallback. Memory of the initial device is host memory,
/// and a region taking only that runs on the host.
///
/// ```
/// use offload::{omp_get_default_device, omp_target_alloc, omp_target_free, target, DevicePtr};
///
/// #[target]
/// fn iota(p: DevicePtr<u32>, n: usize) {
///     // SAFETY: the caller allocated `n` elements for `p`.
///     let s = unsafe { p.as_slice_mut(n) };
///     for (i, v) in s.iter_mut().enumerate() {
///         *v = i as u32;
///     }
/// }
///
/// fn main() {
/// # // A doctest has no device image, and a region taking device memory runs only on the memory's device.
/// # offload::omp_set_default_device(offload::omp_get_initial_device());
///     let dev = omp_get_default_device();
///     let raw = omp_target_alloc(4 * size_of::<u32>(), dev);
///     assert!(!raw.is_null());
///     // SAFETY: 4 `u32`s of `dev`'s memory, freed below after the last use.
///     let p = unsafe { DevicePtr::<u32>::from_raw(raw, dev) };
///     iota(p, 4);
///     let mut out = [0u32; 4];
///     let host = offload::omp_get_initial_device();
///     // SAFETY: 16 bytes of `dev`'s memory into `out`.
///     let rc = unsafe { offload::omp_target_memcpy(out.as_mut_ptr().cast(), raw, 16, 0, 0, host, dev) };
///     assert_eq!((rc, out), (0, [0, 1, 2, 3]));
///     // SAFETY: from `omp_target_alloc` on `dev`; `p` is not used again.
///     unsafe { omp_target_free(raw, dev) };
/// }
/// ```
#[derive(Debug)]
pub struct DevicePtr<T> {
    addr: u64,
    device: i32,
    _t: PhantomData<*mut T>,
}

impl<T> Clone for DevicePtr<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for DevicePtr<T> {}
// SAFETY: an address on a device; sending it between host threads touches nothing.
unsafe impl<T> Send for DevicePtr<T> {}
unsafe impl<T> Sync for DevicePtr<T> {}

impl<T> DevicePtr<T> {
    /// Wraps device memory from `omp_target_alloc` (or another device allocation).
    ///
    /// # Safety
    /// `ptr` is device memory of `device` holding as many `T`s as regions will touch, for as long as they do.
    pub unsafe fn from_raw(ptr: *mut std::ffi::c_void, device: i32) -> Self {
        DevicePtr {
            addr: ptr as usize as u64,
            device,
            _t: PhantomData,
        }
    }

    /// The memory of a buffer this crate allocated.
    pub(crate) fn new(addr: u64, device: i32) -> Self {
        DevicePtr {
            addr,
            device,
            _t: PhantomData,
        }
    }

    /// The device address, as the device sees it.
    pub fn addr(self) -> u64 {
        self.addr
    }

    /// The device number holding the memory.
    pub fn device(self) -> i32 {
        self.device
    }

    /// The memory as a raw pointer (only the device holding it may dereference it: on the initial device, the
    /// host). Region code sees offload-device's twin of this method.
    pub fn as_ptr(self) -> *mut T {
        self.addr as usize as *mut T
    }

    /// The first `len` elements as a slice: host code may call it for memory of the initial device only.
    ///
    /// # Safety
    /// The memory is the host's (the initial device's), holds `len` initialised `T`s, and nothing else accesses
    /// them for `'a`.
    pub unsafe fn as_slice_mut<'a>(self, len: usize) -> &'a mut [T] {
        // SAFETY: per the contract.
        unsafe { std::slice::from_raw_parts_mut(self.as_ptr(), len) }
    }
}
