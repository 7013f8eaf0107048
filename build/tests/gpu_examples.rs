//! Every example built for the GPU targets beside the host image, as a user would, and the images checked as far as a
//! machine without a GPU can: `nvptx64:sm_80,sm_90` (each PTX assembles with ptxas, no kernel spills, every
//! `#[target]` is an entry) and `amdgcn:gfx90a,gfx942` (each code object is an `EM_AMDGPU` ELF whose notes name its
//! gfx, with a `.kd` kernel descriptor per `#[target]`); the examples' fat binaries carry the images and still run
//! (on host-elf).
//!
//! Needs the device toolchain (TOOLCHAIN.md; `.ci/run` installs it) and, for NVIDIA, ptxas on PATH or in
//! OFFLOAD_PTXAS. Without them a test says so and passes, except under `CI=true`, where it fails.

use std::path::{Path, PathBuf};
use std::process::Command;

const SMS: [&str; 2] = ["sm_80", "sm_90"];
const GFXS: [&str; 2] = ["gfx90a", "gfx942"];

/// Skips (or, under CI, fails) a test whose tools are missing.
fn missing(what: &str) {
    assert!(std::env::var("CI").as_deref() != Ok("true"), "{what}");
    eprintln!("skipped: {what}");
}

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

/// The newest `out/offload/<key>/link/<kind>` directory of the examples package in `target`.
fn link_dir(target: &Path, key: &str, kind: &str) -> PathBuf {
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
        .map(|p| p.join("out/offload").join(key).join("link").join(kind))
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort_by_key(|d| d.metadata().and_then(|m| m.modified()).ok());
    dirs.pop()
        .unwrap_or_else(|| panic!("no {key} link directory under {}", build.display()))
}

/// Builds the examples for `targets` into their own target directory; `None` (after saying why) when the device
/// toolchain is missing.
fn build_examples(targets: &str, dir: &str, env: &[(&str, &Path)]) -> Option<PathBuf> {
    build(&["-p", "offload-examples", "--examples"], targets, dir, env)
}

fn build(what: &[&str], targets: &str, dir: &str, env: &[(&str, &Path)]) -> Option<PathBuf> {
    let ws = workspace();
    let target = ws.join("target").join(dir);
    let out = Command::new(env!("CARGO"))
        .current_dir(&ws)
        .arg("build")
        .args(what)
        .env("OFFLOAD_TARGETS", targets)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .env("CARGO_TARGET_DIR", &target)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() && stderr.contains("needs a Rust compiler") {
        missing(&format!("no device toolchain:\n{stderr}"));
        return None;
    }
    assert!(out.status.success(), "{stderr}");
    Some(target)
}

/// The examples' regions as the outliner names them: (the example's target key, the kernel symbol).
fn example_kernels(name: &str) -> Vec<(String, String)> {
    let gen = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&gen);
    let outlined = offload_build::outline_dir(&workspace().join("examples"), &gen).unwrap();
    let kernels: Vec<(String, String)> = outlined
        .crates
        .iter()
        .filter(|c| c.key.starts_with("example-"))
        .flat_map(|c| c.regions.iter().map(|r| (c.key.clone(), r.symbol.clone())))
        .collect();
    assert!(kernels.len() >= 7, "{kernels:?}");
    kernels
}

/// Whether `haystack` contains `needle`.
fn has(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

/// The saxpy example still runs, on host-elf (no GPU here).
fn saxpy_runs(target: &Path) {
    let run = Command::new(target.join("debug/examples/saxpy"))
        .env("OFFLOAD_INFO", "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stderr}");
    assert!(stderr.contains("(host-elf)"), "{stderr}");
}

#[test]
fn examples_build_for_nvidia_and_every_ptx_assembles() {
    let Some(ptxas) = ptxas() else {
        return missing(
            "ptxas not found (pip install nvidia-cuda-nvcc; put its nvidia/cu13/bin on PATH)",
        );
    };
    let targets = format!("host,nvptx64:{}", SMS.join(","));
    let Some(target) = build_examples(&targets, "nvptx-examples", &[("OFFLOAD_PTXAS", &ptxas)])
    else {
        return;
    };
    let kernels = example_kernels("nvptx-examples-outline");
    let link = link_dir(&target, "nvptx64", "example");
    for sm in SMS {
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
    // Each example's fat binary carries its PTX for both architectures.
    for (key, k) in &kernels {
        let bin = target
            .join("debug/examples")
            .join(key.trim_start_matches("example-"));
        let bytes = std::fs::read(&bin).unwrap();
        assert!(
            has(&bytes, &format!(".entry {k}(")),
            "{} lacks {k}",
            bin.display()
        );
        for sm in SMS {
            assert!(
                has(&bytes, &format!(".target {sm}")),
                "{} lacks {sm} PTX",
                bin.display()
            );
        }
    }
    saxpy_runs(&target);
}

#[test]
fn examples_build_for_amd_and_every_code_object_is_complete() {
    use object::{Object, ObjectSection, ObjectSymbol};
    let targets = format!("host,amdgcn:{}", GFXS.join(","));
    let Some(target) = build_examples(&targets, "amdgcn-examples", &[]) else {
        return;
    };
    let kernels = example_kernels("amdgcn-examples-outline");
    let link = link_dir(&target, "amdgcn", "example");
    for gfx in GFXS {
        let path = link.join(gfx).join(format!("{gfx}.hsaco"));
        let bytes = std::fs::read(&path).unwrap();
        let elf = object::read::elf::ElfFile64::<object::Endianness>::parse(&*bytes).unwrap();
        assert_eq!(
            elf.elf_header().e_machine.get(elf.endian()),
            object::elf::EM_AMDGPU,
            "{}",
            path.display()
        );
        // The code object's metadata note names its target (`amdhsa.target`).
        let note = elf
            .sections()
            .find(|s| s.name() == Ok(".note"))
            .and_then(|s| s.data().ok())
            .unwrap_or_default();
        assert!(
            has(note, &format!("amdgcn-amd-amdhsa--{gfx}")),
            "{}: the notes do not name {gfx}",
            path.display()
        );
        let symbols: Vec<String> = elf
            .dynamic_symbols()
            .filter_map(|s| s.name().ok().map(String::from))
            .collect();
        for (_, k) in &kernels {
            assert!(
                symbols.contains(&format!("{k}.kd")),
                "{}: no kernel descriptor {k}.kd in {symbols:?}",
                path.display()
            );
        }
    }
    // Each example's fat binary carries a code object for both architectures.
    for (key, _) in &kernels {
        let bin = target
            .join("debug/examples")
            .join(key.trim_start_matches("example-"));
        let bytes = std::fs::read(&bin).unwrap();
        for gfx in GFXS {
            assert!(
                has(&bytes, &format!("amdgcn-amd-amdhsa--{gfx}")),
                "{} lacks {gfx}",
                bin.display()
            );
        }
    }
    saxpy_runs(&target);
}

/// The test suite's own regions (SPMD bodies with barriers and team-shared memory, every reduction operator,
/// `collapse`, atomics, device buffers, float math) build for both GPU targets, and their PTX assembles.
#[test]
fn the_test_suites_regions_build_for_both_gpus() {
    let Some(ptxas) = ptxas() else {
        return missing(
            "ptxas not found (pip install nvidia-cuda-nvcc; put its nvidia/cu13/bin on PATH)",
        );
    };
    let Some(target) = build(
        &["-p", "offload-tests", "--tests"],
        "host,nvptx64:sm_90,amdgcn:gfx90a",
        "gpu-test-suite",
        &[("OFFLOAD_PTXAS", &ptxas)],
    ) else {
        return;
    };
    let build_dir = target.join("debug/build");
    let out: Vec<PathBuf> = std::fs::read_dir(&build_dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path().join("out/offload")))
        .filter(|p| p.join("nvptx64/link/test").is_dir())
        .collect();
    assert!(
        !out.is_empty(),
        "no GPU link directories under {}",
        build_dir.display()
    );
    for o in out {
        let ptx = o.join("nvptx64/link/test/sm_90.ptx");
        let status = Command::new(&ptxas)
            .args(["-arch=sm_90", "-o", "/dev/null"])
            .arg(&ptx)
            .status()
            .unwrap();
        assert!(status.success(), "ptxas rejects {}", ptx.display());
        let hsaco = std::fs::read(o.join("amdgcn/link/test/gfx90a/gfx90a.hsaco")).unwrap();
        assert!(has(&hsaco, "amdgcn-amd-amdhsa--gfx90a"));
    }
}
