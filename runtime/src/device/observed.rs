//! The one device wrapper: a plugin's device, numbered, whose every call that moves memory or runs code is observed
//! here (traced, profiled, printed per `OFFLOAD_INFO`), as LLVM's `DeviceTy::allocData`/`submitData` are, so no
//! caller has to remember to. Nothing above the device layer holds a plugin device; the present table, the map-list
//! walk, the runtime routines and `DeviceBuffer` all go through this.

use crate::host::geometry::Launch;
use crate::observe::{self, Direction, Label, LaunchName, Scope, Watch};
use crate::plugin::{
    Device, DeviceDescription, DeviceMemory, DevicePtr, Kernel, KernelArgs, LaunchLimits,
    LaunchParams, LoadedImage, PluginError,
};
use crate::registry::{entry_symbol, Image};
use offload_model::abi::map_type::{HOST_ATOMIC_MASK, HOST_ATOMIC_SHIFT};
use offload_model::fatbin::OffloadEntry;
use std::sync::atomic::{AtomicU16, AtomicU32, AtomicU64, AtomicU8, Ordering::Relaxed};

pub struct ObservedDevice {
    /// The device number, across every plugin.
    pub number: i32,
    pub plugin: &'static str,
    dev: Box<dyn Device>,
    /// What the device takes in a launch, asked once.
    limits: LaunchLimits,
}

impl ObservedDevice {
    pub fn new(number: i32, plugin: &'static str, dev: Box<dyn Device>) -> Self {
        let limits = dev.limits();
        ObservedDevice {
            number,
            plugin,
            dev,
            limits,
        }
    }

    /// Names the construct or region that the transfers, allocations and table changes on this thread belong to
    /// until the scope ends.
    #[inline]
    pub fn scope(&self, label: Label) -> Scope {
        Watch::now().scope(label, self.number, self.plugin)
    }

    pub fn describe(&self) -> DeviceDescription {
        self.dev.describe()
    }

    /// What the device takes in a launch: its default geometry, maxima and most arguments.
    #[inline]
    pub fn limits(&self) -> &LaunchLimits {
        &self.limits
    }

    /// How well this device runs `image`, if at all.
    pub fn rank(&self, image: &Image) -> Option<u32> {
        self.dev.rank(image)
    }

    /// Loads an image (the caller reports the outcome with the image's name).
    pub fn load_image(&self, image: &Image) -> Result<LoadedImage, PluginError> {
        self.dev.load_image(image)
    }

    /// Whether the device's memory is the host's, at the same addresses (see [`DeviceMemory::memory_is_host`]):
    /// such a device uses host atomics in place.
    pub fn memory_is_host(&self) -> bool {
        self.dev.memory().memory_is_host()
    }

    /// `bytes` of device memory aligned to `align`, zero-filled.
    #[inline]
    pub fn alloc(&self, bytes: usize, align: usize) -> Result<DevicePtr, PluginError> {
        observe::alloc(bytes, || self.dev.memory().alloc_aligned(bytes, align))
    }

    /// # Safety
    /// `ptr` came from [`ObservedDevice::alloc`] of this device and is not used afterwards.
    #[inline]
    pub unsafe fn free(&self, ptr: DevicePtr) {
        // SAFETY: per the contract.
        observe::free(ptr, || unsafe { self.dev.memory().free(ptr) })
    }

    /// Copies host data to the device. Atomic elements (`map_type`'s `HOST_ATOMIC` bits; other host threads may be
    /// using them) are read one by one with atomic loads into a staging buffer first: a plain copy would race with
    /// them; `map_type` 0 is a plain copy.
    ///
    /// # Safety
    /// The host range is readable and the device range lies in one allocation of this device.
    #[inline]
    pub unsafe fn submit(
        &self,
        tgt: DevicePtr,
        host: usize,
        size: usize,
        map_type: u64,
    ) -> Result<(), PluginError> {
        observe::transfer(Direction::ToDevice, host, tgt, size, || {
            // SAFETY: forwarded.
            unsafe { submit(self.dev.memory(), tgt, host, size, map_type) }
        })
    }

    /// Copies device data to the host; atomic elements are written with atomic stores, as
    /// [`ObservedDevice::submit`] reads them.
    ///
    /// # Safety
    /// The host range is writable (atomics: valid atomics) and the device range lies in one allocation of this
    /// device.
    #[inline]
    pub unsafe fn retrieve(
        &self,
        host: usize,
        tgt: DevicePtr,
        size: usize,
        map_type: u64,
    ) -> Result<(), PluginError> {
        observe::transfer(Direction::ToHost, host, tgt, size, || {
            // SAFETY: forwarded.
            unsafe { retrieve(self.dev.memory(), host, tgt, size, map_type) }
        })
    }

    /// The launch template, as LLVM's `GenericKernelTy::launch`: runs `kernel` for `region` (whose offload entry is
    /// `entry`) with `args`, packed once, in `params` (its geometry from [`ObservedDevice::geometry`]), and waits for
    /// it. The argument count is checked against the device's limits here, the launch is reported (`OFFLOAD_INFO`,
    /// `OFFLOAD_PROFILE`; `asked`, what the region's clauses asked for, is compared with `params`) and what region
    /// code printed is printed, so each plugin's launch does only its own part.
    ///
    /// # Safety
    /// `kernel` came from an image loaded on this device and `args` match its parameters.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    pub(super) unsafe fn launch(
        &self,
        w: Watch,
        region: &'static str,
        entry: &OffloadEntry,
        asked: Launch,
        kernel: Kernel,
        args: &KernelArgs,
        params: LaunchParams,
    ) -> Result<(), PluginError> {
        let name = || LaunchName {
            region,
            entry: entry_symbol(entry),
            device: self.number,
            plugin: self.plugin,
            teams: params.num_teams,
            threads: params.num_threads,
            team_shared: params.team_shared,
        };
        let note = || asked.reduced((params.num_teams, params.num_threads), self.limits.why);
        let launched = observe::launch(w, name, note, || {
            if args.len() > self.limits.max_args {
                return Err(self.too_many_arguments(args.len()));
            }
            // SAFETY: forwarded; the geometry is within the device's limits.
            unsafe { self.dev.launch(kernel, args, params) }
        });
        // What region code printed, after the launch and before its failure is reported.
        let (printed, lost) = self.dev.take_printed();
        if !printed.is_empty() {
            use std::io::Write;
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(&printed);
            let _ = out.flush();
        }
        if lost > 0 {
            observe::warning(format_args!(
                "{lost} line(s) region {region} printed on device {} ({}) did not fit in its print buffer",
                self.number, self.plugin
            ));
        }
        launched
    }

    #[cold]
    fn too_many_arguments(&self, n: usize) -> PluginError {
        PluginError::Launch {
            reason: format!(
                "the kernel takes {n} arguments; the {} device passes at most {} (pass fewer arguments, or group \
                 them in a `#[declare_target]` struct)",
                self.plugin, self.limits.max_args
            ),
        }
    }
}

/// The element size of atomic host data that `map_type` flags (0: plain data).
pub(crate) fn atomic_elements(map_type: u64) -> usize {
    ((map_type & HOST_ATOMIC_MASK) >> HOST_ATOMIC_SHIFT) as usize
}

/// Copies `size` bytes of atomics of `elem` bytes from `src` to `dst`, each with an atomic load and store: other
/// threads (host code, or kernels of a host-memory device) may use either side meanwhile.
///
/// # Safety
/// Both ranges are `size` bytes of aligned atomics of `elem` bytes, and do not overlap.
pub(crate) unsafe fn atomic_copy(dst: usize, src: usize, size: usize, elem: usize) {
    for at in (0..size).step_by(elem) {
        let (d, s) = (dst + at, src + at);
        // SAFETY: per the contract.
        unsafe {
            match elem {
                1 => AtomicU8::from_ptr(d as *mut u8)
                    .store(AtomicU8::from_ptr(s as *mut u8).load(Relaxed), Relaxed),
                2 => AtomicU16::from_ptr(d as *mut u16)
                    .store(AtomicU16::from_ptr(s as *mut u16).load(Relaxed), Relaxed),
                4 => AtomicU32::from_ptr(d as *mut u32)
                    .store(AtomicU32::from_ptr(s as *mut u32).load(Relaxed), Relaxed),
                _ => AtomicU64::from_ptr(d as *mut u64)
                    .store(AtomicU64::from_ptr(s as *mut u64).load(Relaxed), Relaxed),
            }
        }
    }
}

/// [`ObservedDevice::submit`]'s copy.
///
/// # Safety
/// As [`ObservedDevice::submit`].
#[inline]
unsafe fn submit(
    dev: &dyn DeviceMemory,
    tgt: DevicePtr,
    host: usize,
    size: usize,
    map_type: u64,
) -> Result<(), PluginError> {
    let elem = atomic_elements(map_type);
    if elem == 0 {
        // SAFETY: per the contract.
        return unsafe { dev.copy_to_device(tgt, host as *const u8, size) };
    }
    if dev.memory_is_host() {
        // SAFETY: per the contract; device memory is host memory at `tgt`, holding the same atomics.
        unsafe { atomic_copy(tgt as usize, host, size, elem) };
        return Ok(());
    }
    let mut staging = vec![0u8; size];
    for (i, chunk) in staging.chunks_exact_mut(elem).enumerate() {
        let p = host + i * elem;
        // SAFETY: `p` is an aligned atomic of `elem` bytes inside the host range.
        let v: u64 = unsafe {
            match elem {
                1 => AtomicU8::from_ptr(p as *mut u8).load(Relaxed).into(),
                2 => AtomicU16::from_ptr(p as *mut u16).load(Relaxed).into(),
                4 => AtomicU32::from_ptr(p as *mut u32).load(Relaxed).into(),
                _ => AtomicU64::from_ptr(p as *mut u64).load(Relaxed),
            }
        };
        chunk.copy_from_slice(&v.to_ne_bytes()[..elem]);
    }
    // SAFETY: per the contract.
    unsafe { dev.copy_to_device(tgt, staging.as_ptr(), size) }
}

/// [`ObservedDevice::retrieve`]'s copy.
///
/// # Safety
/// As [`ObservedDevice::retrieve`].
#[inline]
unsafe fn retrieve(
    dev: &dyn DeviceMemory,
    host: usize,
    tgt: DevicePtr,
    size: usize,
    map_type: u64,
) -> Result<(), PluginError> {
    let elem = atomic_elements(map_type);
    if elem == 0 {
        // SAFETY: per the contract.
        return unsafe { dev.copy_from_device(host as *mut u8, tgt, size) };
    }
    if dev.memory_is_host() {
        // SAFETY: as in `submit`.
        unsafe { atomic_copy(host, tgt as usize, size, elem) };
        return Ok(());
    }
    let mut staging = vec![0u8; size];
    // SAFETY: per the contract.
    unsafe { dev.copy_from_device(staging.as_mut_ptr(), tgt, size) }?;
    for (i, chunk) in staging.chunks_exact(elem).enumerate() {
        let p = host + i * elem;
        let mut b = [0u8; 8];
        b[..elem].copy_from_slice(chunk);
        let v = u64::from_ne_bytes(b);
        // SAFETY: `p` is an aligned atomic of `elem` bytes inside the host range; truncation keeps its own bytes.
        unsafe {
            match elem {
                1 => AtomicU8::from_ptr(p as *mut u8).store(v as u8, Relaxed),
                2 => AtomicU16::from_ptr(p as *mut u16).store(v as u16, Relaxed),
                4 => AtomicU32::from_ptr(p as *mut u32).store(v as u32, Relaxed),
                _ => AtomicU64::from_ptr(p as *mut u64).store(v, Relaxed),
            }
        }
    }
    Ok(())
}
