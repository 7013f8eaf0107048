//! GPU plugins where their driver is not installed (this machine, CI), for tests/cuda.rs and tests/amdgpu.rs: such a
//! plugin finds no devices, says why under `OFFLOAD_INFO`, and changes nothing else. Where the driver is installed
//! the plugin may find GPUs, which changes the device numbering and the reasons; the cases then print a note and
//! check only what must hold everywhere (correct results).

use super::{probe, Run};
use std::path::Path;
use std::process::Command;

/// A GPU plugin and what it says where its driver is missing.
pub struct Plugin {
    /// Its name in `OFFLOAD_PLUGINS`.
    pub name: &'static str,
    /// The `OFFLOAD_INFO` line saying it has no devices.
    pub no_devices: &'static str,
    /// How a MANDATORY error gives its reason: `(` and this follow "no offload device is available".
    unavailable: &'static str,
    /// How its driver library's file names start.
    libraries: &'static [&'static str],
    /// Where else than the usual library directories its driver library may be.
    extra_dirs: &'static [&'static str],
    /// Why, where its driver is installed, only results are checked.
    installed_note: &'static str,
}

pub const CUDA: Plugin = Plugin {
    name: "cuda",
    no_devices:
        "offload: plugin cuda has no devices: libcuda.so not found: no NVIDIA driver installed",
    unavailable: "cuda: libcuda.so not found",
    // What cudarc's `is_culib_present` tries to open.
    libraries: &["libcuda.so", "libcuda64"],
    extra_dirs: &["/usr/local/cuda/lib64", "/usr/lib/wsl/lib"],
    installed_note: "a libcuda is installed here, so the cuda plugin may find devices",
};

pub const AMDGPU: Plugin = Plugin {
    name: "amdgpu",
    no_devices:
        "offload: plugin amdgpu has no devices: libhsa-runtime64.so.1 not found: ROCm is not installed",
    unavailable: "amdgpu: libhsa-runtime64.so.1 not found: ROCm is not installed",
    // Where the amdgpu plugin looks for `libhsa-runtime64.so.1`.
    libraries: &["libhsa-runtime64.so"],
    extra_dirs: &["/opt/rocm/lib"],
    installed_note: "an HSA runtime (libhsa-runtime64) is installed here, so the amdgpu plugin may find devices or \
                     fail for another reason",
};

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

impl Plugin {
    /// Whether its driver library could be loaded here.
    pub fn installed(&self) -> bool {
        library_installed(self.libraries, self.extra_dirs)
    }

    /// True where the no-driver behaviour can be checked; prints why not elsewhere.
    pub fn absent(&self, test: &str) -> bool {
        let present = self.installed();
        if present {
            eprintln!(
                "note: {test}: {}; only results are checked",
                self.installed_note
            );
        }
        !present
    }

    /// This plugin alone, with `OFFLOAD_INFO`: it is known, and without its driver has no devices, says so before
    /// the region is placed, and the region falls back to the host.
    pub fn alone_falls_back_and_says_why(&self) {
        let r = probe(
            &["double"],
            &[("OFFLOAD_PLUGINS", self.name), ("OFFLOAD_INFO", "1")],
        );
        assert!(r.out.status.success(), "{}", r.describe());
        assert_eq!(r.get("results_correct"), "true", "{}", r.describe());
        let err = r.stderr();
        assert!(
            !err.contains("unknown plugin"),
            "OFFLOAD_PLUGINS={} names a plugin this build knows:\n{err}",
            self.name
        );
        if !self.absent(&format!("{}_alone", self.name)) {
            return;
        }
        assert_eq!(r.get("num_devices"), "0", "{}", r.describe());
        assert_eq!(r.get("initial_device"), "0");
        assert_eq!(r.get("ran_on"), "host", "{}", r.describe());
        assert!(err.contains(self.no_devices), "{err}");
        assert!(
            err.contains(
                "offload: launch offload_tests::kernels::double on the host (host-fallback): no offload device is \
                 available"
            ),
            "{err}"
        );
        // The reason comes first: discovery runs before the region is placed.
        assert!(
            err.find(self.no_devices) < err.find("host-fallback"),
            "{err}"
        );
    }

    /// The probe's `scenario` with this plugin alone and no `OFFLOAD_INFO`: it succeeds with correct results and,
    /// without the driver, runs on the host. Returns the run where the driver is missing.
    pub fn alone_without_info(&self, scenario: &str, test: &str) -> Option<Run> {
        let r = probe(&[scenario], &[("OFFLOAD_PLUGINS", self.name)]);
        assert!(r.out.status.success(), "{}", r.describe());
        assert_eq!(r.get("results_correct"), "true", "{}", r.describe());
        if !self.absent(test) {
            return None;
        }
        assert_eq!(r.get("ran_on"), "host", "{}", r.describe());
        Some(r)
    }

    /// MANDATORY with this plugin alone and no driver: the program stops before the region runs, with a message
    /// that says why (with `OFFLOAD_INFO` the reason is on stderr too). Returns the stderr of the run without
    /// `OFFLOAD_INFO` where the driver is missing.
    pub fn mandatory_alone_stops_and_says_why(&self) -> Option<String> {
        if !self.absent("mandatory") {
            return None;
        }
        let r = probe(
            &["double"],
            &[
                ("OFFLOAD_PLUGINS", self.name),
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
            err.contains(&format!(
                "no offload device is available ({}",
                self.unavailable
            )),
            "{err}"
        );

        // With OFFLOAD_INFO the reason there is no device is on stderr too.
        let r = probe(
            &["double"],
            &[
                ("OFFLOAD_PLUGINS", self.name),
                ("OMP_TARGET_OFFLOAD", "MANDATORY"),
                ("OFFLOAD_INFO", "1"),
            ],
        );
        assert!(!r.out.status.success(), "{}", r.describe());
        assert!(r.stderr().contains(self.no_devices), "{}", r.describe());
        Some(err)
    }

    /// Every plugin (no `OFFLOAD_PLUGINS`), this one's driver and those of `also_missing` not installed: this plugin
    /// says why it has nothing and the region runs on the host-elf device, still device 0.
    pub fn with_every_plugin_host_elf_is_still_device_0(&self, also_missing: &[&Plugin]) {
        let r = probe(&["double"], &[("OFFLOAD_INFO", "1")]);
        assert!(r.out.status.success(), "{}", r.describe());
        assert_eq!(r.get("results_correct"), "true", "{}", r.describe());
        if !self.absent("every_plugin") || also_missing.iter().any(|p| p.installed()) {
            return;
        }
        assert_eq!(r.get("num_devices"), "1", "{}", r.describe());
        assert_eq!(r.get("initial_device"), "1");
        assert_eq!(r.get("default_device"), "0");
        assert_eq!(r.get("ran_on"), "device", "{}", r.describe());
        let err = r.stderr();
        // This plugin is tried (and says why it has nothing) ...
        assert!(err.contains(self.no_devices), "{err}");
        // ... and the region runs on the host-elf device, numbered 0.
        assert!(
            err.contains(
                "offload: launch offload_tests::kernels::double (entry \
                 __omp_offloading_rs_13offload_tests7kernels6double) on device 0 (host-elf)"
            ),
            "{err}"
        );
    }
}

/// Two host-elf devices (`OFFLOAD_HOST_DEVICES=2`) with the plugins `OFFLOAD_PLUGINS` names (every plugin if
/// `None`), under `OFFLOAD_INFO`: a region on device 0 or 1 runs on that host-elf device, and stderr says so and
/// also contains each of `says`.
pub fn host_elf_devices_keep_their_numbers(plugins: Option<&str>, says: &[&str]) {
    let mut env = vec![("OFFLOAD_HOST_DEVICES", "2"), ("OFFLOAD_INFO", "1")];
    env.extend(plugins.map(|p| ("OFFLOAD_PLUGINS", p)));
    for d in 0..2 {
        let r = probe(&["device", &d.to_string()], &env);
        assert_eq!(r.get("num_devices"), "2", "{}", r.describe());
        assert_eq!(r.get("ran_on"), "device", "{}", r.describe());
        assert_eq!(r.get("results_correct"), "true");
        let err = r.stderr();
        assert!(
            err.contains(&format!("on device {d} (host-elf)")),
            "{}",
            r.describe()
        );
        for s in says {
            assert!(err.contains(s), "{}", r.describe());
        }
    }
}
