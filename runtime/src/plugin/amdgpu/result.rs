//! The `Result` layer (cudarc's `result`): one thin function per HSA entry point the plugin calls, grouped by the
//! object it acts on, each turning the status into `Result<T, HsaError>` and writing its out-parameter into a value
//! it returns. Info queries take a typed [`Info`] attribute, so the type a query reads is the one the header gives
//! it. Functions whose soundness depends on a handle still being alive (a signal, queue, executable or block that
//! can be destroyed) are `unsafe`; [`super::safe`] wraps those objects so that their owner guarantees it.

use super::sys::*;
use std::ffi::{c_char, c_void, CStr};
use std::fmt;
use std::marker::PhantomData;
use std::mem::MaybeUninit;
use std::ptr::{self, NonNull};

/// Which call failed: the entry point, and what it was asked (an attribute, a size) where that tells more.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Call {
    pub entry: &'static str,
    pub detail: Option<String>,
}

impl Call {
    fn new(entry: &'static str) -> Call {
        Call {
            entry,
            detail: None,
        }
    }

    fn with(entry: &'static str, detail: impl fmt::Display) -> Call {
        Call {
            entry,
            detail: Some(detail.to_string()),
        }
    }
}

impl fmt::Display for Call {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.detail {
            None => f.write_str(self.entry),
            Some(d) => write!(f, "{}({d})", self.entry),
        }
    }
}

/// An error status: its code, its name in the headers, and the runtime's description (`hsa_status_string`) where
/// the runtime could give one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StatusText {
    pub code: Status,
    pub name: Option<&'static str>,
    pub description: Option<String>,
}

impl StatusText {
    /// The status without the runtime's description (before `hsa_init`, the runtime cannot describe anything).
    pub fn bare(code: Status) -> StatusText {
        StatusText {
            code,
            name: status_name(code),
            description: None,
        }
    }

    /// The status with the runtime's description.
    pub fn described(hsa: &Hsa, code: Status) -> StatusText {
        StatusText {
            description: status_string(hsa, code).map(|s| s.to_string_lossy().trim().to_string()),
            ..StatusText::bare(code)
        }
    }
}

impl fmt::Display for StatusText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = self
            .name
            .map_or_else(|| format!("HSA status {:#x}", self.code), String::from);
        match self.description.as_deref() {
            None | Some("") => f.write_str(&name),
            // ROCm's descriptions begin with the name: `HSA_STATUS_ERROR_...: The ...`.
            Some(text) if text.starts_with(&name) => f.write_str(text),
            Some(text) => write!(f, "{name} ({text})"),
        }
    }
}

/// Why the HSA runtime cannot be used, or which of its calls failed and how.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HsaError {
    #[error(
        "libhsa-runtime64.so.1 not found: ROCm is not installed (or not on the library search path)"
    )]
    NotInstalled,
    /// The library exists but the loader could not load it (a missing dependency, say).
    #[error("libhsa-runtime64.so.1 could not be loaded: {0}")]
    Unloadable(String),
    #[error(
        "the HSA runtime (libhsa-runtime64.so.1) lacks {}: the ROCm installation is too old or incomplete",
        .0.join(", ")
    )]
    MissingEntryPoints(Vec<&'static str>),
    /// `hsa_init` failed; `no_kfd`: the amdgpu kernel driver's device file does not exist, which is why.
    #[error(
        "hsa_init failed: {status}{}",
        if *.no_kfd { ": /dev/kfd does not exist (no amdgpu kernel driver loaded, or no AMD GPU)" } else { "" }
    )]
    Init { status: StatusText, no_kfd: bool },
    /// A call returned an error status.
    #[error("{call} failed: {status}")]
    Failed { call: Call, status: StatusText },
    /// A call succeeded but gave back nothing (a null pointer).
    #[error("{call} returned no {what}")]
    Nothing { call: Call, what: &'static str },
}

impl HsaError {
    /// The status a failed call returned.
    pub fn status(&self) -> Option<Status> {
        match self {
            HsaError::Failed { status, .. } | HsaError::Init { status, .. } => Some(status.code),
            _ => None,
        }
    }
}

pub type Result<T, E = HsaError> = std::result::Result<T, E>;

/// `Ok` for the two non-error statuses; otherwise the error, described by the (initialised) runtime.
fn check(hsa: &Hsa, status: Status, call: impl FnOnce() -> Call) -> Result<()> {
    match status {
        HSA_STATUS_SUCCESS | HSA_STATUS_INFO_BREAK => Ok(()),
        code => Err(HsaError::Failed {
            call: call(),
            status: StatusText::described(hsa, code),
        }),
    }
}

/// An info attribute of the objects `Of` whose value has the C type `T`. Only [`info`] makes these, and each of its
/// constants gives its attribute the type the header gives it, one that all-zero bytes are a valid value of
/// (integers, arrays and structs of them; a C `bool` is read as a `u8`): [`read`] relies on both.
pub struct Info<Of, T> {
    pub id: u32,
    pub name: &'static str,
    _of: PhantomData<(Of, T)>,
}

impl<Of, T> Clone for Info<Of, T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<Of, T> Copy for Info<Of, T> {}

impl<Of, T: Copy> Info<Of, T> {
    /// Private to this module: see the type's contract.
    const fn new(id: u32, name: &'static str) -> Self {
        Info {
            id,
            name,
            _of: PhantomData,
        }
    }
}

/// The attributes the plugin reads, with their types (`hsa.h`, `hsa_ext_amd.h`).
pub mod info {
    use super::super::sys::*;
    use super::Info;

    pub enum System {}
    pub enum Agent {}
    pub enum Pool {}
    pub enum AgentPool {}
    pub enum Symbol {}

    // Each type below is the one the header gives the attribute.
    pub const TIMESTAMP_FREQUENCY: Info<System, u64> =
        Info::new(HSA_SYSTEM_INFO_TIMESTAMP_FREQUENCY, "TIMESTAMP_FREQUENCY");

    pub const NAME: Info<Agent, [u8; 64]> = Info::new(HSA_AGENT_INFO_NAME, "NAME");
    pub const FEATURE: Info<Agent, u32> = Info::new(HSA_AGENT_INFO_FEATURE, "FEATURE");
    pub const PROFILE: Info<Agent, u32> = Info::new(HSA_AGENT_INFO_PROFILE, "PROFILE");
    pub const WORKGROUP_MAX_DIM: Info<Agent, [u16; 3]> =
        Info::new(HSA_AGENT_INFO_WORKGROUP_MAX_DIM, "WORKGROUP_MAX_DIM");
    pub const WORKGROUP_MAX_SIZE: Info<Agent, u32> =
        Info::new(HSA_AGENT_INFO_WORKGROUP_MAX_SIZE, "WORKGROUP_MAX_SIZE");
    pub const GRID_MAX_DIM: Info<Agent, Dim3> =
        Info::new(HSA_AGENT_INFO_GRID_MAX_DIM, "GRID_MAX_DIM");
    pub const QUEUE_MIN_SIZE: Info<Agent, u32> =
        Info::new(HSA_AGENT_INFO_QUEUE_MIN_SIZE, "QUEUE_MIN_SIZE");
    pub const QUEUE_MAX_SIZE: Info<Agent, u32> =
        Info::new(HSA_AGENT_INFO_QUEUE_MAX_SIZE, "QUEUE_MAX_SIZE");
    pub const DEVICE: Info<Agent, u32> = Info::new(HSA_AGENT_INFO_DEVICE, "DEVICE");
    pub const COMPUTE_UNIT_COUNT: Info<Agent, u32> =
        Info::new(HSA_AMD_AGENT_INFO_COMPUTE_UNIT_COUNT, "COMPUTE_UNIT_COUNT");
    pub const PRODUCT_NAME: Info<Agent, [u8; 64]> =
        Info::new(HSA_AMD_AGENT_INFO_PRODUCT_NAME, "PRODUCT_NAME");

    pub const SEGMENT: Info<Pool, u32> = Info::new(HSA_AMD_MEMORY_POOL_INFO_SEGMENT, "SEGMENT");
    pub const GLOBAL_FLAGS: Info<Pool, u32> =
        Info::new(HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS, "GLOBAL_FLAGS");
    pub const SIZE: Info<Pool, usize> = Info::new(HSA_AMD_MEMORY_POOL_INFO_SIZE, "SIZE");
    pub const RUNTIME_ALLOC_ALLOWED: Info<Pool, u8> = Info::new(
        HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALLOWED,
        "RUNTIME_ALLOC_ALLOWED",
    );

    pub const ACCESS: Info<AgentPool, u32> =
        Info::new(HSA_AMD_AGENT_MEMORY_POOL_INFO_ACCESS, "ACCESS");

    pub const TYPE: Info<Symbol, u32> = Info::new(HSA_EXECUTABLE_SYMBOL_INFO_TYPE, "TYPE");
    pub const VARIABLE_ADDRESS: Info<Symbol, u64> = Info::new(
        HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_ADDRESS,
        "VARIABLE_ADDRESS",
    );
    pub const VARIABLE_SIZE: Info<Symbol, u32> =
        Info::new(HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_SIZE, "VARIABLE_SIZE");
    pub const KERNEL_OBJECT: Info<Symbol, u64> =
        Info::new(HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_OBJECT, "KERNEL_OBJECT");
    pub const KERNARG_SEGMENT_SIZE: Info<Symbol, u32> = Info::new(
        HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_KERNARG_SEGMENT_SIZE,
        "KERNARG_SEGMENT_SIZE",
    );
    pub const GROUP_SEGMENT_SIZE: Info<Symbol, u32> = Info::new(
        HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_GROUP_SEGMENT_SIZE,
        "GROUP_SEGMENT_SIZE",
    );
    pub const PRIVATE_SEGMENT_SIZE: Info<Symbol, u32> = Info::new(
        HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_PRIVATE_SEGMENT_SIZE,
        "PRIVATE_SEGMENT_SIZE",
    );
    pub const DYNAMIC_CALLSTACK: Info<Symbol, u8> = Info::new(
        HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_DYNAMIC_CALLSTACK,
        "DYNAMIC_CALLSTACK",
    );
}

/// Room for one attribute value, zeroed, with slack after it: a runtime that writes a wider value than the header
/// says (a `size_t` where a `u32` was expected) writes into the slack, not past the buffer.
#[repr(C)]
struct Slot<T> {
    value: MaybeUninit<T>,
    _slack: MaybeUninit<[u64; 2]>,
}

/// Reads one attribute through `query`, which writes the value to the pointer it is given.
fn read<Of, T: Copy>(
    hsa: &Hsa,
    attribute: Info<Of, T>,
    entry: &'static str,
    query: impl FnOnce(*mut c_void) -> Status,
) -> Result<T> {
    let mut slot = MaybeUninit::<Slot<T>>::zeroed();
    check(hsa, query(slot.as_mut_ptr().cast()), || {
        Call::with(entry, attribute.name)
    })?;
    // SAFETY: zero-initialised, which is a valid `T` (the contract of `Info`), then (partly) overwritten by the
    // runtime with a value of that type.
    Ok(unsafe { slot.assume_init().value.assume_init() })
}

/// `hsa_init`. The runtime cannot describe its own failure here, so the error has the status's name only.
pub fn init(hsa: &Hsa) -> Result<()> {
    // SAFETY: every entry point is resolved; hsa_init may be called at any time.
    match unsafe { (hsa.hsa_init)() } {
        HSA_STATUS_SUCCESS | HSA_STATUS_INFO_BREAK => Ok(()),
        code => Err(HsaError::Init {
            status: StatusText::bare(code),
            no_kfd: !std::path::Path::new("/dev/kfd").exists(),
        }),
    }
}

/// `hsa_status_string`: the runtime's description of a status, if it has one. Only meaningful once the runtime is
/// initialised.
pub fn status_string(hsa: &Hsa, status: Status) -> Option<&'static CStr> {
    let mut text: *const c_char = ptr::null();
    // SAFETY: the runtime stores a pointer to a static NUL-terminated string, or fails.
    let found = unsafe { (hsa.hsa_status_string)(status, &mut text) } == HSA_STATUS_SUCCESS;
    // SAFETY: checked non-null; the string is static.
    (found && !text.is_null()).then(|| unsafe { CStr::from_ptr(text) })
}

/// `hsa_system_get_info`.
pub fn system_get_info<T: Copy>(hsa: &Hsa, attribute: Info<info::System, T>) -> Result<T> {
    read(hsa, attribute, "hsa_system_get_info", |v| {
        // SAFETY: `v` has room for the attribute's value (and slack).
        unsafe { (hsa.hsa_system_get_info)(attribute.id, v) }
    })
}

/// `hsa_amd_register_system_event_handler`.
///
/// # Safety
/// `callback` may be called on the runtime's thread at any time from now on, with `data`, which must stay valid
/// for that long and be usable from that thread.
pub unsafe fn register_system_event_handler(
    hsa: &Hsa,
    callback: SystemEventCallback,
    data: *mut c_void,
) -> Result<()> {
    // SAFETY: per the contract.
    let status = unsafe { (hsa.hsa_amd_register_system_event_handler)(callback, data) };
    check(hsa, status, || {
        Call::new("hsa_amd_register_system_event_handler")
    })
}

/// Collects what an iteration callback is given into the `Vec<H>` behind `data`.
unsafe extern "C" fn push<H>(handle: H, data: *mut c_void) -> Status {
    // SAFETY: `data` is the `Vec<H>` the iterating function below lends for the duration of the iteration.
    unsafe { (*data.cast::<Vec<H>>()).push(handle) };
    HSA_STATUS_SUCCESS
}

/// Agents and the memory pools an agent can reach: handles valid as long as the runtime is initialised, which is
/// the life of the process, so these functions are safe.
pub mod agent {
    use super::*;

    /// `hsa_iterate_agents`: every agent.
    pub fn iterate(hsa: &Hsa) -> Result<Vec<Agent>> {
        let mut agents: Vec<Agent> = Vec::new();
        // SAFETY: the callback only pushes into `agents`, which outlives the call.
        let status = unsafe { (hsa.hsa_iterate_agents)(push::<Agent>, (&raw mut agents).cast()) };
        check(hsa, status, || Call::new("hsa_iterate_agents"))?;
        Ok(agents)
    }

    /// `hsa_agent_get_info`.
    pub fn get_info<T: Copy>(
        hsa: &Hsa,
        agent: Agent,
        attribute: Info<info::Agent, T>,
    ) -> Result<T> {
        read(hsa, attribute, "hsa_agent_get_info", |v| {
            // SAFETY: `v` has room for the attribute's value (and slack).
            unsafe { (hsa.hsa_agent_get_info)(agent, attribute.id, v) }
        })
    }

    /// `hsa_amd_agent_iterate_memory_pools`: the agent's memory pools.
    pub fn iterate_memory_pools(hsa: &Hsa, agent: Agent) -> Result<Vec<MemoryPool>> {
        let mut pools: Vec<MemoryPool> = Vec::new();
        // SAFETY: the callback only pushes into `pools`, which outlives the call.
        let status = unsafe {
            (hsa.hsa_amd_agent_iterate_memory_pools)(
                agent,
                push::<MemoryPool>,
                (&raw mut pools).cast(),
            )
        };
        check(hsa, status, || {
            Call::new("hsa_amd_agent_iterate_memory_pools")
        })?;
        Ok(pools)
    }

    /// `hsa_amd_memory_pool_get_info`.
    pub fn pool_info<T: Copy>(
        hsa: &Hsa,
        pool: MemoryPool,
        attribute: Info<info::Pool, T>,
    ) -> Result<T> {
        read(hsa, attribute, "hsa_amd_memory_pool_get_info", |v| {
            // SAFETY: `v` has room for the attribute's value (and slack).
            unsafe { (hsa.hsa_amd_memory_pool_get_info)(pool, attribute.id, v) }
        })
    }

    /// `hsa_amd_agent_memory_pool_get_info`: what `agent` may do with `pool`.
    pub fn pool_access_info<T: Copy>(
        hsa: &Hsa,
        agent: Agent,
        pool: MemoryPool,
        attribute: Info<info::AgentPool, T>,
    ) -> Result<T> {
        read(hsa, attribute, "hsa_amd_agent_memory_pool_get_info", |v| {
            // SAFETY: `v` has room for the attribute's value (and slack).
            unsafe { (hsa.hsa_amd_agent_memory_pool_get_info)(agent, pool, attribute.id, v) }
        })
    }
}

/// Blocks of memory pools, and the runtime's operations on them.
pub mod memory {
    use super::*;

    /// `hsa_amd_memory_pool_allocate`: `size` bytes.
    pub fn pool_allocate(hsa: &Hsa, pool: MemoryPool, size: usize) -> Result<NonNull<u8>> {
        let call = || Call::with("hsa_amd_memory_pool_allocate", format_args!("{size} bytes"));
        let mut p: *mut c_void = ptr::null_mut();
        // SAFETY: a plain allocation; the pointer is written on success.
        check(
            hsa,
            unsafe { (hsa.hsa_amd_memory_pool_allocate)(pool, size, 0, &mut p) },
            call,
        )?;
        NonNull::new(p.cast()).ok_or_else(|| HsaError::Nothing {
            call: call(),
            what: "memory",
        })
    }

    /// `hsa_amd_memory_pool_free`.
    ///
    /// # Safety
    /// `ptr` came from [`pool_allocate`], is not freed yet, and is not used afterwards.
    pub unsafe fn pool_free(hsa: &Hsa, ptr: *mut u8) -> Result<()> {
        // SAFETY: per the contract.
        let status = unsafe { (hsa.hsa_amd_memory_pool_free)(ptr.cast()) };
        check(hsa, status, || Call::new("hsa_amd_memory_pool_free"))
    }

    /// `hsa_amd_agents_allow_access`: lets `agents` use the block at `ptr`, with the default flags.
    ///
    /// # Safety
    /// `ptr` is a live block of [`pool_allocate`].
    pub unsafe fn agents_allow_access(hsa: &Hsa, agents: &[Agent], ptr: *const u8) -> Result<()> {
        let n = u32::try_from(agents.len()).unwrap_or(u32::MAX);
        // SAFETY: per the contract; `agents` holds `n` agents.
        let status = unsafe {
            (hsa.hsa_amd_agents_allow_access)(n, agents.as_ptr(), ptr::null(), ptr.cast())
        };
        check(hsa, status, || Call::new("hsa_amd_agents_allow_access"))
    }

    /// `hsa_amd_memory_fill`: `count` 32-bit words of `value` at `ptr`, synchronously.
    ///
    /// # Safety
    /// `ptr..ptr + 4 * count` lies in one live block, 4-byte aligned, that nothing else uses meanwhile.
    pub unsafe fn fill(hsa: &Hsa, ptr: *mut u8, value: u32, count: usize) -> Result<()> {
        // SAFETY: per the contract.
        let status = unsafe { (hsa.hsa_amd_memory_fill)(ptr.cast(), value, count) };
        check(hsa, status, || Call::new("hsa_amd_memory_fill"))
    }

    /// `hsa_amd_memory_async_copy`: starts a copy of `size` bytes with no dependencies; `completion` drops by
    /// one when it is done (below zero if it failed).
    ///
    /// # Safety
    /// `dst..dst+size` and `src..src+size` lie in memory the agents can reach and stay valid until `completion`
    /// says the copy is done; `completion` is live.
    pub unsafe fn async_copy(
        hsa: &Hsa,
        dst: *mut u8,
        dst_agent: Agent,
        src: *const u8,
        src_agent: Agent,
        size: usize,
        completion: Signal,
    ) -> Result<()> {
        // SAFETY: per the contract.
        let status = unsafe {
            (hsa.hsa_amd_memory_async_copy)(
                dst.cast(),
                dst_agent,
                src.cast(),
                src_agent,
                size,
                0,
                ptr::null(),
                completion,
            )
        };
        check(hsa, status, || {
            Call::with("hsa_amd_memory_async_copy", format_args!("{size} bytes"))
        })
    }
}

/// Signals. Using a destroyed signal is undefined (the handle is the runtime's pointer), hence `unsafe`.
pub mod signal {
    use super::*;

    /// `hsa_signal_create`: a signal any agent may wait on.
    pub fn create(hsa: &Hsa, initial_value: SignalValue) -> Result<Signal> {
        let mut signal = Signal::default();
        // SAFETY: a plain signal with no particular consumers.
        let status = unsafe { (hsa.hsa_signal_create)(initial_value, 0, ptr::null(), &mut signal) };
        check(hsa, status, || Call::new("hsa_signal_create"))?;
        Ok(signal)
    }

    /// `hsa_signal_destroy`.
    ///
    /// # Safety
    /// `signal` is live, nothing waits on it, and it is not used afterwards.
    pub unsafe fn destroy(hsa: &Hsa, signal: Signal) -> Result<()> {
        // SAFETY: per the contract.
        let status = unsafe { (hsa.hsa_signal_destroy)(signal) };
        check(hsa, status, || Call::new("hsa_signal_destroy"))
    }

    /// `hsa_signal_store_relaxed`.
    ///
    /// # Safety
    /// `signal` is live.
    pub unsafe fn store_relaxed(hsa: &Hsa, signal: Signal, value: SignalValue) {
        // SAFETY: per the contract.
        unsafe { (hsa.hsa_signal_store_relaxed)(signal, value) }
    }

    /// `hsa_signal_store_screlease`.
    ///
    /// # Safety
    /// `signal` is live.
    pub unsafe fn store_screlease(hsa: &Hsa, signal: Signal, value: SignalValue) {
        // SAFETY: per the contract.
        unsafe { (hsa.hsa_signal_store_screlease)(signal, value) }
    }

    /// `hsa_signal_wait_scacquire`: waits (at most about `timeout_hint` timestamp ticks) until the signal's value
    /// meets `condition` against `compare`, and returns the value it saw.
    ///
    /// # Safety
    /// `signal` is live.
    pub unsafe fn wait_scacquire(
        hsa: &Hsa,
        signal: Signal,
        condition: u32,
        compare: SignalValue,
        timeout_hint: u64,
        wait_state_hint: u32,
    ) -> SignalValue {
        // SAFETY: per the contract.
        unsafe {
            (hsa.hsa_signal_wait_scacquire)(
                signal,
                condition,
                compare,
                timeout_hint,
                wait_state_hint,
            )
        }
    }
}

/// User-mode queues.
pub mod queue {
    use super::*;

    /// `hsa_queue_create`: a multi-producer queue of `size` packets on `agent` with the runtime's maximum private
    /// and group segment sizes, reporting asynchronous errors to `callback` with `data`.
    ///
    /// # Safety
    /// `callback` may be called on the runtime's thread while the queue lives, with `data`, which must stay valid
    /// (and usable from that thread) for that long.
    pub unsafe fn create(
        hsa: &Hsa,
        agent: Agent,
        size: u32,
        callback: QueueCallback,
        data: *mut c_void,
    ) -> Result<NonNull<Queue>> {
        let call = || Call::with("hsa_queue_create", format_args!("{size} packets"));
        let mut queue: *mut Queue = ptr::null_mut();
        // SAFETY: per the contract.
        let status = unsafe {
            (hsa.hsa_queue_create)(
                agent,
                size,
                HSA_QUEUE_TYPE_MULTI,
                Some(callback),
                data,
                u32::MAX,
                u32::MAX,
                &mut queue,
            )
        };
        check(hsa, status, call)?;
        NonNull::new(queue).ok_or_else(|| HsaError::Nothing {
            call: call(),
            what: "queue",
        })
    }

    /// `hsa_queue_destroy`.
    ///
    /// # Safety
    /// `queue` is live and not used afterwards.
    pub unsafe fn destroy(hsa: &Hsa, queue: NonNull<Queue>) -> Result<()> {
        // SAFETY: per the contract.
        let status = unsafe { (hsa.hsa_queue_destroy)(queue.as_ptr()) };
        check(hsa, status, || Call::new("hsa_queue_destroy"))
    }

    /// `hsa_queue_add_write_index_relaxed`: reserves `count` packet slots; returns the first one's index.
    ///
    /// # Safety
    /// `queue` is live.
    pub unsafe fn add_write_index_relaxed(hsa: &Hsa, queue: NonNull<Queue>, count: u64) -> u64 {
        // SAFETY: per the contract.
        unsafe { (hsa.hsa_queue_add_write_index_relaxed)(queue.as_ptr(), count) }
    }

    /// `hsa_queue_load_read_index_scacquire`: the index of the next packet the packet processor will take.
    ///
    /// # Safety
    /// `queue` is live.
    pub unsafe fn load_read_index_scacquire(hsa: &Hsa, queue: NonNull<Queue>) -> u64 {
        // SAFETY: per the contract.
        unsafe { (hsa.hsa_queue_load_read_index_scacquire)(queue.as_ptr()) }
    }
}

/// Code object readers, executables and their symbols.
pub mod executable {
    use super::*;

    /// `hsa_code_object_reader_create_from_memory`.
    ///
    /// # Safety
    /// `bytes` stays valid and unchanged while the reader lives.
    pub unsafe fn reader_create_from_memory(hsa: &Hsa, bytes: &[u8]) -> Result<CodeObjectReader> {
        let mut reader = CodeObjectReader::default();
        // SAFETY: per the contract; the runtime reads `bytes.len()` bytes.
        let status = unsafe {
            (hsa.hsa_code_object_reader_create_from_memory)(
                bytes.as_ptr().cast(),
                bytes.len(),
                &mut reader,
            )
        };
        check(hsa, status, || {
            Call::new("hsa_code_object_reader_create_from_memory")
        })?;
        Ok(reader)
    }

    /// `hsa_code_object_reader_destroy`.
    ///
    /// # Safety
    /// `reader` is live and not used afterwards.
    pub unsafe fn reader_destroy(hsa: &Hsa, reader: CodeObjectReader) -> Result<()> {
        // SAFETY: per the contract.
        let status = unsafe { (hsa.hsa_code_object_reader_destroy)(reader) };
        check(hsa, status, || Call::new("hsa_code_object_reader_destroy"))
    }

    /// `hsa_executable_create_alt`: an empty executable for `profile` with the default rounding mode.
    pub fn create_alt(hsa: &Hsa, profile: u32) -> Result<Executable> {
        let mut executable = Executable::default();
        // SAFETY: creates an empty executable; no options.
        let status = unsafe {
            (hsa.hsa_executable_create_alt)(
                profile,
                HSA_DEFAULT_FLOAT_ROUNDING_MODE_DEFAULT,
                ptr::null(),
                &mut executable,
            )
        };
        check(hsa, status, || Call::new("hsa_executable_create_alt"))?;
        Ok(executable)
    }

    /// `hsa_executable_load_agent_code_object`.
    ///
    /// # Safety
    /// `executable` and `reader` are live.
    pub unsafe fn load_agent_code_object(
        hsa: &Hsa,
        executable: Executable,
        agent: Agent,
        reader: CodeObjectReader,
    ) -> Result<LoadedCodeObject> {
        let mut object = LoadedCodeObject::default();
        // SAFETY: per the contract; no options.
        let status = unsafe {
            (hsa.hsa_executable_load_agent_code_object)(
                executable,
                agent,
                reader,
                ptr::null(),
                &mut object,
            )
        };
        check(hsa, status, || {
            Call::new("hsa_executable_load_agent_code_object")
        })?;
        Ok(object)
    }

    /// `hsa_executable_freeze`.
    ///
    /// # Safety
    /// `executable` is live.
    pub unsafe fn freeze(hsa: &Hsa, executable: Executable) -> Result<()> {
        // SAFETY: per the contract; no options.
        let status = unsafe { (hsa.hsa_executable_freeze)(executable, ptr::null()) };
        check(hsa, status, || Call::new("hsa_executable_freeze"))
    }

    /// `hsa_executable_validate`: 0 if the executable is valid, else the runtime's reason bits.
    ///
    /// # Safety
    /// `executable` is live.
    pub unsafe fn validate(hsa: &Hsa, executable: Executable) -> Result<u32> {
        let mut result = 0u32;
        // SAFETY: per the contract; `result` receives a u32.
        let status = unsafe { (hsa.hsa_executable_validate)(executable, &mut result) };
        check(hsa, status, || Call::new("hsa_executable_validate"))?;
        Ok(result)
    }

    /// `hsa_executable_destroy`.
    ///
    /// # Safety
    /// `executable` is live, no dispatch of its kernels runs, and it is not used afterwards.
    pub unsafe fn destroy(hsa: &Hsa, executable: Executable) -> Result<()> {
        // SAFETY: per the contract.
        let status = unsafe { (hsa.hsa_executable_destroy)(executable) };
        check(hsa, status, || Call::new("hsa_executable_destroy"))
    }

    /// `hsa_executable_get_symbol_by_name`: `name`'s symbol for `agent`.
    ///
    /// # Safety
    /// `executable` is live.
    pub unsafe fn get_symbol_by_name(
        hsa: &Hsa,
        executable: Executable,
        name: &CStr,
        agent: Agent,
    ) -> Result<ExecutableSymbol> {
        let mut symbol = ExecutableSymbol::default();
        // SAFETY: per the contract; the name is NUL-terminated.
        let status = unsafe {
            (hsa.hsa_executable_get_symbol_by_name)(executable, name.as_ptr(), &agent, &mut symbol)
        };
        check(hsa, status, || {
            Call::with(
                "hsa_executable_get_symbol_by_name",
                format_args!("{name:?}"),
            )
        })?;
        Ok(symbol)
    }

    /// `hsa_executable_symbol_get_info`.
    ///
    /// # Safety
    /// The symbol's executable is live.
    pub unsafe fn symbol_info<T: Copy>(
        hsa: &Hsa,
        symbol: ExecutableSymbol,
        attribute: Info<info::Symbol, T>,
    ) -> Result<T> {
        read(hsa, attribute, "hsa_executable_symbol_get_info", |v| {
            // SAFETY: `v` has room for the attribute's value (and slack); the symbol is live per the contract.
            unsafe { (hsa.hsa_executable_symbol_get_info)(symbol, attribute.id, v) }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_is_its_name_and_the_runtimes_description_said_once() {
        let bare = StatusText::bare(HSA_STATUS_ERROR_EXCEPTION);
        assert_eq!(bare.to_string(), "HSA_STATUS_ERROR_EXCEPTION");
        assert_eq!(StatusText::bare(0x4242).to_string(), "HSA status 0x4242");
        let with = |d: &str| StatusText {
            description: Some(d.into()),
            ..StatusText::bare(HSA_STATUS_ERROR_OUT_OF_RESOURCES)
        };
        assert_eq!(
            with("HSA_STATUS_ERROR_OUT_OF_RESOURCES: The runtime failed.").to_string(),
            "HSA_STATUS_ERROR_OUT_OF_RESOURCES: The runtime failed."
        );
        assert_eq!(
            with("no memory").to_string(),
            "HSA_STATUS_ERROR_OUT_OF_RESOURCES (no memory)"
        );
        assert_eq!(with("").to_string(), "HSA_STATUS_ERROR_OUT_OF_RESOURCES");
    }

    #[test]
    fn errors_name_the_call_and_keep_the_status() {
        let e = HsaError::Failed {
            call: Call::with("hsa_agent_get_info", "NAME"),
            status: StatusText::bare(HSA_STATUS_ERROR_INVALID_AGENT),
        };
        assert_eq!(
            e.to_string(),
            "hsa_agent_get_info(NAME) failed: HSA_STATUS_ERROR_INVALID_AGENT"
        );
        assert_eq!(e.status(), Some(HSA_STATUS_ERROR_INVALID_AGENT));
        let e = HsaError::Nothing {
            call: Call::new("hsa_queue_create"),
            what: "queue",
        };
        assert_eq!(e.to_string(), "hsa_queue_create returned no queue");
        assert_eq!(e.status(), None);
        assert_eq!(
            HsaError::MissingEntryPoints(vec!["hsa_init", "hsa_queue_create"]).to_string(),
            "the HSA runtime (libhsa-runtime64.so.1) lacks hsa_init, hsa_queue_create: the ROCm installation is too \
             old or incomplete"
        );
        let init = |no_kfd| HsaError::Init {
            status: StatusText::bare(HSA_STATUS_ERROR_OUT_OF_RESOURCES),
            no_kfd,
        };
        assert_eq!(
            init(false).to_string(),
            "hsa_init failed: HSA_STATUS_ERROR_OUT_OF_RESOURCES"
        );
        assert_eq!(
            init(true).to_string(),
            "hsa_init failed: HSA_STATUS_ERROR_OUT_OF_RESOURCES: /dev/kfd does not exist (no amdgpu kernel driver \
             loaded, or no AMD GPU)"
        );
    }

    #[test]
    fn an_attribute_slot_has_room_to_spare() {
        assert!(std::mem::size_of::<Slot<u8>>() >= 17);
        assert!(std::mem::size_of::<Slot<[u8; 64]>>() >= 64 + 16);
    }
}
