//! A fake HSA runtime for the plugin's tests: every entry point of the function table is a plain Rust function
//! that records its call (a trace the tests compare line by line) and acts like a one-GPU machine whose "device
//! memory" is host memory and whose packet processor runs when the doorbell rings. So discovery, pool choice,
//! allocation, copies, image loading, kernel lookup and dispatch run here without a GPU, and each failure path can
//! be taken by making one call fail.
//!
//! State is per thread (each test has its own machine); the plugin calls the runtime only from the calling thread.
//! It names the raw interface (`sys`) only; the tests that run the plugin on it are in `super::tests`.

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
    /// Symbols of the loaded executable: name (`<kernel>.kd`, or a variable's) and `HSA_EXECUTABLE_SYMBOL_INFO_TYPE`.
    pub symbols: Vec<(&'static str, u32)>,
    /// `HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_SIZE` of every variable.
    pub variable_size: u32,
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
            variable_size: 8,
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
    /// The "device memory" of each variable symbol the plugin asked the address of: (symbol, block).
    variables: Vec<(usize, usize)>,
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
            variables: Vec::new(),
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

/// How the trace names the address `p` (`#n` for block `n`).
pub fn trace_name(p: usize) -> String {
    with(|s| addr(s, p))
}

/// Where the variable symbol `name` lives, once the plugin has asked its address (executables share it).
pub fn variable(name: &str) -> Option<*mut u64> {
    with(|s| {
        let i = s.config.symbols.iter().position(|(n, _)| *n == name)?;
        let &(_, block) = s.variables.iter().find(|(v, _)| *v == i)?;
        Some(s.blocks[block].storage.as_mut_ptr().cast::<u64>())
    })
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
        pub fn table() -> &'static Hsa {
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
            HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_ADDRESS => "VARIABLE_ADDRESS",
            HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_SIZE => "VARIABLE_SIZE",
            _ => "?",
        };
        let status = enter("hsa_executable_symbol_get_info", format_args!("k{i}, {what}"));
        if status != HSA_STATUS_SUCCESS {
            return status;
        }
        let (kind, size) = with(|s| (s.config.symbols[i].1, s.config.variable_size));
        if attribute == HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_ADDRESS {
            // The variable's "device memory": a zeroed block, made on the first query (the loader's allocation).
            let (block, address) = with(|s| {
                let block = match s.variables.iter().find(|(v, _)| *v == i) {
                    Some(&(_, b)) => b,
                    None => {
                        let storage = vec![0; (size as usize).div_ceil(16).max(1)];
                        s.blocks.push(Block { storage, len: size as usize });
                        s.freed.push(false);
                        s.variables.push((i, s.blocks.len() - 1));
                        s.blocks.len() - 1
                    }
                };
                (block, s.blocks[block].start() as u64)
            });
            result(format_args!("#{block}"));
            // SAFETY: the attribute is a u64 (a `void *` in the large model).
            unsafe { put::<u64>(value, address) };
            return HSA_STATUS_SUCCESS;
        }
        // SAFETY (each put): the type is the attribute's, as hsa.h declares it.
        unsafe {
            match attribute {
                HSA_EXECUTABLE_SYMBOL_INFO_TYPE => put::<u32>(value, kind),
                HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_OBJECT => put::<u64>(value, 0xC0DE_0000 + i as u64 * 0x100),
                HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_KERNARG_SEGMENT_SIZE => put::<u32>(value, 40),
                HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_GROUP_SEGMENT_SIZE => put::<u32>(value, 100),
                HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_PRIVATE_SEGMENT_SIZE => put::<u32>(value, 32),
                HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_DYNAMIC_CALLSTACK => put::<bool>(value, true),
                HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_SIZE => put::<u32>(value, size),
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
