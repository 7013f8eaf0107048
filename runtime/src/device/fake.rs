//! A fake device for the device and region layers' tests: its memory is ordinary heap blocks, so the present table
//! and the map-list walk run under Miri (`cargo +nightly miri test -p omp-offload --lib`).

use super::observed::ObservedDevice;
use crate::plugin::{
    Device, DeviceDescription, DeviceMemory, DevicePtr, Kernel, KernelArgs, LaunchLimits,
    LaunchParams, LoadedImage, PluginError,
};
use crate::registry::Image;
use std::sync::{Arc, Mutex};

/// Live allocations: (fake device address, memory).
type Blocks = Vec<(u64, Box<[u8]>)>;

/// Allocations are boxed slices (so Miri checks every copy's bounds); counts what happened. A clone shares the
/// memory and counts (a test keeps one while a `DeviceEntry` owns the other); freeing a block that is not live
/// panics, so a double free fails the test.
#[derive(Default, Clone)]
pub(crate) struct FakeDevice {
    blocks: Arc<Mutex<Blocks>>,
    copies_in: Arc<Mutex<usize>>,
    copies_out: Arc<Mutex<usize>>,
}

impl FakeDevice {
    /// The fake device as device 0 of plugin `fake`, sharing this one's memory and counts.
    pub(crate) fn observed(&self) -> ObservedDevice {
        ObservedDevice::new(0, "fake", Box::new(self.clone()))
    }
    pub(crate) fn live(&self) -> usize {
        self.blocks.lock().unwrap().len()
    }
    pub(crate) fn ins(&self) -> usize {
        *self.copies_in.lock().unwrap()
    }
    pub(crate) fn outs(&self) -> usize {
        *self.copies_out.lock().unwrap()
    }
    /// Reads device memory.
    pub(crate) fn read(&self, tgt: DevicePtr, len: usize) -> Vec<u8> {
        let mut v = vec![0u8; len];
        unsafe { self.copy_from_device(v.as_mut_ptr(), tgt, len) }.unwrap();
        *self.copies_out.lock().unwrap() -= 1;
        v
    }
    pub(crate) fn write(&self, tgt: DevicePtr, data: &[u8]) {
        unsafe { self.copy_to_device(tgt, data.as_ptr(), data.len()) }.unwrap();
        *self.copies_in.lock().unwrap() -= 1;
    }
    /// The block holding `[p, p+len)`, as a raw pointer into it.
    fn at(&self, p: DevicePtr, len: usize) -> *mut u8 {
        let mut blocks = self.blocks.lock().unwrap();
        let (base, b) = blocks
            .iter_mut()
            .find(|(base, b)| p >= *base && p + len as u64 <= *base + b.len() as u64)
            .expect("device access inside an allocation");
        unsafe { b.as_mut_ptr().add((p - *base) as usize) }
    }
}

impl Device for FakeDevice {
    fn describe(&self) -> DeviceDescription {
        DeviceDescription {
            name: "fake".into(),
            arch: "none".into(),
            memory: 0,
        }
    }
    fn rank(&self, _: &Image) -> Option<u32> {
        None
    }
    fn limits(&self) -> LaunchLimits {
        LaunchLimits {
            wide: (1, 1),
            narrow: (1, 1),
            ..crate::plugin::gpu::limits(1, 256, crate::plugin::gpu::GPU_LIMITS_WHY)
        }
    }
    fn load_image(&self, _: &Image) -> Result<LoadedImage, PluginError> {
        Err(PluginError::Load {
            reason: "no images".into(),
        })
    }
    fn memory(&self) -> &dyn DeviceMemory {
        self
    }
    unsafe fn launch(&self, _: Kernel, _: &KernelArgs, _: LaunchParams) -> Result<(), PluginError> {
        unreachable!("the fake device loads no images, so it has no kernels")
    }
}

impl DeviceMemory for FakeDevice {
    fn alloc(&self, size: usize) -> Result<DevicePtr, PluginError> {
        let mut blocks = self.blocks.lock().unwrap();
        // Fake device addresses, far from host ones, spaced so blocks never touch.
        let base = 0x1000_0000 + blocks.iter().map(|(b, _)| *b).max().unwrap_or(0) + 0x10_0000;
        blocks.push((base, vec![0u8; size.max(1)].into_boxed_slice()));
        Ok(base)
    }
    unsafe fn free(&self, ptr: DevicePtr) {
        let mut blocks = self.blocks.lock().unwrap();
        let i = blocks
            .iter()
            .position(|(b, _)| *b == ptr)
            .expect("free of a live allocation");
        blocks.remove(i);
    }
    unsafe fn copy_to_device(
        &self,
        dst: DevicePtr,
        src: *const u8,
        size: usize,
    ) -> Result<(), PluginError> {
        *self.copies_in.lock().unwrap() += 1;
        unsafe { std::ptr::copy_nonoverlapping(src, self.at(dst, size), size) };
        Ok(())
    }
    unsafe fn copy_from_device(
        &self,
        dst: *mut u8,
        src: DevicePtr,
        size: usize,
    ) -> Result<(), PluginError> {
        *self.copies_out.lock().unwrap() += 1;
        unsafe { std::ptr::copy_nonoverlapping(self.at(src, size), dst, size) };
        Ok(())
    }
}
