//! Which copy is current: a present mapping records whether its device copy may be newer than the host
//! copy and which running regions use it, so no construct reads a stale copy, writes a copy a running region reads,
//! or loses a region's writes to shared atomics. Each test is an outside user's program that raced or lost data
//! before: on a device the construct is now refused with an error (or its result is the current data's), in the
//! host fallback (no device) it computes on the host's data, which is then current.

use core::sync::atomic::{AtomicU32, Ordering};
use offload::{
    omp_get_mapped_ptr, omp_get_num_devices, omp_target_is_present, omp_target_memcpy, target,
    target_data, target_update, Mapper,
};
use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Whether `y` is mapped on device 0 (with no device, device 0 is the host, where everything is "present").
fn present<T>(y: &[T]) -> bool {
    on_device() && omp_target_is_present(y.as_ptr().cast(), 0)
}

fn on_device() -> bool {
    omp_get_num_devices() > 0
}

/// A flag pair shared by the host and a region: `[started, go]`. The region sees the device copy of the flags when
/// they are mapped (`dflag`, its device address), the host's otherwise (the fallback).
struct Flags<'a> {
    host: &'a [AtomicU32],
    dflag: usize,
}

impl Flags<'_> {
    fn device_word(&self, k: usize) -> u32 {
        let mut v = 0u32;
        let host = offload::omp_get_initial_device();
        // SAFETY: `dflag` is the device copy of a mapped `[AtomicU32; 2]`; `v` is 4 writable bytes.
        let rc = unsafe {
            omp_target_memcpy(
                (&mut v as *mut u32).cast(),
                self.dflag as *const c_void,
                4,
                0,
                4 * k,
                host,
                0,
            )
        };
        assert_eq!(rc, 0);
        v
    }

    fn wait_started(&self) {
        while if self.dflag == 0 {
            self.host[0].load(Ordering::Acquire)
        } else {
            self.device_word(0)
        } == 0
        {
            std::thread::yield_now();
        }
    }

    fn go(&self) {
        self.host[1].store(1, Ordering::Release);
        if self.dflag != 0 {
            let one = 1u32;
            let host = offload::omp_get_initial_device();
            // SAFETY: as above; the region reads the flag with atomic loads, and the copy is an aligned 4-byte store
            // into memory the region only reads.
            let rc = unsafe {
                omp_target_memcpy(
                    self.dflag as *mut c_void,
                    (&one as *const u32).cast(),
                    4,
                    4,
                    0,
                    0,
                    host,
                )
            };
            assert_eq!(rc, 0);
        }
    }
}

#[target]
fn set_all(y: &mut [u32], v: u32) {
    for e in y.iter_mut() {
        *e = v;
    }
}

/// Reads `x[0]`, says it started, waits for `go`, reads `x[0]` again: the two reads of data it holds by `&[u32]`.
#[target]
fn read_twice(flag: &[AtomicU32], x: &[u32]) -> u64 {
    let before = x[0];
    flag[0].store(1, Ordering::Release);
    while flag[1].load(Ordering::Acquire) == 0 {
        core::hint::spin_loop();
    }
    ((before as u64) << 32) | x[0] as u64
}

#[target(map(always, to: x))]
fn always_to(x: &[u32]) -> u32 {
    x[0]
}

/// Runs `read_twice` on another thread over `x`, whose device copy (7) is newer than the host's (0), and calls `act`
/// while it runs; returns the two values the region read and what `act` returned.
fn under_a_running_region<R>(act: impl FnOnce(&[u32]) -> R) -> ((u32, u32), R) {
    let mut flag: Vec<AtomicU32> = (0..2).map(|_| AtomicU32::new(0)).collect();
    let mut x = vec![0u32; 4];
    let mut out = None;
    target_data!(map(tofrom: flag, x) => {
        set_all(x, 7);
        let dflag = omp_get_mapped_ptr(flag.as_ptr().cast(), 0) as usize;
        let flags = Flags { host: flag, dflag };
        let (flag, xs): (&[AtomicU32], &[u32]) = (flag, x);
        std::thread::scope(|s| {
            let h = s.spawn(move || read_twice(flag, xs));
            flags.wait_started();
            let r = act(xs);
            flags.go();
            let v = h.join().expect("the region");
            out = Some((((v >> 32) as u32, v as u32), r));
        });
    });
    assert!(!present(&x) && !present(&flag), "everything was released");
    assert_eq!(x, [7; 4], "the device's values came back");
    out.expect("ran")
}

// Finding 2: `target_update!(to: x)` needs only `&x`, yet wrote the device copy a region on another thread was
// reading through its `&[u32]` (it saw 7, then 0). Now the update is refused while the region runs.
#[test]
fn an_update_to_under_a_running_region_is_refused() {
    if !offload_tests::copies_run_beside_kernels() {
        return;
    }
    let (seen, r) = under_a_running_region(|xs| {
        catch_unwind(AssertUnwindSafe(|| target_update!(to: xs))).map_err(|p| {
            p.downcast_ref::<String>()
                .cloned()
                .unwrap_or_else(|| "a panic without a message".into())
        })
    });
    assert_eq!(seen, (7, 7), "the region's input changed under it");
    if on_device() {
        let e = r.expect_err("the update raced the region");
        assert!(
            e.contains("target_update!") && e.contains("running region"),
            "{e}"
        );
    } else {
        r.expect("nothing is mapped in the fallback: the update does nothing");
    }
}

// Finding 2, the region form: `map(always, to: x)` writes the present copy too.
#[test]
fn an_always_to_region_under_a_running_region_is_refused() {
    if !offload_tests::copies_run_beside_kernels() {
        return;
    }
    let (seen, r) = under_a_running_region(|xs| try_always_to(xs).map_err(|e| e.to_string()));
    assert_eq!(seen, (7, 7), "the region's input changed under it");
    if on_device() {
        let e = r.expect_err("the always copy raced the region");
        assert!(
            e.contains("always_to") && e.contains("running region"),
            "{e}"
        );
    } else {
        assert_eq!(r, Ok(7));
    }
    // With no region running, `always` copies as OpenMP says.
    let mut x = vec![0u32; 4];
    target_data!(map(tofrom: x) => {
        set_all(x, 7);
        let copied = if on_device() { 0 } else { 7 };
        assert_eq!(always_to(x), copied, "the host's values, copied again");
    });
}

#[target(map(tofrom: y[4..8]))]
fn bump_section(y: &mut [u64]) {
    for v in &mut y[4..8] {
        *v += 1;
    }
}

#[target(map(to: y[4..8]))]
fn bump_to_section(y: &mut [u64]) {
    for v in &mut y[4..8] {
        *v += 1;
    }
}

/// A mapper struct whose `&mut` field is mapped `to`: the region still writes its device copy.
#[derive(Mapper)]
struct Part<'a> {
    #[map(to)]
    y: &'a mut [u64],
}

#[target]
fn bump_part(p: Part<'_>) {
    for v in p.y.iter_mut() {
        *v += 1;
    }
}

#[target(map(to: x))]
fn total(x: &[u64]) -> u64 {
    x.iter().sum()
}

// Finding 3: a `to` map of a whole buffer while a section of it is present and was changed on the device got a
// private copy of the host's stale data (8, where the current values sum to 12, as the fallback gives).
#[test]
fn a_private_copy_of_stale_host_data_is_refused() {
    let mut y = vec![1u64; 8];
    target_data!(map(tofrom: y[4..8]) => {
        bump_section(y);
        match try_total(y) {
            Ok(s) => assert_eq!(s, 12, "computed on stale host data"),
            Err(e) => {
                assert!(on_device(), "the fallback has no stale copy: {e}");
                let e = e.to_string();
                assert!(e.contains("total") && e.contains("stale"), "{e}");
            }
        }
        // Once the host copy is current again, the private copy is what the device would show.
        target_update!(from: y[4..8]);
        assert_eq!(total(y), 12);
    });
    assert_eq!(y, [1, 1, 1, 1, 2, 2, 2, 2]);
    // A region writing a `to` section it holds by `&mut` changes the device copy too.
    let mut y = vec![1u64; 8];
    target_data!(map(tofrom: y[4..8]) => {
        bump_to_section(y);
        match try_total(y) {
            Ok(s) => assert_eq!(s, 12, "computed on stale host data"),
            Err(e) => assert!(on_device() && e.to_string().contains("stale"), "{e}"),
        }
    });
    // So does a region writing a mapper struct's `&mut` field mapped `to`.
    let mut y = vec![1u64; 8];
    target_data!(map(tofrom: y[4..8]) => {
        bump_part(Part { y: &mut y[4..8] });
        match try_total(y) {
            Ok(s) => assert_eq!(s, 12, "computed on stale host data"),
            Err(e) => assert!(on_device() && e.to_string().contains("stale"), "{e}"),
        }
    });
    // A section only read on the device keeps the private copy (soundness.rs, finding 13).
    let x = vec![1u64; 8];
    target_data!(map(to: x[4..8]) => {
        assert_eq!(total(x), 8);
    });
}

#[target]
fn add_one(a: &[AtomicU32]) {
    a[0].fetch_add(1, Ordering::Relaxed);
}

// Finding 7: while another thread held `target_data!(map(to: a))` over shared atomics, this thread's regions that
// `fetch_add` into `a` returned `Ok` and none of their increments reached the host.
#[test]
fn atomics_updated_under_another_threads_to_mapping_reach_the_host() {
    const CALLS: u32 = 100;
    let a: Vec<AtomicU32> = (0..4).map(|_| AtomicU32::new(0)).collect();
    let a = &a[..];
    let (entered_tx, entered_rx) = std::sync::mpsc::channel();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let ok = std::thread::scope(|s| {
        // Owned by the closure, so a failing assertion drops it and the data region ends instead of waiting.
        let done_tx = done_tx;
        s.spawn(move || {
            target_data!(map(to: a) => {
                entered_tx.send(()).expect("the test waits");
                done_rx.recv().expect("the test says when");
            });
        });
        entered_rx.recv().expect("the data region began");
        assert!(!present(a), "atomics are used in place, never mapped");
        let ok = (0..CALLS).filter(|_| try_add_one(a).is_ok()).count() as u32;
        done_tx.send(()).expect("the data region waits");
        ok
    });
    assert!(!present(a));
    assert_eq!(
        a[0].load(Ordering::Relaxed),
        ok,
        "{ok} calls returned Ok: each increment reaches the host or its call fails"
    );
    assert_eq!(ok, CALLS, "the calls succeed");
}
