//! The `amdgpu` plugin where ROCm is not installed (this machine, CI): it finds no devices, says why under
//! `OFFLOAD_INFO`, and changes nothing else: regions fall back to the host or run on the host-elf device, still
//! device 0. Each case runs the probe binary in its own process, since the runtime reads the environment once.
//!
//! Where an HSA runtime is installed the amdgpu plugin may find GPUs (or fail differently, without a GPU), which
//! changes the device numbering and the reasons; those cases then print a note and check only what must hold
//! everywhere (correct results).

mod common;

use common::gpu::{host_elf_devices_keep_their_numbers, AMDGPU, CUDA};
use common::probe;

#[test]
fn amdgpu_alone_without_rocm_has_no_devices_says_why_and_runs_on_the_host() {
    AMDGPU.alone_falls_back_and_says_why();
}

#[test]
fn amdgpu_without_rocm_is_quiet_without_offload_info() {
    if let Some(r) = AMDGPU.alone_without_info("double", "quiet") {
        assert_eq!(r.stderr(), "", "no noise on stderr");
    }
}

#[test]
fn a_region_defined_in_a_binary_falls_back_too() {
    AMDGPU.alone_without_info("bin-region", "bin_region");
}

#[test]
fn mandatory_with_only_amdgpu_and_no_rocm_stops_with_a_clear_message() {
    AMDGPU.mandatory_alone_stops_and_says_why();
}

#[test]
fn mandatory_with_both_gpu_plugins_and_neither_driver_names_both_reasons() {
    if !AMDGPU.absent("both_gpu_plugins") || CUDA.installed() {
        eprintln!("note: a GPU runtime is installed here; the both-missing message is not checked");
        return;
    }
    let r = probe(
        &["double"],
        &[
            ("OFFLOAD_PLUGINS", "cuda,amdgpu"),
            ("OMP_TARGET_OFFLOAD", "MANDATORY"),
        ],
    );
    assert!(!r.out.status.success(), "{}", r.describe());
    assert!(!r.kv.contains_key("ran_on"), "{}", r.describe());
    let err = r.stderr();
    // In device-number order: cuda's reason, then amdgpu's.
    assert!(
        err.contains("no offload device is available (cuda: libcuda.so not found"),
        "{err}"
    );
    assert!(
        err.contains("; amdgpu: libhsa-runtime64.so.1 not found: ROCm is not installed"),
        "{err}"
    );
}

#[test]
fn with_every_plugin_the_host_elf_device_is_still_device_0() {
    AMDGPU.with_every_plugin_host_elf_is_still_device_0(&[&CUDA]);
}

#[test]
fn naming_amdgpu_with_host_elf_keeps_the_host_elf_numbers() {
    if !AMDGPU.absent("numbers") {
        return;
    }
    host_elf_devices_keep_their_numbers(Some("host-elf,amdgpu"), &[AMDGPU.no_devices]);
}
