//! A CUDA device: its primary context, its memory and its launches.

use super::error::{fail, launch_failure, Stage};
use super::host_slot::{global_pointer, HostSlot};
use super::image::CudaImage;
use super::lane::Lane;
use super::rank::{check_image, rank_for};
use crate::plugin::error::PluginError;
use crate::plugin::gpu::lanes::{Lanes, LANES_PER_DEVICE};
use crate::plugin::gpu::{self, panic, panic::PanicReports, print, print::Prints};
use crate::plugin::interface::{
    Device, DeviceDescription, DeviceMemory, DevicePtr, Kernel, KernelArgs, LaunchLimits,
    LaunchParams, LoadedImage,
};
use crate::registry::Image;
use cudarc::driver::result::{self, stream};
use cudarc::driver::sys::{self, CUresult};
use offload_model::device_kind::{NvidiaArch, NVPTX_TRIPLE};
use std::ffi::{c_void, CStr};
use std::sync::RwLock;

/// Dynamic shared memory a kernel may use without opting in (`CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`),
/// counting its static shared memory.
pub(super) const SHARED_WITHOUT_OPT_IN: usize = 48 * 1024;

/// Size of the buffer for the JIT compiler's error log.
pub(super) const JIT_LOG_BYTES: usize = 16 * 1024;

pub(super) struct CudaDevice {
    /// The driver's device number, for messages.
    pub(super) ordinal: i32,
    pub(super) ctx: sys::CUcontext,
    pub(super) name: String,
    /// Compute capability (major, minor).
    pub(super) cc: (u32, u32),
    pub(super) sm_count: u32,
    pub(super) max_threads: u32,
    /// Shared memory a team may have with the opt-in attribute set.
    pub(super) max_shared: usize,
    pub(super) total_mem: usize,
    /// The panic record and the print buffer: mapped pinned host memory, where it could be allocated.
    pub(super) panics: PanicReports<Option<HostSlot>>,
    pub(super) prints: Prints<Option<HostSlot>>,
    /// Held shared by each launch until its kernel has ended, and alone to drain the print buffer, so no kernel
    /// writes the buffer while it is drained.
    pub(super) running: RwLock<()>,
    /// A stream (and pinned staging) per thread using the device at once: every allocation's fill, copy and launch
    /// runs on one, and waits for it, so tasks overlap here.
    pub(super) lanes: Lanes<Lane>,
}

// SAFETY: the driver API is thread-safe, and a primary context may be current on any number of threads at once;
// every method makes it current on its own thread before calling the driver; a lane is used by one thread at a time.
// The panic record and the print buffer are pinned host memory that kernels write and the host reads only once they
// have ended: the record once a kernel's trap has stopped every kernel of the context, the buffer while no launch
// holds `running`.
unsafe impl Send for CudaDevice {}
unsafe impl Sync for CudaDevice {}

impl Drop for CudaDevice {
    fn drop(&mut self) {
        if self.make_current().is_err() {
            return;
        }
        for slot in [&self.panics.block, &self.prints.block]
            .into_iter()
            .flatten()
        {
            // SAFETY: the images pointing at it are this device's, which no launch uses any more.
            unsafe { slot.free() };
        }
    }
}

impl CudaDevice {
    /// Reads a device's properties and retains its primary context, which the device then holds for the life of the
    /// process (devices are never dropped; their kernels must stay valid).
    pub(super) fn open(ordinal: i32) -> Result<CudaDevice, String> {
        use sys::CUdevice_attribute::*;
        let dev = result::device::get(ordinal).map_err(|e| fail("cuDeviceGet", e))?;
        let attr = |a: sys::CUdevice_attribute| -> Result<u32, String> {
            // SAFETY: `dev` came from cuDeviceGet.
            let v = unsafe { result::device::get_attribute(dev, a) }
                .map_err(|e| fail(&format!("cuDeviceGetAttribute({a:?})"), e))?;
            Ok(v.max(0) as u32)
        };
        let cc = (
            attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
            attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
        );
        let sm_count = attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?.max(1);
        let max_threads = attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?.max(1);
        let max_shared = attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)? as usize;
        // SAFETY: as above.
        let total_mem =
            unsafe { result::device::total_mem(dev) }.map_err(|e| fail("cuDeviceTotalMem", e))?;
        // cudarc's `device::get_name` panics on a name without a NUL; read it into our own buffer instead.
        let mut buf = [0u8; 256];
        // SAFETY: the driver writes at most `buf.len()` bytes.
        unsafe { sys::cuDeviceGetName(buf.as_mut_ptr().cast(), buf.len() as i32, dev) }
            .result()
            .map_err(|e| fail("cuDeviceGetName", e))?;
        let name = CStr::from_bytes_until_nul(&buf)
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|_| String::from_utf8_lossy(&buf).into_owned());
        // SAFETY: as above. Retained last, so a failure above leaks nothing.
        let ctx = unsafe { result::primary_ctx::retain(dev) }
            .map_err(|e| fail("cuDevicePrimaryCtxRetain", e))?;
        // Without a record the device still runs kernels; a panic then traps without saying where.
        // SAFETY: `ctx` was just retained.
        let current =
            unsafe { result::ctx::set_current(ctx) }.map_err(|e| fail("cuCtxSetCurrent", e));
        let panics = PanicReports::open(
            current
                .clone()
                .and_then(|()| HostSlot::new(&panic::PROTOCOL)),
        );
        // Without a print buffer, what region code prints is dropped.
        let prints = Prints::open(current.and_then(|()| HostSlot::new(&print::PROTOCOL)));
        Ok(CudaDevice {
            ordinal,
            ctx,
            name,
            cc,
            sm_count,
            max_threads,
            max_shared,
            total_mem,
            panics,
            prints,
            running: RwLock::new(()),
            lanes: Lanes::new(LANES_PER_DEVICE),
        })
    }

    /// Makes the device's context current on the calling thread.
    pub(super) fn make_current(&self) -> Result<(), String> {
        // SAFETY: `ctx` is a retained primary context, never released.
        unsafe { result::ctx::set_current(self.ctx) }.map_err(|e| fail("cuCtxSetCurrent", e))
    }

    /// `f` on a lane no other thread holds (made if none is idle); the context is current. A lane that cannot be
    /// made is `f`'s error.
    fn on_lane<R>(&self, f: impl FnOnce(&mut Lane) -> Result<R, String>) -> Result<R, String> {
        self.make_current()?;
        self.lanes.with(Lane::new, f).and_then(|r| r)
    }

    /// Points `module`'s global `symbol` (a device address) at `address`, through a lane, so the copy has ended
    /// before any stream launches a kernel of the module; an image without the global is left alone.
    ///
    /// # Safety
    /// `module` is loaded in this device's context, which is current.
    unsafe fn point_global(
        &self,
        module: sys::CUmodule,
        symbol: &str,
        address: sys::CUdeviceptr,
    ) -> Result<(), String> {
        // SAFETY: per the contract.
        let Some(global) = (unsafe { global_pointer(module, symbol) })? else {
            return Ok(());
        };
        let bytes = address.to_ne_bytes();
        // SAFETY: `global` is the module's 8-byte variable.
        self.on_lane(|lane| unsafe { lane.copy_in(global, bytes.as_ptr(), bytes.len()) })
    }

    /// `what` on this device: for messages.
    pub(super) fn on(&self, what: String) -> String {
        format!("{what} on CUDA device {} ({})", self.ordinal, self.name)
    }

    /// Lets `f` use `bytes` of dynamic shared memory. Past 48 KiB (with its static shared memory) a kernel must opt
    /// in; the attribute is set to the device's maximum, so concurrent launches of the same kernel asking for
    /// different sizes never shrink it under each other.
    ///
    /// # Safety
    /// `f` is a kernel of a module loaded in this device's context, which is current.
    pub(super) unsafe fn reserve_shared(
        &self,
        f: sys::CUfunction,
        bytes: usize,
    ) -> Result<(), String> {
        use sys::CUfunction_attribute::*;
        // SAFETY: per the contract.
        let fixed = unsafe {
            result::function::get_function_attribute(f, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)
        }
        .map_err(|e| fail("cuFuncGetAttribute(CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)", e))?
        .max(0) as usize;
        if fixed + bytes <= SHARED_WITHOUT_OPT_IN {
            return Ok(());
        }
        if fixed + bytes > self.max_shared {
            return Err(format!(
                "the launch asks for {bytes} bytes of team-shared memory and the kernel has {fixed} bytes of static \
                 shared memory; CUDA device {} ({}) allows at most {} bytes per team",
                self.ordinal, self.name, self.max_shared
            ));
        }
        let limit = (self.max_shared - fixed) as i32;
        // SAFETY: per the contract.
        unsafe {
            result::function::set_function_attribute(
                f,
                CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                limit,
            )
        }
        .map_err(|e| {
            fail(
                &format!(
                    "cuFuncSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, {limit})"
                ),
                e,
            )
        })
    }
}

impl Device for CudaDevice {
    fn describe(&self) -> DeviceDescription {
        DeviceDescription {
            name: self.name.clone(),
            arch: NvidiaArch::new(self.cc.0, self.cc.1).to_string(),
            memory: self.total_mem as u64,
        }
    }

    fn rank(&self, image: &Image) -> Option<u32> {
        if image.triple != NVPTX_TRIPLE {
            return None;
        }
        rank_for(self.cc, image.arch, image.format)
    }

    fn limits(&self) -> LaunchLimits {
        gpu::limits(self.sm_count, self.max_threads, gpu::GPU_LIMITS_WHY)
    }

    fn load_image(&self, image: &Image) -> Result<LoadedImage, PluginError> {
        let load = |reason: String| PluginError::Load { reason };
        check_image(image).map_err(load)?;
        self.make_current().map_err(load)?;
        // The driver parses a cubin in place: give it an aligned copy when the embedded bytes are not.
        let aligned: Vec<u128>;
        let data: *const c_void = if image.bytes.as_ptr().cast::<u128>().is_aligned() {
            image.bytes.as_ptr().cast()
        } else {
            let mut v = vec![0u128; image.bytes.len().div_ceil(16)];
            // SAFETY: `v` holds at least `bytes.len()` bytes.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    image.bytes.as_ptr(),
                    v.as_mut_ptr().cast::<u8>(),
                    image.bytes.len(),
                )
            };
            aligned = v;
            aligned.as_ptr().cast()
        };
        let mut log = vec![0u8; JIT_LOG_BYTES];
        let mut options = [
            sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER,
            sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
        ];
        // Option values travel in pointer-sized slots; the size is an `unsigned int` value, not a pointer.
        let mut values: [*mut c_void; 2] = [log.as_mut_ptr().cast(), JIT_LOG_BYTES as *mut c_void];
        let mut module = std::mem::MaybeUninit::<sys::CUmodule>::uninit();
        // SAFETY: `data` is a checked PTX or cubin image that outlives the call; the log buffer is as large as said.
        let loaded = unsafe {
            sys::cuModuleLoadDataEx(
                module.as_mut_ptr(),
                data,
                options.len() as u32,
                options.as_mut_ptr(),
                values.as_mut_ptr(),
            )
        }
        .result();
        if let Err(e) = loaded {
            // The driver writes back how much of the log it filled.
            let filled = (values[1] as usize).min(JIT_LOG_BYTES);
            let text = CStr::from_bytes_until_nul(&log[..filled])
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|_| String::from_utf8_lossy(&log[..filled]).into_owned());
            let text = text.trim();
            let msg = fail("cuModuleLoadDataEx", e);
            return Err(load(self.on(if text.is_empty() {
                msg
            } else {
                format!("{msg}; JIT log: {text}")
            })));
        }
        // SAFETY: written by the successful call.
        let module = unsafe { module.assume_init() };
        if let Some(slot) = &self.panics.block {
            // An image that cannot point at the record still runs; its panics trap without a record.
            // SAFETY: loaded just now in the current context.
            if let Err(e) =
                unsafe { self.point_global(module, panic::PROTOCOL.symbol, slot.device) }
            {
                self.panics.note_unpointed(e);
            }
        }
        if let Some(slot) = &self.prints.block {
            // An image that cannot point at the buffer still runs; what it prints is dropped.
            // SAFETY: loaded just now in the current context.
            if let Err(e) =
                unsafe { self.point_global(module, print::PROTOCOL.symbol, slot.device) }
            {
                self.prints.note_unpointed(e);
            }
        }
        Ok(Box::new(CudaImage {
            module,
            ctx: self.ctx,
        }))
    }

    fn memory(&self) -> &dyn DeviceMemory {
        self
    }

    fn take_printed(&self) -> (Vec<u8>, u64) {
        // SAFETY: launches hold `running` shared until they have synchronised or failed.
        unsafe { self.prints.drain(&self.running) }
    }

    unsafe fn launch(
        &self,
        kernel: Kernel,
        args: &KernelArgs,
        params: LaunchParams,
    ) -> Result<(), PluginError> {
        let refused = |reason: String| PluginError::Launch { reason };
        let _running = self.running.read().unwrap_or_else(|p| p.into_inner());
        self.make_current().map_err(refused)?;
        let f = kernel.0 as sys::CUfunction;
        let (teams, threads) = (params.num_teams, params.num_threads);
        // Formatted only for a message.
        let config = || {
            format!(
                "{teams} teams of {threads} threads with {} bytes of team-shared memory; CUDA device {} ({}) \
                 allows {} threads and {} bytes of shared memory per team",
                params.team_shared, self.ordinal, self.name, self.max_threads, self.max_shared
            )
        };
        let shared = u32::try_from(params.team_shared)
            .map_err(|_| refused(format!("too much team-shared memory: {}", config())))?;
        if params.team_shared > 0 {
            // SAFETY: per the contract, `f` comes from an image loaded on this device; its context is current.
            unsafe { self.reserve_shared(f, params.team_shared) }.map_err(refused)?;
        }
        // A failed call's error: a kernel that died is the panic its record holds.
        let failed = |code: CUresult, stage: Stage| {
            // SAFETY: the record is read only for a kernel that died, and a kernel that dies takes the context, and
            // every kernel running in it, with it (CUDA's sticky error), so no kernel writes the record; takers are
            // serialised. (Kernels of other threads that were running fail with the same error, and whichever
            // failed launch takes the record first reports its panic.)
            unsafe { self.panics.failed(launch_failure(code, stage, &config())) }
        };
        // CUDA passes no dynamic pointer: the block's is 0.
        let mut params_ptrs = args.pointers();
        self.lanes
            .with(
                || Lane::new().map_err(|e| refused(self.on(e))),
                |lane| {
                    // SAFETY: per the contract, `args` match the kernel's parameters; they outlive the call, which
                    // copies them. The lane's stream is this context's.
                    unsafe {
                        result::launch_kernel(
                            f,
                            (teams, 1, 1),
                            (threads, 1, 1),
                            shared,
                            lane.stream,
                            &mut params_ptrs,
                        )
                    }
                    .map_err(|e| failed(e.0, Stage::Launch))?;
                    // SAFETY: as above.
                    unsafe { stream::synchronize(lane.stream) }
                        .map_err(|e| failed(e.0, Stage::Wait))
                },
            )
            .and_then(|r| r)
    }
}

impl DeviceMemory for CudaDevice {
    fn alloc(&self, size: usize) -> Result<DevicePtr, PluginError> {
        let failed = |reason: String| PluginError::Alloc {
            bytes: size,
            reason,
        };
        self.make_current().map_err(failed)?;
        let bytes = size.max(1);
        // SAFETY: the context is current; the memory is zero-filled before anyone reads it.
        let p = unsafe { result::malloc_sync(bytes) }.map_err(|e| {
            if e.0 == CUresult::CUDA_ERROR_OUT_OF_MEMORY {
                PluginError::OutOfMemory {
                    bytes: size,
                    detail: self.on(format!("{} MiB in all", self.total_mem >> 20)),
                }
            } else {
                failed(self.on(fail("cuMemAlloc", e)))
            }
        })?;
        let filled = self.on_lane(|lane| {
            // SAFETY: `p` is a live allocation of `bytes` bytes. Waited for, so the fill is done before the memory
            // is handed out (and so before any copy or launch on any stream uses it).
            unsafe { result::memset_d8_async(p, 0, bytes, lane.stream) }
                .map_err(|e| fail("cuMemsetD8Async", e))?;
            lane.wait("cuStreamSynchronize")
        });
        if let Err(e) = filled {
            // SAFETY: allocated above and not handed out; nothing runs on it (waited for, or never started).
            let _ = unsafe { result::free_sync(p) };
            return Err(failed(self.on(e)));
        }
        Ok(p)
    }

    unsafe fn free(&self, ptr: DevicePtr) {
        if self.make_current().is_ok() {
            // SAFETY: per the trait's contract. A failure (a lost context) leaves nothing to do.
            let _ = unsafe { result::free_sync(ptr) };
        }
    }

    unsafe fn copy_to_device(
        &self,
        dst: DevicePtr,
        src: *const u8,
        size: usize,
    ) -> Result<(), PluginError> {
        if size == 0 {
            return Ok(());
        }
        let failed = |reason: String| PluginError::Transfer {
            to_device: true,
            bytes: size,
            reason,
        };
        // SAFETY: per the trait's contract, `copy_in`'s; the copy is waited for, so `src` need not outlive the call.
        self.on_lane(|lane| unsafe { lane.copy_in(dst, src, size) })
            .map_err(|e| failed(self.on(e)))
    }

    unsafe fn copy_from_device(
        &self,
        dst: *mut u8,
        src: DevicePtr,
        size: usize,
    ) -> Result<(), PluginError> {
        if size == 0 {
            return Ok(());
        }
        let failed = |reason: String| PluginError::Transfer {
            to_device: false,
            bytes: size,
            reason,
        };
        // SAFETY: per the trait's contract, `copy_out`'s.
        self.on_lane(|lane| unsafe { lane.copy_out(dst, src, size) })
            .map_err(|e| failed(self.on(e)))
    }
}
