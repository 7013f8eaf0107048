//! `cuda`: NVIDIA GPUs through the CUDA driver API, like libomptarget's CUDA plugin. The driver is loaded at run time
//! by cudarc (`dynamic-loading`), so a binary built here runs where no NVIDIA driver is installed: the plugin then
//! reports no devices and says why.
//!
//! Layered as cudarc is: its `sys` (raw FFI) and `result` (each call a `Result<_, DriverError>`) underneath, and here
//! messages naming the driver call that failed and its error, in the [`PluginError`] of the device method. Every device uses its primary
//! context, made current on the calling thread at the start of each method (a region may be called from any host
//! thread), and the legacy default stream, so allocation, zero-fill, copies and launches are ordered with each other.
//!
//! A panic in region code traps, which leaves the context unusable; what panicked is read from the device's panic
//! record ([`offload_model::gpu_panic`]), which lives in mapped pinned host memory, so the host reads it without the
//! context. What region code prints goes to the device's print buffer ([`offload_model::device_print`]), mapped
//! pinned host memory too, drained after each launch.

use crate::plugin::discovery::{guarded, opened};
use crate::plugin::error::PluginError;
use crate::plugin::gpu;
use crate::plugin::interface::{
    Arg, Device, DeviceDescription, DevicePtr, Discovered, Global, Kernel, LaunchParams,
    LoadedImage, LoadedImageOps, Plugin,
};
use crate::registry::Image;
use cudarc::driver::result::{self, DriverError};
use cudarc::driver::sys::{self, CUresult};
use offload_model::abi::Construct;
use offload_model::device::{DeviceKind, NvidiaArch, NvidiaVariant, NVPTX_TRIPLE};
use offload_model::device_print;
use offload_model::fatbin::ImageFormat;
use offload_model::gpu_panic::{self, PanicRecord};
use std::ffi::{c_void, CStr, CString};
use std::ptr::NonNull;
use std::sync::Mutex;

pub struct Cuda;

/// The triple of the images this plugin runs.
const TRIPLE: &str = NVPTX_TRIPLE;

/// Dynamic shared memory a kernel may use without opting in (`CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`),
/// counting its static shared memory.
const SHARED_WITHOUT_OPT_IN: usize = 48 * 1024;

/// Size of the buffer for the JIT compiler's error log.
const JIT_LOG_BYTES: usize = 16 * 1024;

/// Every driver entry point this plugin calls through cudarc. cudarc's `sys` resolves each on its first call and
/// panics when the library lacks it (an old driver), so discovery checks them all first: after that no call can
/// panic, even in a build with `panic = "abort"`.
const REQUIRED_SYMBOLS: &[&str] = &[
    "cuInit",
    "cuGetErrorString",
    "cuDeviceGetCount",
    "cuDeviceGet",
    "cuDeviceGetName",
    "cuDeviceGetAttribute",
    "cuDeviceTotalMem_v2",
    "cuDevicePrimaryCtxRetain",
    "cuCtxSetCurrent",
    "cuModuleLoadDataEx",
    "cuModuleGetFunction",
    "cuFuncGetAttribute",
    "cuFuncSetAttribute",
    "cuLaunchKernel",
    "cuStreamSynchronize",
    "cuMemAlloc_v2",
    "cuMemsetD8_v2",
    "cuMemFree_v2",
    "cuMemcpyHtoD_v2",
    "cuMemcpyDtoH_v2",
    // The panic record and the print buffer (all in every driver since CUDA 3.2).
    "cuMemHostAlloc",
    "cuMemHostGetDevicePointer_v2",
    "cuMemFreeHost",
    "cuModuleGetGlobal_v2",
];

impl Plugin for Cuda {
    fn name(&self) -> &'static str {
        DeviceKind::Nvptx.plugin()
    }

    fn discover(&self) -> Result<Discovered, PluginError> {
        // The symbol check makes a panic impossible in practice; the guard catches one anyway (a cudarc change).
        if cfg!(miri) {
            // Miri interprets the host fallback; it cannot load a driver library.
            return Err(PluginError::Unavailable {
                reason: "not under Miri".into(),
            });
        }
        guarded("the CUDA driver library", discover_devices)
    }
}

/// The devices, or why there are none; a device that does not open is skipped with a note.
fn discover_devices() -> Result<Discovered, PluginError> {
    let unavailable = |reason: String| PluginError::Unavailable { reason };
    // SAFETY: opens (and closes) the driver library by its usual names, which runs only its initialisers.
    if !unsafe { sys::is_culib_present() } {
        return Err(unavailable(
            "libcuda.so not found: no NVIDIA driver installed (or not on the library search path)"
                .into(),
        ));
    }
    // SAFETY: the library is present (checked above), so `culib` loads it instead of panicking; looking a symbol up
    // runs no code.
    let missing: Vec<&str> = REQUIRED_SYMBOLS
        .iter()
        .copied()
        .filter(|s| unsafe { sys::culib().get::<unsafe extern "C" fn()>(s.as_bytes()) }.is_err())
        .collect();
    if !missing.is_empty() {
        return Err(unavailable(format!(
            "the NVIDIA driver's libcuda.so lacks {}: the driver is too old",
            missing.join(", ")
        )));
    }
    result::init().map_err(|e| unavailable(fail("cuInit", e)))?;
    let count =
        result::device::get_count().map_err(|e| unavailable(fail("cuDeviceGetCount", e)))?;
    if count <= 0 {
        return Err(unavailable(
            "the NVIDIA driver reports no CUDA devices".into(),
        ));
    }
    let mut notes = Vec::new();
    let mut found = opened((0..count).map(|ordinal| {
        CudaDevice::open(ordinal)
            .map(|d| {
                for why in [d.panics.unrecorded(), d.prints.unprinted()]
                    .into_iter()
                    .flatten()
                {
                    notes.push(format!("CUDA device {ordinal}: {why}"));
                }
                Box::new(d) as Box<dyn Device>
            })
            .map_err(|reason| PluginError::Open {
                device: format!("CUDA device {ordinal}"),
                reason,
            })
    }))?;
    found.notes.extend(notes);
    Ok(found)
}

/// `<call> failed: <error>`.
fn fail(call: &str, e: DriverError) -> String {
    format!("{call} failed: {}", describe(e))
}

/// The error's name and the driver's description of it: `CUDA_ERROR_OUT_OF_MEMORY (out of memory)`. Only called
/// once discovery has checked the driver's symbols.
fn describe(e: DriverError) -> String {
    match e.error_string() {
        Ok(s) => format!("{:?} ({})", e.0, s.to_string_lossy()),
        Err(_) => format!("{:?}", e.0),
    }
}

/// How well an image of `image_arch` (`sm_XY`, or `sm_XYa` for an architecture-specific image) and `format` suits a
/// device of compute capability `cc`: a cubin runs on its own major version with a minor version at least its own
/// (its exact architecture ranks highest); PTX runs on any device at least as new as its target, which the driver
/// JIT-compiles, the newest PTX best.
fn rank_for(cc: (u32, u32), image_arch: &str, format: ImageFormat) -> Option<u32> {
    let arch = NvidiaArch::parse(image_arch)?;
    let specific = match arch.variant {
        NvidiaVariant::Portable => false,
        NvidiaVariant::ArchSpecific => true,
        // Family-specific code (`sm_100f`) is not ranked: which GPUs a family spans is not known here.
        NvidiaVariant::FamilySpecific => return None,
    };
    let (sm, image) = (arch.number(), (arch.major, arch.minor));
    // `sm_90a` code uses features only 9.0 has, and its PTX cannot be compiled for anything else either.
    if specific && image != cc {
        return None;
    }
    match format {
        ImageFormat::Cubin if image == cc => Some(3000 + specific as u32),
        ImageFormat::Cubin => (image.0 == cc.0 && image.1 <= cc.1).then_some(2000 + image.1),
        ImageFormat::Ptx => (sm <= cc.0 * 10 + cc.1).then_some(1000 + sm),
        _ => None,
    }
}

/// What the driver is given must be well formed: it reads a cubin's ELF header for its size and PTX up to its NUL.
fn check_image(image: &Image) -> Result<(), String> {
    match image.format {
        ImageFormat::Ptx if image.bytes.last() != Some(&0) => {
            Err("the PTX image is not NUL-terminated".into())
        }
        ImageFormat::Cubin if image.bytes.get(..4) != Some(b"\x7fELF") => {
            Err("the cubin image is not an ELF file".into())
        }
        ImageFormat::Ptx | ImageFormat::Cubin => Ok(()),
        f => Err(format!("a {f} image is neither PTX nor a cubin")),
    }
}

/// Where a launch failed: the driver refused it, or the kernel started and failed.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Stage {
    Launch,
    Wait,
}

/// Turns a launch's error into what the runtime reports. Errors that mean the kernel started and died leave the
/// context unusable (CUDA fails every later call in it with the same error), so the device is lost; a launch the
/// driver refused (its configuration) leaves it usable. `config` describes the launch, for refusals.
fn launch_failure(code: CUresult, stage: Stage, config: &str) -> PluginError {
    use CUresult::*;
    let name = format!("{code:?}");
    let died = match code {
        CUDA_ERROR_ILLEGAL_INSTRUCTION => Some(format!(
            "the kernel trapped ({name}): a panic in region code, such as an index out of bounds; the GPU does not \
             report its message"
        )),
        CUDA_ERROR_ILLEGAL_ADDRESS => Some(format!(
            "the kernel accessed an invalid device address ({name})"
        )),
        CUDA_ERROR_MISALIGNED_ADDRESS => Some(format!(
            "the kernel made a misaligned memory access ({name})"
        )),
        CUDA_ERROR_HARDWARE_STACK_ERROR => Some(format!(
            "the kernel overflowed its stack ({name}): deep recursion or large locals in region code"
        )),
        CUDA_ERROR_ASSERT => Some(format!("a device-side assertion failed ({name})")),
        CUDA_ERROR_LAUNCH_TIMEOUT => Some(format!(
            "the kernel ran too long and the display watchdog stopped it ({name})"
        )),
        CUDA_ERROR_LAUNCH_FAILED | CUDA_ERROR_INVALID_PC | CUDA_ERROR_INVALID_ADDRESS_SPACE => {
            Some(format!("the kernel failed ({name})"))
        }
        // The kernel started: whatever stopped it, the context cannot be trusted any more.
        _ if stage == Stage::Wait => Some(format!("waiting for the kernel failed ({name})")),
        _ => None,
    };
    match died {
        Some(message) => PluginError::Trap {
            message: format!(
                "{message}; the CUDA context is unusable, so the device is marked lost"
            ),
        },
        None => {
            let hint = match code {
                CUDA_ERROR_INVALID_VALUE => ": an invalid launch configuration",
                CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES => {
                    ": too many threads per team for the registers the kernel needs"
                }
                _ => "",
            };
            PluginError::Launch {
                reason: format!("cuLaunchKernel failed: {name}{hint} ({config})"),
            }
        }
    }
}

/// A `T` (and whatever follows it, `bytes` in all) in mapped pinned host memory (portable, so any context may map
/// it), and its address on the device, which each loaded image's global for it holds ([`point_global`]). The host
/// reads it without the context, so a kernel that killed the context leaves it readable.
struct HostSlot<T> {
    host: NonNull<T>,
    device: sys::CUdeviceptr,
}

impl<T> HostSlot<T> {
    /// Allocates `bytes` (at least a `T`), mapped into the current context's address space, zero-fills them and
    /// lets `init` set them up before anyone else knows of them.
    fn new(bytes: usize, init: impl FnOnce(NonNull<T>)) -> Result<HostSlot<T>, String> {
        let bytes = bytes.max(size_of::<T>());
        let flags = sys::CU_MEMHOSTALLOC_DEVICEMAP | sys::CU_MEMHOSTALLOC_PORTABLE;
        // SAFETY: a context is current (the caller's).
        let host =
            unsafe { result::malloc_host(bytes, flags) }.map_err(|e| fail("cuMemHostAlloc", e))?;
        let Some(host) = NonNull::new(host.cast::<T>()) else {
            return Err("cuMemHostAlloc returned no memory".into());
        };
        // SAFETY: page-aligned memory of `bytes` bytes, ours alone until its address is handed out.
        unsafe { host.cast::<u8>().write_bytes(0, bytes) };
        init(host);
        let mut device: sys::CUdeviceptr = 0;
        // SAFETY: `host` came from cuMemHostAlloc with DEVICEMAP; the driver writes one device pointer.
        let mapped =
            unsafe { sys::cuMemHostGetDevicePointer_v2(&mut device, host.as_ptr().cast(), 0) }
                .result();
        if let Err(e) = mapped {
            // SAFETY: allocated above, not handed out.
            let _ = unsafe { result::free_host(host.as_ptr().cast()) };
            return Err(fail("cuMemHostGetDevicePointer", e));
        }
        Ok(HostSlot { host, device })
    }

    /// Frees the memory.
    ///
    /// # Safety
    /// The slot came from [`HostSlot::new`]; no launch that could use it runs any more, and it is not used again.
    unsafe fn free(&self) {
        // SAFETY: per the contract. A failure leaves nothing to do.
        let _ = unsafe { result::free_host(self.host.as_ptr().cast()) };
    }
}

/// A device's panic record: a [`PanicRecord`] in a [`HostSlot`], each loaded image's [`gpu_panic::SYMBOL`]
/// pointing at it.
struct PanicSlot {
    slot: HostSlot<PanicRecord>,
    /// Taken by one failed launch at a time (launches from several host threads fail together when one traps).
    taking: Mutex<()>,
}

impl PanicSlot {
    /// Allocates and initialises the record, mapped into the current context's address space.
    fn new() -> Result<PanicSlot, String> {
        let slot = HostSlot::new(size_of::<PanicRecord>(), |record: NonNull<PanicRecord>| {
            // SAFETY: page-aligned memory of the record's size, ours alone (`HostSlot::new`'s promise).
            unsafe { record.write(PanicRecord::new()) }
        })?;
        Ok(PanicSlot {
            slot,
            taking: Mutex::new(()),
        })
    }

    /// The failure of a launch whose kernel died (`trap`, the driver's account): the panic the record holds, if a
    /// thread wrote it, and the record reset for the next launch.
    fn failure(&self, trap: PluginError) -> PluginError {
        let _one = self.taking.lock().unwrap_or_else(|p| p.into_inner());
        // SAFETY: the record lives as long as the device; the kernel that could write it has ended (its launch
        // failed, and the context that ran it is unusable).
        let taken = unsafe { gpu_panic::take(self.slot.host.as_ptr()) };
        gpu::panic_or_trap(taken, || trap)
    }
}

/// The bytes of a print buffer: its header and [`device_print::DATA_BYTES`] of room.
const PRINT_BUFFER_BYTES: usize = size_of::<device_print::Header>() + device_print::DATA_BYTES;

/// Sets up a zeroed print buffer's header: room for [`device_print::DATA_BYTES`] of lines.
///
/// # Safety
/// `header` is [`PRINT_BUFFER_BYTES`] of zeroed memory, aligned for a header, that no one else uses yet.
unsafe fn init_print_buffer(header: NonNull<device_print::Header>) {
    // SAFETY: per the contract.
    unsafe { (*header.as_ptr()).cap = device_print::DATA_BYTES as u32 };
}

/// Points `module`'s global `symbol` (a device address) at `address`: `Ok(false)` if the image has none (built
/// before that global existed).
///
/// # Safety
/// `module` is loaded in the current context.
unsafe fn point_global(
    module: sys::CUmodule,
    symbol: &str,
    address: sys::CUdeviceptr,
) -> Result<bool, String> {
    let name = CString::new(symbol).map_err(|e| e.to_string())?;
    // SAFETY: per the contract.
    let (global, bytes) = match unsafe { result::module::get_global(module, name) } {
        Ok(found) => found,
        Err(e) if e.0 == CUresult::CUDA_ERROR_NOT_FOUND => return Ok(false),
        Err(e) => return Err(fail("cuModuleGetGlobal", e)),
    };
    if let Some(why) = not_a_pointer(symbol, bytes) {
        return Err(why);
    }
    // SAFETY: `global` is the module's 8-byte variable; the copy is synchronous.
    unsafe { result::memcpy_htod_sync(global, &[address]) }.map_err(|e| fail("cuMemcpyHtoD", e))?;
    Ok(true)
}

/// Why a global of `bytes` bytes cannot hold a device address, if it cannot.
fn not_a_pointer(symbol: &str, bytes: usize) -> Option<String> {
    (bytes != size_of::<sys::CUdeviceptr>())
        .then(|| format!("the image's {symbol} is {bytes} bytes, not a device address"))
}

/// A device's print buffer (`offload::println!`): a [`device_print`] buffer in a [`HostSlot`], each loaded image's
/// [`device_print::SYMBOL`] pointing at it, drained after each launch; and why lines may be dropped (the buffer,
/// or an image's pointer to it, could not be set up: the first reason).
struct Prints {
    slot: Option<HostSlot<device_print::Header>>,
    unprinted: Mutex<Option<String>>,
}

impl Prints {
    fn new(slot: Option<HostSlot<device_print::Header>>, unprinted: Option<String>) -> Prints {
        Prints {
            slot,
            unprinted: Mutex::new(unprinted),
        }
    }

    /// Allocates the buffer in the current context (`current`: whether the device's context was made current);
    /// without one, lines are dropped, and the reason kept.
    fn open(current: Result<(), String>) -> Prints {
        let slot = current.and_then(|()| {
            HostSlot::new(PRINT_BUFFER_BYTES, |header| {
                // SAFETY: `HostSlot::new` hands over fresh zeroed memory of the buffer's size, page-aligned.
                unsafe { init_print_buffer(header) }
            })
        });
        match slot {
            Ok(slot) => Prints::new(Some(slot), None),
            Err(e) => Prints::new(
                None,
                Some(format!(
                    "no print buffer ({e}): what region code prints is dropped"
                )),
            ),
        }
    }

    /// Why lines region code prints may be dropped, if they may.
    fn unprinted(&self) -> Option<String> {
        self.unprinted
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Notes the first reason lines may be dropped.
    fn note_unprinted(&self, why: String) {
        self.unprinted
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_or_insert(why);
    }

    /// What the buffer holds, and how many lines did not fit; emptied.
    ///
    /// # Safety
    /// No kernel that could write the buffer runs (the launches that did have synchronised or failed), and no one
    /// else drains it meanwhile.
    unsafe fn take(&self) -> (Vec<u8>, u32) {
        let Some(slot) = &self.slot else {
            return (Vec::new(), 0);
        };
        let mut out = Vec::new();
        // SAFETY: a buffer as `device_print` lays it out (set up by `open`), host memory the host reads whatever
        // became of the context; per the contract no kernel writes it.
        let lost = unsafe { device_print::drain(slot.host.as_ptr(), |l| out.extend_from_slice(l)) };
        (out, lost)
    }
}

/// What a device knows of its panics: its record, and why a panic may trap without one (the record, or an image's
/// pointer to it, could not be set up: the first reason, said once at discovery and with every trap).
struct PanicReports {
    slot: Option<PanicSlot>,
    unrecorded: Mutex<Option<String>>,
}

impl PanicReports {
    fn new(slot: Option<PanicSlot>, unrecorded: Option<String>) -> PanicReports {
        PanicReports {
            slot,
            unrecorded: Mutex::new(unrecorded),
        }
    }

    /// Why a panic may trap without its record, if it may.
    fn unrecorded(&self) -> Option<String> {
        self.unrecorded
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Notes the first reason a panic may trap without its record.
    fn note_unrecorded(&self, why: String) {
        self.unrecorded
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_or_insert(why);
    }

    /// A launch's failure: a kernel that died is the panic its record holds, else the driver's account of it (with
    /// why there is no record, where that is known); a refused launch is itself.
    fn failed(&self, e: PluginError) -> PluginError {
        let PluginError::Trap { message } = e else {
            return e;
        };
        let trap = PluginError::Trap {
            message: match self.unrecorded() {
                Some(why) => format!("{message} ({why})"),
                None => message,
            },
        };
        match &self.slot {
            Some(slot) => slot.failure(trap),
            None => trap,
        }
    }
}

struct CudaDevice {
    /// The driver's device number, for messages.
    ordinal: i32,
    ctx: sys::CUcontext,
    name: String,
    /// Compute capability (major, minor).
    cc: (u32, u32),
    sm_count: u32,
    max_threads: u32,
    /// Shared memory a team may have with the opt-in attribute set.
    max_shared: usize,
    total_mem: usize,
    panics: PanicReports,
    prints: Prints,
    /// Held for a launch and for draining the print buffer: launches on a device run one at a time (the legacy
    /// default stream runs its kernels one at a time anyway), so no kernel writes the buffer while it is drained.
    stream: Mutex<()>,
}

// SAFETY: the driver API is thread-safe, and a primary context may be current on any number of threads at once;
// every method makes it current on its own thread before calling the driver. The panic record and the print buffer
// are pinned host memory that kernels write and the host reads only once they have ended: the record one failed
// launch at a time, the buffer under the stream lock, which launches hold.
unsafe impl Send for CudaDevice {}
unsafe impl Sync for CudaDevice {}

impl Drop for CudaDevice {
    fn drop(&mut self) {
        if self.make_current().is_err() {
            return;
        }
        if let Some(panics) = &self.panics.slot {
            // SAFETY: the images pointing at it are this device's, which no launch uses any more.
            unsafe { panics.slot.free() };
        }
        if let Some(prints) = &self.prints.slot {
            // SAFETY: as above.
            unsafe { prints.free() };
        }
    }
}

impl CudaDevice {
    /// Reads a device's properties and retains its primary context, which the device then holds for the life of the
    /// process (devices are never dropped; their kernels must stay valid).
    fn open(ordinal: i32) -> Result<CudaDevice, String> {
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
        let panic = current.clone().and_then(|()| PanicSlot::new());
        // Without a print buffer, what region code prints is dropped.
        let prints = Prints::open(current);
        let panics = match panic {
            Ok(slot) => PanicReports::new(Some(slot), None),
            Err(e) => PanicReports::new(
                None,
                Some(format!(
                    "no panic record ({e}): a panic in region code traps without its location"
                )),
            ),
        };
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
            stream: Mutex::new(()),
        })
    }

    /// Makes the device's context current on the calling thread.
    fn make_current(&self) -> Result<(), String> {
        // SAFETY: `ctx` is a retained primary context, never released.
        unsafe { result::ctx::set_current(self.ctx) }.map_err(|e| fail("cuCtxSetCurrent", e))
    }

    /// `what` on this device: for messages.
    fn on(&self, what: String) -> String {
        format!("{what} on CUDA device {} ({})", self.ordinal, self.name)
    }

    /// Lets `f` use `bytes` of dynamic shared memory. Past 48 KiB (with its static shared memory) a kernel must opt
    /// in; the attribute is set to the device's maximum, so concurrent launches of the same kernel asking for
    /// different sizes never shrink it under each other.
    ///
    /// # Safety
    /// `f` is a kernel of a module loaded in this device's context, which is current.
    unsafe fn reserve_shared(&self, f: sys::CUfunction, bytes: usize) -> Result<(), String> {
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

struct CudaImage {
    module: sys::CUmodule,
    ctx: sys::CUcontext,
}

// SAFETY: module handles may be used from any thread whose current context is the module's.
unsafe impl Send for CudaImage {}
unsafe impl Sync for CudaImage {}

impl LoadedImageOps for CudaImage {
    fn kernel(&self, symbol: &CStr) -> Result<Option<Kernel>, PluginError> {
        let failed = |reason: String| PluginError::Lookup {
            symbol: symbol.to_string_lossy().into_owned(),
            reason,
        };
        // SAFETY: `ctx` is a retained primary context; the module was loaded in it and is never unloaded.
        unsafe {
            result::ctx::set_current(self.ctx).map_err(|e| failed(fail("cuCtxSetCurrent", e)))?;
            match result::module::get_function(self.module, symbol.to_owned()) {
                Ok(f) => Ok(Some(Kernel(f as usize))),
                Err(e) if e.0 == CUresult::CUDA_ERROR_NOT_FOUND => Ok(None),
                Err(e) => Err(failed(fail("cuModuleGetFunction", e))),
            }
        }
    }

    fn global(&self, symbol: &CStr) -> Result<Option<Global>, PluginError> {
        let failed = |reason: String| PluginError::Lookup {
            symbol: symbol.to_string_lossy().into_owned(),
            reason,
        };
        // SAFETY: as for `kernel`.
        unsafe {
            result::ctx::set_current(self.ctx).map_err(|e| failed(fail("cuCtxSetCurrent", e)))?;
            match result::module::get_global(self.module, symbol.to_owned()) {
                Ok((address, bytes)) => Ok(Some(Global {
                    address: address as DevicePtr,
                    size: Some(bytes),
                })),
                Err(e) if e.0 == CUresult::CUDA_ERROR_NOT_FOUND => Ok(None),
                Err(e) => Err(failed(fail("cuModuleGetGlobal", e))),
            }
        }
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
        if image.triple != TRIPLE {
            return None;
        }
        rank_for(self.cc, image.arch, image.format)
    }

    fn default_geometry(&self, construct: Construct) -> (u32, u32) {
        gpu::default_geometry(self.sm_count, construct.wide_teams())
    }

    fn max_threads(&self) -> u32 {
        self.max_threads
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
        if let Some(slot) = &self.panics.slot {
            // An image that cannot point at the record still runs; its panics trap without a record.
            // SAFETY: loaded just now in the current context.
            if let Err(e) = unsafe { point_global(module, gpu_panic::SYMBOL, slot.slot.device) } {
                self.panics.note_unrecorded(format!(
                    "an image's panic record could not be set ({e}): a panic in region code may trap without \
                     its location"
                ));
            }
        }
        if let Some(slot) = &self.prints.slot {
            // An image that cannot point at the buffer still runs; what it prints is dropped.
            // SAFETY: loaded just now in the current context.
            if let Err(e) = unsafe { point_global(module, device_print::SYMBOL, slot.device) } {
                self.prints.note_unprinted(format!(
                    "an image's print buffer could not be set ({e}): what its region code prints is dropped"
                ));
            }
        }
        Ok(Box::new(CudaImage {
            module,
            ctx: self.ctx,
        }))
    }

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
        // SAFETY: `p` is a live allocation of `bytes` bytes. The memset is ordered before every later copy and
        // launch, all of which use the legacy default stream.
        if let Err(e) = unsafe { result::memset_d8_sync(p, 0, bytes) } {
            // SAFETY: allocated above and not handed out.
            let _ = unsafe { result::free_sync(p) };
            return Err(failed(self.on(fail("cuMemsetD8", e))));
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
        self.make_current().map_err(failed)?;
        // SAFETY: per the trait's contract; the copy is synchronous, so `src` need not outlive the call.
        unsafe { result::memcpy_htod_sync(dst, std::slice::from_raw_parts(src, size)) }
            .map_err(|e| failed(self.on(fail("cuMemcpyHtoD", e))))
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
        self.make_current().map_err(failed)?;
        // SAFETY: per the trait's contract.
        unsafe { result::memcpy_dtoh_sync(std::slice::from_raw_parts_mut(dst, size), src) }
            .map_err(|e| failed(self.on(fail("cuMemcpyDtoH", e))))
    }

    fn take_printed(&self) -> (Vec<u8>, u32) {
        // No driver call: the buffer is host memory, readable whatever became of the context.
        let _stream = self.stream.lock().unwrap_or_else(|p| p.into_inner());
        // SAFETY: launches hold the stream lock until they have synchronised or failed, so no kernel of this device
        // runs; drains hold it too.
        unsafe { self.prints.take() }
    }

    unsafe fn launch(
        &self,
        kernel: Kernel,
        args: &[Arg],
        params: LaunchParams,
    ) -> Result<(), PluginError> {
        let refused = |reason: String| PluginError::Launch { reason };
        let _stream = self.stream.lock().unwrap_or_else(|p| p.into_inner());
        self.make_current().map_err(refused)?;
        let f = kernel.0 as sys::CUfunction;
        let (teams, threads) = (params.num_teams.max(1), params.num_threads.max(1));
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
        // CUDA passes no dynamic pointer.
        let dyn_ptr: u64 = 0;
        let mut params_ptrs = gpu::kernel_params(&dyn_ptr, args);
        let stream = result::stream::null();
        // SAFETY: per the contract, `args` match the kernel's parameters; they and `dyn_ptr` outlive the call,
        // which copies them.
        unsafe {
            result::launch_kernel(
                f,
                (teams, 1, 1),
                (threads, 1, 1),
                shared,
                stream,
                &mut params_ptrs,
            )
        }
        .map_err(|e| {
            self.panics
                .failed(launch_failure(e.0, Stage::Launch, &config()))
        })?;
        // SAFETY: the legacy default stream of the current context.
        unsafe { result::stream::synchronize(stream) }.map_err(|e| {
            self.panics
                .failed(launch_failure(e.0, Stage::Wait, &config()))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    const CUBIN: ImageFormat = ImageFormat::Cubin;
    const PTX: ImageFormat = ImageFormat::Ptx;

    #[test]
    fn a_cubin_runs_on_its_major_version_with_an_equal_or_newer_minor() {
        assert_eq!(rank_for((9, 0), "sm_90", CUBIN), Some(3000));
        assert_eq!(rank_for((8, 6), "sm_86", CUBIN), Some(3000));
        assert_eq!(rank_for((8, 6), "sm_80", CUBIN), Some(2000));
        assert_eq!(rank_for((8, 9), "sm_86", CUBIN), Some(2006));
        assert_eq!(rank_for((8, 0), "sm_86", CUBIN), None, "newer minor");
        assert_eq!(rank_for((9, 0), "sm_80", CUBIN), None, "older major");
        assert_eq!(rank_for((8, 0), "sm_90", CUBIN), None, "newer major");
        assert_eq!(rank_for((10, 0), "sm_100", CUBIN), Some(3000));
        assert_eq!(rank_for((12, 0), "sm_100", CUBIN), None);
    }

    #[test]
    fn ptx_runs_on_every_device_at_least_as_new_and_the_newest_ptx_wins() {
        assert_eq!(rank_for((9, 0), "sm_90", PTX), Some(1090));
        assert_eq!(rank_for((9, 0), "sm_80", PTX), Some(1080));
        assert_eq!(rank_for((10, 0), "sm_90", PTX), Some(1090));
        assert_eq!(rank_for((12, 0), "sm_100", PTX), Some(1100));
        assert_eq!(rank_for((8, 0), "sm_86", PTX), None);
        assert_eq!(rank_for((8, 6), "sm_90", PTX), None);
    }

    #[test]
    fn every_cubin_outranks_every_ptx_and_an_exact_cubin_outranks_the_rest() {
        let cc = (8, 9);
        let exact = rank_for(cc, "sm_89", CUBIN).unwrap();
        let other = rank_for(cc, "sm_86", CUBIN).unwrap();
        let ptx = rank_for(cc, "sm_89", PTX).unwrap();
        assert!(exact > other && other > ptx, "{exact} {other} {ptx}");
    }

    #[test]
    fn architecture_specific_images_run_only_on_their_architecture() {
        assert_eq!(rank_for((9, 0), "sm_90a", CUBIN), Some(3001));
        assert_eq!(rank_for((9, 0), "sm_90a", PTX), Some(1090));
        assert_eq!(rank_for((10, 0), "sm_90a", PTX), None);
        assert_eq!(rank_for((9, 0), "sm_89a", CUBIN), None);
    }

    #[test]
    fn other_architectures_and_formats_are_not_ranked() {
        for arch in [
            "",
            "sm_",
            "sm_9",
            "gfx90a",
            "x86_64",
            "sm_9x",
            "compute_90",
            "sm_90f",
        ] {
            assert_eq!(rank_for((9, 0), arch, CUBIN), None, "{arch}");
            assert_eq!(rank_for((9, 0), arch, PTX), None, "{arch}");
        }
        for format in [ImageFormat::SharedObject, ImageFormat::Hsaco] {
            assert_eq!(rank_for((9, 0), "sm_90", format), None);
        }
    }

    fn image(bytes: &'static [u8], format: ImageFormat) -> Image {
        Image {
            bytes,
            format,
            triple: TRIPLE,
            arch: "sm_90",
            package: "p",
            package_tag: 0,
        }
    }

    #[test]
    fn ptx_must_be_nul_terminated_and_a_cubin_an_elf_file() {
        assert!(check_image(&image(b".version 8.0\n\0", PTX)).is_ok());
        let e = check_image(&image(b".version 8.0\n", PTX)).unwrap_err();
        assert!(e.contains("not NUL-terminated"), "{e}");
        assert!(check_image(&image(b"", PTX)).is_err());
        assert!(check_image(&image(b"\x7fELF\x02\x01", CUBIN)).is_ok());
        let e = check_image(&image(b"junk", CUBIN)).unwrap_err();
        assert!(e.contains("not an ELF"), "{e}");
        assert!(check_image(&image(b"\x7fELF", ImageFormat::Hsaco)).is_err());
    }

    #[test]
    fn a_trap_is_a_panic_in_region_code_and_loses_the_device() {
        let f = launch_failure(CUresult::CUDA_ERROR_ILLEGAL_INSTRUCTION, Stage::Wait, "cfg");
        assert!(f.device_lost());
        assert!(f.location().is_none());
        assert!(
            f.to_string().starts_with(
                "the kernel trapped (CUDA_ERROR_ILLEGAL_INSTRUCTION): a panic in region code"
            ),
            "{f}"
        );
    }

    #[test]
    fn errors_of_a_kernel_that_died_lose_the_device() {
        use CUresult::*;
        for code in [
            CUDA_ERROR_LAUNCH_FAILED,
            CUDA_ERROR_ILLEGAL_ADDRESS,
            CUDA_ERROR_MISALIGNED_ADDRESS,
            CUDA_ERROR_ASSERT,
            CUDA_ERROR_HARDWARE_STACK_ERROR,
            CUDA_ERROR_LAUNCH_TIMEOUT,
            CUDA_ERROR_INVALID_PC,
        ] {
            for stage in [Stage::Launch, Stage::Wait] {
                let f = launch_failure(code, stage, "cfg");
                assert!(f.device_lost(), "{code:?}");
                assert!(f.to_string().contains(&format!("{code:?}")), "{f}");
            }
        }
        // Anything else once the kernel has started.
        assert!(launch_failure(CUDA_ERROR_UNKNOWN, Stage::Wait, "cfg").device_lost());
    }

    #[test]
    fn a_refused_launch_keeps_the_device_and_names_the_error_and_configuration() {
        use CUresult::*;
        for code in [
            CUDA_ERROR_INVALID_VALUE,
            CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES,
            CUDA_ERROR_INVALID_HANDLE,
        ] {
            let f = launch_failure(code, Stage::Launch, "4 teams of 2048 threads");
            assert!(!f.device_lost(), "{code:?}");
            assert!(matches!(f, PluginError::Launch { .. }), "{f:?}");
            let message = f.to_string();
            assert!(
                message.starts_with(&format!("cuLaunchKernel failed: {code:?}")),
                "{message}"
            );
            assert!(message.contains("4 teams of 2048 threads"), "{message}");
        }
    }

    /// A record in plain host memory, as mapped pinned memory is to the host; freed by `free`.
    fn slot() -> PanicSlot {
        let host = NonNull::from(Box::leak(Box::new(PanicRecord::new())));
        PanicSlot {
            slot: HostSlot {
                host,
                device: host.as_ptr() as sys::CUdeviceptr,
            },
            taking: Mutex::new(()),
        }
    }

    fn free(slot: PanicSlot) {
        // SAFETY: leaked from a box by `slot`, and no longer used.
        drop(unsafe { Box::from_raw(slot.slot.host.as_ptr()) });
    }

    /// What a GPU's first panicking thread leaves in the record (offload-device's `report_location`).
    fn panic_at(slot: &PanicSlot, line: u32, block: u32, thread: u32) {
        let site = gpu_panic::Site {
            file: "examples/saxpy.rs",
            line,
            column: 9,
            block,
            thread,
        };
        // SAFETY: the slot's live record, written as the kernel would.
        assert!(unsafe { gpu_panic::record_str(slot.slot.host.as_ptr(), "", &site) });
    }

    fn trapped() -> PluginError {
        launch_failure(CUresult::CUDA_ERROR_ILLEGAL_INSTRUCTION, Stage::Wait, "cfg")
    }

    #[test]
    fn a_kernel_that_panicked_reports_where_from_its_record_and_loses_the_device() {
        let reports = PanicReports::new(Some(slot()), None);
        panic_at(reports.slot.as_ref().unwrap(), 12, 3, 17);
        let e = reports.failed(trapped());
        assert!(e.device_lost());
        assert!(matches!(&e, PluginError::Panic { lost: true, .. }), "{e:?}");
        assert_eq!(e.to_string(), gpu::NO_MESSAGE);
        assert_eq!(
            e.location(),
            Some(&("examples/saxpy.rs".to_string(), 12, 9))
        );
        assert_eq!(e.thread(), Some((3, 17)));
        // Taken once: the next failure without a panic is the driver's trap.
        let again = reports.failed(trapped());
        assert!(matches!(again, PluginError::Trap { .. }), "{again:?}");
        assert!(again.to_string().starts_with("the kernel trapped"));
        free(reports.slot.unwrap());
    }

    #[test]
    fn a_refused_launch_leaves_the_record_alone() {
        let reports = PanicReports::new(Some(slot()), None);
        panic_at(reports.slot.as_ref().unwrap(), 5, 0, 1);
        let refused = launch_failure(CUresult::CUDA_ERROR_INVALID_VALUE, Stage::Launch, "cfg");
        assert!(matches!(
            reports.failed(refused),
            PluginError::Launch { .. }
        ));
        // SAFETY: the live record; no kernel writes it.
        assert!(
            unsafe { gpu_panic::take(reports.slot.as_ref().unwrap().slot.host.as_ptr()) }.is_some()
        );
        free(reports.slot.unwrap());
    }

    #[test]
    fn without_a_record_a_trap_says_why_there_is_none() {
        let why = "no panic record (cuMemHostAlloc failed: CUDA_ERROR_OUT_OF_MEMORY)";
        let reports = PanicReports::new(None, Some(why.into()));
        let e = reports.failed(trapped());
        assert!(e.device_lost());
        assert!(
            e.to_string().ends_with(&format!("marked lost ({why})")),
            "{e}"
        );
        // An image that could not point at the record is noted once, after the first reason.
        let reports = PanicReports::new(Some(slot()), None);
        reports.note_unrecorded("first".into());
        reports.note_unrecorded("second".into());
        assert_eq!(reports.unrecorded().as_deref(), Some("first"));
        let e = reports.failed(trapped());
        assert!(e.to_string().ends_with("(first)"), "{e}");
        free(reports.slot.unwrap());
    }

    /// A print buffer in plain host memory, as mapped pinned memory is to the host, set up as the plugin sets up
    /// its own; freed by `free_prints`.
    fn print_slot() -> HostSlot<device_print::Header> {
        let words = Box::leak(vec![0u32; PRINT_BUFFER_BYTES / 4].into_boxed_slice());
        let host = NonNull::from(words).cast::<device_print::Header>();
        // SAFETY: zeroed memory of the buffer's size, aligned for a header (`u32`s), used by no one else yet.
        unsafe { init_print_buffer(host) };
        HostSlot {
            host,
            device: host.as_ptr() as sys::CUdeviceptr,
        }
    }

    fn free_prints(prints: Prints) {
        let host = prints.slot.unwrap().host.as_ptr().cast::<u32>();
        let words = std::ptr::slice_from_raw_parts_mut(host, PRINT_BUFFER_BYTES / 4);
        // SAFETY: leaked from a box of this many words by `print_slot`, and no longer used.
        drop(unsafe { Box::from_raw(words) });
    }

    /// Whether the buffer's records are all zero, as before any line.
    fn data_is_zero(prints: &Prints) -> bool {
        let host = prints.slot.as_ref().unwrap().host.as_ptr().cast::<u8>();
        // SAFETY: the live buffer's data, which no one writes meanwhile.
        let data = unsafe {
            std::slice::from_raw_parts(
                host.add(size_of::<device_print::Header>()),
                device_print::DATA_BYTES,
            )
        };
        data.iter().all(|&b| b == 0)
    }

    /// A line as region code prints it, into the buffer the images' global points at.
    fn print_line(prints: &Prints, line: std::fmt::Arguments<'_>) {
        let slot = prints.slot.as_ref().unwrap();
        // SAFETY: the live buffer; no drain runs meanwhile.
        unsafe { device_print::print(slot.device as *mut device_print::Header, line, true) };
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "a mebibyte print buffer: too slow under Miri (the protocol runs under Miri in offload-model)"
    )]
    fn a_print_buffer_holds_a_header_and_a_mebibyte_with_the_room_in_its_header() {
        assert_eq!(PRINT_BUFFER_BYTES, 16 + (1 << 20));
        let prints = Prints::new(Some(print_slot()), None);
        // SAFETY: the live header.
        let header = unsafe { &*prints.slot.as_ref().unwrap().host.as_ptr() };
        assert_eq!(header.cap as usize, device_print::DATA_BYTES);
        assert_eq!(header.used.load(std::sync::atomic::Ordering::Relaxed), 0);
        assert_eq!(header.lost.load(std::sync::atomic::Ordering::Relaxed), 0);
        assert!(data_is_zero(&prints));
        free_prints(prints);
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "a mebibyte print buffer: too slow under Miri (the protocol runs under Miri in offload-model)"
    )]
    fn what_kernels_print_is_taken_once_after_the_launch() {
        let prints = Prints::new(Some(print_slot()), None);
        print_line(&prints, format_args!("team {} says {}", 3, "hello"));
        print_line(&prints, format_args!("team {} says {}", 4, "bye"));
        // SAFETY: no kernel runs, and no one else drains.
        let (out, lost) = unsafe { prints.take() };
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "team 3 says hello\nteam 4 says bye\n"
        );
        assert_eq!(lost, 0);
        // Emptied for the next launch.
        // SAFETY: as above.
        assert_eq!(unsafe { prints.take() }, (Vec::new(), 0));
        assert!(data_is_zero(&prints));
        // Lines past the buffer's room are counted, and the count is reset once taken.
        let long = "x".repeat(device_print::LINE_CAP);
        let fits = device_print::DATA_BYTES / (4 + device_print::LINE_CAP);
        for _ in 0..fits + 2 {
            print_line(&prints, format_args!("{}", &long[1..]));
        }
        // SAFETY: as above.
        let (out, lost) = unsafe { prints.take() };
        assert_eq!(out.len(), fits * device_print::LINE_CAP);
        assert_eq!(lost, 2);
        // SAFETY: as above.
        assert_eq!(unsafe { prints.take() }, (Vec::new(), 0));
        free_prints(prints);
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "a mebibyte print buffer: too slow under Miri (the protocol runs under Miri in offload-model)"
    )]
    fn without_a_print_buffer_nothing_is_printed_and_the_first_reason_is_kept() {
        let prints = Prints::new(None, Some("no print buffer (cuMemHostAlloc failed)".into()));
        // SAFETY: there is no buffer.
        assert_eq!(unsafe { prints.take() }, (Vec::new(), 0));
        prints.note_unprinted("later".into());
        assert_eq!(
            prints.unprinted().as_deref(),
            Some("no print buffer (cuMemHostAlloc failed)")
        );
        let prints = Prints::new(Some(print_slot()), None);
        assert_eq!(prints.unprinted(), None);
        prints.note_unprinted("first".into());
        prints.note_unprinted("second".into());
        assert_eq!(prints.unprinted().as_deref(), Some("first"));
        free_prints(prints);
    }

    #[test]
    fn a_global_that_is_not_eight_bytes_holds_no_device_address() {
        assert_eq!(not_a_pointer(device_print::SYMBOL, 8), None);
        assert_eq!(
            not_a_pointer(device_print::SYMBOL, 4).as_deref(),
            Some("the image's __offload_print_buffer is 4 bytes, not a device address")
        );
        assert!(not_a_pointer(gpu_panic::SYMBOL, 16).is_some());
    }

    #[test]
    fn the_panic_records_entry_points_are_checked_at_discovery() {
        for s in [
            "cuMemHostAlloc",
            "cuMemHostGetDevicePointer_v2",
            "cuMemFreeHost",
            "cuModuleGetGlobal_v2",
        ] {
            assert!(REQUIRED_SYMBOLS.contains(&s), "{s}");
        }
    }

    #[test]
    #[cfg_attr(miri, ignore = "Miri cannot dlopen")]
    fn without_a_driver_discovery_says_why_and_does_not_panic() {
        // SAFETY: opens the library by name only.
        if unsafe { sys::is_culib_present() } {
            eprintln!("note: libcuda is installed here; the no-driver case is not checked");
            return;
        }
        let why = Cuda.discover().err().expect("no devices without a driver");
        assert!(matches!(why, PluginError::Unavailable { .. }), "{why:?}");
        assert!(why.to_string().starts_with("libcuda.so not found"), "{why}");
    }

    #[test]
    fn cuda_comes_first_so_gpus_get_the_low_device_numbers() {
        let names: Vec<_> = crate::plugin::all().iter().map(|p| p.name()).collect();
        assert_eq!(names, ["cuda", "amdgpu", "host-elf", "gpu-sim"]);
    }
}
