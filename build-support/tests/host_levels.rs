//! `host:x86-64-v3,x86-64`: one host image per x86-64 level in the same binary, and the host-elf plugin loading the
//! highest level this CPU runs; an unknown level is a build error that lists the levels.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn build_saxpy(targets: &str, dir: &Path) -> Output {
    Command::new(env!("CARGO"))
        .current_dir(workspace())
        .args(["build", "-p", "offload-examples", "--example", "saxpy"])
        .env("OFFLOAD_TARGETS", targets)
        .env("CARGO_TARGET_DIR", dir)
        .output()
        .unwrap()
}

#[test]
fn the_highest_level_this_cpu_runs_is_loaded() {
    let dir = workspace().join("target/host-levels");
    let out = build_saxpy("host:x86-64,x86-64-v3", &dir);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let trace = Path::new(env!("CARGO_TARGET_TMPDIR")).join("host-levels.json");
    let _ = std::fs::remove_file(&trace);
    let run = Command::new(dir.join("debug/examples/saxpy"))
        .env("OFFLOAD_PROFILE", &trace)
        .env_remove("OFFLOAD_PLUGINS")
        .env_remove("OMP_TARGET_OFFLOAD")
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let trace = std::fs::read_to_string(&trace).unwrap();
    let loaded: Vec<&str> = trace
        .split(r#""name":"load image""#)
        .skip(1)
        .filter_map(|e| e.split(r#""arch":""#).nth(1)?.split('"').next())
        .collect();
    let v3 = [
        "avx2", "fma", "bmi1", "bmi2", "lzcnt", "movbe", "f16c", "sse4.2", "popcnt",
    ];
    let has_v3 = v3.iter().all(|f| match *f {
        "avx2" => is_x86_feature_detected!("avx2"),
        "fma" => is_x86_feature_detected!("fma"),
        "bmi1" => is_x86_feature_detected!("bmi1"),
        "bmi2" => is_x86_feature_detected!("bmi2"),
        "lzcnt" => is_x86_feature_detected!("lzcnt"),
        "movbe" => is_x86_feature_detected!("movbe"),
        "f16c" => is_x86_feature_detected!("f16c"),
        "sse4.2" => is_x86_feature_detected!("sse4.2"),
        _ => is_x86_feature_detected!("popcnt"),
    });
    // One image only: the best one holds every kernel, so the other is never loaded.
    let want = if has_v3 { "x86-64-v3" } else { "x86-64" };
    assert_eq!(loaded, [want], "{trace}");
}

#[test]
fn an_unknown_level_is_a_build_error_naming_the_levels() {
    let out = build_saxpy("host:znver9", &workspace().join("target/host-levels-bad"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("`znver9` is not an x86-64 level")
            && stderr.contains("x86-64, x86-64-v2, x86-64-v3, x86-64-v4"),
        "{stderr}"
    );
}
