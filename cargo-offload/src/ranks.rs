//! `cargo offload run --ranks N`: builds like `cargo run`, then starts the program as N processes under the MPI
//! launcher this machine has (`srun` inside a Slurm allocation, else Open MPI's or MPICH's `mpirun`), each with the
//! run's options and `OFFLOAD_BIND=local-rank`, so each rank picks its default device by its local rank.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The variable that makes every rank bind its default device by its local rank.
pub const BIND: (&str, &str) = ("OFFLOAD_BIND", "local-rank");

/// An MPI launcher found on this machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Launcher {
    /// Slurm's `srun`, inside an allocation (`SLURM_JOB_ID` set): it passes the environment on by itself.
    Srun(PathBuf),
    /// Open MPI's `mpirun`: the environment goes to every node through `-x`.
    OpenMpi(PathBuf),
    /// MPICH's (Hydra) `mpirun`/`mpiexec`: through `-genv`.
    Mpich(PathBuf),
}

/// The launcher to use: `srun` in a Slurm allocation, else `mpirun` (or `mpiexec`) by the MPI it belongs to.
/// `var` reads the environment, `which` finds a program on `PATH`, `version` runs `PROGRAM --version`.
pub fn find(
    var: impl Fn(&str) -> Option<String>,
    which: impl Fn(&str) -> Option<PathBuf>,
    version: impl Fn(&Path) -> String,
) -> Result<Launcher, String> {
    if var("SLURM_JOB_ID").is_some() {
        if let Some(srun) = which("srun") {
            return Ok(Launcher::Srun(srun));
        }
    }
    for name in ["mpirun", "mpiexec"] {
        if let Some(p) = which(name) {
            let v = version(&p);
            return Ok(if v.contains("Open MPI") || v.contains("OpenRTE") {
                Launcher::OpenMpi(p)
            } else {
                Launcher::Mpich(p)
            });
        }
    }
    Err("--ranks needs an MPI launcher, and none was found: `mpirun` is not on PATH and this is not a Slurm \
         allocation (no SLURM_JOB_ID with `srun`). Install Open MPI (Debian/Ubuntu: `apt-get install openmpi-bin`; \
         Fedora: `dnf install openmpi`) or MPICH (`apt-get install mpich`), or run inside `salloc`/`sbatch`"
        .into())
}

/// The command that starts `program args` as `ranks` processes, each with `env`. `root`: Open MPI refuses to start
/// as root without being told.
pub fn command(
    launcher: &Launcher,
    ranks: u32,
    program: &Path,
    args: &[String],
    env: &[(&'static str, String)],
    root: bool,
) -> Command {
    let n = ranks.to_string();
    let mut cmd = match launcher {
        Launcher::Srun(p) => {
            let mut c = Command::new(p);
            c.args(["--ntasks", &n, "--export=ALL"]);
            c.envs(env.iter().map(|(k, v)| (k, v)));
            c
        }
        Launcher::OpenMpi(p) => {
            let mut c = Command::new(p);
            // More ranks than cores is fine for a test run; a cluster's hostfile decides placement otherwise.
            c.args(["-np", &n, "--oversubscribe"]);
            if root {
                c.arg("--allow-run-as-root");
            }
            for (k, v) in env {
                c.arg("-x").arg(format!("{k}={v}"));
            }
            c
        }
        Launcher::Mpich(p) => {
            let mut c = Command::new(p);
            c.args(["-np", &n]);
            for (k, v) in env {
                c.arg("-genv").arg(k).arg(v);
            }
            c
        }
    };
    cmd.arg(program).args(args);
    cmd
}

/// `cargo build` of `cargo_args` (what `cargo run` takes before `--`): the one program it builds.
pub fn build_program(cargo: &str, cargo_args: &[String]) -> Result<PathBuf, String> {
    let out = Command::new(cargo)
        .arg("build")
        .args(cargo_args)
        .arg("--message-format=json-render-diagnostics")
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("running {cargo} build: {e}"))?;
    if !out.status.success() {
        return Err(format!("{cargo} build failed"));
    }
    let programs = programs(&String::from_utf8_lossy(&out.stdout));
    match programs.as_slice() {
        [one] => Ok(one.clone()),
        [] => Err("the build made no program to run: name one with `--bin NAME` or `--example NAME`".into()),
        many => Err(format!(
            "the build made {} programs; `--ranks` runs one: name it with `--bin NAME` or `--example NAME`",
            many.len()
        )),
    }
}

/// The executables of binary and example targets among cargo's JSON messages.
fn programs(messages: &str) -> Vec<PathBuf> {
    messages
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|m| m["reason"] == "compiler-artifact")
        .filter(|m| {
            m["target"]["kind"]
                .as_array()
                .is_some_and(|k| k.iter().any(|k| k == "bin" || k == "example"))
        })
        .filter_map(|m| m["executable"].as_str().map(PathBuf::from))
        .collect()
}

/// What `cargo offload devices --ranks N` adds: the device each local rank takes under `OFFLOAD_BIND=local-rank`,
/// from the devices this node has (`numbers`: each default-enabled device's `PLUGIN:K` name, in runtime order).
pub fn render_binding(ranks: u32, devices: &[String]) -> String {
    let mut out = format!(
        "with --ranks {ranks} (OFFLOAD_BIND=local-rank: local rank r takes device r % {}):\n",
        devices.len()
    );
    for r in 0..ranks {
        match devices.len() {
            0 => out.push_str(&format!("  rank {r}: the host (no devices)\n")),
            n => {
                let d = r as usize % n;
                out.push_str(&format!("  rank {r}: device {d} ({})\n", devices[d]));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(names: &'static [&'static str]) -> impl Fn(&str) -> Option<PathBuf> {
        move |n| {
            names
                .contains(&n)
                .then(|| PathBuf::from(format!("/usr/bin/{n}")))
        }
    }

    #[test]
    fn srun_inside_an_allocation_else_mpirun_by_its_vendor() {
        let slurm = |k: &str| (k == "SLURM_JOB_ID").then(|| "42".to_string());
        let none = |_: &str| None;
        let ompi = |_: &Path| "mpirun (Open MPI) 4.1.4".to_string();
        let hydra = |_: &Path| "HYDRA build details:".to_string();
        assert_eq!(
            find(slurm, found(&["srun", "mpirun"]), ompi),
            Ok(Launcher::Srun("/usr/bin/srun".into()))
        );
        assert_eq!(
            find(none, found(&["srun", "mpirun"]), ompi),
            Ok(Launcher::OpenMpi("/usr/bin/mpirun".into())),
            "srun outside an allocation would start a job of its own"
        );
        assert_eq!(
            find(none, found(&["mpiexec"]), hydra),
            Ok(Launcher::Mpich("/usr/bin/mpiexec".into()))
        );
        let e = find(none, found(&[]), ompi).unwrap_err();
        assert!(e.contains("apt-get install openmpi-bin"), "{e}");
    }

    #[test]
    fn every_rank_gets_the_environment() {
        let env = [
            ("OFFLOAD_BIND", "local-rank".to_string()),
            ("OFFLOAD_INFO", "1".into()),
        ];
        let args = ["--size".to_string(), "64".to_string()];
        let words = |c: &Command| {
            std::iter::once(c.get_program())
                .chain(c.get_args())
                .map(|a| a.to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join(" ")
        };
        let ompi = command(
            &Launcher::OpenMpi("mpirun".into()),
            3,
            Path::new("/t/jacobi"),
            &args,
            &env,
            true,
        );
        assert_eq!(
            words(&ompi),
            "mpirun -np 3 --oversubscribe --allow-run-as-root -x OFFLOAD_BIND=local-rank -x OFFLOAD_INFO=1 /t/jacobi \
             --size 64"
        );
        let hydra = command(
            &Launcher::Mpich("mpiexec".into()),
            2,
            Path::new("/t/j"),
            &[],
            &env,
            false,
        );
        assert_eq!(
            words(&hydra),
            "mpiexec -np 2 -genv OFFLOAD_BIND local-rank -genv OFFLOAD_INFO 1 /t/j"
        );
        let srun = command(
            &Launcher::Srun("srun".into()),
            4,
            Path::new("/t/j"),
            &[],
            &env,
            false,
        );
        assert_eq!(words(&srun), "srun --ntasks 4 --export=ALL /t/j");
        assert!(srun
            .get_envs()
            .any(|(k, v)| k == "OFFLOAD_BIND" && v.is_some_and(|v| v == "local-rank")));
    }

    #[test]
    fn the_program_is_the_one_binary_or_example_built() {
        let msgs = r#"{"reason":"compiler-artifact","target":{"kind":["custom-build"]},"executable":null}
{"reason":"compiler-artifact","target":{"kind":["lib"]},"executable":null}
{"reason":"compiler-artifact","target":{"kind":["example"]},"executable":"/t/debug/examples/jacobi"}
{"reason":"build-finished","success":true}"#;
        assert_eq!(programs(msgs), [PathBuf::from("/t/debug/examples/jacobi")]);
    }

    #[test]
    fn each_local_rank_takes_its_device_in_turn() {
        let devs = ["cuda:0".to_string(), "cuda:1".to_string()];
        assert_eq!(
            render_binding(3, &devs),
            "with --ranks 3 (OFFLOAD_BIND=local-rank: local rank r takes device r % 2):\n  rank 0: device 0 (cuda:0)\n  \
             rank 1: device 1 (cuda:1)\n  rank 2: device 0 (cuda:0)\n"
        );
        assert!(render_binding(1, &[]).contains("rank 0: the host"));
    }
}
