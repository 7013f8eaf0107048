//! Tasks on the devices and under every policy: regions as tasks (`nowait_f`) give what their synchronous calls
//! give, on the device they name, with two host-elf devices, under `DISABLED` (in the host fallback, still on helper
//! threads) and with no helper threads at all; failures surface; forgotten tasks have ended when their scope returns;
//! a task runs on its spawning thread's default device.

mod common;

use common::probe;
use core::sync::atomic::{AtomicU32, Ordering};
use offload::{omp_get_initial_device, omp_set_default_device, target, task_scope};

#[test]
fn regions_as_tasks_run_on_the_devices_they_name() {
    let r = probe(&["tasks", "1"], &[("OFFLOAD_HOST_DEVICES", "2")]);
    r.assert_ok("device");
    assert_eq!(r.get("second_ran_on"), "device", "{}", r.describe());
}

#[test]
fn under_disabled_tasks_run_in_the_host_fallback_with_the_same_results() {
    let r = probe(&["tasks", "0"], &[("OMP_TARGET_OFFLOAD", "DISABLED")]);
    r.assert_ok("host");
    assert_eq!(r.get("second_ran_on"), "host", "{}", r.describe());
}

#[test]
fn with_no_helper_threads_tasks_run_when_spawned() {
    let r = probe(&["tasks", "0"], &[("OFFLOAD_TASK_THREADS", "0")]);
    r.assert_ok("device");
}

#[test]
fn a_launch_from_a_helper_thread_says_so_and_has_its_own_track() {
    let trace = std::env::temp_dir().join(format!("offload-tasks-{}.json", std::process::id()));
    let r = probe(
        &["tasks", "0"],
        &[
            ("OFFLOAD_INFO", "1"),
            (
                "OFFLOAD_PROFILE",
                trace.to_str().expect("a UTF-8 temp path"),
            ),
        ],
    );
    r.assert_ok("device");
    assert!(
        r.lines("offload: launch")
            .iter()
            .any(|l| l.contains(" in task thread offload-task-")),
        "{}",
        r.describe()
    );
    let json = std::fs::read_to_string(&trace).expect("the trace");
    let _ = std::fs::remove_file(&trace);
    assert!(
        json.contains("\"name\":\"thread_name\"") && json.contains("{\"name\":\"offload-task-"),
        "{json}"
    );
}

#[test]
fn a_launch_from_a_task_its_waiting_or_spawning_thread_runs_says_which_task() {
    // No helpers: each task runs on the thread that spawns it, here the probe's main thread.
    let r = probe(
        &["tasks", "0"],
        &[("OFFLOAD_INFO", "1"), ("OFFLOAD_TASK_THREADS", "0")],
    );
    r.assert_ok("device");
    let launches = r.lines("offload: launch");
    assert!(
        launches
            .iter()
            .any(|l| l.contains(" in task ") && l.ends_with(" on thread main")),
        "{}",
        r.describe()
    );
    // A launch outside any task says nothing of tasks.
    assert!(
        launches.iter().any(|l| !l.contains(" in task")),
        "{}",
        r.describe()
    );
}

#[target(teams_distribute_parallel_for, num_teams(2), thread_limit(2))]
fn scale(k: u32, y: &mut [u32]) {
    for i in 0..y.len() {
        y[i] *= k;
    }
}

#[target]
fn where_am_i() -> bool {
    offload::omp_is_initial_device()
}

#[target]
fn check(k: u32) -> u32 {
    if k > 2 {
        panic!("k is too large: {k}");
    }
    k
}

#[test]
fn many_forgotten_region_tasks_have_all_run_when_the_scope_returns() {
    let mut ys: Vec<Vec<u32>> = (0..64).map(|i| vec![i; 100]).collect();
    task_scope(|s| {
        for y in ys.iter_mut() {
            std::mem::forget(nowait_scale(s, 3, y));
        }
    });
    for (i, y) in ys.iter().enumerate() {
        assert!(y.iter().all(|&v| v == 3 * i as u32), "task {i}");
    }
}

#[test]
fn a_region_task_that_fails_is_an_error_and_one_nobody_took_panics_the_scope() {
    let e = task_scope(|s| nowait_check(s, 7).wait()).unwrap_err();
    assert!(
        offload_tests::says(&e.to_string(), "k is too large: 7"),
        "{e}"
    );
    let p = std::panic::catch_unwind(|| task_scope(|s| drop(nowait_check(s, 8))))
        .expect_err("nothing fails silently");
    let msg = p.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(
        msg.contains("nobody took") && msg.contains("check"),
        "{msg}"
    );
}

#[test]
fn a_task_runs_on_its_spawning_threads_default_device() {
    let on_device = task_scope(|s| nowait_where_am_i(s).wait().unwrap());
    assert!(!on_device || offload::omp_get_num_devices() == 0);
    let host = omp_get_initial_device();
    let saved = offload::omp_get_default_device();
    omp_set_default_device(host);
    let on_host = task_scope(|s| nowait_where_am_i(s).wait().unwrap());
    omp_set_default_device(saved);
    assert!(
        on_host,
        "the task ran where its spawner's default device is"
    );
}

#[test]
fn tasks_hold_data_environments_of_their_own() {
    let mut y = vec![1u32; 256];
    task_scope(|s| {
        for part in y.chunks_mut(64) {
            drop(s.spawn(move || {
                offload::target_data!(map(tofrom: part) => {
                    scale(2, part);
                    scale(5, part);
                });
            }));
        }
    });
    assert!(y.iter().all(|&v| v == 10));
}

/// Two launches on one device at once: each kernel says it started, then waits (a bounded while) for the other's
/// word. Run one after the other, the first gives up; side by side (host-elf, gpu-sim's streams), both see the other.
#[target]
fn meet(flags: &[AtomicU32], me: usize) -> bool {
    flags[me].store(1, Ordering::Release);
    let mut spins = 0u64;
    while flags[1 - me].load(Ordering::Acquire) == 0 {
        spins += 1;
        if spins > 200_000_000 {
            return false;
        }
        core::hint::spin_loop();
    }
    true
}

#[test]
fn two_tasks_run_their_launches_on_one_device_side_by_side() {
    if offload_tests::default_device_is_gpu() {
        // One launch at a time per GPU in this version (a stream or queue per device).
        return;
    }
    let mut flags = [AtomicU32::new(0), AtomicU32::new(0)];
    let met = offload::target_data!(map(tofrom: flags) => {
        task_scope(|s| {
            let a = nowait_meet(s, flags, 0);
            let b = nowait_meet(s, flags, 1);
            (a.wait().unwrap(), b.wait().unwrap())
        })
    });
    assert_eq!(met, (true, true), "both kernels ran at once");
}

/// Meets the other kernel (as `meet`), then panics naming itself.
#[target]
fn meet_and_fail(flags: &[AtomicU32], me: usize) {
    if meet(flags, me) {
        panic!("kernel {me} failed after meeting");
    }
}

#[test]
fn two_launches_that_fail_together_each_report_their_own_panic() {
    if offload_tests::default_device_is_gpu() {
        return;
    }
    let mut flags = [AtomicU32::new(0), AtomicU32::new(0)];
    let (a, b) = offload::target_data!(map(tofrom: flags) => {
        task_scope(|s| {
            let a = nowait_meet_and_fail(s, flags, 0);
            let b = nowait_meet_and_fail(s, flags, 1);
            (a.wait().unwrap_err().to_string(), b.wait().unwrap_err().to_string())
        })
    });
    assert!(a.contains("kernel 0 failed after meeting"), "{a}");
    assert!(b.contains("kernel 1 failed after meeting"), "{b}");
}
