//! What the tests of the plugin on the fake runtime share: opening its GPU, an image and its kernel, a launch's
//! parameters, the plugin's words in an error, and the trace's recurring passages (opening the device, loading an
//! image, a dispatch) to compare traces with.

use super::super::devices_of;
use super::super::fake::*;
use super::super::image::TRIPLE;
use crate::plugin::PluginError;
use crate::plugin::{Device, Kernel, LaunchParams};
use crate::registry::Image;
use offload_model::fatbin::ImageFormat;

/// The plugin's own words in an error (the runtime adds its context around them).
pub fn reason(e: PluginError) -> String {
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
pub fn assert_trace(expected: &[&str]) {
    assert_lines(&owned(expected))
}

/// [`assert_trace`] of lines put together from the fixtures below.
#[track_caller]
pub fn assert_lines(expected: &[String]) {
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

pub fn device(config: Config) -> Box<dyn Device> {
    let hsa = install(config);
    let mut devices = devices_of(hsa).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(devices.devices.len(), 1);
    take_trace();
    devices.devices.remove(0)
}

pub fn open_error(config: Config) -> String {
    let hsa = install(config);
    match devices_of(hsa) {
        Ok(_) => panic!("the device opened"),
        Err(e) => reason(e),
    }
}

pub fn image(bytes: &'static [u8]) -> Image {
    Image {
        bytes,
        format: ImageFormat::Hsaco,
        triple: TRIPLE,
        arch: "gfx90a",
        package: "test",
        package_tag: 0,
    }
}

pub fn saxpy(dev: &dyn Device) -> Kernel {
    let loaded = dev.load_image(&image(code_object(true))).unwrap();
    let k = loaded.kernel(c"saxpy").ok().flatten().expect("saxpy");
    take_trace();
    k
}

pub fn params(num_teams: u32, num_threads: u32, team_shared: usize) -> LaunchParams {
    LaunchParams {
        num_teams,
        num_threads,
        team_shared,
    }
}

/// Loading image 0 (`r0`, `e0`) up to its validation: reader, executable, code object, freeze, validate.
pub const LOAD: &[&str] = &[
    "hsa_code_object_reader_create_from_memory(64 bytes, 16-byte aligned) -> r0",
    "hsa_executable_create_alt(profile 0, rounding 0, options null) -> e0",
    "hsa_executable_load_agent_code_object(e0, gpu, r0)",
    "hsa_executable_freeze(e0)",
    "hsa_executable_validate(e0)",
];

/// Image 0 loaded: [`LOAD`], then its reader released.
pub fn load_trace() -> Vec<String> {
    owned(&[LOAD, &["hsa_code_object_reader_destroy(r0)"]].concat())
}

pub fn owned(lines: &[&str]) -> Vec<String> {
    lines.iter().map(|l| l.to_string()).collect()
}

/// Image 0's lookup of the panic record's global when it has none (an image built before panic reports).
pub const NO_PANIC_GLOBAL: &str =
    "hsa_executable_get_symbol_by_name(e0, \"__offload_panic_record\", gpu) -> HSA_STATUS_ERROR_INVALID_SYMBOL_NAME";

/// Image 0's lookup of the print buffer's global when it has none (an image built before `offload::println!`).
pub const NO_PRINT_GLOBAL: &str =
    "hsa_executable_get_symbol_by_name(e0, \"__offload_print_buffer\", gpu) -> HSA_STATUS_ERROR_INVALID_SYMBOL_NAME";

/// Dispatch `index` on queue 0 with the launch signal `s1`, whose wait reads `waited`: the signal armed, a slot
/// reserved, the doorbell rung, the wait.
pub fn dispatch(index: u64, waited: i64) -> Vec<String> {
    vec![
        "hsa_signal_store_relaxed(s1, 1)".into(),
        format!("hsa_queue_add_write_index_relaxed(q0, 1) -> {index}"),
        format!("hsa_queue_load_read_index_scacquire(q0) -> {index}"),
        format!("hsa_signal_store_screlease(doorbell q0, {index})"),
        format!("hsa_signal_wait_scacquire(s1, LT 1, 1000 ticks, ACTIVE) -> {waited}"),
    ]
}

/// The kernel-argument block, block `#n` of the host's kernarg pool, allocated and granted to the GPU.
pub fn kernarg_block(n: usize, bytes: usize) -> [String; 2] {
    [
        format!("hsa_amd_memory_pool_allocate(0x110, {bytes} bytes, flags 0) -> #{n}"),
        format!("hsa_amd_agents_allow_access([gpu], flags null, #{n})"),
    ]
}

/// Fails if the trace allocated anything.
#[track_caller]
pub fn assert_nothing_allocated(trace: &[String]) {
    assert!(
        !trace
            .iter()
            .any(|l| l.contains("hsa_amd_memory_pool_allocate")),
        "{trace:#?}"
    );
}

pub const OPEN: &[&str] = &[
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
