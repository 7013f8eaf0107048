fn main() {
    offload_build::build();
    #[cfg(feature = "interop-c")]
    interop_c();
}

/// `interop_c.c` as a shared library built by clang-22 with OpenMP offloading for the x86_64 host device. A shared
/// library, not an object: clang's offload link (its linker wrapper, which embeds the device image and registers it
/// with libomptarget when the library loads) runs only when clang links. The `cc` crate finds and configures the
/// compiler (`CC` overrides it); the rpath makes the example load LLVM 22's libomp and libomptarget, the ones the
/// library was built against, and `OFFLOAD_RUNTIME=llvm` then opens the same libomptarget.
#[cfg(feature = "interop-c")]
fn interop_c() {
    const LLVM_LIB: &str = "/usr/lib/llvm-22/lib";
    let out = std::path::PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let lib = out.join("libinterop_c.so");
    let compiler = cc::Build::new()
        .compiler(std::env::var("CC").unwrap_or_else(|_| "clang-22".into()))
        .opt_level(2)
        .pic(true)
        .flag("-fopenmp")
        .flag("-fopenmp-targets=x86_64-pc-linux-gnu")
        .get_compiler();
    let status = compiler
        .to_command()
        .args(["-shared", "interop_c.c", "-o"])
        .arg(&lib)
        .arg(format!("-Wl,-rpath,{LLVM_LIB}"))
        .status()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run {}: {e} (install clang-22)",
                compiler.path().display()
            )
        });
    assert!(
        status.success(),
        "building interop_c.c failed (it needs clang-22, libomp-22-dev and liboffload-22-dev)"
    );
    println!("cargo:rerun-if-changed=interop_c.c");
    println!("cargo:rustc-link-search=native={}", out.display());
    println!("cargo:rustc-link-lib=dylib=interop_c");
    println!(
        "cargo:rustc-link-arg-examples=-Wl,-rpath,{}:{LLVM_LIB}",
        out.display()
    );
}
