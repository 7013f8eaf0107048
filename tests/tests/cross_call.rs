//! APIs whose safety spans several calls: a launch's team-shared memory is handed out
//! under one atomic element type, the first `team_shared` call's, and a later call with another type fails the
//! region instead of viewing the same bytes at two widths (a mixed-size race, undefined in Rust). Each region runs
//! on the default device (host-elf, or gpu-sim under `OFFLOAD_PLUGINS=gpu-sim`) and in the host fallback.
//! (`#[derive(Mapper)]` on a struct that implements `Drop` is a compile error: tests/ui/mapper_impl_drop.rs.)

use core::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering::Relaxed};
use offload::{barrier, declare_target, omp_get_thread_num, target, team_shared};
use offload_tests::default_device_name;

/// Team-shared memory as one 64-bit counter. In a function of its own, so the macro cannot see which types the
/// region's calls use: only the run-time check can.
#[declare_target]
fn add_wide(v: u64) -> u64 {
    team_shared(1, |w: &[AtomicU64]| w[0].fetch_add(v, Relaxed))
}

/// The same memory's first byte.
#[declare_target]
fn read_narrow() -> u8 {
    team_shared(1, |b: &[AtomicU8]| b[0].load(Relaxed))
}

/// The first call fixes `AtomicU64`; the second asks for `AtomicU8`, so every thread fails at it.
#[target(teams, parallel, num_teams(2), thread_limit(2), if(on_device))]
fn wide_then_narrow(on_device: bool, seen: &[AtomicU32]) {
    add_wide(1);
    let b = read_narrow();
    seen[0].store(b as u32 + 1, Relaxed);
}

/// The threads of a team ask for different types at once: whichever claims the memory first, the other fails (the
/// check itself must not race).
#[target(teams, parallel, num_teams(2), thread_limit(2), if(on_device))]
fn racing_types(on_device: bool, seen: &[AtomicU32]) {
    let b = if omp_get_thread_num() % 2 == 0 {
        add_wide(1) as u32
    } else {
        read_narrow() as u32
    };
    seen[0].store(b + 1, Relaxed);
}

/// One type throughout, over several calls and a barrier: allowed.
#[target(teams, parallel, num_teams(2), thread_limit(2), if(on_device))]
fn one_type(on_device: bool, sums: &[AtomicU64]) {
    add_wide(1);
    barrier();
    let total = add_wide(0);
    sums[offload::omp_get_team_num() as usize].store(total, Relaxed);
}

/// Another launch is another memory: it may pick another type.
#[target(teams, parallel, num_teams(1), thread_limit(2), if(on_device))]
fn narrow_only(on_device: bool, seen: &[AtomicU32]) {
    seen[0].fetch_add(read_narrow() as u32 + 1, Relaxed);
}

fn fallback_failure(f: impl FnOnce() + std::panic::UnwindSafe) -> String {
    let p = std::panic::catch_unwind(f).expect_err("the host fallback fails");
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

/// The message names both types and says what to do. On the host devices and in the fallback it carries the
/// panic's text; gpu-sim's panic record keeps it too; a GPU's says only where (`offload_tests::says`).
fn names_both(msg: &str) {
    assert!(
        [
            "offload::team_shared",
            "`AtomicU64`",
            "`AtomicU8`",
            "one element type"
        ]
        .iter()
        .all(|text| offload_tests::says(msg, text)),
        "{msg}"
    );
}

#[test]
fn a_second_element_type_fails_the_region() {
    let seen = [AtomicU32::new(0)];
    let err = try_wide_then_narrow(true, &seen)
        .expect_err("AtomicU8 after AtomicU64 in one launch fails the region")
        .to_string();
    assert!(
        err.contains(&format!(
            "wide_then_narrow failed on {}",
            default_device_name()
        )),
        "{err}"
    );
    names_both(&err);
    names_both(&fallback_failure(|| wide_then_narrow(false, &seen)));
    assert_eq!(
        seen[0].load(Relaxed),
        0,
        "no thread read the bytes as AtomicU8"
    );
}

#[test]
fn threads_asking_for_two_types_at_once_fail_the_region() {
    let seen = [AtomicU32::new(0)];
    // A team may get one thread (a one-core host): then only the even threads' type is ever asked for.
    let threads = offload_tests::team_limit(true).min(2);
    let r = try_racing_types(true, &seen);
    if threads >= 2 {
        names_both(&r.expect_err("two types in one team").to_string());
    }
    if offload_tests::team_limit(false) >= 2 {
        names_both(&fallback_failure(|| racing_types(false, &seen)));
    }
}

#[test]
fn one_type_over_several_calls_and_launches_is_fine() {
    for on_device in [true, false] {
        let sums = [AtomicU64::new(0), AtomicU64::new(0)];
        one_type(on_device, &sums);
        let m = if on_device {
            offload_tests::team_limit(true)
        } else {
            offload_tests::team_limit(false)
        }
        .min(2) as u64;
        assert_eq!(
            sums.iter().map(|s| s.load(Relaxed)).collect::<Vec<_>>(),
            [m, m],
            "on_device {on_device}"
        );
        // The next launch's memory is fresh, and unclaimed.
        let seen = [AtomicU32::new(0)];
        narrow_only(on_device, &seen);
        assert!(seen[0].load(Relaxed) >= 1, "on_device {on_device}");
    }
}
