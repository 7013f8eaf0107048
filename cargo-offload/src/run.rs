//! `cargo offload run`: `cargo run` with the device chosen on the command line, translated into the runtime's
//! environment.

use crate::devices::DeviceChoice;
use crate::ranks;
use std::path::PathBuf;
use std::process::Command;

pub struct RunOptions {
    pub device: Option<DeviceChoice>,
    /// `--ranks N`: N processes under the MPI launcher, each binding its device by its local rank.
    pub ranks: Option<u32>,
    pub mandatory: bool,
    pub runtime: Option<Runtime>,
    pub info: Option<i32>,
    pub profile: Option<PathBuf>,
}

/// `--runtime`: `OFFLOAD_RUNTIME`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Runtime {
    /// Ours: its plugins and present tables.
    Offload,
    /// LLVM's libomptarget.
    Llvm,
}

/// The runtime's environment for these options: `OFFLOAD_PLUGINS` and `OMP_DEFAULT_DEVICE` pick a plugin's device
/// (only that plugin is enabled, so its devices number from 0), `OMP_TARGET_OFFLOAD=DISABLED` the host,
/// `MANDATORY` forbids the host fallback, `OFFLOAD_INFO` and `OFFLOAD_PROFILE` observe.
pub fn environment(o: &RunOptions) -> Result<Vec<(&'static str, String)>, String> {
    let mut env = Vec::new();
    match &o.device {
        Some(DeviceChoice::Host) if o.mandatory => {
            return Err(
                "`--device host` runs every region on the host, which `--mandatory` forbids".into(),
            )
        }
        Some(DeviceChoice::Host) => env.push(("OMP_TARGET_OFFLOAD", "DISABLED".into())),
        Some(DeviceChoice::Plugin { plugin, .. }) if o.runtime == Some(Runtime::Llvm) => {
            return Err(format!(
                "`--device {plugin}:..` picks one of offload's own plugins, which `--runtime llvm` does not use; \
                 leave `--device` out (libomptarget's default device runs the regions)"
            ))
        }
        Some(DeviceChoice::Plugin { plugin, index }) => {
            env.push(("OFFLOAD_PLUGINS", plugin.clone()));
            if let Some(i) = index {
                env.push(("OMP_DEFAULT_DEVICE", i.to_string()));
            }
        }
        None => {}
    }
    if o.mandatory {
        env.push(("OMP_TARGET_OFFLOAD", "MANDATORY".into()));
    }
    match o.runtime {
        Some(Runtime::Llvm) => env.push(("OFFLOAD_RUNTIME", "llvm".into())),
        Some(Runtime::Offload) => env.push(("OFFLOAD_RUNTIME", "offload".into())),
        None => {}
    }
    if let Some(level) = o.info {
        env.push(("OFFLOAD_INFO", level.to_string()));
    }
    if let Some(p) = &o.profile {
        let p = std::path::absolute(p).map_err(|e| format!("--profile {}: {e}", p.display()))?;
        env.push(("OFFLOAD_PROFILE", p.display().to_string()));
    }
    if o.ranks.is_some() {
        env.push((crate::ranks::BIND.0, crate::ranks::BIND.1.into()));
    }
    Ok(env)
}

/// Runs `cargo run ARGS` with the environment, or under `--ranks` builds and starts the program under the MPI
/// launcher; the exit status is the program's (or cargo's, or the launcher's).
pub fn run(o: &RunOptions, cargo_args: &[String]) -> Result<std::process::ExitStatus, String> {
    let env = environment(o)?;
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    if let Some(ranks) = o.ranks {
        if ranks == 0 {
            return Err("--ranks takes a number of processes, at least 1".into());
        }
        let launcher = ranks::find(
            |k| std::env::var(k).ok(),
            which,
            |p| {
                Command::new(p)
                    .arg("--version")
                    .output()
                    .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                    .unwrap_or_default()
            },
        )?;
        let (build_args, program_args) = match cargo_args.iter().position(|a| a == "--") {
            Some(k) => (&cargo_args[..k], &cargo_args[k + 1..]),
            None => (cargo_args, &[][..]),
        };
        let program = ranks::build_program(&cargo, build_args)?;
        let root = std::fs::metadata("/proc/self").is_ok_and(|m| {
            use std::os::unix::fs::MetadataExt;
            m.uid() == 0
        });
        let mut cmd = ranks::command(&launcher, ranks, &program, program_args, &env, root);
        return cmd
            .status()
            .map_err(|e| format!("running {:?}: {e}", cmd.get_program()));
    }
    Command::new(&cargo)
        .arg("run")
        .args(cargo_args)
        .envs(env)
        .status()
        .map_err(|e| format!("running {cargo}: {e}"))
}

/// `name` on `PATH`, if it is there.
fn which(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(device: Option<DeviceChoice>, runtime: Option<Runtime>) -> RunOptions {
        RunOptions {
            device,
            ranks: None,
            mandatory: true,
            runtime,
            info: None,
            profile: None,
        }
    }

    #[test]
    fn runtime_llvm_sets_offload_runtime_and_refuses_our_plugins() {
        let env = environment(&options(None, Some(Runtime::Llvm))).unwrap();
        assert!(env.contains(&("OFFLOAD_RUNTIME", "llvm".into())), "{env:?}");
        assert!(env.contains(&("OMP_TARGET_OFFLOAD", "MANDATORY".into())));
        let cuda = DeviceChoice::Plugin {
            plugin: "cuda".into(),
            index: Some(0),
        };
        let e = environment(&options(Some(cuda), Some(Runtime::Llvm))).unwrap_err();
        assert!(e.contains("--runtime llvm"), "{e}");
        let env = environment(&options(None, None)).unwrap();
        assert!(!env.iter().any(|(k, _)| *k == "OFFLOAD_RUNTIME"));
    }
}
