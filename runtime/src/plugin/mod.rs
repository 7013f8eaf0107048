//! Plugins: one per kind of device, behind one trait, as in LLVM's plugin interface. The CUDA and AMD plugins
//! implement the same two traits.

pub mod amdgpu;
pub mod cuda;
pub mod host_elf;

use crate::tables::Image;
use std::ffi::CStr;

/// A device address.
pub type DevicePtr = u64;

/// One kernel argument: 8 bytes, passed as a `u64` (same ABI). A small by-value parameter's padding bytes are
/// uninitialised, so the bits are never read as a number on the host.
pub type Arg = std::mem::MaybeUninit<u64>;

/// What a kernel launch asks for.
#[derive(Clone, Copy, Debug)]
pub struct LaunchParams {
    pub num_teams: u32,
    pub num_threads: u32,
    /// Bytes of team-shared memory each team gets (zero-filled, 16-byte aligned).
    pub team_shared: usize,
}

/// A failure inside a kernel that started.
#[derive(Debug, Clone)]
pub struct KernelFailure {
    pub message: String,
    /// File, line and column, where the target can report them.
    pub location: Option<(String, u32, u32)>,
    /// The device cannot be used any more (a trap on a GPU).
    pub device_lost: bool,
}

pub trait Plugin: Send + Sync {
    /// `host-elf`, `cuda`, `amdgpu`: the name `OFFLOAD_PLUGINS` and `OFFLOAD_INFO` use.
    fn name(&self) -> &'static str;
    /// The devices this plugin can drive; `Err` says why there are none (no driver, no hardware).
    fn discover(&self) -> Result<Vec<Box<dyn Device>>, String>;
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
    /// (teams, threads per team) of a parallel launch whose clauses leave them open; `spmd` for `teams, parallel`.
    fn default_geometry(&self, spmd: bool) -> (u32, u32);
    /// The most threads a team may have.
    fn max_threads(&self) -> u32 {
        crate::team::MAX_TEAM_THREADS
    }
    /// The most teams a launch gets (`num_teams` is an upper bound): about as many as can run at once, so
    /// per-team memory (a reduction's partial results) stays that of a few waves. Default: 65535, CUDA's classic
    /// grid limit, far beyond the blocks a GPU holds at once.
    fn max_teams(&self) -> u32 {
        65_535
    }
    /// Why a launch gets at most [`Device::max_teams`] teams and [`Device::max_threads`] threads per team: what the
    /// `OFFLOAD_INFO` line says of a launch whose clauses ask for more.
    fn limits_why(&self) -> (&'static str, &'static str) {
        (
            "the most teams the device takes in a launch",
            "the most threads the device takes in a team",
        )
    }
    /// Loads an image; the kernels it holds stay valid for the life of the process.
    fn load_image(&self, image: &Image) -> Result<LoadedImage, String>;
    /// Device memory, zero-filled, aligned to at least [`Device::alloc_align`].
    fn alloc(&self, size: usize) -> Result<DevicePtr, String>;
    /// The alignment every [`Device::alloc`] block has (CUDA's and HSA's allocators give 256 bytes).
    fn alloc_align(&self) -> usize {
        256
    }
    /// Device memory aligned to `align` (a power of two: an element type's alignment). A device that cannot align
    /// a block that much says so rather than hand out a misaligned one.
    fn alloc_aligned(&self, size: usize, align: usize) -> Result<DevicePtr, String> {
        if align > self.alloc_align() {
            return Err(align_error(align, self.alloc_align()));
        }
        self.alloc(size)
    }
    /// # Safety
    /// `ptr` came from [`Device::alloc`] of this device and is not used afterwards.
    unsafe fn free(&self, ptr: DevicePtr);
    /// # Safety
    /// `src` is readable for `size` bytes and `dst..dst+size` lies in one allocation of this device.
    unsafe fn copy_to_device(
        &self,
        dst: DevicePtr,
        src: *const u8,
        size: usize,
    ) -> Result<(), String>;
    /// # Safety
    /// `dst` is writable for `size` bytes and `src..src+size` lies in one allocation of this device.
    unsafe fn copy_from_device(
        &self,
        dst: *mut u8,
        src: DevicePtr,
        size: usize,
    ) -> Result<(), String>;
    /// Runs a kernel with the calling convention `(dyn_ptr, args..)` and waits for it.
    ///
    /// # Safety
    /// `kernel` came from an image loaded on this device and `args` match its parameters.
    unsafe fn launch(
        &self,
        kernel: Kernel,
        args: &[Arg],
        params: LaunchParams,
    ) -> Result<(), KernelFailure>;
}

/// Why a device refuses an alignment.
pub(crate) fn align_error(align: usize, max: usize) -> String {
    format!("the data needs {align}-byte alignment; this device aligns allocations to at most {max} bytes")
}

/// A loaded image: finds kernels by symbol.
pub trait LoadedImageOps: Send + Sync {
    fn kernel(&self, symbol: &CStr) -> Option<Kernel>;
}

pub type LoadedImage = Box<dyn LoadedImageOps>;

/// What a plugin's discovery finds: its devices, or why there are none.
type Discovered = Result<Vec<Box<dyn Device>>, String>;

/// Runs a GPU plugin's discovery so that a panic in it (a driver library that misbehaves) costs the plugin's devices,
/// never the program.
fn guarded(library: &str, discover: fn() -> Discovered) -> Discovered {
    std::panic::catch_unwind(discover).unwrap_or_else(|p| {
        Err(format!(
            "{library} could not be used: {}",
            crate::launch::panic_message(&*p)
        ))
    })
}

/// A plugin's devices from opening each one it found: those that opened (each described at `OFFLOAD_INFO=2`), the
/// others skipped with a note at `OFFLOAD_INFO=1`; none is an `Err` with every reason.
fn opened(
    plugin: &str,
    each: impl Iterator<Item = Result<Box<dyn Device>, String>>,
) -> Result<Vec<Box<dyn Device>>, String> {
    let (mut devices, mut skipped) = (Vec::new(), Vec::new());
    for d in each {
        match d {
            Ok(d) => {
                if crate::icv::info() >= 2 {
                    let DeviceDescription { name, arch, memory } = d.describe();
                    eprintln!(
                        "offload: {plugin} device {}: {name} ({arch}, {} MiB)",
                        devices.len(),
                        memory >> 20
                    );
                }
                devices.push(d);
            }
            Err(e) => skipped.push(e),
        }
    }
    if devices.is_empty() {
        return Err(skipped.join("; "));
    }
    if crate::icv::info() > 0 {
        for s in &skipped {
            eprintln!("offload: plugin {plugin} skips {s}");
        }
    }
    Ok(devices)
}

/// A plugin's note for `OFFLOAD_INFO` (a feature it runs without, a kernel it could not use): plugins return what
/// they know, and this is where their notes are printed, at level 1 and above.
pub(crate) fn note(plugin: &str, message: &dyn std::fmt::Display) {
    if crate::icv::info() > 0 {
        eprintln!("offload: {plugin}: {message}");
    }
}

/// One plugin as discovery finds it: its devices, or why it has none.
#[derive(Clone, Debug)]
pub struct PluginReport {
    pub plugin: &'static str,
    /// (device number with every plugin enabled, description).
    pub devices: Vec<(i32, DeviceDescription)>,
    pub none_because: Option<String>,
}

/// Every plugin and device this build can drive, whatever `OFFLOAD_PLUGINS` and `OMP_TARGET_OFFLOAD` say, numbered
/// as the runtime numbers them with every plugin enabled: what `cargo offload devices` lists.
pub fn inventory() -> Vec<PluginReport> {
    let mut next = 0;
    all()
        .into_iter()
        .map(|p| match p.discover() {
            Ok(devs) => PluginReport {
                plugin: p.name(),
                devices: devs
                    .iter()
                    .map(|d| {
                        next += 1;
                        (next - 1, d.describe())
                    })
                    .collect(),
                none_because: None,
            },
            Err(why) => PluginReport {
                plugin: p.name(),
                devices: Vec::new(),
                none_because: Some(why),
            },
        })
        .collect()
}

/// Every plugin this build knows, in device-number order: GPUs first, so the default device 0 is a GPU when there
/// is one, and the host-elf devices follow.
pub fn all() -> Vec<Box<dyn Plugin>> {
    vec![
        Box::new(cuda::Cuda),
        Box::new(amdgpu::AmdGpu),
        Box::new(host_elf::HostElf),
    ]
}
