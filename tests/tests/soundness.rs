//! Soundness on the host-elf device: what a region uses stays alive and aligned for the whole launch, failures never
//! leave mappings behind or compute on stale host data, and absurd clauses or environments are clamped, not obeyed.

mod common;

use common::probe;
use core::sync::atomic::{AtomicU32, Ordering};
use offload::{declare_target, omp_target_is_present, target, target_data};

fn present<T>(y: &[T]) -> bool {
    omp_target_is_present(y.as_ptr().cast(), 0)
}

/// Tells the host it has started (`flag[0]`), waits for `flag[1]`, then reads the present copy of `x` it was given
/// through a zero-length section.
#[target(map(to: x[0..0]))]
fn hold(flag: &[AtomicU32], x: &[f64]) -> f64 {
    flag[0].store(1, Ordering::Release);
    while flag[1].load(Ordering::Acquire) == 0 {
        core::hint::spin_loop();
    }
    x[0] + x[1] + x[2]
}

// Finding 1: a zero-length section of present data runs on the present copy; the region holds a reference on it, so
// another thread's exit cannot free it under the kernel, and the region's own exit frees it exactly once.
#[test]
fn a_zero_length_section_keeps_the_present_copy_alive_for_the_whole_launch() {
    if !offload_tests::copies_run_beside_kernels() {
        return;
    }
    // Atomics are used in place: the region and the host share the flags.
    let flag: Vec<AtomicU32> = (0..2).map(|_| AtomicU32::new(0)).collect();
    let flag = &flag[..];
    let x = vec![1.0f64, 2.0, 4.0, 8.0];
    std::thread::scope(|s| {
        let xs = &x[..];
        let h = {
            let x = xs;
            target_data!(map(to: x) => {
                let h = s.spawn(move || hold(flag, xs));
                while flag[0].load(Ordering::Acquire) == 0 {
                    std::thread::yield_now();
                }
                h
            })
            // The data region is over while the kernel still reads `x`'s device copy.
        };
        // Malloc reuses the block the present copy had if it was freed: fill the heap with other data.
        let noise: Vec<Vec<f64>> = (0..64).map(|_| vec![-1.0; 12]).collect();
        flag[1].store(1, Ordering::Release);
        assert_eq!(
            h.join().expect("the region"),
            7.0,
            "the region read freed memory"
        );
        drop(noise);
    });
    assert!(!present(&x), "the region's exit released the copy it held");
}

#[declare_target]
#[repr(C, align(128))]
#[derive(Clone, Copy)]
pub struct Wide {
    pub v: [f64; 16],
}

#[target]
fn misalignment(x: &[Wide]) -> u64 {
    x.as_ptr() as usize as u64 % 128
}

// Finding 6: device copies honour the element type's alignment (the huge-page path starts at a 2 MiB boundary,
// so a 64-byte header put every large block 64 bytes off a 128-byte alignment).
#[test]
fn device_slices_are_aligned_for_their_element_type() {
    for n in [1usize, 3, 40_000] {
        let x = vec![Wide { v: [1.0; 16] }; n];
        assert_eq!(misalignment(&x), 0, "{n} elements");
    }
}

// Finding 9 (and 12): a launch with absurd geometry neither panics between mapping and unmapping nor leaves its
// data mapped; it runs with teams clamped to the device's maximum.
#[target(teams_distribute_parallel_for, num_teams(teams), thread_limit(4))]
fn add_all(teams: u64, y: &mut [u32]) {
    for i in 0..y.len() {
        y[i] += 1;
    }
}

#[target(teams_distribute_parallel_for, num_teams(teams), reduction(+: s), if(on_device))]
fn count_all(on_device: bool, teams: u64, y: &[u32]) -> u64 {
    let mut s = 0;
    for i in 0..y.len() {
        s += y[i] as u64;
    }
    s
}

#[test]
fn absurd_team_counts_are_clamped_and_leave_nothing_mapped() {
    let mut y = vec![1u32; 1000];
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| add_all(u64::MAX, &mut y)));
    assert!(!present(&y), "the launch left its data mapped");
    assert!(r.is_ok(), "num_teams is an upper bound, not a demand");
    assert!(y.iter().all(|&v| v == 2));
    assert_eq!(count_all(true, u64::MAX, &y), 2000);
    assert_eq!(
        count_all(false, u64::MAX, &y),
        2000,
        "the host fallback clamps too"
    );
}

#[target(map(to: x))]
fn sum_section(x: &[u64]) -> u64 {
    x.iter().sum()
}

#[target(map(to: x[lo..hi]))]
fn sum_part(lo: usize, hi: usize, x: &[u64]) -> u64 {
    x[lo..hi].iter().sum()
}

// Finding 13: two threads reading one buffer, one through a section, the other whole: neither fails because of the
// other's short-lived mapping (the whole slice, overlapping the section without lying in it, gets a private copy).
#[test]
fn shared_read_only_data_is_never_refused_because_of_another_threads_section() {
    let x: Vec<u64> = (0..4096).collect();
    let whole: u64 = x.iter().sum();
    let part: u64 = x[100..200].iter().sum();
    // Deterministic first: a section is present, the whole slice is read by a region.
    target_data!(map(to: x[100..200]) => {
        assert_eq!(sum_section(x), whole);
        assert_eq!(sum_part(100, 200, x), part);
        assert!(!omp_target_is_present(x.as_ptr().cast(), 0), "the private copy is not entered");
    });
    std::thread::scope(|s| {
        let a = s.spawn(|| {
            (0..300)
                .filter(|_| offload_try_part(&x) != Ok(part))
                .count()
        });
        let b = s.spawn(|| {
            (0..300)
                .filter(|_| offload_try_whole(&x) != Ok(whole))
                .count()
        });
        assert_eq!(a.join().unwrap() + b.join().unwrap(), 0);
    });
    assert!(!present(&x));
}

fn offload_try_part(x: &[u64]) -> Result<u64, String> {
    try_sum_part(100, 200, x).map_err(|e| e.to_string())
}

fn offload_try_whole(x: &[u64]) -> Result<u64, String> {
    try_sum_section(x).map_err(|e| e.to_string())
}

// Finding 8: a device allocation that fails while another argument's current copy is on the device is a failure of
// the region, never a host fallback on stale host data.
#[test]
fn an_allocation_failure_with_present_data_fails_the_region() {
    let r = probe(
        &["alloc-fails-with-present-data"],
        &[("OFFLOAD_HOST_MEMORY", "1048576")],
    );
    assert!(r.out.status.success(), "{}", r.describe());
    assert_eq!(r.get("failed"), "true", "{}", r.describe());
    assert_eq!(
        r.get("host_copy_kept_device_result"),
        "true",
        "{}",
        r.describe()
    );
    assert_eq!(r.get("alone_falls_back"), "true", "{}", r.describe());
}

// Finding 14: -1 (omp_initial_device) as the default device means the host, from the environment and from
// omp_set_default_device alike; a huge OFFLOAD_HOST_DEVICES is clamped with a message.
#[test]
fn the_initial_device_as_default_device_is_the_host() {
    let env = [
        ("OMP_TARGET_OFFLOAD", "MANDATORY"),
        ("OMP_DEFAULT_DEVICE", "-1"),
    ];
    let r = probe(&["double"], &env);
    r.assert_ok("host");
    let r = probe(
        &["set-default", "-1"],
        &[("OMP_TARGET_OFFLOAD", "MANDATORY")],
    );
    r.assert_ok("host");
    let r = probe(
        &["set-default", "1"],
        &[("OMP_TARGET_OFFLOAD", "MANDATORY")],
    );
    r.assert_ok("host");
}

#[test]
fn a_huge_host_device_count_is_clamped() {
    let r = probe(&["double"], &[("OFFLOAD_HOST_DEVICES", "10000000000")]);
    r.assert_ok("device");
    let n: i32 = r.get("num_devices").parse().unwrap();
    assert!((1..=64).contains(&n), "{}", r.describe());
    assert!(
        r.stderr().contains("OFFLOAD_HOST_DEVICES"),
        "{}",
        r.describe()
    );
}

// Finding 15: the profile keeps at most a bounded number of events and says how many it dropped.
#[test]
fn the_profile_is_bounded_and_counts_what_it_dropped() {
    let path = std::env::temp_dir().join(format!("offload-bounded-{}.json", std::process::id()));
    let p = path.to_str().unwrap();
    let r = probe(
        &["parallel-launches"],
        &[("OFFLOAD_PROFILE", p), ("OFFLOAD_PROFILE_MAX_EVENTS", "50")],
    );
    assert!(r.out.status.success(), "{}", r.describe());
    let trace: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let _ = std::fs::remove_file(&path);
    let events = trace["traceEvents"].as_array().unwrap();
    let complete = events.iter().filter(|e| e["ph"] == "X").count();
    assert!(complete <= 50, "{complete} events kept");
    let dropped = trace["otherData"]["dropped_events"]
        .as_u64()
        .expect("a dropped count");
    assert!(dropped > 0);
    assert_eq!(
        r.lines("offload: OFFLOAD_PROFILE").len(),
        1,
        "said once on stderr: {}",
        r.describe()
    );
}
