//! A crate outside the workspace, depending on `offload` and `offload-build` by path, with a one-line build.rs and
//! regions in a submodule, builds and runs its regions on the host-elf device.

use std::path::{Path, PathBuf};
use std::process::Command;

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// The repository: the outside packages depend on its crates by path.
fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// `cargo run` of the package in `dir` with `OFFLOAD_INFO=1` on the default devices; its stdout and stderr, once it
/// succeeded.
fn run(dir: &Path, target_dir: &Path) -> (String, String) {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .arg("run")
        .arg("--quiet")
        .arg("--manifest-path")
        .arg(dir.join("Cargo.toml"))
        .env("CARGO_TARGET_DIR", target_dir)
        .env("OFFLOAD_INFO", "1")
        .env_remove("OMP_TARGET_OFFLOAD")
        .env_remove("OFFLOAD_PLUGINS")
        .output()
        .expect("running cargo");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    (stdout, stderr)
}

#[test]
fn an_external_crate_runs_its_regions_on_host_elf() {
    let workspace = workspace();
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("external-crate");
    let _ = std::fs::remove_dir_all(dir.join("src"));
    write(
        &dir.join("Cargo.toml"),
        &format!(
            "[package]\nname = \"outside-app\"\nversion = \"0.1.0\"\nedition = \"2024\"\n\n[dependencies]\n\
             offload = {{ package = \"omp-offload\", path = {:?} }}\n\n[build-dependencies]\noffload-build = {{ path = {:?} }}\n\n[workspace]\n",
            workspace.join("runtime"),
            workspace.join("build-support"),
        ),
    );
    write(
        &dir.join("build.rs"),
        "fn main() { offload_build::build(); }\n",
    );
    write(
        &dir.join("src/main.rs"),
        r#"mod physics;

fn main() {
    let mut v = vec![1.0f32; 1000];
    let x = vec![0.5f32; 1000];
    let on_host = physics::integrate::step(0.25, &x, &mut v);
    assert!(!on_host, "ran in the host fallback");
    assert!(v.iter().all(|&e| e == 1.0625), "wrong result {}", v[0]);
    println!("external crate ok");
}
"#,
    );
    write(
        &dir.join("src/physics/mod.rs"),
        "pub mod integrate;\n\n#[offload::declare_target]\npub const DAMPING: f32 = 0.5;\n",
    );
    write(
        &dir.join("src/physics/integrate.rs"),
        r#"use offload::{declare_target, target};
use super::DAMPING;

#[declare_target]
fn accel(x: f32) -> f32 {
    x * DAMPING
}

#[target(map(to: x), map(tofrom: v))]
pub fn step(dt: f32, x: &[f32], v: &mut [f32]) -> bool {
    for i in 0..v.len() {
        v[i] += dt * accel(x[i]);
    }
    offload::omp_is_initial_device()
}
"#,
    );
    // Its own target dir (the outer build holds ours), kept between runs.
    let (stdout, stderr) = run(&dir, &dir.join("target"));
    assert!(stdout.contains("external crate ok"), "{stdout}");
    assert!(
        stderr.contains("launch outside_app::physics::integrate::step (entry __omp_offloading_rs_11outside_app7physics9integrate4step) on device 0 (host-elf)"),
        "{stderr}"
    );
}

/// A package outside the workspace whose regions call an offload-aware library of the workspace (`tests/devlib`),
/// under another name (`geo`): its device functions, its types with trait impls and default methods. A host-only
/// function imported beside them stays out of the device crate.
#[test]
fn an_external_crate_calls_an_offload_aware_librarys_device_items() {
    let workspace = workspace();
    let root = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let dir = root.join("library-user");
    let _ = std::fs::remove_dir_all(dir.join("src"));
    write(
        &dir.join("Cargo.toml"),
        &format!(
            "[package]\nname = \"library-user\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\n\
             offload = {{ package = \"omp-offload\", path = {:?} }}\ngeo = {{ package = \"offload-devlib\", path = {:?} }}\n\n\
             [build-dependencies]\noffload-build = {{ path = {:?} }}\n\n[workspace]\n",
            workspace.join("runtime"),
            workspace.join("tests/devlib"),
            workspace.join("build-support"),
        ),
    );
    write(
        &dir.join("build.rs"),
        "fn main() { offload_build::build(); }\n",
    );
    write(
        &dir.join("src/main.rs"),
        r#"use geo::shapes::{Circle, Shape};
use geo::{collect_squares, hypot};
use offload::target;

#[target(teams_distribute_parallel_for, map(to: r), map(from: out))]
fn measure(r: &[f64], out: &mut [f64]) -> bool {
    for i in 0..out.len() {
        out[i] = Circle { r: r[i] }.scaled_area(1.0) + hypot(3.0 * r[i], 4.0 * r[i]) + geo::sq(r[i]);
    }
    offload::omp_is_initial_device()
}

fn main() {
    let r: Vec<f64> = (0..100).map(|i| i as f64).collect();
    let mut out = vec![0.0; 100];
    assert!(!measure(&r, &mut out), "ran in the host fallback");
    for i in 0..100 {
        let x = i as f64;
        let want = std::f64::consts::PI * x * x + 5.0 * x + x * x;
        assert!((out[i] - want).abs() < 1e-6, "{i}: {} != {want}", out[i]);
    }
    assert_eq!(collect_squares(&[3.0]), vec![9.0]);
    println!("library user ok");
}
"#,
    );
    // The other test's target dir: the same dependencies, built once.
    let (stdout, stderr) = run(&dir, &root.join("external-crate").join("target"));
    assert!(stdout.contains("library user ok"), "{stdout}");
    assert!(
        stderr.contains("launch library_user::measure")
            && stderr.contains("on device 0 (host-elf)"),
        "{stderr}"
    );
}

/// An offload-aware library that is a git dependency (a registry one is found the same way, through cargo's resolve):
/// the dependent's regions call its device function, which the library's feature `double` (asked for by the
/// dependent) changes.
#[test]
fn an_external_crate_calls_a_git_librarys_device_items() {
    let workspace = workspace();
    let root = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let repo = root.join("git-devlib");
    let _ = std::fs::remove_dir_all(&repo);
    write(
        &repo.join("Cargo.toml"),
        &format!(
            "[package]\nname = \"gitlib\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[features]\ndouble = []\n\n\
             [dependencies]\noffload = {{ package = \"omp-offload\", path = {:?} }}\n\n[build-dependencies]\noffload-build = {{ path = {:?} }}\n\n\
             [workspace]\n",
            workspace.join("runtime"),
            workspace.join("build-support"),
        ),
    );
    write(
        &repo.join("build.rs"),
        "fn main() { offload_build::build(); }\n",
    );
    write(
        &repo.join("src/lib.rs"),
        r#"/// A device function of the library, reached from the dependent's regions.
#[offload::declare_target]
pub fn cube(x: f64) -> f64 {
    x * x * x * factor()
}

#[cfg(feature = "double")]
fn factor() -> f64 {
    2.0
}
#[cfg(not(feature = "double"))]
fn factor() -> f64 {
    1.0
}
"#,
    );
    let git = |args: &[&str]| {
        let out = Command::new("git")
            .args([
                "-c",
                "user.name=offload",
                "-c",
                "user.email=offload@localhost",
            ])
            .args(args)
            .current_dir(&repo)
            .output()
            .expect("running git");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    git(&["init", "-q"]);
    git(&["add", "."]);
    git(&["commit", "-q", "-m", "gitlib"]);

    let dir = root.join("git-library-user");
    let _ = std::fs::remove_dir_all(dir.join("src"));
    let _ = std::fs::remove_file(dir.join("Cargo.lock"));
    write(
        &dir.join("Cargo.toml"),
        &format!(
            "[package]\nname = \"git-library-user\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\n\
             offload = {{ package = \"omp-offload\", path = {rt:?} }}\ngitlib = {{ git = \"file://{repo}\", features = [\"double\"] }}\n\n\
             [build-dependencies]\noffload-build = {{ path = {build:?} }}\n\n[workspace]\n\n\
             # Cargo counts the library's path dependencies as its git source's: one `offload` for both, as a\n\
             # registry library's and its dependent's come from the registry.\n\
             [patch.\"file://{repo}\"]\noffload = {{ package = \"omp-offload\", path = {rt:?} }}\noffload-build = {{ path = {build:?} }}\n",
            rt = workspace.join("runtime"),
            repo = repo.display(),
            build = workspace.join("build-support"),
        ),
    );
    write(
        &dir.join("build.rs"),
        "fn main() { offload_build::build(); }\n",
    );
    write(
        &dir.join("src/main.rs"),
        r#"use offload::target;

#[target(teams_distribute_parallel_for)]
fn cubes(x: &[f64], out: &mut [f64]) -> bool {
    for i in 0..out.len() {
        out[i] = gitlib::cube(x[i]);
    }
    offload::omp_is_initial_device()
}

fn main() {
    let x: Vec<f64> = (0..64).map(|i| i as f64).collect();
    let mut out = vec![0.0; 64];
    assert!(!cubes(&x, &mut out), "ran in the host fallback");
    assert!(out.iter().zip(&x).all(|(o, x)| *o == 2.0 * x * x * x), "{out:?}");
    println!("git library user ok");
}
"#,
    );
    let (stdout, stderr) = run(&dir, &root.join("external-crate").join("target"));
    assert!(stdout.contains("git library user ok"), "{stdout}");
    assert!(
        stderr.contains("launch git_library_user::cubes")
            && stderr.contains("on device 0 (host-elf)"),
        "{stderr}"
    );
}
