//! `cargo offload doctor`: what each target and plugin needs, whether this machine has it, and how to get what is
//! missing (`--install` does it where it can: apt for Debian's packages, pip into a venv for CUDA's wheel). The
//! discovery is build support's own, so the doctor sees what a build would.

use offload_build::toolchain::{self, CudaTools};
use offload_model::device_kind::DeviceKind;
use std::process::Command;

const GPUS: &[DeviceKind] = &[DeviceKind::Nvptx, DeviceKind::Amdgcn];

/// One thing a target needs.
pub struct Check {
    pub what: &'static str,
    /// Where it was found, or why not.
    pub found: Result<String, String>,
    /// Which targets need it, and whether they can do without.
    pub for_targets: Need,
    pub required: bool,
    pub install: Install,
}

/// Who needs a check's tool: building for some targets, or a plugin at run time.
#[derive(Clone, Copy)]
pub enum Need {
    Targets(&'static [DeviceKind]),
    Plugin(DeviceKind),
}

impl Need {
    fn targets(self) -> &'static [DeviceKind] {
        match self {
            Need::Targets(t) => t,
            Need::Plugin(_) => &[],
        }
    }
}

impl std::fmt::Display for Need {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Need::Targets(t) => {
                let names: Vec<&str> = t.iter().map(|k| k.name()).collect();
                f.write_str(&names.join(", "))
            }
            Need::Plugin(k) => write!(f, "{} plugin", k.plugin()),
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Install {
    Apt(&'static [&'static str]),
    /// The pip wheel with ptxas and libdevice.
    CudaWheel,
    /// Not installable from here (a driver or runtime that comes with the GPU).
    Manual(&'static str),
}

fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or_default().to_string()
}

/// What each target and plugin needs, in the order the doctor lists them.
pub fn checks() -> Vec<Check> {
    let mut checks = compiler_checks();
    checks.extend(vendor_tool_checks());
    checks.extend(plugin_checks());
    checks
}

/// The compilers and linkers: rustup for the host targets, the device rustc and LLVM 22 for the GPUs.
fn compiler_checks() -> Vec<Check> {
    let rust = toolchain::find_rust("GPU");
    let llvm = toolchain::find_llvm("GPU");
    let rustup = Command::new("rustup").arg("--version").output();
    vec![
        Check {
            what: "rustup and a stable toolchain",
            found: match rustup {
                Ok(o) if o.status.success() => Ok(first_line(&String::from_utf8_lossy(&o.stdout))),
                _ => Err("rustup not found".into()),
            },
            for_targets: Need::Targets(&[DeviceKind::Host, DeviceKind::GpuSim]),
            required: true,
            install: Install::Manual("https://rustup.rs"),
        },
        Check {
            what: "device rustc with library sources (Debian's rustc 1.96, or a rustup nightly on LLVM 22)",
            found: rust
                .as_ref()
                .map(|r| format!("{} ({})", r.rustc.display(), first_line(&r.version)))
                .map_err(|e| e.to_string()),
            for_targets: Need::Targets(GPUS),
            required: true,
            install: Install::Apt(&["rustc-web", "cargo-web", "rust-web-src"]),
        },
        Check {
            what: "LLVM 22 (llvm-link, opt, llc)",
            found: llvm
                .as_ref()
                .map(|l| l.llc.parent().unwrap_or(&l.llc).display().to_string())
                .map_err(|e| e.to_string()),
            for_targets: Need::Targets(GPUS),
            required: true,
            install: Install::Apt(&["llvm-22"]),
        },
        Check {
            what: "ld.lld 22",
            found: match &llvm {
                Ok(l) => l
                    .lld
                    .as_ref()
                    .map(|p| p.display().to_string())
                    .ok_or_else(|| "not beside LLVM 22's tools".into()),
                Err(_) => Err("no LLVM 22".into()),
            },
            for_targets: Need::Targets(&[DeviceKind::Amdgcn]),
            required: true,
            install: Install::Apt(&["lld-22"]),
        },
    ]
}

/// The vendors' tools a GPU build uses where they are installed: ptxas, and the NVIDIA and AMD math libraries.
fn vendor_tool_checks() -> Vec<Check> {
    let cuda = CudaTools::find();
    vec![
        Check {
            what: "ptxas (cubins; without it images are PTX only)",
            found: cuda
                .ptxas
                .as_ref()
                .map(|p| p.display().to_string())
                .ok_or_else(|| "not on PATH, in CUDA_HOME or in the offload cache's venv".into()),
            for_targets: Need::Targets(&[DeviceKind::Nvptx]),
            required: false,
            install: Install::CudaWheel,
        },
        Check {
            what: "libdevice (NVIDIA float math)",
            found: cuda
                .libdevice
                .as_ref()
                .map(|p| p.display().to_string())
                .ok_or_else(|| "not found beside ptxas or in CUDA_HOME".into()),
            for_targets: Need::Targets(&[DeviceKind::Nvptx]),
            required: false,
            install: Install::CudaWheel,
        },
        Check {
            what: "ROCm device libraries (AMD float math)",
            found: toolchain::rocm_device_libs()
                .map(|p| p.display().to_string())
                .ok_or_else(|| "no ocml.bc".into()),
            for_targets: Need::Targets(&[DeviceKind::Amdgcn]),
            required: false,
            install: Install::Apt(&["rocm-device-libs"]),
        },
    ]
}

/// What the GPU plugins need at run time, as the runtime's inventory reports it.
fn plugin_checks() -> Vec<Check> {
    let runtime = offload::inventory();
    let plugin = |kind: DeviceKind| {
        runtime
            .iter()
            .find(|p| p.plugin == kind.plugin())
            .map_or(Err("not built in".into()), |p| match &p.none_because {
                None => Ok(format!("{} device(s)", p.devices.len())),
                Some(w) => Err(w.clone()),
            })
    };
    vec![
        Check {
            what: "NVIDIA driver (libcuda), to run on NVIDIA GPUs",
            found: plugin(DeviceKind::Nvptx),
            for_targets: Need::Plugin(DeviceKind::Nvptx),
            required: false,
            install: Install::Manual("the NVIDIA driver for your GPU"),
        },
        Check {
            what: "ROCm's HSA runtime (libhsa-runtime64), to run on AMD GPUs",
            found: plugin(DeviceKind::Amdgcn),
            for_targets: Need::Plugin(DeviceKind::Amdgcn),
            required: false,
            install: Install::Manual(
                "ROCm (https://rocm.docs.amd.com), with the amdgpu kernel driver",
            ),
        },
    ]
}

fn install_text(i: Install) -> String {
    match i {
        Install::Apt(p) => format!("apt-get install {}", p.join(" ")),
        Install::CudaWheel => format!(
            "python3 -m venv {v} && {v}/bin/pip install nvidia-cuda-nvcc",
            v = toolchain::wheel_venv().map_or("VENV".into(), |v| v.display().to_string())
        ),
        Install::Manual(how) => format!("install {how}"),
    }
}

pub fn render(checks: &[Check]) -> String {
    let mut out = String::new();
    for c in checks {
        let (mark, detail) = match &c.found {
            Ok(w) => ("ok     ", w.clone()),
            Err(_) if !c.required => ("absent ", String::new()),
            Err(_) => ("MISSING", String::new()),
        };
        out.push_str(&format!("{mark} {} [{}] {detail}\n", c.what, c.for_targets));
        if let Err(why) = &c.found {
            for l in why.lines() {
                out.push_str(&format!("          {l}\n"));
            }
            out.push_str(&format!("          get it: {}\n", install_text(c.install)));
        }
    }
    let missing = |kind: DeviceKind| {
        checks
            .iter()
            .filter(|c| c.required && c.found.is_err() && c.for_targets.targets().contains(&kind))
            .count()
    };
    for kind in DeviceKind::ALL {
        let m = missing(kind);
        out.push_str(&format!(
            "target {kind}: {}\n",
            if m == 0 {
                "ready".to_string()
            } else {
                format!("{m} missing")
            }
        ));
    }
    out
}

/// Installs what is missing and installable: Debian's packages in one apt-get, the CUDA wheel into the cache's venv.
pub fn install(checks: &[Check]) -> Result<(), String> {
    let mut apt: Vec<&str> = Vec::new();
    let mut wheel = false;
    for c in checks.iter().filter(|c| c.found.is_err()) {
        match c.install {
            Install::Apt(p) => apt.extend(p),
            Install::CudaWheel => wheel = true,
            Install::Manual(_) => {}
        }
    }
    apt.sort();
    apt.dedup();
    let run = |cmd: &mut Command, what: &str| -> Result<(), String> {
        eprintln!("cargo offload doctor: {what}");
        match cmd.status() {
            Ok(s) if s.success() => Ok(()),
            Ok(s) => Err(format!("{what} failed ({s})")),
            Err(e) => Err(format!("{what}: {e}")),
        }
    };
    if !apt.is_empty() {
        run(
            Command::new("apt-get").args(["install", "-y"]).args(&apt),
            &format!("apt-get install -y {}", apt.join(" ")),
        )?;
    }
    if wheel {
        let venv = toolchain::wheel_venv().ok_or("no HOME for the venv")?;
        if !venv.join("bin/pip").is_file() {
            run(
                Command::new("python3").args(["-m", "venv"]).arg(&venv),
                &format!("python3 -m venv {}", venv.display()),
            )?;
        }
        run(
            Command::new(venv.join("bin/pip")).args(["install", "nvidia-cuda-nvcc"]),
            "pip install nvidia-cuda-nvcc",
        )?;
    }
    Ok(())
}
