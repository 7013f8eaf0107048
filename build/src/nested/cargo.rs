//! Running the nested cargo: a scrubbed environment, the image's own profile, diagnostics and artifacts read from
//! `--message-format=json`, inputs read back from dep-info.

use super::recipe::Recipe;
use super::write_if_changed;
use crate::targets::DeviceTarget;
use crate::Error;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The list of the rlibs the last build of a target directory made.
pub(super) const RLIBS: &str = "rlibs";

pub(super) fn run_cargo(
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
pub(super) fn dep_info(path: &Path, generated: &Path) -> Vec<PathBuf> {
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
pub(super) fn profile_env(target: &DeviceTarget) -> Vec<(&'static str, String)> {
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
