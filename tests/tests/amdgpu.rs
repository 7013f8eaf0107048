//! The `amdgpu` plugin where ROCm is not installed (this machine, CI): it finds no devices, says why under
//! `OFFLOAD_INFO`, and changes nothing else: regions fall back to the host or run on the host-elf device, still
//! device 0. Each case runs the probe binary in its own process, since the runtime reads the environment once.
//!
//! Where an HSA runtime is installed the amdgpu plugin may find GPUs (or fail differently, without a GPU), which
//! changes the device numbering and the reasons; those cases then print a note and check only what must hold
//! everywhere (correct results).

use std::collections::HashMap;
use std::path::Path;
use std::process::{Command, Output};

struct Run {
    out: Output,
    kv: HashMap<String, String>,
}

impl Run {
    fn get(&self, k: &str) -> &str {
        self.kv
            .get(k)
            .map(String::as_str)
            .unwrap_or_else(|| panic!("probe printed no {k}:\n{}", self.describe()))
    }
    fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.out.stderr).into_owned()
    }
    fn describe(&self) -> String {
        format!(
            "status {:?}\nstdout:\n{}\nstderr:\n{}",
            self.out.status,
            String::from_utf8_lossy(&self.out.stdout),
            self.stderr()
        )
    }
}

fn probe(args: &[&str], env: &[(&str, &str)]) -> Run {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_probe"));
    cmd.args(args);
    for k in [
        "OMP_TARGET_OFFLOAD",
        "OMP_DEFAULT_DEVICE",
        "OFFLOAD_PLUGINS",
        "OFFLOAD_INFO",
        "OFFLOAD_HOST_DEVICES",
    ] {
        cmd.env_remove(k);
    }
    cmd.envs(env.iter().copied());
    let out = cmd.output().expect("running the probe");
    let kv = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            l.split_once('=')
                .map(|(k, v)| (k.to_string(), v.to_string()))
        })
        .collect();
    Run { out, kv }
}

/// Whether the dynamic loader could find a library whose name starts with one of `prefixes`: in the loader's cache,
/// on `LD_LIBRARY_PATH`, or in the usual library directories (and `extra`).
fn library_installed(prefixes: &[&str], extra: &[&str]) -> bool {
    let matches = |name: &str| prefixes.iter().any(|p| name.starts_with(p));
    for ldconfig in ["ldconfig", "/sbin/ldconfig", "/usr/sbin/ldconfig"] {
        if let Ok(out) = Command::new(ldconfig).arg("-p").output() {
            if out.status.success() {
                if String::from_utf8_lossy(&out.stdout)
                    .lines()
                    .any(|l| matches(l.trim()))
                {
                    return true;
                }
                break;
            }
        }
    }
    let from_env = std::env::var("LD_LIBRARY_PATH").unwrap_or_default();
    let dirs = from_env
        .split(':')
        .filter(|d| !d.is_empty())
        .chain([
            "/lib",
            "/lib64",
            "/usr/lib",
            "/usr/lib64",
            "/lib/x86_64-linux-gnu",
            "/usr/lib/x86_64-linux-gnu",
        ])
        .chain(extra.iter().copied());
    for dir in dirs {
        let Ok(entries) = std::fs::read_dir(Path::new(dir)) else {
            continue;
        };
        if entries
            .flatten()
            .any(|e| matches(&e.file_name().to_string_lossy()))
        {
            return true;
        }
    }
    false
}

/// Whether an HSA runtime could be loaded (where the amdgpu plugin looks for `libhsa-runtime64.so.1`).
fn rocm_installed() -> bool {
    library_installed(&["libhsa-runtime64.so"], &["/opt/rocm/lib"])
}

/// Whether a CUDA driver library could be loaded (as tests/cuda.rs checks).
fn libcuda_installed() -> bool {
    library_installed(
        &["libcuda.so", "libcuda64"],
        &["/usr/local/cuda/lib64", "/usr/lib/wsl/lib"],
    )
}

/// True where the no-ROCm behaviour can be checked; prints why not elsewhere.
fn no_rocm(test: &str) -> bool {
    let present = rocm_installed();
    if present {
        eprintln!(
            "note: {test}: an HSA runtime (libhsa-runtime64) is installed here, so the amdgpu plugin may find \
             devices or fail for another reason; only results are checked"
        );
    }
    !present
}

const NO_DEVICES: &str =
    "offload: plugin amdgpu has no devices: libhsa-runtime64.so.1 not found: ROCm is not installed";

#[test]
fn amdgpu_alone_without_rocm_has_no_devices_says_why_and_runs_on_the_host() {
    let r = probe(
        &["double"],
        &[("OFFLOAD_PLUGINS", "amdgpu"), ("OFFLOAD_INFO", "1")],
    );
    assert!(r.out.status.success(), "{}", r.describe());
    assert_eq!(r.get("results_correct"), "true", "{}", r.describe());
    let err = r.stderr();
    assert!(
        !err.contains("unknown plugin"),
        "OFFLOAD_PLUGINS=amdgpu names a plugin this build knows:\n{err}"
    );
    if !no_rocm("amdgpu_alone") {
        return;
    }
    assert_eq!(r.get("num_devices"), "0", "{}", r.describe());
    assert_eq!(r.get("initial_device"), "0");
    assert_eq!(r.get("ran_on"), "host", "{}", r.describe());
    assert!(err.contains(NO_DEVICES), "{err}");
    assert!(
        err.contains(
            "offload: launch offload_tests::kernels::double on the host (host-fallback): no offload device is \
             available"
        ),
        "{err}"
    );
    // The reason comes first: discovery runs before the region is placed.
    assert!(err.find(NO_DEVICES) < err.find("host-fallback"), "{err}");
}

#[test]
fn amdgpu_without_rocm_is_quiet_without_offload_info() {
    let r = probe(&["double"], &[("OFFLOAD_PLUGINS", "amdgpu")]);
    assert!(r.out.status.success(), "{}", r.describe());
    assert_eq!(r.get("results_correct"), "true", "{}", r.describe());
    if !no_rocm("quiet") {
        return;
    }
    assert_eq!(r.get("ran_on"), "host");
    assert_eq!(r.stderr(), "", "no noise on stderr");
}

#[test]
fn a_region_defined_in_a_binary_falls_back_too() {
    let r = probe(&["bin-region"], &[("OFFLOAD_PLUGINS", "amdgpu")]);
    assert!(r.out.status.success(), "{}", r.describe());
    assert_eq!(r.get("results_correct"), "true", "{}", r.describe());
    if !no_rocm("bin_region") {
        return;
    }
    assert_eq!(r.get("ran_on"), "host", "{}", r.describe());
}

#[test]
fn mandatory_with_only_amdgpu_and_no_rocm_stops_with_a_clear_message() {
    if !no_rocm("mandatory") {
        return;
    }
    let r = probe(
        &["double"],
        &[
            ("OFFLOAD_PLUGINS", "amdgpu"),
            ("OMP_TARGET_OFFLOAD", "MANDATORY"),
        ],
    );
    assert!(!r.out.status.success(), "{}", r.describe());
    assert!(
        !r.kv.contains_key("ran_on"),
        "the region must not run: {}",
        r.describe()
    );
    assert_eq!(r.get("num_devices"), "0");
    let err = r.stderr();
    assert!(
        err.contains("region offload_tests::kernels::double could not run on a device"),
        "{err}"
    );
    assert!(err.contains("OMP_TARGET_OFFLOAD=MANDATORY"), "{err}");
    // The message says why, even without OFFLOAD_INFO.
    assert!(
        err.contains(
            "no offload device is available (amdgpu: libhsa-runtime64.so.1 not found: ROCm is not installed"
        ),
        "{err}"
    );

    // With OFFLOAD_INFO the reason there is no device is on stderr too.
    let r = probe(
        &["double"],
        &[
            ("OFFLOAD_PLUGINS", "amdgpu"),
            ("OMP_TARGET_OFFLOAD", "MANDATORY"),
            ("OFFLOAD_INFO", "1"),
        ],
    );
    assert!(!r.out.status.success(), "{}", r.describe());
    assert!(r.stderr().contains(NO_DEVICES), "{}", r.describe());
}

#[test]
fn mandatory_with_both_gpu_plugins_and_neither_driver_names_both_reasons() {
    if !no_rocm("both_gpu_plugins") || libcuda_installed() {
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
    let r = probe(&["double"], &[("OFFLOAD_INFO", "1")]);
    assert!(r.out.status.success(), "{}", r.describe());
    assert_eq!(r.get("results_correct"), "true", "{}", r.describe());
    if !no_rocm("every_plugin") || libcuda_installed() {
        return;
    }
    assert_eq!(r.get("num_devices"), "1", "{}", r.describe());
    assert_eq!(r.get("initial_device"), "1");
    assert_eq!(r.get("default_device"), "0");
    assert_eq!(r.get("ran_on"), "device", "{}", r.describe());
    let err = r.stderr();
    // The amdgpu plugin is tried (and says why it has nothing) ...
    assert!(err.contains(NO_DEVICES), "{err}");
    // ... and the region runs on the host-elf device, numbered 0.
    assert!(
        err.contains(
            "offload: launch offload_tests::kernels::double (entry \
             __omp_offloading_rs_13offload_tests7kernels6double) on device 0 (host-elf)"
        ),
        "{err}"
    );
}

#[test]
fn naming_amdgpu_with_host_elf_keeps_the_host_elf_numbers() {
    if !no_rocm("numbers") {
        return;
    }
    let env = [
        ("OFFLOAD_PLUGINS", "host-elf,amdgpu"),
        ("OFFLOAD_HOST_DEVICES", "2"),
        ("OFFLOAD_INFO", "1"),
    ];
    for d in 0..2 {
        let r = probe(&["device", &d.to_string()], &env);
        assert_eq!(r.get("num_devices"), "2", "{}", r.describe());
        assert_eq!(r.get("ran_on"), "device", "{}", r.describe());
        assert_eq!(r.get("results_correct"), "true");
        let err = r.stderr();
        assert!(err.contains(&format!("on device {d} (host-elf)")), "{err}");
        assert!(err.contains(NO_DEVICES), "{err}");
    }
}
