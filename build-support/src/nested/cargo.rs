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
    workspace_root: &Path,
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
    let (rlibs, mut errors) = read_messages(&output.stdout, target, workspace_root);
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

/// Reads the nested cargo's JSON messages: the rlibs it made (one path a line), its warnings passed on to the
/// outer build's, and its errors rendered against the user's source.
fn read_messages(stdout: &[u8], target: &DeviceTarget, workspace_root: &Path) -> (String, String) {
    let (mut rlibs, mut errors) = (String::new(), String::new());
    for line in String::from_utf8_lossy(stdout).lines() {
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
            Some("error") => errors.push_str(&render_error(&msg["message"], workspace_root)),
            _ => {}
        }
    }
    (rlibs, errors)
}

/// A device-build error as rustc renders it, but quoting the user's source: the device crate keeps every item on its
/// line, so a span's line is the user's, but a region's body is there as lowered (views, loop drivers), which the
/// user never wrote. A span whose text differs from the user's line is underlined whole, with its label; one in the
/// code offload appends (kernel entries) or in a file the user does not have says so instead of quoting it.
fn render_error(msg: &serde_json::Value, workspace_root: &Path) -> String {
    let text = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_string();
    let mut out = match msg["code"]["code"].as_str() {
        Some(code) => format!("error[{code}]: {}\n", text(&msg["message"])),
        None => format!("error: {}\n", text(&msg["message"])),
    };
    let spans = msg["spans"].as_array().cloned().unwrap_or_default();
    for span in spans
        .iter()
        .filter(|s| s["is_primary"].as_bool() == Some(true))
    {
        let file = text(&span["file_name"]);
        let line = span["line_start"].as_u64().unwrap_or(0) as usize;
        let (start, end) = (
            span["column_start"].as_u64().unwrap_or(1) as usize,
            span["column_end"].as_u64().unwrap_or(1) as usize,
        );
        let label = text(&span["label"]);
        let path = Path::new(&file);
        let abs = if path.is_absolute() {
            path.to_path_buf()
        } else {
            workspace_root.join(path)
        };
        let user_line = std::fs::read_to_string(&abs)
            .ok()
            .and_then(|src| src.lines().nth(line.saturating_sub(1)).map(String::from));
        let compiled = span["text"][0]["text"].as_str();
        let num = line.to_string();
        let pad = " ".repeat(num.len());
        match user_line {
            // Kept as written: rustc's columns are the user's.
            Some(l) if compiled == Some(l.as_str()) => {
                out.push_str(&format!("{pad}--> {file}:{line}:{start}\n"));
                let width = end.saturating_sub(start).max(1);
                out.push_str(&format!(
                    "{pad} |\n{num} | {l}\n{pad} | {}{} {label}\n",
                    " ".repeat(start.saturating_sub(1)),
                    "^".repeat(width)
                ));
            }
            // A region's body as offload lowered it: the user's line, whole. (Code appended after the user's line,
            // the module's kernel entries, is offload's own.)
            Some(l)
                if !l.trim().is_empty()
                    && compiled.is_some_and(|c| !(c.starts_with(l.as_str()) && start > l.len())) =>
            {
                let indent = l.len() - l.trim_start().len();
                out.push_str(&format!("{pad}--> {file}:{line}:{}\n", indent + 1));
                out.push_str(&format!(
                    "{pad} |\n{num} | {l}\n{pad} | {}{} {label}\n{pad} = note: in this line as the device \
                     compiles it (a region's body is lowered for the device: its columns are not yours)\n",
                    " ".repeat(indent),
                    "^".repeat(l.trim().len().max(1))
                ));
            }
            _ => out.push_str(&format!(
                "{pad}--> {file}:{line}\n{pad} = note: in code offload generated for the device ({label})\n"
            )),
        }
    }
    for child in msg["children"].as_array().into_iter().flatten() {
        let level = child["level"].as_str().unwrap_or("note");
        let m = text(&child["message"]);
        if !m.is_empty() {
            out.push_str(&format!("  = {level}: {m}\n"));
        }
    }
    out.push('\n');
    out
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

#[cfg(test)]
mod tests {
    use super::render_error;
    use serde_json::json;

    /// A rustc error at `line` of `src/main.rs`, whose compiled text is `compiled`.
    fn error(line: usize, start: usize, end: usize, compiled: &str) -> serde_json::Value {
        json!({
            "message": "mismatched types",
            "code": {"code": "E0308"},
            "spans": [{
                "file_name": "src/main.rs", "line_start": line, "column_start": start, "column_end": end,
                "is_primary": true, "label": "expected `f64`, found `f32`", "text": [{"text": compiled}]
            }],
            "children": [{"level": "help", "message": "convert it", "spans": []}]
        })
    }

    /// A workspace of one `src/main.rs`, its own per test (tests run at once).
    fn workspace(test: &str) -> std::path::PathBuf {
        let dir =
            std::env::temp_dir().join(format!("offload-render-{}-{test}", std::process::id()));
        std::fs::create_dir_all(dir.join("src")).unwrap();
        std::fs::write(
            dir.join("src/main.rs"),
            "fn f(x: &mut [f64], k: f32) {\n    x[0] = x[1] * k;\n    let y: f64 = k;\n}\n",
        )
        .unwrap();
        dir
    }

    #[test]
    fn a_lowered_line_is_quoted_as_the_user_wrote_it() {
        let ws = workspace("lowered");
        let lowered = "    x[:: offload :: __view :: Own :: at (& __offload_t, 0)] = x[1] * k;";
        let out = render_error(&error(2, 60, 61, lowered), &ws);
        assert!(out.starts_with("error[E0308]: mismatched types\n"), "{out}");
        assert!(out.contains(" --> src/main.rs:2:5\n"), "{out}");
        assert!(out.contains("2 |     x[0] = x[1] * k;\n"), "{out}");
        assert!(out.contains("^^^^^^^^^^^^^^^^ expected `f64`"), "{out}");
        assert!(!out.contains("__offload"), "{out}");
        assert!(out.contains("= help: convert it"), "{out}");
    }

    #[test]
    fn a_line_kept_as_written_keeps_rustcs_columns() {
        let ws = workspace("kept");
        let out = render_error(&error(3, 18, 19, "    let y: f64 = k;"), &ws);
        assert!(out.contains(" --> src/main.rs:3:18\n"), "{out}");
        assert!(
            out.contains("3 |     let y: f64 = k;\n  |                  ^ expected"),
            "{out}"
        );
    }

    #[test]
    fn generated_code_is_named_not_quoted() {
        let ws = workspace("generated");
        let out = render_error(
            &error(9, 1, 4, "#[no_mangle] pub unsafe extern \"C\" fn k()"),
            &ws,
        );
        assert!(
            out.contains("in code offload generated for the device"),
            "{out}"
        );
        assert!(!out.contains("no_mangle"), "{out}");
        // A kernel entry appended to the module's last line.
        let out = render_error(
            &error(4, 30, 40, "} #[no_mangle] pub unsafe extern \"C\" fn k()"),
            &ws,
        );
        assert!(
            out.contains("in code offload generated for the device"),
            "{out}"
        );
        assert!(!out.contains("no_mangle"), "{out}");
    }
}
