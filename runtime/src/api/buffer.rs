//! `DeviceBuffer<T>`: device memory the program manages itself, a safe owning buffer passed to regions as is
//! (OpenMP's `is_device_ptr`), as its raw address, `DevicePtr<T>` (which lives with the other types that cross into
//! a region). A region taking either runs only on the device that holds the memory. The initial device's "device
//! memory" is host memory, as in OpenMP (`omp_target_alloc` on the initial device is `malloc`), under every policy.

use crate::device::{devices, initial_device, is_initial, DeviceEntry};
use crate::observe::Label;
use crate::region::{DeviceCopy, DevicePtr, Error};
use std::mem::size_of;

/// `len` `T`s of device memory on one device, zero-filled, freed on drop. On the initial device it is host memory.
///
/// A region may take `&DeviceBuffer<T>` or `&mut DeviceBuffer<T>`: the memory is passed as is (OpenMP's
/// `is_device_ptr`; the region's body sees a slice), nothing is mapped or copied, and the region runs on the
/// buffer's device or fails with [`Error::DeviceRequired`]: the host cannot reach another device's memory, so there
/// is no host fallback (a buffer of the initial device is the host's, and its regions run on the host). Data moves
/// in and out only through the copy methods.
///
/// ```
/// use offload::{omp_get_default_device, target, DeviceBuffer};
///
/// #[target(teams_distribute_parallel_for)]
/// fn square(buf: &mut DeviceBuffer<i64>) {
///     for i in 0..buf.len() {
///         buf[i] *= buf[i];
///     }
/// }
///
/// fn main() -> Result<(), offload::Error> {
/// # // A doctest has no device image, and a region taking device memory runs only on the memory's device.
/// # offload::omp_set_default_device(offload::omp_get_initial_device());
///     let dev = omp_get_default_device();
///     let mut buf = DeviceBuffer::from_slice(&[1i64, 2, 3], dev)?;
///     square(&mut buf);
///     try_square(&mut buf)?;
///     assert_eq!(buf.to_vec()?, [1, 16, 81]);
///
///     let mut out = [0i64; 3];
///     buf.copy_to_host(&mut out)?;
///     buf.copy_from_host(&[4, 5, 6])?;
///     assert_eq!((out, buf.to_vec()?), ([1, 16, 81], vec![4, 5, 6]));
///     Ok(())
/// }
/// ```
pub struct DeviceBuffer<T: DeviceCopy> {
    ptr: DevicePtr<T>,
    len: usize,
    /// `None`: the initial device (host memory from `std::alloc`).
    dev: Option<&'static DeviceEntry>,
}

// SAFETY: the buffer owns its device memory. Not `Sync`: a region on one thread and a copy on another could then
// touch the same device memory at once (a race for atomic elements).
unsafe impl<T: DeviceCopy> Send for DeviceBuffer<T> {}

/// The map-type bits that make the copy helpers treat `T`s as atomics.
fn atomics<T: DeviceCopy>() -> u64 {
    T::HOST_ATOMIC << offload_model::abi::map_type::HOST_ATOMIC_SHIFT
}

/// The layout of an initial-device buffer of `bytes` bytes (at least 1, so it can be allocated).
fn host_layout<T>(bytes: usize) -> Result<std::alloc::Layout, String> {
    std::alloc::Layout::from_size_align(bytes.max(1), std::mem::align_of::<T>())
        .map_err(|e| format!("{bytes} bytes: {e}"))
}

/// Copies `len` `T`s between host ranges (the initial device's memory and the program's); atomic elements one by
/// one, atomically, as the device copies do.
///
/// # Safety
/// Both ranges hold `len` `T`s, `dst` is writable, and they do not overlap.
unsafe fn host_copy<T: DeviceCopy>(dst: *mut T, src: *const T, len: usize) {
    use std::sync::atomic::{AtomicU16, AtomicU32, AtomicU64, AtomicU8, Ordering::Relaxed};
    if T::HOST_ATOMIC == 0 {
        // SAFETY: per the contract.
        return unsafe { std::ptr::copy_nonoverlapping(src, dst, len) };
    }
    // SAFETY: per the contract; atomic `T`s are single integer atomics of `HOST_ATOMIC` bytes, aligned as such.
    unsafe {
        for i in 0..len {
            let (d, s) = (dst.add(i) as *mut u8, src.add(i) as *mut u8);
            match T::HOST_ATOMIC {
                1 => AtomicU8::from_ptr(d).store(AtomicU8::from_ptr(s).load(Relaxed), Relaxed),
                2 => AtomicU16::from_ptr(d.cast())
                    .store(AtomicU16::from_ptr(s.cast()).load(Relaxed), Relaxed),
                4 => AtomicU32::from_ptr(d.cast())
                    .store(AtomicU32::from_ptr(s.cast()).load(Relaxed), Relaxed),
                _ => AtomicU64::from_ptr(d.cast())
                    .store(AtomicU64::from_ptr(s.cast()).load(Relaxed), Relaxed),
            }
        }
    }
}

fn device_error(device: i32, plugin: &'static str, message: String) -> Error {
    Error::Device {
        device,
        plugin,
        message,
    }
}

impl<T: DeviceCopy> DeviceBuffer<T> {
    /// Allocates `len` zero-filled elements on device `device`: an offload device, or the initial device
    /// (`omp_get_initial_device()` or `OMP_INITIAL_DEVICE`), where it is host memory.
    pub fn new(len: usize, device: i32) -> Result<Self, Error> {
        let initial = initial_device();
        let dev = if is_initial(device) {
            None
        } else {
            Some(
                usize::try_from(device)
                    .ok()
                    .and_then(|d| devices().get(d))
                    .ok_or_else(|| {
                        device_error(
                            device,
                            "none",
                            format!(
                                "there is no offload device {device} ({} devices; the initial device is {initial})",
                                devices().len()
                            ),
                        )
                    })?,
            )
        };
        let plugin = dev.map_or("host", |d| d.plugin);
        let bytes = len.checked_mul(size_of::<T>()).ok_or_else(|| {
            device_error(
                device,
                plugin,
                format!("{len} elements of {} bytes overflow", size_of::<T>()),
            )
        })?;
        let addr = match dev {
            Some(dev) => {
                let _scope = dev.scope(Label::Construct("DeviceBuffer::new"));
                dev.alloc(bytes.max(1), std::mem::align_of::<T>())
                    .map_err(|e| device_error(device, dev.plugin, e.to_string()))?
            }
            None => {
                let layout =
                    host_layout::<T>(bytes).map_err(|m| device_error(device, plugin, m))?;
                // SAFETY: the layout's size is at least 1.
                let p = unsafe { std::alloc::alloc_zeroed(layout) };
                if p.is_null() {
                    return Err(device_error(
                        device,
                        plugin,
                        format!("cannot allocate {bytes} bytes of host memory"),
                    ));
                }
                p as usize as u64
            }
        };
        Ok(DeviceBuffer {
            ptr: DevicePtr::new(addr, if dev.is_none() { initial } else { device }),
            len,
            dev,
        })
    }

    /// A device copy of `data`.
    pub fn from_slice(data: &[T], device: i32) -> Result<Self, Error> {
        let mut b = Self::new(data.len(), device)?;
        b.copy_from_host(data)?;
        Ok(b)
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer has no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The device number holding the memory (the initial device's number for host memory).
    pub fn device(&self) -> i32 {
        self.ptr.device()
    }

    /// The buffer's device address, to pass to a region taking a [`DevicePtr`]; valid while the buffer lives.
    pub fn as_device_ptr(&self) -> DevicePtr<T> {
        self.ptr
    }

    fn check_len(&self, n: usize) -> Result<(), Error> {
        if n == self.len {
            return Ok(());
        }
        Err(device_error(
            self.device(),
            self.plugin(),
            format!("host slice has {n} elements, buffer {}", self.len),
        ))
    }

    fn plugin(&self) -> &'static str {
        self.dev.map_or("host", |d| d.plugin)
    }

    /// Overwrites the buffer with `src` (same length).
    pub fn copy_from_host(&mut self, src: &[T]) -> Result<(), Error> {
        self.check_len(src.len())?;
        let Some(dev) = self.dev else {
            // SAFETY: the buffer is host memory holding `len` elements, borrowed exclusively; `src` is another
            // allocation (the buffer is never lent out as a slice).
            unsafe { host_copy(self.ptr.as_ptr(), src.as_ptr(), self.len) };
            return Ok(());
        };
        let _scope = dev.scope(Label::Construct("DeviceBuffer::copy_from_host"));
        // SAFETY: `src` is readable; the buffer holds `len` elements. Atomics are read one by one, atomically.
        unsafe {
            dev.submit(
                self.ptr.addr(),
                src.as_ptr() as usize,
                size_of_val(src),
                atomics::<T>(),
            )
        }
        .map_err(|e| device_error(self.device(), dev.plugin, e.to_string()))
    }

    /// Copies the buffer into `dst` (same length).
    pub fn copy_to_host(&self, dst: &mut [T]) -> Result<(), Error> {
        self.check_len(dst.len())?;
        let Some(dev) = self.dev else {
            // SAFETY: the buffer is host memory holding `len` elements; `dst` is writable and another allocation.
            unsafe { host_copy(dst.as_mut_ptr(), self.ptr.as_ptr(), self.len) };
            return Ok(());
        };
        let _scope = dev.scope(Label::Construct("DeviceBuffer::copy_to_host"));
        // SAFETY: `dst` is writable and `T: DeviceCopy` accepts any bytes; the buffer holds `len` elements.
        unsafe {
            dev.retrieve(
                dst.as_mut_ptr() as usize,
                self.ptr.addr(),
                size_of_val(dst),
                atomics::<T>(),
            )
        }
        .map_err(|e| device_error(self.device(), dev.plugin, e.to_string()))
    }

    /// The buffer's contents as a `Vec`.
    pub fn to_vec(&self) -> Result<Vec<T>, Error> {
        let mut v: Vec<T> = Vec::with_capacity(self.len);
        let Some(dev) = self.dev else {
            // SAFETY: `host_copy` fills all `len` elements (any bytes are a valid `T`) before `set_len`.
            unsafe {
                host_copy(v.as_mut_ptr(), self.ptr.as_ptr(), self.len);
                v.set_len(self.len);
            }
            return Ok(v);
        };
        let _scope = dev.scope(Label::Construct("DeviceBuffer::to_vec"));
        // SAFETY: `T: DeviceCopy` accepts any bytes; the copy fills all `len` elements before `set_len`.
        unsafe {
            let bytes = self.len * size_of::<T>();
            dev.retrieve(
                v.as_mut_ptr() as usize,
                self.ptr.addr(),
                bytes,
                atomics::<T>(),
            )
            .map_err(|e| device_error(self.device(), dev.plugin, e.to_string()))?;
            v.set_len(self.len);
        }
        Ok(v)
    }
}

/// A buffer on the initial device as the host fallback's body sees it: its slice (what device code gets by `Deref`).
///
/// # Safety
/// The buffer is on the initial device (its memory is host memory), and nothing else uses it meanwhile.
#[doc(hidden)]
pub unsafe fn host_slice_mut<T: DeviceCopy>(b: &mut DeviceBuffer<T>) -> &mut [T] {
    if b.len == 0 {
        return &mut [];
    }
    // SAFETY: per the contract; `len` elements from `ptr`, borrowed exclusively through `b`.
    unsafe { std::slice::from_raw_parts_mut(b.as_device_ptr().as_ptr(), b.len) }
}

/// As [`host_slice_mut`], shared.
///
/// # Safety
/// As [`host_slice_mut`], and nothing writes it meanwhile.
#[doc(hidden)]
pub unsafe fn host_slice<T: DeviceCopy>(b: &DeviceBuffer<T>) -> &[T] {
    if b.len == 0 {
        return &[];
    }
    // SAFETY: per the contract.
    unsafe { std::slice::from_raw_parts(b.as_device_ptr().as_ptr(), b.len) }
}

// SAFETY: a buffer's length is fixed at its making.
unsafe impl<T: DeviceCopy> offload_model::lanes::Length for DeviceBuffer<T> {
    fn length(&self) -> usize {
        self.len
    }
}

impl<T: DeviceCopy> Drop for DeviceBuffer<T> {
    fn drop(&mut self) {
        let Some(dev) = self.dev else {
            // `new` allocated the buffer with this very layout, so it is valid.
            let layout = host_layout::<T>(self.len * size_of::<T>()).expect("allocated with it");
            // SAFETY: allocated in `new` with this layout, and a region borrowing the buffer has returned.
            unsafe { std::alloc::dealloc(self.ptr.as_ptr().cast(), layout) };
            return;
        };
        let _scope = dev.scope(Label::Construct("DeviceBuffer drop"));
        // SAFETY: allocated in `new`, and a region borrowing the buffer has returned.
        unsafe { dev.free(self.ptr.addr()) };
    }
}

impl<T: DeviceCopy> std::fmt::Debug for DeviceBuffer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "DeviceBuffer {{ device: {}, len: {}, addr: {:#x} }}",
            self.device(),
            self.len,
            self.ptr.addr()
        )
    }
}
