//! Every example built for the GPU targets beside the host image, as a user would, and the images checked as far as a
//! machine without a GPU can: `nvptx64:sm_80,sm_90` (each PTX assembles with ptxas, no kernel spills, every
//! `#[target]` is an entry) and `amdgcn:gfx90a,gfx942` (each code object is an `EM_AMDGPU` ELF whose notes name its
//! gfx, with a `.kd` kernel descriptor per `#[target]`); the examples' fat binaries carry the images and still run
//! (on host-elf).
//!
//! The panic record ([`offload_model::gpu_panic`]): every image exports the global the plugins point at their
//! record, and the panic path costs the kernels little. No kernel spills (VGPRs on AMD) or gets a dynamic stack,
//! the record is written by a function of its own, never inlined into a kernel, and no formatting code is in an
//! image (its address-taken functions would count against every kernel's registers). A kernel's own stack frame
//! (its PTX `.local` depot) is at most 16 bytes: these are debug builds, where `core`'s check that
//! `ptr::read_unaligned`'s two locals do not overlap (offload-device's argument unpacking) keeps two 8-byte locals in
//! every kernel that takes a by-value argument; release builds have none, before and after the panic record.
//!
//! Needs the device toolchain (the guide, `docs/src/gpus.md`; `.ci/run` installs it) and, for NVIDIA, ptxas on PATH or in
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

/// Whether `cargo build --examples` builds the example of target key `key`: `jacobi_mpi` needs the `mpi` feature
/// (and an MPI installation), `interop_c` the `interop-c` feature (and clang-22); their kernels are in the examples'
/// images all the same, and checked there.
fn built(key: &str) -> bool {
    !matches!(key, "example-jacobi_mpi" | "example-interop_c")
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

/// The global the plugins point at their panic record, as `cuModuleGetGlobal` finds it in PTX.
fn ptx_panic_record() -> String {
    format!(
        ".visible .global .align 8 .b8 {}[8];",
        offload_model::gpu_panic::SYMBOL
    )
}

/// The debug-build frame every kernel may have (see the module's comment): core's overlap check of two 8-byte locals.
const DEBUG_CHECK_FRAME: usize = 16;

/// Each entry's own stack frame: the size of the `.local` depot its body declares (none: 0).
fn own_frames(ptx: &str) -> Vec<(String, usize)> {
    let mut frames: Vec<(String, usize)> = Vec::new();
    let mut in_entry = false;
    for line in ptx.lines() {
        if let Some(rest) = line.strip_prefix(".visible .entry ") {
            let name = rest.split('(').next().unwrap_or_default().to_string();
            frames.push((name, 0));
            in_entry = true;
        } else if line.starts_with(".func") || line.starts_with(".visible .func") {
            in_entry = false;
        } else if let (true, true, Some(depot)) = (
            in_entry,
            line.trim_start().starts_with(".local"),
            line.split("__local_depot").nth(1),
        ) {
            let size = depot
                .split(['[', ']'])
                .nth(1)
                .and_then(|n| n.parse().ok())
                .unwrap_or(usize::MAX);
            frames.last_mut().unwrap().1 = size;
        }
    }
    frames
}

/// Formatting code (`core::fmt`, v0-mangled `..4core3fmt..`) in an image's symbols or PTX.
fn formats(text: &str) -> bool {
    text.contains("4core3fmt")
}

/// Whether a (v0-mangled) symbol is offload-device's writer of the panic record, `panic_record::report_location`.
fn writes_the_record(symbol: &str) -> bool {
    symbol.contains("12panic_record15report_location")
}

/// `llvm-readobj --notes` beside the `llc` the device link used.
fn readobj() -> PathBuf {
    let llc = offload_build::toolchain::find_llvm("amdgcn")
        .expect("the AMD images built, so LLVM is there")
        .llc;
    let name = llc
        .file_name()
        .unwrap()
        .to_string_lossy()
        .replace("llc", "llvm-readobj");
    llc.with_file_name(name)
}

/// Each kernel's resource figures from a code object's metadata note: name -> (key -> value), for the keys
/// `.vgpr_count`, `.vgpr_spill_count`, `.sgpr_spill_count`, `.private_segment_fixed_size`, `.uses_dynamic_stack`.
fn kernel_resources(hsaco: &Path) -> Vec<(String, Vec<(String, String)>)> {
    let out = Command::new(readobj())
        .arg("--notes")
        .arg(hsaco)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut kernels = Vec::new();
    let mut fields: Vec<(String, String)> = Vec::new();
    for line in text.lines() {
        let Some((key, value)) = line.trim().trim_start_matches("- ").split_once(':') else {
            continue;
        };
        let (key, value) = (key.trim(), value.trim());
        if [
            ".name",
            ".vgpr_count",
            ".vgpr_spill_count",
            ".sgpr_spill_count",
            ".private_segment_fixed_size",
            ".uses_dynamic_stack",
        ]
        .contains(&key)
        {
            fields.push((key.to_string(), value.to_string()));
        }
        // The last key of each kernel's map (they are sorted).
        if key == ".wavefront_size" {
            let name = fields
                .iter()
                .find(|(k, _)| k == ".name")
                .map(|(_, v)| v.clone())
                .unwrap_or_default();
            kernels.push((name, std::mem::take(&mut fields)));
        }
    }
    kernels
}

/// Whether `haystack` contains `needle`.
fn has(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

/// The saxpy example still runs, on host-elf (no GPU here); and under `OFFLOAD_RUNTIME=llvm` on LLVM's host plugin,
/// with `OFFLOAD_LLVM_GPU=1` its GPU images (`gpu`, as `OFFLOAD_INFO` names them: `sm_90 cubin`; no PTX) registered
/// with libomptarget beside the x86-64 one, which must not disturb it, and without it none.
fn saxpy_runs(target: &Path, gpu: &[String]) {
    let run = Command::new(target.join("debug/examples/saxpy"))
        .env("OFFLOAD_INFO", "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stderr}");
    assert!(stderr.contains("(host-elf)"), "{stderr}");
    if !Path::new("/usr/lib/llvm-22/lib/libomptarget.so.22.1").exists() {
        return missing("LLVM's libomptarget (apt-get install liboffload-22-dev)");
    }
    for with_gpus in ["1", "0"] {
        let run = Command::new(target.join("debug/examples/saxpy"))
            .envs([
                ("OFFLOAD_INFO", "1"),
                ("OFFLOAD_RUNTIME", "llvm"),
                ("OMP_TARGET_OFFLOAD", "MANDATORY"),
                ("OFFLOAD_LLVM_GPU", with_gpus),
            ])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert!(run.status.success(), "{stderr}");
        assert!(stderr.contains("on device 0 (llvm)"), "{stderr}");
        let registered = stderr
            .lines()
            .find_map(|l| l.strip_prefix("offload: plugin llvm: registered with libomptarget: "))
            .unwrap_or_else(|| panic!("no registration line:\n{stderr}"));
        assert!(registered.contains("shared object"), "{registered}");
        for image in gpu {
            assert_eq!(
                registered.contains(image.as_str()),
                with_gpus == "1",
                "{image}: `{registered}`"
            );
        }
    }
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
        assert!(
            ptx.lines().any(|l| l.trim() == ptx_panic_record()),
            "{}: no `{}`",
            ptx_path.display(),
            ptx_panic_record()
        );
        assert!(
            !formats(&ptx),
            "{}: formatting code is in the image (a panic message is read?)",
            ptx_path.display()
        );
        assert!(
            ptx.lines()
                .any(|l| l.starts_with(".func") && writes_the_record(l)),
            "{}: the panic record's writer is not a function of its own",
            ptx_path.display()
        );
        let frames = own_frames(&ptx);
        assert_eq!(frames.len(), kernels.len(), "{frames:?}");
        for (k, frame) in frames {
            assert!(
                frame <= DEBUG_CHECK_FRAME,
                "{k} has a {frame}-byte frame of its own on {sm}"
            );
        }
    }
    // Each example's fat binary carries its PTX for both architectures.
    for (key, k) in kernels.iter().filter(|(key, _)| built(key)) {
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
    saxpy_runs(&target, &SMS.map(|sm| format!("{sm} cubin")));
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
        // The panic record's global, as `hsa_executable_get_symbol_by_name` finds a variable: exported, defined,
        // 8 bytes.
        assert!(
            elf.dynamic_symbols().any(|s| {
                s.name() == Ok(offload_model::gpu_panic::SYMBOL)
                    && s.kind() == object::SymbolKind::Data
                    && s.is_definition()
                    && s.scope() == object::SymbolScope::Dynamic
                    && s.size() == 8
            }),
            "{}: {} is not an exported 8-byte variable",
            path.display(),
            offload_model::gpu_panic::SYMBOL
        );
        let all: Vec<String> = elf
            .symbols()
            .filter_map(|s| s.name().ok().map(String::from))
            .collect();
        assert!(
            !all.iter().any(|n| formats(n)),
            "{}: formatting code is in the image (a panic message is read?)",
            path.display()
        );
        assert!(
            all.iter().any(|n| writes_the_record(n)),
            "{}: the panic record's writer is not a function of its own",
            path.display()
        );
        // No VGPR spills and no dynamic stack. SGPR spills (to VGPR lanes, not memory) are not checked: matmul has
        // them in these debug builds before the panic record too (18 on gfx90a), none in release builds.
        let resources = kernel_resources(&path);
        assert_eq!(resources.len(), kernels.len(), "{resources:?}");
        for (k, fields) in resources {
            let get = |key: &str| {
                fields
                    .iter()
                    .find(|(f, _)| f == key)
                    .map(|(_, v)| v.as_str())
                    .unwrap_or_else(|| panic!("{k}: no {key} in {fields:?}"))
            };
            assert_eq!(get(".vgpr_spill_count"), "0", "{k} spills VGPRs on {gfx}");
            assert_eq!(
                get(".uses_dynamic_stack"),
                "false",
                "{k} has a dynamic stack on {gfx}"
            );
        }
    }
    // Each example's fat binary carries a code object for both architectures.
    for (key, _) in kernels.iter().filter(|(key, _)| built(key)) {
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
    saxpy_runs(&target, &GFXS.map(|gfx| format!("{gfx} HSA code object")));
}

/// The test suite's own regions (SPMD bodies with barriers and team-shared memory, every reduction operator,
/// `collapse`, atomics, device buffers, float math, an offload-aware library's items, device globals) build for both
/// GPU targets, and their PTX assembles.
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
    // The build script's newest output: older ones, of build scripts since changed, may lie beside it.
    let modified = |p: &PathBuf| {
        std::fs::metadata(p.join("nvptx64/link/test/sm_90.ptx"))
            .and_then(|m| m.modified())
            .ok()
    };
    let out: Vec<PathBuf> = std::fs::read_dir(&build_dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path().join("out/offload")))
        .filter(|p| modified(p).is_some())
        .max_by_key(modified)
        .into_iter()
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
        let text = std::fs::read_to_string(&ptx).unwrap();
        assert!(text.lines().any(|l| l.trim() == ptx_panic_record()));
        assert!(!formats(&text), "{}: formatting code", ptx.display());
        let hsaco = std::fs::read(o.join("amdgcn/link/test/gfx90a/gfx90a.hsaco")).unwrap();
        assert!(has(&hsaco, "amdgcn-amd-amdhsa--gfx90a"));
        assert!(has(&hsaco, offload_model::gpu_panic::SYMBOL));
        // `#[declare_target] static`s (tests/tests/region_code.rs) are exported, where the plugins look them up.
        let global = offload_model::identity::mangle_string("region_code::device_globals::HITS");
        assert!(
            text.lines()
                .any(|l| l.starts_with(".visible .global") && l.contains(&global)),
            "{}: no global {global}",
            ptx.display()
        );
        assert!(has(&hsaco, &global));
    }
}
