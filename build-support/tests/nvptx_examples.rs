//! Every example built for `nvptx64:sm_80,sm_90` beside the host image, as a user would: each PTX image assembles
//! with ptxas, no example kernel spills, every `#[target]` has its kernel in each image, and the examples' fat
//! binaries carry the images and still run (on host-elf; there is no GPU here).
//!
//! Needs the device toolchain (TOOLCHAIN.md; `.ci/run` installs it) and ptxas on PATH or in OFFLOAD_PTXAS. Without
//! them the test says so and passes, except under `CI=true`, where it fails.

use std::path::{Path, PathBuf};
use std::process::Command;

const ARCHS: [&str; 2] = ["sm_80", "sm_90"];

fn ptxas() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("OFFLOAD_PTXAS") {
        return Some(p.into());
    }
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join("ptxas"))
        .find(|p| p.is_file())
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// The newest `out/offload/nvptx64/link/<kind>` directory of the examples package in `target`.
fn link_dir(target: &Path, kind: &str) -> PathBuf {
    let build = target.join("debug/build");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&build)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("offload-examples-")
        })
        .map(|p| p.join("out/offload/nvptx64/link").join(kind))
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort_by_key(|d| d.metadata().and_then(|m| m.modified()).ok());
    dirs.pop()
        .unwrap_or_else(|| panic!("no nvptx64 link directory under {}", build.display()))
}

#[test]
fn examples_build_for_nvidia_and_every_ptx_assembles() {
    let Some(ptxas) = ptxas() else {
        let msg = "ptxas not found (pip install nvidia-cuda-nvcc; put its nvidia/cu13/bin on PATH)";
        assert!(std::env::var("CI").as_deref() != Ok("true"), "{msg}");
        eprintln!("skipped: {msg}");
        return;
    };
    let ws = workspace();
    let target = ws.join("target/nvptx-examples");
    let out = Command::new(env!("CARGO"))
        .current_dir(&ws)
        .args(["build", "-p", "offload-examples", "--examples"])
        .env(
            "OFFLOAD_TARGETS",
            format!("host,nvptx64:{}", ARCHS.join(",")),
        )
        .env("OFFLOAD_PTXAS", &ptxas)
        .env("CARGO_TARGET_DIR", &target)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() && stderr.contains("needs a Rust compiler") {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "no device toolchain:\n{stderr}"
        );
        eprintln!("skipped: no device toolchain:\n{stderr}");
        return;
    }
    assert!(out.status.success(), "{stderr}");

    // The kernels every image must have: the examples' regions, as the outliner names them.
    let gen = Path::new(env!("CARGO_TARGET_TMPDIR")).join("nvptx-examples-outline");
    let _ = std::fs::remove_dir_all(&gen);
    let outlined = offload_build::outline_dir(&ws.join("examples"), &gen).unwrap();
    let kernels: Vec<(String, String)> = outlined
        .crates
        .iter()
        .filter(|c| c.key.starts_with("example-"))
        .flat_map(|c| c.regions.iter().map(|r| (c.key.clone(), r.symbol.clone())))
        .collect();
    assert!(kernels.len() >= 7, "{kernels:?}");

    let link = link_dir(&target, "example");
    for sm in ARCHS {
        let ptx_path = link.join(format!("{sm}.ptx"));
        let ptx = std::fs::read_to_string(&ptx_path).unwrap();
        assert!(
            ptx.contains(&format!(".target {sm}")),
            "{}",
            ptx_path.display()
        );
        for (_, k) in &kernels {
            assert!(
                ptx.contains(&format!(".visible .entry {k}(")),
                "{k} is not an entry of {}",
                ptx_path.display()
            );
        }
        // Not `-c`: a whole program, so an unresolved function is an error here as it would be for the driver.
        let out = Command::new(&ptxas)
            .args([&format!("-arch={sm}"), "-v", "-o", "/dev/null"])
            .arg(&ptx_path)
            .output()
            .unwrap();
        let log = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "ptxas rejects {}:\n{log}",
            ptx_path.display()
        );
        let mut entry = String::new();
        let mut seen = 0;
        for line in log.lines() {
            if let Some(rest) = line.split("Compiling entry function '").nth(1) {
                entry = rest.split('\'').next().unwrap_or_default().to_string();
            }
            if line.contains("spill stores") && !entry.is_empty() {
                seen += 1;
                assert!(
                    line.contains(" 0 bytes spill stores, 0 bytes spill loads"),
                    "{entry} spills on {sm}: {line}"
                );
                entry.clear();
            }
        }
        assert_eq!(seen, kernels.len(), "one report per kernel:\n{log}");
    }

    // Each example's fat binary carries its PTX for both architectures, and still runs on the host-elf device.
    for (key, k) in &kernels {
        let name = key.trim_start_matches("example-");
        let bin = target.join("debug/examples").join(name);
        let bytes = std::fs::read(&bin).unwrap();
        let has = |s: &str| bytes.windows(s.len()).any(|w| w == s.as_bytes());
        assert!(has(&format!(".entry {k}(")), "{} lacks {k}", bin.display());
        for sm in ARCHS {
            assert!(
                has(&format!(".target {sm}")),
                "{} lacks {sm} PTX",
                bin.display()
            );
        }
    }
    let run = Command::new(target.join("debug/examples/saxpy"))
        .env("OFFLOAD_INFO", "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stderr}");
    assert!(stderr.contains("(host-elf)"), "{stderr}");
}
