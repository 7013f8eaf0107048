//! The simulated GPU (`gpu-sim`): GPU-shaped programs built with this package's `gpu-sim` target, run
//! with `OFFLOAD_PLUGINS=gpu-sim OMP_TARGET_OFFLOAD=MANDATORY` as a user would. Each runs the `gpu_shaped` binary in
//! its own process, since the runtime reads the environment once.

mod common;

use std::collections::HashMap;
use std::process::Command;

struct Run {
    stdout: String,
    success: bool,
    kv: HashMap<String, String>,
    stderr: String,
    describe: String,
}

impl Run {
    fn get(&self, k: &str) -> &str {
        self.kv
            .get(k)
            .map(String::as_str)
            .unwrap_or_else(|| panic!("printed no {k}:\n{}", self.describe))
    }
}

fn run(scenario: &str, plugins: &str) -> Run {
    let r = run_any(scenario, plugins);
    assert!(r.success, "{}", r.describe);
    r
}

fn run_any(scenario: &str, plugins: &str) -> Run {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_gpu_shaped"));
    for k in common::RUNTIME_ENV {
        cmd.env_remove(k);
    }
    let out = cmd
        .arg(scenario)
        .env("OFFLOAD_PLUGINS", plugins)
        .env("OMP_TARGET_OFFLOAD", "MANDATORY")
        .env("OFFLOAD_INFO", "1")
        .output()
        .expect("running gpu_shaped");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let describe = format!(
        "status {:?}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
    let kv = stdout
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    Run {
        kv,
        stderr,
        describe,
        success: out.status.success(),
        stdout,
    }
}

#[test]
fn launches_run_on_gpu_sim_with_the_geometry_asked_for_and_cudas_defaults() {
    let r = run("geometry", "gpu-sim");
    assert!(
        r.stderr
            .contains("launch gpu_shaped::census (entry __omp_offloading_rs_10gpu_shaped6census) on device 0 (gpu-sim)"),
        "{}",
        r.describe
    );
    // thread_limit(200): a block of 200 threads, whatever the host's cores (host-elf gives its hardware threads).
    assert_eq!(r.get("census_all_ran"), "true", "{}", r.describe);
    assert_eq!(r.get("census"), "30200", "3 teams of 200 threads");
    assert_eq!(r.get("census_uniform"), "true");
    // The CUDA plugin's defaults on a GPU of 8 multiprocessors: 8 blocks of 128 per multiprocessor for a loop, one
    // block of 256 per multiprocessor for `teams, parallel`.
    assert_eq!(r.get("loop_geometry"), "640128", "{}", r.describe);
    assert_eq!(r.get("loop_correct"), "true");
    assert_eq!(r.get("spmd_geometry"), "80256", "{}", r.describe);
}

#[test]
fn loops_are_dealt_grid_stride_on_gpu_sim_and_in_blocks_on_host_elf() {
    let r = run("grid-stride", "gpu-sim");
    assert_eq!(r.get("threads"), "128");
    assert_eq!(r.get("grid_stride"), "true", "{}", r.describe);
    assert_eq!(r.get("contiguous"), "false");
    // The same binary on host-elf: contiguous blocks per thread, not a grid-stride.
    let r = run("grid-stride", "host-elf");
    assert_eq!(r.get("contiguous"), "true", "{}", r.describe);
}

#[test]
fn thousands_of_blocks_of_128_threads_with_barriers() {
    let r = run("barriers", "gpu-sim");
    assert_eq!(r.get("teams"), "4096", "{}", r.describe);
    assert_eq!(r.get("sums_correct"), "true", "{}", r.describe);
    eprintln!(
        "4096 blocks x 128 threads, 8 barriers each: {} ms",
        r.get("elapsed_ms")
    );
}

#[test]
fn a_panic_names_its_message_location_block_and_thread() {
    let r = run("out-of-bounds", "gpu-sim");
    assert_eq!(r.get("ok"), "true", "{}", r.describe);
    let e = r.get("error");
    assert!(
        e.starts_with("offload: region gpu_shaped::out_of_bounds failed on device 0 (gpu-sim): index out of bounds: the len is 3 but the index is 17 at tests/src/bin/gpu_shaped.rs:"),
        "{e}"
    );
    assert!(e.ends_with(" (block 5, thread 17)"), "{e}");

    let e = run("unwrap-none", "gpu-sim").get("error").to_string();
    assert!(
        e.contains("failed on device 0 (gpu-sim): called `Option::unwrap()` on a `None` value at tests/src/bin/gpu_shaped.rs:"),
        "{e}"
    );
    assert!(e.ends_with(" (block 1, thread 3)"), "{e}");

    let r = run("explicit-panic", "gpu-sim");
    let e = r.get("error");
    assert!(
        e.contains("failed on device 0 (gpu-sim): block 2 is over its limit of 9 at tests/src/bin/gpu_shaped.rs:"),
        "{e}"
    );
    assert!(e.contains(" (block 2, thread "), "{e}");
    assert_eq!(
        r.get("after_ok"),
        "true",
        "the simulated device stays usable"
    );
}

#[test]
fn gpu_sim_is_off_unless_named() {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_gpu_shaped"));
    for k in common::RUNTIME_ENV {
        cmd.env_remove(k);
    }
    let out = cmd
        .arg("grid-stride")
        .env("OFFLOAD_INFO", "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("on device 0 (host-elf)"), "{stderr}");
    assert!(!stderr.contains("gpu-sim"), "{stderr}");
}

#[test]
fn a_thread_that_overflows_its_stack_is_named_before_the_process_ends() {
    let r = run_any("overflow", "gpu-sim");
    assert_eq!(r.get("shallow"), "0", "{}", r.describe);
    assert!(!r.success, "{}", r.describe);
    assert!(
        r.stderr
            .contains("offload: gpu-sim: thread 3 of block 1 overflowed its stack of 512 KiB"),
        "{}",
        r.describe
    );
}

#[test]
fn big_blocks_do_not_keep_their_stacks_mapped() {
    let r = run("stacks", "gpu-sim");
    assert_eq!(r.get("ran"), (16 * 1024).to_string(), "{}", r.describe);
    // Each stack is two mappings; a pool thread keeps 256 stacks after a launch, and a launch of 1024-thread blocks
    // runs on at most 8 of them.
    let hw = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(8);
    let added: usize = r.get("mappings_added").parse().unwrap();
    assert!(
        added <= 2 * 256 * hw + 256,
        "{added} mappings added\n{}",
        r.describe
    );
}

/// Region code prints on every device: whole lines, every one once, before a failure is reported.
fn check_prints(plugin: &str) {
    let r = run("print", plugin);
    // The geometry the launch got (host-elf gives at most the host's hardware threads).
    let geometry = r
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("hello from block 0 thread 0 of "))
        .unwrap_or_else(|| panic!("{plugin}: no greeting\n{}", r.describe))
        .to_string();
    let (teams, threads) = geometry.split_once('x').unwrap();
    let (teams, threads): (u32, u32) = (teams.parse().unwrap(), threads.parse().unwrap());
    if plugin == "gpu-sim" {
        assert_eq!((teams, threads), (4, 32));
    }
    for b in 0..teams {
        for t in 0..threads {
            let line = format!("hello from block {b} thread {t} of {geometry}");
            let n = r.stdout.lines().filter(|l| *l == line).count();
            assert_eq!(n, 1, "{plugin}: {line:?}\n{}", r.describe);
            // A line of over 1000 bytes comes out whole, on a line of its own.
            let long = format!("long line from block {b} thread {t}: {}|", "-".repeat(1000));
            let n = r.stdout.lines().filter(|l| *l == long).count();
            assert_eq!(
                n, 1,
                "{plugin}: block {b} thread {t}'s long line\n{}",
                r.describe
            );
        }
    }
    // `print!` then `println!`: one line.
    assert!(
        r.stdout.lines().any(|l| l == "value 1 (shouted)"),
        "{plugin}\n{}",
        r.describe
    );
    assert!(r.get("error").contains("done shouting"), "{}", r.describe);
    let printed = r.stdout.find("value 1 (shouted)").unwrap();
    assert!(
        printed < r.stdout.find("error=").unwrap(),
        "printed before the failure"
    );
}

#[test]
fn region_code_prints_on_gpu_sim_through_the_print_buffer() {
    check_prints("gpu-sim");
}

#[test]
fn region_code_prints_on_host_elf() {
    check_prints("host-elf");
}
