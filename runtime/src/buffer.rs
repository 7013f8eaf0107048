//! Device memory the program manages itself, passed to regions as is (OpenMP's `is_device_ptr`): `DevicePtr<T>`, a
//! raw device address, and `DeviceBuffer<T>`, a safe owning buffer. A region taking either runs only on the device
//! that holds the memory: it never falls back to the host, which cannot dereference device memory.

use crate::device::{devices, DeviceEntry};
use crate::error::Error;
use crate::mapping::{copy_in, copy_to_host};
use crate::observe::{self, Label, Watch};
use crate::DeviceCopy;
use std::marker::PhantomData;
use std::mem::size_of;

/// The device address of `T`s on device `device`. Copy; only region code may dereference it.
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
    /// Wraps device memory from [`crate::omp_target_alloc`] (or another device allocation).
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

    pub fn addr(self) -> u64 {
        self.addr
    }

    pub fn device(self) -> i32 {
        self.device
    }
}

/// `len` `T`s of device memory on one device, zero-filled, freed on drop.
pub struct DeviceBuffer<T: DeviceCopy> {
    ptr: DevicePtr<T>,
    len: usize,
    dev: &'static DeviceEntry,
}

// SAFETY: the buffer owns its device memory. Not `Sync`: a region on one thread and a copy on another could then
// touch the same device memory at once (a race for atomic elements).
unsafe impl<T: DeviceCopy> Send for DeviceBuffer<T> {}

/// The map-type bits that make the copy helpers treat `T`s as atomics.
fn atomics<T: DeviceCopy>() -> u64 {
    T::HOST_ATOMIC << offload_model::abi::map_type::HOST_ATOMIC_SHIFT
}

fn device_error(device: i32, plugin: &'static str, message: String) -> Error {
    Error::Device {
        device,
        plugin,
        message,
    }
}

impl<T: DeviceCopy> DeviceBuffer<T> {
    /// Allocates `len` zero-filled elements on offload device `device`.
    pub fn new(len: usize, device: i32) -> Result<Self, Error> {
        let dev = usize::try_from(device)
            .ok()
            .and_then(|d| devices().get(d))
            .ok_or_else(|| {
                device_error(
                    device,
                    "none",
                    format!(
                        "there is no offload device {device} ({} devices)",
                        devices().len()
                    ),
                )
            })?;
        let bytes = len.checked_mul(size_of::<T>()).ok_or_else(|| {
            device_error(
                device,
                dev.plugin,
                format!("{len} elements of {} bytes overflow", size_of::<T>()),
            )
        })?;
        let _scope = Watch::now().scope(Label::Construct("DeviceBuffer::new"), dev);
        let addr = observe::alloc(&*dev.dev, bytes.max(1), std::mem::align_of::<T>())
            .map_err(|m| device_error(device, dev.plugin, m))?;
        Ok(DeviceBuffer {
            ptr: DevicePtr {
                addr,
                device,
                _t: PhantomData,
            },
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

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn device(&self) -> i32 {
        self.ptr.device
    }

    pub fn as_device_ptr(&self) -> DevicePtr<T> {
        self.ptr
    }

    fn check_len(&self, n: usize) -> Result<(), Error> {
        if n == self.len {
            return Ok(());
        }
        Err(device_error(
            self.device(),
            self.dev.plugin,
            format!("host slice has {n} elements, buffer {}", self.len),
        ))
    }

    /// Overwrites the buffer with `src` (same length).
    pub fn copy_from_host(&mut self, src: &[T]) -> Result<(), Error> {
        self.check_len(src.len())?;
        let _scope = Watch::now().scope(Label::Construct("DeviceBuffer::copy_from_host"), self.dev);
        // SAFETY: `src` is readable; the buffer holds `len` elements. Atomics are read one by one, atomically.
        unsafe {
            copy_in(
                &*self.dev.dev,
                self.ptr.addr,
                src.as_ptr() as usize,
                size_of_val(src),
                atomics::<T>(),
            )
        }
        .map_err(|m| device_error(self.device(), self.dev.plugin, m))
    }

    /// Copies the buffer into `dst` (same length).
    pub fn copy_to_host(&self, dst: &mut [T]) -> Result<(), Error> {
        self.check_len(dst.len())?;
        let _scope = Watch::now().scope(Label::Construct("DeviceBuffer::copy_to_host"), self.dev);
        // SAFETY: `dst` is writable and `T: DeviceCopy` accepts any bytes; the buffer holds `len` elements.
        unsafe {
            copy_to_host(
                &*self.dev.dev,
                dst.as_mut_ptr() as usize,
                self.ptr.addr,
                size_of_val(dst),
                atomics::<T>(),
            )
        }
        .map_err(|m| device_error(self.device(), self.dev.plugin, m))
    }

    /// The buffer's contents as a `Vec`.
    pub fn to_vec(&self) -> Result<Vec<T>, Error> {
        let mut v: Vec<T> = Vec::with_capacity(self.len);
        let _scope = Watch::now().scope(Label::Construct("DeviceBuffer::to_vec"), self.dev);
        // SAFETY: `T: DeviceCopy` accepts any bytes; the copy fills all `len` elements before `set_len`.
        unsafe {
            let bytes = self.len * size_of::<T>();
            copy_to_host(
                &*self.dev.dev,
                v.as_mut_ptr() as usize,
                self.ptr.addr,
                bytes,
                atomics::<T>(),
            )
            .map_err(|m| device_error(self.device(), self.dev.plugin, m))?;
            v.set_len(self.len);
        }
        Ok(v)
    }
}

// SAFETY: a buffer's length is fixed at its making.
unsafe impl<T: DeviceCopy> offload_model::lanes::Length for DeviceBuffer<T> {
    fn length(&self) -> usize {
        self.len
    }
}

impl<T: DeviceCopy> Drop for DeviceBuffer<T> {
    fn drop(&mut self) {
        let _scope = Watch::now().scope(Label::Construct("DeviceBuffer drop"), self.dev);
        // SAFETY: allocated in `new`, and a region borrowing the buffer has returned.
        unsafe { observe::free(&*self.dev.dev, self.ptr.addr) };
    }
}

impl<T: DeviceCopy> std::fmt::Debug for DeviceBuffer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "DeviceBuffer {{ device: {}, len: {}, addr: {:#x} }}",
            self.device(),
            self.len,
            self.ptr.addr
        )
    }
}
