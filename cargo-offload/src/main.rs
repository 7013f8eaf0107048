//! `cargo offload`: the command-line side of offload. Installed as `cargo-offload`, cargo runs it for
//! `cargo offload ...` (passing `offload` as the first argument).

mod build;
mod devices;
mod doctor;
mod inspect;
mod ranks;
mod run;

use clap::{Parser, Subcommand};
use devices::DeviceChoice;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(name = "cargo", bin_name = "cargo")]
enum Cargo {
    /// OpenMP-style target offloading: run on a chosen device, list devices, inspect fat binaries, check toolchains.
    #[command(version)]
    Offload(Offload),
}

#[derive(clap::Args)]
struct Offload {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// `cargo run` on a chosen device: `cargo offload run --device cuda:0 --example saxpy -- ARGS`.
    Run {
        /// `PLUGIN[:N]` (`cuda:0`, `amdgpu:1`, `host-elf:0`), or `host` for the initial device.
        #[arg(long)]
        device: Option<DeviceChoice>,
        /// Starts N processes under the MPI launcher (`srun` in a Slurm allocation, else `mpirun`), each taking its
        /// default device by its local rank (`OFFLOAD_BIND=local-rank`); the other options go to every rank.
        #[arg(long, value_name = "N")]
        ranks: Option<u32>,
        /// A region that cannot run on a device stops the program (`OMP_TARGET_OFFLOAD=MANDATORY`).
        #[arg(long)]
        mandatory: bool,
        /// `OFFLOAD_INFO`: 1 launches, 2 also transfers, 4 also mapping-table changes, -1 everything.
        #[arg(long, allow_negative_numbers = true)]
        info: Option<i32>,
        /// `OFFLOAD_PROFILE`: write a Chrome trace of the run (open it in Perfetto).
        #[arg(long)]
        profile: Option<PathBuf>,
        /// `cargo run`'s arguments, then `--` and the program's.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        cargo_args: Vec<String>,
    },
    /// `cargo build`, showing the device builds' progress (one line per target and architecture, with timing).
    Build {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        cargo_args: Vec<String>,
    },
    /// Every plugin and device the runtime finds, with its number, name, architecture and memory, and why a plugin
    /// found none.
    Devices {
        /// Also show which device each local rank of `run --ranks N` takes on this node.
        #[arg(long, value_name = "N")]
        ranks: Option<u32>,
    },
    /// What a fat binary carries: its offload entries, its device images and the kernels inside them, and every
    /// entry some kind of image has no kernel for.
    Inspect {
        /// The binary (or library, or object) to read.
        path: PathBuf,
    },
    /// Checks the host and device toolchains and the GPU runtimes, and says what is missing for each target and how
    /// to install it.
    Doctor {
        /// Install what is missing where it can (apt-get for Debian's packages, pip into a venv for CUDA's wheel).
        #[arg(long)]
        install: bool,
    },
}

fn fail(cmd: &str, e: impl std::fmt::Display) -> ExitCode {
    eprintln!("cargo offload {cmd}: {e}");
    ExitCode::FAILURE
}

fn exit(status: std::process::ExitStatus) -> ExitCode {
    ExitCode::from(status.code().unwrap_or(1).clamp(0, 255) as u8)
}

fn main() -> ExitCode {
    let Cargo::Offload(args) = Cargo::parse();
    match args.command {
        Command::Run {
            device,
            ranks,
            mandatory,
            info,
            profile,
            cargo_args,
        } => {
            if let Some(d) = &device {
                if let Err(e) = devices::check(d, &offload::inventory()) {
                    return fail("run", e);
                }
            }
            let options = run::RunOptions {
                device,
                ranks,
                mandatory,
                info,
                profile,
            };
            match run::run(&options, &cargo_args) {
                Ok(status) => exit(status),
                Err(e) => fail("run", e),
            }
        }
        Command::Build { cargo_args } => match build::build(&cargo_args) {
            Ok(status) => exit(status),
            Err(e) => fail("build", e),
        },
        Command::Devices { ranks } => {
            let report = offload::inventory();
            print!("{}", devices::render(&report));
            if let Some(n) = ranks {
                print!(
                    "{}",
                    ranks::render_binding(n, &devices::default_devices(&report))
                );
            }
            ExitCode::SUCCESS
        }
        Command::Inspect { path } => match inspect::inspect(&path) {
            Ok(report) => {
                print!("{}", report.render());
                ExitCode::SUCCESS
            }
            Err(e) => fail("inspect", e),
        },
        Command::Doctor { install } => {
            let mut checks = doctor::checks();
            if install {
                if let Err(e) = doctor::install(&checks) {
                    return fail("doctor", e);
                }
                checks = doctor::checks();
            }
            print!("{}", doctor::render(&checks));
            let ready = checks.iter().all(|c| !c.required || c.found.is_ok());
            if ready {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
    }
}
