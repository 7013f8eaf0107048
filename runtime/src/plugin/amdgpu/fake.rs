//! A fake HSA runtime for the plugin's tests: every entry point of the function table is a plain Rust function
//! that records its call (a trace the tests compare line by line) and acts like a one-GPU machine whose "device
//! memory" is host memory and whose packet processor runs when the doorbell rings. So discovery, pool choice,
//! allocation, copies, image loading, kernel lookup and dispatch run here without a GPU, and each failure path can
//! be taken by making one call fail.
//!
//! State is per thread (each test has its own machine); the plugin calls the runtime only from the calling thread.

use super::sys::*;
use std::cell::RefCell;
use std::ffi::{c_char, c_void, CStr};
use std::fmt::Write;
use std::sync::OnceLock;

pub const CPU: Agent = Agent { handle: 0x100 };
/// An agent that is neither CPU nor GPU: discovery skips it.
pub const DSP: Agent = Agent { handle: 0x300 };

/// A memory pool of the fake machine.
#[derive(Clone, Copy, Debug)]
pub struct FakePool {
    pub handle: u64,
    pub segment: u32,
    pub flags: u32,
    pub alloc_allowed: bool,
    pub size: usize,
    /// `HSA_AMD_AGENT_MEMORY_POOL_INFO_ACCESS` of the GPU to this pool.
    pub gpu_access: u32,
}

const fn global(handle: u64, flags: u32, size: usize, gpu_access: u32) -> FakePool {
    FakePool {
        handle,
        segment: HSA_AMD_SEGMENT_GLOBAL,
        flags,
        alloc_allowed: true,
        size,
        gpu_access,
    }
}

/// The host's pools as ROCm shows them on an MI-series machine: a fine-grained kernarg pool, a fine-grained pool
/// and a coarse-grained one, none accessible to the GPU by default.
pub const HOST_POOLS: [FakePool; 3] = [
    global(
        0x110,
        HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_KERNARG_INIT | HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED,
        1 << 36,
        HSA_AMD_MEMORY_POOL_ACCESS_DISALLOWED_BY_DEFAULT,
    ),
    global(
        0x111,
        HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED,
        1 << 36,
        HSA_AMD_MEMORY_POOL_ACCESS_DISALLOWED_BY_DEFAULT,
    ),
    global(
        0x112,
        HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED,
        1 << 36,
        HSA_AMD_MEMORY_POOL_ACCESS_DISALLOWED_BY_DEFAULT,
    ),
];

/// The GPU's pools: coarse-grained device memory (64 GiB), a fine-grained kernarg pool, and the group segment.
pub const GPU_POOLS: [FakePool; 3] = [
    global(
        0x210,
        HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED,
        64 << 30,
        HSA_AMD_MEMORY_POOL_ACCESS_ALLOWED_BY_DEFAULT,
    ),
    global(
        0x211,
        HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_KERNARG_INIT | HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED,
        1 << 30,
        HSA_AMD_MEMORY_POOL_ACCESS_ALLOWED_BY_DEFAULT,
    ),
    FakePool {
        handle: 0x212,
        segment: HSA_AMD_SEGMENT_GROUP,
        flags: 0,
        alloc_allowed: false,
        size: 64 * 1024,
        gpu_access: HSA_AMD_MEMORY_POOL_ACCESS_ALLOWED_BY_DEFAULT,
    },
];

/// A minimal AMDGPU ELF header: 64-bit, little-endian, `ELFOSABI_AMDGPU_HSA`, `ET_DYN`, `EM_AMDGPU`, from byte `at`.
const fn elf_header<const N: usize>(at: usize) -> [u8; N] {
    let mut b = [0u8; N];
    let h = [0x7f, b'E', b'L', b'F', 2, 1, 1, 64];
    let mut i = 0;
    while i < h.len() {
        b[at + i] = h[i];
        i += 1;
    }
    b[at + 16] = 3;
    b[at + 18] = 224;
    b
}

#[repr(C, align(16))]
struct Aligned<const N: usize>([u8; N]);

static CODE_OBJECT: Aligned<64> = Aligned(elf_header(0));
static CODE_OBJECT_PAST: Aligned<80> = Aligned(elf_header(1));

/// A code object at a 16-byte aligned address, or one byte past one (statics: images live for the process).
pub fn code_object(aligned: bool) -> &'static [u8] {
    match aligned {
        true => &CODE_OBJECT.0,
        false => &CODE_OBJECT_PAST.0[1..65],
    }
}

/// What the packet processor does with a dispatch.
#[derive(Clone, Copy, Debug)]
pub enum OnDispatch {
    /// Runs it: the completion signal drops to 0.
    Complete,
    /// The queue's error callback reports this status and the signal stays.
    QueueError(Status),
    /// Nothing happens: the signal stays, as when the GPU faulted.
    Hang,
}

/// The machine a test runs on.
#[derive(Clone, Debug)]
pub struct Config {
    /// The GPU agent's handle: unique per test, since the plugin's fault table is process-wide.
    pub gpu: u64,
    pub gpu_features: u32,
    pub host_pools: Vec<FakePool>,
    pub gpu_pools: Vec<FakePool>,
    /// Symbols of the loaded executable: name (`<kernel>.kd`) and `HSA_EXECUTABLE_SYMBOL_INFO_TYPE`.
    pub symbols: Vec<(&'static str, u32)>,
    pub validate: u32,
    pub on_dispatch: OnDispatch,
    /// What an asynchronous copy leaves in its completion signal (0: done; negative: failed).
    pub copy_leaves: SignalValue,
}

impl Config {
    pub fn new(gpu: u64) -> Config {
        Config {
            gpu,
            gpu_features: HSA_AGENT_FEATURE_KERNEL_DISPATCH,
            host_pools: HOST_POOLS.to_vec(),
            gpu_pools: GPU_POOLS.to_vec(),
            symbols: vec![("saxpy.kd", HSA_SYMBOL_KIND_KERNEL), ("table.kd", 0)],
            validate: 0,
            on_dispatch: OnDispatch::Complete,
            copy_leaves: 0,
        }
    }
}

struct Block {
    storage: Vec<u128>,
    len: usize,
}

impl Block {
    fn start(&self) -> usize {
        self.storage.as_ptr() as usize
    }
}

/// A queue: the `hsa_queue_t` and its ring, which the plugin reads and writes through raw pointers (so the fake
/// touches them only through the same raw pointers, never a reference that would claim them), and the packet
/// processor's own state.
struct FakeQueue {
    queue: *mut Queue,
    ring: *mut KernelDispatchPacket,
    size: u32,
    write: u64,
    read: u64,
    callback: Option<QueueCallback>,
    data: *mut c_void,
}

impl Drop for FakeQueue {
    fn drop(&mut self) {
        // SAFETY: both came from `Box::into_raw` in `hsa_queue_create`, the ring with `size` packets; the plugin's
        // device (which holds the pointers) is gone before its test's thread ends.
        unsafe {
            drop(Box::from_raw(self.queue));
            drop(Box::from_raw(std::ptr::slice_from_raw_parts_mut(
                self.ring,
                self.size as usize,
            )));
        }
    }
}

/// A dispatch the packet processor saw: the packet as published, and the kernel-argument block's bytes.
#[derive(Clone, Debug)]
pub struct Dispatched {
    pub packet: KernelDispatchPacket,
    pub kernargs: Vec<u8>,
}

struct State {
    config: Config,
    trace: Vec<String>,
    /// The next call of the named entry point returns this status.
    failures: Vec<(&'static str, Status)>,
    /// Signal values (`None`: destroyed) and, for doorbells, their queue.
    signals: Vec<(Option<SignalValue>, Option<usize>)>,
    blocks: Vec<Block>,
    freed: Vec<bool>,
    queues: Vec<FakeQueue>,
    dispatched: Vec<Dispatched>,
    readers: usize,
    executables: usize,
    /// Waits left until a hanging signal drops to 0 (a slow kernel).
    done_after_waits: Option<usize>,
}

thread_local! {
    static STATE: RefCell<Option<State>> = const { RefCell::new(None) };
}

fn with<R>(f: impl FnOnce(&mut State) -> R) -> R {
    STATE.with(|s| f(s.borrow_mut().as_mut().expect("fake::install first")))
}

/// Makes this thread's machine; returns the function table to hand to the plugin.
pub fn install(config: Config) -> &'static Hsa {
    STATE.with(|s| {
        *s.borrow_mut() = Some(State {
            config,
            trace: Vec::new(),
            failures: Vec::new(),
            signals: Vec::new(),
            blocks: Vec::new(),
            freed: Vec::new(),
            queues: Vec::new(),
            dispatched: Vec::new(),
            readers: 0,
            executables: 0,
            done_after_waits: None,
        })
    });
    table()
}

/// The next call of `call` fails with `status`.
pub fn fail_next(call: &'static str, status: Status) {
    with(|s| s.failures.push((call, status)));
}

/// The calls made since the last `take_trace`.
pub fn take_trace() -> Vec<String> {
    with(|s| std::mem::take(&mut s.trace))
}

pub fn dispatched() -> Vec<Dispatched> {
    with(|s| s.dispatched.clone())
}

/// The signal waited for drops to 0 during the `n`th wait from now.
pub fn done_after_waits(n: usize) {
    with(|s| s.done_after_waits = Some(n));
}

/// What the packet processor does with the next dispatches.
pub fn set_on_dispatch(on_dispatch: OnDispatch) {
    with(|s| s.config.on_dispatch = on_dispatch);
}

/// A GPU system event as the runtime hands it to the plugin's handler: a memory fault on `agent`.
pub fn memory_fault(agent: Agent, address: u64, reasons: u32) -> SystemEvent {
    SystemEvent {
        event_type: HSA_AMD_GPU_MEMORY_FAULT_EVENT,
        data: SystemEventData {
            memory_fault: MemoryFaultInfo {
                agent,
                virtual_address: address,
                fault_reason_mask: reasons,
            },
        },
    }
}

/// Records a call; returns the status it fails with (`SUCCESS` unless a failure was asked for).
fn enter(call: &'static str, args: std::fmt::Arguments) -> Status {
    with(|s| {
        let mut line = format!("{call}({args})");
        let status = match s.failures.iter().position(|(c, _)| *c == call) {
            Some(i) => s.failures.remove(i).1,
            None => HSA_STATUS_SUCCESS,
        };
        if status != HSA_STATUS_SUCCESS {
            let _ = write!(line, " -> {}", status_name(status).unwrap_or("?"));
        }
        s.trace.push(line);
        status
    })
}

/// Appends the result to the last traced call.
fn result(what: std::fmt::Arguments) {
    with(|s| {
        if let Some(last) = s.trace.last_mut() {
            let _ = write!(last, " -> {what}");
        }
    })
}

fn agent_name(s: &State, agent: Agent) -> String {
    match agent.handle {
        h if h == s.config.gpu => "gpu".into(),
        0x100 => "cpu".into(),
        0x300 => "dsp".into(),
        h => format!("agent {h:#x}"),
    }
}

/// `#n` for the start of block `n`, `#n+off` inside it, the address otherwise.
fn addr(s: &State, p: usize) -> String {
    match s
        .blocks
        .iter()
        .position(|b| (b.start()..b.start() + b.len.max(1)).contains(&p))
    {
        Some(i) if p == s.blocks[i].start() => format!("#{i}"),
        Some(i) => format!("#{i}+{}", p - s.blocks[i].start()),
        None => "host memory".into(),
    }
}

fn signal_name(s: &State, signal: Signal) -> String {
    match signal.handle.checked_sub(0x5000).map(|i| i as usize) {
        Some(i) if i < s.signals.len() => match s.signals[i].1 {
            Some(q) => format!("doorbell q{q}"),
            None => format!("s{i}"),
        },
        _ => format!("signal {:#x}", signal.handle),
    }
}

fn new_signal(s: &mut State, value: SignalValue, queue: Option<usize>) -> Signal {
    s.signals.push((Some(value), queue));
    Signal {
        handle: 0x5000 + s.signals.len() as u64 - 1,
    }
}

fn set_signal(s: &mut State, signal: Signal, value: SignalValue) {
    if let Some(v) = signal
        .handle
        .checked_sub(0x5000)
        .and_then(|i| s.signals.get_mut(i as usize))
    {
        v.0 = Some(value);
    }
}

fn queue_index(s: &State, queue: *const Queue) -> usize {
    s.queues
        .iter()
        .position(|q| std::ptr::eq(q.queue, queue))
        .expect("a queue of this machine")
}

/// Writes `value` where the plugin asked for an attribute.
///
/// # Safety
/// `out` is valid for a `T`.
unsafe fn put<T>(out: *mut c_void, value: T) {
    // SAFETY: per the contract.
    unsafe { out.cast::<T>().write_unaligned(value) }
}

fn name64(name: &str) -> [u8; 64] {
    let mut buf = [0u8; 64];
    buf[..name.len()].copy_from_slice(name.as_bytes());
    buf
}

macro_rules! fake {
    ($(unsafe extern "C" fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)? $body:block)*) => {
        $(
            #[allow(clippy::missing_safety_doc)]
            unsafe extern "C" fn $name($($arg: $ty),*) $(-> $ret)? $body
        )*
        /// The fake's function table.
        fn table() -> &'static Hsa {
            static TABLE: OnceLock<Hsa> = OnceLock::new();
            TABLE.get_or_init(|| Hsa { $($name,)* library: None })
        }
    };
}

fake! {
    unsafe extern "C" fn hsa_init() -> Status {
        enter("hsa_init", format_args!(""))
    }

    unsafe extern "C" fn hsa_status_string(status: Status, string: *mut *const c_char) -> Status {
        // Not traced: whether a message describes a status is the plugin's business, not a call it makes.
        let text: &'static CStr = match status {
            HSA_STATUS_ERROR_OUT_OF_RESOURCES => {
                c"HSA_STATUS_ERROR_OUT_OF_RESOURCES: The runtime failed to allocate the necessary resources."
            }
            HSA_STATUS_ERROR_INVALID_ARGUMENT => c"An argument is invalid.",
            _ => return HSA_STATUS_ERROR,
        };
        // SAFETY: the plugin passes a pointer to write the string's address to.
        unsafe { *string = text.as_ptr() };
        HSA_STATUS_SUCCESS
    }

    unsafe extern "C" fn hsa_system_get_info(attribute: u32, value: *mut c_void) -> Status {
        let status = enter("hsa_system_get_info", format_args!("{attribute}"));
        if status == HSA_STATUS_SUCCESS && attribute == HSA_SYSTEM_INFO_TIMESTAMP_FREQUENCY {
            // SAFETY: the attribute is a u64.
            unsafe { put::<u64>(value, 1_000_000) };
        }
        status
    }

    unsafe extern "C" fn hsa_iterate_agents(callback: AgentCallback, data: *mut c_void) -> Status {
        let status = enter("hsa_iterate_agents", format_args!(""));
        if status != HSA_STATUS_SUCCESS {
            return status;
        }
        let gpu = with(|s| Agent { handle: s.config.gpu });
        for agent in [CPU, gpu, DSP] {
            // SAFETY: the plugin's callback with its data.
            match unsafe { callback(agent, data) } {
                HSA_STATUS_SUCCESS => {}
                HSA_STATUS_INFO_BREAK => return HSA_STATUS_SUCCESS,
                s => return s,
            }
        }
        HSA_STATUS_SUCCESS
    }

    unsafe extern "C" fn hsa_agent_get_info(agent: Agent, attribute: u32, value: *mut c_void) -> Status {
        let (who, gpu, features) = with(|s| (agent_name(s, agent), agent.handle == s.config.gpu, s.config.gpu_features));
        let what = match attribute {
            HSA_AGENT_INFO_NAME => "NAME",
            HSA_AGENT_INFO_FEATURE => "FEATURE",
            HSA_AGENT_INFO_PROFILE => "PROFILE",
            HSA_AGENT_INFO_WORKGROUP_MAX_DIM => "WORKGROUP_MAX_DIM",
            HSA_AGENT_INFO_WORKGROUP_MAX_SIZE => "WORKGROUP_MAX_SIZE",
            HSA_AGENT_INFO_GRID_MAX_DIM => "GRID_MAX_DIM",
            HSA_AGENT_INFO_QUEUE_MIN_SIZE => "QUEUE_MIN_SIZE",
            HSA_AGENT_INFO_QUEUE_MAX_SIZE => "QUEUE_MAX_SIZE",
            HSA_AGENT_INFO_DEVICE => "DEVICE",
            HSA_AMD_AGENT_INFO_COMPUTE_UNIT_COUNT => "COMPUTE_UNIT_COUNT",
            HSA_AMD_AGENT_INFO_PRODUCT_NAME => "PRODUCT_NAME",
            _ => "?",
        };
        let status = enter("hsa_agent_get_info", format_args!("{who}, {what}"));
        if status != HSA_STATUS_SUCCESS {
            return status;
        }
        // SAFETY (each put): the type is the attribute's, as hsa.h declares it.
        unsafe {
            match attribute {
                HSA_AGENT_INFO_DEVICE => put::<u32>(
                    value,
                    match agent {
                        CPU => HSA_DEVICE_TYPE_CPU,
                        DSP => HSA_DEVICE_TYPE_DSP,
                        _ => HSA_DEVICE_TYPE_GPU,
                    },
                ),
                HSA_AGENT_INFO_FEATURE => put::<u32>(value, if gpu { features } else { 0 }),
                HSA_AGENT_INFO_NAME => put(value, name64("gfx90a:sramecc+:xnack-")),
                HSA_AMD_AGENT_INFO_PRODUCT_NAME => put(value, name64("AMD Instinct MI210")),
                HSA_AGENT_INFO_PROFILE => put::<u32>(value, HSA_PROFILE_BASE),
                HSA_AMD_AGENT_INFO_COMPUTE_UNIT_COUNT => put::<u32>(value, 104),
                HSA_AGENT_INFO_WORKGROUP_MAX_SIZE => put::<u32>(value, 1024),
                HSA_AGENT_INFO_WORKGROUP_MAX_DIM => put::<[u16; 3]>(value, [512, 1024, 1024]),
                HSA_AGENT_INFO_GRID_MAX_DIM => put(value, Dim3 { x: u32::MAX, y: u32::MAX, z: u32::MAX }),
                HSA_AGENT_INFO_QUEUE_MIN_SIZE => put::<u32>(value, 64),
                HSA_AGENT_INFO_QUEUE_MAX_SIZE => put::<u32>(value, 131_072),
                _ => return HSA_STATUS_ERROR_INVALID_ARGUMENT,
            }
        }
        HSA_STATUS_SUCCESS
    }

    unsafe extern "C" fn hsa_amd_register_system_event_handler(
        _callback: SystemEventCallback,
        _data: *mut c_void,
    ) -> Status {
        enter("hsa_amd_register_system_event_handler", format_args!(""))
    }

    unsafe extern "C" fn hsa_amd_agent_iterate_memory_pools(
        agent: Agent,
        callback: PoolCallback,
        data: *mut c_void,
    ) -> Status {
        let who = with(|s| agent_name(s, agent));
        let status = enter("hsa_amd_agent_iterate_memory_pools", format_args!("{who}"));
        if status != HSA_STATUS_SUCCESS {
            return status;
        }
        let pools = with(|s| match agent {
            CPU => s.config.host_pools.clone(),
            a if a.handle == s.config.gpu => s.config.gpu_pools.clone(),
            _ => Vec::new(),
        });
        for pool in pools {
            // SAFETY: the plugin's callback with its data.
            match unsafe { callback(MemoryPool { handle: pool.handle }, data) } {
                HSA_STATUS_SUCCESS => {}
                HSA_STATUS_INFO_BREAK => return HSA_STATUS_SUCCESS,
                s => return s,
            }
        }
        HSA_STATUS_SUCCESS
    }

    unsafe extern "C" fn hsa_amd_memory_pool_get_info(pool: MemoryPool, attribute: u32, value: *mut c_void) -> Status {
        let what = match attribute {
            HSA_AMD_MEMORY_POOL_INFO_SEGMENT => "SEGMENT",
            HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS => "GLOBAL_FLAGS",
            HSA_AMD_MEMORY_POOL_INFO_SIZE => "SIZE",
            HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALLOWED => "RUNTIME_ALLOC_ALLOWED",
            _ => "?",
        };
        let status = enter("hsa_amd_memory_pool_get_info", format_args!("{:#x}, {what}", pool.handle));
        if status != HSA_STATUS_SUCCESS {
            return status;
        }
        let Some(p) = with(|s| {
            s.config.host_pools.iter().chain(&s.config.gpu_pools).find(|p| p.handle == pool.handle).copied()
        }) else {
            return HSA_STATUS_ERROR_INVALID_MEMORY_POOL;
        };
        // SAFETY (each put): the type is the attribute's, as hsa_ext_amd.h declares it.
        unsafe {
            match attribute {
                HSA_AMD_MEMORY_POOL_INFO_SEGMENT => put::<u32>(value, p.segment),
                HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS => put::<u32>(value, p.flags),
                HSA_AMD_MEMORY_POOL_INFO_SIZE => put::<usize>(value, p.size),
                HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALLOWED => put::<bool>(value, p.alloc_allowed),
                _ => return HSA_STATUS_ERROR_INVALID_ARGUMENT,
            }
        }
        HSA_STATUS_SUCCESS
    }

    unsafe extern "C" fn hsa_amd_agent_memory_pool_get_info(
        agent: Agent,
        pool: MemoryPool,
        attribute: u32,
        value: *mut c_void,
    ) -> Status {
        let who = with(|s| agent_name(s, agent));
        let status = enter(
            "hsa_amd_agent_memory_pool_get_info",
            format_args!("{who}, {:#x}, {attribute}", pool.handle),
        );
        if status != HSA_STATUS_SUCCESS {
            return status;
        }
        let access = with(|s| {
            s.config.host_pools.iter().chain(&s.config.gpu_pools).find(|p| p.handle == pool.handle).map(|p| p.gpu_access)
        });
        // SAFETY: the attribute is a u32 enum.
        unsafe { put::<u32>(value, access.unwrap_or(HSA_AMD_MEMORY_POOL_ACCESS_NEVER_ALLOWED)) };
        HSA_STATUS_SUCCESS
    }

    unsafe extern "C" fn hsa_amd_memory_pool_allocate(
        pool: MemoryPool,
        size: usize,
        flags: u32,
        ptr: *mut *mut c_void,
    ) -> Status {
        let status = enter("hsa_amd_memory_pool_allocate", format_args!("{:#x}, {size} bytes, flags {flags}", pool.handle));
        if status != HSA_STATUS_SUCCESS {
            return status;
        }
        let p = with(|s| {
            // Not zeroed, as device memory is not, so a test sees whether the plugin fills it; but large blocks (the
            // staging buffer) are, which is much faster under Miri.
            let words = size.div_ceil(16).max(1);
            let storage = match size {
                0..=65536 => vec![u128::from_le_bytes([0xAA; 16]); words],
                _ => vec![0; words],
            };
            s.blocks.push(Block { storage, len: size });
            s.freed.push(false);
            s.blocks.last_mut().unwrap().storage.as_mut_ptr().cast::<c_void>()
        });
        result(format_args!("#{}", with(|s| s.blocks.len() - 1)));
        // SAFETY: the plugin passes a pointer to write the block's address to.
        unsafe { *ptr = p };
        HSA_STATUS_SUCCESS
    }

    unsafe extern "C" fn hsa_amd_memory_pool_free(ptr: *mut c_void) -> Status {
        let which = with(|s| addr(s, ptr as usize));
        let status = enter("hsa_amd_memory_pool_free", format_args!("{which}"));
        // A free of anything but a live block's start shows in the trace, so no test can miss it.
        let wrong = with(|s| match s.blocks.iter().position(|b| b.start() == ptr as usize) {
            Some(i) => std::mem::replace(&mut s.freed[i], true).then_some("double free"),
            None => Some("not a block"),
        });
        if let Some(wrong) = wrong {
            result(format_args!("{wrong}"));
        }
        status
    }

    unsafe extern "C" fn hsa_amd_agents_allow_access(
        num_agents: u32,
        agents: *const Agent,
        flags: *const u32,
        ptr: *const c_void,
    ) -> Status {
        let (who, which) = with(|s| {
            // SAFETY: the plugin passes `num_agents` agents.
            let agents = unsafe { std::slice::from_raw_parts(agents, num_agents as usize) };
            let who: Vec<String> = agents.iter().map(|a| agent_name(s, *a)).collect();
            (who.join(" "), addr(s, ptr as usize))
        });
        enter(
            "hsa_amd_agents_allow_access",
            format_args!("[{who}], flags {}, {which}", if flags.is_null() { "null" } else { "set" }),
        )
    }

    unsafe extern "C" fn hsa_amd_memory_fill(ptr: *mut c_void, value: u32, count: usize) -> Status {
        let which = with(|s| addr(s, ptr as usize));
        let status = enter("hsa_amd_memory_fill", format_args!("{which}, {value:#x}, {count} words"));
        if status == HSA_STATUS_SUCCESS {
            for i in 0..count {
                // SAFETY: the plugin fills within its block.
                unsafe { ptr.cast::<u32>().add(i).write_unaligned(value) };
            }
        }
        status
    }

    unsafe extern "C" fn hsa_amd_memory_async_copy(
        dst: *mut c_void,
        dst_agent: Agent,
        src: *const c_void,
        src_agent: Agent,
        size: usize,
        num_dep_signals: u32,
        _dep_signals: *const Signal,
        completion_signal: Signal,
    ) -> Status {
        let line = with(|s| {
            format!(
                "{}, {}, {}, {}, {size} bytes, {num_dep_signals} deps, {}",
                addr(s, dst as usize),
                agent_name(s, dst_agent),
                addr(s, src as usize),
                agent_name(s, src_agent),
                signal_name(s, completion_signal)
            )
        });
        let status = enter("hsa_amd_memory_async_copy", format_args!("{line}"));
        if status != HSA_STATUS_SUCCESS {
            return status;
        }
        // SAFETY: the plugin copies between two blocks of this machine.
        unsafe { std::ptr::copy_nonoverlapping(src.cast::<u8>(), dst.cast::<u8>(), size) };
        with(|s| {
            let leaves = s.config.copy_leaves;
            set_signal(s, completion_signal, leaves)
        });
        HSA_STATUS_SUCCESS
    }

    unsafe extern "C" fn hsa_signal_create(
        initial_value: SignalValue,
        num_consumers: u32,
        _consumers: *const Agent,
        signal: *mut Signal,
    ) -> Status {
        let status = enter("hsa_signal_create", format_args!("{initial_value}, {num_consumers} consumers"));
        if status != HSA_STATUS_SUCCESS {
            return status;
        }
        let made = with(|s| new_signal(s, initial_value, None));
        result(format_args!("s{}", made.handle - 0x5000));
        // SAFETY: the plugin passes a pointer to write the signal to.
        unsafe { *signal = made };
        HSA_STATUS_SUCCESS
    }

    unsafe extern "C" fn hsa_signal_destroy(signal: Signal) -> Status {
        let which = with(|s| signal_name(s, signal));
        let status = enter("hsa_signal_destroy", format_args!("{which}"));
        let live = with(|s| {
            s.signals
                .get_mut((signal.handle - 0x5000) as usize)
                .and_then(|v| v.0.take())
                .is_some()
        });
        if !live {
            result(format_args!("not a live signal"));
        }
        status
    }

    unsafe extern "C" fn hsa_signal_store_relaxed(signal: Signal, value: SignalValue) {
        let which = with(|s| signal_name(s, signal));
        enter("hsa_signal_store_relaxed", format_args!("{which}, {value}"));
        with(|s| set_signal(s, signal, value));
    }

    unsafe extern "C" fn hsa_signal_store_screlease(signal: Signal, value: SignalValue) {
        let (which, queue) = with(|s| {
            (signal_name(s, signal), s.signals.get((signal.handle - 0x5000) as usize).and_then(|v| v.1))
        });
        enter("hsa_signal_store_screlease", format_args!("{which}, {value}"));
        match queue {
            // SAFETY: the plugin rang this queue's doorbell for packet `value`.
            Some(q) => unsafe { process(q, value as u64) },
            None => with(|s| set_signal(s, signal, value)),
        }
    }

    unsafe extern "C" fn hsa_signal_wait_scacquire(
        signal: Signal,
        condition: u32,
        compare_value: SignalValue,
        timeout_hint: u64,
        wait_state_hint: u32,
    ) -> SignalValue {
        let (which, value) = with(|s| {
            if let Some(n) = &mut s.done_after_waits {
                *n -= 1;
                if *n == 0 {
                    s.done_after_waits = None;
                    set_signal(s, signal, 0);
                }
            }
            let value = s.signals.get((signal.handle - 0x5000) as usize).and_then(|v| v.0).unwrap_or(-99);
            (signal_name(s, signal), value)
        });
        let state = match wait_state_hint {
            HSA_WAIT_STATE_ACTIVE => "ACTIVE",
            HSA_WAIT_STATE_BLOCKED => "BLOCKED",
            _ => "?",
        };
        let condition = match condition {
            HSA_SIGNAL_CONDITION_LT => "LT",
            _ => "?",
        };
        enter(
            "hsa_signal_wait_scacquire",
            format_args!("{which}, {condition} {compare_value}, {timeout_hint} ticks, {state}"),
        );
        result(format_args!("{value}"));
        value
    }

    unsafe extern "C" fn hsa_queue_create(
        agent: Agent,
        size: u32,
        type_: u32,
        callback: Option<QueueCallback>,
        data: *mut c_void,
        private_segment_size: u32,
        group_segment_size: u32,
        queue: *mut *mut Queue,
    ) -> Status {
        let who = with(|s| agent_name(s, agent));
        let status = enter(
            "hsa_queue_create",
            format_args!(
                "{who}, {size} packets, type {type_}, callback {}, {private_segment_size:#x}, {group_segment_size:#x}",
                if callback.is_some() { "set" } else { "none" }
            ),
        );
        if status != HSA_STATUS_SUCCESS {
            return status;
        }
        let made = with(|s| {
            let index = s.queues.len();
            let doorbell = new_signal(s, 0, Some(index));
            let invalid = KernelDispatchPacket {
                header: HSA_PACKET_TYPE_INVALID,
                ..Default::default()
            };
            let ring = Box::into_raw(vec![invalid; size as usize].into_boxed_slice()).cast::<KernelDispatchPacket>();
            let queue = Box::into_raw(Box::new(Queue {
                type_,
                features: 1,
                base_address: ring.cast(),
                doorbell_signal: doorbell,
                size,
                reserved1: 0,
                id: index as u64,
            }));
            s.queues.push(FakeQueue { queue, ring, size, write: 0, read: 0, callback, data });
            queue
        });
        result(format_args!("q{}", with(|s| s.queues.len() - 1)));
        // SAFETY: the plugin passes a pointer to write the queue's address to.
        unsafe { *queue = made };
        HSA_STATUS_SUCCESS
    }

    unsafe extern "C" fn hsa_queue_destroy(queue: *mut Queue) -> Status {
        let q = with(|s| queue_index(s, queue));
        enter("hsa_queue_destroy", format_args!("q{q}"))
    }

    unsafe extern "C" fn hsa_queue_add_write_index_relaxed(queue: *const Queue, value: u64) -> u64 {
        let q = with(|s| queue_index(s, queue));
        enter("hsa_queue_add_write_index_relaxed", format_args!("q{q}, {value}"));
        let old = with(|s| {
            let fq = &mut s.queues[q];
            fq.write += value;
            fq.write - value
        });
        result(format_args!("{old}"));
        old
    }

    unsafe extern "C" fn hsa_queue_load_read_index_scacquire(queue: *const Queue) -> u64 {
        let q = with(|s| queue_index(s, queue));
        enter("hsa_queue_load_read_index_scacquire", format_args!("q{q}"));
        let read = with(|s| s.queues[q].read);
        result(format_args!("{read}"));
        read
    }

    unsafe extern "C" fn hsa_code_object_reader_create_from_memory(
        code_object: *const c_void,
        size: usize,
        reader: *mut CodeObjectReader,
    ) -> Status {
        let aligned = code_object.cast::<u128>().is_aligned();
        let status = enter(
            "hsa_code_object_reader_create_from_memory",
            format_args!("{size} bytes, {}", if aligned { "16-byte aligned" } else { "unaligned" }),
        );
        if status != HSA_STATUS_SUCCESS {
            return status;
        }
        let n = with(|s| {
            s.readers += 1;
            s.readers - 1
        });
        result(format_args!("r{n}"));
        // SAFETY: the plugin passes a pointer to write the reader to.
        unsafe { *reader = CodeObjectReader { handle: 0x6000 + n as u64 } };
        HSA_STATUS_SUCCESS
    }

    unsafe extern "C" fn hsa_code_object_reader_destroy(reader: CodeObjectReader) -> Status {
        enter("hsa_code_object_reader_destroy", format_args!("r{}", reader.handle - 0x6000))
    }

    unsafe extern "C" fn hsa_executable_create_alt(
        profile: u32,
        default_float_rounding_mode: u32,
        options: *const c_char,
        executable: *mut Executable,
    ) -> Status {
        let status = enter(
            "hsa_executable_create_alt",
            format_args!(
                "profile {profile}, rounding {default_float_rounding_mode}, options {}",
                if options.is_null() { "null" } else { "set" }
            ),
        );
        if status != HSA_STATUS_SUCCESS {
            return status;
        }
        let n = with(|s| {
            s.executables += 1;
            s.executables - 1
        });
        result(format_args!("e{n}"));
        // SAFETY: the plugin passes a pointer to write the executable to.
        unsafe { *executable = Executable { handle: 0x8000 + n as u64 } };
        HSA_STATUS_SUCCESS
    }

    unsafe extern "C" fn hsa_executable_load_agent_code_object(
        executable: Executable,
        agent: Agent,
        reader: CodeObjectReader,
        _options: *const c_char,
        loaded: *mut LoadedCodeObject,
    ) -> Status {
        let who = with(|s| agent_name(s, agent));
        let status = enter(
            "hsa_executable_load_agent_code_object",
            format_args!("e{}, {who}, r{}", executable.handle - 0x8000, reader.handle - 0x6000),
        );
        if status == HSA_STATUS_SUCCESS && !loaded.is_null() {
            // SAFETY: the plugin passes a pointer to write the loaded code object to.
            unsafe { *loaded = LoadedCodeObject { handle: 0x9000 } };
        }
        status
    }

    unsafe extern "C" fn hsa_executable_freeze(executable: Executable, _options: *const c_char) -> Status {
        enter("hsa_executable_freeze", format_args!("e{}", executable.handle - 0x8000))
    }

    unsafe extern "C" fn hsa_executable_validate(executable: Executable, result_: *mut u32) -> Status {
        let status = enter("hsa_executable_validate", format_args!("e{}", executable.handle - 0x8000));
        if status == HSA_STATUS_SUCCESS {
            // SAFETY: the plugin passes a pointer to a u32.
            unsafe { *result_ = with(|s| s.config.validate) };
        }
        status
    }

    unsafe extern "C" fn hsa_executable_destroy(executable: Executable) -> Status {
        enter("hsa_executable_destroy", format_args!("e{}", executable.handle - 0x8000))
    }

    unsafe extern "C" fn hsa_executable_get_symbol_by_name(
        executable: Executable,
        name: *const c_char,
        agent: *const Agent,
        symbol: *mut ExecutableSymbol,
    ) -> Status {
        // SAFETY: the plugin passes a NUL-terminated name and a pointer to an agent.
        let (name, agent) = unsafe { (CStr::from_ptr(name).to_string_lossy().into_owned(), *agent) };
        let who = with(|s| agent_name(s, agent));
        let status = enter(
            "hsa_executable_get_symbol_by_name",
            format_args!("e{}, {name:?}, {who}", executable.handle - 0x8000),
        );
        if status != HSA_STATUS_SUCCESS {
            return status;
        }
        match with(|s| s.config.symbols.iter().position(|(n, _)| *n == name)) {
            Some(i) => {
                // SAFETY: the plugin passes a pointer to write the symbol to.
                unsafe { *symbol = ExecutableSymbol { handle: 0xA000 + i as u64 } };
                HSA_STATUS_SUCCESS
            }
            None => {
                result(format_args!("HSA_STATUS_ERROR_INVALID_SYMBOL_NAME"));
                HSA_STATUS_ERROR_INVALID_SYMBOL_NAME
            }
        }
    }

    unsafe extern "C" fn hsa_executable_symbol_get_info(
        symbol: ExecutableSymbol,
        attribute: u32,
        value: *mut c_void,
    ) -> Status {
        let i = (symbol.handle - 0xA000) as usize;
        let what = match attribute {
            HSA_EXECUTABLE_SYMBOL_INFO_TYPE => "TYPE",
            HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_OBJECT => "KERNEL_OBJECT",
            HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_KERNARG_SEGMENT_SIZE => "KERNARG_SEGMENT_SIZE",
            HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_GROUP_SEGMENT_SIZE => "GROUP_SEGMENT_SIZE",
            HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_PRIVATE_SEGMENT_SIZE => "PRIVATE_SEGMENT_SIZE",
            HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_DYNAMIC_CALLSTACK => "DYNAMIC_CALLSTACK",
            _ => "?",
        };
        let status = enter("hsa_executable_symbol_get_info", format_args!("k{i}, {what}"));
        if status != HSA_STATUS_SUCCESS {
            return status;
        }
        let kind = with(|s| s.config.symbols[i].1);
        // SAFETY (each put): the type is the attribute's, as hsa.h declares it.
        unsafe {
            match attribute {
                HSA_EXECUTABLE_SYMBOL_INFO_TYPE => put::<u32>(value, kind),
                HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_OBJECT => put::<u64>(value, 0xC0DE_0000 + i as u64 * 0x100),
                HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_KERNARG_SEGMENT_SIZE => put::<u32>(value, 40),
                HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_GROUP_SEGMENT_SIZE => put::<u32>(value, 100),
                HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_PRIVATE_SEGMENT_SIZE => put::<u32>(value, 32),
                HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_DYNAMIC_CALLSTACK => put::<bool>(value, true),
                _ => return HSA_STATUS_ERROR_INVALID_ARGUMENT,
            }
        }
        HSA_STATUS_SUCCESS
    }
}

/// The packet processor: takes packet `index` of queue `q` (published, or it would not have been rung), records
/// it, and completes it or fails the queue.
///
/// # Safety
/// The packet's kernarg address is a block of this machine.
unsafe fn process(q: usize, index: u64) {
    let (packet, kernargs, on_dispatch) = with(|s| {
        let fq = &mut s.queues[q];
        let slot = fq
            .ring
            .wrapping_add((index & (u64::from(fq.size) - 1)) as usize);
        // SAFETY: the slot is in the ring; the plugin wrote it before ringing, and writes it no more.
        let packet = unsafe { slot.read() };
        // SAFETY: as above; the processor marks a packet it took as free again.
        unsafe { (*slot).header = HSA_PACKET_TYPE_INVALID };
        fq.read = index + 1;
        let block = s
            .blocks
            .iter()
            .find(|b| b.start() == packet.kernarg_address as usize)
            .map(|b| {
                // SAFETY: the block's storage holds `len` bytes.
                unsafe { std::slice::from_raw_parts(b.storage.as_ptr().cast::<u8>(), b.len) }
                    .to_vec()
            })
            .unwrap_or_default();
        (packet, block, s.config.on_dispatch)
    });
    with(|s| {
        s.dispatched.push(Dispatched { packet, kernargs });
    });
    match on_dispatch {
        OnDispatch::Complete => with(|s| set_signal(s, packet.completion_signal, 0)),
        OnDispatch::Hang => {}
        OnDispatch::QueueError(status) => {
            let (callback, data, queue) = with(|s| {
                let fq = &s.queues[q];
                (fq.callback, fq.data, fq.queue)
            });
            if let Some(callback) = callback {
                // SAFETY: the plugin's callback with its data, as the runtime calls it.
                unsafe { callback(status, queue, data) };
            }
        }
    }
}

#[cfg(test)]
/// The plugin against the fake runtime: the calls it makes (in order, with their arguments), what it hands out, and
/// how each failure is cleaned up and reported.
mod tests {
    use super::super::dispatch::header_word;
    use super::super::failure::on_system_event;
    use super::super::image::TRIPLE;
    use super::super::library::initialise;
    use super::super::*;
    use super::*;
    use crate::plugin::PluginError;
    use crate::plugin::{Arg, Device, Kernel, LaunchParams};
    use crate::registry::Image;
    use offload_model::fatbin::ImageFormat;

    /// The plugin's own words in an error (the runtime adds its context around them).
    fn reason(e: PluginError) -> String {
        match e {
            PluginError::Unavailable { reason }
            | PluginError::Open { reason, .. }
            | PluginError::Alloc { reason, .. }
            | PluginError::Transfer { reason, .. }
            | PluginError::Load { reason }
            | PluginError::Lookup { reason, .. }
            | PluginError::Launch { reason } => reason,
            PluginError::OutOfMemory { detail, .. } => detail,
            PluginError::Trap { message } | PluginError::Panic { message, .. } => message,
            e => e.to_string(),
        }
    }

    /// Fails with the whole trace, so a changed call is seen in context.
    #[track_caller]
    fn assert_trace(expected: &[&str]) {
        let actual = take_trace();
        if actual != expected {
            panic!(
                "the plugin's calls differ.\nexpected:\n    {}\nactual:\n    {}",
                expected.join("\n    "),
                actual
                    .iter()
                    .map(|l| format!("{l:?},"))
                    .collect::<Vec<_>>()
                    .join("\n    ")
            );
        }
    }

    fn device(config: Config) -> Box<dyn Device> {
        let hsa = install(config);
        let mut devices = devices_of(hsa).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(devices.devices.len(), 1);
        take_trace();
        devices.devices.remove(0)
    }

    fn open_error(config: Config) -> String {
        let hsa = install(config);
        match devices_of(hsa) {
            Ok(_) => panic!("the device opened"),
            Err(e) => reason(e),
        }
    }

    fn image(bytes: &'static [u8]) -> Image {
        Image {
            bytes,
            format: ImageFormat::Hsaco,
            triple: TRIPLE,
            arch: "gfx90a",
            package: "test",
            package_tag: 0,
        }
    }

    fn saxpy(dev: &dyn Device) -> Kernel {
        let loaded = dev.load_image(&image(code_object(true))).unwrap();
        let k = loaded.kernel(c"saxpy").ok().flatten().expect("saxpy");
        take_trace();
        k
    }

    fn params(num_teams: u32, num_threads: u32, team_shared: usize) -> LaunchParams {
        LaunchParams {
            num_teams,
            num_threads,
            team_shared,
        }
    }

    const OPEN: &[&str] = &[
        "hsa_iterate_agents()",
        "hsa_agent_get_info(cpu, DEVICE)",
        "hsa_amd_agent_iterate_memory_pools(cpu)",
        "hsa_amd_memory_pool_get_info(0x110, SEGMENT)",
        "hsa_amd_memory_pool_get_info(0x110, GLOBAL_FLAGS)",
        "hsa_amd_memory_pool_get_info(0x110, RUNTIME_ALLOC_ALLOWED)",
        "hsa_amd_memory_pool_get_info(0x110, SIZE)",
        "hsa_amd_memory_pool_get_info(0x111, SEGMENT)",
        "hsa_amd_memory_pool_get_info(0x111, GLOBAL_FLAGS)",
        "hsa_amd_memory_pool_get_info(0x111, RUNTIME_ALLOC_ALLOWED)",
        "hsa_amd_memory_pool_get_info(0x111, SIZE)",
        "hsa_amd_memory_pool_get_info(0x112, SEGMENT)",
        "hsa_amd_memory_pool_get_info(0x112, GLOBAL_FLAGS)",
        "hsa_amd_memory_pool_get_info(0x112, RUNTIME_ALLOC_ALLOWED)",
        "hsa_amd_memory_pool_get_info(0x112, SIZE)",
        "hsa_agent_get_info(gpu, DEVICE)",
        "hsa_agent_get_info(gpu, FEATURE)",
        "hsa_agent_get_info(dsp, DEVICE)",
        "hsa_system_get_info(3)",
        "hsa_agent_get_info(gpu, NAME)",
        "hsa_agent_get_info(gpu, PRODUCT_NAME)",
        "hsa_agent_get_info(gpu, PROFILE)",
        "hsa_agent_get_info(gpu, COMPUTE_UNIT_COUNT)",
        "hsa_agent_get_info(gpu, WORKGROUP_MAX_SIZE)",
        "hsa_agent_get_info(gpu, WORKGROUP_MAX_DIM)",
        "hsa_agent_get_info(gpu, GRID_MAX_DIM)",
        "hsa_agent_get_info(gpu, QUEUE_MIN_SIZE)",
        "hsa_agent_get_info(gpu, QUEUE_MAX_SIZE)",
        "hsa_amd_agent_iterate_memory_pools(gpu)",
        "hsa_amd_memory_pool_get_info(0x210, SEGMENT)",
        "hsa_amd_memory_pool_get_info(0x210, GLOBAL_FLAGS)",
        "hsa_amd_memory_pool_get_info(0x210, RUNTIME_ALLOC_ALLOWED)",
        "hsa_amd_memory_pool_get_info(0x210, SIZE)",
        "hsa_amd_memory_pool_get_info(0x211, SEGMENT)",
        "hsa_amd_memory_pool_get_info(0x211, GLOBAL_FLAGS)",
        "hsa_amd_memory_pool_get_info(0x211, RUNTIME_ALLOC_ALLOWED)",
        "hsa_amd_memory_pool_get_info(0x211, SIZE)",
        "hsa_amd_memory_pool_get_info(0x212, SEGMENT)",
        "hsa_amd_memory_pool_get_info(0x212, SIZE)",
        "hsa_amd_agent_memory_pool_get_info(gpu, 0x110, 0)",
        "hsa_amd_agent_memory_pool_get_info(gpu, 0x110, 0)",
        "hsa_queue_create(gpu, 1024 packets, type 0, callback set, 0xffffffff, 0xffffffff) -> q0",
        "hsa_signal_create(0, 0 consumers) -> s1",
    ];

    #[test]
    fn discovery_reads_the_gpu_and_picks_its_pools() {
        let hsa = install(Config::new(0x2001));
        let devices = devices_of(hsa).unwrap();
        assert_trace(OPEN);
        let d = &devices.devices[0];
        let desc = d.describe();
        assert_eq!(
            (desc.name.as_str(), desc.arch.as_str(), desc.memory),
            ("AMD Instinct MI210", "gfx90a", 64 << 30)
        );
        // The workgroup's x dimension (512) limits threads below its size (1024).
        assert_eq!(d.max_threads(), 512);
        assert_eq!(d.default_geometry(true), (104, 256));
        assert_eq!(d.default_geometry(false), (832, 256));
        assert_eq!(d.rank(&image(code_object(true))), Some(1));
    }

    #[test]
    fn allocations_come_from_the_coarse_grained_pool_zero_filled_in_words() {
        let d = device(Config::new(0x2002));
        let p = d.alloc(10).unwrap();
        assert_trace(&[
            "hsa_amd_memory_pool_allocate(0x210, 12 bytes, flags 0) -> #0",
            "hsa_amd_memory_fill(#0, 0x0, 3 words)",
        ]);
        // SAFETY: the fake's device memory is host memory, 12 bytes here.
        let bytes = unsafe { std::slice::from_raw_parts(p as *const u8, 12) };
        assert!(bytes.iter().all(|&b| b == 0));
        assert_eq!(p % 16, 0);
        d.alloc(0).unwrap();
        assert_trace(&[
            "hsa_amd_memory_pool_allocate(0x210, 4 bytes, flags 0) -> #1",
            "hsa_amd_memory_fill(#1, 0x0, 1 words)",
        ]);
        // SAFETY: allocated above, not used afterwards.
        unsafe { d.free(p) };
        assert_trace(&["hsa_amd_memory_pool_free(#0)"]);
        let e = reason(d.alloc(usize::MAX).unwrap_err());
        assert_eq!(
            e,
            format!("cannot allocate {} bytes on AMD GPU 0 (gfx90a)", usize::MAX)
        );
        assert_trace(&[]);
    }

    #[test]
    #[cfg_attr(miri, ignore = "8 MiB of data: too slow under Miri")]
    fn copies_go_through_a_staging_buffer_in_4_mib_chunks() {
        let d = device(Config::new(0x2003));
        let size = (4 << 20) + 24;
        let p = d.alloc(size).unwrap();
        take_trace();
        let data: Vec<u8> = (0..size).map(|i| (i * 7 % 251) as u8).collect();
        // SAFETY: `data` holds `size` bytes, and so does the allocation.
        unsafe { d.copy_to_device(p, data.as_ptr(), size) }.unwrap();
        assert_trace(&[
            "hsa_amd_memory_pool_allocate(0x110, 4194304 bytes, flags 0) -> #1",
            "hsa_amd_agents_allow_access([gpu], flags null, #1)",
            "hsa_signal_create(1, 0 consumers) -> s2",
            "hsa_signal_store_relaxed(s2, 1)",
            "hsa_amd_memory_async_copy(#0, gpu, #1, gpu, 4194304 bytes, 0 deps, s2)",
            "hsa_signal_wait_scacquire(s2, LT 1, 1000 ticks, ACTIVE) -> 0",
            "hsa_signal_store_relaxed(s2, 1)",
            "hsa_amd_memory_async_copy(#0+4194304, gpu, #1, gpu, 24 bytes, 0 deps, s2)",
            "hsa_signal_wait_scacquire(s2, LT 1, 1000 ticks, ACTIVE) -> 0",
        ]);
        let mut back = vec![0u8; size];
        // SAFETY: as above.
        unsafe { d.copy_from_device(back.as_mut_ptr(), p + 8, size - 8) }.unwrap();
        assert_trace(&[
            "hsa_signal_store_relaxed(s2, 1)",
            "hsa_amd_memory_async_copy(#1, gpu, #0+8, gpu, 4194304 bytes, 0 deps, s2)",
            "hsa_signal_wait_scacquire(s2, LT 1, 1000 ticks, ACTIVE) -> 0",
            "hsa_signal_store_relaxed(s2, 1)",
            "hsa_amd_memory_async_copy(#1, gpu, #0+4194312, gpu, 16 bytes, 0 deps, s2)",
            "hsa_signal_wait_scacquire(s2, LT 1, 1000 ticks, ACTIVE) -> 0",
        ]);
        assert_eq!(back[..size - 8], data[8..]);
        // A copy of nothing makes no call (and no staging buffer on a fresh device).
        // SAFETY: zero bytes.
        unsafe { d.copy_to_device(p, data.as_ptr(), 0) }.unwrap();
        assert_trace(&[]);
    }

    /// The small version of the test above, which Miri runs too.
    #[test]
    fn a_small_copy_round_trips_through_one_chunk() {
        let d = device(Config::new(0x201A));
        let p = d.alloc(24).unwrap();
        let data: [u8; 24] = std::array::from_fn(|i| i as u8 + 1);
        let mut back = [0u8; 20];
        // SAFETY: 24 bytes each way, within the allocation.
        unsafe {
            d.copy_to_device(p, data.as_ptr(), 24).unwrap();
            d.copy_from_device(back.as_mut_ptr(), p + 4, 20).unwrap();
        }
        assert_eq!(back, data[4..]);
    }

    #[test]
    fn a_failed_copy_says_what_its_signal_reads() {
        let mut config = Config::new(0x2004);
        config.copy_leaves = -1;
        let d = device(config);
        let p = d.alloc(64).unwrap();
        let mut back = [0u8; 64];
        // SAFETY: 64 bytes each.
        let e = reason(unsafe { d.copy_from_device(back.as_mut_ptr(), p, 64) }.unwrap_err());
        assert_eq!(
            e,
            "the copy of 64 bytes failed (hsa_amd_memory_async_copy's signal reads -1) on AMD GPU 0 (gfx90a)"
        );
    }

    #[test]
    fn images_load_from_an_aligned_copy_and_kernels_are_their_descriptor_symbols() {
        let d = device(Config::new(0x2005));
        let loaded = d.load_image(&image(code_object(false))).unwrap();
        assert_trace(&[
            "hsa_code_object_reader_create_from_memory(64 bytes, 16-byte aligned) -> r0",
            "hsa_executable_create_alt(profile 0, rounding 0, options null) -> e0",
            "hsa_executable_load_agent_code_object(e0, gpu, r0)",
            "hsa_executable_freeze(e0)",
            "hsa_executable_validate(e0)",
            "hsa_code_object_reader_destroy(r0)",
        ]);
        assert_eq!(loaded.kernel(c"saxpy").ok().flatten().map(|k| k.0), Some(0));
        assert_trace(&[
            "hsa_executable_get_symbol_by_name(e0, \"saxpy.kd\", gpu)",
            "hsa_executable_symbol_get_info(k0, TYPE)",
            "hsa_executable_symbol_get_info(k0, KERNEL_OBJECT)",
            "hsa_executable_symbol_get_info(k0, KERNARG_SEGMENT_SIZE)",
            "hsa_executable_symbol_get_info(k0, GROUP_SEGMENT_SIZE)",
            "hsa_executable_symbol_get_info(k0, PRIVATE_SEGMENT_SIZE)",
            "hsa_executable_symbol_get_info(k0, DYNAMIC_CALLSTACK)",
        ]);
        // The same kernel again is the same handle.
        assert_eq!(loaded.kernel(c"saxpy").ok().flatten().map(|k| k.0), Some(0));
        take_trace();
        assert!(matches!(loaded.kernel(c"missing"), Ok(None)));
        assert_trace(&[
            "hsa_executable_get_symbol_by_name(e0, \"missing.kd\", gpu) -> HSA_STATUS_ERROR_INVALID_SYMBOL_NAME",
        ]);
        // A symbol that is not a kernel.
        assert!(matches!(
            loaded.kernel(c"table"),
            Err(PluginError::Lookup { .. })
        ));
        assert_trace(&[
            "hsa_executable_get_symbol_by_name(e0, \"table.kd\", gpu)",
            "hsa_executable_symbol_get_info(k1, TYPE)",
        ]);
        // A lookup the runtime fails.
        fail_next(
            "hsa_executable_symbol_get_info",
            HSA_STATUS_ERROR_INVALID_ARGUMENT,
        );
        assert!(matches!(
            loaded.kernel(c"saxpy"),
            Err(PluginError::Lookup { .. })
        ));
        assert_trace(&[
            "hsa_executable_get_symbol_by_name(e0, \"saxpy.kd\", gpu)",
            "hsa_executable_symbol_get_info(k0, TYPE) -> HSA_STATUS_ERROR_INVALID_ARGUMENT",
        ]);
        // An aligned image is read in place, and a dropped image keeps its executable (its kernels stay valid).
        drop(loaded);
        d.load_image(&image(code_object(true))).unwrap();
        assert_eq!(
            take_trace()[0],
            "hsa_code_object_reader_create_from_memory(64 bytes, 16-byte aligned) -> r1"
        );
    }

    #[test]
    fn images_that_are_not_amdgpu_code_objects_are_refused_before_the_runtime_sees_them() {
        let d = device(Config::new(0x2006));
        let mut i = image(code_object(true));
        i.format = ImageFormat::Ptx;
        assert_eq!(
            reason(d.load_image(&i).err().unwrap()),
            "a PTX image is not an HSA code object"
        );
        let e = reason(d.load_image(&image(b"\x7fELF")).err().unwrap());
        assert!(e.starts_with("the HSA code object is truncated"), "{e}");
        assert_trace(&[]);
    }

    #[test]
    fn failed_loads_release_the_reader_and_the_executable() {
        let d = device(Config::new(0x2007));
        fail_next("hsa_executable_freeze", HSA_STATUS_ERROR_FROZEN_EXECUTABLE);
        let e = reason(d.load_image(&image(code_object(true))).err().unwrap());
        assert_eq!(
            e,
            "hsa_executable_freeze failed: HSA_STATUS_ERROR_FROZEN_EXECUTABLE on AMD GPU 0 (gfx90a)"
        );
        assert_trace(&[
            "hsa_code_object_reader_create_from_memory(64 bytes, 16-byte aligned) -> r0",
            "hsa_executable_create_alt(profile 0, rounding 0, options null) -> e0",
            "hsa_executable_load_agent_code_object(e0, gpu, r0)",
            "hsa_executable_freeze(e0) -> HSA_STATUS_ERROR_FROZEN_EXECUTABLE",
            "hsa_executable_destroy(e0)",
            "hsa_code_object_reader_destroy(r0)",
        ]);
        fail_next(
            "hsa_executable_create_alt",
            HSA_STATUS_ERROR_OUT_OF_RESOURCES,
        );
        let e = reason(d.load_image(&image(code_object(true))).err().unwrap());
        assert_eq!(
            e,
            "hsa_executable_create_alt failed: HSA_STATUS_ERROR_OUT_OF_RESOURCES: The runtime failed to allocate \
             the necessary resources. on AMD GPU 0 (gfx90a)"
        );
        assert_trace(&[
            "hsa_code_object_reader_create_from_memory(64 bytes, 16-byte aligned) -> r1",
            "hsa_executable_create_alt(profile 0, rounding 0, options null) -> HSA_STATUS_ERROR_OUT_OF_RESOURCES",
            "hsa_code_object_reader_destroy(r1)",
        ]);
        fail_next(
            "hsa_code_object_reader_create_from_memory",
            HSA_STATUS_ERROR_INVALID_CODE_OBJECT,
        );
        let e = reason(d.load_image(&image(code_object(true))).err().unwrap());
        assert_eq!(
            e,
            "hsa_code_object_reader_create_from_memory failed: HSA_STATUS_ERROR_INVALID_CODE_OBJECT on AMD GPU 0 \
             (gfx90a)"
        );
        assert_trace(&[
            "hsa_code_object_reader_create_from_memory(64 bytes, 16-byte aligned) -> HSA_STATUS_ERROR_INVALID_CODE_OBJECT",
        ]);
    }

    #[test]
    fn an_executable_that_does_not_validate_is_destroyed() {
        let mut config = Config::new(0x2008);
        config.validate = 0x20;
        let d = device(config);
        let e = reason(d.load_image(&image(code_object(true))).err().unwrap());
        assert_eq!(
            e,
            "the loaded executable does not validate (hsa_executable_validate reports 0x20) on AMD GPU 0 (gfx90a)"
        );
        assert_trace(&[
            "hsa_code_object_reader_create_from_memory(64 bytes, 16-byte aligned) -> r0",
            "hsa_executable_create_alt(profile 0, rounding 0, options null) -> e0",
            "hsa_executable_load_agent_code_object(e0, gpu, r0)",
            "hsa_executable_freeze(e0)",
            "hsa_executable_validate(e0)",
            // Owners release in reverse order of creation.
            "hsa_executable_destroy(e0)",
            "hsa_code_object_reader_destroy(r0)",
        ]);
    }

    #[test]
    fn a_launch_publishes_one_packet_with_its_kernarg_block_and_waits_for_it() {
        let d = device(Config::new(0x2009));
        let k = saxpy(&*d);
        let args = [Arg::new(0x1111), Arg::new(0x2222), Arg::new(0x3333)];
        // SAFETY: the fake runs no code.
        unsafe { d.launch(k, &args, params(4, 64, 256)) }.unwrap();
        assert_trace(&[
            "hsa_amd_memory_pool_allocate(0x110, 256 bytes, flags 0) -> #0",
            "hsa_amd_agents_allow_access([gpu], flags null, #0)",
            "hsa_signal_store_relaxed(s1, 1)",
            "hsa_queue_add_write_index_relaxed(q0, 1) -> 0",
            "hsa_queue_load_read_index_scacquire(q0) -> 0",
            "hsa_signal_store_screlease(doorbell q0, 0)",
            "hsa_signal_wait_scacquire(s1, LT 1, 1000 ticks, ACTIVE) -> 0",
        ]);
        let sent = dispatched();
        let p = sent[0].packet;
        assert_eq!(header_word(&p), 0x0001_1502);
        assert_eq!(
            (p.workgroup_size_x, p.workgroup_size_y, p.workgroup_size_z),
            (64, 1, 1)
        );
        assert_eq!((p.grid_size_x, p.grid_size_y, p.grid_size_z), (256, 1, 1));
        // Static LDS (100) rounded up to 16, then the team-shared memory; a dynamic stack gets 16 KiB.
        assert_eq!(p.group_segment_size, 112 + 256);
        assert_eq!(p.private_segment_size, 16 * 1024);
        assert_eq!(p.kernel_object, 0xC0DE_0000);
        assert_eq!(p.completion_signal, Signal { handle: 0x5001 });
        assert_eq!((p.reserved0, p.reserved2), (0, 0));
        let mut expected = vec![0u8; 8];
        for a in [0x1111u64, 0x2222, 0x3333] {
            expected.extend(a.to_le_bytes());
        }
        // The kernel's kernarg segment is 40 bytes: the block covers it, zero beyond the arguments.
        expected.extend([0u8; 8]);
        assert_eq!(&sent[0].kernargs[..40], &expected[..]);
        assert_eq!(sent[0].kernargs.len(), 256);

        // The block is reused while it is large enough, and replaced (the old one freed) when it is not.
        // SAFETY: as above.
        unsafe { d.launch(k, &args[..1], params(1, 1, 0)) }.unwrap();
        assert_trace(&[
            "hsa_signal_store_relaxed(s1, 1)",
            "hsa_queue_add_write_index_relaxed(q0, 1) -> 1",
            "hsa_queue_load_read_index_scacquire(q0) -> 1",
            "hsa_signal_store_screlease(doorbell q0, 1)",
            "hsa_signal_wait_scacquire(s1, LT 1, 1000 ticks, ACTIVE) -> 0",
        ]);
        let many = vec![Arg::new(5); 40];
        // SAFETY: as above.
        unsafe { d.launch(k, &many, params(1, 1, 0)) }.unwrap();
        assert_trace(&[
            "hsa_amd_memory_pool_allocate(0x110, 512 bytes, flags 0) -> #1",
            "hsa_amd_agents_allow_access([gpu], flags null, #1)",
            "hsa_amd_memory_pool_free(#0)",
            "hsa_signal_store_relaxed(s1, 1)",
            "hsa_queue_add_write_index_relaxed(q0, 1) -> 2",
            "hsa_queue_load_read_index_scacquire(q0) -> 2",
            "hsa_signal_store_screlease(doorbell q0, 2)",
            "hsa_signal_wait_scacquire(s1, LT 1, 1000 ticks, ACTIVE) -> 0",
        ]);
        let sent = dispatched();
        assert_eq!(sent[2].kernargs.len(), 512);
        assert_eq!(&sent[2].kernargs[8..16], &5u64.to_le_bytes());
        assert_eq!(&sent[2].kernargs[320..328], &5u64.to_le_bytes());
    }

    #[test]
    fn without_a_reachable_host_kernarg_pool_the_gpus_own_is_used_without_granting_access() {
        let mut config = Config::new(0x200A);
        config.host_pools[0].gpu_access = HSA_AMD_MEMORY_POOL_ACCESS_NEVER_ALLOWED;
        let d = device(config);
        let k = saxpy(&*d);
        // SAFETY: the fake runs no code.
        unsafe { d.launch(k, &[], params(1, 1, 0)) }.unwrap();
        assert_eq!(
            take_trace()[..2],
            [
                "hsa_amd_memory_pool_allocate(0x211, 256 bytes, flags 0) -> #0",
                "hsa_signal_store_relaxed(s1, 1)",
            ]
        );
    }

    #[test]
    fn launches_the_gpu_cannot_take_are_refused_before_anything_is_dispatched() {
        let mut config = Config::new(0x200B);
        config.gpu_pools[2].size = 32 * 1024;
        let d = device(config);
        let k = saxpy(&*d);
        // SAFETY: the fake runs no code.
        let e = unsafe { d.launch(k, &[], params(2, 64, 32 * 1024)) }.unwrap_err();
        assert!(!e.device_lost());
        assert_eq!(
            reason(e.clone()),
            "the launch asks for 32768 bytes of team-shared memory and the kernel has 100 bytes of static LDS; the \
             GPU allows at most 32768 bytes per team (a launch of 2 teams of 64 threads with 32768 bytes of \
             team-shared memory) on AMD GPU 0 (gfx90a)"
        );
        // SAFETY: as above.
        let e = unsafe { d.launch(k, &[], params(1, 1024, 0)) }.unwrap_err();
        assert!(
            reason(e.clone())
                .starts_with("too many threads per team: 1024, and the GPU allows 512"),
            "{}",
            reason(e.clone())
        );
        // SAFETY: as above.
        let e = unsafe { d.launch(Kernel(9), &[], params(1, 1, 0)) }.unwrap_err();
        assert_eq!(
            reason(e.clone()),
            "no kernel with handle 9 on AMD GPU 0 (gfx90a)"
        );
        assert!(!e.device_lost());
        assert_trace(&[]);
    }

    #[test]
    fn a_trap_reported_by_the_queue_fails_the_launch_and_every_later_one() {
        let mut config = Config::new(0x200C);
        config.on_dispatch = OnDispatch::QueueError(HSA_STATUS_ERROR_EXCEPTION);
        let d = device(config);
        let k = saxpy(&*d);
        // SAFETY: the fake runs no code.
        let e = unsafe { d.launch(k, &[], params(1, 1, 0)) }.unwrap_err();
        assert!(e.device_lost());
        assert_eq!(
            reason(e.clone()),
            "the kernel trapped (HSA_STATUS_ERROR_EXCEPTION): a panic in region code, such as an index out of \
             bounds; the GPU does not report its message; the HSA queue is unusable, so the device is marked lost"
        );
        assert_trace(&[
            "hsa_amd_memory_pool_allocate(0x110, 256 bytes, flags 0) -> #0",
            "hsa_amd_agents_allow_access([gpu], flags null, #0)",
            "hsa_signal_store_relaxed(s1, 1)",
            "hsa_queue_add_write_index_relaxed(q0, 1) -> 0",
            "hsa_queue_load_read_index_scacquire(q0) -> 0",
            "hsa_signal_store_screlease(doorbell q0, 0)",
            "hsa_signal_wait_scacquire(s1, LT 1, 1000 ticks, ACTIVE) -> 1",
        ]);
        // SAFETY: as above.
        let again = unsafe { d.launch(k, &[], params(1, 1, 0)) }.unwrap_err();
        assert_eq!(reason(again.clone()), reason(e.clone()));
        assert_trace(&[]);
    }

    #[test]
    fn a_memory_fault_event_fails_the_waiting_launch_instead_of_aborting() {
        let gpu = Agent { handle: 0x200D };
        let d = device(Config::new(gpu.handle));
        let k = saxpy(&*d);
        let event = memory_fault(gpu, 0x7f00_1000, HSA_AMD_MEMORY_FAULT_PAGE_NOT_PRESENT);
        // SAFETY: a valid event for the call's duration.
        assert_eq!(
            unsafe { on_system_event(&event, std::ptr::null_mut()) },
            HSA_STATUS_SUCCESS
        );
        // An unknown agent's event is left to the runtime.
        let other = memory_fault(Agent { handle: 0x1 }, 0, 0);
        // SAFETY: as above.
        assert_eq!(
            unsafe { on_system_event(&other, std::ptr::null_mut()) },
            HSA_STATUS_ERROR
        );
        set_on_dispatch(OnDispatch::Hang);
        // SAFETY: the fake runs no code.
        let e = unsafe { d.launch(k, &[], params(1, 1, 0)) }.unwrap_err();
        assert!(e.device_lost());
        assert_eq!(
            reason(e.clone()),
            "the kernel accessed an invalid device address (GPU memory fault at 0x7f001000: page not present); the \
             device is marked lost"
        );
    }

    #[test]
    fn a_failed_fill_or_grant_frees_the_block() {
        let d = device(Config::new(0x200E));
        fail_next("hsa_amd_memory_fill", HSA_STATUS_ERROR_INVALID_ARGUMENT);
        let e = reason(d.alloc(8).unwrap_err());
        assert_eq!(
            e,
            "hsa_amd_memory_fill failed: HSA_STATUS_ERROR_INVALID_ARGUMENT (An argument is invalid.) on AMD GPU 0 \
             (gfx90a)"
        );
        assert_trace(&[
            "hsa_amd_memory_pool_allocate(0x210, 8 bytes, flags 0) -> #0",
            "hsa_amd_memory_fill(#0, 0x0, 2 words) -> HSA_STATUS_ERROR_INVALID_ARGUMENT",
            "hsa_amd_memory_pool_free(#0)",
        ]);
        fail_next(
            "hsa_amd_memory_pool_allocate",
            HSA_STATUS_ERROR_OUT_OF_RESOURCES,
        );
        let e = reason(d.alloc(8).unwrap_err());
        assert_eq!(
            e,
            "hsa_amd_memory_pool_allocate(8 bytes) failed: HSA_STATUS_ERROR_OUT_OF_RESOURCES: The runtime failed \
             to allocate the necessary resources. (65536 MiB of device memory in all) on AMD GPU 0 (gfx90a)"
        );
        take_trace();
        let p = d.alloc(8).unwrap();
        take_trace();
        fail_next("hsa_amd_agents_allow_access", HSA_STATUS_ERROR);
        let mut back = [0u8; 8];
        // SAFETY: 8 bytes each.
        let e = reason(unsafe { d.copy_from_device(back.as_mut_ptr(), p, 8) }.unwrap_err());
        assert_eq!(
            e,
            "hsa_amd_agents_allow_access failed: HSA_STATUS_ERROR on AMD GPU 0 (gfx90a)"
        );
        assert_trace(&[
            "hsa_amd_memory_pool_allocate(0x110, 4194304 bytes, flags 0) -> #2",
            "hsa_amd_agents_allow_access([gpu], flags null, #2) -> HSA_STATUS_ERROR",
            "hsa_amd_memory_pool_free(#2)",
        ]);
        fail_next("hsa_signal_create", HSA_STATUS_ERROR_OUT_OF_RESOURCES);
        // SAFETY: as above.
        let e = reason(unsafe { d.copy_from_device(back.as_mut_ptr(), p, 8) }.unwrap_err());
        assert!(e.starts_with("hsa_signal_create failed: "), "{e}");
        assert_trace(&[
            "hsa_amd_memory_pool_allocate(0x110, 4194304 bytes, flags 0) -> #3",
            "hsa_amd_agents_allow_access([gpu], flags null, #3)",
            "hsa_signal_create(1, 0 consumers) -> HSA_STATUS_ERROR_OUT_OF_RESOURCES",
            "hsa_amd_memory_pool_free(#3)",
        ]);
        // The next copy makes the staging buffer afresh and works.
        // SAFETY: as above.
        unsafe { d.copy_from_device(back.as_mut_ptr(), p, 8) }.unwrap();
        assert_eq!(back, [0; 8]);
    }

    #[test]
    fn a_device_that_cannot_be_opened_is_skipped_with_the_reason() {
        let mut config = Config::new(0x200F);
        config.gpu_pools.remove(0);
        assert_eq!(
            open_error(config),
            "AMD GPU 0: the GPU has no coarse-grained memory pool to allocate device memory from"
        );
        let mut config = Config::new(0x2010);
        config.host_pools[1].gpu_access = HSA_AMD_MEMORY_POOL_ACCESS_NEVER_ALLOWED;
        config.host_pools[0].flags = HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_KERNARG_INIT;
        assert_eq!(
            open_error(config),
            "AMD GPU 0: no fine-grained host memory pool the GPU can reach, to copy through"
        );
        let mut config = Config::new(0x2011);
        config.host_pools[0].alloc_allowed = false;
        config.gpu_pools.remove(1);
        assert_eq!(
            open_error(config),
            "AMD GPU 0: no memory pool for kernel arguments (HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_KERNARG_INIT)"
        );
        let mut config = Config::new(0x2012);
        config.gpu_features = 0;
        assert_eq!(
            open_error(config),
            "the HSA runtime found no AMD GPU (no GPU agent that can dispatch kernels)"
        );
    }

    #[test]
    fn a_queue_is_released_when_its_signal_cannot_be_made() {
        install(Config::new(0x2013));
        fail_next("hsa_signal_create", HSA_STATUS_ERROR_OUT_OF_RESOURCES);
        let e = reason(devices_of(table()).err().unwrap());
        assert_eq!(
            e,
            "AMD GPU 0: hsa_signal_create failed: HSA_STATUS_ERROR_OUT_OF_RESOURCES: The runtime failed to allocate \
             the necessary resources."
        );
        let trace = take_trace();
        assert_eq!(
            trace[trace.len() - 3..],
            [
                "hsa_queue_create(gpu, 1024 packets, type 0, callback set, 0xffffffff, 0xffffffff) -> q0",
                "hsa_signal_create(0, 0 consumers) -> HSA_STATUS_ERROR_OUT_OF_RESOURCES",
                "hsa_queue_destroy(q0)",
            ]
        );
        install(Config::new(0x2014));
        fail_next("hsa_queue_create", HSA_STATUS_ERROR_INVALID_ARGUMENT);
        assert_eq!(
            reason(devices_of(table()).err().unwrap()),
            "AMD GPU 0: hsa_queue_create(1024 packets) failed: HSA_STATUS_ERROR_INVALID_ARGUMENT (An argument is \
             invalid.)"
        );
        install(Config::new(0x2015));
        fail_next("hsa_agent_get_info", HSA_STATUS_ERROR_INVALID_AGENT);
        assert_eq!(
            reason(devices_of(table()).err().unwrap()),
            "hsa_agent_get_info(DEVICE) failed: HSA_STATUS_ERROR_INVALID_AGENT"
        );
    }

    #[test]
    fn initialisation_survives_a_missing_event_handler() {
        let hsa = install(Config::new(0x2016));
        fail_next(
            "hsa_amd_register_system_event_handler",
            HSA_STATUS_ERROR_INVALID_ARGUMENT,
        );
        let note = initialise(hsa)
            .unwrap()
            .expect("a note that events are not handled");
        assert_eq!(
            note.to_string(),
            "hsa_amd_register_system_event_handler failed: HSA_STATUS_ERROR_INVALID_ARGUMENT (An argument is \
             invalid.)"
        );
        assert_trace(&[
            "hsa_init()",
            "hsa_amd_register_system_event_handler() -> HSA_STATUS_ERROR_INVALID_ARGUMENT",
        ]);
    }

    #[test]
    #[cfg_attr(miri, ignore = "looks for /dev/kfd")]
    fn a_failed_init_is_described_without_the_runtime() {
        let hsa = install(Config::new(0x2019));
        fail_next("hsa_init", HSA_STATUS_ERROR_OUT_OF_RESOURCES);
        let e = initialise(hsa).unwrap_err().to_string();
        // The runtime cannot describe its own error before it is initialised: the status's name only.
        assert!(
            e.starts_with("hsa_init failed: HSA_STATUS_ERROR_OUT_OF_RESOURCES"),
            "{e}"
        );
        if !std::path::Path::new("/dev/kfd").exists() {
            assert!(
                e.ends_with(
                    ": /dev/kfd does not exist (no amdgpu kernel driver loaded, or no AMD GPU)"
                ),
                "{e}"
            );
        }
        assert_trace(&["hsa_init() -> HSA_STATUS_ERROR_OUT_OF_RESOURCES"]);
    }

    #[test]
    fn a_long_wait_spins_a_millisecond_then_blocks_in_one_second_slices() {
        let d = device(Config::new(0x2017));
        let k = saxpy(&*d);
        set_on_dispatch(OnDispatch::Hang);
        done_after_waits(3);
        // SAFETY: the fake runs no code.
        unsafe { d.launch(k, &[], params(1, 1, 0)) }.unwrap();
        let trace = take_trace();
        assert_eq!(
            trace[trace.len() - 3..],
            [
                "hsa_signal_wait_scacquire(s1, LT 1, 1000 ticks, ACTIVE) -> 1",
                "hsa_signal_wait_scacquire(s1, LT 1, 1000000 ticks, BLOCKED) -> 1",
                "hsa_signal_wait_scacquire(s1, LT 1, 1000000 ticks, BLOCKED) -> 0",
            ]
        );
    }

    /// New with the safe layer (the device used to leak them): what a device made is released when it is dropped,
    /// as `cargo offload devices` drops the devices it lists; what it handed out (device memory, executables whose
    /// kernels the runtime holds) is not.
    #[test]
    fn a_dropped_device_releases_its_queue_signals_and_buffers() {
        let d = device(Config::new(0x2018));
        let k = saxpy(&*d);
        let p = d.alloc(8).unwrap();
        let mut back = [0u8; 8];
        // SAFETY: 8 bytes each; the fake runs no code.
        unsafe {
            d.copy_from_device(back.as_mut_ptr(), p, 8).unwrap();
            d.launch(k, &[], params(1, 1, 0)).unwrap();
        }
        take_trace();
        drop(d);
        assert_trace(&[
            "hsa_signal_destroy(s1)",
            "hsa_amd_memory_pool_free(#2)",
            "hsa_amd_memory_pool_free(#1)",
            "hsa_signal_destroy(s2)",
            "hsa_queue_destroy(q0)",
        ]);
    }
}
