//! The plugin against the fake HSA runtime ([`super::fake`]): the calls it makes (in order, with their arguments),
//! what it hands out, and how each failure is cleaned up and reported; and the plugin on this machine's runtime, if
//! any.

use super::dispatch::header_word;
use super::failure::on_system_event;
use super::fake::*;
use super::library::initialise;
use super::sys::*;
use super::*;
use crate::plugin::PluginError;
use crate::plugin::{Arg, Device, Kernel};
use offload_model::abi::Construct;
use offload_model::fatbin::ImageFormat;
use offload_model::{device_print, gpu_panic};
use std::sync::atomic::Ordering;

mod fixtures;
mod lanes;
mod protocols;

use fixtures::*;

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
    let limits = d.limits();
    assert_eq!(limits.max_threads, 512);
    assert_eq!(limits.defaults(Construct::Spmd), (104, 256));
    assert_eq!(
        limits.defaults(Construct::TeamsDistributeParallelFor),
        (832, 256)
    );
    assert_eq!(d.rank(&image(code_object(true))), Some(1));
}

#[test]
fn allocations_come_from_the_coarse_grained_pool_zero_filled_in_words() {
    let d = device(Config::new(0x2002));
    let p = d.memory().alloc(10).unwrap();
    assert_trace(&[
        "hsa_amd_memory_pool_allocate(0x210, 12 bytes, flags 0) -> #0",
        "hsa_amd_memory_fill(#0, 0x0, 3 words)",
    ]);
    // SAFETY: the fake's device memory is host memory, 12 bytes here.
    let bytes = unsafe { std::slice::from_raw_parts(p as *const u8, 12) };
    assert!(bytes.iter().all(|&b| b == 0));
    assert_eq!(p % 16, 0);
    d.memory().alloc(0).unwrap();
    assert_trace(&[
        "hsa_amd_memory_pool_allocate(0x210, 4 bytes, flags 0) -> #1",
        "hsa_amd_memory_fill(#1, 0x0, 1 words)",
    ]);
    // SAFETY: allocated above, not used afterwards.
    unsafe { d.memory().free(p) };
    assert_trace(&["hsa_amd_memory_pool_free(#0)"]);
    let e = reason(d.memory().alloc(usize::MAX).unwrap_err());
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
    let p = d.memory().alloc(size).unwrap();
    take_trace();
    let data: Vec<u8> = (0..size).map(|i| (i * 7 % 251) as u8).collect();
    // SAFETY: `data` holds `size` bytes, and so does the allocation.
    unsafe { d.memory().copy_to_device(p, data.as_ptr(), size) }.unwrap();
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
    unsafe {
        d.memory()
            .copy_from_device(back.as_mut_ptr(), p + 8, size - 8)
    }
    .unwrap();
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
    unsafe { d.memory().copy_to_device(p, data.as_ptr(), 0) }.unwrap();
    assert_trace(&[]);
}

/// The small version of the test above, which Miri runs too.
#[test]
fn a_small_copy_round_trips_through_one_chunk() {
    let d = device(Config::new(0x201A));
    let p = d.memory().alloc(24).unwrap();
    let data: [u8; 24] = std::array::from_fn(|i| i as u8 + 1);
    let mut back = [0u8; 20];
    // SAFETY: 24 bytes each way, within the allocation.
    unsafe {
        d.memory().copy_to_device(p, data.as_ptr(), 24).unwrap();
        d.memory()
            .copy_from_device(back.as_mut_ptr(), p + 4, 20)
            .unwrap();
    }
    assert_eq!(back, data[4..]);
}

#[test]
fn a_failed_copy_says_what_its_signal_reads() {
    let mut config = Config::new(0x2004);
    config.copy_leaves = -1;
    let d = device(config);
    let p = d.memory().alloc(64).unwrap();
    let mut back = [0u8; 64];
    // SAFETY: 64 bytes each.
    let e = reason(unsafe { d.memory().copy_from_device(back.as_mut_ptr(), p, 64) }.unwrap_err());
    assert_eq!(
        e,
        "the copy of 64 bytes failed (hsa_amd_memory_async_copy's signal reads -1) on AMD GPU 0 (gfx90a)"
    );
}

#[test]
fn images_load_from_an_aligned_copy_and_kernels_are_their_descriptor_symbols() {
    let d = device(Config::new(0x2005));
    let loaded = d.load_image(&image(code_object(false))).unwrap();
    // No panic record's global (an image built before panic reports), nor the print buffer's.
    assert_lines(&[load_trace(), owned(&[NO_PANIC_GLOBAL, NO_PRINT_GLOBAL])].concat());
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
    assert_trace(
        &[
            &LOAD[..3],
            &[
                "hsa_executable_freeze(e0) -> HSA_STATUS_ERROR_FROZEN_EXECUTABLE",
                "hsa_executable_destroy(e0)",
                "hsa_code_object_reader_destroy(r0)",
            ],
        ]
        .concat(),
    );
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
    // Owners release in reverse order of creation.
    assert_trace(
        &[
            LOAD,
            &[
                "hsa_executable_destroy(e0)",
                "hsa_code_object_reader_destroy(r0)",
            ],
        ]
        .concat(),
    );
}

#[test]
fn a_launch_publishes_one_packet_with_its_kernarg_block_and_waits_for_it() {
    let d = device(Config::new(0x2009));
    let k = saxpy(&*d);
    let args = [Arg::new(0x1111), Arg::new(0x2222), Arg::new(0x3333)];
    // SAFETY: the fake runs no code.
    unsafe { d.launch(k, &KernelArgs::from(&args[..]), params(4, 64, 256)) }.unwrap();
    assert_lines(&[kernarg_block(0, 256).to_vec(), dispatch(0, 0)].concat());
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
    unsafe { d.launch(k, &KernelArgs::from(&args[..1]), params(1, 1, 0)) }.unwrap();
    assert_lines(&dispatch(1, 0));
    let many = vec![Arg::new(5); 40];
    // SAFETY: as above.
    unsafe { d.launch(k, &KernelArgs::from(&many[..]), params(1, 1, 0)) }.unwrap();
    assert_lines(
        &[
            kernarg_block(1, 512).to_vec(),
            vec!["hsa_amd_memory_pool_free(#0)".into()],
            dispatch(2, 0),
        ]
        .concat(),
    );
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
    unsafe { d.launch(k, &KernelArgs::default(), params(1, 1, 0)) }.unwrap();
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
    let e = unsafe { d.launch(k, &KernelArgs::default(), params(2, 64, 32 * 1024)) }.unwrap_err();
    assert!(!e.device_lost());
    assert_eq!(
        reason(e.clone()),
        "the launch asks for 32768 bytes of team-shared memory and the kernel has 100 bytes of static LDS; the \
         GPU allows at most 32768 bytes per team (a launch of 2 teams of 64 threads with 32768 bytes of \
         team-shared memory) on AMD GPU 0 (gfx90a)"
    );
    // SAFETY: as above.
    let e = unsafe { d.launch(k, &KernelArgs::default(), params(1, 1024, 0)) }.unwrap_err();
    assert!(
        reason(e.clone()).starts_with("too many threads per team: 1024, and the GPU allows 512"),
        "{}",
        reason(e.clone())
    );
    // SAFETY: as above.
    let e = unsafe { d.launch(Kernel(9), &KernelArgs::default(), params(1, 1, 0)) }.unwrap_err();
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
    let e = unsafe { d.launch(k, &KernelArgs::default(), params(1, 1, 0)) }.unwrap_err();
    assert!(e.device_lost());
    assert_eq!(
        reason(e.clone()),
        "the kernel trapped (HSA_STATUS_ERROR_EXCEPTION): a panic in region code, such as an index out of \
         bounds; the GPU does not report its message; the HSA queue is unusable, so the device is marked lost"
    );
    assert_lines(&[kernarg_block(0, 256).to_vec(), dispatch(0, 1)].concat());
    // SAFETY: as above.
    let again = unsafe { d.launch(k, &KernelArgs::default(), params(1, 1, 0)) }.unwrap_err();
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
    let e = unsafe { d.launch(k, &KernelArgs::default(), params(1, 1, 0)) }.unwrap_err();
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
    let e = reason(d.memory().alloc(8).unwrap_err());
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
    let e = reason(d.memory().alloc(8).unwrap_err());
    assert_eq!(
        e,
        "hsa_amd_memory_pool_allocate(8 bytes) failed: HSA_STATUS_ERROR_OUT_OF_RESOURCES: The runtime failed \
         to allocate the necessary resources. (65536 MiB of device memory in all) on AMD GPU 0 (gfx90a)"
    );
    take_trace();
    let p = d.memory().alloc(8).unwrap();
    take_trace();
    fail_next("hsa_amd_agents_allow_access", HSA_STATUS_ERROR);
    let mut back = [0u8; 8];
    // SAFETY: 8 bytes each.
    let e = reason(unsafe { d.memory().copy_from_device(back.as_mut_ptr(), p, 8) }.unwrap_err());
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
    let e = reason(unsafe { d.memory().copy_from_device(back.as_mut_ptr(), p, 8) }.unwrap_err());
    assert!(e.starts_with("hsa_signal_create failed: "), "{e}");
    assert_trace(&[
        "hsa_amd_memory_pool_allocate(0x110, 4194304 bytes, flags 0) -> #3",
        "hsa_amd_agents_allow_access([gpu], flags null, #3)",
        "hsa_signal_create(1, 0 consumers) -> HSA_STATUS_ERROR_OUT_OF_RESOURCES",
        "hsa_amd_memory_pool_free(#3)",
    ]);
    // The next copy makes the staging buffer afresh and works.
    // SAFETY: as above.
    unsafe { d.memory().copy_from_device(back.as_mut_ptr(), p, 8) }.unwrap();
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
    unsafe { d.launch(k, &KernelArgs::default(), params(1, 1, 0)) }.unwrap();
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
    let p = d.memory().alloc(8).unwrap();
    let mut back = [0u8; 8];
    // SAFETY: 8 bytes each; the fake runs no code.
    unsafe {
        d.memory()
            .copy_from_device(back.as_mut_ptr(), p, 8)
            .unwrap();
        d.launch(k, &KernelArgs::default(), params(1, 1, 0))
            .unwrap();
    }
    take_trace();
    drop(d);
    // The launch lane (its signal, its kernel-argument buffer, then its queue), then the staging buffer and its
    // signal.
    assert_trace(&[
        "hsa_signal_destroy(s1)",
        "hsa_amd_memory_pool_free(#2)",
        "hsa_queue_destroy(q0)",
        "hsa_amd_memory_pool_free(#1)",
        "hsa_signal_destroy(s2)",
    ]);
}

#[test]
#[cfg_attr(miri, ignore = "Miri cannot dlopen")]
fn without_rocm_discovery_says_why_and_does_not_panic() {
    match AmdGpu.discover() {
        Ok(found) => {
            eprintln!(
                "note: this machine has {} AMD GPU(s); the no-ROCm case is not checked",
                found.devices.len()
            );
        }
        Err(why) => {
            let why = why.to_string();
            eprintln!("amdgpu: {why}");
            // SAFETY: opens the library by name only.
            let present = library::LIBRARY_NAMES
                .iter()
                .any(|n| unsafe { libloading::Library::new(*n) }.is_ok());
            if !present {
                assert!(
                    why.starts_with("libhsa-runtime64.so.1 not found: ROCm is not installed"),
                    "{why}"
                );
            }
            // A second discovery gives the same answer (the runtime is loaded once).
            assert_eq!(AmdGpu.discover().err().map(|e| e.to_string()), Some(why));
        }
    }
}

#[test]
fn gpus_come_before_the_host_elf_devices() {
    let names: Vec<_> = super::super::all().iter().map(|p| p.name()).collect();
    assert_eq!(names, ["cuda", "amdgpu", "host-elf", "gpu-sim"]);
}
