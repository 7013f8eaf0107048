//! The `cuda` plugin where no NVIDIA driver is installed (this machine, CI): it finds no devices, says why under
//! `OFFLOAD_INFO`, and changes nothing else: regions fall back to the host or run on the host-elf device, still
//! device 0. Each case runs the probe binary in its own process, since the runtime reads the environment once.
//!
//! Where a libcuda is installed the cuda plugin may find GPUs, which changes the device numbering; those cases then
//! print a note and check only what must hold everywhere (correct results).

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

/// Whether the dynamic loader could find a CUDA driver library (what cudarc's `is_culib_present` tries to open):
/// in the loader's cache, on `LD_LIBRARY_PATH`, or in the usual library directories.
fn libcuda_installed() -> bool {
    let is_libcuda = |name: &str| name.starts_with("libcuda.so") || name.starts_with("libcuda64");
    for ldconfig in ["ldconfig", "/sbin/ldconfig", "/usr/sbin/ldconfig"] {
        if let Ok(out) = Command::new(ldconfig).arg("-p").output() {
            if out.status.success() {
                if String::from_utf8_lossy(&out.stdout)
                    .lines()
                    .any(|l| is_libcuda(l.trim()))
                {
                    return true;
                }
                break;
            }
        }
    }
    let from_env = std::env::var("LD_LIBRARY_PATH").unwrap_or_default();
    let dirs = from_env.split(':').filter(|d| !d.is_empty()).chain([
        "/lib",
        "/lib64",
        "/usr/lib",
        "/usr/lib64",
        "/lib/x86_64-linux-gnu",
        "/usr/lib/x86_64-linux-gnu",
        "/usr/local/cuda/lib64",
        "/usr/lib/wsl/lib",
    ]);
    for dir in dirs {
        let Ok(entries) = std::fs::read_dir(Path::new(dir)) else {
            continue;
        };
        if entries
            .flatten()
            .any(|e| is_libcuda(&e.file_name().to_string_lossy()))
        {
            return true;
        }
    }
    false
}

/// True where the no-driver behaviour can be checked; prints why not elsewhere.
fn no_driver(test: &str) -> bool {
    let present = libcuda_installed();
    if present {
        eprintln!(
            "note: {test}: a libcuda is installed here, so the cuda plugin may find devices; only results are \
             checked"
        );
    }
    !present
}

const NO_DEVICES: &str =
    "offload: plugin cuda has no devices: libcuda.so not found: no NVIDIA driver installed";

#[test]
fn cuda_alone_without_a_driver_has_no_devices_says_why_and_runs_on_the_host() {
    let r = probe(
        &["double"],
        &[("OFFLOAD_PLUGINS", "cuda"), ("OFFLOAD_INFO", "1")],
    );
    assert!(r.out.status.success(), "{}", r.describe());
    assert_eq!(r.get("results_correct"), "true", "{}", r.describe());
    let err = r.stderr();
    assert!(
        !err.contains("unknown plugin"),
        "OFFLOAD_PLUGINS=cuda names a plugin this build knows:\n{err}"
    );
    if !no_driver("cuda_alone") {
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
fn cuda_without_a_driver_is_quiet_without_offload_info() {
    let r = probe(&["double"], &[("OFFLOAD_PLUGINS", "cuda")]);
    assert!(r.out.status.success(), "{}", r.describe());
    assert_eq!(r.get("results_correct"), "true", "{}", r.describe());
    if !no_driver("quiet") {
        return;
    }
    assert_eq!(r.get("ran_on"), "host");
    assert_eq!(r.stderr(), "", "no noise on stderr");
}

#[test]
fn mandatory_with_only_cuda_and_no_driver_stops_with_a_clear_message() {
    if !no_driver("mandatory") {
        return;
    }
    let r = probe(
        &["double"],
        &[
            ("OFFLOAD_PLUGINS", "cuda"),
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
        err.contains("no offload device is available (cuda: libcuda.so not found"),
        "{err}"
    );
    assert!(
        !err.contains("cudarc") && !err.contains("Unable to dynamically load"),
        "a cudarc panic escaped:\n{err}"
    );

    // With OFFLOAD_INFO the reason there is no device is on stderr too.
    let r = probe(
        &["double"],
        &[
            ("OFFLOAD_PLUGINS", "cuda"),
            ("OMP_TARGET_OFFLOAD", "MANDATORY"),
            ("OFFLOAD_INFO", "1"),
        ],
    );
    assert!(!r.out.status.success(), "{}", r.describe());
    assert!(r.stderr().contains(NO_DEVICES), "{}", r.describe());
}

#[test]
fn with_every_plugin_the_host_elf_device_is_still_device_0() {
    let r = probe(&["double"], &[("OFFLOAD_INFO", "1")]);
    assert!(r.out.status.success(), "{}", r.describe());
    assert_eq!(r.get("results_correct"), "true", "{}", r.describe());
    if !no_driver("every_plugin") {
        return;
    }
    assert_eq!(r.get("num_devices"), "1", "{}", r.describe());
    assert_eq!(r.get("initial_device"), "1");
    assert_eq!(r.get("default_device"), "0");
    assert_eq!(r.get("ran_on"), "device", "{}", r.describe());
    let err = r.stderr();
    // The cuda plugin is tried (and says why it has nothing) ...
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
fn with_every_plugin_host_elf_devices_keep_their_numbers() {
    if !no_driver("numbers") {
        return;
    }
    let env = [("OFFLOAD_HOST_DEVICES", "2"), ("OFFLOAD_INFO", "1")];
    for d in 0..2 {
        let r = probe(&["device", &d.to_string()], &env);
        assert_eq!(r.get("num_devices"), "2", "{}", r.describe());
        assert_eq!(r.get("ran_on"), "device", "{}", r.describe());
        assert_eq!(r.get("results_correct"), "true");
        assert!(
            r.stderr().contains(&format!("on device {d} (host-elf)")),
            "{}",
            r.describe()
        );
    }
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
    assert!(err.contains(NO_DEVICES), "{err}");
}
