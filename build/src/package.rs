//! The package being built and its targets, as `cargo metadata` reports them (it applies Cargo's target
//! auto-discovery rules, which we would otherwise have to copy).

use crate::{Error, PackageError};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    Lib,
    Bin,
    Example,
    Test,
    Bench,
}

impl Kind {
    /// Cargo's plural for `rustc-link-arg-KINDS`, which passes flags to every target of a kind.
    pub fn plural(self) -> &'static str {
        match self {
            Kind::Lib => "lib",
            Kind::Bin => "bins",
            Kind::Example => "examples",
            Kind::Test => "tests",
            Kind::Bench => "benches",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Kind::Lib => "lib",
            Kind::Bin => "bin",
            Kind::Example => "example",
            Kind::Test => "test",
            Kind::Bench => "bench",
        }
    }
}

#[derive(Debug, Clone)]
pub struct Target {
    pub kind: Kind,
    pub name: String,
    pub src_path: PathBuf,
}

impl Target {
    /// The crate name `module_path!()` starts with.
    pub fn crate_name(&self) -> String {
        self.name.replace('-', "_")
    }
}

/// A dependency of the package that region code uses (`libm`, `num-complex`, an offload-aware library): built for
/// each device target as the package declares it, but without default features (they often mean `std`) and without
/// a `std` feature.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceDep {
    /// The name code uses (`num_complex`).
    pub ident: String,
    /// Its line in a device crate's `[dependencies]`.
    pub toml: String,
}

#[derive(Debug, Clone)]
pub struct Package {
    pub name: String,
    pub edition: String,
    pub manifest_dir: PathBuf,
    pub workspace_root: PathBuf,
    pub targets: Vec<Target>,
    /// `[package.metadata.offload] targets`.
    pub metadata_targets: Option<Vec<String>>,
    /// `[package.metadata.offload] device-dependencies`: the package's dependencies region code may use, as each
    /// device crate's manifest declares them.
    pub device_deps: Vec<DeviceDep>,
    /// Ties the package's images to its offload entries (the macro computes the same from `CARGO_MANIFEST_DIR`).
    pub tag: u64,
}

impl Package {
    pub fn load(manifest_dir: &Path) -> Result<Package, Error> {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let manifest = manifest_dir.join("Cargo.toml");
        let out = Command::new(&cargo)
            .args([
                "metadata",
                "--no-deps",
                "--offline",
                "--format-version",
                "1",
                "--manifest-path",
            ])
            .arg(&manifest)
            .output()
            .map_err(Error::io(format!("running `{cargo} metadata`")))?;
        if !out.status.success() {
            return Err(PackageError::Metadata {
                manifest,
                stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            }
            .into());
        }
        let meta: Value = serde_json::from_slice(&out.stdout).map_err(PackageError::from)?;
        Self::from_metadata(&meta, &manifest)
    }

    fn from_metadata(meta: &Value, manifest: &Path) -> Result<Package, Error> {
        let canon = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
        let want = canon(manifest);
        let pkg = meta["packages"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|p| {
                p["manifest_path"]
                    .as_str()
                    .is_some_and(|m| canon(Path::new(m)) == want)
            })
            .ok_or_else(|| PackageError::NotListed(manifest.to_path_buf()))?;
        let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
        let mut targets = Vec::new();
        for t in pkg["targets"].as_array().into_iter().flatten() {
            let kinds: Vec<&str> = t["kind"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|k| k.as_str())
                .collect();
            let kind = if kinds
                .iter()
                .any(|k| ["lib", "rlib", "dylib", "cdylib", "staticlib"].contains(k))
            {
                Kind::Lib
            } else if kinds.contains(&"bin") {
                Kind::Bin
            } else if kinds.contains(&"example") {
                Kind::Example
            } else if kinds.contains(&"test") {
                Kind::Test
            } else if kinds.contains(&"bench") {
                Kind::Bench
            } else {
                continue; // build scripts, proc macros
            };
            targets.push(Target {
                kind,
                name: s(&t["name"]),
                src_path: PathBuf::from(s(&t["src_path"])),
            });
        }
        let metadata_targets = pkg["metadata"]["offload"]["targets"].as_array().map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(String::from))
                .collect()
        });
        let device_deps = device_deps(pkg, manifest)?;
        Ok(Package {
            device_deps,
            name: s(&pkg["name"]),
            edition: s(&pkg["edition"]),
            manifest_dir: manifest.parent().map(canon).unwrap_or_default(),
            workspace_root: canon(Path::new(&s(&meta["workspace_root"]))),
            targets,
            metadata_targets,
            // The same string the macro sees: cargo's own `CARGO_MANIFEST_DIR` when building, else the manifest's.
            tag: offload_model::identity::package_tag(
                &std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| {
                    manifest
                        .parent()
                        .unwrap_or(Path::new(""))
                        .display()
                        .to_string()
                }),
            ),
        })
    }

    /// The crate names region code may use besides `core` and `offload`.
    pub fn device_dep_idents(&self) -> impl Iterator<Item = &str> {
        self.device_deps.iter().map(|d| d.ident.as_str())
    }

    /// Eight hex digits of the package tag, which make the names of generated packages and archives unique to
    /// this package across a link (two packages may share a name: different versions, or paths).
    pub fn unique_suffix(&self) -> String {
        format!("{:08x}", self.tag as u32)
    }

    pub fn has_lib(&self) -> bool {
        self.targets.iter().any(|t| t.kind == Kind::Lib)
    }

    /// How a path is shown to the user: relative to the workspace root, as rustc shows it under cargo.
    pub fn display_path(&self, p: &Path) -> PathBuf {
        p.strip_prefix(&self.workspace_root)
            .map(Path::to_path_buf)
            .unwrap_or_else(|_| p.to_path_buf())
    }
}

/// `[package.metadata.offload] device-dependencies = ["libm"]`: each named dependency as a device crate's manifest
/// declares it.
fn device_deps(pkg: &Value, manifest: &Path) -> Result<Vec<DeviceDep>, Error> {
    let names: Vec<&str> = pkg["metadata"]["offload"]["device-dependencies"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str())
        .collect();
    let mut out = Vec::new();
    for name in names {
        let dep = pkg["dependencies"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|d| {
                d["kind"].is_null()
                    && (d["rename"].as_str() == Some(name) || d["name"].as_str() == Some(name))
            })
            .ok_or_else(|| PackageError::DeviceDependency {
                manifest: manifest.to_path_buf(),
                name: name.into(),
            })?;
        let package = dep["name"].as_str().unwrap_or(name);
        let features: Vec<String> = dep["features"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|f| f.as_str())
            .filter(|f| *f != "std")
            .map(|f| format!("{f:?}"))
            .collect();
        let source = match dep["path"].as_str() {
            Some(path) => format!("path = {path:?}"),
            None => format!("version = {:?}", dep["req"].as_str().unwrap_or("*")),
        };
        out.push(DeviceDep {
            ident: name.replace('-', "_"),
            toml: format!(
                "{name} = {{ package = {package:?}, {source}, default-features = false, features = [{}] }}",
                features.join(", ")
            ),
        });
    }
    Ok(out)
}
