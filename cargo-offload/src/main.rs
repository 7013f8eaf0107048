//! `cargo offload`: the command-line side of offload. Installed as `cargo-offload`, cargo runs it for
//! `cargo offload ...` (passing `offload` as the first argument).

mod inspect;

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(name = "cargo", bin_name = "cargo")]
enum Cargo {
    /// OpenMP-style target offloading: run on a chosen device, list devices, inspect fat binaries.
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
    /// What a fat binary carries: its offload entries, its device images and the kernels inside them, and every
    /// entry some kind of image has no kernel for.
    Inspect {
        /// The binary (or library, or object) to read.
        path: PathBuf,
    },
}

fn main() -> ExitCode {
    let Cargo::Offload(args) = Cargo::parse();
    match args.command {
        Command::Inspect { path } => match inspect::inspect(&path) {
            Ok(report) => {
                print!("{}", report.render());
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("cargo offload inspect: {e}");
                ExitCode::FAILURE
            }
        },
    }
}
