//! Everything that can stop a build, each with the data it is about and what to do about it.

use crate::diag::Diagnostic;
use crate::toolchain::{APT_LLVM, APT_RUST, LLVM_MAJOR};
use offload_model::device_kind::{DeviceKind, X86_64_LEVELS};
use std::path::PathBuf;

/// Why [`build`](crate::build) failed; its `Display` is the message the build prints.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Errors in the user's source, printed the way rustc prints them.
    #[error("{}", .0.iter().map(|d| d.render()).collect::<Vec<_>>().join("\n"))]
    Source(Vec<Diagnostic>),
    /// The device target list cannot be followed.
    #[error("offload-build: {0}")]
    Target(#[from] TargetError),
    /// Something the device builds need is not installed or cannot be found.
    #[error("offload-build: {0}")]
    Toolchain(#[from] ToolchainError),
    /// The package's manifest or `cargo metadata` cannot be read.
    #[error("offload-build: {0}")]
    Package(#[from] PackageError),
    /// Called outside a build script: a variable cargo sets for one is missing.
    #[error("offload-build: {var} is not set; call offload_build::build() from a build script (build.rs), where cargo sets it")]
    NotInBuildScript {
        /// The variable cargo sets for build scripts (`OUT_DIR`, `TARGET`, ...).
        var: &'static str,
    },
    /// A device build step (the image's crate, `core`, the device link) failed.
    #[error("offload-build: the device build of {image} failed:\n{output}")]
    DeviceBuild {
        /// What was being built, as the message names it: the package and triple, `core`, or the device link.
        image: String,
        /// What the failing tool printed (for the package's crate, with where its errors are in the user's source).
        output: String,
    },
    /// An object or archive the device build wrote cannot be parsed.
    #[error(
        "offload-build: cannot read {what}: {source}; the device build left a damaged file: run `cargo clean` and build \
         again"
    )]
    ReadObject {
        /// The file or object, as the message names it.
        what: String,
        /// Why `object` could not parse it.
        source: object::read::Error,
    },
    /// The object that carries the images into the final link could not be written.
    #[error("offload-build: writing the image object failed: {0}; this is a bug in offload-build, please report it")]
    WriteObject(#[from] object::write::Error),
    /// Reading, writing or running something failed.
    #[error("offload-build: {context}: {source}")]
    Io {
        /// What was being done: `writing <path>`, `running <tool>`.
        context: String,
        /// The error the system returned.
        source: std::io::Error,
    },
}

impl Error {
    pub(crate) fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
        let context = context.into();
        move |source| Error::Io { context, source }
    }

    pub(crate) fn read_object(
        what: impl Into<String>,
    ) -> impl FnOnce(object::read::Error) -> Error {
        let what = what.into();
        move |source| Error::ReadObject { what, source }
    }
}

/// A target list (`OFFLOAD_TARGETS` or `[package.metadata.offload] targets`) this build cannot follow.
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    /// A target lists an architecture its kind does not have.
    #[error("offload target `{target}`: `{arch}` is not {}; {}", .kind.arch_noun(), arch_help(*.kind))]
    Arch {
        /// The target as written: `nvptx64:gfx90a`.
        target: String,
        /// The architecture that is not the kind's.
        arch: String,
        /// The kind the target names.
        kind: DeviceKind,
    },
    /// A target names no device kind.
    #[error("unknown offload target `{target}`; expected {}", usage())]
    Unknown {
        /// The target as written.
        target: String,
    },
    /// A host-compiled target (`host`, `gpu-sim`) in a build for anything but x86_64 Linux, the one host whose
    /// images the plugins load.
    #[error("the `host` offload target needs an x86_64 Linux host; this build targets {triple}")]
    HostUnsupported {
        /// The triple the build targets (cargo's `TARGET`).
        triple: String,
    },
}

/// How a kind's architectures are written.
fn arch_help(kind: DeviceKind) -> String {
    match kind {
        DeviceKind::Host => {
            let names: Vec<&str> = X86_64_LEVELS.iter().map(|l| l.0).collect();
            format!("the host images can be built for {}", names.join(", "))
        }
        DeviceKind::Nvptx => "write them as `nvptx64:sm_80,sm_90`".into(),
        DeviceKind::Amdgcn => "write them as `amdgcn:gfx90a,gfx942`".into(),
        DeviceKind::GpuSim => "write it as `gpu-sim`, without architectures".into(),
    }
}

/// `host`, `nvptx64:sm_XX,..`, `amdgcn:gfxNNN,..` or `gpu-sim`.
fn usage() -> String {
    let [host, nvptx, amdgcn, sim] = DeviceKind::ALL.map(|k| k.usage());
    format!("{host}, {nvptx}, {amdgcn} or {sim}")
}

/// A device tool a GPU target needs is not installed.
#[derive(Debug, thiserror::Error)]
pub enum ToolchainError {
    /// No device rustc: none builds `core` for the GPU and emits bitcode the device link's LLVM reads.
    #[error(
        "the {target} target needs a Rust compiler that builds `core` for it from the library sources and emits LLVM \
         {llvm} bitcode; none was found:\n  - {tried}\nInstall Debian's (`{APT_RUST}`), or a rustup nightly on LLVM \
         {llvm} (`rustup toolchain install nightly --component rust-src`), or point OFFLOAD_DEVICE_RUSTC and \
         OFFLOAD_DEVICE_CARGO at one.",
        llvm = LLVM_MAJOR,
        tried = .tried.join("\n  - ")
    )]
    Rustc {
        /// The GPU triple the compiler is needed for.
        target: String,
        /// Each candidate and why it does not do.
        tried: Vec<String>,
    },
    /// No LLVM of the device link's version with llvm-link, opt and llc.
    #[error(
        "the {target} target links device code with LLVM {llvm}'s llvm-link, opt and llc; none was found:\n  - \
         {tried}\nInstall it (`{APT_LLVM}`) or point OFFLOAD_LLVM_BIN at its bin directory.",
        llvm = LLVM_MAJOR,
        tried = .tried.join("\n  - ")
    )]
    Llvm {
        /// The GPU triple the tools are needed for.
        target: String,
        /// Each directory looked in and why it does not do.
        tried: Vec<String>,
    },
    /// An amdgcn target, and the LLVM found has no `ld.lld` to make its code objects.
    #[error(
        "the amdgcn target links code objects with LLVM {llvm}'s ld.lld: `apt-get install lld-{llvm}`, or point \
         OFFLOAD_LLVM_BIN at a directory that has it",
        llvm = LLVM_MAJOR
    )]
    Lld,
    /// Nowhere to cache the device `core` built once per compiler and target: none of OFFLOAD_CACHE_DIR,
    /// XDG_CACHE_HOME and HOME is set.
    #[error("set OFFLOAD_CACHE_DIR (or HOME) for the device `core` cache")]
    NoCacheDir,
    /// The offload-device sources are not beside this crate; the field is this crate's directory.
    #[error(
        "cannot find offload-device next to {}; offload-build builds device code against the offload-device \
         that comes with it: depend on both from the same offload workspace or release",
        .0.display()
    )]
    NoDeviceStd(PathBuf),
}

/// The package being built cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum PackageError {
    /// `cargo metadata` failed, usually on an error in a manifest.
    #[error("`cargo metadata` failed for {}:\n{stderr}\nFix what cargo reports and build again.", .manifest.display())]
    Metadata {
        /// The package's `Cargo.toml`.
        manifest: PathBuf,
        /// What cargo reported.
        stderr: String,
    },
    /// What `cargo metadata` printed does not parse as JSON.
    #[error(
        "`cargo metadata` printed JSON this version cannot read ({0}); build with the cargo of a Rust release \
         offload supports"
    )]
    MetadataJson(#[from] serde_json::Error),
    /// The package is not among those `cargo metadata` lists; the field is its `Cargo.toml`.
    #[error(
        "`cargo metadata` does not list {}; build the package from its own manifest, as cargo runs build scripts",
        .0.display()
    )]
    NotListed(PathBuf),
    /// `device-dependencies` lists a crate the package does not depend on.
    #[error(
        "{}: `[package.metadata.offload] device-dependencies` names `{name}`, which is not in `[dependencies]`; add it \
         there (with the version or path the host uses), or remove it from the list",
        .manifest.display()
    )]
    DeviceDependency {
        /// The package's `Cargo.toml`.
        manifest: PathBuf,
        /// The listed name.
        name: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn target_errors_say_how_targets_are_written() {
        let e = Error::from(TargetError::Arch {
            target: "host:znver9".into(),
            arch: "znver9".into(),
            kind: DeviceKind::Host,
        });
        assert_eq!(
            e.to_string(),
            "offload-build: offload target `host:znver9`: `znver9` is not an x86-64 level; the host images can be \
             built for x86-64, x86-64-v2, x86-64-v3, x86-64-v4"
        );
        let e = TargetError::Arch {
            target: "nvptx64:gfx90a".into(),
            arch: "gfx90a".into(),
            kind: DeviceKind::Nvptx,
        };
        assert_eq!(
            e.to_string(),
            "offload target `nvptx64:gfx90a`: `gfx90a` is not an NVIDIA architecture; write them as \
             `nvptx64:sm_80,sm_90`"
        );
        let e = TargetError::Unknown {
            target: "spirv".into(),
        };
        assert_eq!(
            e.to_string(),
            "unknown offload target `spirv`; expected `host`, `nvptx64:sm_XX,..`, `amdgcn:gfxNNN,..` or `gpu-sim`"
        );
        let e = TargetError::Arch {
            target: "gpu-sim:sm_90".into(),
            arch: "sm_90".into(),
            kind: DeviceKind::GpuSim,
        };
        assert!(
            e.to_string()
                .contains("write it as `gpu-sim`, without architectures"),
            "{e}"
        );
    }

    #[test]
    fn missing_tools_say_how_to_get_them() {
        let e = ToolchainError::Llvm {
            target: "nvptx64-nvidia-cuda".into(),
            tried: vec!["/usr/lib/llvm-22/bin: no llvm-link, opt and llc".into()],
        };
        let text = e.to_string();
        assert!(text.contains("LLVM 22's llvm-link"), "{text}");
        assert!(
            text.contains("  - /usr/lib/llvm-22/bin: no llvm-link"),
            "{text}"
        );
        assert!(text.contains("`apt-get install llvm-22`"), "{text}");
        assert!(ToolchainError::Lld
            .to_string()
            .contains("apt-get install lld-22"));
    }
}
