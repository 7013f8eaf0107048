//! One coherence model for host data across the host and every device: which copies of a host range are current
//! (the host's, each device's) is known in one place, and no construct computes on, or copies back, a stale copy;
//! host atomics are never copied, but used in place. Each test is an outside user's program that lost updates
//! before, written as safe code; with two devices where it needs them (the test runs itself again with
//! `OFFLOAD_HOST_DEVICES=2` when it starts on one host-elf device).

use core::sync::atomic::{AtomicU32, Ordering};
use offload::{declare_target, omp_get_num_devices, omp_target_is_present, target, target_data};

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
