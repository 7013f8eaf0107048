//! The raw layer (cudarc's `sys`): the part of the HSA runtime's C interface (`hsa.h`, `hsa_ext_amd.h` from
//! ROCR-Runtime) this plugin uses: handle types, the few structs whose layout matters, the enum values it passes or
//! reads, and a table of function pointers resolved from `libhsa-runtime64.so.1` at run time, so nothing links
//! against ROCm. Declared from ROCR-Runtime's headers (the values are those headers'; LLVM's offload plugin declares
//! the same subset in its `dynamic_hsa/`).
//!
//! Every function returns an `hsa_status_t` unless said otherwise. Nothing here checks or decides anything:
//! [`super::result`] turns each call into a `Result`.

#![allow(dead_code)] // Constants are kept as the headers group them, used or not.

use std::ffi::{c_char, c_void};

/// `hsa_status_t`: a C enum, 32 bits.
pub type Status = u32;

pub const HSA_STATUS_SUCCESS: Status = 0x0;
pub const HSA_STATUS_INFO_BREAK: Status = 0x1;
pub const HSA_STATUS_ERROR: Status = 0x1000;
pub const HSA_STATUS_ERROR_INVALID_ARGUMENT: Status = 0x1001;
pub const HSA_STATUS_ERROR_INVALID_QUEUE_CREATION: Status = 0x1002;
pub const HSA_STATUS_ERROR_INVALID_ALLOCATION: Status = 0x1003;
pub const HSA_STATUS_ERROR_INVALID_AGENT: Status = 0x1004;
pub const HSA_STATUS_ERROR_INVALID_REGION: Status = 0x1005;
pub const HSA_STATUS_ERROR_INVALID_SIGNAL: Status = 0x1006;
pub const HSA_STATUS_ERROR_INVALID_QUEUE: Status = 0x1007;
pub const HSA_STATUS_ERROR_OUT_OF_RESOURCES: Status = 0x1008;
pub const HSA_STATUS_ERROR_INVALID_PACKET_FORMAT: Status = 0x1009;
pub const HSA_STATUS_ERROR_RESOURCE_FREE: Status = 0x100A;
pub const HSA_STATUS_ERROR_NOT_INITIALIZED: Status = 0x100B;
pub const HSA_STATUS_ERROR_REFCOUNT_OVERFLOW: Status = 0x100C;
pub const HSA_STATUS_ERROR_INCOMPATIBLE_ARGUMENTS: Status = 0x100D;
pub const HSA_STATUS_ERROR_INVALID_INDEX: Status = 0x100E;
pub const HSA_STATUS_ERROR_INVALID_ISA: Status = 0x100F;
pub const HSA_STATUS_ERROR_INVALID_CODE_OBJECT: Status = 0x1010;
pub const HSA_STATUS_ERROR_INVALID_EXECUTABLE: Status = 0x1011;
pub const HSA_STATUS_ERROR_FROZEN_EXECUTABLE: Status = 0x1012;
pub const HSA_STATUS_ERROR_INVALID_SYMBOL_NAME: Status = 0x1013;
pub const HSA_STATUS_ERROR_VARIABLE_ALREADY_DEFINED: Status = 0x1014;
pub const HSA_STATUS_ERROR_VARIABLE_UNDEFINED: Status = 0x1015;
pub const HSA_STATUS_ERROR_EXCEPTION: Status = 0x1016;
pub const HSA_STATUS_ERROR_INVALID_ISA_NAME: Status = 0x1017;
pub const HSA_STATUS_ERROR_INVALID_CODE_SYMBOL: Status = 0x1018;
pub const HSA_STATUS_ERROR_INVALID_EXECUTABLE_SYMBOL: Status = 0x1019;
pub const HSA_STATUS_ERROR_INVALID_FILE: Status = 0x1020;
pub const HSA_STATUS_ERROR_INVALID_CODE_OBJECT_READER: Status = 0x1021;
pub const HSA_STATUS_ERROR_INVALID_CACHE: Status = 0x1022;
pub const HSA_STATUS_ERROR_INVALID_WAVEFRONT: Status = 0x1023;
pub const HSA_STATUS_ERROR_INVALID_SIGNAL_GROUP: Status = 0x1024;
pub const HSA_STATUS_ERROR_INVALID_RUNTIME_STATE: Status = 0x1025;
pub const HSA_STATUS_ERROR_FATAL: Status = 0x1026;
// hsa_ext_amd.h's additions.
pub const HSA_STATUS_ERROR_INVALID_MEMORY_POOL: Status = 40;
pub const HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION: Status = 41;
pub const HSA_STATUS_ERROR_ILLEGAL_INSTRUCTION: Status = 42;
pub const HSA_STATUS_ERROR_MEMORY_FAULT: Status = 43;
pub const HSA_STATUS_CU_MASK_REDUCED: Status = 44;
pub const HSA_STATUS_ERROR_OUT_OF_REGISTERS: Status = 45;
pub const HSA_STATUS_ERROR_RESOURCE_BUSY: Status = 46;
pub const HSA_STATUS_ERROR_NOT_SUPPORTED: Status = 47;

/// The header's name of a status, for messages (the runtime's own description is added when it can give one).
pub fn status_name(status: Status) -> Option<&'static str> {
    Some(match status {
        HSA_STATUS_SUCCESS => "HSA_STATUS_SUCCESS",
        HSA_STATUS_INFO_BREAK => "HSA_STATUS_INFO_BREAK",
        HSA_STATUS_ERROR => "HSA_STATUS_ERROR",
        HSA_STATUS_ERROR_INVALID_ARGUMENT => "HSA_STATUS_ERROR_INVALID_ARGUMENT",
        HSA_STATUS_ERROR_INVALID_QUEUE_CREATION => "HSA_STATUS_ERROR_INVALID_QUEUE_CREATION",
        HSA_STATUS_ERROR_INVALID_ALLOCATION => "HSA_STATUS_ERROR_INVALID_ALLOCATION",
        HSA_STATUS_ERROR_INVALID_AGENT => "HSA_STATUS_ERROR_INVALID_AGENT",
        HSA_STATUS_ERROR_INVALID_REGION => "HSA_STATUS_ERROR_INVALID_REGION",
        HSA_STATUS_ERROR_INVALID_SIGNAL => "HSA_STATUS_ERROR_INVALID_SIGNAL",
        HSA_STATUS_ERROR_INVALID_QUEUE => "HSA_STATUS_ERROR_INVALID_QUEUE",
        HSA_STATUS_ERROR_OUT_OF_RESOURCES => "HSA_STATUS_ERROR_OUT_OF_RESOURCES",
        HSA_STATUS_ERROR_INVALID_PACKET_FORMAT => "HSA_STATUS_ERROR_INVALID_PACKET_FORMAT",
        HSA_STATUS_ERROR_RESOURCE_FREE => "HSA_STATUS_ERROR_RESOURCE_FREE",
        HSA_STATUS_ERROR_NOT_INITIALIZED => "HSA_STATUS_ERROR_NOT_INITIALIZED",
        HSA_STATUS_ERROR_REFCOUNT_OVERFLOW => "HSA_STATUS_ERROR_REFCOUNT_OVERFLOW",
        HSA_STATUS_ERROR_INCOMPATIBLE_ARGUMENTS => "HSA_STATUS_ERROR_INCOMPATIBLE_ARGUMENTS",
        HSA_STATUS_ERROR_INVALID_INDEX => "HSA_STATUS_ERROR_INVALID_INDEX",
        HSA_STATUS_ERROR_INVALID_ISA => "HSA_STATUS_ERROR_INVALID_ISA",
        HSA_STATUS_ERROR_INVALID_CODE_OBJECT => "HSA_STATUS_ERROR_INVALID_CODE_OBJECT",
        HSA_STATUS_ERROR_INVALID_EXECUTABLE => "HSA_STATUS_ERROR_INVALID_EXECUTABLE",
        HSA_STATUS_ERROR_FROZEN_EXECUTABLE => "HSA_STATUS_ERROR_FROZEN_EXECUTABLE",
        HSA_STATUS_ERROR_INVALID_SYMBOL_NAME => "HSA_STATUS_ERROR_INVALID_SYMBOL_NAME",
        HSA_STATUS_ERROR_VARIABLE_ALREADY_DEFINED => "HSA_STATUS_ERROR_VARIABLE_ALREADY_DEFINED",
        HSA_STATUS_ERROR_VARIABLE_UNDEFINED => "HSA_STATUS_ERROR_VARIABLE_UNDEFINED",
        HSA_STATUS_ERROR_EXCEPTION => "HSA_STATUS_ERROR_EXCEPTION",
        HSA_STATUS_ERROR_INVALID_ISA_NAME => "HSA_STATUS_ERROR_INVALID_ISA_NAME",
        HSA_STATUS_ERROR_INVALID_CODE_SYMBOL => "HSA_STATUS_ERROR_INVALID_CODE_SYMBOL",
        HSA_STATUS_ERROR_INVALID_EXECUTABLE_SYMBOL => "HSA_STATUS_ERROR_INVALID_EXECUTABLE_SYMBOL",
        HSA_STATUS_ERROR_INVALID_FILE => "HSA_STATUS_ERROR_INVALID_FILE",
        HSA_STATUS_ERROR_INVALID_CODE_OBJECT_READER => {
            "HSA_STATUS_ERROR_INVALID_CODE_OBJECT_READER"
        }
        HSA_STATUS_ERROR_INVALID_CACHE => "HSA_STATUS_ERROR_INVALID_CACHE",
        HSA_STATUS_ERROR_INVALID_WAVEFRONT => "HSA_STATUS_ERROR_INVALID_WAVEFRONT",
        HSA_STATUS_ERROR_INVALID_SIGNAL_GROUP => "HSA_STATUS_ERROR_INVALID_SIGNAL_GROUP",
        HSA_STATUS_ERROR_INVALID_RUNTIME_STATE => "HSA_STATUS_ERROR_INVALID_RUNTIME_STATE",
        HSA_STATUS_ERROR_FATAL => "HSA_STATUS_ERROR_FATAL",
        HSA_STATUS_ERROR_INVALID_MEMORY_POOL => "HSA_STATUS_ERROR_INVALID_MEMORY_POOL",
        HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION => "HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION",
        HSA_STATUS_ERROR_ILLEGAL_INSTRUCTION => "HSA_STATUS_ERROR_ILLEGAL_INSTRUCTION",
        HSA_STATUS_ERROR_MEMORY_FAULT => "HSA_STATUS_ERROR_MEMORY_FAULT",
        HSA_STATUS_CU_MASK_REDUCED => "HSA_STATUS_CU_MASK_REDUCED",
        HSA_STATUS_ERROR_OUT_OF_REGISTERS => "HSA_STATUS_ERROR_OUT_OF_REGISTERS",
        HSA_STATUS_ERROR_RESOURCE_BUSY => "HSA_STATUS_ERROR_RESOURCE_BUSY",
        HSA_STATUS_ERROR_NOT_SUPPORTED => "HSA_STATUS_ERROR_NOT_SUPPORTED",
        _ => return None,
    })
}

macro_rules! handle {
    ($($(#[$m:meta])* $name:ident),* $(,)?) => {$(
        $(#[$m])*
        #[repr(C)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
        pub struct $name {
            pub handle: u64,
        }
    )*};
}

handle!(
    /// `hsa_agent_t`: a CPU or GPU.
    Agent,
    /// `hsa_signal_t`.
    Signal,
    /// `hsa_amd_memory_pool_t`.
    MemoryPool,
    /// `hsa_executable_t`.
    Executable,
    /// `hsa_executable_symbol_t`.
    ExecutableSymbol,
    /// `hsa_code_object_reader_t`.
    CodeObjectReader,
    /// `hsa_loaded_code_object_t`.
    LoadedCodeObject,
);

/// `hsa_signal_value_t` in the large (64-bit) machine model.
pub type SignalValue = i64;

// hsa_system_info_t
pub const HSA_SYSTEM_INFO_TIMESTAMP_FREQUENCY: u32 = 3; // u64, Hz

// hsa_device_type_t
pub const HSA_DEVICE_TYPE_CPU: u32 = 0;
pub const HSA_DEVICE_TYPE_GPU: u32 = 1;
pub const HSA_DEVICE_TYPE_DSP: u32 = 2;

// hsa_agent_feature_t (a bit mask)
pub const HSA_AGENT_FEATURE_KERNEL_DISPATCH: u32 = 1;

// hsa_profile_t
pub const HSA_PROFILE_BASE: u32 = 0;
pub const HSA_PROFILE_FULL: u32 = 1;

// hsa_default_float_rounding_mode_t
pub const HSA_DEFAULT_FLOAT_ROUNDING_MODE_DEFAULT: u32 = 0;

// hsa_agent_info_t (with the type each one writes)
pub const HSA_AGENT_INFO_NAME: u32 = 0; // char[64]
pub const HSA_AGENT_INFO_FEATURE: u32 = 2; // hsa_agent_feature_t
pub const HSA_AGENT_INFO_PROFILE: u32 = 4; // hsa_profile_t
pub const HSA_AGENT_INFO_WORKGROUP_MAX_DIM: u32 = 7; // u16[3]
pub const HSA_AGENT_INFO_WORKGROUP_MAX_SIZE: u32 = 8; // u32
pub const HSA_AGENT_INFO_GRID_MAX_DIM: u32 = 9; // hsa_dim3_t
pub const HSA_AGENT_INFO_GRID_MAX_SIZE: u32 = 10; // u32
pub const HSA_AGENT_INFO_QUEUE_MIN_SIZE: u32 = 13; // u32
pub const HSA_AGENT_INFO_QUEUE_MAX_SIZE: u32 = 14; // u32
pub const HSA_AGENT_INFO_DEVICE: u32 = 17; // hsa_device_type_t
                                           // hsa_amd_agent_info_t
pub const HSA_AMD_AGENT_INFO_COMPUTE_UNIT_COUNT: u32 = 0xA002; // u32
pub const HSA_AMD_AGENT_INFO_PRODUCT_NAME: u32 = 0xA009; // char[64]

/// `hsa_dim3_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Dim3 {
    pub x: u32,
    pub y: u32,
    pub z: u32,
}

// hsa_amd_segment_t
pub const HSA_AMD_SEGMENT_GLOBAL: u32 = 0;
pub const HSA_AMD_SEGMENT_READONLY: u32 = 1;
pub const HSA_AMD_SEGMENT_PRIVATE: u32 = 2;
pub const HSA_AMD_SEGMENT_GROUP: u32 = 3;

// hsa_amd_memory_pool_global_flag_t (a bit mask)
pub const HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_KERNARG_INIT: u32 = 1;
pub const HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED: u32 = 2;
pub const HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED: u32 = 4;

// hsa_amd_memory_pool_info_t
pub const HSA_AMD_MEMORY_POOL_INFO_SEGMENT: u32 = 0; // hsa_amd_segment_t
pub const HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS: u32 = 1; // u32
pub const HSA_AMD_MEMORY_POOL_INFO_SIZE: u32 = 2; // size_t
pub const HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALLOWED: u32 = 5; // bool

// hsa_amd_agent_memory_pool_info_t
pub const HSA_AMD_AGENT_MEMORY_POOL_INFO_ACCESS: u32 = 0; // hsa_amd_memory_pool_access_t
                                                          // hsa_amd_memory_pool_access_t
pub const HSA_AMD_MEMORY_POOL_ACCESS_NEVER_ALLOWED: u32 = 0;
pub const HSA_AMD_MEMORY_POOL_ACCESS_ALLOWED_BY_DEFAULT: u32 = 1;
pub const HSA_AMD_MEMORY_POOL_ACCESS_DISALLOWED_BY_DEFAULT: u32 = 2;

// hsa_signal_condition_t
pub const HSA_SIGNAL_CONDITION_EQ: u32 = 0;
pub const HSA_SIGNAL_CONDITION_NE: u32 = 1;
pub const HSA_SIGNAL_CONDITION_LT: u32 = 2;
pub const HSA_SIGNAL_CONDITION_GTE: u32 = 3;
// hsa_wait_state_t
pub const HSA_WAIT_STATE_BLOCKED: u32 = 0;
pub const HSA_WAIT_STATE_ACTIVE: u32 = 1;

// hsa_queue_type_t
pub const HSA_QUEUE_TYPE_MULTI: u32 = 0;

/// `hsa_queue_t` (large model): the runtime owns it; the plugin reads `base_address`, `doorbell_signal` and `size`.
#[repr(C)]
#[derive(Debug)]
pub struct Queue {
    pub type_: u32,
    pub features: u32,
    /// The ring: `size` packets of 64 bytes.
    pub base_address: *mut c_void,
    pub doorbell_signal: Signal,
    /// Packets in the ring, a power of two.
    pub size: u32,
    pub reserved1: u32,
    pub id: u64,
}

// hsa_packet_type_t
pub const HSA_PACKET_TYPE_INVALID: u16 = 1;
pub const HSA_PACKET_TYPE_KERNEL_DISPATCH: u16 = 2;
// hsa_packet_header_t: bit offsets in the packet header
pub const HSA_PACKET_HEADER_TYPE: u16 = 0;
pub const HSA_PACKET_HEADER_BARRIER: u16 = 8;
pub const HSA_PACKET_HEADER_SCACQUIRE_FENCE_SCOPE: u16 = 9;
pub const HSA_PACKET_HEADER_SCRELEASE_FENCE_SCOPE: u16 = 11;
// hsa_fence_scope_t
pub const HSA_FENCE_SCOPE_NONE: u16 = 0;
pub const HSA_FENCE_SCOPE_AGENT: u16 = 1;
pub const HSA_FENCE_SCOPE_SYSTEM: u16 = 2;
// hsa_kernel_dispatch_packet_setup_t: bit offset of the dimension count in `setup`
pub const HSA_KERNEL_DISPATCH_PACKET_SETUP_DIMENSIONS: u16 = 0;

/// `hsa_kernel_dispatch_packet_t` (large model), 64 bytes with no padding. The first 32 bits (`header`, `setup`)
/// are written last, atomically, to hand the packet to the packet processor.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KernelDispatchPacket {
    pub header: u16,
    pub setup: u16,
    pub workgroup_size_x: u16,
    pub workgroup_size_y: u16,
    pub workgroup_size_z: u16,
    pub reserved0: u16,
    /// In work-items, not workgroups.
    pub grid_size_x: u32,
    pub grid_size_y: u32,
    pub grid_size_z: u32,
    pub private_segment_size: u32,
    pub group_segment_size: u32,
    pub kernel_object: u64,
    /// `void *kernarg_address`: a pointer in the large model.
    pub kernarg_address: u64,
    pub reserved2: u64,
    pub completion_signal: Signal,
}

// hsa_symbol_kind_t
pub const HSA_SYMBOL_KIND_VARIABLE: u32 = 0;
pub const HSA_SYMBOL_KIND_KERNEL: u32 = 1;

// hsa_executable_symbol_info_t (with the type each one writes)
pub const HSA_EXECUTABLE_SYMBOL_INFO_TYPE: u32 = 0; // hsa_symbol_kind_t
pub const HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_SIZE: u32 = 9; // u32
pub const HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_ADDRESS: u32 = 21; // u64
pub const HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_KERNARG_SEGMENT_SIZE: u32 = 11; // u32
pub const HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_GROUP_SEGMENT_SIZE: u32 = 13; // u32
pub const HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_PRIVATE_SEGMENT_SIZE: u32 = 14; // u32
pub const HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_DYNAMIC_CALLSTACK: u32 = 15; // bool
pub const HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_OBJECT: u32 = 22; // u64

// hsa_amd_event_type_t
pub const HSA_AMD_GPU_MEMORY_FAULT_EVENT: u32 = 0;
pub const HSA_AMD_GPU_HW_EXCEPTION_EVENT: u32 = 1;

/// `hsa_amd_gpu_memory_fault_info_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct MemoryFaultInfo {
    pub agent: Agent,
    pub virtual_address: u64,
    /// `hsa_amd_memory_fault_reason_t` bits.
    pub fault_reason_mask: u32,
}

// hsa_amd_hw_exception_reset_cause_t
pub const HSA_AMD_HW_EXCEPTION_CAUSE_GPU_HANG: u32 = 1 << 0;
pub const HSA_AMD_HW_EXCEPTION_CAUSE_ECC: u32 = 1 << 1;

/// `hsa_amd_gpu_hw_exception_info_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct HwExceptionInfo {
    pub agent: Agent,
    pub reset_type: u32,
    pub reset_cause: u32,
}

/// The union in `hsa_amd_event_t`; newer runtimes add larger members, which only the runtime ever allocates.
#[repr(C)]
#[derive(Clone, Copy)]
pub union SystemEventData {
    pub memory_fault: MemoryFaultInfo,
    pub hw_exception: HwExceptionInfo,
}

/// `hsa_amd_event_t`, as a system event handler receives it.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct SystemEvent {
    pub event_type: u32,
    pub data: SystemEventData,
}

// hsa_amd_memory_fault_reason_t
pub const HSA_AMD_MEMORY_FAULT_PAGE_NOT_PRESENT: u32 = 1 << 0;
pub const HSA_AMD_MEMORY_FAULT_READ_ONLY: u32 = 1 << 1;
pub const HSA_AMD_MEMORY_FAULT_NX: u32 = 1 << 2;
pub const HSA_AMD_MEMORY_FAULT_HOST_ONLY: u32 = 1 << 3;
pub const HSA_AMD_MEMORY_FAULT_DRAMECC: u32 = 1 << 4;
pub const HSA_AMD_MEMORY_FAULT_IMPRECISE: u32 = 1 << 5;
pub const HSA_AMD_MEMORY_FAULT_SRAMECC: u32 = 1 << 6;
pub const HSA_AMD_MEMORY_FAULT_HANG: u32 = 1 << 31;

/// `hsa_status_t (*)(hsa_agent_t, void *)`, for `hsa_iterate_agents`.
pub type AgentCallback = unsafe extern "C" fn(Agent, *mut c_void) -> Status;
/// For `hsa_amd_agent_iterate_memory_pools`.
pub type PoolCallback = unsafe extern "C" fn(MemoryPool, *mut c_void) -> Status;
/// A queue's error callback: `void (*)(hsa_status_t, hsa_queue_t *, void *)`.
pub type QueueCallback = unsafe extern "C" fn(Status, *mut Queue, *mut c_void);
/// `hsa_amd_system_event_callback_t`.
pub type SystemEventCallback = unsafe extern "C" fn(*const SystemEvent, *mut c_void) -> Status;

/// Declares the function table: one field per entry point, each resolved by its own name.
macro_rules! hsa_api {
    ($( fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)?; )*) => {
        /// The entry points of a loaded `libhsa-runtime64`, every one resolved when the table is made.
        pub struct Hsa {
            $( pub $name: unsafe extern "C" fn($($ty),*) $(-> $ret)?, )*
            /// Keeps the library mapped as long as the pointers above are used (the table is never dropped). `None`
            /// only for the tests' fake runtime, whose entry points are plain functions of the test binary.
            pub(super) library: Option<libloading::Library>,
        }

        impl std::fmt::Debug for Hsa {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct("Hsa").finish_non_exhaustive()
            }
        }

        impl Hsa {
            /// Every entry point the plugin calls.
            pub const SYMBOLS: &'static [&'static str] = &[$(stringify!($name)),*];

            /// Resolves every entry point; `Err` names each one the library lacks.
            ///
            /// # Safety
            /// `library` is an HSA runtime, so each symbol found has the C signature declared here.
            pub unsafe fn resolve(library: libloading::Library) -> Result<Hsa, Vec<&'static str>> {
                let mut missing = Vec::new();
                $(
                    // SAFETY: per the contract, the symbol (if present) is this function.
                    let $name = match unsafe {
                        library.get::<unsafe extern "C" fn($($ty),*) $(-> $ret)?>(stringify!($name))
                    } {
                        Ok(f) => Some(*f),
                        Err(_) => {
                            missing.push(stringify!($name));
                            None
                        }
                    };
                )*
                $(
                    let Some($name) = $name else { return Err(missing) };
                )*
                Ok(Hsa { $($name,)* library: Some(library) })
            }
        }
    };
}

hsa_api! {
    fn hsa_init() -> Status;
    fn hsa_status_string(status: Status, string: *mut *const c_char) -> Status;
    fn hsa_system_get_info(attribute: u32, value: *mut c_void) -> Status;
    fn hsa_iterate_agents(callback: AgentCallback, data: *mut c_void) -> Status;
    fn hsa_agent_get_info(agent: Agent, attribute: u32, value: *mut c_void) -> Status;
    fn hsa_amd_register_system_event_handler(callback: SystemEventCallback, data: *mut c_void) -> Status;

    fn hsa_amd_agent_iterate_memory_pools(agent: Agent, callback: PoolCallback, data: *mut c_void) -> Status;
    fn hsa_amd_memory_pool_get_info(pool: MemoryPool, attribute: u32, value: *mut c_void) -> Status;
    fn hsa_amd_agent_memory_pool_get_info(agent: Agent, pool: MemoryPool, attribute: u32, value: *mut c_void)
        -> Status;
    fn hsa_amd_memory_pool_allocate(pool: MemoryPool, size: usize, flags: u32, ptr: *mut *mut c_void) -> Status;
    fn hsa_amd_memory_pool_free(ptr: *mut c_void) -> Status;
    fn hsa_amd_agents_allow_access(num_agents: u32, agents: *const Agent, flags: *const u32, ptr: *const c_void)
        -> Status;
    fn hsa_amd_memory_fill(ptr: *mut c_void, value: u32, count: usize) -> Status;
    fn hsa_amd_memory_async_copy(
        dst: *mut c_void,
        dst_agent: Agent,
        src: *const c_void,
        src_agent: Agent,
        size: usize,
        num_dep_signals: u32,
        dep_signals: *const Signal,
        completion_signal: Signal,
    ) -> Status;

    fn hsa_signal_create(initial_value: SignalValue, num_consumers: u32, consumers: *const Agent, signal: *mut Signal)
        -> Status;
    fn hsa_signal_destroy(signal: Signal) -> Status;
    fn hsa_signal_store_relaxed(signal: Signal, value: SignalValue);
    fn hsa_signal_store_screlease(signal: Signal, value: SignalValue);
    fn hsa_signal_wait_scacquire(
        signal: Signal,
        condition: u32,
        compare_value: SignalValue,
        timeout_hint: u64,
        wait_state_hint: u32,
    ) -> SignalValue;

    fn hsa_queue_create(
        agent: Agent,
        size: u32,
        type_: u32,
        callback: Option<QueueCallback>,
        data: *mut c_void,
        private_segment_size: u32,
        group_segment_size: u32,
        queue: *mut *mut Queue,
    ) -> Status;
    fn hsa_queue_destroy(queue: *mut Queue) -> Status;
    fn hsa_queue_add_write_index_relaxed(queue: *const Queue, value: u64) -> u64;
    fn hsa_queue_load_read_index_scacquire(queue: *const Queue) -> u64;

    fn hsa_code_object_reader_create_from_memory(code_object: *const c_void, size: usize,
        reader: *mut CodeObjectReader) -> Status;
    fn hsa_code_object_reader_destroy(reader: CodeObjectReader) -> Status;
    fn hsa_executable_create_alt(profile: u32, default_float_rounding_mode: u32, options: *const c_char,
        executable: *mut Executable) -> Status;
    fn hsa_executable_load_agent_code_object(executable: Executable, agent: Agent, reader: CodeObjectReader,
        options: *const c_char, loaded: *mut LoadedCodeObject) -> Status;
    fn hsa_executable_freeze(executable: Executable, options: *const c_char) -> Status;
    fn hsa_executable_validate(executable: Executable, result: *mut u32) -> Status;
    fn hsa_executable_destroy(executable: Executable) -> Status;
    fn hsa_executable_get_symbol_by_name(executable: Executable, name: *const c_char, agent: *const Agent,
        symbol: *mut ExecutableSymbol) -> Status;
    fn hsa_executable_symbol_get_info(symbol: ExecutableSymbol, attribute: u32, value: *mut c_void) -> Status;
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    #[test]
    fn the_dispatch_packet_has_hsa_h_layout() {
        assert_eq!(size_of::<KernelDispatchPacket>(), 64);
        assert_eq!(offset_of!(KernelDispatchPacket, setup), 2);
        assert_eq!(offset_of!(KernelDispatchPacket, workgroup_size_x), 4);
        assert_eq!(offset_of!(KernelDispatchPacket, grid_size_x), 12);
        assert_eq!(offset_of!(KernelDispatchPacket, private_segment_size), 24);
        // offload-device reads this one from the packet to size team-shared memory.
        assert_eq!(offset_of!(KernelDispatchPacket, group_segment_size), 28);
        assert_eq!(offset_of!(KernelDispatchPacket, kernel_object), 32);
        assert_eq!(offset_of!(KernelDispatchPacket, kernarg_address), 40);
        assert_eq!(offset_of!(KernelDispatchPacket, completion_signal), 56);
    }

    #[test]
    fn the_queue_and_event_structs_have_hsa_h_layout() {
        assert_eq!(offset_of!(Queue, base_address), 8);
        assert_eq!(offset_of!(Queue, doorbell_signal), 16);
        assert_eq!(offset_of!(Queue, size), 24);
        assert_eq!(size_of::<Queue>(), 40);
        assert_eq!(offset_of!(SystemEvent, data), 8);
        assert_eq!(offset_of!(MemoryFaultInfo, virtual_address), 8);
        assert_eq!(offset_of!(MemoryFaultInfo, fault_reason_mask), 16);
    }

    #[test]
    fn statuses_have_their_header_names() {
        assert_eq!(
            status_name(HSA_STATUS_ERROR_EXCEPTION),
            Some("HSA_STATUS_ERROR_EXCEPTION")
        );
        assert_eq!(
            status_name(HSA_STATUS_ERROR_ILLEGAL_INSTRUCTION),
            Some("HSA_STATUS_ERROR_ILLEGAL_INSTRUCTION")
        );
        assert_eq!(status_name(0x4242), None);
    }

    #[test]
    fn the_table_names_every_entry_point_once() {
        let mut names = Hsa::SYMBOLS.to_vec();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), Hsa::SYMBOLS.len());
        assert!(names.iter().all(|n| n.starts_with("hsa_")));
    }
}
