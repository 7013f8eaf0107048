//! Initialisation, agents and memory pools: what discovery asks of the machine.

use super::machine::{CPU, DSP};
use super::state::{agent_name, enter, name64, put, with};
use crate::plugin::amdgpu::sys::*;
use std::ffi::{c_char, c_void, CStr};

pub(super) unsafe extern "C" fn hsa_init() -> Status {
    enter("hsa_init", format_args!(""))
}

pub(super) unsafe extern "C" fn hsa_status_string(
    status: Status,
    string: *mut *const c_char,
) -> Status {
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

pub(super) unsafe extern "C" fn hsa_system_get_info(attribute: u32, value: *mut c_void) -> Status {
    let status = enter("hsa_system_get_info", format_args!("{attribute}"));
    if status == HSA_STATUS_SUCCESS && attribute == HSA_SYSTEM_INFO_TIMESTAMP_FREQUENCY {
        // SAFETY: the attribute is a u64.
        unsafe { put::<u64>(value, 1_000_000) };
    }
    status
}

pub(super) unsafe extern "C" fn hsa_iterate_agents(
    callback: AgentCallback,
    data: *mut c_void,
) -> Status {
    let status = enter("hsa_iterate_agents", format_args!(""));
    if status != HSA_STATUS_SUCCESS {
        return status;
    }
    let gpu = with(|s| Agent {
        handle: s.config.gpu,
    });
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

pub(super) unsafe extern "C" fn hsa_agent_get_info(
    agent: Agent,
    attribute: u32,
    value: *mut c_void,
) -> Status {
    let (who, gpu, features) = with(|s| {
        (
            agent_name(s, agent),
            agent.handle == s.config.gpu,
            s.config.gpu_features,
        )
    });
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
            HSA_AGENT_INFO_GRID_MAX_DIM => put(
                value,
                Dim3 {
                    x: u32::MAX,
                    y: u32::MAX,
                    z: u32::MAX,
                },
            ),
            HSA_AGENT_INFO_QUEUE_MIN_SIZE => put::<u32>(value, 64),
            HSA_AGENT_INFO_QUEUE_MAX_SIZE => put::<u32>(value, 131_072),
            _ => return HSA_STATUS_ERROR_INVALID_ARGUMENT,
        }
    }
    HSA_STATUS_SUCCESS
}

pub(super) unsafe extern "C" fn hsa_amd_register_system_event_handler(
    _callback: SystemEventCallback,
    _data: *mut c_void,
) -> Status {
    enter("hsa_amd_register_system_event_handler", format_args!(""))
}

pub(super) unsafe extern "C" fn hsa_amd_agent_iterate_memory_pools(
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
        match unsafe {
            callback(
                MemoryPool {
                    handle: pool.handle,
                },
                data,
            )
        } {
            HSA_STATUS_SUCCESS => {}
            HSA_STATUS_INFO_BREAK => return HSA_STATUS_SUCCESS,
            s => return s,
        }
    }
    HSA_STATUS_SUCCESS
}

pub(super) unsafe extern "C" fn hsa_amd_memory_pool_get_info(
    pool: MemoryPool,
    attribute: u32,
    value: *mut c_void,
) -> Status {
    let what = match attribute {
        HSA_AMD_MEMORY_POOL_INFO_SEGMENT => "SEGMENT",
        HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS => "GLOBAL_FLAGS",
        HSA_AMD_MEMORY_POOL_INFO_SIZE => "SIZE",
        HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALLOWED => "RUNTIME_ALLOC_ALLOWED",
        _ => "?",
    };
    let status = enter(
        "hsa_amd_memory_pool_get_info",
        format_args!("{:#x}, {what}", pool.handle),
    );
    if status != HSA_STATUS_SUCCESS {
        return status;
    }
    let Some(p) = with(|s| {
        s.config
            .host_pools
            .iter()
            .chain(&s.config.gpu_pools)
            .find(|p| p.handle == pool.handle)
            .copied()
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

pub(super) unsafe extern "C" fn hsa_amd_agent_memory_pool_get_info(
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
        s.config
            .host_pools
            .iter()
            .chain(&s.config.gpu_pools)
            .find(|p| p.handle == pool.handle)
            .map(|p| p.gpu_access)
    });
    // SAFETY: the attribute is a u32 enum.
    unsafe {
        put::<u32>(
            value,
            access.unwrap_or(HSA_AMD_MEMORY_POOL_ACCESS_NEVER_ALLOWED),
        )
    };
    HSA_STATUS_SUCCESS
}
