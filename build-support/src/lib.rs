//! `offload-build`: the build-script half of `offload`. A package with `#[target]` regions lists `offload-build` in
//! `[build-dependencies]` and builds their device images from its `build.rs`:
//!
//! ```no_run
//! fn main() {
//!     offload_build::build();
//! }
//! ```
//!
//! The device targets are `[package.metadata.offload] targets` in its `Cargo.toml` (`host` when none are listed), or
//! `OFFLOAD_TARGETS`, which overrides them for one build (`OFFLOAD_TARGETS=host,nvptx64:sm_90 cargo build`):
//!
//! ```toml
//! [package.metadata.offload]
//! targets = ["host", "nvptx64:sm_80,sm_90", "amdgcn:gfx90a"]
//! ```
//!
//! The pipeline, one module each: `package` finds the package's targets (lib, bins, examples, tests, benches) and
//! `targets` the device targets to build; [`outline`] walks each target's module tree and writes its `#![no_std]`
//! device crate (kept items on their original lines, kernel entries appended); `nested` builds the image in its own
//! target dir with a scrubbed environment; for GPU targets [`toolchain`] finds the device compiler and LLVM,
//! `sysroot` builds `core` once, and `devlink` links the bitcode into PTX, cubins and HSA code objects; `embed` puts
//! the images and their records into a static archive the final link picks up. Every failure is an [`Error`].

#![deny(missing_docs)]
// The `build.rs` above is shown whole, its `fn main` included.
#![allow(clippy::needless_doctest_main)]

mod devlink;
mod diag;
mod embed;
mod error;
mod nested;
#[doc(hidden)]
pub mod outline;
mod package;
mod progress;
mod sysroot;
mod targets;
pub mod toolchain;

pub use diag::Diagnostic;
pub use error::{Error, PackageError, TargetError, ToolchainError};

use std::path::PathBuf;

/// Outlines, builds and embeds the device images of the package whose build script calls it. On error it prints
/// the diagnostics and exits, failing the build.
pub fn build() {
    if let Err(e) = try_build() {
        eprintln!("{e}");
        std::process::exit(1);
    }
}

/// Outlines the package in `manifest_dir` for the host image into `gen_dir`, without building anything: what
/// build support's own tests check.
#[doc(hidden)]
pub fn outline_dir(
    manifest_dir: &std::path::Path,
    gen_dir: &std::path::Path,
) -> Result<outline::Outlined, Error> {
    let pkg = package::Package::load(manifest_dir)?;
    outline::outline_package(&pkg, gen_dir, outline::KernelAbi::Host).map_err(Error::Source)
}

/// [`build`], returning the error instead of exiting.
pub fn try_build() -> Result<(), Error> {
    let env = |var: &'static str| std::env::var(var).map_err(|_| Error::NotInBuildScript { var });
    let manifest_dir = PathBuf::from(env("CARGO_MANIFEST_DIR")?);
    let out_dir = PathBuf::from(env("OUT_DIR")?);
    println!("cargo:rerun-if-env-changed=OFFLOAD_TARGETS");
    println!(
        "cargo:rerun-if-changed={}",
        manifest_dir.join("Cargo.toml").display()
    );

    let pkg = package::Package::load(&manifest_dir)?;
    let mut images = Vec::new();
    let targets = targets::configured(&pkg)?;
    if targets.iter().any(|t| t.is_gpu()) {
        for v in toolchain::ENV_VARS {
            println!("cargo:rerun-if-env-changed={v}");
        }
    }
    let mut warned = std::collections::BTreeSet::new();
    for t in targets {
        let dir = out_dir.join("offload").join(t.key());
        let outlined = outline::outline_package(&pkg, &dir.join("src"), t.kernel_abi())
            .map_err(Error::Source)?;
        // The same for every target: said once.
        for w in outlined.warnings(&pkg) {
            if warned.insert(w.clone()) {
                println!("cargo:warning={w}");
            }
        }
        for f in &outlined.files {
            println!("cargo:rerun-if-changed={}", f.display());
        }
        // Cargo discovers targets in these directories: a new file there may be a new target with regions.
        for d in ["src", "examples", "tests", "benches"] {
            let d = pkg.manifest_dir.join(d);
            if d.is_dir() {
                println!("cargo:rerun-if-changed={}", d.display());
            }
        }
        // A package without regions needs no image.
        if outlined.regions().next().is_none() {
            continue;
        }
        for image in nested::build_images(&pkg, &outlined, &t, &dir)? {
            for dep in &image.inputs {
                println!("cargo:rerun-if-changed={}", dep.display());
            }
            images.push(image);
        }
    }
    embed::embed(&pkg, &images, &out_dir)
}
