//! `amdgpu`: AMD GPUs through the ROCm HSA runtime, like libomptarget's AMDGPU plugin. `libhsa-runtime64.so.1` is
//! loaded at run time (libloading), so a binary built here runs where ROCm is not installed: the plugin then reports
//! no devices and says why.
//!
//! Layered as the cuda plugin is on cudarc: `ffi` is the raw C interface (types, values, and a table of entry
//! points every one of which is resolved before anything is called), the helpers below turn statuses into messages
//! naming the call and the runtime's error, and the plugin sits on top.
//!
//! One device per GPU agent. Each has one AQL queue (launches are serialised on it by a mutex and each waits for its
//! completion signal), device memory from the GPU's coarse-grained pool, and two host buffers from a CPU agent's
//! fine-grained pools the GPU may reach: the kernel-argument block (a kernarg pool) and a staging buffer for copies.
//! Copies go through the staging buffer in chunks: the CPU copies between the caller's memory and the staging buffer,
//! and the GPU's copy engine (`hsa_amd_memory_async_copy`, waited for on a signal) between it and device memory. So
//! any host memory works (read-only, stack, unaligned) without pinning it, as LLVM's plugin does for transfers
//! below its pinning threshold.
//!
//! Failures of a kernel that started reach the plugin two ways, and both are watched while a launch waits (in
//! one-second slices, so a dead queue never hangs the caller): the queue's error callback (a trap, which is what a
//! panic in region code is, or an illegal instruction), and the runtime's system events (a GPU memory fault or
//! hardware exception), for which the plugin registers a handler so they become an error of the region instead of
//! ROCr's `abort()`.

#[cfg(test)]
mod fake;
mod ffi;

use self::ffi::*;
use super::{
    Arg, Device, DevicePtr, Kernel, KernelFailure, LaunchParams, LoadedImage, LoadedImageOps,
    Plugin,
};
use crate::tables::Image;
use offload_model::abi::DeviceImageRecord;
use std::ffi::{c_char, c_void, CStr, CString};
use std::mem::MaybeUninit;
use std::ptr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};

pub struct AmdGpu;

/// The triple of the images this plugin runs.
const TRIPLE: &str = "amdgcn-amd-amdhsa";

/// Where the HSA runtime is looked for, in order: the loader's search path (the versioned name ROCm installs, then
/// the development symlink), then ROCm's default prefix, which is often not on the search path.
const LIBRARY_NAMES: &[&str] = &[
    "libhsa-runtime64.so.1",
    "libhsa-runtime64.so",
    "/opt/rocm/lib/libhsa-runtime64.so.1",
];

/// `e_machine` of AMDGPU code objects.
const EM_AMDGPU: u16 = 224;

/// Packets in each device's queue (fewer if the agent allows fewer). Launches wait for each other, so one would do;
/// this is what the runtime would round small sizes up to anyway.
const QUEUE_PACKETS: u32 = 1024;

/// The staging buffer each device copies through, allocated on its first copy.
const STAGING_BYTES: usize = 4 << 20;

/// Private segment (stack) bytes per work-item for a kernel whose stack size the compiler could not bound
/// (recursion, indirect calls): LLVM's plugin's default.
const DYNAMIC_STACK_BYTES: u32 = 16 * 1024;

/// Alignment of the team-shared memory a launch adds after the kernel's static LDS (the device code's dynamic LDS
/// symbol is 16-byte aligned, so it starts at the static size rounded up).
const TEAM_SHARED_ALIGN: u32 = 16;

/// Local data share per workgroup where the agent reports no group-segment pool: 64 KiB on every GCN, CDNA and
/// RDNA GPU.
const DEFAULT_LDS_BYTES: u32 = 64 * 1024;

impl Plugin for AmdGpu {
    fn name(&self) -> &'static str {
        "amdgpu"
    }

    fn discover(&self) -> Result<Vec<Box<dyn Device>>, String> {
        // Nothing below panics by design; the guard catches one anyway.
        if cfg!(miri) {
            // Miri interprets the host fallback; it cannot load a driver library.
            return Err("not under Miri".into());
        }
        super::guarded("the HSA runtime", discover_devices)
    }
}

/// The loaded, resolved and initialised runtime, or why there is none. Made once per process: the library stays
/// mapped and initialised for the life of the process, as the devices and their kernels do.
static RUNTIME: OnceLock<Result<Hsa, String>> = OnceLock::new();

fn runtime() -> Result<&'static Hsa, String> {
    RUNTIME
        .get_or_init(load_runtime)
        .as_ref()
        .map_err(Clone::clone)
}

fn load_runtime() -> Result<Hsa, String> {
    let library = open_library()?;
    // SAFETY: the library is an HSA runtime (found by its name); resolving runs no code.
    let hsa = unsafe { Hsa::resolve(library) }.map_err(|missing| {
        format!(
            "the HSA runtime (libhsa-runtime64.so.1) lacks {}: the ROCm installation is too old or incomplete",
            missing.join(", ")
        )
    })?;
    initialise(&hsa)?;
    Ok(hsa)
}

/// `hsa_init`, and the system event handler.
fn initialise(hsa: &Hsa) -> Result<(), String> {
    // SAFETY: every entry point is resolved; hsa_init may be called at any time.
    if let Err(s) = check(unsafe { (hsa.hsa_init)() }) {
        // The runtime is not initialised, so it cannot describe its own error.
        let name = status_name(s).map_or_else(|| format!("HSA status {s:#x}"), String::from);
        let hint = if std::path::Path::new("/dev/kfd").exists() {
            ""
        } else {
            ": /dev/kfd does not exist (no amdgpu kernel driver loaded, or no AMD GPU)"
        };
        return Err(format!("hsa_init failed: {name}{hint}"));
    }
    // SAFETY: the runtime is initialised; the handler is a plain function that lives for the whole process.
    let registered = check(unsafe {
        (hsa.hsa_amd_register_system_event_handler)(on_system_event, ptr::null_mut())
    });
    if let Err(s) = registered {
        // Not fatal: a GPU memory fault then ends the process as ROCm does by default.
        if crate::icv::info() > 0 {
            eprintln!(
                "offload: amdgpu: {}; a GPU memory fault will abort the program",
                fail(hsa, "hsa_amd_register_system_event_handler", s)
            );
        }
    }
    Ok(())
}

/// Opens the first of [`LIBRARY_NAMES`] that loads. A library that exists but fails to load (a missing dependency)
/// is reported as such, not as ROCm being absent.
fn open_library() -> Result<libloading::Library, String> {
    let mut broken = None;
    for &name in LIBRARY_NAMES {
        // SAFETY: loading the HSA runtime runs only its initialisers; `hsa_init` does the real work later.
        match unsafe { libloading::Library::new(name) } {
            Ok(library) => return Ok(library),
            Err(e) => {
                let message = std::error::Error::source(&e)
                    .map(ToString::to_string)
                    .unwrap_or_else(|| e.to_string());
                if !is_missing(name, &message) && broken.is_none() {
                    broken = Some(message);
                }
            }
        }
    }
    Err(match broken {
        None => "libhsa-runtime64.so.1 not found: ROCm is not installed (or not on the library search path)"
            .into(),
        Some(why) => format!("libhsa-runtime64.so.1 could not be loaded: {why}"),
    })
}

/// Whether the loader's message says `name` itself does not exist (rather than failing to load).
fn is_missing(name: &str, message: &str) -> bool {
    message
        .strip_prefix(name)
        .is_some_and(|rest| rest.starts_with(": cannot open shared object file"))
}

/// `<call> failed: <status>`.
fn fail(hsa: &Hsa, call: &str, status: Status) -> String {
    format!("{call} failed: {}", describe(hsa, status))
}

/// The status's name and the runtime's description of it. Only called once the runtime is initialised.
fn describe(hsa: &Hsa, status: Status) -> String {
    let name = status_name(status).map_or_else(|| format!("HSA status {status:#x}"), String::from);
    let mut text: *const c_char = ptr::null();
    // SAFETY: the runtime is initialised; it stores a pointer to a static NUL-terminated string.
    let found = check(unsafe { (hsa.hsa_status_string)(status, &mut text) }).is_ok();
    if !found || text.is_null() {
        return name;
    }
    // SAFETY: checked non-null above; the string is static.
    let text = unsafe { CStr::from_ptr(text) }.to_string_lossy();
    let text = text.trim();
    if text.is_empty() {
        name
    } else if text.starts_with(&name) {
        // ROCm's descriptions begin with the name: `HSA_STATUS_ERROR_...: The ...`.
        text.to_string()
    } else {
        format!("{name} ({text})")
    }
}

/// Reads one attribute through `query`, which writes the attribute's value to the pointer it is given.
///
/// # Safety
/// `T` is the attribute's C type, and all-zero bytes are a valid `T` (integers and arrays of them).
unsafe fn read<T: Copy>(query: impl FnOnce(*mut c_void) -> Status) -> Result<T, Status> {
    let mut value = MaybeUninit::<T>::zeroed();
    check(query(value.as_mut_ptr().cast()))?;
    // SAFETY: zero-initialised, then (partly) overwritten by the runtime with a value of this type.
    Ok(unsafe { value.assume_init() })
}

/// Reads an agent attribute of type `T` (see [`read`]).
///
/// # Safety
/// As [`read`]: `T` is `attribute`'s type.
unsafe fn agent_info<T: Copy>(
    hsa: &Hsa,
    agent: Agent,
    attribute: u32,
    what: &str,
) -> Result<T, String> {
    // SAFETY: per the contract; the runtime writes one value of the attribute's type.
    unsafe { read(|v| (hsa.hsa_agent_get_info)(agent, attribute, v)) }
        .map_err(|s| fail(hsa, &format!("hsa_agent_get_info({what})"), s))
}

/// A NUL-terminated name in a fixed buffer (`char[64]` attributes).
fn c_name(buf: &[u8]) -> String {
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).trim().to_string()
}

/// `gfx90a` for `gfx90a:sramecc+:xnack-`: target features do not take part in matching.
fn base_arch(name: &str) -> &str {
    name.split_once(':').map_or(name, |(arch, _)| arch).trim()
}

/// How well an image suits a GPU of architecture `agent_arch`: an HSA code object built for that very processor
/// runs; nothing else does (AMD code objects are not portable across `gfx` processors).
fn rank_for(agent_arch: &str, image_triple: &str, image_arch: &str, format: u32) -> Option<u32> {
    (image_triple == TRIPLE
        && format == DeviceImageRecord::FORMAT_HSACO
        && !agent_arch.is_empty()
        && base_arch(image_arch) == base_arch(agent_arch))
    .then_some(1)
}

/// What the loader is given must be an AMDGPU ELF code object: a 64-bit little-endian ELF file for `EM_AMDGPU`.
fn check_code_object(bytes: &[u8]) -> Result<(), String> {
    if bytes.get(..4) != Some(b"\x7fELF") {
        return Err("the HSA code object is not an ELF file".into());
    }
    if bytes.len() < 64 {
        return Err(format!(
            "the HSA code object is truncated: {} bytes, less than an ELF header",
            bytes.len()
        ));
    }
    if bytes[4] != 2 || bytes[5] != 1 {
        return Err("the HSA code object is not a 64-bit little-endian ELF file".into());
    }
    let machine = u16::from_le_bytes([bytes[18], bytes[19]]);
    if machine != EM_AMDGPU {
        return Err(format!(
            "the code object is an ELF file for machine {machine}, not AMDGPU (EM_AMDGPU = {EM_AMDGPU})"
        ));
    }
    Ok(())
}

/// The queue size: [`QUEUE_PACKETS`] within the agent's limits, a power of two as `hsa_queue_create` requires.
fn queue_size(min: u32, max: u32) -> u32 {
    let wanted = QUEUE_PACKETS.min(max.max(1));
    // The largest power of two not above `wanted`.
    let size = 1u32 << (31 - wanted.leading_zeros());
    size.max(min.max(1).checked_next_power_of_two().unwrap_or(1 << 31))
}

/// The kernel-argument block of a launch: the calling convention `(dyn_ptr, a0, .., ak)`, 8 bytes each with no
/// hidden arguments; `dyn_ptr` is 0, and the block is at least the kernel's kernarg segment (the rest zero). The
/// arguments' bytes are copied, never read as numbers (a small by-value argument's padding is uninitialised).
fn kernarg_bytes(args: &[Arg], segment_size: usize) -> Vec<MaybeUninit<u8>> {
    let used = 8 * (args.len() + 1);
    let mut block = vec![MaybeUninit::new(0u8); used.max(segment_size)];
    for (i, arg) in args.iter().enumerate() {
        // SAFETY: an `Arg` is 8 bytes; viewing them as `MaybeUninit<u8>` makes no claim about their contents.
        let bytes =
            unsafe { std::slice::from_raw_parts(arg.as_ptr().cast::<MaybeUninit<u8>>(), 8) };
        block[8 * (i + 1)..8 * (i + 2)].copy_from_slice(bytes);
    }
    block
}

/// The dispatch packet header: a kernel dispatch, with the barrier bit (it starts after the packets before it
/// finish) and system-scope acquire and release fences (it sees the host's writes before it, and the host sees its
/// writes once the completion signal says it is done).
fn dispatch_header() -> u16 {
    (HSA_PACKET_TYPE_KERNEL_DISPATCH << HSA_PACKET_HEADER_TYPE)
        | (1 << HSA_PACKET_HEADER_BARRIER)
        | (HSA_FENCE_SCOPE_SYSTEM << HSA_PACKET_HEADER_SCACQUIRE_FENCE_SCOPE)
        | (HSA_FENCE_SCOPE_SYSTEM << HSA_PACKET_HEADER_SCRELEASE_FENCE_SCOPE)
}

/// The dispatch's setup field: a one-dimensional grid.
fn dispatch_setup() -> u16 {
    1 << HSA_KERNEL_DISPATCH_PACKET_SETUP_DIMENSIONS
}

/// The packet's first 32 bits (header, then setup), stored last and atomically to publish it.
fn header_word(packet: &KernelDispatchPacket) -> u32 {
    u32::from(packet.header) | (u32::from(packet.setup) << 16)
}

/// What HSA needs to know about a kernel, read from its `.kd` symbol.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct KernelInfo {
    /// The kernel descriptor's address, for the dispatch packet.
    object: u64,
    kernarg_size: u32,
    /// Static LDS.
    group_size: u32,
    /// Stack bytes per work-item.
    private_size: u32,
    /// The stack size could not be bounded at compile time.
    dynamic_stack: bool,
}

/// A GPU's launch limits.
#[derive(Clone, Copy, Debug)]
struct Limits {
    max_threads: u32,
    /// Work-items in the x dimension of a grid.
    max_grid: u32,
    /// LDS bytes per workgroup.
    lds_bytes: u32,
}

/// A checked launch configuration, in the units of the dispatch packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Dispatch {
    workgroup_size: u16,
    /// Work-items: teams times threads.
    grid_size: u32,
    /// Static LDS, rounded up to where team-shared memory starts, plus the team-shared memory.
    group_segment_size: u32,
    private_segment_size: u32,
}

/// Checks a launch of `teams` teams of `threads` threads with `team_shared` bytes of team-shared memory against
/// the GPU's limits before anything is dispatched; `Err` says what is too large.
fn plan_dispatch(
    limits: Limits,
    kernel: KernelInfo,
    teams: u32,
    threads: u32,
    team_shared: usize,
) -> Result<Dispatch, String> {
    let workgroup_size = u16::try_from(threads)
        .ok()
        .filter(|_| threads <= limits.max_threads)
        .ok_or_else(|| {
            format!(
                "too many threads per team: {threads}, and the GPU allows {}",
                limits.max_threads
            )
        })?;
    let grid_size = teams
        .checked_mul(threads)
        .filter(|&g| g <= limits.max_grid)
        .ok_or_else(|| {
            format!(
                "too many teams: {teams} teams of {threads} threads are more work-items than the GPU's grid holds \
                 ({})",
                limits.max_grid
            )
        })?;
    let group_segment_size = u32::try_from(team_shared)
        .ok()
        .and_then(|t| {
            let fixed = kernel.group_size.checked_next_multiple_of(TEAM_SHARED_ALIGN)?;
            fixed.checked_add(t)
        })
        .filter(|&g| g <= limits.lds_bytes)
        .ok_or_else(|| {
            format!(
                "the launch asks for {team_shared} bytes of team-shared memory and the kernel has {} bytes of \
                 static LDS; the GPU allows at most {} bytes per team",
                kernel.group_size, limits.lds_bytes
            )
        })?;
    let private_segment_size = if kernel.dynamic_stack {
        kernel.private_size.max(DYNAMIC_STACK_BYTES)
    } else {
        kernel.private_size
    };
    Ok(Dispatch {
        workgroup_size,
        grid_size,
        group_segment_size,
        private_segment_size,
    })
}

/// The whole dispatch packet of a checked launch (the header included; it is published last).
fn dispatch_packet(
    dispatch: Dispatch,
    kernel_object: u64,
    kernarg_address: u64,
    completion_signal: Signal,
) -> KernelDispatchPacket {
    KernelDispatchPacket {
        header: dispatch_header(),
        setup: dispatch_setup(),
        workgroup_size_x: dispatch.workgroup_size,
        workgroup_size_y: 1,
        workgroup_size_z: 1,
        reserved0: 0,
        grid_size_x: dispatch.grid_size,
        grid_size_y: 1,
        grid_size_z: 1,
        private_segment_size: dispatch.private_segment_size,
        group_segment_size: dispatch.group_segment_size,
        kernel_object,
        kernarg_address,
        reserved2: 0,
        completion_signal,
    }
}

/// A GPU failure the runtime reported through a system event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fault {
    Memory { address: u64, reasons: u32 },
    Hardware { cause: u32 },
}

/// The agents of this plugin's devices, and the first fault the runtime reported for each.
struct SystemEvents {
    agents: Vec<u64>,
    faults: Vec<(u64, Fault)>,
}

static EVENTS: Mutex<SystemEvents> = Mutex::new(SystemEvents {
    agents: Vec::new(),
    faults: Vec::new(),
});

fn events() -> std::sync::MutexGuard<'static, SystemEvents> {
    // Each update is one push: a panic elsewhere cannot have left the lists half-changed.
    EVENTS.lock().unwrap_or_else(|p| p.into_inner())
}

/// The first fault reported for `agent`.
fn fault_of(agent: Agent) -> Option<Fault> {
    events()
        .faults
        .iter()
        .find(|(a, _)| *a == agent.handle)
        .map(|&(_, f)| f)
}

/// The runtime's system event handler (it runs on the runtime's event thread). A memory fault or hardware exception
/// on one of this plugin's GPUs is recorded for the launch or copy waiting on it, and claimed (`SUCCESS`), which
/// keeps ROCr from aborting the process; anything else is left to the runtime's default handling.
unsafe extern "C" fn on_system_event(event: *const SystemEvent, _data: *mut c_void) -> Status {
    if event.is_null() {
        return HSA_STATUS_ERROR;
    }
    // SAFETY: the runtime passes a valid event for the duration of the call.
    let event = unsafe { &*event };
    let (agent, fault) = match event.event_type {
        // SAFETY: the event type says which member of the union the runtime wrote.
        HSA_AMD_GPU_MEMORY_FAULT_EVENT => unsafe {
            let m = event.data.memory_fault;
            (
                m.agent,
                Fault::Memory {
                    address: m.virtual_address,
                    reasons: m.fault_reason_mask,
                },
            )
        },
        // SAFETY: as above.
        HSA_AMD_GPU_HW_EXCEPTION_EVENT => unsafe {
            let h = event.data.hw_exception;
            (
                h.agent,
                Fault::Hardware {
                    cause: h.reset_cause,
                },
            )
        },
        _ => return HSA_STATUS_ERROR,
    };
    let mut events = events();
    if !events.agents.contains(&agent.handle) {
        return HSA_STATUS_ERROR;
    }
    if !events.faults.iter().any(|(a, _)| *a == agent.handle) {
        events.faults.push((agent.handle, fault));
    }
    HSA_STATUS_SUCCESS
}

/// A queue's error callback: records the first error in the device's slot (`data`), for the launch waiting on the
/// queue. The queue is unusable afterwards.
unsafe extern "C" fn on_queue_error(status: Status, _queue: *mut Queue, data: *mut c_void) {
    if data.is_null() || status == HSA_STATUS_SUCCESS {
        return;
    }
    // SAFETY: `data` is the device's leaked `AtomicU32`, which lives for the whole process.
    let slot = unsafe { &*(data as *const AtomicU32) };
    let _ = slot.compare_exchange(
        HSA_STATUS_SUCCESS,
        status,
        Ordering::AcqRel,
        Ordering::Acquire,
    );
}

/// What a launch whose queue reported `status` tells the runtime: the kernel started and died, and the queue (so
/// the device) cannot be used any more.
fn queue_failure(status: Status) -> KernelFailure {
    let name = status_name(status).map_or_else(|| format!("HSA status {status:#x}"), String::from);
    let what = match status {
        HSA_STATUS_ERROR_EXCEPTION | HSA_STATUS_ERROR_ILLEGAL_INSTRUCTION => format!(
            "the kernel trapped ({name}): a panic in region code, such as an index out of bounds; the GPU does not \
             report its message"
        ),
        HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION | HSA_STATUS_ERROR_MEMORY_FAULT => {
            format!("the kernel accessed an invalid device address ({name})")
        }
        HSA_STATUS_ERROR_OUT_OF_REGISTERS => format!(
            "the kernel needs more registers than the GPU has for its team size ({name}): use fewer threads per team"
        ),
        HSA_STATUS_ERROR_INVALID_PACKET_FORMAT => {
            format!("the GPU rejected the dispatch packet ({name})")
        }
        _ => format!("the kernel failed ({name})"),
    };
    KernelFailure {
        message: format!("{what}; the HSA queue is unusable, so the device is marked lost"),
        location: None,
        device_lost: true,
    }
}

/// Why a fault happened, from the reason bits of a memory fault.
fn fault_reasons(mask: u32) -> String {
    let names = [
        (HSA_AMD_MEMORY_FAULT_PAGE_NOT_PRESENT, "page not present"),
        (HSA_AMD_MEMORY_FAULT_READ_ONLY, "write to a read-only page"),
        (HSA_AMD_MEMORY_FAULT_NX, "execute on a no-execute page"),
        (HSA_AMD_MEMORY_FAULT_HOST_ONLY, "host-only page"),
        (HSA_AMD_MEMORY_FAULT_DRAMECC, "DRAM ECC error"),
        (HSA_AMD_MEMORY_FAULT_IMPRECISE, "imprecise address"),
        (HSA_AMD_MEMORY_FAULT_SRAMECC, "SRAM ECC error"),
        (HSA_AMD_MEMORY_FAULT_HANG, "GPU reset after a hang"),
    ];
    let found: Vec<&str> = names
        .iter()
        .filter(|(bit, _)| mask & bit != 0)
        .map(|&(_, n)| n)
        .collect();
    if found.is_empty() {
        format!("reason {mask:#x}")
    } else {
        found.join(", ")
    }
}

/// What a fault the runtime reported while a kernel ran tells the runtime: the device is lost.
fn fault_failure(fault: Fault) -> KernelFailure {
    let what = match fault {
        Fault::Memory { address, reasons } => format!(
            "the kernel accessed an invalid device address (GPU memory fault at {address:#x}: {})",
            fault_reasons(reasons)
        ),
        Fault::Hardware { cause } => format!(
            "the GPU stopped with a hardware exception ({})",
            match cause {
                HSA_AMD_HW_EXCEPTION_CAUSE_ECC => "an ECC error",
                HSA_AMD_HW_EXCEPTION_CAUSE_GPU_HANG => "the GPU hung and was reset",
                _ => "of unknown cause",
            }
        ),
    };
    KernelFailure {
        message: format!("{what}; the device is marked lost"),
        location: None,
        device_lost: true,
    }
}

/// A memory pool and the properties the plugin chooses by.
#[derive(Clone, Copy, Debug)]
struct Pool {
    pool: MemoryPool,
    segment: u32,
    flags: u32,
    alloc_allowed: bool,
    size: usize,
}

impl Pool {
    fn is_global(&self) -> bool {
        self.segment == HSA_AMD_SEGMENT_GLOBAL
    }
    fn has(&self, flag: u32) -> bool {
        self.is_global() && self.flags & flag != 0
    }
}

/// The memory pools of `agent`.
fn pools_of(hsa: &Hsa, agent: Agent) -> Result<Vec<Pool>, String> {
    unsafe extern "C" fn push(pool: MemoryPool, data: *mut c_void) -> Status {
        // SAFETY: `data` is the `Vec` below, borrowed for the iteration.
        unsafe { (*(data as *mut Vec<MemoryPool>)).push(pool) };
        HSA_STATUS_SUCCESS
    }
    let mut handles: Vec<MemoryPool> = Vec::new();
    // SAFETY: the callback only pushes into `handles`, which outlives the call.
    check(unsafe {
        (hsa.hsa_amd_agent_iterate_memory_pools)(agent, push, (&mut handles as *mut Vec<_>).cast())
    })
    .map_err(|s| fail(hsa, "hsa_amd_agent_iterate_memory_pools", s))?;
    handles
        .into_iter()
        .map(|pool| {
            let get = |attribute: u32, what: &str| -> Result<u64, String> {
                // SAFETY: the attributes read here are a u32 enum, u32 flags, a size_t and a bool; a zeroed u64
                // holds each (little-endian), and the runtime writes at most 8 bytes.
                unsafe { read::<u64>(|v| (hsa.hsa_amd_memory_pool_get_info)(pool, attribute, v)) }
                    .map_err(|s| fail(hsa, &format!("hsa_amd_memory_pool_get_info({what})"), s))
            };
            let segment = get(HSA_AMD_MEMORY_POOL_INFO_SEGMENT, "SEGMENT")? as u32;
            let (flags, alloc_allowed) = if segment == HSA_AMD_SEGMENT_GLOBAL {
                (
                    get(HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS, "GLOBAL_FLAGS")? as u32,
                    get(
                        HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALLOWED,
                        "RUNTIME_ALLOC_ALLOWED",
                    )? as u8
                        != 0,
                )
            } else {
                (0, false)
            };
            let size = get(HSA_AMD_MEMORY_POOL_INFO_SIZE, "SIZE")? as usize;
            Ok(Pool {
                pool,
                segment,
                flags,
                alloc_allowed,
                size,
            })
        })
        .collect()
}

/// Whether `agent` may use buffers of `pool` (possibly after `hsa_amd_agents_allow_access`).
fn can_access(hsa: &Hsa, agent: Agent, pool: MemoryPool) -> bool {
    // SAFETY: the attribute is a u32 enum.
    let access = unsafe {
        read::<u32>(|v| {
            (hsa.hsa_amd_agent_memory_pool_get_info)(
                agent,
                pool,
                HSA_AMD_AGENT_MEMORY_POOL_INFO_ACCESS,
                v,
            )
        })
    };
    access.is_ok_and(|a| a != HSA_AMD_MEMORY_POOL_ACCESS_NEVER_ALLOWED)
}

fn discover_devices() -> Result<Vec<Box<dyn Device>>, String> {
    devices_of(runtime()?)
}

/// The devices of an initialised runtime.
fn devices_of(hsa: &'static Hsa) -> Result<Vec<Box<dyn Device>>, String> {
    unsafe extern "C" fn push(agent: Agent, data: *mut c_void) -> Status {
        // SAFETY: `data` is the `Vec` below, borrowed for the iteration.
        unsafe { (*(data as *mut Vec<Agent>)).push(agent) };
        HSA_STATUS_SUCCESS
    }
    let mut agents: Vec<Agent> = Vec::new();
    // SAFETY: the callback only pushes into `agents`, which outlives the call.
    check(unsafe { (hsa.hsa_iterate_agents)(push, (&mut agents as *mut Vec<_>).cast()) })
        .map_err(|s| fail(hsa, "hsa_iterate_agents", s))?;
    let mut gpus = Vec::new();
    let mut host_pools = Vec::new();
    for agent in agents {
        // SAFETY: HSA_AGENT_INFO_DEVICE is a u32 enum.
        match unsafe { agent_info::<u32>(hsa, agent, HSA_AGENT_INFO_DEVICE, "DEVICE")? } {
            HSA_DEVICE_TYPE_GPU => {
                // SAFETY: HSA_AGENT_INFO_FEATURE is a u32 bit mask.
                let features =
                    unsafe { agent_info::<u32>(hsa, agent, HSA_AGENT_INFO_FEATURE, "FEATURE")? };
                if features & HSA_AGENT_FEATURE_KERNEL_DISPATCH != 0 {
                    gpus.push(agent);
                }
            }
            HSA_DEVICE_TYPE_CPU => host_pools.extend(pools_of(hsa, agent)?),
            _ => {}
        }
    }
    if gpus.is_empty() {
        return Err(
            "the HSA runtime found no AMD GPU (no GPU agent that can dispatch kernels)".into(),
        );
    }
    let mut frequency = 0u64;
    // SAFETY: the attribute is a u64. A failure leaves 0, handled below.
    let _ = unsafe {
        (hsa.hsa_system_get_info)(
            HSA_SYSTEM_INFO_TIMESTAMP_FREQUENCY,
            (&mut frequency as *mut u64).cast(),
        )
    };
    // Waits are hinted in timestamp ticks: one second's worth (a guess where the runtime does not say).
    let wait_ticks = if frequency == 0 {
        1_000_000_000
    } else {
        frequency
    };
    super::opened(
        "amdgpu",
        gpus.iter().enumerate().map(|(ordinal, &agent)| {
            AmdGpuDevice::open(hsa, ordinal, agent, &host_pools, wait_ticks)
                .map(|d| Box::new(d) as Box<dyn Device>)
                .map_err(|e| format!("AMD GPU {ordinal}: {e}"))
        }),
    )
}

/// The kernels found in a device's images, by [`Kernel`] index.
type KernelTable = RwLock<Vec<KernelInfo>>;

/// The launch state, used under the device's launch mutex: one launch at a time per queue.
struct LaunchState {
    /// The completion signal of every dispatch (each waits for the one before it to finish).
    signal: Signal,
    /// The kernel-argument block, reused and grown as kernels need.
    kernargs: *mut u8,
    kernarg_bytes: usize,
}

/// The staging buffer for copies, used under the device's staging mutex.
struct Staging {
    buffer: *mut u8,
    signal: Signal,
}

// SAFETY: the pointers are runtime allocations used only under their mutex.
unsafe impl Send for LaunchState {}
unsafe impl Send for Staging {}

struct AmdGpuDevice {
    hsa: &'static Hsa,
    /// The GPU's position among the runtime's GPU agents, for messages.
    ordinal: usize,
    agent: Agent,
    /// `gfx90a`: the processor images are built for.
    arch: String,
    product: String,
    profile: u32,
    compute_units: u32,
    limits: Limits,
    total_mem: usize,
    /// Coarse-grained device memory: allocations.
    device_pool: MemoryPool,
    /// Kernel-argument blocks; `kernarg_from_host`: a CPU agent's pool, which the GPU needs access granted to.
    kernarg_pool: MemoryPool,
    kernarg_from_host: bool,
    /// Fine-grained host memory the GPU can reach: the staging buffer.
    host_pool: MemoryPool,
    queue: *mut Queue,
    /// The first error the queue's callback reported (0: none).
    queue_error: &'static AtomicU32,
    /// A wait slice, in timestamp ticks.
    wait_ticks: u64,
    launch: Mutex<LaunchState>,
    staging: Mutex<Option<Staging>>,
    kernels: Arc<KernelTable>,
}

// SAFETY: the HSA runtime is thread-safe; the queue is written only under the launch mutex, and the other pointers
// are used only under their own mutexes.
unsafe impl Send for AmdGpuDevice {}
unsafe impl Sync for AmdGpuDevice {}

/// How a wait ended.
enum Waited {
    Done,
    /// The signal went negative: the runtime's way of failing an asynchronous copy.
    Failed(SignalValue),
    Queue(Status),
    Fault(Fault),
}

impl AmdGpuDevice {
    /// Reads a GPU's properties, picks its memory pools and creates its queue; the device then holds them for the
    /// life of the process (devices are never dropped; their kernels must stay valid).
    fn open(
        hsa: &'static Hsa,
        ordinal: usize,
        agent: Agent,
        host_pools: &[Pool],
        wait_ticks: u64,
    ) -> Result<Self, String> {
        // SAFETY (each agent_info below): the type is the attribute's, as hsa.h declares it.
        let name: [u8; 64] = unsafe { agent_info(hsa, agent, HSA_AGENT_INFO_NAME, "NAME")? };
        let arch = base_arch(&c_name(&name)).to_string();
        let product = unsafe {
            agent_info::<[u8; 64]>(hsa, agent, HSA_AMD_AGENT_INFO_PRODUCT_NAME, "PRODUCT_NAME")
        }
        .map(|n| c_name(&n))
        .unwrap_or_default();
        let profile: u32 = unsafe { agent_info(hsa, agent, HSA_AGENT_INFO_PROFILE, "PROFILE")? };
        let compute_units: u32 = unsafe {
            agent_info(
                hsa,
                agent,
                HSA_AMD_AGENT_INFO_COMPUTE_UNIT_COUNT,
                "COMPUTE_UNIT_COUNT",
            )?
        };
        let max_size: u32 = unsafe {
            agent_info(
                hsa,
                agent,
                HSA_AGENT_INFO_WORKGROUP_MAX_SIZE,
                "WORKGROUP_MAX_SIZE",
            )?
        };
        let max_dim: [u16; 3] = unsafe {
            agent_info(
                hsa,
                agent,
                HSA_AGENT_INFO_WORKGROUP_MAX_DIM,
                "WORKGROUP_MAX_DIM",
            )?
        };
        let grid: Dim3 =
            unsafe { agent_info(hsa, agent, HSA_AGENT_INFO_GRID_MAX_DIM, "GRID_MAX_DIM")? };
        let queue_min: u32 =
            unsafe { agent_info(hsa, agent, HSA_AGENT_INFO_QUEUE_MIN_SIZE, "QUEUE_MIN_SIZE")? };
        let queue_max: u32 =
            unsafe { agent_info(hsa, agent, HSA_AGENT_INFO_QUEUE_MAX_SIZE, "QUEUE_MAX_SIZE")? };
        let max_threads = max_size.min(u32::from(max_dim[0])).max(1);

        let own = pools_of(hsa, agent)?;
        let device = own
            .iter()
            .find(|p| p.has(HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED) && p.alloc_allowed)
            .ok_or("the GPU has no coarse-grained memory pool to allocate device memory from")?;
        let lds_bytes = own
            .iter()
            .find(|p| p.segment == HSA_AMD_SEGMENT_GROUP)
            .map_or(DEFAULT_LDS_BYTES, |p| {
                u32::try_from(p.size).unwrap_or(u32::MAX)
            });
        // Kernel arguments: a CPU agent's kernarg pool the GPU can reach, as LLVM's plugin uses; else the GPU's own.
        let host_kernargs = host_pools.iter().find(|p| {
            p.has(HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_KERNARG_INIT)
                && p.alloc_allowed
                && can_access(hsa, agent, p.pool)
        });
        let (kernarg_pool, kernarg_from_host) = match host_kernargs {
            Some(p) => (p.pool, true),
            None => (
                own.iter()
                    .find(|p| p.has(HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_KERNARG_INIT) && p.alloc_allowed)
                    .ok_or("no memory pool for kernel arguments (HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_KERNARG_INIT)")?
                    .pool,
                false,
            ),
        };
        let host_pool = host_pools
            .iter()
            .find(|p| {
                p.has(HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED)
                    && p.alloc_allowed
                    && can_access(hsa, agent, p.pool)
            })
            .ok_or("no fine-grained host memory pool the GPU can reach, to copy through")?
            .pool;

        let queue_error: &'static AtomicU32 =
            Box::leak(Box::new(AtomicU32::new(HSA_STATUS_SUCCESS)));
        let mut queue: *mut Queue = ptr::null_mut();
        let packets = queue_size(queue_min, queue_max);
        // SAFETY: the callback and its data (a leaked atomic) live for the whole process.
        check(unsafe {
            (hsa.hsa_queue_create)(
                agent,
                packets,
                HSA_QUEUE_TYPE_MULTI,
                Some(on_queue_error),
                (queue_error as *const AtomicU32).cast_mut().cast(),
                u32::MAX,
                u32::MAX,
                &mut queue,
            )
        })
        .map_err(|s| fail(hsa, &format!("hsa_queue_create({packets} packets)"), s))?;
        if queue.is_null() {
            return Err("hsa_queue_create returned no queue".into());
        }
        let mut signal = Signal::default();
        // SAFETY: a plain signal with no particular consumers.
        if let Err(s) = check(unsafe { (hsa.hsa_signal_create)(0, 0, ptr::null(), &mut signal) }) {
            // SAFETY: created above, never used.
            let _ = unsafe { (hsa.hsa_queue_destroy)(queue) };
            return Err(fail(hsa, "hsa_signal_create", s));
        }
        events().agents.push(agent.handle);
        Ok(AmdGpuDevice {
            hsa,
            ordinal,
            agent,
            arch,
            product,
            profile,
            compute_units: compute_units.max(1),
            limits: Limits {
                max_threads,
                max_grid: grid.x.max(1),
                lds_bytes,
            },
            total_mem: device.size,
            device_pool: device.pool,
            kernarg_pool,
            kernarg_from_host,
            host_pool,
            queue,
            queue_error,
            wait_ticks,
            launch: Mutex::new(LaunchState {
                signal,
                kernargs: ptr::null_mut(),
                kernarg_bytes: 0,
            }),
            staging: Mutex::new(None),
            kernels: Arc::new(RwLock::new(Vec::new())),
        })
    }

    /// `what` on this device: for messages.
    fn on(&self, what: String) -> String {
        format!("{what} on AMD GPU {} ({})", self.ordinal, self.arch)
    }

    /// The first error the queue reported.
    fn queue_error(&self) -> Option<Status> {
        match self.queue_error.load(Ordering::Acquire) {
            HSA_STATUS_SUCCESS => None,
            s => Some(s),
        }
    }

    /// Allocates `bytes` from `pool` and, for a pool of another agent, lets this GPU use them.
    fn allocate(&self, pool: MemoryPool, bytes: usize, grant: bool) -> Result<*mut u8, String> {
        let hsa = self.hsa;
        let mut p: *mut c_void = ptr::null_mut();
        // SAFETY: a plain allocation; the pointer is written on success.
        check(unsafe { (hsa.hsa_amd_memory_pool_allocate)(pool, bytes, 0, &mut p) }).map_err(
            |s| {
                self.on(format!(
                    "{} allocating {bytes} bytes",
                    fail(hsa, "hsa_amd_memory_pool_allocate", s)
                ))
            },
        )?;
        if p.is_null() {
            return Err(self.on(format!(
                "hsa_amd_memory_pool_allocate returned no memory for {bytes} bytes"
            )));
        }
        if grant {
            // SAFETY: `p` was allocated above from a pool this agent can access.
            let granted =
                check(unsafe { (hsa.hsa_amd_agents_allow_access)(1, &self.agent, ptr::null(), p) });
            if let Err(s) = granted {
                // SAFETY: allocated above, not handed out.
                let _ = unsafe { (hsa.hsa_amd_memory_pool_free)(p) };
                return Err(self.on(fail(hsa, "hsa_amd_agents_allow_access", s)));
            }
        }
        Ok(p.cast())
    }

    /// Waits until `signal` drops below 1, in slices, checking between them for a fault on this GPU and, for a
    /// dispatch (`queue`), for an error of its queue: a failure that leaves the signal unchanged ends the wait.
    fn wait(&self, signal: Signal, queue: bool) -> Waited {
        // A short kernel or copy is done within a millisecond: spin that long, then sleep in one-second slices.
        let mut slice = (self.wait_ticks / 1000).max(1);
        let mut state = HSA_WAIT_STATE_ACTIVE;
        loop {
            // SAFETY: `signal` is a live signal of this device.
            let value = unsafe {
                (self.hsa.hsa_signal_wait_scacquire)(
                    signal,
                    HSA_SIGNAL_CONDITION_LT,
                    1,
                    slice,
                    state,
                )
            };
            (slice, state) = (self.wait_ticks, HSA_WAIT_STATE_BLOCKED);
            if value == 0 {
                return Waited::Done;
            }
            if value < 0 {
                return Waited::Failed(value);
            }
            if queue {
                if let Some(s) = self.queue_error() {
                    return Waited::Queue(s);
                }
            }
            if let Some(f) = fault_of(self.agent) {
                return Waited::Fault(f);
            }
        }
    }

    /// Copies `size` bytes between device memory and the staging buffer with the GPU's copy engine, and waits.
    ///
    /// # Safety
    /// One of `dst` and `src` is the staging buffer and the other `size` bytes of one allocation of this device;
    /// `size` is at most [`STAGING_BYTES`].
    unsafe fn engine_copy(
        &self,
        staging: &Staging,
        dst: *mut u8,
        src: *const u8,
        size: usize,
    ) -> Result<(), String> {
        let hsa = self.hsa;
        // SAFETY: the signal is this device's; nothing else waits on it (the staging mutex is held).
        unsafe { (hsa.hsa_signal_store_relaxed)(staging.signal, 1) };
        // SAFETY: per the contract; this GPU can reach both buffers (the staging buffer by the access granted).
        check(unsafe {
            (hsa.hsa_amd_memory_async_copy)(
                dst.cast(),
                self.agent,
                src.cast(),
                self.agent,
                size,
                0,
                ptr::null(),
                staging.signal,
            )
        })
        .map_err(|s| {
            self.on(format!(
                "{} copying {size} bytes",
                fail(hsa, "hsa_amd_memory_async_copy", s)
            ))
        })?;
        match self.wait(staging.signal, false) {
            Waited::Done => Ok(()),
            Waited::Failed(v) => Err(self.on(format!(
                "the copy of {size} bytes failed (hsa_amd_memory_async_copy's signal reads {v})"
            ))),
            Waited::Fault(f) => Err(self.on(fault_failure(f).message)),
            Waited::Queue(s) => Err(self.on(queue_failure(s).message)),
        }
    }

    /// The staging buffer, made on first use.
    /// Runs `chunk(staging, offset, len)` over `size` bytes in staging-buffer-sized chunks, holding the staging
    /// buffer throughout (a copy of nothing needs none).
    fn staged(
        &self,
        size: usize,
        mut chunk: impl FnMut(&Staging, usize, usize) -> Result<(), String>,
    ) -> Result<(), String> {
        if size == 0 {
            return Ok(());
        }
        let guard = self.staging()?;
        let Some(staging) = guard.as_ref() else {
            return Err(self.on("no staging buffer".into()));
        };
        let mut done = 0;
        while done < size {
            let n = (size - done).min(STAGING_BYTES);
            chunk(staging, done, n)?;
            done += n;
        }
        Ok(())
    }

    fn staging(&self) -> Result<std::sync::MutexGuard<'_, Option<Staging>>, String> {
        let mut guard = self.staging.lock().unwrap_or_else(|p| p.into_inner());
        if guard.is_none() {
            let buffer = self.allocate(self.host_pool, STAGING_BYTES, true)?;
            let mut signal = Signal::default();
            // SAFETY: a plain signal with no particular consumers.
            if let Err(s) =
                check(unsafe { (self.hsa.hsa_signal_create)(1, 0, ptr::null(), &mut signal) })
            {
                // SAFETY: allocated above, not handed out.
                let _ = unsafe { (self.hsa.hsa_amd_memory_pool_free)(buffer.cast()) };
                return Err(self.on(fail(self.hsa, "hsa_signal_create", s)));
            }
            *guard = Some(Staging { buffer, signal });
        }
        Ok(guard)
    }

    /// Hands `packet` to the queue: reserves a slot, writes the body, publishes the header atomically with release
    /// ordering, and rings the doorbell. Called under the launch mutex.
    ///
    /// # Safety
    /// The queue is live, and the packet's kernarg block and signal stay valid until the dispatch completes.
    unsafe fn submit(&self, packet: &KernelDispatchPacket) -> Result<(), KernelFailure> {
        let hsa = self.hsa;
        let queue = self.queue;
        // SAFETY: per the contract; the runtime's queue struct is readable for the queue's life.
        let (base, size, doorbell) = unsafe {
            (
                (*queue).base_address,
                u64::from((*queue).size),
                (*queue).doorbell_signal,
            )
        };
        if base.is_null() || size == 0 {
            return Err(queue_failure(HSA_STATUS_ERROR_INVALID_QUEUE));
        }
        // SAFETY: the queue is live.
        let index = unsafe { (hsa.hsa_queue_add_write_index_relaxed)(queue, 1) };
        // The slot is free once the packet processor has read past the packet `size` slots back. Launches wait for
        // each other, so this holds at once unless the queue died.
        while index.wrapping_sub(unsafe { (hsa.hsa_queue_load_read_index_scacquire)(queue) })
            >= size
        {
            if let Some(s) = self.queue_error() {
                return Err(queue_failure(s));
            }
            std::thread::yield_now();
        }
        // The size is a power of two.
        let slot = base
            .cast::<KernelDispatchPacket>()
            .wrapping_add((index & (size - 1)) as usize);
        let body = (packet as *const KernelDispatchPacket).cast::<u8>();
        // SAFETY: the slot is a 64-byte packet of the ring that the packet processor no longer reads (its header
        // says INVALID until the store below); everything but the first 32 bits is written first...
        unsafe {
            ptr::copy_nonoverlapping(body.add(4), slot.cast::<u8>().add(4), 60);
            // ... then the header and setup, atomically: the release store orders the body before it.
            AtomicU32::from_ptr(slot.cast::<u32>()).store(header_word(packet), Ordering::Release);
            (hsa.hsa_signal_store_screlease)(doorbell, index as SignalValue);
        }
        Ok(())
    }
}

impl Device for AmdGpuDevice {
    fn describe(&self) -> super::DeviceDescription {
        super::DeviceDescription {
            name: self.product.clone(),
            arch: self.arch.clone(),
            memory: self.total_mem as u64,
        }
    }

    fn rank(&self, image: &Image) -> Option<u32> {
        rank_for(&self.arch, image.triple, image.arch, image.format)
    }

    fn default_geometry(&self, spmd: bool) -> (u32, u32) {
        let threads = 256.min(self.limits.max_threads);
        if spmd {
            (self.compute_units, threads)
        } else {
            // A work-shared loop is a grid-stride loop: enough teams to fill every CU several times over.
            (self.compute_units.saturating_mul(8), threads)
        }
    }

    fn max_threads(&self) -> u32 {
        self.limits.max_threads
    }

    fn load_image(&self, image: &Image) -> Result<LoadedImage, String> {
        if image.format != DeviceImageRecord::FORMAT_HSACO {
            return Err(format!(
                "image format {} is not an HSA code object",
                image.format
            ));
        }
        check_code_object(image.bytes)?;
        let hsa = self.hsa;
        // The loader reads the ELF in place: give it an aligned copy when the embedded bytes are not aligned. The
        // copy is kept for the process's life, like the executable (debuggers find code objects by address).
        let bytes: &'static [u8] = if image.bytes.as_ptr().cast::<u128>().is_aligned() {
            image.bytes
        } else {
            let mut v = vec![0u128; image.bytes.len().div_ceil(16)];
            // SAFETY: `v` holds at least `bytes.len()` bytes.
            unsafe {
                ptr::copy_nonoverlapping(
                    image.bytes.as_ptr(),
                    v.as_mut_ptr().cast::<u8>(),
                    image.bytes.len(),
                )
            };
            let v: &'static [u128] = Vec::leak(v);
            // SAFETY: the leaked buffer holds `bytes.len()` initialised bytes and lives forever.
            unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), image.bytes.len()) }
        };
        let mut reader = CodeObjectReader::default();
        // SAFETY: `bytes` is a checked ELF code object that outlives the reader.
        check(unsafe {
            (hsa.hsa_code_object_reader_create_from_memory)(
                bytes.as_ptr().cast(),
                bytes.len(),
                &mut reader,
            )
        })
        .map_err(|s| self.on(fail(hsa, "hsa_code_object_reader_create_from_memory", s)))?;
        let mut executable = Executable::default();
        let loaded = (|| {
            // SAFETY: creates an empty executable for this agent's profile.
            check(unsafe {
                (hsa.hsa_executable_create_alt)(
                    self.profile,
                    HSA_DEFAULT_FLOAT_ROUNDING_MODE_DEFAULT,
                    ptr::null(),
                    &mut executable,
                )
            })
            .map_err(|s| fail(hsa, "hsa_executable_create_alt", s))?;
            let mut object = LoadedCodeObject::default();
            // SAFETY: the reader and executable are live; the agent is this device's.
            check(unsafe {
                (hsa.hsa_executable_load_agent_code_object)(
                    executable,
                    self.agent,
                    reader,
                    ptr::null(),
                    &mut object,
                )
            })
            .map_err(|s| fail(hsa, "hsa_executable_load_agent_code_object", s))?;
            // SAFETY: as above.
            check(unsafe { (hsa.hsa_executable_freeze)(executable, ptr::null()) })
                .map_err(|s| fail(hsa, "hsa_executable_freeze", s))?;
            let mut result = 0u32;
            // SAFETY: as above; `result` receives a u32.
            check(unsafe { (hsa.hsa_executable_validate)(executable, &mut result) })
                .map_err(|s| fail(hsa, "hsa_executable_validate", s))?;
            if result != 0 {
                return Err(format!(
                    "the loaded executable does not validate (hsa_executable_validate reports {result:#x})"
                ));
            }
            Ok(())
        })();
        // SAFETY: the reader is no longer needed once the executable is frozen (or failed).
        let _ = unsafe { (hsa.hsa_code_object_reader_destroy)(reader) };
        if let Err(e) = loaded {
            if executable.handle != 0 {
                // SAFETY: created above, and nothing of it is handed out.
                let _ = unsafe { (hsa.hsa_executable_destroy)(executable) };
            }
            return Err(self.on(e));
        }
        Ok(Box::new(AmdGpuImage {
            hsa,
            executable,
            agent: self.agent,
            kernels: Arc::clone(&self.kernels),
        }))
    }

    fn alloc(&self, size: usize) -> Result<DevicePtr, String> {
        // The zero-fill writes whole 32-bit words.
        let bytes = size
            .max(1)
            .checked_next_multiple_of(4)
            .ok_or_else(|| self.on(format!("cannot allocate {size} bytes")))?;
        let p = self
            .allocate(self.device_pool, bytes, false)
            .map_err(|e| format!("{e} ({} MiB in all)", self.total_mem >> 20))?;
        // SAFETY: `p` is a live allocation of `bytes` bytes, a multiple of 4, and page-aligned. The fill is
        // synchronous, so it is done before any later copy or launch.
        if let Err(s) = check(unsafe { (self.hsa.hsa_amd_memory_fill)(p.cast(), 0, bytes / 4) }) {
            // SAFETY: allocated above and not handed out.
            let _ = unsafe { (self.hsa.hsa_amd_memory_pool_free)(p.cast()) };
            return Err(self.on(fail(self.hsa, "hsa_amd_memory_fill", s)));
        }
        Ok(p as DevicePtr)
    }

    unsafe fn free(&self, ptr: DevicePtr) {
        // SAFETY: per the trait's contract. A failure (a lost device) leaves nothing to do.
        let _ = unsafe { (self.hsa.hsa_amd_memory_pool_free)(ptr as *mut c_void) };
    }

    unsafe fn copy_to_device(
        &self,
        dst: DevicePtr,
        src: *const u8,
        size: usize,
    ) -> Result<(), String> {
        self.staged(size, |staging, done, n| {
            // SAFETY: per the trait's contract `src..src+size` is readable; the staging buffer holds
            // STAGING_BYTES and is ours while the mutex is held (the previous chunk's copy has completed).
            unsafe { ptr::copy_nonoverlapping(src.add(done), staging.buffer, n) };
            let to = (dst as usize + done) as *mut u8;
            // SAFETY: `to..to+n` lies in the caller's device allocation; `n` fits the staging buffer.
            unsafe { self.engine_copy(staging, to, staging.buffer, n) }
        })
    }

    unsafe fn copy_from_device(
        &self,
        dst: *mut u8,
        src: DevicePtr,
        size: usize,
    ) -> Result<(), String> {
        self.staged(size, |staging, done, n| {
            let from = (src as usize + done) as *const u8;
            // SAFETY: `from..from+n` lies in the caller's device allocation; `n` fits the staging buffer.
            unsafe { self.engine_copy(staging, staging.buffer, from, n) }?;
            // SAFETY: per the trait's contract `dst..dst+size` is writable; the copy into the staging buffer has
            // completed (its signal was waited for with acquire ordering).
            unsafe { ptr::copy_nonoverlapping(staging.buffer, dst.add(done), n) };
            Ok(())
        })
    }

    unsafe fn launch(
        &self,
        kernel: Kernel,
        args: &[Arg],
        params: LaunchParams,
    ) -> Result<(), KernelFailure> {
        let refused = |message: String| KernelFailure {
            message,
            location: None,
            device_lost: false,
        };
        let info = self
            .kernels
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(kernel.0)
            .copied()
            .ok_or_else(|| refused(self.on(format!("no kernel with handle {}", kernel.0))))?;
        let (teams, threads) = (params.num_teams.max(1), params.num_threads.max(1));
        let dispatch = plan_dispatch(self.limits, info, teams, threads, params.team_shared).map_err(|why| {
            refused(self.on(format!(
                "{why} (a launch of {teams} teams of {threads} threads with {} bytes of team-shared memory)",
                params.team_shared
            )))
        })?;
        let block = kernarg_bytes(args, info.kernarg_size as usize);

        let mut state = self.launch.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(s) = self.queue_error() {
            return Err(queue_failure(s));
        }
        if state.kernarg_bytes < block.len() {
            let bytes = block.len().max(256).next_power_of_two();
            let fresh = self
                .allocate(self.kernarg_pool, bytes, self.kernarg_from_host)
                .map_err(refused)?;
            if !fresh.cast::<u128>().is_aligned() {
                // SAFETY: allocated above, not handed out.
                let _ = unsafe { (self.hsa.hsa_amd_memory_pool_free)(fresh.cast()) };
                return Err(refused(
                    self.on("the kernel-argument block is not 16-byte aligned".into()),
                ));
            }
            if !state.kernargs.is_null() {
                // SAFETY: the old block's last dispatch completed (every launch waits under this mutex).
                let _ = unsafe { (self.hsa.hsa_amd_memory_pool_free)(state.kernargs.cast()) };
            }
            state.kernargs = fresh;
            state.kernarg_bytes = bytes;
        }
        // SAFETY: the block fits the buffer, which no dispatch is reading (the last one completed); copying
        // `MaybeUninit` bytes reads none of them.
        unsafe {
            ptr::copy_nonoverlapping(block.as_ptr().cast::<u8>(), state.kernargs, block.len())
        };
        let packet = dispatch_packet(dispatch, info.object, state.kernargs as u64, state.signal);
        // SAFETY: the signal is this device's and nothing waits on it (the mutex is held).
        unsafe { (self.hsa.hsa_signal_store_relaxed)(state.signal, 1) };
        // SAFETY: the queue is live; the kernarg block and signal stay valid until the wait below returns.
        unsafe { self.submit(&packet) }?;
        match self.wait(state.signal, true) {
            Waited::Done => Ok(()),
            Waited::Queue(s) => Err(queue_failure(s)),
            Waited::Fault(f) => Err(fault_failure(f)),
            Waited::Failed(v) => Err(KernelFailure {
                message: format!(
                    "the dispatch's completion signal reads {v}; the device is marked lost"
                ),
                location: None,
                device_lost: true,
            }),
        }
    }
}

struct AmdGpuImage {
    hsa: &'static Hsa,
    executable: Executable,
    agent: Agent,
    kernels: Arc<KernelTable>,
}

// SAFETY: executable handles may be used from any thread; the kernel table has its own lock.
unsafe impl Send for AmdGpuImage {}
unsafe impl Sync for AmdGpuImage {}

impl AmdGpuImage {
    /// Reads a kernel symbol's properties; `None` (with a message on stderr) if it is not a usable kernel.
    fn kernel_info(&self, symbol: ExecutableSymbol, name: &str) -> Option<KernelInfo> {
        let hsa = self.hsa;
        let get = |attribute: u32, what: &str| -> Option<u64> {
            // SAFETY: the attributes read here are u32 or u64 values or a bool; a zeroed u64 holds each
            // (little-endian), and the runtime writes at most 8 bytes.
            unsafe { read::<u64>(|v| (hsa.hsa_executable_symbol_get_info)(symbol, attribute, v)) }
                .map_err(|s| {
                    eprintln!(
                        "offload: amdgpu: {} for {name}",
                        fail(hsa, &format!("hsa_executable_symbol_get_info({what})"), s)
                    )
                })
                .ok()
        };
        if get(HSA_EXECUTABLE_SYMBOL_INFO_TYPE, "TYPE")? as u32 != HSA_SYMBOL_KIND_KERNEL {
            eprintln!("offload: amdgpu: {name} is not a kernel symbol");
            return None;
        }
        Some(KernelInfo {
            object: get(HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_OBJECT, "KERNEL_OBJECT")?,
            kernarg_size: get(
                HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_KERNARG_SEGMENT_SIZE,
                "KERNARG_SEGMENT_SIZE",
            )? as u32,
            group_size: get(
                HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_GROUP_SEGMENT_SIZE,
                "GROUP_SEGMENT_SIZE",
            )? as u32,
            private_size: get(
                HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_PRIVATE_SEGMENT_SIZE,
                "PRIVATE_SEGMENT_SIZE",
            )? as u32,
            dynamic_stack: get(
                HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_DYNAMIC_CALLSTACK,
                "DYNAMIC_CALLSTACK",
            )? as u8
                != 0,
        })
    }
}

impl LoadedImageOps for AmdGpuImage {
    fn kernel(&self, symbol: &CStr) -> Option<Kernel> {
        let hsa = self.hsa;
        // A kernel's symbol is its kernel descriptor, `<name>.kd`.
        let mut name = symbol.to_bytes().to_vec();
        name.extend_from_slice(b".kd");
        let name = CString::new(name).ok()?;
        let mut found = ExecutableSymbol::default();
        // SAFETY: the executable is frozen and never destroyed; the name is NUL-terminated.
        let status = unsafe {
            (hsa.hsa_executable_get_symbol_by_name)(
                self.executable,
                name.as_ptr(),
                &self.agent,
                &mut found,
            )
        };
        match check(status) {
            Ok(()) => {}
            Err(HSA_STATUS_ERROR_INVALID_SYMBOL_NAME) => return None,
            Err(s) => {
                eprintln!(
                    "offload: amdgpu: {}",
                    fail(
                        hsa,
                        &format!("hsa_executable_get_symbol_by_name({name:?})"),
                        s
                    )
                );
                return None;
            }
        }
        let info = self.kernel_info(found, &name.to_string_lossy())?;
        let mut kernels = self.kernels.write().unwrap_or_else(|p| p.into_inner());
        let index = match kernels.iter().position(|k| *k == info) {
            Some(i) => i,
            None => {
                kernels.push(info);
                kernels.len() - 1
            }
        };
        Some(Kernel(index))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    const HSACO: u32 = DeviceImageRecord::FORMAT_HSACO;

    #[test]
    fn an_hsaco_runs_on_its_own_processor_only() {
        assert_eq!(rank_for("gfx90a", TRIPLE, "gfx90a", HSACO), Some(1));
        assert_eq!(rank_for("gfx942", TRIPLE, "gfx942", HSACO), Some(1));
        assert_eq!(rank_for("gfx90a", TRIPLE, "gfx942", HSACO), None);
        assert_eq!(rank_for("gfx942", TRIPLE, "gfx90a", HSACO), None);
        assert_eq!(rank_for("gfx90a", TRIPLE, "gfx908", HSACO), None);
        assert_eq!(rank_for("gfx1100", TRIPLE, "gfx110", HSACO), None);
    }

    #[test]
    fn target_features_do_not_take_part_in_matching() {
        assert_eq!(base_arch("gfx90a:sramecc+:xnack-"), "gfx90a");
        assert_eq!(base_arch("gfx90a"), "gfx90a");
        assert_eq!(rank_for("gfx90a:xnack+", TRIPLE, "gfx90a", HSACO), Some(1));
        assert_eq!(rank_for("gfx90a", TRIPLE, "gfx90a:xnack-", HSACO), Some(1));
    }

    #[test]
    fn other_triples_and_formats_are_not_ranked() {
        for triple in [
            "nvptx64-nvidia-cuda",
            "x86_64-unknown-linux-gnu",
            "amdgcn",
            "",
        ] {
            assert_eq!(
                rank_for("gfx90a", triple, "gfx90a", HSACO),
                None,
                "{triple}"
            );
        }
        for format in [
            DeviceImageRecord::FORMAT_SHARED_OBJECT,
            DeviceImageRecord::FORMAT_PTX,
            DeviceImageRecord::FORMAT_CUBIN,
            77,
        ] {
            assert_eq!(rank_for("gfx90a", TRIPLE, "gfx90a", format), None);
        }
        assert_eq!(
            rank_for("", TRIPLE, "", HSACO),
            None,
            "an agent without a name"
        );
        assert_eq!(rank_for("gfx90a", TRIPLE, "sm_90", HSACO), None);
    }

    /// The first 20 bytes of an ELF header with the given class, data encoding and machine.
    fn elf(class: u8, data: u8, machine: u16) -> Vec<u8> {
        let mut h = vec![0u8; 64];
        h[..4].copy_from_slice(b"\x7fELF");
        h[4] = class;
        h[5] = data;
        h[6] = 1;
        h[7] = 64; // ELFOSABI_AMDGPU_HSA
        h[16] = 3; // ET_DYN
        h[18..20].copy_from_slice(&machine.to_le_bytes());
        h
    }

    #[test]
    fn a_code_object_must_be_a_64_bit_amdgpu_elf_file() {
        assert_eq!(check_code_object(&elf(2, 1, 224)), Ok(()));
        let e = check_code_object(&elf(2, 1, 62)).unwrap_err();
        assert!(e.contains("machine 62, not AMDGPU"), "{e}");
        let e = check_code_object(&elf(1, 1, 224)).unwrap_err();
        assert!(e.contains("not a 64-bit little-endian"), "{e}");
        let e = check_code_object(&elf(2, 2, 224)).unwrap_err();
        assert!(e.contains("not a 64-bit little-endian"), "{e}");
        let e = check_code_object(b"junk").unwrap_err();
        assert!(e.contains("not an ELF file"), "{e}");
        let e = check_code_object(b"").unwrap_err();
        assert!(e.contains("not an ELF file"), "{e}");
        let e = check_code_object(&elf(2, 1, 224)[..40]).unwrap_err();
        assert!(e.contains("truncated"), "{e}");
    }

    fn init(bytes: &[MaybeUninit<u8>]) -> Vec<u8> {
        // SAFETY: only called on blocks whose arguments are fully initialised.
        bytes.iter().map(|b| unsafe { b.assume_init() }).collect()
    }

    #[test]
    fn kernel_arguments_follow_dyn_ptr_8_bytes_each() {
        let args = [Arg::new(0x1122_3344_5566_7788), Arg::new(42)];
        let block = kernarg_bytes(&args, 0);
        let bytes = init(&block);
        assert_eq!(bytes.len(), 24);
        assert_eq!(&bytes[..8], &[0; 8], "dyn_ptr is null");
        assert_eq!(&bytes[8..16], &0x1122_3344_5566_7788u64.to_le_bytes());
        assert_eq!(&bytes[16..24], &42u64.to_le_bytes());
    }

    #[test]
    fn the_block_covers_the_kernels_kernarg_segment_with_zeros() {
        let block = kernarg_bytes(&[Arg::new(7)], 64);
        let bytes = init(&block);
        assert_eq!(bytes.len(), 64);
        assert_eq!(&bytes[8..16], &7u64.to_le_bytes());
        assert!(bytes[16..].iter().all(|&b| b == 0));
        // A segment smaller than the arguments never truncates them.
        assert_eq!(kernarg_bytes(&[Arg::new(1), Arg::new(2)], 8).len(), 24);
        assert_eq!(kernarg_bytes(&[], 0).len(), 8);
    }

    /// Under Miri: an argument with uninitialised padding is copied, not read.
    #[test]
    fn arguments_with_uninitialised_bytes_are_copied_without_reading_them() {
        let mut partial = Arg::uninit();
        // SAFETY: writes the low 4 bytes; the others stay uninitialised, like a small struct's padding.
        unsafe { partial.as_mut_ptr().cast::<u32>().write(0xdead_beef) };
        let block = kernarg_bytes(&[partial], 0);
        assert_eq!(block.len(), 16);
        // SAFETY: bytes 8..12 came from the initialised half.
        let low: Vec<u8> = block[8..12]
            .iter()
            .map(|b| unsafe { b.assume_init() })
            .collect();
        assert_eq!(low, 0xdead_beefu32.to_le_bytes());
    }

    #[test]
    fn the_header_is_a_kernel_dispatch_with_barrier_and_system_fences() {
        let h = dispatch_header();
        assert_eq!(h & 0xff, 2, "HSA_PACKET_TYPE_KERNEL_DISPATCH");
        assert_eq!((h >> 8) & 1, 1, "barrier bit");
        assert_eq!((h >> 9) & 3, 2, "acquire fence: system scope");
        assert_eq!((h >> 11) & 3, 2, "release fence: system scope");
        assert_eq!(h, 0x1502);
        assert_eq!(dispatch_setup(), 1, "one dimension");
    }

    const LIMITS: Limits = Limits {
        max_threads: 1024,
        max_grid: u32::MAX,
        lds_bytes: 64 * 1024,
    };

    fn kernel(group: u32, private: u32, dynamic: bool) -> KernelInfo {
        KernelInfo {
            object: 0xabc0,
            kernarg_size: 24,
            group_size: group,
            private_size: private,
            dynamic_stack: dynamic,
        }
    }

    #[test]
    fn the_packet_counts_work_items_and_adds_team_shared_memory_after_static_lds() {
        let d = plan_dispatch(LIMITS, kernel(100, 32, false), 4, 256, 4096).unwrap();
        // Static LDS rounded up to 16 bytes, where team-shared memory starts.
        assert_eq!(
            d,
            Dispatch {
                workgroup_size: 256,
                grid_size: 1024,
                group_segment_size: 112 + 4096,
                private_segment_size: 32,
            }
        );
        let signal = Signal { handle: 77 };
        let p = dispatch_packet(d, 0xabc0, 0x7000, signal);
        assert_eq!(header_word(&p), 0x0001_1502);
        assert_eq!(
            (p.workgroup_size_x, p.workgroup_size_y, p.workgroup_size_z),
            (256, 1, 1)
        );
        assert_eq!((p.grid_size_x, p.grid_size_y, p.grid_size_z), (1024, 1, 1));
        assert_eq!(p.group_segment_size, 4208);
        assert_eq!(p.private_segment_size, 32);
        assert_eq!(p.kernel_object, 0xabc0);
        assert_eq!(p.kernarg_address, 0x7000);
        assert_eq!(p.completion_signal, signal);
        assert_eq!((p.reserved0, p.reserved2), (0, 0));
    }

    #[test]
    fn a_dynamic_stack_gets_a_default_size() {
        let d = plan_dispatch(LIMITS, kernel(0, 64, true), 1, 1, 0).unwrap();
        assert_eq!(d.private_segment_size, DYNAMIC_STACK_BYTES);
        let d = plan_dispatch(LIMITS, kernel(0, 64 * 1024, true), 1, 1, 0).unwrap();
        assert_eq!(d.private_segment_size, 64 * 1024);
        let d = plan_dispatch(LIMITS, kernel(0, 0, false), 1, 1, 0).unwrap();
        assert_eq!((d.group_segment_size, d.private_segment_size), (0, 0));
    }

    #[test]
    fn launches_the_gpu_cannot_take_are_refused_with_the_reason() {
        let e = plan_dispatch(LIMITS, kernel(0, 0, false), 1, 2048, 0).unwrap_err();
        assert!(e.contains("too many threads per team: 2048"), "{e}");
        let e = plan_dispatch(LIMITS, kernel(0, 0, false), 1, 70_000, 0).unwrap_err();
        assert!(e.contains("too many threads per team"), "{e}");
        let e = plan_dispatch(LIMITS, kernel(0, 0, false), u32::MAX, 2, 0).unwrap_err();
        assert!(e.contains("too many teams"), "{e}");
        let small = Limits {
            max_grid: 1000,
            ..LIMITS
        };
        assert!(plan_dispatch(small, kernel(0, 0, false), 4, 250, 0).is_ok());
        assert!(plan_dispatch(small, kernel(0, 0, false), 5, 250, 0).is_err());
        // Static LDS counts against the limit too.
        assert!(plan_dispatch(LIMITS, kernel(0, 0, false), 1, 64, 64 * 1024).is_ok());
        let e = plan_dispatch(LIMITS, kernel(16, 0, false), 1, 64, 64 * 1024).unwrap_err();
        assert!(
            e.contains(
                "65536 bytes of team-shared memory and the kernel has 16 bytes of static LDS"
            ),
            "{e}"
        );
        assert!(plan_dispatch(LIMITS, kernel(0, 0, false), 1, 64, usize::MAX).is_err());
        assert!(plan_dispatch(LIMITS, kernel(u32::MAX, 0, false), 1, 64, 0).is_err());
    }

    #[test]
    fn a_trap_is_a_panic_in_region_code_and_loses_the_device() {
        for status in [
            HSA_STATUS_ERROR_EXCEPTION,
            HSA_STATUS_ERROR_ILLEGAL_INSTRUCTION,
        ] {
            let f = queue_failure(status);
            assert!(f.device_lost);
            assert!(f.location.is_none());
            let name = status_name(status).unwrap();
            assert!(
                f.message.starts_with(&format!(
                    "the kernel trapped ({name}): a panic in region code, such as an index out of bounds; the GPU \
                     does not report its message"
                )),
                "{}",
                f.message
            );
        }
    }

    #[test]
    fn every_queue_error_loses_the_device_and_names_the_status() {
        for status in [
            HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION,
            HSA_STATUS_ERROR_MEMORY_FAULT,
            HSA_STATUS_ERROR_OUT_OF_REGISTERS,
            HSA_STATUS_ERROR_INVALID_PACKET_FORMAT,
            HSA_STATUS_ERROR,
            0x7777,
        ] {
            let f = queue_failure(status);
            assert!(f.device_lost, "{status:#x}");
            let name = status_name(status).map_or_else(|| format!("{status:#x}"), String::from);
            assert!(f.message.contains(&name), "{}", f.message);
            assert!(
                f.message.ends_with("so the device is marked lost"),
                "{}",
                f.message
            );
        }
        assert!(queue_failure(HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION)
            .message
            .starts_with("the kernel accessed an invalid device address"));
    }

    #[test]
    fn faults_name_the_address_and_reason_and_lose_the_device() {
        let f = fault_failure(Fault::Memory {
            address: 0x7f00_1000,
            reasons: HSA_AMD_MEMORY_FAULT_PAGE_NOT_PRESENT | HSA_AMD_MEMORY_FAULT_IMPRECISE,
        });
        assert!(f.device_lost);
        assert!(
            f.message
                .contains("GPU memory fault at 0x7f001000: page not present, imprecise address"),
            "{}",
            f.message
        );
        let hang = fault_failure(Fault::Hardware {
            cause: HSA_AMD_HW_EXCEPTION_CAUSE_GPU_HANG,
        });
        assert!(hang.device_lost);
        assert!(
            hang.message.contains("the GPU hung and was reset"),
            "{}",
            hang.message
        );
        let ecc = fault_failure(Fault::Hardware {
            cause: HSA_AMD_HW_EXCEPTION_CAUSE_ECC,
        });
        assert!(ecc.message.contains("an ECC error"), "{}", ecc.message);
        assert_eq!(fault_reasons(0), "reason 0x0");
    }

    #[test]
    fn queues_are_a_power_of_two_within_the_agents_limits() {
        assert_eq!(queue_size(64, 131_072), 1024);
        assert_eq!(queue_size(64, 512), 512);
        assert_eq!(queue_size(64, 1000), 512);
        assert_eq!(queue_size(4096, 131_072), 4096);
        assert_eq!(queue_size(0, 0), 1);
        assert_eq!(queue_size(u32::MAX, u32::MAX), 1 << 31);
    }

    #[test]
    fn a_missing_library_is_told_from_one_that_fails_to_load() {
        assert!(is_missing(
            "libhsa-runtime64.so.1",
            "libhsa-runtime64.so.1: cannot open shared object file: No such file or directory"
        ));
        assert!(is_missing(
            "/opt/rocm/lib/libhsa-runtime64.so.1",
            "/opt/rocm/lib/libhsa-runtime64.so.1: cannot open shared object file: No such file or directory"
        ));
        assert!(!is_missing(
            "libhsa-runtime64.so.1",
            "libhsakmt.so.1: cannot open shared object file: No such file or directory"
        ));
        assert!(!is_missing(
            "libhsa-runtime64.so.1",
            "libhsa-runtime64.so.1: undefined symbol: hsaKmtOpenKFD"
        ));
    }

    #[test]
    fn names_end_at_the_first_nul() {
        let mut buf = [0u8; 64];
        buf[..6].copy_from_slice(b"gfx90a");
        assert_eq!(c_name(&buf), "gfx90a");
        assert_eq!(c_name(b"gfx942"), "gfx942");
    }

    #[test]
    #[cfg_attr(miri, ignore = "Miri cannot dlopen")]
    fn without_rocm_discovery_says_why_and_does_not_panic() {
        match AmdGpu.discover() {
            Ok(devices) => {
                eprintln!(
                    "note: this machine has {} AMD GPU(s); the no-ROCm case is not checked",
                    devices.len()
                );
            }
            Err(why) => {
                eprintln!("amdgpu: {why}");
                // SAFETY: opens the library by name only.
                let present = LIBRARY_NAMES
                    .iter()
                    .any(|n| unsafe { libloading::Library::new(*n) }.is_ok());
                if !present {
                    assert!(
                        why.starts_with("libhsa-runtime64.so.1 not found: ROCm is not installed"),
                        "{why}"
                    );
                }
                // A second discovery gives the same answer (the runtime is loaded once).
                assert_eq!(AmdGpu.discover().err(), Some(why));
            }
        }
    }

    #[test]
    fn gpus_come_before_the_host_elf_devices() {
        let names: Vec<_> = super::super::all().iter().map(|p| p.name()).collect();
        assert_eq!(names, ["cuda", "amdgpu", "host-elf"]);
    }
}
