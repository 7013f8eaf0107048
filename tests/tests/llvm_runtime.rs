//! LLVM's libomptarget runs our host image (issue 29, first stage): the fat binary's x86-64 image registered with it,
//! a region's kernel launched through `__tgt_target_kernel` with a map list libomptarget maps, and data entered in
//! its present table (the one C and C++ code compiled by clang uses) found there by the kernel. Skipped, saying so,
//! where `liboffload-22-dev` is not installed (`.ci/run` installs it).

use offload::target;

#[target]
fn add_one(y: &mut [i64]) {
    for v in y.iter_mut() {
        *v += 1;
    }
}

#[test]
fn our_host_image_runs_on_llvms_libomptarget_and_shares_its_present_table() {
    // Named in full: a `use` of `offload::..` at the top would go to the device crate, which has no `__private`.
    use offload::__private::llvm::{self, Libomptarget, Map, FROM, TO};
    let lib = match Libomptarget::open(None) {
        Ok(lib) => lib,
        Err(e) => {
            eprintln!("skipped: {e}");
            return;
        }
    };
    assert_eq!(
        lib.register().expect("an x86-64 image"),
        1,
        "this package's image"
    );
    assert!(lib.num_devices() >= 1, "LLVM's host plugin has devices");
    let dev = 0;
    let entry =
        llvm::entry("__omp_offloading_rs_12llvm_runtime7add_one").expect("the region's entry");

    // As C's `target enter data map(to: y[0:3])`: the kernel then finds `y` present.
    let mut y = vec![1i64, 2, 3];
    let whole: *mut [i64] = &mut y[..];
    // SAFETY: `y` outlives the mapping, which the exit below ends.
    unsafe { lib.enter(dev, &[Map::data(whole, TO)]) };
    let device_y = lib.mapped_ptr(y.as_ptr().cast(), dev);
    assert!(
        !device_y.is_null(),
        "entered in libomptarget's present table"
    );
    assert_ne!(
        device_y,
        y.as_mut_ptr().cast(),
        "the host plugin's own copy"
    );

    y[0] = 100; // the host copy only: present, so the launch copies nothing in, and nothing out (still held)
    let whole: *mut [i64] = &mut y[..];
    // SAFETY: the entry was registered; `y` is live and writable for the call.
    let rc = unsafe { lib.kernel(dev, entry, &[Map::slice(whole, TO | FROM), Map::literal(3)]) };
    assert_eq!(rc, 0, "the kernel ran");
    assert_eq!(
        y[0], 100,
        "present: nothing copied back while the enter holds it"
    );
    assert_eq!(
        lib.mapped_ptr(y.as_ptr().cast(), dev),
        device_y,
        "the same device copy"
    );

    let whole: *mut [i64] = &mut y[..];
    // SAFETY: as above; the exit copies the device values back into `y`.
    unsafe { lib.exit(dev, &[Map::data(whole, FROM)]) };
    assert_eq!(
        y,
        [2, 3, 4],
        "the kernel wrote the entered copy, which the exit copied back"
    );
    assert!(lib.mapped_ptr(y.as_ptr().cast(), dev).is_null(), "unmapped");
}
