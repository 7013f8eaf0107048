//! The device side of memory the program manages itself: what `offload::DevicePtr<T>` and `&offload::DeviceBuffer<T>`
//! parameters are inside a region. Here the memory is local, so a buffer is a slice.

use core::marker::PhantomData;
use core::ops::{Deref, DerefMut};

/// A device address of `T`s, as the host's `DevicePtr<T>` passed it.
#[derive(Debug)]
pub struct DevicePtr<T> {
    addr: u64,
    _t: PhantomData<*mut T>,
}

impl<T> Clone for DevicePtr<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for DevicePtr<T> {}

impl<T> DevicePtr<T> {
    pub(crate) fn from_addr(addr: u64) -> Self {
        DevicePtr {
            addr,
            _t: PhantomData,
        }
    }

    /// The device address, as a number.
    pub fn addr(self) -> u64 {
        self.addr
    }

    /// The memory as a raw pointer.
    pub fn as_ptr(self) -> *mut T {
        self.addr as usize as *mut T
    }

    /// The first `len` elements as a slice.
    ///
    /// # Safety
    /// The allocation holds `len` initialised `T`s and nothing else accesses them for `'a`.
    pub unsafe fn as_slice_mut<'a>(self, len: usize) -> &'a mut [T] {
        // SAFETY: per the contract.
        unsafe { core::slice::from_raw_parts_mut(self.as_ptr(), len) }
    }
}

/// A `DeviceBuffer<T>` inside a region: its elements, as a slice.
#[derive(Debug)]
pub struct DeviceBuffer<T> {
    ptr: *mut T,
    len: usize,
}

impl<T> DeviceBuffer<T> {
    /// # Safety
    /// `ptr` holds `len` `T`s for the buffer's life.
    pub(crate) unsafe fn from_raw(ptr: *mut T, len: usize) -> Self {
        DeviceBuffer { ptr, len }
    }
}

// SAFETY: a buffer's length is fixed for the kernel's run.
unsafe impl<T> offload_model::lanes::Length for DeviceBuffer<T> {
    #[inline(always)]
    fn length(&self) -> usize {
        self.len
    }
}

impl<T> Deref for DeviceBuffer<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: `from_raw`'s contract.
        unsafe { core::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl<T> DerefMut for DeviceBuffer<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        if self.len == 0 {
            return &mut [];
        }
        // SAFETY: `from_raw`'s contract; the host passed `&mut DeviceBuffer`, so nothing else uses it.
        unsafe { core::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}
