//! The machine a test runs on: its agents and memory pools, the code objects its images are, what its packet
//! processor does with a dispatch, and the events it raises.

use crate::plugin::amdgpu::sys::*;

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
