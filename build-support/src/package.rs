//! The package being built and its targets, as `cargo metadata` reports them (it applies Cargo's target
//! auto-discovery rules, which we would otherwise have to copy).

use crate::{Error, PackageError};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
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

/// A dependency of the package that region code uses: a `no_std` crate (`libm`, `num-complex`) or an offload-aware
/// library.
#[derive(Debug, Clone)]
pub struct DeviceDep {
    /// The name code uses (`num_complex`).
    pub ident: String,
    pub source: DepSource,
}

#[derive(Debug, Clone)]
pub enum DepSource {
    /// A crate built for each device target as the package declares it, but without default features (they often
    /// mean `std`) and without a `std` feature: its line in a device crate's `[dependencies]`.
    Crate { toml: String },
    /// A library that depends on `offload` itself: its device items (`#[declare_target]` and what they reach) are
    /// outlined into a device crate of its own, which the package's device crates depend on.
    Offload(Box<Package>),
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
    /// The package's dependencies region code may use: those `[package.metadata.offload] device-dependencies`
    /// lists, and every offload-aware library among its path dependencies.
    pub device_deps: Vec<DeviceDep>,
    /// Whether it depends on `offload`: then, as a dependency, it is an offload-aware library.
    pub uses_offload: bool,
    /// The names code gives its other dependencies, which are not built for devices.
    pub host_crates: Vec<String>,
    /// Ties the package's images to its offload entries (the macro computes the same from `CARGO_MANIFEST_DIR`).
    pub tag: u64,
    /// Its `[features]`, which its device crates declare and enable as the host build does, so `cfg(feature = ..)`
    /// picks the same code on both sides.
    pub features: Features,
}

/// A package's features: each declared one with what it enables, and those on in this build.
#[derive(Clone, Debug, Default)]
pub struct Features {
    pub declared: BTreeMap<String, Vec<String>>,
    pub enabled: BTreeSet<String>,
}

impl Features {
    fn from_metadata(pkg: &Value) -> Features {
        let declared = pkg["features"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(k, v)| {
                let on = v
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|x| x.as_str().map(String::from))
                    .collect();
                (k.clone(), on)
            })
            .collect();
        Features {
            declared,
            enabled: BTreeSet::new(),
        }
    }

    /// Turns on `names` and the features they enable in turn (`dep:x` and `x/y` entries are dependencies', which
    /// device crates do not have).
    pub fn enable<'a>(&mut self, names: impl IntoIterator<Item = &'a str>) {
        let mut todo: Vec<String> = names.into_iter().map(String::from).collect();
        while let Some(n) = todo.pop() {
            if let Some(on) = self.declared.get(&n) {
                if self.enabled.insert(n) {
                    todo.extend(on.iter().filter(|e| !e.contains([':', '/'])).cloned());
                }
            }
        }
    }

    /// The features of the build cargo is running now, from its `CARGO_FEATURE_<NAME>` variables.
    fn enable_from_build_env(&mut self) {
        let on: Vec<String> = self
            .declared
            .keys()
            .filter(|f| {
                let var = format!("CARGO_FEATURE_{}", f.to_uppercase().replace('-', "_"));
                std::env::var_os(var).is_some()
            })
            .cloned()
            .collect();
        self.enable(on.iter().map(String::as_str));
    }

    /// The device crate's `[features]` table: every declared feature (none enabling anything: the device crate has
    /// none of the package's optional dependencies) but `default`, which lists those this build has on. `reserved`
    /// names the device crate's dependencies, which a feature may not share a name with.
    pub fn manifest_table(&self, reserved: &[&str]) -> String {
        let names: Vec<&String> = self
            .declared
            .keys()
            .filter(|k| *k != "default" && !reserved.contains(&k.as_str()))
            .collect();
        let mut out = format!(
            "[features]\ndefault = [{}]\n",
            names
                .iter()
                .filter(|n| self.enabled.contains(**n))
                .map(|n| format!("{n:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        for n in names {
            out.push_str(&format!("{n:?} = []\n"));
        }
        out
    }
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
        let pkg = find_package(meta, manifest)?;
        let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
        let metadata_targets = pkg["metadata"]["offload"]["targets"].as_array().map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(String::from))
                .collect()
        });
        let device_deps = device_deps(pkg, manifest)?;
        let host_crates = host_crates(pkg, &device_deps);
        let manifest_dir = manifest.parent().map(canon).unwrap_or_default();
        // The same string the macro sees: cargo's own `CARGO_MANIFEST_DIR` when building this package, else the
        // manifest's directory (a dependency loaded by a dependent's build script).
        let building = std::env::var("CARGO_MANIFEST_DIR")
            .ok()
            .filter(|d| canon(Path::new(d)) == manifest_dir);
        let mut features = Features::from_metadata(pkg);
        // This package's build has its features in the environment; a dependency's are set by its dependent
        // (`device_deps`), from the dependency's entry.
        match building {
            Some(_) => features.enable_from_build_env(),
            None => features.enable(["default"]),
        }
        let tag_dir = building.unwrap_or_else(|| {
            manifest
                .parent()
                .unwrap_or(Path::new(""))
                .display()
                .to_string()
        });
        let mut package = Package {
            host_crates,
            device_deps,
            uses_offload: normal_deps(pkg).any(|d| d["name"].as_str() == Some(RUNTIME)),
            name: s(&pkg["name"]),
            edition: s(&pkg["edition"]),
            manifest_dir,
            workspace_root: canon(Path::new(&s(&meta["workspace_root"]))),
            targets: targets(pkg),
            metadata_targets,
            tag: offload_model::identity::package_tag(&tag_dir),
            features,
        };
        // The package's own library is an offload-aware library of its other targets (`mypkg::helper` in a
        // binary's region).
        if let Some(ident) = package.lib_crate_name().filter(|_| package.uses_offload) {
            let lib = Box::new(package.clone());
            package.device_deps.push(DeviceDep {
                ident,
                source: DepSource::Offload(lib),
            });
        }
        Ok(package)
    }

    /// Makes `names` (and what they enable) the features this build has on, here and in the twin of its library
    /// its other targets use: a dependency's are its dependent's to say.
    fn enable_only<'a>(&mut self, names: impl IntoIterator<Item = &'a str>) {
        self.features.enabled.clear();
        self.features.enable(names);
        let (dir, features) = (self.manifest_dir.clone(), self.features.clone());
        for d in &mut self.device_deps {
            if let DepSource::Offload(lib) = &mut d.source {
                if lib.manifest_dir == dir {
                    lib.features = features.clone();
                }
            }
        }
    }

    /// Whether `lib` is this package itself (its library, as its other targets use it).
    pub fn is_self(&self, lib: &Package) -> bool {
        lib.manifest_dir == self.manifest_dir
    }

    /// The crate names region code may use besides `core` and `offload`.
    pub fn device_dep_idents(&self) -> impl Iterator<Item = &str> {
        self.device_deps.iter().map(|d| d.ident.as_str())
    }

    /// The offload-aware libraries the package depends on, directly or through each other, each once, dependencies
    /// first.
    pub fn offload_libraries(&self) -> Vec<&Package> {
        fn visit<'p>(pkg: &'p Package, out: &mut Vec<&'p Package>) {
            for d in &pkg.device_deps {
                if let DepSource::Offload(lib) = &d.source {
                    visit(lib, out);
                    if !out.iter().any(|o| o.manifest_dir == lib.manifest_dir) {
                        out.push(lib);
                    }
                }
            }
        }
        let mut out = Vec::new();
        visit(self, &mut out);
        out
    }

    /// The name of the library target (`[lib] name`, else the package's, with `-` as `_`).
    pub fn lib_crate_name(&self) -> Option<String> {
        self.targets
            .iter()
            .find(|t| t.kind == Kind::Lib)
            .map(Target::crate_name)
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
/// `p` canonical where it exists, as written otherwise.
fn canon(p: &Path) -> PathBuf {
    p.canonicalize().unwrap_or_else(|_| p.to_path_buf())
}

/// The package of `manifest` among those cargo metadata lists.
fn find_package<'m>(meta: &'m Value, manifest: &Path) -> Result<&'m Value, Error> {
    let want = canon(manifest);
    meta["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| {
            p["manifest_path"]
                .as_str()
                .is_some_and(|m| canon(Path::new(m)) == want)
        })
        .ok_or_else(|| PackageError::NotListed(manifest.to_path_buf()).into())
}

/// The package's targets a device crate may be written for (not build scripts or proc macros).
fn targets(pkg: &Value) -> Vec<Target> {
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
    targets
}

/// The crates the package depends on that are not built for devices: neither ours nor offload-aware libraries
/// (`device_deps`). Dev-dependencies too: tests and examples may name them.
fn host_crates(pkg: &Value, device_deps: &[DeviceDep]) -> Vec<String> {
    pkg["dependencies"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|d| d["kind"].as_str() != Some("build"))
        .filter(|d| !OURS.contains(&d["name"].as_str().unwrap_or_default()))
        .map(|d| code_name(d).replace('-', "_"))
        .filter(|n| !device_deps.iter().any(|d| d.ident == *n))
        .collect()
}

/// The package's normal dependencies (not dev- or build-dependencies).
fn normal_deps(pkg: &Value) -> impl Iterator<Item = &Value> {
    pkg["dependencies"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|d| d["kind"].is_null())
}

/// The name code gives a dependency: its rename, else its package name.
fn code_name(d: &Value) -> String {
    d["rename"]
        .as_str()
        .or(d["name"].as_str())
        .unwrap_or_default()
        .to_string()
}

/// The offload-aware libraries among the package's registry and git dependencies, by the name code gives them: found
/// in cargo's resolve of the package (`cargo metadata` with dependencies for the build's target, offline: the build
/// has the sources), each with the features the resolve turned on for it. None where cargo cannot resolve offline
/// (a dev-dependency this build did not download): region code naming such a library is then the outliner's error.
fn resolved_offload_libraries(pkg: &Value, manifest: &Path) -> Vec<(String, Package)> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(&cargo);
    cmd.args([
        "metadata",
        "--offline",
        "--format-version",
        "1",
        "--manifest-path",
    ])
    .arg(manifest);
    if let Ok(t) = std::env::var("TARGET") {
        cmd.args(["--filter-platform", &t]);
    }
    let meta: Value = match cmd.output() {
        Ok(out) if out.status.success() => match serde_json::from_slice(&out.stdout) {
            Ok(v) => v,
            Err(_) => return Vec::new(),
        },
        _ => return Vec::new(),
    };
    let packages: Vec<&Value> = meta["packages"].as_array().into_iter().flatten().collect();
    let by_id = |id: &Value| packages.iter().copied().find(|p| p["id"] == *id);
    let nodes: Vec<&Value> = meta["resolve"]["nodes"]
        .as_array()
        .into_iter()
        .flatten()
        .collect();
    let Some(node) = nodes.iter().find(|n| n["id"] == pkg["id"]) else {
        return Vec::new();
    };
    let mut libs = Vec::new();
    for dep in node["deps"].as_array().into_iter().flatten() {
        // Normal dependencies only; path ones were loaded from the manifest's entries.
        let normal = dep["dep_kinds"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|k| k["kind"].is_null());
        let Some(dep_pkg) = by_id(&dep["pkg"]) else {
            continue;
        };
        let name = dep_pkg["name"].as_str().unwrap_or_default();
        if !normal || dep_pkg["source"].is_null() || OURS.contains(&name) {
            continue;
        }
        let uses_offload = dep_pkg["dependencies"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|d| d["name"] == RUNTIME && d["kind"].is_null());
        let Some(dir) = dep_pkg["manifest_path"]
            .as_str()
            .and_then(|m| Path::new(m).parent())
        else {
            continue;
        };
        if !uses_offload {
            continue;
        }
        let Ok(mut lib) = Package::load(dir) else {
            continue;
        };
        let on: Vec<String> = nodes
            .iter()
            .find(|n| n["id"] == dep["pkg"])
            .and_then(|n| n["features"].as_array())
            .into_iter()
            .flatten()
            .filter_map(|f| f.as_str().map(String::from))
            .collect();
        lib.enable_only(on.iter().map(String::as_str));
        libs.push((dep["name"].as_str().unwrap_or(name).replace('-', "_"), lib));
    }
    libs
}

/// The runtime's package, which an offload-aware package depends on (as `offload`, its library's name; cargo's
/// metadata names a dependency by its package).
const RUNTIME: &str = "omp-offload";

/// Our own packages: dependencies of every offload package, never device dependencies.
const OURS: &[&str] = &[
    RUNTIME,
    "offload-build",
    "offload-device",
    "offload-macros",
    "offload-model",
];

/// `[package.metadata.offload] device-dependencies = ["libm"]`, each as a device crate's manifest declares it, and
/// the offload-aware libraries among the path dependencies (listed or not: a library's device items are part of
/// its API, as its functions are).
fn device_deps(pkg: &Value, manifest: &Path) -> Result<Vec<DeviceDep>, Error> {
    let listed: Vec<&str> = pkg["metadata"]["offload"]["device-dependencies"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str())
        .collect();
    let mut out = Vec::new();
    for dep in normal_deps(pkg) {
        out.extend(path_library(dep)?);
    }
    // Registry and git dependencies have no path in the manifest: their sources are where cargo resolved them.
    if normal_deps(pkg)
        .any(|d| d["path"].is_null() && !OURS.contains(&d["name"].as_str().unwrap_or_default()))
    {
        for (ident, lib) in resolved_offload_libraries(pkg, manifest) {
            if !out.iter().any(|d| d.ident == ident) {
                out.push(DeviceDep {
                    ident,
                    source: DepSource::Offload(Box::new(lib)),
                });
            }
        }
    }
    for name in listed {
        let dep = normal_deps(pkg)
            .find(|d| code_name(d) == name || d["name"].as_str() == Some(name))
            .ok_or_else(|| PackageError::DeviceDependency {
                manifest: manifest.to_path_buf(),
                name: name.into(),
            })?;
        let ident = code_name(dep).replace('-', "_");
        if out.iter().any(|d| d.ident == ident) {
            continue; // an offload-aware library, found above
        }
        out.push(listed_crate(dep, ident, name));
    }
    Ok(out)
}

/// A path dependency `dep` that is an offload-aware library, with the features its entry asks for; `None` for other
/// path dependencies and for ours.
fn path_library(dep: &Value) -> Result<Option<DeviceDep>, Error> {
    let package = dep["name"].as_str().unwrap_or_default();
    let Some(path) = dep["path"].as_str().filter(|_| !OURS.contains(&package)) else {
        return Ok(None);
    };
    let mut lib = Package::load(Path::new(path))?;
    if !lib.uses_offload {
        return Ok(None);
    }
    // The features the entry asks for (cargo may unify more in from elsewhere in the build; region code should
    // not depend on those).
    let defaults = dep["uses_default_features"].as_bool() != Some(false);
    lib.enable_only(
        defaults.then_some("default").into_iter().chain(
            dep["features"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|f| f.as_str()),
        ),
    );
    // Code names the library by its rename, else by its lib target's name.
    let ident = match dep["rename"].as_str() {
        Some(r) => r.replace('-', "_"),
        None => lib
            .lib_crate_name()
            .unwrap_or_else(|| package.replace('-', "_")),
    };
    Ok(Some(DeviceDep {
        ident,
        source: DepSource::Offload(Box::new(lib)),
    }))
}

/// A crate `[package.metadata.offload] device-dependencies` lists, as its line in a device crate's `[dependencies]`.
fn listed_crate(dep: &Value, ident: String, name: &str) -> DeviceDep {
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
    DeviceDep {
        ident: ident.clone(),
        source: DepSource::Crate {
            toml: format!(
                "{ident} = {{ package = {package:?}, {source}, default-features = false, features = [{}] }}",
                features.join(", ")
            ),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn features() -> Features {
        Features::from_metadata(&serde_json::json!({"features": {
            "default": ["wide"],
            "wide": ["simd", "dep:libm", "num/std"],
            "simd": [],
            "narrow": [],
            "libm": [],
        }}))
    }

    #[test]
    fn enabling_a_feature_enables_what_it_lists_but_not_dependencies() {
        let mut f = features();
        f.enable(["default"]);
        let on: Vec<&str> = f.enabled.iter().map(String::as_str).collect();
        assert_eq!(on, ["default", "simd", "wide"]);
    }

    #[test]
    fn the_device_crate_declares_every_feature_and_enables_those_on() {
        let mut f = features();
        f.enable(["narrow"]);
        let table = f.manifest_table(&["libm", "offload"]);
        assert_eq!(
            table,
            "[features]\ndefault = [\"narrow\"]\n\"narrow\" = []\n\"simd\" = []\n\"wide\" = []\n",
            "`libm` names a dependency of the device crate, and `default` is this build's"
        );
    }
}
