//! `cargo offload run`: `cargo run` with the device chosen on the command line, translated into the runtime's
//! environment.

use crate::devices::DeviceChoice;
use std::path::PathBuf;
use std::process::Command;

pub struct RunOptions {
    pub device: Option<DeviceChoice>,
    pub mandatory: bool,
    pub info: Option<i32>,
    pub profile: Option<PathBuf>,
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
        Some(DeviceChoice::Plugin { plugin, index }) => {
            env.push(("OFFLOAD_PLUGINS", plugin.clone()));
            env.push(("OMP_DEFAULT_DEVICE", index.to_string()));
        }
        None => {}
    }
    if o.mandatory {
        env.push(("OMP_TARGET_OFFLOAD", "MANDATORY".into()));
    }
    if let Some(level) = o.info {
        env.push(("OFFLOAD_INFO", level.to_string()));
    }
    if let Some(p) = &o.profile {
        let p = std::path::absolute(p).map_err(|e| format!("--profile {}: {e}", p.display()))?;
        env.push(("OFFLOAD_PROFILE", p.display().to_string()));
    }
    Ok(env)
}

/// Runs `cargo run ARGS` with the environment; the exit status is the program's (or cargo's).
pub fn run(o: &RunOptions, cargo_args: &[String]) -> Result<std::process::ExitStatus, String> {
    let env = environment(o)?;
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    Command::new(&cargo)
        .arg("run")
        .args(cargo_args)
        .envs(env)
        .status()
        .map_err(|e| format!("running {cargo}: {e}"))
}
