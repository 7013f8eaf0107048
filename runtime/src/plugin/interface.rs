//! The plugin interface, as LLVM's: a [`Plugin`] finds [`Device`]s; a device loads images, manages its memory, copies
//! and launches kernels. Every fallible call returns a [`PluginError`] saying what happened; a plugin never prints.

use super::error::PluginError;
pub use crate::host::geometry::LaunchLimits;
use crate::registry::Image;
#[cfg(any(feature = "cuda", feature = "gpu-sim"))]
use std::ffi::c_void;
use std::ffi::CStr;
use std::ops::{Deref, DerefMut};

/// A device address.
/// The most blocks (teams) one of our GPU launches takes: CUDA's classic grid limit, far beyond the blocks a GPU
/// holds at once, so that per-team memory (a reduction's partial results) stays that of a few waves.
pub const MAX_LAUNCH_BLOCKS: u32 = 65_535;

pub type DevicePtr = u64;

/// One kernel argument: 8 bytes, passed as a `u64` (same ABI). A small by-value parameter's padding bytes are
/// uninitialised, so the bits are never read as a number on the host.
pub type Arg = std::mem::MaybeUninit<u64>;

/// A launch's kernel arguments, packed once in the calling convention's layout, which every plugin passes on as it
/// is: `dyn_ptr` (0: no plugin passes one), then one 8-byte word per argument, contiguous. The host plugins call the
/// kernel with the words ([`Deref`]: the arguments after `dyn_ptr`), CUDA gets a pointer to each
/// ([`KernelArgs::pointers`]), an AMD GPU's kernarg segment is the bytes ([`KernelArgs::bytes`]).
pub struct KernelArgs {
    words: Vec<Arg>,
}

impl KernelArgs {
    /// `n` arguments, uninitialised until written (through [`DerefMut`]).
    #[inline]
    pub fn new(n: usize) -> KernelArgs {
        let mut words = vec![Arg::uninit(); n + 1];
        words[0] = Arg::new(0);
        KernelArgs { words }
    }

    /// The block's bytes, which are copied, never read as numbers (a small by-value argument's padding is
    /// uninitialised).
    #[inline]
    #[cfg(feature = "amdgpu")]
    pub fn bytes(&self) -> &[std::mem::MaybeUninit<u8>] {
        // SAFETY: the words are `8 * len` contiguous bytes; `MaybeUninit<u8>` claims nothing about them.
        unsafe { std::slice::from_raw_parts(self.words.as_ptr().cast(), 8 * self.words.len()) }
    }

    /// CUDA's `kernelParams`: a pointer to each word of the block, `dyn_ptr` first. Whoever launches copies the bytes
    /// each points to (the driver, or gpu-sim, which stands in for it); they are valid while `self` is.
    #[cfg(any(feature = "cuda", feature = "gpu-sim"))]
    pub fn pointers(&self) -> Vec<*mut c_void> {
        self.words
            .iter()
            .map(|a| a.as_ptr().cast_mut().cast::<c_void>())
            .collect()
    }
}

impl From<&[Arg]> for KernelArgs {
    fn from(args: &[Arg]) -> KernelArgs {
        let mut packed = KernelArgs::new(args.len());
        packed.copy_from_slice(args);
        packed
    }
}

impl Default for KernelArgs {
    fn default() -> KernelArgs {
        KernelArgs::new(0)
    }
}

/// The arguments, after `dyn_ptr`.
impl Deref for KernelArgs {
    type Target = [Arg];
    #[inline]
    fn deref(&self) -> &[Arg] {
        &self.words[1..]
    }
}

impl DerefMut for KernelArgs {
    #[inline]
    fn deref_mut(&mut self) -> &mut [Arg] {
        &mut self.words[1..]
    }
}

/// What a kernel launch asks for: the geometry the device layer computed within the device's [`LaunchLimits`] (at
/// least one team of one thread).
#[derive(Clone, Copy, Debug)]
pub struct LaunchParams {
    pub num_teams: u32,
    pub num_threads: u32,
    /// Bytes of team-shared memory each team gets (zero-filled, 16-byte aligned).
    pub team_shared: usize,
}

/// What a plugin's discovery found: its devices, and what it noted on the way (a device it skipped, a feature it
/// could not set up), which the runtime reports at `OFFLOAD_INFO=1`.
#[derive(Default)]
pub struct Discovered {
    pub devices: Vec<Box<dyn Device>>,
    pub notes: Vec<String>,
}

pub trait Plugin: Send + Sync {
    /// `host-elf`, `cuda`, `amdgpu`, `gpu-sim`: the name `OFFLOAD_PLUGINS` and `OFFLOAD_INFO` use.
    fn name(&self) -> &'static str;
    /// The devices this plugin can drive; `Err` says why there are none (no driver, no hardware).
    fn discover(&self) -> Result<Discovered, PluginError>;
    /// Whether the runtime uses this plugin when `OFFLOAD_PLUGINS` is unset (gpu-sim only when it is named).
    fn on_by_default(&self) -> bool {
        true
    }
}

/// An opaque kernel handle, valid for the device that returned it.
#[derive(Clone, Copy, Debug)]
pub struct Kernel(pub usize);

/// What `cargo offload devices` shows of a device.
#[derive(Clone, Debug)]
pub struct DeviceDescription {
    /// The product name (`NVIDIA H100 80GB HBM3`, `AMD Instinct MI250X`, the host's CPU).
    pub name: String,
    /// `sm_90`, `gfx90a`, or the host's architecture.
    pub arch: String,
    /// Device memory in bytes.
    pub memory: u64,
}

pub trait Device: Send + Sync {
    /// Name, architecture and memory.
    fn describe(&self) -> DeviceDescription;
    /// Whether this device can run the image (its triple, architecture and format), and how well: images are loaded
    /// best first (a cubin built for this very GPU before PTX the driver must compile).
    fn rank(&self, image: &Image) -> Option<u32>;
    /// What the device takes in a launch (its default geometry, maxima, most arguments), asked once when the
    /// device is opened.
    fn limits(&self) -> LaunchLimits;
    /// Loads an image; the kernels it holds stay valid for the life of the process.
    fn load_image(&self, image: &Image) -> Result<LoadedImage, PluginError>;
    /// The device's memory: allocations and copies.
    fn memory(&self) -> &dyn DeviceMemory;
    /// What the last launch's region code printed (`offload::println!`) where the device keeps it (GPUs, gpu-sim),
    /// and how many lines did not fit; emptied for the next launch. The runtime prints it, failed launch or not.
    fn take_printed(&self) -> (Vec<u8>, u64) {
        (Vec::new(), 0)
    }
    /// Runs a kernel with the calling convention `(dyn_ptr, args..)` and waits for it: the narrow launch the device
    /// layer's template calls once it has computed the geometry within [`Device::limits`], checked the argument count
    /// and packed the arguments. A kernel that started and failed is [`PluginError::Panic`] or
    /// [`PluginError::Trap`]; one the device refused is [`PluginError::Launch`].
    ///
    /// # Safety
    /// `kernel` came from an image loaded on this device and `args` match its parameters (at most
    /// [`LaunchLimits::max_args`]); `params` is within [`Device::limits`].
    unsafe fn launch(
        &self,
        kernel: Kernel,
        args: &KernelArgs,
        params: LaunchParams,
    ) -> Result<(), PluginError>;
}

/// A device's memory, as LLVM's plugin interface has it (`dataAlloc`, `dataDelete`, `dataSubmit`, `dataRetrieve`):
/// what a [`Device`] hands out ([`Device::memory`]) and the device layer allocates, frees and copies through. A
/// plugin implements it on its device (CUDA, AMD) or on the memory it shares with others (the host-compiled devices'
/// `HostMemory`).
pub trait DeviceMemory {
    /// Device memory, zero-filled, aligned to at least [`DeviceMemory::alloc_align`].
    fn alloc(&self, size: usize) -> Result<DevicePtr, PluginError>;
    /// The alignment every [`DeviceMemory::alloc`] block has (CUDA's and HSA's allocators give 256 bytes).
    fn alloc_align(&self) -> usize {
        256
    }
    /// Device memory aligned to `align` (a power of two: an element type's alignment). A device that cannot align
    /// a block that much says so rather than hand out a misaligned one.
    fn alloc_aligned(&self, size: usize, align: usize) -> Result<DevicePtr, PluginError> {
        if align > self.alloc_align() {
            return Err(PluginError::Alignment {
                align,
                max: self.alloc_align(),
            });
        }
        self.alloc(size)
    }
    /// # Safety
    /// `ptr` came from [`DeviceMemory::alloc`] (or [`DeviceMemory::alloc_aligned`]) of this memory and is not used
    /// afterwards.
    unsafe fn free(&self, ptr: DevicePtr);
    /// # Safety
    /// `src` is readable for `size` bytes and `dst..dst+size` lies in one allocation of this memory.
    unsafe fn copy_to_device(
        &self,
        dst: DevicePtr,
        src: *const u8,
        size: usize,
    ) -> Result<(), PluginError>;
    /// # Safety
    /// `dst` is writable for `size` bytes and `src..src+size` lies in one allocation of this memory.
    unsafe fn copy_from_device(
        &self,
        dst: *mut u8,
        src: DevicePtr,
        size: usize,
    ) -> Result<(), PluginError>;
    /// Whether the device's memory is the host's, which running kernels use at the same addresses (host-elf,
    /// gpu-sim): then a copy of atomics is made element by element with atomic loads and stores on both sides, since
    /// a kernel may be using them meanwhile (a device global updated while a region runs).
    fn memory_is_host(&self) -> bool {
        false
    }
}

/// A loaded image: finds kernels and device globals by symbol.
pub trait LoadedImageOps: Send + Sync {
    /// The kernel named `symbol`; `Ok(None)` if the image has none by that name.
    fn kernel(&self, symbol: &CStr) -> Result<Option<Kernel>, PluginError>;
    /// The device address of the global variable named `symbol` (a `#[declare_target] static`'s copy) and its size
    /// where the image records it; `Ok(None)` if the image has none by that name.
    fn global(&self, symbol: &CStr) -> Result<Option<Global>, PluginError>;
}

/// A global variable of a loaded image.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Global {
    pub address: DevicePtr,
    /// Its size in bytes, where the image says (a shared object's `dlsym` does not).
    pub size: Option<usize>,
}

pub type LoadedImage = Box<dyn LoadedImageOps>;
