//! The device toolchain of GPU targets, found when a GPU target is configured (host-only builds never look): a rustc
//! whose `core` builds for the GPU and whose bitcode LLVM 22 reads, its cargo, LLVM 22's tools for the device link,
//! for NVIDIA ptxas and libdevice, for AMD ROCm's device libraries, where installed. Overrides come first, so any
//! layout can be pointed at: `OFFLOAD_DEVICE_RUSTC`, `OFFLOAD_DEVICE_CARGO`, `OFFLOAD_LLVM_BIN`, `OFFLOAD_PTXAS`,
//! `OFFLOAD_LIBDEVICE`, `OFFLOAD_ROCM_DEVICE_LIBS`.

use crate::{Error, ToolchainError};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The LLVM major version the device link uses: Debian's rustc 1.96 is built on LLVM 22.1, so its bitcode links there.
pub(crate) const LLVM_MAJOR: &str = "22";

/// How to get each piece on Debian, and where Debian's packages put it (measured on bookworm).
pub(crate) const APT_RUST: &str = "apt-get install rustc-web cargo-web rust-web-src";
pub(crate) const APT_LLVM: &str = "apt-get install llvm-22";

/// What a GPU target's device build runs: the device rustc and its cargo, and LLVM's tools for the device link.
pub struct Toolchain {
    /// The device rustc, which builds `core` and the image's crate.
    pub rustc: PathBuf,
    /// The cargo that goes with it, which runs the device builds (the image's crate, `core`).
    pub cargo: PathBuf,
    /// `rustc -vV`: names the compiler exactly (it keys the cached `core`).
    pub version: String,
    /// The crates `-Zbuild-std` needs besides the library (Debian ships them), for an offline build of `core`.
    pub vendor: Option<PathBuf>,
    /// The device link's tools.
    pub llvm: LlvmTools,
}

/// LLVM 22's tools for the device link, run as subprocesses.
pub struct LlvmTools {
    /// `llvm-link`, which joins the image's bitcode, `core`'s and the vendor math library's into one module.
    pub link: PathBuf,
    /// `opt`, which internalizes all but the kernels and optimizes the linked module.
    pub opt: PathBuf,
    /// `llc`, which compiles it into PTX for each `sm_XX`, or an object for each `gfxNNN`.
    pub llc: PathBuf,
    /// `ld.lld`, which makes an AMD code object a shared object (the `lld-22` package).
    pub lld: Option<PathBuf>,
}

/// NVIDIA's own tools, both optional: without ptxas the image is PTX only (the driver compiles it), without
/// libdevice regions cannot use transcendental math.
pub struct CudaTools {
    /// `ptxas`, which compiles the PTX into a cubin for each `sm_XX`.
    pub ptxas: Option<PathBuf>,
    /// `libdevice.10.bc`, NVIDIA's math bitcode, linked for the math functions regions call.
    pub libdevice: Option<PathBuf>,
}

/// The variables that steer discovery: a build script reruns when one changes.
pub const ENV_VARS: [&str; 9] = [
    "OFFLOAD_DEVICE_RUSTC",
    "OFFLOAD_DEVICE_CARGO",
    "OFFLOAD_LLVM_BIN",
    "OFFLOAD_PTXAS",
    "OFFLOAD_LIBDEVICE",
    "OFFLOAD_ROCM_DEVICE_LIBS",
    "OFFLOAD_CACHE_DIR",
    "CUDA_HOME",
    "PATH",
];

fn env_path(name: &str) -> Option<PathBuf> {
    std::env::var_os(name)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

fn output(cmd: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new(cmd).args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A program on `PATH`.
fn on_path(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

impl Toolchain {
    /// Finds the toolchain for `target` (a GPU triple), or says what is missing and how to get it.
    pub fn find(target: &str) -> Result<Toolchain, Error> {
        let rust = find_rust(target)?;
        let llvm = find_llvm(target)?;
        Ok(Toolchain {
            rustc: rust.rustc,
            cargo: rust.cargo,
            version: rust.version,
            vendor: rust.vendor,
            llvm,
        })
    }
}

/// The device Rust toolchain, as [`Toolchain`] holds it.
pub struct Rust {
    /// The device rustc: `OFFLOAD_DEVICE_RUSTC`, Debian's, or rustup's nightly.
    pub rustc: PathBuf,
    /// Its cargo: `OFFLOAD_DEVICE_CARGO`, or the one next to it.
    pub cargo: PathBuf,
    /// `rustc -vV`.
    pub version: String,
    /// The vendored crates of its library sources.
    pub vendor: Option<PathBuf>,
}

/// The device rustc for `target`, or what was tried.
pub fn find_rust(target: &str) -> Result<Rust, Error> {
    let mut tried = Vec::new();
    let mut candidates: Vec<(String, PathBuf, Option<PathBuf>)> = Vec::new();
    if let Some(rustc) = env_path("OFFLOAD_DEVICE_RUSTC") {
        candidates.push((
            "OFFLOAD_DEVICE_RUSTC".into(),
            rustc,
            env_path("OFFLOAD_DEVICE_CARGO"),
        ));
    } else {
        candidates.push(("Debian's rustc".into(), "/usr/bin/rustc".into(), None));
        if let Some(rustup) = on_path("rustup") {
            if let Some(p) = output(&rustup, &["which", "--toolchain", "nightly", "rustc"]) {
                candidates.push(("rustup's nightly".into(), PathBuf::from(p.trim()), None));
            } else {
                tried.push("rustup's nightly: not installed".to_string());
            }
        }
    }
    for (what, rustc, cargo) in candidates {
        match check_rust(&rustc, cargo) {
            Ok(r) => return Ok(r),
            Err(why) => tried.push(format!("{what} ({}): {why}", rustc.display())),
        }
    }
    Err(ToolchainError::Rustc {
        target: target.into(),
        tried,
    }
    .into())
}

fn check_rust(rustc: &Path, cargo: Option<PathBuf>) -> Result<Rust, String> {
    if !rustc.is_file() {
        return Err("not installed".into());
    }
    let version = output(rustc, &["-vV"]).ok_or("`rustc -vV` failed")?;
    let llvm = version
        .lines()
        .find_map(|l| l.strip_prefix("LLVM version: "))
        .unwrap_or("unknown");
    if llvm.split('.').next() != Some(LLVM_MAJOR) {
        return Err(format!(
            "built on LLVM {llvm}, but the device link uses LLVM {LLVM_MAJOR}"
        ));
    }
    let sysroot = output(rustc, &["--print", "sysroot"]).ok_or("`rustc --print sysroot` failed")?;
    let library = Path::new(sysroot.trim()).join("lib/rustlib/src/rust/library");
    if !library.join("core/Cargo.toml").is_file() {
        return Err(format!(
            "no library sources at {} (Debian: `apt-get install rust-web-src`; rustup: `rustup component add \
             rust-src`)",
            library.display()
        ));
    }
    let cargo = cargo.unwrap_or_else(|| rustc.with_file_name("cargo"));
    if !cargo.is_file() {
        return Err(format!(
            "no cargo next to it at {} (Debian: `apt-get install cargo-web`)",
            cargo.display()
        ));
    }
    let vendor = Some(library.join("vendor")).filter(|v| v.is_dir());
    Ok(Rust {
        rustc: rustc.to_path_buf(),
        cargo,
        version,
        vendor,
    })
}

/// LLVM 22's tools for the device link of `target`, or what was tried.
pub fn find_llvm(target: &str) -> Result<LlvmTools, Error> {
    let dirs: Vec<(PathBuf, &str)> = match env_path("OFFLOAD_LLVM_BIN") {
        Some(d) => vec![(d, "")],
        None => vec![
            (PathBuf::from(format!("/usr/lib/llvm-{LLVM_MAJOR}/bin")), ""),
            (PathBuf::from("/usr/bin"), "-22"),
        ],
    };
    let mut tried = Vec::new();
    for (dir, suffix) in dirs {
        let tool = |name: &str| dir.join(format!("{name}{suffix}"));
        let (link, opt, llc) = (tool("llvm-link"), tool("opt"), tool("llc"));
        if ![&link, &opt, &llc].iter().all(|t| t.is_file()) {
            tried.push(format!("{}: no llvm-link, opt and llc", dir.display()));
            continue;
        }
        let v = output(&llc, &["--version"]).unwrap_or_default();
        if !v.contains(&format!("LLVM version {LLVM_MAJOR}.")) {
            tried.push(format!("{}: not LLVM {LLVM_MAJOR}", llc.display()));
            continue;
        }
        let lld = Some(tool("ld.lld")).filter(|t| t.is_file());
        return Ok(LlvmTools {
            link,
            opt,
            llc,
            lld,
        });
    }
    Err(ToolchainError::Llvm {
        target: target.into(),
        tried,
    }
    .into())
}

/// Where `cargo offload doctor --install` puts the CUDA pip wheel: a venv in the offload cache.
pub fn wheel_venv() -> Option<PathBuf> {
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(cache.join("offload/cuda-venv"))
}

/// ptxas from the wheel in [`wheel_venv`]: `lib/python3.X/site-packages/nvidia/cuNN/bin/ptxas`.
fn wheel_ptxas() -> Option<PathBuf> {
    let lib = wheel_venv()?.join("lib");
    std::fs::read_dir(lib)
        .ok()?
        .flatten()
        .map(|py| py.path().join("site-packages/nvidia"))
        .flat_map(|n| std::fs::read_dir(n).into_iter().flatten().flatten())
        .map(|cu| cu.path().join("bin/ptxas"))
        .find(|p| p.is_file())
}

/// The directory of ROCm's device libraries (`ocml.bc`, `ockl.bc`): AMD's float math. Debian's `rocm-device-libs`
/// puts them in the multiarch library directory.
pub fn rocm_device_libs() -> Option<PathBuf> {
    env_path("OFFLOAD_ROCM_DEVICE_LIBS")
        .into_iter()
        .chain(
            [
                "/usr/lib/x86_64-linux-gnu/amdgcn/bitcode",
                "/opt/rocm/amdgcn/bitcode",
                "/usr/lib/amdgcn/bitcode",
            ]
            .map(PathBuf::from),
        )
        .find(|d| d.join("ocml.bc").is_file())
}

/// ROCm's math bitcode to link (`ocml.bc`, and `ockl.bc`, which it calls), where installed.
pub fn rocm_math_libs() -> Vec<PathBuf> {
    rocm_device_libs()
        .map(|d| vec![d.join("ocml.bc"), d.join("ockl.bc")])
        .unwrap_or_default()
        .into_iter()
        .filter(|p| p.is_file())
        .collect()
}

impl CudaTools {
    /// Looks for ptxas and libdevice: `OFFLOAD_PTXAS` and `OFFLOAD_LIBDEVICE` first, then `PATH`, `CUDA_HOME`,
    /// `/usr/local/cuda`, the pip wheel in [`wheel_venv`] and Debian's toolkit. Never fails: what is not found is
    /// `None`.
    pub fn find() -> CudaTools {
        let cuda_home = std::env::var_os("CUDA_HOME").map(PathBuf::from);
        let ptxas = env_path("OFFLOAD_PTXAS").or_else(|| {
            on_path("ptxas").or_else(|| {
                [cuda_home.clone(), Some("/usr/local/cuda".into())]
                    .into_iter()
                    .flatten()
                    .map(|h| h.join("bin/ptxas"))
                    .find(|p| p.is_file())
                    .or_else(wheel_ptxas)
            })
        });
        let libdevice = env_path("OFFLOAD_LIBDEVICE").or_else(|| {
            let mut dirs: Vec<PathBuf> = Vec::new();
            // The CUDA layout, which the pip wheel `nvidia-cuda-nvcc` keeps: bin/ptxas beside nvvm/libdevice.
            if let Some(p) = ptxas.as_ref().and_then(|p| p.canonicalize().ok()) {
                if let Some(root) = p.parent().and_then(Path::parent) {
                    dirs.push(root.join("nvvm/libdevice"));
                }
            }
            dirs.extend(cuda_home.map(|h| h.join("nvvm/libdevice")));
            dirs.push("/usr/local/cuda/nvvm/libdevice".into());
            dirs.push("/usr/lib/nvidia-cuda-toolkit/libdevice".into());
            dirs.into_iter()
                .map(|d| d.join("libdevice.10.bc"))
                .find(|p| p.is_file())
        });
        CudaTools { ptxas, libdevice }
    }
}
