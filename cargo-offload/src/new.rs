//! `cargo offload new` and `cargo offload init`: a package that offloads from its first build, as `cargo new` makes
//! one that prints. It depends on `offload` and build-depends on `offload-build` (by path to a checkout, by git, or,
//! once published, by version), has the `build.rs` that outlines its regions, a first region, and a test; `--gpu`
//! lists GPU targets in its `[package.metadata.offload]`.

use offload_model::device_kind::DeviceKind;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// Where the new package's `offload` and `offload-build` come from.
#[derive(Clone, Debug, PartialEq)]
pub enum Source {
    /// A checkout of this project: its `runtime/` and `build-support/`.
    Path(PathBuf),
    /// A git repository of this project.
    Git(String),
    /// crates.io, at this version.
    Registry(&'static str),
}

impl Source {
    /// The source the options name, else the checkout this `cargo-offload` was built from where it still exists
    /// (an install from a clone keeps making packages that build against that clone), else the registry.
    pub fn choose(path: Option<PathBuf>, git: Option<String>) -> Result<Source, NewError> {
        match (path, git) {
            (Some(_), Some(_)) => Err(NewError::TwoSources),
            (Some(p), None) => {
                let p = std::path::absolute(&p).unwrap_or(p);
                if !p.join("runtime/Cargo.toml").is_file() {
                    return Err(NewError::NotACheckout(p));
                }
                Ok(Source::Path(p))
            }
            (None, Some(url)) => Ok(Source::Git(url)),
            (None, None) => Ok(Path::new(env!("CARGO_MANIFEST_DIR"))
                .parent()
                .filter(|root| root.join("runtime/Cargo.toml").is_file())
                .map_or(Source::Registry(env!("CARGO_PKG_VERSION")), |root| {
                    Source::Path(root.to_path_buf())
                })),
        }
    }

    /// The right-hand side of the dependency `key` on package `package` (`offload` on `omp-offload` in `runtime/`,
    /// `offload-build` in `build-support/`): a key that is not the package's name says which package it means.
    fn dependency(&self, key: &str, package: &str, folder: &str) -> String {
        let renamed = match key == package {
            true => String::new(),
            false => format!("package = \"{package}\", "),
        };
        match self {
            Source::Path(root) => format!(
                "{{ {renamed}path = {} }}",
                toml_string(&root.join(folder).display().to_string())
            ),
            Source::Git(url) => {
                format!("{{ git = {}, package = \"{package}\" }}", toml_string(url))
            }
            Source::Registry(v) if renamed.is_empty() => format!("\"{v}\""),
            Source::Registry(v) => format!("{{ {renamed}version = \"{v}\" }}"),
        }
    }
}

/// The runtime's package, which the new package depends on as `offload` (its library's name).
const RUNTIME_PACKAGE: &str = "omp-offload";

/// What to make.
#[derive(Clone, Debug)]
pub struct NewOptions {
    /// The package's name (else the directory's).
    pub name: Option<String>,
    /// A library (an offload-aware one: its regions go to the devices of the programs that use it).
    pub lib: bool,
    /// GPU targets, as `OFFLOAD_TARGETS` writes them: `nvptx64:sm_90`, `amdgcn:gfx90a`.
    pub gpu: Vec<String>,
    pub source: Source,
}

#[derive(Debug, Error)]
pub enum NewError {
    #[error("`{0}` already exists")]
    Exists(PathBuf),
    #[error(
        "`{0}` already has a Cargo.toml: add offload to it by hand (the dependency lines are in the README), or \
         make a new package with `cargo offload new`"
    )]
    HasManifest(PathBuf),
    #[error("`{0}` is not a valid package name: use letters, digits, `-` and `_`, not starting with a digit")]
    BadName(String),
    #[error("cannot tell the package's name from `{0}`: pass `--name`")]
    NoName(PathBuf),
    #[error("`{0}` is not a GPU target: write `nvptx64:sm_90`, `amdgcn:gfx90a` or `gpu-sim` (several architectures: `nvptx64:sm_80,sm_90`)")]
    BadTarget(String),
    #[error("`--path` and `--git` both name where offload comes from: pass one")]
    TwoSources,
    #[error("`{0}` is not a checkout of offload (no runtime/Cargo.toml in it)")]
    NotACheckout(PathBuf),
    #[error("writing {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// `cargo offload new`: makes the directory `dir` and the package in it.
pub fn new(dir: &Path, options: &NewOptions) -> Result<Vec<PathBuf>, NewError> {
    if dir.exists() {
        return Err(NewError::Exists(dir.to_path_buf()));
    }
    write_package(dir, options)
}

/// `cargo offload init`: the package in the existing (or new) directory `dir`, which must not hold one yet.
pub fn init(dir: &Path, options: &NewOptions) -> Result<Vec<PathBuf>, NewError> {
    if dir.join("Cargo.toml").exists() {
        return Err(NewError::HasManifest(dir.to_path_buf()));
    }
    write_package(dir, options)
}

/// The files of the package, written where none is yet (an `init` keeps what the directory has); the paths
/// written.
fn write_package(dir: &Path, options: &NewOptions) -> Result<Vec<PathBuf>, NewError> {
    let name = package_name(dir, options)?;
    for t in &options.gpu {
        check_gpu_target(t)?;
    }
    let code = if options.lib {
        ("src/lib.rs", lib_rs(&name))
    } else {
        ("src/main.rs", MAIN_RS.to_string())
    };
    let files = [
        ("Cargo.toml", manifest(&name, options)),
        ("build.rs", BUILD_RS.to_string()),
        (code.0, code.1),
        (".gitignore", "/target\n".to_string()),
    ];
    let mut written = Vec::new();
    for (file, text) in files {
        let path = dir.join(file);
        if path.exists() {
            continue;
        }
        let io = |source| NewError::Io {
            path: path.clone(),
            source,
        };
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(io)?;
        }
        std::fs::write(&path, text).map_err(io)?;
        written.push(path);
    }
    Ok(written)
}

fn package_name(dir: &Path, options: &NewOptions) -> Result<String, NewError> {
    let name = match &options.name {
        Some(n) => n.clone(),
        None => {
            let abs = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
            abs.file_name()
                .and_then(|n| n.to_str())
                .map(str::to_string)
                .ok_or_else(|| NewError::NoName(dir.to_path_buf()))?
        }
    };
    let valid = name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        && name.chars().next().is_some_and(|c| !c.is_ascii_digit());
    if !valid {
        return Err(NewError::BadName(name));
    }
    Ok(name)
}

/// A GPU target as `OFFLOAD_TARGETS` takes it: a GPU kind and at least one architecture it knows, or `gpu-sim`
/// (the GPU lowering run on the host), which has none.
fn check_gpu_target(t: &str) -> Result<(), NewError> {
    let bad = || NewError::BadTarget(t.to_string());
    if t == DeviceKind::GpuSim.name() {
        return Ok(());
    }
    let (kind, archs) = t.split_once(':').ok_or_else(bad)?;
    let kind = DeviceKind::from_name(kind).ok_or_else(bad)?;
    if !matches!(kind, DeviceKind::Nvptx | DeviceKind::Amdgcn) {
        return Err(bad());
    }
    if archs.split(',').all(|arch| kind.is_arch(arch)) {
        Ok(())
    } else {
        Err(bad())
    }
}

fn manifest(name: &str, options: &NewOptions) -> String {
    let mut targets = vec!["\"host\"".to_string()];
    targets.extend(options.gpu.iter().map(|t| toml_string(t)));
    let mut s = String::new();
    let _ = writeln!(
        s,
        "[package]\nname = \"{name}\"\nversion = \"0.1.0\"\nedition = \"2021\"\n"
    );
    let _ = writeln!(
        s,
        "# The runtime, published as `omp-offload`; its library (`use offload::..`) is `offload`. Its GPU plugins are\n\
         # features on by default (`cuda`, `amdgpu`, `gpu-sim`): `default-features = false` builds for the host only.\n\
         [dependencies]\noffload = {}\n",
        options.source.dependency("offload", RUNTIME_PACKAGE, "runtime")
    );
    let _ =
        writeln!(
        s,
        "# build.rs outlines the package's regions into device crates and embeds their images.\n\
         [build-dependencies]\noffload-build = {}\n",
        options.source.dependency("offload-build", "offload-build", "build-support")
    );
    let _ = writeln!(
        s,
        "# What the regions are built for (OFFLOAD_TARGETS overrides it): \"host\" is the host offload device, which\n\
         # needs nothing but the Rust toolchain; GPU targets need the device toolchain (`cargo offload doctor`).\n\
         [package.metadata.offload]\ntargets = [{}]",
        targets.join(", ")
    );
    s
}

/// A TOML basic string.
fn toml_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04X}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

const BUILD_RS: &str = "fn main() {
    offload_build::build();
}
";

const MAIN_RS: &str = r#"use offload::{omp_get_num_devices, target};

/// A region: its loop's iterations are shared out over the teams and threads of the device it runs on.
#[target(teams_distribute_parallel_for, map(to: x), map(tofrom: y))]
fn saxpy(a: f32, x: &[f32], y: &mut [f32]) {
    for i in 0..y.len() {
        y[i] += a * x[i];
    }
}

fn main() {
    let x = vec![1.0f32; 1 << 20];
    let mut y = vec![2.0f32; 1 << 20];
    // On the default device; on the host when no device can take it. `OFFLOAD_INFO=1` says where it ran.
    saxpy(3.0, &x, &mut y);
    assert!(y.iter().all(|&v| v == 5.0));
    println!("saxpy on {} element(s): ok ({} device(s))", y.len(), omp_get_num_devices());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn saxpy_adds_a_times_x() {
        let x = [1.0, 2.0, 3.0];
        let mut y = [10.0, 20.0, 30.0];
        saxpy(2.0, &x, &mut y);
        assert_eq!(y, [12.0, 24.0, 36.0]);
    }
}
"#;

fn lib_rs(name: &str) -> String {
    let krate = name.replace('-', "_");
    format!(
        r#"//! An offload-aware library: its regions go to the devices of the programs that use it, which list their
//! targets in their own `[package.metadata.offload]`.

use offload::target;

/// Scales `y` by `a` on the default device (on the host when no device can take it).
///
/// ```
/// let mut y = vec![1.0f32, 2.0];
/// {krate}::scale(3.0, &mut y);
/// assert_eq!(y, [3.0, 6.0]);
/// ```
#[target(teams_distribute_parallel_for)]
pub fn scale(a: f32, y: &mut [f32]) {{
    for i in 0..y.len() {{
        y[i] *= a;
    }}
}}

#[cfg(test)]
mod tests {{
    use super::*;

    #[test]
    fn scale_multiplies_every_element() {{
        let mut y = [1.0, -2.0, 0.5];
        scale(4.0, &mut y);
        assert_eq!(y, [4.0, -8.0, 2.0]);
    }}
}}
"#
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(source: Source) -> NewOptions {
        NewOptions {
            name: None,
            lib: false,
            gpu: Vec::new(),
            source,
        }
    }

    #[test]
    fn the_manifest_names_the_source_and_the_targets() {
        let mut o = options(Source::Path(PathBuf::from("/src/off \"load\"")));
        o.gpu = vec!["nvptx64:sm_90".into()];
        let m = manifest("demo", &o);
        assert!(m.contains("name = \"demo\""), "{m}");
        assert!(
            m.contains(
                r#"offload = { package = "omp-offload", path = "/src/off \"load\"/runtime" }"#
            ),
            "{m}"
        );
        assert!(m.contains("offload-build = { path = "), "{m}");
        assert!(m.contains(r#"targets = ["host", "nvptx64:sm_90"]"#), "{m}");
        let m = manifest(
            "demo",
            &options(Source::Git("https://example.org/o.git".into())),
        );
        assert!(
            m.contains(
                r#"offload = { git = "https://example.org/o.git", package = "omp-offload" }"#
            ),
            "{m}"
        );
        let m = manifest("demo", &options(Source::Registry("0.1.0")));
        assert!(
            m.contains("offload = { package = \"omp-offload\", version = \"0.1.0\" }\n"),
            "{m}"
        );
        assert!(m.contains("offload-build = \"0.1.0\"\n"), "{m}");
    }

    #[test]
    fn bad_names_and_targets_are_refused_with_the_fix() {
        let dir = Path::new("/nonexistent/2fast");
        let e = package_name(dir, &options(Source::Registry("0.1.0"))).unwrap_err();
        assert!(e.to_string().contains("not a valid package name"), "{e}");
        for t in [
            "sm_90",
            "nvptx64:gfx90a",
            "host:x86-64",
            "cuda:sm_90",
            "amdgcn:",
        ] {
            let e = check_gpu_target(t).unwrap_err();
            assert!(e.to_string().contains("nvptx64:sm_90"), "{t}: {e}");
        }
        check_gpu_target("nvptx64:sm_80,sm_90").unwrap();
        check_gpu_target("amdgcn:gfx90a").unwrap();
        check_gpu_target("gpu-sim").unwrap();
    }

    #[test]
    fn sources_are_one_at_a_time_and_a_path_must_be_a_checkout() {
        let e = Source::choose(Some("/x".into()), Some("u".into())).unwrap_err();
        assert!(matches!(e, NewError::TwoSources));
        let e = Source::choose(Some("/nonexistent".into()), None).unwrap_err();
        assert!(matches!(e, NewError::NotACheckout(_)));
        // Built from this checkout: new packages build against it.
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        assert_eq!(
            Source::choose(None, None).unwrap(),
            Source::Path(root.to_path_buf())
        );
    }
}
