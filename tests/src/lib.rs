//! Regions shared by the integration tests and the probe binary; a library's regions reach every crate that links it.

pub mod kernels;

/// The default device as a failure names it: `device 0 (host-elf)`, `device 0 (gpu-sim)`.
pub fn default_device_name() -> String {
    let d = offload::omp_get_default_device();
    format!(
        "device {d} ({})",
        offload::device_info(d).map_or("none", |i| i.plugin)
    )
}

/// Runs this test binary again with `args` (a test's name, libtest's flags), without the variables `remove` and with
/// `set`, and waits for it: the runtime reads its settings before `main`, so a test that needs other settings runs
/// in a process of its own.
pub fn rerun_self(args: &[&str], remove: &[&str], set: &[(&str, &str)]) -> std::process::Output {
    let mut cmd = std::process::Command::new(std::env::current_exe().expect("the test binary"));
    cmd.args(args);
    for v in remove {
        cmd.env_remove(v);
    }
    cmd.envs(set.iter().copied());
    cmd.output().expect("run the test binary")
}

/// Whether the program runs on LLVM's libomptarget (`OFFLOAD_RUNTIME=llvm`), whose host plugin's device memory is
/// `malloc`'s (a `from` or `alloc` copy starts as the host's values, not zeroed) and which cannot take some constructs
/// yet (the guide's chapter on it lists them).
pub fn runtime_is_llvm() -> bool {
    std::env::var("OFFLOAD_RUNTIME").as_deref() == Ok("llvm")
}

/// Whether the default device is a GPU (`cuda`, `amdgpu`). What differs there, by design: a panic report says where
/// a thread panicked but not its message (the formatting code would cost every kernel registers), a trap loses the
/// device's context, the clock is the GPU's own, and the math is the vendor library's (within its error bounds, not
/// the host's bits).
pub fn default_device_is_gpu() -> bool {
    let d = offload::omp_get_default_device();
    matches!(
        offload::device_info(d).map(|i| i.plugin),
        Some("cuda" | "amdgpu")
    )
}

/// Whether the failure `msg` says `text`; from a GPU, whose panic reports say where but not what, a report without
/// the message counts too.
pub fn says(msg: &str, text: &str) -> bool {
    msg.contains(text)
        || (default_device_is_gpu() && msg.contains("GPU code records where, not the message"))
}

/// Whether the host can copy into the default device's memory while a kernel runs there (host-elf, gpu-sim, no
/// device). Tests whose kernel spins until such a copy lands skip elsewhere: on CUDA the copy waits for the
/// context's running kernel, so neither ends (seen on an H200).
pub fn copies_run_beside_kernels() -> bool {
    if default_device_is_gpu() {
        eprintln!(
            "skipped on {}: its copies wait for the running kernel this test's kernel waits in",
            default_device_name()
        );
        return false;
    }
    true
}

/// The most threads a team gets where a region runs: on the default device, or in the host fallback. The host
/// devices give at most the hardware threads, GPUs (and gpu-sim) their block size limit.
pub fn team_limit(on_device: bool) -> u32 {
    let d = if on_device {
        offload::omp_get_default_device()
    } else {
        offload::omp_get_initial_device()
    };
    offload::device_info(d).map_or(1, |i| i.max_threads)
}

/// Where a region ran, as the region itself sees it.
pub fn ran_on(initial: bool) -> &'static str {
    if initial {
        "host"
    } else {
        "device"
    }
}

/// Runs `f` with `d` as this thread's default device (`omp_set_default_device` is per thread, as OpenMP's ICV).
pub fn with_device<R>(d: i32, f: impl FnOnce() -> R) -> R {
    let before = offload::omp_get_default_device();
    offload::omp_set_default_device(d);
    let r = f();
    offload::omp_set_default_device(before);
    r
}

/// Runs the test `name` again on two host-elf devices if this process has one host-elf device and our runtime
/// (`true`: the caller returns, the child ran it); else the caller runs it here.
pub fn on_two_devices(name: &str) -> bool {
    let ours = std::env::var_os("OFFLOAD_RUNTIME").is_none();
    let one_host_elf = offload::omp_get_num_devices() == 1
        && offload::device_info(0).is_some_and(|i| i.plugin == "host-elf");
    if !(ours && one_host_elf && std::env::var_os("OFFLOAD_HOST_DEVICES").is_none()) {
        return false;
    }
    let out = rerun_self(
        &[name, "--exact", "--nocapture"],
        &[],
        &[("OFFLOAD_HOST_DEVICES", "2")],
    );
    assert!(
        out.status.success(),
        "{name} on two devices:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    true
}

#[cfg(test)]
mod unit {
    use offload::{omp_is_initial_device, target};

    /// A region in a library's own unit tests.
    #[target]
    fn cube_all(y: &mut [i32]) -> bool {
        for v in y.iter_mut() {
            *v = *v * *v * *v;
        }
        omp_is_initial_device()
    }

    #[test]
    fn regions_in_unit_tests_run_on_the_device() {
        let mut y = [1, 2, 3];
        assert!(!cube_all(&mut y), "ran in the host fallback");
        assert_eq!(y, [1, 8, 27]);
    }
}
