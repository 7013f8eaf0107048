//! The `cuda` plugin where no NVIDIA driver is installed (this machine, CI): it finds no devices, says why under
//! `OFFLOAD_INFO`, and changes nothing else: regions fall back to the host or run on the host-elf device, still
//! device 0. Each case runs the probe binary in its own process, since the runtime reads the environment once.
//!
//! Where a libcuda is installed the cuda plugin may find GPUs, which changes the device numbering; those cases then
//! print a note and check only what must hold everywhere (correct results).

mod common;

use common::gpu::{host_elf_devices_keep_their_numbers, CUDA};
use common::probe;

#[test]
fn cuda_alone_without_a_driver_has_no_devices_says_why_and_runs_on_the_host() {
    CUDA.alone_falls_back_and_says_why();
}

#[test]
fn cuda_without_a_driver_is_quiet_without_offload_info() {
    if let Some(r) = CUDA.alone_without_info("double", "quiet") {
        assert_eq!(r.stderr(), "", "no noise on stderr");
    }
}

#[test]
fn mandatory_with_only_cuda_and_no_driver_stops_with_a_clear_message() {
    if let Some(err) = CUDA.mandatory_alone_stops_and_says_why() {
        assert!(
            !err.contains("cudarc") && !err.contains("Unable to dynamically load"),
            "a cudarc panic escaped:\n{err}"
        );
    }
}

#[test]
fn with_every_plugin_the_host_elf_device_is_still_device_0() {
    CUDA.with_every_plugin_host_elf_is_still_device_0(&[]);
}

#[test]
fn with_every_plugin_host_elf_devices_keep_their_numbers() {
    if !CUDA.absent("numbers") {
        return;
    }
    host_elf_devices_keep_their_numbers(None, &[]);
    // Naming the plugins in another order does not renumber them either.
    let r = probe(
        &["bin-region"],
        &[("OFFLOAD_PLUGINS", "host-elf,cuda"), ("OFFLOAD_INFO", "1")],
    );
    assert_eq!(r.get("num_devices"), "1", "{}", r.describe());
    assert_eq!(r.get("ran_on"), "device", "{}", r.describe());
    assert_eq!(r.get("results_correct"), "true");
    let err = r.stderr();
    assert!(err.contains("on device 0 (host-elf)"), "{err}");
    assert!(err.contains(CUDA.no_devices), "{err}");
}
