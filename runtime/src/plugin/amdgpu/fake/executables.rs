//! Code object readers, executables and their symbols: kernels, and variables whose "device memory" is a zeroed
//! block made on the first query of their address.

use super::state::{agent_name, enter, put, result, with, Block};
use crate::plugin::amdgpu::sys::*;
use std::ffi::{c_char, c_void, CStr};

pub(super) unsafe extern "C" fn hsa_code_object_reader_create_from_memory(
    code_object: *const c_void,
    size: usize,
    reader: *mut CodeObjectReader,
) -> Status {
    let aligned = code_object.cast::<u128>().is_aligned();
    let status = enter(
        "hsa_code_object_reader_create_from_memory",
        format_args!(
            "{size} bytes, {}",
            if aligned {
                "16-byte aligned"
            } else {
                "unaligned"
            }
        ),
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
    unsafe {
        *reader = CodeObjectReader {
            handle: 0x6000 + n as u64,
        }
    };
    HSA_STATUS_SUCCESS
}

pub(super) unsafe extern "C" fn hsa_code_object_reader_destroy(reader: CodeObjectReader) -> Status {
    enter(
        "hsa_code_object_reader_destroy",
        format_args!("r{}", reader.handle - 0x6000),
    )
}

pub(super) unsafe extern "C" fn hsa_executable_create_alt(
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
    unsafe {
        *executable = Executable {
            handle: 0x8000 + n as u64,
        }
    };
    HSA_STATUS_SUCCESS
}

pub(super) unsafe extern "C" fn hsa_executable_load_agent_code_object(
    executable: Executable,
    agent: Agent,
    reader: CodeObjectReader,
    _options: *const c_char,
    loaded: *mut LoadedCodeObject,
) -> Status {
    let who = with(|s| agent_name(s, agent));
    let status = enter(
        "hsa_executable_load_agent_code_object",
        format_args!(
            "e{}, {who}, r{}",
            executable.handle - 0x8000,
            reader.handle - 0x6000
        ),
    );
    if status == HSA_STATUS_SUCCESS && !loaded.is_null() {
        // SAFETY: the plugin passes a pointer to write the loaded code object to.
        unsafe { *loaded = LoadedCodeObject { handle: 0x9000 } };
    }
    status
}

pub(super) unsafe extern "C" fn hsa_executable_freeze(
    executable: Executable,
    _options: *const c_char,
) -> Status {
    enter(
        "hsa_executable_freeze",
        format_args!("e{}", executable.handle - 0x8000),
    )
}

pub(super) unsafe extern "C" fn hsa_executable_validate(
    executable: Executable,
    result_: *mut u32,
) -> Status {
    let status = enter(
        "hsa_executable_validate",
        format_args!("e{}", executable.handle - 0x8000),
    );
    if status == HSA_STATUS_SUCCESS {
        // SAFETY: the plugin passes a pointer to a u32.
        unsafe { *result_ = with(|s| s.config.validate) };
    }
    status
}

pub(super) unsafe extern "C" fn hsa_executable_destroy(executable: Executable) -> Status {
    enter(
        "hsa_executable_destroy",
        format_args!("e{}", executable.handle - 0x8000),
    )
}

pub(super) unsafe extern "C" fn hsa_executable_get_symbol_by_name(
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
            unsafe {
                *symbol = ExecutableSymbol {
                    handle: 0xA000 + i as u64,
                }
            };
            HSA_STATUS_SUCCESS
        }
        None => {
            result(format_args!("HSA_STATUS_ERROR_INVALID_SYMBOL_NAME"));
            HSA_STATUS_ERROR_INVALID_SYMBOL_NAME
        }
    }
}

pub(super) unsafe extern "C" fn hsa_executable_symbol_get_info(
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
    let status = enter(
        "hsa_executable_symbol_get_info",
        format_args!("k{i}, {what}"),
    );
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
                    s.blocks.push(Block {
                        storage,
                        len: size as usize,
                    });
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
            HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_OBJECT => {
                put::<u64>(value, 0xC0DE_0000 + i as u64 * 0x100)
            }
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
