//! The nested device build, as rust-gpu's spirv-builder does it: a generated package in its own target dir, built by
//! the same cargo and rustc with a scrubbed environment, artifacts and diagnostics read from `--message-format=json`,
//! and skipped when the generated crate did not change.

use crate::outline::Outlined;
use crate::package::{Kind, Package};
use crate::targets::DeviceTarget;
use crate::toolchain::{CudaTools, Toolchain};
use crate::{Error, ToolchainError};
use offload_model::fatbin::ImageFormat;
use offload_model::hash::hash_parts;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

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
    /// Files outside the generated crates the image depends on (device-std's sources), for `rerun-if-changed`.
    pub inputs: Vec<PathBuf>,
}

/// device-std, found next to this crate (a path dependency in the workspace, or the same registry directory).
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

fn write_if_changed(path: &Path, text: &str) -> Result<(), Error> {
    if std::fs::read(path).ok().as_deref() == Some(text.as_bytes()) {
        return Ok(());
    }
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d).map_err(Error::io(format!("creating {}", d.display())))?;
    }
    std::fs::write(path, text).map_err(Error::io(format!("writing {}", path.display())))
}

/// How a target's image packages are built: the host image is a `cdylib` of the outer build's own toolchain; a GPU
/// image is a `staticlib` of LLVM bitcode, built by the device toolchain against its cached `core` and then linked by
/// [`crate::devlink`].
struct Recipe {
    rustc: String,
    cargo: String,
    crate_type: &'static str,
    artifact: &'static str,
    device_std_features: &'static str,
    /// Crate attributes of each device crate (the kernel ABI's feature gate).
    crate_attrs: &'static str,
    /// One build of the device crates each: one for most targets, one per `gfxNNN` for AMD (rustc compiles for one
    /// GPU there).
    variants: Vec<Variant>,
    gpu: Option<(Toolchain, GpuMath)>,
}

struct Variant {
    /// The architecture a variant is built for, where each is built apart.
    arch: Option<String>,
    /// Its `core` (AMD: one per architecture).
    sysroot: Option<PathBuf>,
    /// Extra rustc flags (the GPU sysroot, the CPU).
    flags: Vec<String>,
    /// Its target directory, under the target's build directory.
    target_dir: String,
}

impl Recipe {
    fn new(target: &DeviceTarget) -> Result<Recipe, Error> {
        match target {
            DeviceTarget::Host { levels, .. } => Ok(Recipe {
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

    /// A GPU target's recipe: the device toolchain's rustc and cargo, a library of LLVM bitcode (`crate_type`, also
    /// the artifact's extension), device-std without the host's std.
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
enum GpuMath {
    Cuda(CudaTools),
    Rocm(Vec<PathBuf>),
}

impl Variant {
    /// The `core` and `compiler_builtins` rlibs of its sysroot.
    fn sysroot_rlibs(&self) -> Vec<PathBuf> {
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

/// Writes the device crates and one image package per group under `dir/src` (a workspace), builds every image
/// with one cargo run, and returns them.
pub fn build_images(
    pkg: &Package,
    outlined: &Outlined,
    target: &DeviceTarget,
    dir: &Path,
) -> Result<Vec<BuiltImage>, Error> {
    let recipe = Recipe::new(target)?;
    let src = dir.join("src");
    let device_std = device_std_dir()?;
    let suffix = pkg.unique_suffix();
    let dstd = device_std.display().to_string();
    let edition = if pkg.edition.is_empty() {
        "2021"
    } else {
        &pkg.edition
    };

    let mut files: Vec<(PathBuf, String)> = Vec::new();
    let mut remaps = Vec::new();
    let display_root = pkg.display_path(&pkg.manifest_dir);
    let shown = if display_root.as_os_str().is_empty() {
        String::new()
    } else {
        format!("{}/", display_root.display())
    };
    // (group, image package name, `[dependencies]` lines, `extern crate` lines)
    let mut groups: Vec<(Kind, String, String, String)> = Vec::new();
    // Targets without regions need no device crate (regions across crates come later).
    for c in outlined.crates.iter().filter(|c| !c.regions.is_empty()) {
        let group = c.kind;
        let crate_dir = src.join(&c.key);
        let name = device_crate_name(&c.key);
        let crate_ident = name.replace('-', "_");
        files.push((
            crate_dir.join("Cargo.toml"),
            format!(
                "[package]\nname = {name:?}\nversion = \"0.0.0\"\nedition = {edition:?}\npublish = false\n\n\
                 [lib]\npath = \"lib.rs\"\n\n[dependencies]\noffload = {{ package = \"offload-device\", path = {dstd:?} }}\n",
            ),
        ));
        files.push((
            crate_dir.join("lib.rs"),
            format!(
                "// Generated by offload-build: the device twin of `{}`. Edit the source, not this.\n#![no_std]\n{}\
                 #![allow(dead_code, unused_imports, unused_variables, unused_mut, unused_unsafe, non_snake_case)]\n\
                 include!({:?});\n",
                c.key,
                recipe.crate_attrs,
                crate_dir.join(&c.root).display().to_string()
            ),
        ));
        for (rel, text) in &c.files {
            files.push((crate_dir.join(rel), text.clone()));
        }
        // Errors and panic locations name the user's files as the host build does.
        remaps.push(format!(
            "--remap-path-prefix={}/src/={shown}",
            crate_dir.display()
        ));
        remaps.push(format!(
            "--remap-path-prefix={}/abs/=/",
            crate_dir.display()
        ));
        let g = match groups.iter_mut().find(|g| g.0 == group) {
            Some(g) => g,
            None => {
                groups.push((
                    group,
                    format!("offload-image-{}-{}-{suffix}", pkg.name, group.name()),
                    String::new(),
                    String::new(),
                ));
                groups.last_mut().expect("just pushed")
            }
        };
        g.2.push_str(&format!(
            "{crate_ident} = {{ package = {name:?}, path = \"../{}\" }}\n",
            c.key
        ));
        g.3.push_str(&format!("extern crate {crate_ident};\n"));
    }
    for (group, image_pkg, deps, externs) in &groups {
        let d = src.join(format!("image-{}", group.name()));
        files.push((
            d.join("Cargo.toml"),
            format!(
                "# Generated by offload-build: the {triple} device image of package `{pkg}` ({g} regions).\n[package]\n\
                 name = {image_pkg:?}\nversion = \"0.0.0\"\nedition = \"2021\"\npublish = false\n\n[lib]\n\
                 path = \"image.rs\"\ncrate-type = [\"{crate_type}\"]\n\n[dependencies]\n\
                 offload-device = {{ path = {dstd:?}{features} }}\n{deps}",
                triple = target.triple(),
                pkg = pkg.name,
                g = group.name(),
                crate_type = recipe.crate_type,
                features = recipe.device_std_features,
            ),
        ));
        files.push((
            d.join("image.rs"),
            format!("#![no_std]\nextern crate offload_device;\n{externs}"),
        ));
    }
    let members: Vec<String> = groups
        .iter()
        .map(|g| format!("\"image-{}\"", g.0.name()))
        .collect();
    files.push((
        src.join("Cargo.toml"),
        format!(
            "# Generated by offload-build for package `{}`; the profile comes from the environment.\n[workspace]\n\
             resolver = \"2\"\nmembers = [{}]\n",
            pkg.name,
            members.join(", "),
        ),
    ));

    let artifact_in = |v: &Variant, image_pkg: &str| {
        dir.join(&v.target_dir)
            .join(target.triple())
            .join("release")
            .join(format!(
                "lib{}.{}",
                image_pkg.replace('-', "_"),
                recipe.artifact
            ))
    };
    let artifact = |image_pkg: &str| artifact_in(&recipe.variants[0], image_pkg);
    let rustc = &recipe.rustc;
    let variant_flags = |v: &Variant| {
        remaps
            .iter()
            .chain(&v.flags)
            .cloned()
            .collect::<Vec<_>>()
            .join("\x1f")
    };
    let flags: String = recipe.variants.iter().map(variant_flags).collect();
    let profile: String = profile_env(target)
        .into_iter()
        .map(|(k, v)| format!("{k}={v}\n"))
        .collect();
    // The stamp covers the generated files and the image's other inputs (device-std, as the last build's dep-info
    // lists them), so editing either rebuilds and nothing else does.
    let stamp = || {
        let mut input_times = String::new();
        for g in &groups {
            for p in dep_info(&artifact(&g.1).with_extension("d"), dir) {
                let t = std::fs::metadata(&p).and_then(|m| m.modified()).ok();
                input_times.push_str(&format!("{}={t:?}\n", p.display()));
            }
        }
        let mut parts: Vec<&[u8]> = vec![
            rustc.as_bytes(),
            flags.as_bytes(),
            input_times.as_bytes(),
            profile.as_bytes(),
        ];
        for (p, t) in &files {
            parts.push(p.as_os_str().as_encoded_bytes());
            parts.push(t.as_bytes());
        }
        format!("{:016x}", hash_parts(&parts))
    };
    for (p, t) in &files {
        write_if_changed(p, t)?;
    }

    let stamp_file = dir.join("stamp");
    let fresh = groups.iter().all(|g| {
        recipe
            .variants
            .iter()
            .all(|v| artifact_in(v, &g.1).is_file())
    }) && std::fs::read_to_string(&stamp_file).ok() == Some(stamp());
    if !fresh {
        for v in &recipe.variants {
            let t = std::time::Instant::now();
            run_cargo(
                &src.join("Cargo.toml"),
                target,
                &dir.join(&v.target_dir),
                &recipe,
                &variant_flags(v),
                &pkg.name,
            )?;
            crate::progress::status(
                "Compiling",
                &format!(
                    "{} device crates for {}{}",
                    pkg.name,
                    target.triple(),
                    v.arch.as_deref().map_or(String::new(), |a| format!(" {a}"))
                ),
                t,
            );
        }
    }
    let mut images = Vec::new();
    for (group, image_pkg, _, _) in &groups {
        let path = artifact(image_pkg);
        let inputs = dep_info(&path.with_extension("d"), dir);
        let built = |arch: &str, format: ImageFormat, bytes: Vec<u8>| BuiltImage {
            target: target.clone(),
            kind: *group,
            arch: arch.to_string(),
            format,
            bytes,
            inputs: inputs.clone(),
        };
        let kernels: Vec<String> = outlined
            .crates
            .iter()
            .filter(|c| c.kind == *group)
            .flat_map(|c| c.regions.iter().map(|r| r.symbol.clone()))
            .collect();
        match (target, &recipe.gpu) {
            (DeviceTarget::Amdgcn { .. }, Some((tc, GpuMath::Rocm(math)))) => {
                for v in &recipe.variants {
                    let gfx = v.arch.clone().unwrap_or_default();
                    let work = dir.join("link").join(group.name()).join(&gfx);
                    let linked = link_cached(
                        &work,
                        fresh,
                        &format!("{} {} image", pkg.name, group.name()),
                        || {
                            // The image's rlib and its dependencies' (the target needs LTO to link a staticlib).
                            let listed =
                                std::fs::read_to_string(dir.join(&v.target_dir).join(RLIBS))
                                    .unwrap_or_default();
                            // Only this group's crates: kernel names are unique within a kind, not across kinds.
                            let ours: Vec<String> = outlined
                                .crates
                                .iter()
                                .filter(|c| c.kind == *group)
                                .map(|c| device_crate_name(&c.key).replace('-', "_"))
                                .chain(["offload_device", "offload_model"].map(String::from))
                                .chain([image_pkg.replace('-', "_")])
                                .map(|n| format!("lib{n}"))
                                .collect();
                            let mut archives: Vec<PathBuf> = listed
                                .lines()
                                .map(PathBuf::from)
                                .filter(|p| {
                                    // `libNAME.rlib`, or `libNAME-HASH.rlib` for dependencies.
                                    let stem = p.file_stem().unwrap_or_default().to_string_lossy();
                                    let name = stem.split_once('-').map_or(&*stem, |(n, _)| n);
                                    ours.iter().any(|o| o == name)
                                })
                                .collect();
                            archives.extend(v.sysroot_rlibs());
                            crate::devlink::link_amdgcn(
                                &archives, &kernels, &gfx, &tc.llvm, math, &work,
                            )
                        },
                    )?;
                    images.extend(
                        linked
                            .into_iter()
                            .map(|l| built(&l.arch, l.format, l.bytes)),
                    );
                }
            }
            (DeviceTarget::Nvptx { archs }, Some((tc, GpuMath::Cuda(cuda)))) => {
                let work = dir.join("link").join(group.name());
                let linked = link_cached(
                    &work,
                    fresh,
                    &format!("{} {} image", pkg.name, group.name()),
                    || crate::devlink::link_nvptx(&path, &kernels, archs, &tc.llvm, cuda, &work),
                )?;
                images.extend(
                    linked
                        .into_iter()
                        .map(|l| built(&l.arch, l.format, l.bytes)),
                );
            }
            _ => {
                for v in &recipe.variants {
                    let path = artifact_in(v, image_pkg);
                    let bytes = std::fs::read(&path)
                        .map_err(Error::io(format!("reading the image {}", path.display())))?;
                    images.push(built(
                        v.arch.as_deref().unwrap_or(target.arch()),
                        ImageFormat::SharedObject,
                        bytes,
                    ));
                }
            }
        }
    }
    if !fresh {
        write_if_changed(&stamp_file, &stamp())?;
    }
    Ok(images)
}

/// The linked images of a group, relinked when the device crates were rebuilt (or the last link did not finish),
/// else read back from the index the last link wrote.
fn link_cached(
    work: &Path,
    fresh: bool,
    what: &str,
    link: impl FnOnce() -> Result<Vec<crate::devlink::Linked>, Error>,
) -> Result<Vec<crate::devlink::Linked>, Error> {
    let t = std::time::Instant::now();
    let index = work.join("images");
    if fresh {
        if let Ok(text) = std::fs::read_to_string(&index) {
            let read: Option<Vec<crate::devlink::Linked>> = text
                .lines()
                .map(|l| {
                    let mut f = l.splitn(3, ' ');
                    let (arch, format, file) = (f.next()?, f.next()?.parse().ok()?, f.next()?);
                    let format = ImageFormat::from_code(format)?;
                    Some(crate::devlink::Linked {
                        arch: arch.to_string(),
                        format,
                        bytes: std::fs::read(work.join(file)).ok()?,
                    })
                })
                .collect();
            if let Some(read) = read {
                return Ok(read);
            }
        }
    }
    let _ = std::fs::remove_file(&index);
    let linked = link()?;
    let images: Vec<String> = linked
        .iter()
        .map(|l| format!("{} {}", l.arch, l.format))
        .collect();
    crate::progress::status("Linking", &format!("{what}: {}", images.join(", ")), t);
    let mut text = String::new();
    for (i, l) in linked.iter().enumerate() {
        let file = format!("image{i}.{}.bin", l.arch);
        std::fs::write(work.join(&file), &l.bytes)
            .map_err(Error::io(format!("writing {}", work.display())))?;
        text.push_str(&format!("{} {} {file}\n", l.arch, l.format.code()));
    }
    std::fs::write(&index, text).map_err(Error::io(format!("writing {}", index.display())))?;
    Ok(linked)
}

/// The package name of a target's device crate.
fn device_crate_name(key: &str) -> String {
    format!("offload-dev-{key}")
        .to_ascii_lowercase()
        .replace('_', "-")
}

/// The list of the rlibs the last build of a target directory made.
const RLIBS: &str = "rlibs";

fn run_cargo(
    manifest: &Path,
    target: &DeviceTarget,
    target_dir: &Path,
    recipe: &Recipe,
    flags: &str,
    image: &str,
) -> Result<(), Error> {
    let cargo = &recipe.cargo;
    let mut cmd = Command::new(cargo);
    cmd.current_dir(manifest.parent().unwrap_or(Path::new("/")));
    cmd.args([
        "build",
        "--release",
        "--offline",
        "--lib",
        "--message-format=json",
    ])
    .arg("--manifest-path")
    .arg(manifest)
    .args(["--target", target.triple()])
    .arg("--target-dir")
    .arg(target_dir)
    .env_clear()
    .env("RUSTC", &recipe.rustc)
    .env("CARGO_ENCODED_RUSTFLAGS", flags)
    // The image's profile must not come from the user's `.cargo/config.toml` (found from any directory under their
    // workspace): environment settings outrank config files, and the stamp covers them.
    .envs(profile_env(target))
    .env("CARGO_TERM_COLOR", "never")
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    // Only what cargo and rustup need to find the same toolchain, and the outer build's jobserver
    // (`CARGO_MAKEFLAGS`, so the nested build shares its job slots); nothing else of the outer build leaks in.
    for k in [
        "PATH",
        "HOME",
        "CARGO_HOME",
        "RUSTUP_HOME",
        "RUSTUP_TOOLCHAIN",
        "TMPDIR",
        "CARGO_MAKEFLAGS",
    ] {
        if let Some(v) = std::env::var_os(k) {
            cmd.env(k, v);
        }
    }
    if recipe.gpu.is_some() {
        // The kernel ABIs (`extern "ptx-kernel"`) and core::arch's GPU intrinsics are unstable features.
        cmd.env("RUSTC_BOOTSTRAP", "1");
    }
    let output = cmd
        .output()
        .map_err(Error::io(format!("running {cargo} for the device image")))?;
    let mut errors = String::new();
    let mut rlibs = String::new();
    for line in String::from_utf8_lossy(&output.stdout).lines() {
        let Ok(msg) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if msg["reason"] == "compiler-artifact" {
            for f in msg["filenames"].as_array().into_iter().flatten() {
                let f = f.as_str().unwrap_or_default();
                if f.ends_with(".rlib") {
                    rlibs.push_str(f);
                    rlibs.push('\n');
                }
            }
        }
        if msg["reason"] != "compiler-message" {
            continue;
        }
        let rendered = msg["message"]["rendered"].as_str().unwrap_or_default();
        match msg["message"]["level"].as_str() {
            Some("warning") => {
                for l in rendered.lines() {
                    println!("cargo:warning=[device {}] {l}", target.key());
                }
            }
            Some("error") => errors.push_str(rendered),
            _ => {}
        }
    }
    if output.status.success() {
        // What a device link from rlibs needs: exactly this build's, not stale ones of earlier builds.
        return write_if_changed(&target_dir.join(RLIBS), &rlibs);
    }
    if errors.is_empty() {
        errors = String::from_utf8_lossy(&output.stderr).into_owned();
    }
    Err(Error::DeviceBuild {
        image: format!("package `{image}` ({})", target.triple()),
        output: errors,
    })
}

/// Source files a dep-info file lists, except the generated ones.
fn dep_info(path: &Path, generated: &Path) -> Vec<PathBuf> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = text
        .lines()
        .filter_map(|l| l.split_once(": ").map(|(_, deps)| deps))
        .flat_map(|deps| {
            deps.replace("\\ ", "\u{0}")
                .split_whitespace()
                .map(|d| d.replace('\u{0}', " "))
                .collect::<Vec<_>>()
        })
        .map(PathBuf::from)
        .filter(|p| !p.starts_with(generated) && p.is_file())
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The image's release profile: the host build's opt-level and checks, unwinding panics (the host image catches a
/// kernel's panic at its entry), no LTO. A GPU image is always optimised (rustc marks unoptimised functions
/// `optnone`, which the device link's O3 would then leave alone: spills and stack) and aborts on panic (it traps).
fn profile_env(target: &DeviceTarget) -> Vec<(&'static str, String)> {
    let opt_level = match target.is_gpu() {
        true => "3".into(),
        false => std::env::var("OPT_LEVEL").unwrap_or_else(|_| "0".into()),
    };
    let panic = if target.is_gpu() { "abort" } else { "unwind" };
    let checks = std::env::var_os("CARGO_CFG_DEBUG_ASSERTIONS")
        .is_some()
        .to_string();
    vec![
        ("CARGO_PROFILE_RELEASE_OPT_LEVEL", opt_level),
        ("CARGO_PROFILE_RELEASE_DEBUG_ASSERTIONS", checks.clone()),
        ("CARGO_PROFILE_RELEASE_OVERFLOW_CHECKS", checks),
        ("CARGO_PROFILE_RELEASE_PANIC", panic.into()),
        ("CARGO_PROFILE_RELEASE_LTO", "false".into()),
        ("CARGO_PROFILE_RELEASE_INCREMENTAL", "false".into()),
        ("CARGO_PROFILE_RELEASE_DEBUG", "false".into()),
        ("CARGO_PROFILE_RELEASE_STRIP", "none".into()),
    ]
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
