//! The Rust examples of README.md and of the guide (`docs/src`), as doctests: `cargo test -p offload-guide` compiles
//! every ` ```rust ` block and runs it (blocks marked `no_run` compile only, `ignore` ones are not code), against the
//! crates of the same commit, so the documentation cannot rot. Their regions have no device images here (this
//! package has no `build.rs`), so they run in the host fallback, which has the same semantics.

/// Makes the host (the initial device) the default device, so the calling example's regions and data constructs run
/// there: its regions have no images here, and a host-elf device with data mapped on it would refuse to run them
/// without one. Called first thing (a hidden line) by the examples that map data.
pub fn in_the_host_fallback() {
    offload::omp_set_default_device(offload::omp_get_initial_device());
}

#[cfg(doctest)]
macro_rules! chapters {
    ($($name:ident = $file:literal),* $(,)?) => {
        $(
            #[doc = include_str!($file)]
            pub struct $name;
        )*
    };
}

#[cfg(doctest)]
chapters! {
    Readme = "../README.md",
    GettingStarted = "src/getting-started.md",
    Regions = "src/regions.md",
    Parallel = "src/parallel.md",
    Data = "src/data.md",
    Tasks = "src/tasks.md",
    Borrows = "src/borrows.md",
    Gpus = "src/gpus.md",
    CargoOffload = "src/cargo-offload.md",
    Nodes = "src/nodes.md",
    Llvm = "src/llvm.md",
    Environment = "src/environment.md",
    Failures = "src/failures.md",
    Porting = "src/porting.md",
    Status = "src/status.md",
    HowItWorks = "src/how-it-works.md",
}
