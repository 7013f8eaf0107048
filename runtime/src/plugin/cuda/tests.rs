//! The CUDA plugin's logic that runs without a GPU: ranking, error mapping, the host-mapped slots.

use super::error::*;
use super::host_slot::*;
use super::rank::*;
use super::*;
use crate::plugin::error::PluginError;
use crate::plugin::gpu::host_block::{HostBlock, PlainBlock};
use crate::plugin::gpu::panic::{self, PanicReports};
use crate::registry::Image;
use cudarc::driver::sys::CUresult;
use offload_model::device_kind::NVPTX_TRIPLE;
use offload_model::device_print;
use offload_model::fatbin::ImageFormat;
use offload_model::gpu_panic;

const CUBIN: ImageFormat = ImageFormat::Cubin;
const PTX: ImageFormat = ImageFormat::Ptx;

#[test]
fn a_cubin_runs_on_its_major_version_with_an_equal_or_newer_minor() {
    assert_eq!(rank_for((9, 0), "sm_90", CUBIN), Some(3000));
    assert_eq!(rank_for((8, 6), "sm_86", CUBIN), Some(3000));
    assert_eq!(rank_for((8, 6), "sm_80", CUBIN), Some(2000));
    assert_eq!(rank_for((8, 9), "sm_86", CUBIN), Some(2006));
    assert_eq!(rank_for((8, 0), "sm_86", CUBIN), None, "newer minor");
    assert_eq!(rank_for((9, 0), "sm_80", CUBIN), None, "older major");
    assert_eq!(rank_for((8, 0), "sm_90", CUBIN), None, "newer major");
    assert_eq!(rank_for((10, 0), "sm_100", CUBIN), Some(3000));
    assert_eq!(rank_for((12, 0), "sm_100", CUBIN), None);
}

#[test]
fn ptx_runs_on_every_device_at_least_as_new_and_the_newest_ptx_wins() {
    assert_eq!(rank_for((9, 0), "sm_90", PTX), Some(1090));
    assert_eq!(rank_for((9, 0), "sm_80", PTX), Some(1080));
    assert_eq!(rank_for((10, 0), "sm_90", PTX), Some(1090));
    assert_eq!(rank_for((12, 0), "sm_100", PTX), Some(1100));
    assert_eq!(rank_for((8, 0), "sm_86", PTX), None);
    assert_eq!(rank_for((8, 6), "sm_90", PTX), None);
}

#[test]
fn every_cubin_outranks_every_ptx_and_an_exact_cubin_outranks_the_rest() {
    let cc = (8, 9);
    let exact = rank_for(cc, "sm_89", CUBIN).unwrap();
    let other = rank_for(cc, "sm_86", CUBIN).unwrap();
    let ptx = rank_for(cc, "sm_89", PTX).unwrap();
    assert!(exact > other && other > ptx, "{exact} {other} {ptx}");
}

#[test]
fn architecture_specific_images_run_only_on_their_architecture() {
    assert_eq!(rank_for((9, 0), "sm_90a", CUBIN), Some(3001));
    assert_eq!(rank_for((9, 0), "sm_90a", PTX), Some(1090));
    assert_eq!(rank_for((10, 0), "sm_90a", PTX), None);
    assert_eq!(rank_for((9, 0), "sm_89a", CUBIN), None);
}

#[test]
fn other_architectures_and_formats_are_not_ranked() {
    for arch in [
        "",
        "sm_",
        "sm_9",
        "gfx90a",
        "x86_64",
        "sm_9x",
        "compute_90",
        "sm_90f",
    ] {
        assert_eq!(rank_for((9, 0), arch, CUBIN), None, "{arch}");
        assert_eq!(rank_for((9, 0), arch, PTX), None, "{arch}");
    }
    for format in [ImageFormat::SharedObject, ImageFormat::Hsaco] {
        assert_eq!(rank_for((9, 0), "sm_90", format), None);
    }
}

fn image(bytes: &'static [u8], format: ImageFormat) -> Image {
    Image {
        bytes,
        format,
        triple: NVPTX_TRIPLE,
        arch: "sm_90",
        package: "p",
        package_tag: 0,
    }
}

#[test]
fn ptx_must_be_nul_terminated_and_a_cubin_an_elf_file() {
    assert!(check_image(&image(b".version 8.0\n\0", PTX)).is_ok());
    let e = check_image(&image(b".version 8.0\n", PTX)).unwrap_err();
    assert!(e.contains("not NUL-terminated"), "{e}");
    assert!(check_image(&image(b"", PTX)).is_err());
    assert!(check_image(&image(b"\x7fELF\x02\x01", CUBIN)).is_ok());
    let e = check_image(&image(b"junk", CUBIN)).unwrap_err();
    assert!(e.contains("not an ELF"), "{e}");
    assert!(check_image(&image(b"\x7fELF", ImageFormat::Hsaco)).is_err());
}

#[test]
fn a_trap_is_a_panic_in_region_code_and_loses_the_device() {
    let f = launch_failure(CUresult::CUDA_ERROR_ILLEGAL_INSTRUCTION, Stage::Wait, "cfg");
    assert!(f.device_lost());
    assert!(f.location().is_none());
    assert!(
        f.to_string().starts_with(
            "the kernel trapped (CUDA_ERROR_ILLEGAL_INSTRUCTION): a panic in region code"
        ),
        "{f}"
    );
}

#[test]
fn errors_of_a_kernel_that_died_lose_the_device() {
    use CUresult::*;
    for code in [
        CUDA_ERROR_LAUNCH_FAILED,
        CUDA_ERROR_ILLEGAL_ADDRESS,
        CUDA_ERROR_MISALIGNED_ADDRESS,
        CUDA_ERROR_ASSERT,
        CUDA_ERROR_HARDWARE_STACK_ERROR,
        CUDA_ERROR_LAUNCH_TIMEOUT,
        CUDA_ERROR_INVALID_PC,
    ] {
        for stage in [Stage::Launch, Stage::Wait] {
            let f = launch_failure(code, stage, "cfg");
            assert!(f.device_lost(), "{code:?}");
            assert!(f.to_string().contains(&format!("{code:?}")), "{f}");
        }
    }
    // Anything else once the kernel has started.
    assert!(launch_failure(CUDA_ERROR_UNKNOWN, Stage::Wait, "cfg").device_lost());
}

#[test]
fn a_refused_launch_keeps_the_device_and_names_the_error_and_configuration() {
    use CUresult::*;
    for code in [
        CUDA_ERROR_INVALID_VALUE,
        CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES,
        CUDA_ERROR_INVALID_HANDLE,
    ] {
        let f = launch_failure(code, Stage::Launch, "4 teams of 2048 threads");
        assert!(!f.device_lost(), "{code:?}");
        assert!(matches!(f, PluginError::Launch { .. }), "{f:?}");
        let message = f.to_string();
        assert!(
            message.starts_with(&format!("cuLaunchKernel failed: {code:?}")),
            "{message}"
        );
        assert!(message.contains("4 teams of 2048 threads"), "{message}");
    }
}

/// The device's panic reports with a record in plain host memory, as mapped pinned memory is to the host (the
/// record's own logic is `plugin::gpu::panic`'s, and tested there), and that memory, to be freed at the end.
fn reports() -> (PlainBlock, PanicReports<Option<HostSlot>>) {
    let block = PlainBlock::new(&panic::PROTOCOL);
    let host = block.host_address().unwrap();
    let slot = HostSlot {
        host,
        device: host.as_ptr() as sys::CUdeviceptr,
    };
    (block, PanicReports::new(Some(slot), None))
}

/// What a GPU's first panicking thread leaves in the record (offload-device's `report_location`).
fn panic_at(reports: &PanicReports<Option<HostSlot>>, line: u32, block: u32, thread: u32) {
    let site = gpu_panic::Site {
        file: "examples/saxpy.rs",
        line,
        column: 9,
        block,
        thread,
    };
    let record = reports.block.as_ref().unwrap().host.cast().as_ptr();
    // SAFETY: the slot's live record, written as the kernel would.
    assert!(unsafe { gpu_panic::record_str(record, "", &site) });
}

fn trapped() -> PluginError {
    launch_failure(CUresult::CUDA_ERROR_ILLEGAL_INSTRUCTION, Stage::Wait, "cfg")
}

#[test]
fn a_kernel_that_panicked_reports_where_from_its_record_and_loses_the_device() {
    let (block, reports) = reports();
    panic_at(&reports, 12, 3, 17);
    // SAFETY: no kernel runs.
    let e = unsafe { reports.failed(trapped()) };
    assert!(e.device_lost());
    assert!(matches!(&e, PluginError::Panic { lost: true, .. }), "{e:?}");
    assert_eq!(e.to_string(), panic::NO_MESSAGE);
    assert_eq!(
        e.location(),
        Some(&("examples/saxpy.rs".to_string(), 12, 9))
    );
    assert_eq!(e.thread(), Some((3, 17)));
    // Taken once: the next failure without a panic is the driver's trap.
    // SAFETY: as above.
    let again = unsafe { reports.failed(trapped()) };
    assert!(matches!(again, PluginError::Trap { .. }), "{again:?}");
    assert!(again.to_string().starts_with("the kernel trapped"));
    // SAFETY: nothing uses the record any more.
    unsafe { block.free(&panic::PROTOCOL) };
}

#[test]
fn a_refused_launch_leaves_the_record_alone() {
    let (block, reports) = reports();
    panic_at(&reports, 5, 0, 1);
    let refused = launch_failure(CUresult::CUDA_ERROR_INVALID_VALUE, Stage::Launch, "cfg");
    // SAFETY: no kernel runs.
    assert!(matches!(
        unsafe { reports.failed(refused) },
        PluginError::Launch { .. }
    ));
    // SAFETY: as above.
    assert!(unsafe { reports.take() }.is_some());
    // SAFETY: nothing uses the record any more.
    unsafe { block.free(&panic::PROTOCOL) };
}

#[test]
fn without_a_record_a_trap_says_why_there_is_none() {
    let reports = PanicReports::<Option<HostSlot>>::open(Err("cuMemHostAlloc failed".into()));
    // SAFETY: there is no record.
    let e = unsafe { reports.failed(trapped()) };
    assert!(e.device_lost());
    assert!(
        e.to_string().ends_with(
            "marked lost (no panic record (cuMemHostAlloc failed): a panic in region code traps without its \
             location)"
        ),
        "{e}"
    );
}

#[test]
fn a_global_that_is_not_eight_bytes_holds_no_device_address() {
    assert_eq!(not_a_pointer(device_print::SYMBOL, 8), None);
    assert_eq!(
        not_a_pointer(device_print::SYMBOL, 4).as_deref(),
        Some("the image's __offload_print_buffer is 4 bytes, not a device address")
    );
    assert!(not_a_pointer(gpu_panic::SYMBOL, 16).is_some());
}

#[test]
fn the_panic_records_entry_points_are_checked_at_discovery() {
    for s in [
        "cuMemHostAlloc",
        "cuMemHostGetDevicePointer_v2",
        "cuMemFreeHost",
        "cuModuleGetGlobal_v2",
    ] {
        assert!(REQUIRED_SYMBOLS.contains(&s), "{s}");
    }
}

#[test]
#[cfg_attr(miri, ignore = "Miri cannot dlopen")]
fn without_a_driver_discovery_says_why_and_does_not_panic() {
    // SAFETY: opens the library by name only.
    if unsafe { sys::is_culib_present() } {
        eprintln!("note: libcuda is installed here; the no-driver case is not checked");
        return;
    }
    let why = Cuda.discover().err().expect("no devices without a driver");
    assert!(matches!(why, PluginError::Unavailable { .. }), "{why:?}");
    assert!(why.to_string().starts_with("libcuda.so not found"), "{why}");
}

#[test]
fn cuda_comes_first_so_gpus_get_the_low_device_numbers() {
    let names: Vec<_> = crate::plugin::all().iter().map(|p| p.name()).collect();
    assert_eq!(names, ["cuda", "amdgpu", "host-elf", "gpu-sim"]);
}
