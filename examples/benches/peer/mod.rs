//! The clang-22 peer of a benchmark: builds `peer/NAME.c` with OpenMP offloading to libomptarget's x86_64 host plugin
//! and runs it; its "name value" lines come back as pairs.

use std::path::Path;
use std::process::Command;

pub fn run(
    name: &str,
    extra_flags: &[&str],
    args: &[String],
) -> Result<Vec<(String, f64)>, String> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("benches/peer/{name}.c"));
    let exe = std::env::temp_dir().join(format!("offload-peer-{name}"));
    let built = Command::new("clang-22")
        .args(["-O3", "-fopenmp", "-fopenmp-targets=x86_64-pc-linux-gnu"])
        .args(extra_flags)
        .arg("-o")
        .arg(&exe)
        .arg(&src)
        .output()
        .map_err(|e| format!("clang-22 not found ({e}); apt-get install clang-22 libomp-22-dev liboffload-22-dev"))?;
    if !built.status.success() {
        return Err(format!(
            "clang-22 failed:\n{}",
            String::from_utf8_lossy(&built.stderr)
        ));
    }
    let run = Command::new(&exe)
        .args(args)
        .env_remove("OMP_TARGET_OFFLOAD")
        .output()
        .map_err(|e| e.to_string())?;
    if !run.status.success() {
        return Err(format!(
            "the peer failed:\n{}",
            String::from_utf8_lossy(&run.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&run.stdout)
        .lines()
        .filter_map(|l| {
            l.split_once(' ')
                .and_then(|(k, v)| Some((k.to_string(), v.trim().parse().ok()?)))
        })
        .collect())
}
