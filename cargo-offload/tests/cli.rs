//! Every subcommand of `cargo offload`, run as cargo runs it (`cargo-offload offload ...`) on the workspace's
//! examples: `build` (with a GPU target where the device toolchain is installed: always under `CI=true`), `run` on the
//! host-elf device, on the host and with no plugins, `devices`, `inspect` on the fat binaries and `doctor`; and `new`
//! and `init`, whose packages are then built, run and tested.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// Its own target directory: the outer `cargo test` holds the workspace's.
fn target_dir() -> PathBuf {
    workspace().join("target/cli-tests")
}

fn gpu_toolchain() -> bool {
    let found = offload_build::toolchain::find_rust("GPU").is_ok()
        && offload_build::toolchain::find_llvm("GPU").is_ok_and(|l| l.lld.is_some());
    assert!(
        found || std::env::var("CI").as_deref() != Ok("true"),
        "CI installs the device toolchain"
    );
    found
}

/// What the examples are built for: with GPU images where this machine can build them.
fn targets() -> &'static str {
    static T: OnceLock<&str> = OnceLock::new();
    T.get_or_init(|| {
        if gpu_toolchain() {
            "host,nvptx64:sm_80,amdgcn:gfx90a"
        } else {
            eprintln!("note: no device toolchain; the examples are built for the host only");
            "host"
        }
    })
}

fn cargo_offload(args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cargo-offload"))
        .arg("offload")
        .args(args)
        .current_dir(workspace())
        .env("CARGO", env!("CARGO"))
        .env("CARGO_TARGET_DIR", target_dir())
        .env("OFFLOAD_TARGETS", targets())
        .envs(env.iter().copied())
        .output()
        .unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "status {}\n--- stdout\n{}\n--- stderr\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// `cargo offload build` of the examples, once for all tests: its output.
fn built() -> &'static String {
    static BUILT: OnceLock<String> = OnceLock::new();
    BUILT.get_or_init(|| {
        // A new target file makes the device build run, so its progress shows.
        let o = cargo_offload(&["build", "-p", "offload-examples", "--examples"], &[]);
        assert!(o.status.success(), "{}", text(&o));
        text(&o)
    })
}

#[test]
fn build_shows_the_device_builds_progress_the_cargo_way() {
    let out = built();
    // A fresh build shows a line per device build; a cached one has nothing to show.
    if out.contains("device crates for") {
        assert!(
            out.contains("Compiling offload-examples device crates for x86_64-unknown-linux-gnu ("),
            "{out}"
        );
        if targets().contains("nvptx64") {
            assert!(
                out.contains("Compiling offload-examples device crates for nvptx64-nvidia-cuda ("),
                "{out}"
            );
            assert!(
                out.contains("Linking offload-examples example image: sm_80 "),
                "{out}"
            );
            assert!(
                out.contains("device crates for amdgcn-amd-amdhsa gfx90a ("),
                "{out}"
            );
        }
    }
}

#[test]
fn run_on_the_host_elf_device() {
    built();
    let o = cargo_offload(
        &[
            "run",
            "--device",
            "host-elf:0",
            "--info",
            "1",
            "-p",
            "offload-examples",
            "--example",
            "saxpy",
        ],
        &[],
    );
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(
        t.contains(
            "launch saxpy::saxpy (entry __omp_offloading_rs_5saxpy5saxpy) on device 0 (host-elf)"
        ),
        "{t}"
    );
    assert!(t.contains("0 wrong"), "{t}");
}

#[test]
fn run_on_the_host_and_with_no_plugins_falls_back() {
    built();
    let o = cargo_offload(
        &[
            "run",
            "--device",
            "host",
            "--info",
            "1",
            "-p",
            "offload-examples",
            "--example",
            "saxpy",
        ],
        &[],
    );
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(
        t.contains("launch saxpy::saxpy on the host (host-fallback): OMP_TARGET_OFFLOAD=DISABLED"),
        "{t}"
    );

    let o = cargo_offload(
        &[
            "run",
            "--info",
            "1",
            "-p",
            "offload-examples",
            "--example",
            "saxpy",
        ],
        &[("OFFLOAD_PLUGINS", "")],
    );
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(
        t.contains("launch saxpy::saxpy on the host (host-fallback)"),
        "{t}"
    );
    assert!(t.contains("0 wrong"), "{t}");

    // MANDATORY with no plugins stops the program.
    let o = cargo_offload(
        &[
            "run",
            "--mandatory",
            "-p",
            "offload-examples",
            "--example",
            "saxpy",
        ],
        &[("OFFLOAD_PLUGINS", "")],
    );
    let t = text(&o);
    assert!(!o.status.success(), "{t}");
    assert!(
        t.contains("OMP_TARGET_OFFLOAD=MANDATORY forbids the host fallback"),
        "{t}"
    );
}

#[test]
fn run_on_an_absent_device_lists_the_devices_that_exist() {
    let o = cargo_offload(
        &["run", "--device", "host-elf:3", "--example", "saxpy"],
        &[],
    );
    let t = text(&o);
    assert!(!o.status.success(), "{t}");
    assert!(
        t.contains("`host-elf:3` does not exist: host-elf has 1 device(s)"),
        "{t}"
    );
    assert!(
        t.contains("devices here: host-elf:0, gpu-sim:0, host"),
        "{t}"
    );
    let o = cargo_offload(&["run", "--device", "tpu:0", "--example", "saxpy"], &[]);
    let t = text(&o);
    assert!(!o.status.success(), "{t}");
    assert!(
        t.contains("there is no plugin `tpu` (plugins: cuda, amdgpu, host-elf, gpu-sim)"),
        "{t}"
    );
}

#[test]
fn devices_lists_every_plugin_with_its_devices_or_why_none() {
    let o = cargo_offload(&["devices"], &[]);
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(t.contains("host-elf:0  device "), "{t}");
    assert!(t.contains(std::env::consts::ARCH), "{t}");
    for plugin in ["cuda", "amdgpu"] {
        assert!(
            t.contains(&format!("{plugin}: no devices (")) || t.contains(&format!("{plugin}:0 ")),
            "{t}"
        );
    }
    assert!(t.contains("host: the initial device"), "{t}");
    // The simulated GPU is listed with its architecture, and says how it is turned on.
    let sim = t
        .lines()
        .find(|l| l.contains("gpu-sim:0 "))
        .unwrap_or_else(|| panic!("no gpu-sim device: {t}"));
    assert!(
        sim.contains("device 0 with OFFLOAD_PLUGINS=gpu-sim  gpu-sim "),
        "{sim}"
    );
    // Off by default, it does not move the host's number.
    assert!(t.contains("host: the initial device (device 1,"), "{t}");
}

#[test]
fn inspect_reads_the_fat_binaries() {
    built();
    let bin = target_dir().join("debug/examples/saxpy");
    let o = cargo_offload(&["inspect", bin.to_str().unwrap()], &[]);
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(
        t.contains(
            "offload entries (5):\n  __omp_offloading_rs_5saxpy10axpy_owned\n    host function saxpy::"
        ),
        "{t}"
    );
    assert!(
        t.contains("  __omp_offloading_rs_5saxpy5saxpy\n    host function saxpy::try_saxpy::__offload_host"),
        "{t}"
    );
    assert!(
        t.contains("x86_64-unknown-linux-gnu x86_64 (shared object), package `offload-examples`"),
        "{t}"
    );
    // A generic region's instances are kernels of their own.
    assert!(
        t.contains("__omp_offloading_rs_11babelstream14triad$3Cf64$3E"),
        "{t}"
    );
    if targets().contains("nvptx64") {
        assert!(t.contains("nvptx64-nvidia-cuda sm_80 (PTX)"), "{t}");
        assert!(
            t.contains("amdgcn-amd-amdhsa gfx90a (HSA code object)"),
            "{t}"
        );
    }
    assert!(
        t.contains("every entry has a kernel in every kind of image"),
        "{t}"
    );

    // A binary without offload tables is a clear error.
    let o = cargo_offload(&["inspect", "/bin/true"], &[]);
    let t = text(&o);
    assert!(!o.status.success(), "{t}");
    assert!(t.contains("carries no offload tables"), "{t}");
}

#[test]
fn doctor_checks_this_machine_and_names_what_is_missing() {
    let o = cargo_offload(&["doctor"], &[]);
    let t = text(&o);
    assert!(t.contains("target host: ready"), "{t}");
    if gpu_toolchain() {
        assert!(o.status.success(), "{t}");
        assert!(t.contains("target nvptx64: ready"), "{t}");
        assert!(t.contains("target amdgcn: ready"), "{t}");
    }
    // Pointed at an LLVM that is not there, it says so and how to get one.
    let o = cargo_offload(&["doctor"], &[("OFFLOAD_LLVM_BIN", "/nonexistent/llvm")]);
    let t = text(&o);
    assert!(!o.status.success(), "{t}");
    assert!(t.contains("MISSING LLVM 22 (llvm-link, opt, llc)"), "{t}");
    assert!(t.contains("get it: apt-get install llvm-22"), "{t}");
    assert!(t.contains("target nvptx64: 1 missing"), "{t}");
    assert!(t.contains("target amdgcn: 2 missing"), "{t}");
}

#[test]
fn run_with_ranks_and_no_launcher_says_what_to_install() {
    // No `mpirun` on PATH and no Slurm allocation: nothing is built, and the message names the package.
    let o = cargo_offload(
        &["run", "--ranks", "2", "--example", "saxpy"],
        &[("PATH", "/nonexistent"), ("SLURM_JOB_ID", "")],
    );
    let t = text(&o);
    assert!(!o.status.success(), "{t}");
    assert!(
        t.contains("--ranks needs an MPI launcher, and none was found"),
        "{t}"
    );
    assert!(t.contains("apt-get install openmpi-bin"), "{t}");
}

#[test]
fn devices_with_ranks_shows_each_local_ranks_device() {
    let o = cargo_offload(
        &["devices", "--ranks", "3"],
        &[("OFFLOAD_HOST_DEVICES", "2")],
    );
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(t.contains("rank 2: device 0 (host-elf:0)"), "{t}");
}

/// `cargo` in the generated package `dir`, sharing the tests' target directory, for the host image only.
fn cargo_in(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO"))
        .args(args)
        .current_dir(dir)
        .env("CARGO_TARGET_DIR", target_dir())
        .env("OFFLOAD_TARGETS", "host")
        .envs(env.iter().copied())
        .output()
        .unwrap()
}

/// The Rust block under README's "A first region", as it reads on a front page.
fn readme_first_region(readme: &str) -> &str {
    let section = &readme[readme
        .find("## A first region")
        .expect("README has a first region")..];
    let code = &section[section.find("```rust").unwrap()..];
    let code = &code[code.find('\n').unwrap() + 1..];
    &code[..code.find("```").unwrap()]
}

#[test]
fn new_makes_a_program_and_a_library_that_run_on_host_elf_at_once() {
    // Outside the workspace, which would otherwise claim the packages.
    let root = std::env::temp_dir().join(format!("offload-cli-new-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).unwrap();
    let (program, library) = (root.join("demo"), root.join("demolib"));
    let ws = workspace();
    let ws = ws.to_str().unwrap();

    let o = cargo_offload(&["new", program.to_str().unwrap(), "--path", ws], &[]);
    assert!(o.status.success(), "{}", text(&o));
    let o = cargo_in(&program, &["run"], &[("OFFLOAD_INFO", "1")]);
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    assert!(
        out.contains(
            "launch demo::saxpy (entry __omp_offloading_rs_4demo5saxpy) on device 0 (host-elf)"
        ),
        "{out}"
    );
    assert!(out.contains("saxpy on 1048576 element(s): ok"), "{out}");
    let o = cargo_in(&program, &["test"], &[]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("test tests::saxpy_adds_a_times_x ... ok"));

    // README's first region, as a reader copies it into the new package, runs there on host-elf.
    let readme = std::fs::read_to_string(Path::new(ws).join("README.md")).unwrap();
    let first = readme_first_region(&readme);
    std::fs::create_dir_all(program.join("src/bin")).unwrap();
    std::fs::write(program.join("src/bin/first.rs"), first).unwrap();
    let o = cargo_in(
        &program,
        &["run", "--bin", "first"],
        &[("OFFLOAD_INFO", "1"), ("OMP_TARGET_OFFLOAD", "MANDATORY")],
    );
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    assert!(out.contains("launch first::saxpy"), "{out}");
    assert!(out.contains("launch first::sum"), "{out}");

    // Host only: the runtime without its GPU plugins' features builds neither cudarc nor gpu-sim's coroutines, its
    // regions still run on host-elf, and naming a plugin left out says which feature it needs.
    let tree = |program: &Path| {
        let o = cargo_in(program, &["tree", "-e", "normal", "--prefix", "none"], &[]);
        assert!(o.status.success(), "{}", text(&o));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let with_gpus = tree(&program);
    assert!(with_gpus.contains("cudarc v"), "{with_gpus}");
    let manifest = std::fs::read_to_string(program.join("Cargo.toml")).unwrap();
    let host_only = manifest.replacen("offload = { ", "offload = { default-features = false, ", 1);
    assert_ne!(manifest, host_only, "{manifest}");
    std::fs::write(program.join("Cargo.toml"), host_only).unwrap();
    let host_tree = tree(&program);
    assert!(host_tree.contains("omp-offload v"), "{host_tree}");
    for gpu_only in ["cudarc", "corosensei"] {
        assert!(!host_tree.contains(gpu_only), "{host_tree}");
    }
    let o = cargo_in(
        &program,
        &["run", "--bin", "demo"],
        &[("OFFLOAD_INFO", "1"), ("OMP_TARGET_OFFLOAD", "MANDATORY")],
    );
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    assert!(
        out.contains(
            "launch demo::saxpy (entry __omp_offloading_rs_4demo5saxpy) on device 0 (host-elf)"
        ),
        "{out}"
    );
    let o = cargo_in(
        &program,
        &["run", "--bin", "demo"],
        &[("OFFLOAD_PLUGINS", "cuda,host-elf")],
    );
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    assert!(
        out.contains("offload: OFFLOAD_PLUGINS names `cuda`, but offload was built without its `cuda` feature"),
        "{out}"
    );

    let o = cargo_offload(
        &[
            "new",
            library.to_str().unwrap(),
            "--lib",
            "--path",
            ws,
            "--gpu",
            "nvptx64:sm_90",
        ],
        &[],
    );
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    assert!(
        out.contains("Its GPU targets need the device toolchain"),
        "{out}"
    );
    let manifest = std::fs::read_to_string(library.join("Cargo.toml")).unwrap();
    assert!(
        manifest.contains(r#"targets = ["host", "nvptx64:sm_90"]"#),
        "{manifest}"
    );
    // The library's test and doctest, on host-elf.
    let o = cargo_in(&library, &["test"], &[("OMP_TARGET_OFFLOAD", "MANDATORY")]);
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    assert!(
        out.contains("test tests::scale_multiplies_every_element ... ok"),
        "{out}"
    );
    assert!(out.contains("src/lib.rs - scale (line"), "{out}");

    // `init` where a package already is: refused, saying what to do.
    let o = cargo_offload(&["init", program.to_str().unwrap()], &[]);
    assert!(!o.status.success());
    assert!(
        text(&o).contains("already has a Cargo.toml"),
        "{}",
        text(&o)
    );
    // `init` in an empty directory makes the package there, named after it.
    let empty = root.join("fresh_dir");
    std::fs::create_dir_all(&empty).unwrap();
    let o = cargo_offload(&["init", empty.to_str().unwrap(), "--path", ws], &[]);
    assert!(o.status.success(), "{}", text(&o));
    let manifest = std::fs::read_to_string(empty.join("Cargo.toml")).unwrap();
    assert!(manifest.contains("name = \"fresh_dir\""), "{manifest}");
    assert!(empty.join("build.rs").is_file() && empty.join("src/main.rs").is_file());
    let _ = std::fs::remove_dir_all(&root);
}
