//! One coherence model for host data across the host and every device: which copies of a host range are current
//! (the host's, each device's) is known in one place, and no construct computes on, or copies back, a stale copy;
//! host atomics are never copied, but used in place. Each test is an outside user's program that lost updates
//! before, written as safe code; with two devices where it needs them (the test runs itself again with
//! `OFFLOAD_HOST_DEVICES=2` when it starts on one host-elf device).

use core::sync::atomic::{AtomicU32, Ordering};
use offload::{
    declare_target, omp_get_num_devices, omp_target_is_present, target, target_data, target_update,
    Error,
};
use offload_tests::{on_two_devices, with_device};

/// Spins until `secs` seconds have passed since `t0` (region code has no sleep).
#[declare_target]
fn wait_until(t0: f64, secs: f64) {
    while offload::omp_get_wtime() - t0 < secs {
        core::hint::spin_loop();
    }
}

/// Adds one to every element, then keeps running for `secs` seconds.
#[target]
fn bump_then_linger(a: &[AtomicU32], secs: f64) {
    let t0 = offload::omp_get_wtime();
    for e in a {
        e.fetch_add(1, Ordering::Relaxed);
    }
    wait_until(t0, secs);
}

// Finding 1: thread A ran a region on all four atomics; while it ran, this thread ran one on `a[0..2]` that ended
// last, and its exit copied back only its own part and freed the device copy: A's increments of `a[2..4]` were lost
// (`[2, 2, 0, 0]`). Atomics are used in place now: every increment lands, whatever the timing.
#[test]
fn a_region_on_part_of_shared_atomics_keeps_the_others_increments() {
    let a: Vec<AtomicU32> = (0..4).map(|_| AtomicU32::new(0)).collect();
    let a = &a[..];
    std::thread::scope(|s| {
        let whole = s.spawn(|| bump_then_linger(a, 0.3));
        std::thread::sleep(std::time::Duration::from_millis(100));
        bump_then_linger(&a[0..2], 0.6);
        whole.join().expect("the region on all of them");
    });
    let now: Vec<u32> = a.iter().map(|e| e.load(Ordering::Relaxed)).collect();
    assert_eq!(now, [2, 2, 1, 1], "every increment reaches the host");
    assert!(!omp_target_is_present(a.as_ptr().cast(), 0) || omp_get_num_devices() == 0);
}

#[target]
fn add_one_at_0(a: &[AtomicU32]) {
    a[0].fetch_add(1, Ordering::Relaxed);
}

// Finding 2: thread A held `target_data!(map(to: a))`; B's region added 1 to `a[0]`; then C, which never offloads,
// added 100 to `a[1]` on the host; A's exit stored the device copy over the host's and reverted C's increments.
#[test]
fn host_updates_of_atomics_survive_a_data_regions_exit() {
    let a: Vec<AtomicU32> = (0..4).map(|_| AtomicU32::new(0)).collect();
    let a = &a[..];
    let (entered_tx, entered_rx) = std::sync::mpsc::channel();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    std::thread::scope(|s| {
        let done_tx = done_tx;
        s.spawn(move || {
            target_data!(map(to: a) => {
                entered_tx.send(()).expect("the test waits");
                done_rx.recv().expect("the test says when");
            });
        });
        entered_rx.recv().expect("the data region began");
        s.spawn(|| add_one_at_0(a)).join().expect("B's region");
        s.spawn(|| {
            for _ in 0..100 {
                a[1].fetch_add(1, Ordering::Relaxed);
            }
        })
        .join()
        .expect("C's host increments");
        done_tx.send(()).expect("the data region waits");
    });
    let now: Vec<u32> = a.iter().map(|e| e.load(Ordering::Relaxed)).collect();
    assert_eq!(
        now,
        [1, 100, 0, 0],
        "neither the device's nor the host's update is lost"
    );
}

#[target]
fn set_all(y: &mut [u32], v: u32) {
    for e in y.iter_mut() {
        *e = v;
    }
}

#[target]
fn add_one(y: &mut [u32]) {
    for e in y.iter_mut() {
        *e += 1;
    }
}

#[target(teams_distribute_parallel_for, reduction(+: s))]
fn sum(y: &[u32]) -> u64 {
    let mut s = 0u64;
    for i in 0..y.len() {
        s += y[i] as u64;
    }
    s
}

// Finding 4: inside `target_data!(map(tofrom: y), device(0))` a region on device 0 set `y` to 7; a region on device 1
// over `y` copied in the host's stale 0s, and its update was overwritten when the data region ended (`y[0] = 7`
// where sequential Rust gives 8); a reduction on device 1 over `&y` returned 0 where the current values sum to 448.
// Now device 1 never computes on a stale copy: the call fails naming device 0, which holds the current data; a
// stale copy is refreshed before a region uses it; and the data region's exit never stores a stale copy over a
// newer one.
#[test]
fn a_second_device_never_computes_on_a_stale_copy() {
    if on_two_devices("a_second_device_never_computes_on_a_stale_copy") {
        return;
    }
    if omp_get_num_devices() < 2 {
        eprintln!("skipped: needs two devices");
        return;
    }
    let mut y = vec![0u32; 64];
    target_data!(map(tofrom: y), device(0) => {
        set_all_on(0, y, 7);
        // A reduction on device 1 over the data device 0 changed: refused, naming device 0 (the host's copy, which
        // device 1's would be made from, is stale).
        let e = try_sum_on(1, y).expect_err("device 1 would sum the host's stale copy");
        assert!(e.to_string().contains("copy on device 0"), "{e}");
        // A region on device 1 that writes it: refused too.
        let e = try_add_one_on(1, y).expect_err("device 1 would start from the host's stale copy");
        assert!(e.to_string().contains("copy on device 0"), "{e}");
        // What the error says to do: bring device 0's data to the host; then device 1 may use it.
        target_update!(from: y);
        try_add_one_on(1, y).expect("the host is current again");
        // Device 1's result reached the host, so device 0's copy is stale: a region there refreshes it first.
        assert_eq!(try_sum_on(0, y).expect("device 0 refreshed"), 8 * 64);
        set_all_on(1, y, 9);
    });
    assert_eq!(
        y, [9; 64],
        "the data region's exit keeps device 1's last update"
    );
}

fn set_all_on(d: i32, y: &mut [u32], v: u32) {
    with_device(d, || set_all(y, v))
}

fn try_sum_on(d: i32, y: &[u32]) -> Result<u64, Error> {
    with_device(d, || try_sum(y))
}

fn try_add_one_on(d: i32, y: &mut [u32]) -> Result<(), Error> {
    with_device(d, || try_add_one(y))
}

// Finding 5: the same data region, then a region on `device(5)` (no such device) or after
// `omp_set_default_device(5)`: it ran in the host fallback on the host's stale copy and returned `Ok`, and its update
// was lost at the data region's exit. Now it fails, naming the device that holds the current data.
#[test]
fn an_absent_device_never_runs_the_fallback_on_a_stale_copy() {
    if omp_get_num_devices() == 0 {
        // With no device the host's copy is the only one.
        return;
    }
    // Under MANDATORY the absent device's call fails for that first; `if(false)` asks for the host all the same.
    let mandatory =
        std::env::var("OMP_TARGET_OFFLOAD").is_ok_and(|p| p.eq_ignore_ascii_case("mandatory"));
    let mut y = vec![0u32; 16];
    target_data!(map(tofrom: y), device(0) => {
        set_all_on(0, y, 7);
        let absent = omp_get_num_devices() + 4;
        let e = try_add_one_on(absent, y).expect_err("the host copy is stale");
        assert!(e.to_string().contains("copy on device 0") || mandatory, "{e}");
        let e = try_add_one_on_if_false(y).expect_err("the host copy is stale");
        assert!(e.to_string().contains("copy on device 0"), "{e}");
    });
    assert_eq!(y, [7; 16], "device 0's values, no lost update");
    // With the host current again, the host fallback runs, and its result stays: device 0's copy, made stale by it,
    // is refreshed before a region there uses it, and never copied back over it.
    let mut z = vec![1u32; 16];
    target_data!(map(tofrom: z), device(0) => {
        try_add_one_on_if_false(z).expect("the host is current");
        add_one_on(0, z);
    });
    assert_eq!(z, [3; 16]);
    if !mandatory {
        try_add_one_on(omp_get_num_devices() + 4, &mut z).expect("the fallback");
        assert_eq!(z, [4; 16]);
    }
}

fn add_one_on(d: i32, y: &mut [u32]) {
    with_device(d, || add_one(y))
}

#[target(if(cond))]
fn add_one_if(y: &mut [u32], cond: bool) {
    for e in y.iter_mut() {
        *e += 1;
    }
}

fn try_add_one_on_if_false(y: &mut [u32]) -> Result<(), Error> {
    try_add_one_if(y, false)
}
