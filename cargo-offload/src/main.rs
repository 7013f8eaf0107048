//! `cargo offload`: the command-line side of offload. Installed as `cargo-offload`, cargo runs it for
//! `cargo offload ...` (passing `offload` as the first argument).

mod build;
mod devices;
mod doctor;
mod inspect;
mod new;
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

/// What `new` and `init` make.
#[derive(clap::Args)]
struct NewArgs {
    /// The package's name (default: the directory's).
    #[arg(long)]
    name: Option<String>,
    /// An offload-aware library instead of a program.
    #[arg(long)]
    lib: bool,
    /// A GPU target to build for besides the host (`nvptx64:sm_90`, `amdgcn:gfx90a`, or `gpu-sim`, the GPU lowering
    /// run on the host; repeatable); `doctor` then says what the build needs.
    #[arg(long, value_name = "TARGET")]
    gpu: Vec<String>,
    /// Depend on the offload checkout at this path (default: the one this cargo-offload was built from, if it still
    /// exists, else crates.io).
    #[arg(long, value_name = "CHECKOUT")]
    path: Option<PathBuf>,
    /// Depend on offload from this git repository.
    #[arg(long, value_name = "URL")]
    git: Option<String>,
}

#[derive(Subcommand)]
enum Command {
    /// A new package that offloads: dependencies, `build.rs`, a first region and a test
    /// (`cargo offload new demo && cd demo && cargo run`).
    New {
        /// The directory to make.
        dir: PathBuf,
        #[command(flatten)]
        args: NewArgs,
    },
    /// `new` in an existing directory (default: the current one) that holds no Cargo.toml yet.
    Init {
        /// The directory (default: the current one).
        dir: Option<PathBuf>,
        #[command(flatten)]
        args: NewArgs,
    },
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
        /// `OFFLOAD_RUNTIME`: whose device layer runs the regions, ours (`offload`) or LLVM's libomptarget
        /// (`llvm`: its devices and present table, shared with C and C++ code compiled by clang).
        #[arg(long, value_enum)]
        runtime: Option<run::Runtime>,
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

/// `new` or `init` (`make`) of the package in `dir`, then, with GPU targets, `doctor`'s account of what to install.
fn make_package(
    cmd: &str,
    dir: &std::path::Path,
    args: NewArgs,
    make: fn(&std::path::Path, &new::NewOptions) -> Result<Vec<PathBuf>, new::NewError>,
) -> ExitCode {
    let options = match new::Source::choose(args.path, args.git) {
        Ok(source) => new::NewOptions {
            name: args.name,
            lib: args.lib,
            gpu: args.gpu,
            source,
        },
        Err(e) => return fail(cmd, e),
    };
    if let Err(e) = make(dir, &options) {
        return fail(cmd, e);
    }
    let what = if options.lib { "library" } else { "program" };
    let devices = if options.gpu.is_empty() {
        "the host device".to_string()
    } else {
        format!("the host device and {}", options.gpu.join(", "))
    };
    println!(
        "Created an offload {what} in `{}`; `cargo {}` builds its regions for {devices}.",
        dir.display(),
        if options.lib { "test" } else { "run" }
    );
    if !options.gpu.is_empty() {
        println!("\nIts GPU targets need the device toolchain:");
        print!("{}", doctor::render(&doctor::checks()));
    }
    ExitCode::SUCCESS
}

fn main() -> ExitCode {
    let Cargo::Offload(args) = Cargo::parse();
    match args.command {
        Command::New { dir, args } => make_package("new", &dir, args, new::new),
        Command::Init { dir, args } => {
            make_package("init", &dir.unwrap_or_else(|| ".".into()), args, new::init)
        }
        Command::Run {
            device,
            ranks,
            mandatory,
            runtime,
            info,
            profile,
            cargo_args,
        } => {
            if let (Some(d), None | Some(run::Runtime::Offload)) = (&device, runtime) {
                if let Err(e) = devices::check(d, &offload::inventory()) {
                    return fail("run", e);
                }
            }
            let options = run::RunOptions {
                device,
                ranks,
                mandatory,
                runtime,
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

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// clap's own checks of the command line's definition (unique names, valid defaults), which otherwise panic
    /// only when that subcommand is used.
    #[test]
    fn the_command_line_is_well_formed() {
        super::Cargo::command().debug_assert();
    }
}
