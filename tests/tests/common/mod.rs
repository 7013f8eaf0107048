//! What the integration tests that run the probe binary share: running it in its own process under a given
//! environment (the runtime reads the environment once) and reading what it printed, one `key=value` per line.
//! `gpu` holds what tests/cuda.rs and tests/amdgpu.rs share about GPU plugins whose driver is missing.

// Every test crate compiles this module and uses only part of it.
#![allow(dead_code)]

pub mod gpu;

use std::collections::HashMap;
use std::process::{Command, Output};

/// The variables the runtime reads; `probe` clears them so a run sees only the ones the test gives it.
pub const RUNTIME_ENV: [&str; 17] = [
    "OMP_TARGET_OFFLOAD",
    "OFFLOAD_BIND",
    "OMPI_COMM_WORLD_RANK",
    "PMI_RANK",
    "SLURM_PROCID",
    "OMPI_COMM_WORLD_LOCAL_RANK",
    "MPI_LOCALRANKID",
    "SLURM_LOCALID",
    "OMP_DEFAULT_DEVICE",
    "OFFLOAD_PLUGINS",
    "OFFLOAD_INFO",
    "OFFLOAD_PROFILE",
    "OFFLOAD_HOST_DEVICES",
    "OMP_WAIT_POLICY",
    "OFFLOAD_HOST_MEMORY",
    "OFFLOAD_PROFILE_MAX_EVENTS",
    "OFFLOAD_TASK_THREADS",
];

/// One run of the probe: its output and the `key=value` lines of its stdout.
pub struct Run {
    pub out: Output,
    pub kv: HashMap<String, String>,
}

impl Run {
    /// The value the probe printed for `k`; panics, showing the run, if it printed none.
    pub fn get(&self, k: &str) -> &str {
        self.kv
            .get(k)
            .map(String::as_str)
            .unwrap_or_else(|| panic!("probe printed no {k}:\n{}", self.describe()))
    }
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.out.stderr).into_owned()
    }
    /// The stderr lines that start with `prefix`.
    pub fn lines(&self, prefix: &str) -> Vec<String> {
        self.stderr()
            .lines()
            .filter(|l| l.starts_with(prefix))
            .map(str::to_string)
            .collect()
    }
    /// The exit status, stdout and stderr, for assertion messages.
    pub fn describe(&self) -> String {
        format!(
            "status {:?}\nstdout:\n{}\nstderr:\n{}",
            self.out.status,
            String::from_utf8_lossy(&self.out.stdout),
            self.stderr()
        )
    }
    /// Ran to the end, on the device unless `host`, with the right results.
    pub fn assert_ok(&self, ran_on: &str) {
        assert!(self.out.status.success(), "{}", self.describe());
        assert_eq!(self.get("ran_on"), ran_on, "{}", self.describe());
        assert_eq!(self.get("results_correct"), "true", "{}", self.describe());
    }
}

/// Runs the probe binary with `args`, under the runtime variables in `env` and no others.
pub fn probe(args: &[&str], env: &[(&str, &str)]) -> Run {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_probe"));
    cmd.args(args);
    for k in RUNTIME_ENV {
        cmd.env_remove(k);
    }
    cmd.envs(env.iter().copied());
    let out = cmd.output().expect("running the probe");
    let kv = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            l.split_once('=')
                .map(|(k, v)| (k.to_string(), v.to_string()))
        })
        .collect();
    Run { out, kv }
}
