//! The GPU protocols' host side on the fake runtime: the panic record and the print buffer each image's globals
//! point at, set up once per GPU, read after a failed dispatch, drained after each launch.

use super::fixtures::*;
use super::*;

/// A machine whose images have the global `symbol` (the panic record's or the print buffer's).
fn with_global(gpu: u64, symbol: &'static str) -> Config {
    let mut config = Config::new(gpu);
    config.symbols.push((symbol, HSA_SYMBOL_KIND_VARIABLE));
    config
}

/// What the loaded image's global `symbol` points at.
fn pointed_at<T>(symbol: &str) -> *mut T {
    let global = variable(symbol).expect("the plugin asked the global's address");
    // SAFETY: the fake's 8 bytes of the global, which the plugin's copy wrote.
    (unsafe { *global }) as *mut T
}

/// The record a loaded image's global points at.
fn record() -> *mut gpu_panic::PanicRecord {
    pointed_at(gpu_panic::SYMBOL)
}

/// The print buffer a loaded image's global points at.
fn print_buffer() -> *mut device_print::Header {
    pointed_at(device_print::SYMBOL)
}

/// Image 0 (symbol `k2`, the machine's third) pointing its global `symbol` at a fresh block `#1` of `bytes` in host
/// memory: the global looked up, the block allocated from the host's fine-grained pool and granted to the GPU, and
/// its address copied into the global as any copy to the device (through a staging buffer, `#2`, made for it).
fn points_global(symbol: &str, bytes: usize) -> Vec<String> {
    vec![
        format!("hsa_executable_get_symbol_by_name(e0, {symbol:?}, gpu)"),
        "hsa_executable_symbol_get_info(k2, TYPE)".into(),
        "hsa_executable_symbol_get_info(k2, VARIABLE_SIZE)".into(),
        "hsa_executable_symbol_get_info(k2, VARIABLE_ADDRESS) -> #0".into(),
        format!("hsa_amd_memory_pool_allocate(0x110, {bytes} bytes, flags 0) -> #1"),
        "hsa_amd_agents_allow_access([gpu], flags null, #1)".into(),
        "hsa_amd_memory_pool_allocate(0x110, 4194304 bytes, flags 0) -> #2".into(),
        "hsa_amd_agents_allow_access([gpu], flags null, #2)".into(),
        "hsa_signal_create(1, 0 consumers) -> s2".into(),
        "hsa_signal_store_relaxed(s2, 1)".into(),
        "hsa_amd_memory_async_copy(#0, gpu, #2, gpu, 8 bytes, 0 deps, s2)".into(),
        "hsa_signal_wait_scacquire(s2, LT 1, 1000 ticks, ACTIVE) -> 0".into(),
    ]
}

/// A second image's global points at the same block `block` as the first's: copied, nothing allocated.
#[track_caller]
fn assert_second_image_points_at<T>(d: &dyn Device, symbol: &str, block: *mut T) {
    d.load_image(&image(code_object(true))).unwrap();
    let trace = take_trace();
    assert_nothing_allocated(&trace);
    assert_eq!(trace.iter().filter(|l| l.contains("async_copy")).count(), 1);
    assert_eq!(pointed_at::<T>(symbol), block);
}

#[test]
fn each_image_points_at_the_gpus_one_panic_record_in_host_memory_it_may_reach() {
    let d = device(with_global(0x201B, gpu_panic::SYMBOL));
    d.load_image(&image(code_object(true))).unwrap();
    let bytes = std::mem::size_of::<gpu_panic::PanicRecord>();
    let points = points_global(gpu_panic::SYMBOL, bytes);
    assert_lines(&[load_trace(), points, owned(&[NO_PRINT_GLOBAL])].concat());
    let record = record();
    assert_eq!(trace_name(record as usize), "#1");
    // Zero-initialised: EMPTY, nothing written.
    // SAFETY: the plugin's live record; no dispatch runs.
    assert!(unsafe { gpu_panic::take(record) }.is_none());
    assert_second_image_points_at(&*d, gpu_panic::SYMBOL, record);
}

#[test]
fn a_failed_dispatch_whose_record_is_written_is_the_panic_there() {
    let d = device(with_global(0x201C, gpu_panic::SYMBOL));
    let k = saxpy(&*d);
    // The kernel's first panicking thread, as offload-device's handler writes the record, then the trap.
    let site = gpu_panic::Site {
        file: "examples/saxpy.rs",
        line: 12,
        column: 9,
        block: 3,
        thread: 17,
    };
    // SAFETY: the record the image's global points at, written as a GPU thread does.
    assert!(unsafe { gpu_panic::record_str(record(), "", &site) });
    set_on_dispatch(OnDispatch::QueueError(HSA_STATUS_ERROR_EXCEPTION));
    // SAFETY: the fake runs no code.
    let e = unsafe { d.launch(k, &KernelArgs::default(), params(1, 1, 0)) }.unwrap_err();
    match &e {
        PluginError::Panic {
            message,
            location,
            thread,
            lost,
        } => {
            assert_eq!(message, crate::plugin::gpu::panic::NO_MESSAGE);
            assert_eq!(
                location.as_ref(),
                Some(&("examples/saxpy.rs".to_string(), 12, 9))
            );
            assert_eq!(*thread, Some((3, 17)));
            assert!(*lost);
        }
        e => panic!("not a panic: {e:?}"),
    }
    assert!(e.device_lost());
    // Taken: the record is EMPTY again, and the dead queue's next launch is the trap alone.
    // SAFETY: as above; no dispatch runs.
    assert!(unsafe { gpu_panic::take(record()) }.is_none());
    // SAFETY: as above.
    let again = unsafe { d.launch(k, &KernelArgs::default(), params(1, 1, 0)) }.unwrap_err();
    assert!(matches!(again, PluginError::Trap { .. }), "{again:?}");
    assert!(reason(again).starts_with("the kernel trapped (HSA_STATUS_ERROR_EXCEPTION)"));
}

#[test]
fn a_record_that_cannot_be_set_up_fails_no_load_and_the_trap_says_so() {
    let d = device(with_global(0x201D, gpu_panic::SYMBOL));
    fail_next(
        "hsa_amd_memory_pool_allocate",
        HSA_STATUS_ERROR_OUT_OF_RESOURCES,
    );
    let k = saxpy(&*d);
    set_on_dispatch(OnDispatch::QueueError(HSA_STATUS_ERROR_EXCEPTION));
    // SAFETY: the fake runs no code.
    let e = unsafe { d.launch(k, &KernelArgs::default(), params(1, 1, 0)) }.unwrap_err();
    assert!(matches!(e, PluginError::Trap { .. }), "{e:?}");
    let message = reason(e);
    assert!(
        message.ends_with(&format!(
            "so the device is marked lost (an image's panic record could not be set \
             (hsa_amd_memory_pool_allocate({} bytes) failed: HSA_STATUS_ERROR_OUT_OF_RESOURCES: The runtime \
             failed to allocate the necessary resources. on AMD GPU 0 (gfx90a)): a panic in region code may trap \
             without its location)",
            std::mem::size_of::<gpu_panic::PanicRecord>()
        )),
        "{message}"
    );
    // A global of another size is no pointer to the record: refused the same way. (The first device goes before
    // its machine does.)
    drop(d);
    let mut config = with_global(0x201E, gpu_panic::SYMBOL);
    config.variable_size = 4;
    let d = device(config);
    d.load_image(&image(code_object(true))).unwrap();
    assert_nothing_allocated(&take_trace());
}

/// The GPU of a machine as the plugin opens it, for what only the plugin's own type says.
fn amd_device(config: Config) -> AmdGpuDevice {
    let hsa = install(config);
    let machine = discovery::machine(hsa).unwrap();
    let d = AmdGpuDevice::open(hsa, 0, machine.gpus[0], &machine).unwrap();
    take_trace();
    d
}

/// A line as region code prints it, into the buffer the images' global points at.
fn print_line(line: std::fmt::Arguments<'_>) {
    // SAFETY: the plugin's live buffer; no drain runs meanwhile.
    unsafe { device_print::print(print_buffer(), line, true) };
}

#[test]
#[cfg_attr(
    miri,
    ignore = "a mebibyte print buffer: too slow under Miri (the protocol runs under Miri in offload-model)"
)]
fn each_image_points_at_the_gpus_one_print_buffer_which_each_launch_drains() {
    let d = device(with_global(0x201F, device_print::SYMBOL));
    // Before any image: nothing to drain, and no runtime call.
    assert_eq!(d.take_printed(), (Vec::new(), 0));
    let loaded = d.load_image(&image(code_object(true))).unwrap();
    let bytes = std::mem::size_of::<device_print::Header>() + device_print::DATA_BYTES;
    let points = points_global(device_print::SYMBOL, bytes);
    assert_lines(&[load_trace(), owned(&[NO_PANIC_GLOBAL]), points].concat());
    let buffer = print_buffer();
    assert_eq!(trace_name(buffer as usize), "#1");
    // Zeroed, with the room for lines in its header.
    // SAFETY: the plugin's live buffer; no dispatch runs.
    unsafe {
        assert_eq!((*buffer).cap as usize, device_print::DATA_BYTES);
        assert_eq!((*buffer).used.load(Ordering::Relaxed), 0);
        assert_eq!((*buffer).lost.load(Ordering::Relaxed), 0);
        let data = std::slice::from_raw_parts(buffer.add(1).cast::<u8>(), device_print::DATA_BYTES);
        assert!(data.iter().all(|&b| b == 0));
    }
    // A kernel's lines, as offload-device's `println!` appends them, come out after its launch.
    let k = loaded.kernel(c"saxpy").ok().flatten().unwrap();
    take_trace();
    print_line(format_args!("team {} of {}", 0, 2));
    print_line(format_args!("team {} of {}", 1, 2));
    // SAFETY: the fake runs no code.
    unsafe { d.launch(k, &KernelArgs::default(), params(2, 1, 0)) }.unwrap();
    take_trace();
    let (printed, lost) = d.take_printed();
    assert_eq!(
        String::from_utf8(printed).unwrap(),
        "team 0 of 2\nteam 1 of 2\n"
    );
    assert_eq!(lost, 0);
    // Host memory: read without a runtime call.
    assert_trace(&[]);
    // Emptied for the next launch.
    // SAFETY: as above.
    assert_eq!(unsafe { (*buffer).used.load(Ordering::Relaxed) }, 0);
    assert_eq!(d.take_printed(), (Vec::new(), 0));
    // Lines that do not fit are counted, and the count is emptied too.
    let long = "x".repeat(999);
    let fits = device_print::DATA_BYTES / device_print::record_bytes(1000);
    for _ in 0..fits + 3 {
        print_line(format_args!("{long}"));
    }
    let (printed, lost) = d.take_printed();
    assert_eq!(printed.len(), fits * 1000);
    assert_eq!(lost, 3);
    assert_eq!(d.take_printed(), (Vec::new(), 0));
    // A second image points at the same buffer.
    assert_second_image_points_at(&*d, device_print::SYMBOL, buffer);
}

#[test]
#[cfg_attr(
    miri,
    ignore = "a mebibyte print buffer: too slow under Miri (the protocol runs under Miri in offload-model)"
)]
fn a_failed_launch_leaves_its_lines_to_be_drained() {
    let d = device(with_global(0x2020, device_print::SYMBOL));
    let k = saxpy(&*d);
    print_line(format_args!("before the trap"));
    set_on_dispatch(OnDispatch::QueueError(HSA_STATUS_ERROR_EXCEPTION));
    // SAFETY: the fake runs no code.
    let e = unsafe { d.launch(k, &KernelArgs::default(), params(1, 1, 0)) }.unwrap_err();
    assert!(e.device_lost());
    take_trace();
    // The dead queue does not stop the drain: the buffer is host memory.
    assert_eq!(d.take_printed(), (b"before the trap\n".to_vec(), 0));
    assert_trace(&[]);
}

#[test]
#[cfg_attr(
    miri,
    ignore = "a mebibyte print buffer: too slow under Miri (the protocol runs under Miri in offload-model)"
)]
fn a_print_buffer_that_cannot_be_set_up_fails_no_load_and_the_reason_is_kept() {
    let d = amd_device(with_global(0x2021, device_print::SYMBOL));
    assert_eq!(d.prints.unprinted(), None);
    fail_next(
        "hsa_amd_memory_pool_allocate",
        HSA_STATUS_ERROR_OUT_OF_RESOURCES,
    );
    let loaded = d.load_image(&image(code_object(true))).unwrap();
    assert!(loaded.kernel(c"saxpy").ok().flatten().is_some());
    assert_eq!(
        d.prints.unprinted().unwrap(),
        format!(
            "an image's print buffer could not be set (hsa_amd_memory_pool_allocate({} bytes) failed: \
             HSA_STATUS_ERROR_OUT_OF_RESOURCES: The runtime failed to allocate the necessary resources. on AMD GPU \
             0 (gfx90a)): what its region code prints is dropped",
            std::mem::size_of::<device_print::Header>() + device_print::DATA_BYTES
        )
    );
    // Nothing to drain; the global still holds null, so the device's `println!` drops its lines.
    assert_eq!(d.take_printed(), (Vec::new(), 0));
    assert!(print_buffer().is_null());
    drop(d);
    // A global of another size is no pointer to the buffer: refused the same way, nothing allocated.
    let mut config = with_global(0x2022, device_print::SYMBOL);
    config.variable_size = 4;
    let d = amd_device(config);
    d.load_image(&image(code_object(true))).unwrap();
    assert_nothing_allocated(&take_trace());
    assert!(
        d.prints
            .unprinted()
            .unwrap()
            .contains("the image's __offload_print_buffer is 4 bytes, not a device address"),
        "{:?}",
        d.prints.unprinted()
    );
    assert_eq!(d.take_printed(), (Vec::new(), 0));
}
