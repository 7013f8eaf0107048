//! One data environment with C (OpenMP's usual world: C, C++ and Fortran compiled by clang onto LLVM's
//! libomptarget). Under `OFFLOAD_RUNTIME=llvm` the Rust regions run on the libomptarget the C library
//! (`interop_c.c`, built by clang-22 for the x86_64 host device) registers its own images with, so:
//!
//! 1. C maps an array with `target enter data`; a Rust region finds it present (`omp_get_mapped_ptr` gives the same
//!    device address in both languages; nothing is copied) and writes the device copy, and C's `target update from`
//!    reads the Rust writes back.
//! 2. Rust maps a buffer with `target_enter_data!`; a C `target` region computes on that copy; C's own `enter` and
//!    `exit data` (release) leave it mapped while Rust holds it; Rust's exit brings the C results back.
//!
//! `OFFLOAD_RUNTIME=llvm OMP_TARGET_OFFLOAD=MANDATORY cargo run --example interop_c --features interop-c` (needs
//! `clang-22`, `libomp-22-dev` and `liboffload-22-dev`). Exits non-zero on any mismatch.

use offload::{
    omp_get_mapped_ptr, omp_get_num_devices, omp_target_is_present, target, target_enter_data,
};
use std::ffi::c_void;

extern "C" {
    fn c_enter(a: *mut f64, n: i32);
    fn c_exit(a: *mut f64, n: i32);
    fn c_update_from(a: *mut f64, n: i32);
    fn c_mapped_ptr(a: *const f64) -> *mut c_void;
    fn c_num_devices() -> i32;
    fn c_scale(a: *mut f64, n: i32, k: f64);
}

#[target]
fn add_one(y: &mut [f64]) {
    for v in y.iter_mut() {
        *v += 1.0;
    }
}

fn check(ok: bool, what: &str) {
    if ok {
        println!("ok: {what}");
    } else {
        eprintln!("interop_c: FAILED: {what}");
        std::process::exit(1);
    }
}

fn main() {
    if std::env::var("OFFLOAD_RUNTIME").as_deref() != Ok("llvm") {
        eprintln!("interop_c: run it with OFFLOAD_RUNTIME=llvm (our own runtime keeps a data environment of its own)");
        std::process::exit(2);
    }
    const N: usize = 1000;
    let n = N as i32;
    // SAFETY (every C call below): the pointers are to live arrays of `n` doubles, as the C functions take them.
    check(
        omp_get_num_devices() == unsafe { c_num_devices() },
        "one device table: Rust and C count the same devices",
    );

    // 1. C maps, Rust computes, C reads back.
    let mut a = vec![1.0f64; N];
    unsafe { c_enter(a.as_mut_ptr(), n) };
    let dev = offload::omp_get_default_device();
    let rust_sees = omp_get_mapped_ptr(a.as_ptr().cast(), dev);
    check(
        !rust_sees.is_null() && rust_sees == unsafe { c_mapped_ptr(a.as_ptr()) },
        "the array C mapped is present for Rust at the same device address",
    );
    a[0] = 100.0; // the host copy only
    add_one(&mut a);
    check(
        a[0] == 100.0 && a[1] == 1.0,
        "the Rust region copied nothing in or out",
    );
    unsafe { c_update_from(a.as_mut_ptr(), n) };
    check(
        a.iter().all(|&v| v == 2.0),
        "C's `target update from` reads what the Rust region wrote",
    );
    unsafe { c_exit(a.as_mut_ptr(), n) };
    check(
        !omp_target_is_present(a.as_ptr().cast(), dev),
        "C's exit unmapped it",
    );

    // 2. Rust maps, C computes; the reference counts are shared.
    let v = vec![3.0f64; N];
    let mut m = target_enter_data!(map(to: v));
    let p = m.as_mut_ptr();
    unsafe { c_scale(p, n, 10.0) };
    check(
        m.iter().all(|&x| x == 3.0),
        "C's region computed on the Rust-entered copy, copying nothing back",
    );
    unsafe {
        c_enter(p, n);
        c_exit(p, n);
    }
    check(
        omp_target_is_present(p.cast_const().cast(), dev),
        "C's enter and release left the mapping Rust holds",
    );
    let v = m.exit_from();
    check(
        v.iter().all(|&x| x == 30.0),
        "Rust's exit brought C's results back",
    );
    println!("interop_c: C and Rust share one data environment");
}
