//! `OFFLOAD_RUNTIME=llvm` (issue 29, first stages): the fat binary's x86-64 image registered with LLVM's
//! libomptarget, region calls and data constructs going through its devices and its present table (the one C and C++
//! code compiled by clang uses), and what does not run there yet failing with an error that says so. Every test here
//! runs under `OFFLOAD_RUNTIME=llvm`; they are skipped, saying so, where `liboffload-22-dev` is not installed
//! (`.ci/run` installs it).

use offload::{
    omp_get_initial_device, omp_get_mapped_ptr, omp_get_num_devices, omp_target_is_present, target,
    target_data, target_enter_data, target_update,
};

#[target]
fn add_one(y: &mut [i64]) {
    for v in y.iter_mut() {
        *v += 1;
    }
}

#[target(teams_distribute_parallel_for)]
fn scale(k: f32, x: &[f32], y: &mut [f32]) {
    for i in 0..y.len() {
        y[i] = k * x[i] + y[i];
    }
}

#[target(teams_distribute_parallel_for, reduction(+: s))]
fn sum(x: &[i64]) -> i64 {
    let mut s = 0;
    for i in 0..x.len() {
        s += x[i];
    }
    s
}

/// Whether this process runs under `OFFLOAD_RUNTIME=llvm` with libomptarget there (the runtime reads its settings
/// before `main`, so [`under_offload_runtime_llvm`] runs these tests again in a process of their own).
fn llvm() -> bool {
    if std::env::var("OFFLOAD_RUNTIME").as_deref() != Ok("llvm") {
        return false;
    }
    match offload::__private::llvm::active() {
        Some(Ok(_)) => true,
        Some(Err(e)) => {
            eprintln!("skipped: {e}");
            false
        }
        None => panic!("OFFLOAD_RUNTIME=llvm was read as another runtime"),
    }
}

/// Runs this binary's tests again under `OFFLOAD_RUNTIME=llvm` and `OMP_TARGET_OFFLOAD=MANDATORY`.
#[test]
fn under_offload_runtime_llvm() {
    if std::env::var_os("OFFLOAD_RUNTIME").is_some() {
        return; // the child itself, or a run under the variable already
    }
    let out = std::process::Command::new(std::env::current_exe().expect("the test binary"))
        .args(["--test-threads=1", "--nocapture"])
        .env("OFFLOAD_RUNTIME", "llvm")
        .env("OMP_TARGET_OFFLOAD", "MANDATORY")
        .env_remove("OFFLOAD_INFO")
        .output()
        .expect("run the test binary");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stdout}\n{stderr}");
    if stderr.contains("skipped:") {
        eprintln!("{stderr}");
    } else {
        assert!(
            stdout.contains("test result: ok. 5 passed"),
            "{stdout}\n{stderr}"
        );
    }
}

#[test]
fn the_devices_are_libomptargets() {
    if !llvm() {
        return;
    }
    let n = omp_get_num_devices();
    assert!(n >= 1, "LLVM's host plugin has devices");
    assert_eq!(
        omp_get_initial_device(),
        n,
        "OpenMP's initial device number"
    );
}

/// What C's `target enter data map(to: y[0:3])` does, through libomptarget itself: a region call then finds `y`
/// present, computes on the entered copy, and C's `target exit data map(from: ..)` brings the result back.
#[test]
fn a_region_finds_data_entered_in_libomptargets_table() {
    if !llvm() {
        return;
    }
    use offload::__private::llvm::{Map, FROM, TO};
    let Some(Ok(lib)) = offload::__private::llvm::active() else {
        unreachable!()
    };
    let mut y = vec![1i64, 2, 3];
    let whole: *mut [i64] = &mut y[..];
    // SAFETY: `y` outlives the mapping, which the exit below ends.
    unsafe { lib.enter(0, &[Map::slice_data(whole, TO)]) };
    let device_y = omp_get_mapped_ptr(y.as_ptr().cast(), 0);
    assert!(
        !device_y.is_null(),
        "entered in libomptarget's present table"
    );
    assert_ne!(
        device_y,
        y.as_mut_ptr().cast(),
        "the host plugin's own copy"
    );

    y[0] = 100; // the host copy only: present, so the call copies nothing in, and nothing out (still held)
    add_one(&mut y);
    assert_eq!(
        y[0], 100,
        "present: nothing copied back while the entry holds it"
    );
    assert_eq!(
        omp_get_mapped_ptr(y.as_ptr().cast(), 0),
        device_y,
        "the same device copy"
    );

    let whole: *mut [i64] = &mut y[..];
    // SAFETY: as above; the exit copies the device values back into `y`.
    unsafe { lib.exit(0, &[Map::slice_data(whole, FROM)]) };
    assert_eq!(y, [2, 3, 4], "the region wrote the entered copy");
    assert!(!omp_target_is_present(y.as_ptr().cast(), 0), "unmapped");
}

#[test]
fn regions_and_data_constructs_run_there() {
    if !llvm() {
        return;
    }
    let x: Vec<f32> = (0..1000).map(|i| i as f32).collect();
    let mut y = vec![1.0f32; 1000];
    scale(2.0, &x, &mut y);
    assert!(y
        .iter()
        .enumerate()
        .all(|(i, &v)| v == 2.0 * i as f32 + 1.0));

    let mut z = vec![1i64; 4];
    target_data!(map(tofrom: z) => {
        assert!(omp_target_is_present(z.as_ptr().cast(), 0));
        z[0] = 100; // the host copy only
        add_one(z);
        add_one(z);
        assert_eq!(z[0], 100, "nothing copied back inside the data region");
        target_update!(from: z);
        assert_eq!(z[..], [3, 3, 3, 3], "the device copy, which never saw 100");
        z[1] = 10;
        target_update!(to: z);
    });
    assert_eq!(z, [3, 10, 3, 3], "copied back at the end");

    let v = vec![5i64; 3];
    let mut m = target_enter_data!(map(to: v));
    add_one(&mut m);
    let v = m.exit_from();
    assert_eq!(v, [6, 6, 6]);
}

#[target(map(tofrom: y[1..3]))]
fn bump_section(y: &mut [i64]) {
    y[1] += 1;
}

#[target]
fn count(hits: &[std::sync::atomic::AtomicU32]) {
    hits[0].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
}

#[test]
fn what_does_not_run_there_yet_is_an_error_naming_it() {
    if !llvm() {
        return;
    }
    let says = |e: offload::Error, what: &str| {
        let msg = e.to_string();
        assert!(
            msg.contains("OFFLOAD_RUNTIME=llvm") && msg.contains(what),
            "{msg}"
        );
    };
    says(try_sum(&[1, 2, 3]).unwrap_err(), "reduction");
    // libomptarget would allocate the section alone, where the region addresses the whole slice.
    says(try_bump_section(&mut [0; 4]).unwrap_err(), "map section");
    // Its copies are `memcpy`s, which would race with host threads using the atomics.
    let hits = [std::sync::atomic::AtomicU32::new(0)];
    says(try_count(&hits).unwrap_err(), "atomics");
}
