//! The nested device build, as rust-gpu's spirv-builder does it: a generated package in its own target dir, built by
//! the same cargo and rustc with a scrubbed environment, artifacts and diagnostics read from `--message-format=json`,
//! and skipped when the generated crate did not change. [`build_images`] runs the steps: the [`recipe`] (toolchain,
//! crate type, variants), the generated [`workspace`], the [`cargo`] run, and the [`link`] of each image.

mod cargo;
mod link;
mod recipe;
mod workspace;

use crate::outline::Outlined;
use crate::package::{Kind, Package};
use crate::targets::DeviceTarget;
use crate::{Error, ToolchainError};
use offload_model::fatbin::ImageFormat;
use offload_model::hash::hash_parts;
use recipe::{Recipe, Variant};
use std::path::{Path, PathBuf};
use workspace::{ImageGroup, Workspace};

/// A device image. Each kind of target gets its own: the library's reaches every binary that links the library;
/// the binaries', examples', tests' and benches' are linked into the targets of that kind. No binary carries a
/// kernel twice, and names need only be unique within a kind.
pub struct BuiltImage {
    pub target: DeviceTarget,
    pub kind: Kind,
    /// `sm_90`, `gfx90a`, or the host's architecture.
    pub arch: String,
    pub format: ImageFormat,
    pub bytes: Vec<u8>,
    /// Files outside the generated crates the image depends on (offload-device's sources), for `rerun-if-changed`.
    pub inputs: Vec<PathBuf>,
}

/// offload-device, found next to this crate (a path dependency in the workspace, or the same registry directory).
fn device_std_dir() -> Result<PathBuf, Error> {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let candidates = [
        here.join("../device-std"),
        here.join(format!("../offload-device-{}", env!("CARGO_PKG_VERSION"))),
    ];
    candidates
        .iter()
        .find(|p| p.join("Cargo.toml").is_file())
        .and_then(|p| p.canonicalize().ok())
        .ok_or_else(|| ToolchainError::NoDeviceStd(here.to_path_buf()).into())
}

pub(super) fn write_if_changed(path: &Path, text: &str) -> Result<(), Error> {
    if std::fs::read(path).ok().as_deref() == Some(text.as_bytes()) {
        return Ok(());
    }
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d).map_err(Error::io(format!("creating {}", d.display())))?;
    }
    std::fs::write(path, text).map_err(Error::io(format!("writing {}", path.display())))
}

/// Writes the device crates and one image package per kind of target under `dir/src` (a workspace), builds every
/// image with one cargo run per variant, links them, and returns them.
pub fn build_images(
    pkg: &Package,
    outlined: &Outlined,
    target: &DeviceTarget,
    dir: &Path,
) -> Result<Vec<BuiltImage>, Error> {
    let recipe = Recipe::new(target)?;
    let ws = Workspace::generate(
        pkg,
        outlined,
        target,
        &recipe,
        &dir.join("src"),
        &device_std_dir()?,
    );
    let build = NestedBuild {
        pkg,
        target,
        recipe: &recipe,
        dir,
        ws: &ws,
    };
    let fresh = build.compile().map_err(|e| match e {
        Error::DeviceBuild { image, output } => Error::DeviceBuild {
            output: format!("{output}{}", outlined.explain(&output)),
            image,
        },
        e => e,
    })?;
    let mut images = Vec::new();
    for group in &ws.groups {
        images.extend(link::group_images(&build, outlined, group, fresh)?);
    }
    if !fresh {
        write_if_changed(&build.stamp_file(), &build.stamp())?;
    }
    Ok(images)
}

/// One target's nested build: the generated workspace, how it is compiled, and where.
struct NestedBuild<'a> {
    pkg: &'a Package,
    target: &'a DeviceTarget,
    recipe: &'a Recipe,
    /// The target's build directory: the workspace in `src`, a target directory per variant, the device links.
    dir: &'a Path,
    ws: &'a Workspace,
}

impl NestedBuild<'_> {
    /// Writes the workspace's changed files and compiles it, once per variant, unless the last build's stamp says
    /// nothing changed. Returns whether it was fresh.
    fn compile(&self) -> Result<bool, Error> {
        for (p, t) in &self.ws.files {
            write_if_changed(p, t)?;
        }
        let built = self.ws.groups.iter().all(|g| {
            self.recipe
                .variants
                .iter()
                .all(|v| self.artifact(v, g).is_file())
        });
        if built && std::fs::read_to_string(self.stamp_file()).ok() == Some(self.stamp()) {
            return Ok(true);
        }
        for v in &self.recipe.variants {
            let t = std::time::Instant::now();
            cargo::run_cargo(
                &self.ws.manifest(),
                self.target,
                &self.dir.join(&v.target_dir),
                self.recipe,
                &self.flags(v),
                &self.pkg.name,
                &self.pkg.workspace_root,
            )?;
            crate::progress::status(
                "Compiling",
                &format!(
                    "{} device crates for {}{}",
                    self.pkg.name,
                    self.target.triple(),
                    v.arch.as_deref().map_or(String::new(), |a| format!(" {a}"))
                ),
                t,
            );
        }
        Ok(false)
    }

    /// The variant that stands for all where one suffices (dep-info, NVIDIA's one bitcode library).
    fn first_variant(&self) -> &Variant {
        &self.recipe.variants[0]
    }

    /// Where cargo leaves a group's library for a variant.
    fn artifact(&self, v: &Variant, group: &ImageGroup) -> PathBuf {
        self.dir
            .join(&v.target_dir)
            .join(self.target.triple())
            .join("release")
            .join(format!(
                "lib{}.{}",
                group.package.replace('-', "_"),
                self.recipe.artifact
            ))
    }

    /// A variant's rustc flags, `\x1f`-separated as `CARGO_ENCODED_RUSTFLAGS` wants them.
    fn flags(&self, v: &Variant) -> String {
        self.ws
            .remaps
            .iter()
            .chain(&v.flags)
            .cloned()
            .collect::<Vec<_>>()
            .join("\x1f")
    }

    fn stamp_file(&self) -> PathBuf {
        self.dir.join("stamp")
    }

    /// What the last build was of: the compiler, flags, profile, generated files and the image's other inputs
    /// (offload-device, as the last build's dep-info lists them), so editing any rebuilds and nothing else does.
    fn stamp(&self) -> String {
        let mut input_times = String::new();
        for g in &self.ws.groups {
            let dep_info = self.artifact(self.first_variant(), g).with_extension("d");
            for p in cargo::dep_info(&dep_info, self.dir) {
                let t = std::fs::metadata(&p).and_then(|m| m.modified()).ok();
                input_times.push_str(&format!("{}={t:?}\n", p.display()));
            }
        }
        let flags: String = self.recipe.variants.iter().map(|v| self.flags(v)).collect();
        let profile: String = cargo::profile_env(self.target)
            .into_iter()
            .map(|(k, v)| format!("{k}={v}\n"))
            .collect();
        let mut parts: Vec<&[u8]> = vec![
            self.recipe.rustc.as_bytes(),
            flags.as_bytes(),
            input_times.as_bytes(),
            profile.as_bytes(),
        ];
        for (p, t) in &self.ws.files {
            parts.push(p.as_os_str().as_encoded_bytes());
            parts.push(t.as_bytes());
        }
        format!("{:016x}", hash_parts(&parts))
    }
}
