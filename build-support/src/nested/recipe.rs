//! How a target's image packages are compiled: which rustc and cargo, which crate type, and the variants (one per
//! AMD processor or x86-64 level) each built in its own target directory.

use crate::targets::DeviceTarget;
use crate::toolchain::{CudaTools, Toolchain};
use crate::Error;
use std::path::PathBuf;

/// How a target's image packages are built: the host image is a `cdylib` of the outer build's own toolchain; a GPU
/// image is a `staticlib` of LLVM bitcode, built by the device toolchain against its cached `core` and then linked by
/// [`crate::devlink`].
pub(super) struct Recipe {
    pub(super) rustc: String,
    pub(super) cargo: String,
    pub(super) crate_type: &'static str,
    pub(super) artifact: &'static str,
    pub(super) device_std_features: &'static str,
    /// Crate attributes of each device crate (the kernel ABI's feature gate).
    pub(super) crate_attrs: &'static str,
    /// One build of the device crates each: one for most targets, one per `gfxNNN` for AMD (rustc compiles for one
    /// GPU there).
    pub(super) variants: Vec<Variant>,
    pub(super) gpu: Option<(Toolchain, GpuMath)>,
}

pub(super) struct Variant {
    /// The architecture a variant is built for, where each is built apart.
    pub(super) arch: Option<String>,
    /// Its `core` (AMD: one per architecture).
    pub(super) sysroot: Option<PathBuf>,
    /// Extra rustc flags (the GPU sysroot, the CPU).
    pub(super) flags: Vec<String>,
    /// Its target directory, under the target's build directory.
    pub(super) target_dir: String,
}

impl Recipe {
    pub(super) fn new(target: &DeviceTarget) -> Result<Recipe, Error> {
        match target {
            DeviceTarget::Host { levels, .. } => Ok(Recipe::host(levels)),
            // The simulated GPU: the host image's recipe with offload-device's GPU code paths.
            DeviceTarget::GpuSim { .. } => Ok(Recipe {
                device_std_features: ", features = [\"gpu-sim\"]",
                ..Recipe::host(&[])
            }),
            DeviceTarget::Nvptx { .. } => {
                let tc = Toolchain::find(target.triple())?;
                let sysroot = crate::sysroot::core_sysroot(&tc, target.triple(), None)?;
                let variants = vec![Variant {
                    arch: None,
                    sysroot: Some(sysroot.clone()),
                    flags: vec![format!("--sysroot={}", sysroot.display())],
                    target_dir: "target".into(),
                }];
                let math = GpuMath::Cuda(CudaTools::find());
                Ok(Recipe::gpu(
                    tc,
                    "staticlib",
                    "#![feature(abi_ptx)]\n",
                    variants,
                    math,
                ))
            }
            DeviceTarget::Amdgcn { archs } => {
                let tc = Toolchain::find(target.triple())?;
                let mut variants = Vec::new();
                for gfx in archs {
                    let sysroot = crate::sysroot::core_sysroot(&tc, target.triple(), Some(gfx))?;
                    variants.push(Variant {
                        arch: Some(gfx.clone()),
                        sysroot: Some(sysroot.clone()),
                        flags: vec![
                            format!("--sysroot={}", sysroot.display()),
                            format!("-Ctarget-cpu={gfx}"),
                            // Objects as bitcode, for the device link (the target itself links only with LTO).
                            "-Clinker-plugin-lto".into(),
                        ],
                        target_dir: format!("target-{gfx}"),
                    });
                }
                // rlibs, not a staticlib: rustc links a staticlib for this target only with LTO, which wants
                // bitcode embedded in object files; `-C linker-plugin-lto` objects are bitcode themselves.
                let math = GpuMath::Rocm(crate::toolchain::rocm_math_libs());
                Ok(Recipe::gpu(
                    tc,
                    "rlib",
                    "#![feature(abi_gpu_kernel)]\n",
                    variants,
                    math,
                ))
            }
        }
    }

    /// A host-compiled image's recipe: a `cdylib` of the outer build's own toolchain, with the program's CPU flags
    /// or one variant per x86-64 level.
    fn host(levels: &[String]) -> Recipe {
        Recipe {
            rustc: std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into()),
            cargo: std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()),
            crate_type: "cdylib",
            artifact: "so",
            device_std_features: ", features = [\"host\"]",
            crate_attrs: "",
            variants: if levels.is_empty() {
                vec![Variant {
                    arch: None,
                    sysroot: None,
                    flags: host_cpu_flags(),
                    target_dir: "target".into(),
                }]
            } else {
                // Each level exactly, whatever the program's own CPU flags: the plugin picks by what the CPU
                // it runs on has.
                levels
                    .iter()
                    .map(|l| Variant {
                        arch: Some(l.clone()),
                        sysroot: None,
                        flags: vec![format!("-Ctarget-cpu={l}")],
                        target_dir: format!("target-{l}"),
                    })
                    .collect()
            },
            gpu: None,
        }
    }

    /// A GPU target's recipe: the device toolchain's rustc and cargo, a library of LLVM bitcode (`crate_type`, also
    /// the artifact's extension), offload-device without the host's std.
    fn gpu(
        tc: Toolchain,
        crate_type: &'static str,
        crate_attrs: &'static str,
        variants: Vec<Variant>,
        math: GpuMath,
    ) -> Recipe {
        Recipe {
            rustc: tc.rustc.display().to_string(),
            cargo: tc.cargo.display().to_string(),
            crate_type,
            artifact: if crate_type == "staticlib" {
                "a"
            } else {
                crate_type
            },
            device_std_features: "",
            crate_attrs,
            variants,
            gpu: Some((tc, math)),
        }
    }
}

/// The vendor's math library a GPU target links, found once per build: CUDA's libdevice (with ptxas, which makes
/// the cubins), or ROCm's ocml.
pub(super) enum GpuMath {
    Cuda(CudaTools),
    Rocm(Vec<PathBuf>),
}

impl Variant {
    /// The `core` and `compiler_builtins` rlibs of its sysroot.
    pub(super) fn sysroot_rlibs(&self) -> Vec<PathBuf> {
        let Some(root) = &self.sysroot else {
            return Vec::new();
        };
        let lib = root.join("lib/rustlib");
        std::fs::read_dir(&lib)
            .into_iter()
            .flatten()
            .flatten()
            .flat_map(|triple| {
                std::fs::read_dir(triple.path().join("lib"))
                    .into_iter()
                    .flatten()
                    .flatten()
            })
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "rlib"))
            .collect()
    }
}

/// The program's own CPU flags (`-C target-cpu`, `-C target-feature`), which the host image shares: it runs in the
/// same process, so on the same CPU, and a program built `-C target-cpu=native` gets a native image.
fn host_cpu_flags() -> Vec<String> {
    cpu_flags(&std::env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default())
}

/// The CPU flags among encoded rustc flags (`\x1f`-separated), as `-Cname=value`.
fn cpu_flags(encoded: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut words = encoded.split('\x1f').filter(|w| !w.is_empty());
    while let Some(w) = words.next() {
        let codegen = match w {
            "-C" | "--codegen" => words.next().unwrap_or_default(),
            w => w.strip_prefix("-C").unwrap_or_default(),
        };
        if codegen.starts_with("target-cpu=") || codegen.starts_with("target-feature=") {
            out.push(format!("-C{codegen}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_host_image_takes_the_programs_cpu_flags_only() {
        let encoded = "-C\x1ftarget-cpu=native\x1f-Copt-level=2\x1f-Ctarget-feature=+avx2\x1f--cfg\x1ffoo\x1f--codegen\x1ftarget-feature=-sse4.1";
        assert_eq!(
            super::cpu_flags(encoded),
            [
                "-Ctarget-cpu=native",
                "-Ctarget-feature=+avx2",
                "-Ctarget-feature=-sse4.1"
            ]
        );
        assert!(super::cpu_flags("").is_empty());
    }
}
