//! A fake HSA runtime for the plugin's tests: every entry point of the function table is a plain Rust function
//! that records its call (a trace the tests compare line by line) and acts like a one-GPU machine whose "device
//! memory" is host memory and whose packet processor runs when the doorbell rings. So discovery, pool choice,
//! allocation, copies, image loading, kernel lookup and dispatch run here without a GPU, and each failure path can
//! be taken by making one call fail.
//!
//! State is per thread (each test has its own machine); the plugin calls the runtime from the thread that calls it,
//! so a test whose threads use one device at once lets them share its machine (`shared`).
//! It names the raw interface (`sys`) only; the tests that run the plugin on it are in `super::tests`.
//!
//! One file per concern: `machine` (what the machine is: agents, pools, code objects, events), `state` (the
//! machine's state, the tests' controls over it, and the trace's names), and the entry points by what they act on:
//! `discovery` (agents and pools), `memory` (blocks and copies), `queues` (signals, queues and the packet
//! processor), `executables` (code objects and symbols). This file makes the function table of them all.

mod discovery;
mod executables;
mod machine;
mod memory;
mod queues;
mod state;

use self::discovery::{
    hsa_agent_get_info, hsa_amd_agent_iterate_memory_pools, hsa_amd_agent_memory_pool_get_info,
    hsa_amd_memory_pool_get_info, hsa_amd_register_system_event_handler, hsa_init,
    hsa_iterate_agents, hsa_status_string, hsa_system_get_info,
};
use self::executables::{
    hsa_code_object_reader_create_from_memory, hsa_code_object_reader_destroy,
    hsa_executable_create_alt, hsa_executable_destroy, hsa_executable_freeze,
    hsa_executable_get_symbol_by_name, hsa_executable_load_agent_code_object,
    hsa_executable_symbol_get_info, hsa_executable_validate,
};
pub use self::machine::*;
use self::memory::{
    hsa_amd_agents_allow_access, hsa_amd_memory_async_copy, hsa_amd_memory_fill,
    hsa_amd_memory_pool_allocate, hsa_amd_memory_pool_free,
};
use self::queues::{
    hsa_queue_add_write_index_relaxed, hsa_queue_create, hsa_queue_destroy,
    hsa_queue_load_read_index_scacquire, hsa_signal_create, hsa_signal_destroy,
    hsa_signal_store_relaxed, hsa_signal_store_screlease, hsa_signal_wait_scacquire,
};
pub use self::state::{
    apart, dispatched, done_after_waits, fail_next, set_on_dispatch, shared, take_trace, together,
    trace_name, variable,
};
use super::sys::Hsa;
use std::sync::OnceLock;

/// Makes this thread's machine; returns the function table to hand to the plugin.
pub fn install(config: Config) -> &'static Hsa {
    state::reset(config);
    table()
}

/// The fake's function table.
pub fn table() -> &'static Hsa {
    static TABLE: OnceLock<Hsa> = OnceLock::new();
    TABLE.get_or_init(|| Hsa {
        hsa_init,
        hsa_status_string,
        hsa_system_get_info,
        hsa_iterate_agents,
        hsa_agent_get_info,
        hsa_amd_register_system_event_handler,
        hsa_amd_agent_iterate_memory_pools,
        hsa_amd_memory_pool_get_info,
        hsa_amd_agent_memory_pool_get_info,
        hsa_code_object_reader_create_from_memory,
        hsa_code_object_reader_destroy,
        hsa_executable_create_alt,
        hsa_executable_load_agent_code_object,
        hsa_executable_freeze,
        hsa_executable_validate,
        hsa_executable_destroy,
        hsa_executable_get_symbol_by_name,
        hsa_executable_symbol_get_info,
        hsa_amd_memory_pool_allocate,
        hsa_amd_memory_pool_free,
        hsa_amd_agents_allow_access,
        hsa_amd_memory_fill,
        hsa_amd_memory_async_copy,
        hsa_signal_create,
        hsa_signal_destroy,
        hsa_signal_store_relaxed,
        hsa_signal_store_screlease,
        hsa_signal_wait_scacquire,
        hsa_queue_create,
        hsa_queue_destroy,
        hsa_queue_add_write_index_relaxed,
        hsa_queue_load_read_index_scacquire,
        library: None,
    })
}
