//! OpenMP data environments on the host-elf device (CONFORMANCE 9-16, 22): reference counts decide every copy, so
//! each test changes the host or device copy where a wrong implementation would copy and checks that it did not.

use core::sync::atomic::{AtomicU64, Ordering};
use offload::{
    omp_get_mapped_ptr, omp_target_alloc, omp_target_associate_ptr, omp_target_disassociate_ptr,
    omp_target_free, omp_target_is_present, omp_target_memcpy, target, target_data,
    target_enter_data, target_exit_data, target_update,
};
use std::ffi::c_void;

mod leaving;

const HOST: i32 = 1; // omp_get_initial_device() with the one host-elf device

#[target]
fn inc(y: &mut [i64]) {
    for v in y.iter_mut() {
        *v += 1;
    }
}

#[target]
fn first(y: &[i64]) -> i64 {
    y[0]
}

fn present(y: &[i64]) -> bool {
    omp_target_is_present(y.as_ptr().cast(), 0)
}

// 9. Inside a data region, regions copy nothing; the host copy changes only at the end.
#[test]
fn regions_inside_a_data_region_copy_nothing() {
    let mut y = vec![1i64; 64];
    target_data!(map(tofrom: y) => {
        assert!(present(y));
        y[0] = 100; // host copy only: not copied in again
        inc(y);
        assert_eq!(y[0], 100, "no copy back after the region");
        // DESIGN promises both spellings compile on a re-bound name.
        #[allow(clippy::needless_borrow)]
        inc(&mut y);
        assert_eq!(first(y), 3, "the device copy never saw 100");
    });
    assert!(!present(&y));
    assert!(
        y.iter().all(|&v| v == 3),
        "copied back at the end: {}",
        y[1]
    );
}

// 10. Nested data regions: only the outermost entry copies in, only the outermost exit copies out.
#[test]
fn nested_data_regions_copy_at_the_outermost_level_only() {
    let mut y = vec![5i64; 16];
    target_data!(map(tofrom: y) => {
        y[0] = 50;
        target_data!(map(tofrom: y) => {
            inc(y);
        });
        assert_eq!(y[0], 50, "the inner exit copied nothing out");
        assert_eq!(first(y), 6, "the inner entry copied nothing in");
    });
    assert_eq!(y[0], 6);
}

// 11. `always` copies although the data is present.
#[test]
fn always_forces_the_copy() {
    let mut y = vec![0i64; 8];
    target_data!(map(tofrom: y) => {
        y[0] = 41;
        target_data!(map(always, to: y) => {});
        inc(y);
        assert_eq!(y[0], 41);
        target_data!(map(always, from: y) => {});
        assert_eq!(y[0], 42, "always from copied out mid-region");
    });
}

// 12. target_update!: to after a host change, from mid-region.
#[test]
fn updates_refresh_either_copy_inside_a_region() {
    let mut y = vec![0i64; 32];
    target_data!(map(tofrom: y) => {
        y.iter_mut().for_each(|v| *v = 7);
        target_update!(to: y);
        inc(y);
        assert_eq!(y[0], 7);
        target_update!(from: y);
        assert!(y.iter().all(|&v| v == 8));
        // A section updates only its range.
        inc(y);
        target_update!(from: y[4..8]);
        assert_eq!(&y[2..10], &[8, 8, 9, 9, 9, 9, 8, 8]);
    });
    // Data that is not mapped: nothing happens.
    let mut z = vec![3i64; 4];
    target_update!(from: z);
    target_update!(to: z, device(0));
    assert_eq!(z, [3; 4]);
}

// 13. enter/exit round-trips; delete removes the mapping.
#[test]
fn enter_and_exit_data_round_trip() {
    let v: Vec<i64> = (0..100).collect();
    let mut m = target_enter_data!(map(to: v));
    assert!(present(&m));
    inc(&mut m);
    inc(&mut m);
    assert_eq!(m[10], 10, "the host copy is untouched while mapped");
    let v = target_exit_data!(map(from: m));
    assert!(v.iter().enumerate().all(|(i, &x)| x == i as i64 + 2));
    assert!(!present(&v));

    let b: Box<[i64]> = vec![9; 10].into_boxed_slice();
    let mut m = target_enter_data!(map(alloc: b));
    m[0] = 1;
    inc(&mut m);
    let b = target_exit_data!(map(delete: m));
    assert_eq!(b[0], 1, "delete copies nothing");
    assert!(!present(&b), "the mapping is gone");
}

#[test]
fn a_dropped_mapping_is_released_without_copying() {
    let v = vec![1i64; 10];
    let addr = v.as_ptr() as usize;
    let mut m = target_enter_data!(map(to: v));
    inc(&mut m);
    drop(m);
    assert!(!omp_target_is_present(addr as *const c_void, 0));
}

#[test]
fn several_buffers_enter_at_once() {
    let (a, b) = (vec![1i64; 4], vec![2i64; 4]);
    let (mut ma, mut mb) = target_enter_data!(map(to: a, b), device(0));
    assert_eq!((ma.device(), mb.device()), (Some(0), Some(0)));
    inc(&mut ma);
    inc(&mut mb);
    let (a, b) = target_exit_data!(map(from: ma), map(release: mb));
    assert_eq!((a[0], b[0]), (2, 2), "release copies nothing back");
}

// 14. present: fine when mapped, an error (naming the variable, its line, address and size) when not, under every
// policy.
const NEEDS_PRESENT_LINE: u32 = line!() + 2;
#[target(map(present, to: x))]
fn needs_present(x: &[i64]) -> i64 {
    x.iter().sum()
}

#[test]
fn present_is_checked() {
    let x = vec![2i64; 5];
    let err = try_needs_present(&x).expect_err("x is not mapped");
    let msg = err.to_string();
    assert!(
        msg.contains(&format!(
            "region data_env::needs_present cannot map its data on {}",
            offload_tests::default_device_name()
        )),
        "{msg}"
    );
    assert!(
        msg.contains(&format!(
            "host address {:#x}, 40 bytes",
            x.as_ptr() as usize
        )),
        "{msg}"
    );
    // The variable and where it is written, as libomptarget's `HstPtrName` gives them.
    assert!(
        msg.contains(&format!("`x` ({}:{NEEDS_PRESENT_LINE}): ", file!())),
        "{msg}"
    );
    target_data!(map(to: x) => {
        assert_eq!(needs_present(x), 10);
    });
    // On the host there is nothing to be present: always satisfied.
    assert_eq!(try_needs_present_on(HOST, &x).unwrap(), 10);
}

#[target(map(present, to: x), device(dev))]
fn needs_present_on(dev: i32, x: &[i64]) -> i64 {
    x.iter().sum()
}

#[test]
fn present_in_a_data_construct_panics_with_the_address() {
    let x = vec![0u8; 3];
    let p = std::panic::catch_unwind(|| target_data!(map(present, to: x) => {}))
        .expect_err("not mapped");
    let msg = p.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(
        msg.contains(&format!(
            "offload: target_data! on {}: `present` data is not mapped",
            offload_tests::default_device_name()
        )),
        "{msg}"
    );
    assert!(
        msg.contains(&format!("{:#x}, 3 bytes", x.as_ptr() as usize)),
        "{msg}"
    );
}

// 15. release drops one reference (here the only one); the mapping table unit tests cover several.
#[test]
fn release_drops_the_dynamic_reference() {
    let v = vec![4i64; 4];
    let m = target_enter_data!(map(to: v));
    let v = target_exit_data!(map(release: m));
    assert!(!present(&v));
}

// 16. Sections map and transfer only their range; the region still sees the whole slice.
#[target(map(tofrom: y[2..6]))]
fn bump_middle(y: &mut [i64]) -> usize {
    for v in &mut y[2..6] {
        *v += 10;
    }
    y[0] = -1; // outside the section: the host never sees it
    y.len()
}

#[test]
fn sections_map_only_their_range() {
    let mut y: Vec<i64> = (0..10).collect();
    assert_eq!(bump_middle(&mut y), 10, "the region keeps the full length");
    assert_eq!(y, [0, 1, 12, 13, 14, 15, 6, 7, 8, 9]);

    // Only the section is present, and mapping more than it extends the mapping: an error.
    target_data!(map(tofrom: y[0..4]) => {
        assert!(omp_target_is_present(y.as_ptr().cast(), 0));
        assert!(!omp_target_is_present(y[4..].as_ptr().cast(), 0));
        let err = try_inc(y).expect_err("whole slice extends the section");
        assert!(err.to_string().contains("OpenMP does not allow extending a mapping"), "{err}");
    });
}

// 22 (the part without device-pointer parameters). omp_get_mapped_ptr, omp_target_alloc/memcpy/associate.
#[test]
fn device_memory_api() {
    let y = vec![1i64; 8];
    assert!(omp_get_mapped_ptr(y.as_ptr().cast(), 0).is_null());
    assert_eq!(
        omp_get_mapped_ptr(y.as_ptr().cast(), HOST),
        y.as_ptr() as *mut c_void
    );
    target_data!(map(to: y) => {
        let d = omp_get_mapped_ptr(y.as_ptr().cast(), 0);
        assert!(!d.is_null() && d != y.as_ptr() as *mut c_void, "a separate device copy");
        let mut back = [0i64; 8];
        let rc = unsafe { omp_target_memcpy(back.as_mut_ptr().cast(), d, 64, 0, 0, HOST, 0) };
        assert_eq!((rc, back), (0, [1; 8]));
    });

    // Associate user-allocated device memory with a host buffer: regions use it as is.
    let mut host = vec![0i64; 4];
    let dmem = omp_target_alloc(32, 0);
    assert!(!dmem.is_null());
    let init = [10i64, 20, 30, 40];
    unsafe {
        assert_eq!(
            omp_target_memcpy(dmem, init.as_ptr().cast(), 32, 0, 0, 0, HOST),
            0
        );
        assert_eq!(
            omp_target_associate_ptr(host.as_ptr().cast(), dmem, 32, 0, 0),
            0
        );
    }
    inc(&mut host);
    assert_eq!(host, [0; 4], "present: nothing copied");
    let mut out = [0i64; 4];
    unsafe {
        assert_eq!(
            omp_target_memcpy(out.as_mut_ptr().cast(), dmem, 32, 0, 0, HOST, 0),
            0
        );
        assert_eq!(
            out,
            [11, 21, 31, 41],
            "the region worked in the associated memory"
        );
        assert_eq!(omp_target_disassociate_ptr(host.as_ptr().cast(), 0), 0);
        assert_ne!(omp_target_disassociate_ptr(host.as_ptr().cast(), 0), 0);
        omp_target_free(dmem, 0);
    }
    assert!(!omp_target_is_present(host.as_ptr().cast(), 0));
}

// 27. Many host threads, one device, shared mapped data: no update lost, no deadlock.
#[target]
fn count(hits: &[AtomicU64], y: &mut [i64]) {
    hits[0].fetch_add(1, Ordering::Relaxed);
    for v in y.iter_mut() {
        *v += 1;
    }
}

#[test]
fn many_threads_share_the_device() {
    const THREADS: usize = 8;
    const ROUNDS: usize = 200;
    let hits = [AtomicU64::new(0)];
    let start = std::time::Instant::now();
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let hits = &hits;
            s.spawn(move || {
                let mut own = vec![t as i64; 100];
                for r in 0..ROUNDS {
                    if r % 3 == 0 {
                        target_data!(map(tofrom: own) => { count(hits, own); });
                    } else {
                        count(hits, &mut own);
                    }
                }
                assert!(own.iter().all(|&v| v == (t + ROUNDS) as i64), "thread {t}");
            });
        }
    });
    assert_eq!(
        hits[0].load(Ordering::Relaxed),
        (THREADS * ROUNDS) as u64,
        "lost updates"
    );
    assert!(!omp_target_is_present(hits.as_ptr().cast(), 0));
    assert!(
        start.elapsed() < std::time::Duration::from_secs(60),
        "took {:?}",
        start.elapsed()
    );
}

// 22. Device memory passed as is (OpenMP's is_device_ptr); such regions never fall back to the host.
use offload::{DeviceBuffer, DevicePtr};

#[target]
fn scale_buffer(k: i64, buf: &mut DeviceBuffer<i64>) -> i64 {
    for v in buf.iter_mut() {
        *v *= k;
    }
    buf.len() as i64
}

/// In a work-shared loop a `&mut DeviceBuffer<T>` is a view, as a `&mut [T]` is.
#[target(teams_distribute_parallel_for, num_teams(3))]
fn square_buffer(buf: &mut DeviceBuffer<i64>) {
    for i in 0..buf.len() {
        buf[i] *= buf[i];
    }
}

#[target(if(on_device), device(dev))]
fn sum_buffer(on_device: bool, dev: i32, buf: &DeviceBuffer<i64>) -> i64 {
    buf.iter().sum()
}

#[target]
fn fill_raw(p: DevicePtr<i64>, n: usize) {
    // SAFETY: the test allocated `n` elements for this pointer.
    let s = unsafe { p.as_slice_mut(n) };
    for (i, v) in s.iter_mut().enumerate() {
        *v = 100 + i as i64;
    }
}

#[test]
fn device_memory_is_passed_as_is_and_never_falls_back() {
    let mut buf = DeviceBuffer::from_slice(&[1i64, 2, 3], 0).unwrap();
    assert_eq!(scale_buffer(10, &mut buf), 3);
    assert_eq!(buf.to_vec().unwrap(), [10, 20, 30]);
    assert_eq!(sum_buffer(true, 0, &buf), 60);
    square_buffer(&mut buf);
    assert_eq!(buf.to_vec().unwrap(), [100, 400, 900]);

    let err = try_sum_buffer(false, 0, &buf).expect_err("no host fallback for device memory");
    assert!(
        err.to_string().contains(
            "takes device memory and could not run on its device: the if clause is false"
        ),
        "{err}"
    );
    let err = try_sum_buffer(true, 5, &buf).expect_err("device 5 does not exist");
    assert!(err.to_string().contains("device 5 does not exist"), "{err}");

    let raw = omp_target_alloc(4 * 8, 0);
    // SAFETY: 4 i64 of device 0's memory, freed below.
    let p = unsafe { DevicePtr::<i64>::from_raw(raw, 0) };
    fill_raw(p, 4);
    let mut out = [0i64; 4];
    unsafe {
        assert_eq!(
            omp_target_memcpy(out.as_mut_ptr().cast(), raw, 32, 0, 0, HOST, 0),
            0
        );
        omp_target_free(raw, 0);
    }
    assert_eq!(out, [100, 101, 102, 103]);
    assert!(DeviceBuffer::<i64>::new(4, 7).is_err(), "no device 7");
}

#[test]
fn unwinding_out_of_a_data_region_releases_without_copying() {
    let mut y = vec![1i64; 8];
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        target_data!(map(tofrom: y) => {
            inc(y);
            panic!("the block fails");
        })
    }));
    assert!(r.is_err());
    assert_eq!(y, [1; 8], "no copy back on unwind");
    assert!(!present(&y), "released");

    // Leaving by `return` or `?` is a normal exit: it copies back.
    assert_eq!(leaving::early(&mut y), None);
    assert_eq!(y, [2; 8]);
}

// The block runs in a closure, called at once inside the guards (nothing can suspend it between the entry and the
// exit); what leaves the block does what it says once the closure has returned, the exit running on the way out.
#[test]
fn return_question_mark_break_and_continue_leave_a_data_region_through_its_exit() {
    let mut y = vec![1i64; 4];
    assert_eq!(leaving::ret(&mut y, true), -1, "returned from the function");
    assert_eq!((y[0], present(&y)), (2, false), "copied back and released");
    assert_eq!(leaving::ret(&mut y, false), 3, "the block's value");

    // `?` converts the error as everywhere, in the block and in `assert_eq!`'s arguments.
    let mut y = vec![2i64; 4];
    assert!(leaving::parse(&mut y, "x").is_err());
    assert_eq!((y[0], present(&y)), (3, false));
    assert_eq!(leaving::parse(&mut y, "2").unwrap(), 6);

    // `break` and `continue`, unlabeled and labeled, to loops around the construct.
    let mut y = vec![0i64; 4];
    let mut seen = Vec::new();
    'rounds: for round in 0..10 {
        target_data!(map(tofrom: y) => {
            inc(y);
            if round == 1 {
                continue;
            }
            if round == 3 {
                break 'rounds;
            }
            seen.push(round);
        });
        assert!(!present(&y));
    }
    assert_eq!((seen, y[0], present(&y)), (vec![0, 2], 4, false));
    // A labeled block's value, from a loop inside the block; and a loop's value.
    let found = 'found: {
        for k in 0..4 {
            target_data!(map(tofrom: y) => {
                inc(y);
                for v in y.iter() {
                    if k == 2 && *v > 0 {
                        break 'found first(y);
                    }
                }
            });
        }
        -1
    };
    assert_eq!((found, y[0], present(&y)), (7, 7, false));
    let mut k = 0;
    let last = loop {
        k += 1;
        target_data!(map(tofrom: y) => {
            inc(y);
            if k == 2 {
                break first(y);
            }
        });
    };
    assert_eq!((last, y[0]), (9, 9));

    // Through nested data regions: both exit.
    let (mut y, x) = (vec![0i64; 4], vec![1i64, 2]);
    assert_eq!(leaving::nested(&mut y, &x, 9), None);
    assert_eq!((y[0], present(&y), present(&x)), (1, false, false));
    assert_eq!(leaving::nested(&mut y, &x, 2), Some(3));
    assert_eq!((y[0], present(&y), present(&x)), (4, false, false));

    // A closure's `return` inside the block is the closure's own.
    let r = target_data!(map(to: x) => {
        let abs = |v: i64| {
            if v > 0 {
                return v;
            }
            -v
        };
        abs(-3) + abs(x[1])
    });
    assert_eq!(r, 5);
}

// Review finding 3: an `.await` inside the block, even one another macro writes, is a compile error
// (tests/ui/target_data_await*.rs), since the block runs in a closure; a data region inside an `async` block runs whole
// within one poll, so a future forgotten at an `.await` around it leaves nothing mapped.
#[test]
fn a_data_region_inside_an_async_block_runs_whole_between_its_awaits() {
    use leaving::{poll, Yield};
    use std::task::Poll;
    let mut v = vec![1i64; 8];
    let mut fut = Box::pin(async {
        Yield(false).await;
        let r = target_data!(map(tofrom: v) => {
            inc(v);
            assert!(present(v));
            first(v)
        });
        Yield(false).await;
        r
    });
    assert!(poll(fut.as_mut()).is_pending(), "at the first `.await`");
    assert!(
        poll(fut.as_mut()).is_pending(),
        "at the second, after the data region"
    );
    std::mem::forget(fut);
    assert_eq!(
        (v[0], present(&v)),
        (2, false),
        "the exit ran before the future stopped"
    );
    // And polled to the end.
    let mut fut = Box::pin(async {
        Yield(false).await;
        target_data!(map(tofrom: v) => {
            inc(v);
            first(v)
        })
    });
    assert!(poll(fut.as_mut()).is_pending());
    assert_eq!(poll(fut.as_mut()), Poll::Ready(3));
    drop(fut);
    assert_eq!((v[0], present(&v)), (3, false));
}

#[target(map(to: x[8..10]))]
fn second_to_last(x: &[i64]) -> i64 {
    x[8]
}

#[test]
fn a_read_only_region_slice_larger_than_the_present_allocation_gets_a_private_copy() {
    let y: Vec<i64> = (0..10).collect();
    let tail = &y[8..];
    target_data!(map(to: tail) => {
        // Present: y[8..10]; the region forms all of `y` on the device, beyond that allocation. It only reads, so
        // it gets a private copy of its own (the host copy is current: nothing can have written the device's).
        assert_eq!(second_to_last(&y), 8);
        assert!(!omp_target_is_present(y.as_ptr().cast(), 0), "the private copy is not entered");
        assert!(omp_target_is_present(tail.as_ptr().cast(), 0));
    });
    assert_eq!(
        second_to_last(&y),
        8,
        "fine when nothing smaller is present"
    );
}

#[test]
fn delete_leaves_an_associated_pointer_alone() {
    let v = vec![3i64; 4];
    let dmem = omp_target_alloc(32, 0);
    unsafe {
        assert_eq!(
            omp_target_associate_ptr(v.as_ptr().cast(), dmem, 32, 0, 0),
            0
        )
    };
    let addr = v.as_ptr();
    let m = target_enter_data!(map(to: v));
    let v = m.exit_delete();
    assert!(omp_target_is_present(addr.cast(), 0), "still associated");
    unsafe {
        assert_eq!(omp_target_disassociate_ptr(v.as_ptr().cast(), 0), 0);
        omp_target_free(dmem, 0);
    }
}

#[target(map(tofrom: y[0..n]))]
fn head_len(n: usize, y: &mut [i64]) -> i64 {
    y[0]
}

#[test]
fn a_zero_length_section_of_present_data_sees_the_device_copy() {
    let mut y = vec![5i64; 4];
    target_data!(map(tofrom: y) => {
        y[0] = 99; // host copy only
        assert_eq!(head_len(1, y), 5);
        assert_eq!(head_len(0, y), 5, "zero-length: the present copy, not fresh storage");
    });
}

#[test]
fn a_data_region_in_a_destructor_during_an_unwind_copies_back() {
    let r = std::panic::catch_unwind(|| {
        let _guard = leaving::CopiesBackOnDrop(vec![0; 4]);
        panic!("unwinding");
    });
    assert!(r.is_err());
}

// Issue 14: OpenMP's `to` governs only the copy-in. On a mutable source the host may write a `to` variable inside
// the block; the device sees the write only after `target_update!(to: ..)`, and nothing is copied back.
#[target]
fn read_scalar(k: &i64) -> i64 {
    *k
}

#[test]
fn the_host_writes_a_to_variable_and_updates_the_device_copy() {
    let mut x = vec![1i64; 8];
    target_data!(map(to: x) => {
        x[0] = 10; // host copy only
        assert_eq!(first(x), 1, "the device keeps the copy made at the entry");
        target_update!(to: x);
        assert_eq!(first(x), 10, "target_update!(to:) refreshed it");
        x[0] += 10;
        inc(&mut x); // a region writing the present copy: the block's exit copies nothing back
    });
    assert_eq!(
        x,
        [20, 1, 1, 1, 1, 1, 1, 1],
        "the host's writes stay; the device's are discarded"
    );
    assert!(!present(&x));

    // A `&mut` source needs no `let mut`, and may be passed to `&mut` parameters as is.
    let mut v = vec![2i64; 4];
    let r = &mut v;
    target_data!(map(to: r) => {
        inc(r);
        assert_eq!(first(r), 3);
        r[0] = 7;
        target_update!(to: r[0..1]);
        assert_eq!(first(r), 7);
    });
    assert_eq!(v, [7, 2, 2, 2]);

    // A scalar.
    let mut k = 5i64;
    target_data!(map(to: k) => {
        *k = 6;
        assert_eq!(read_scalar(k), 5);
        target_update!(to: k);
        assert_eq!(read_scalar(k), 6);
    });
    assert_eq!(k, 6);

    // An immutable source stays readable as before.
    let y = vec![4i64; 2];
    target_data!(map(to: y) => {
        assert_eq!(first(y), 4);
        // Both spellings compile on a shared re-binding too.
        #[allow(clippy::needless_borrow)]
        let via_ref = first(&y);
        assert_eq!(via_ref, 4);
    });
}

// A region may write a `to`-mapped array: it writes the device copy, and the writes are discarded at the exit.
#[target(map(to: y))]
fn scribble(y: &mut [i64]) -> i64 {
    for v in y.iter_mut() {
        *v = -1;
    }
    y.len() as i64
}

#[test]
fn a_region_writing_a_to_array_leaves_the_host_copy_alone() {
    let mut y = vec![3i64; 4];
    assert_eq!(scribble(&mut y), 4);
    assert_eq!(
        y, [3; 4],
        "map(to:): the device's writes are not copied back"
    );
    target_data!(map(to: y) => {
        scribble(&mut y);
        assert_eq!(first(y), -1, "the region wrote the present copy");
    });
    assert_eq!(
        y, [3; 4],
        "the data region's exit copies nothing back either"
    );
    target_data!(map(tofrom: y) => {
        scribble(y);
    });
    assert_eq!(
        y, [-1; 4],
        "under tofrom the present copy's contents come back at the data region's exit"
    );
}

// target_enter_data! takes a single boxed `DeviceCopy` value, as well as Vec<T> and Box<[T]>.
#[offload::declare_target]
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Params {
    pub a: i64,
    pub b: i64,
}

#[target]
fn product(p: &Params) -> i64 {
    p.a * p.b
}

#[target]
fn double_params(p: &mut Params) {
    p.a *= 2;
    p.b *= 2;
}

#[test]
fn enter_data_takes_a_boxed_struct_and_exit_data_takes_its_device() {
    let b = Box::new(Params { a: 6, b: 7 });
    let mut m = target_enter_data!(map(to: b), device(0));
    m.a = 100; // the host copy only
    assert!(omp_target_is_present((&*m as *const Params).cast(), 0));
    assert_eq!(product(&m), 42, "the device copy made at the entry");
    double_params(&mut m);
    let b: Box<Params> = target_exit_data!(map(from: m), device(0));
    assert_eq!(*b, Params { a: 12, b: 14 });
}

#[test]
fn exit_data_on_another_device_than_the_entry_is_an_error() {
    let v = vec![1i64; 4];
    let m = target_enter_data!(map(to: v));
    let p = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _ = target_exit_data!(map(release: m), device(HOST));
    }))
    .expect_err("entered on device 0");
    let msg = p.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(
        msg.contains("target_exit_data! names device 1, but the data was entered on device 0"),
        "{msg}"
    );
}

// Device memory of the initial device is host memory, under every policy (omp_target_alloc's too).
#[test]
fn device_memory_on_the_initial_device_is_host_memory() {
    for host in [HOST, offload::OMP_INITIAL_DEVICE] {
        let mut buf = DeviceBuffer::from_slice(&[1i64, 2, 3], host).unwrap();
        assert_eq!(buf.device(), HOST);
        assert_eq!(buf.to_vec().unwrap(), [1, 2, 3]);
        buf.copy_from_host(&[4, 5, 6]).unwrap();
        let mut out = [0i64; 3];
        buf.copy_to_host(&mut out).unwrap();
        assert_eq!(out, [4, 5, 6]);
        // SAFETY: host memory of three i64, not otherwise in use while the slice lives.
        let s = unsafe { buf.as_device_ptr().as_slice_mut(3) };
        assert_eq!(s, [4, 5, 6], "the initial device's memory is the host's");
    }
    let atomics = DeviceBuffer::from_slice(&[AtomicU64::new(9)], HOST).unwrap();
    assert_eq!(atomics.to_vec().unwrap()[0].load(Ordering::Relaxed), 9);
    assert!(DeviceBuffer::<u8>::new(0, HOST).unwrap().is_empty());
}

// A device-memory region on the initial device runs on the host, as clang runs an is_device_ptr region's host
// version: the region call (`__private::call`, its request's `device_memory`) runs the host body the `#[target]`
// expansion (macros/src/region/) emits for device-memory regions.
#[test]
fn a_device_memory_region_on_the_initial_device_runs_on_the_host() {
    let buf = DeviceBuffer::from_slice(&[1i64, 2, 3], HOST).unwrap();
    assert_eq!(sum_buffer(true, HOST, &buf), 6);
}

#[target]
fn total(y: &[i64]) -> i64 {
    y.iter().sum()
}

/// `f(x)` inside `target_data!(map(to: x))` for a region `f(x: &mut [T])`: the region writes the device
/// copy, later regions read its writes, and the exit discards them; the host's `x` is never written, whether it was
/// declared `let mut` or `let`, on the device and on the host (`if(false)`).
#[test]
fn a_region_passed_a_to_variable_writes_the_device_copy_and_the_exit_discards_it() {
    for on_device in [true, false] {
        let mut m = vec![1i64; 16];
        let v = vec![10i64; 16];
        target_data!(map(to: m), map(to: v), if(on_device) => {
            inc(m);
            inc(v);
            inc(v);
            // Later regions see the writes; the block's host code sees the host copy (the view's own), which on a
            // device no region call copies back into while the data is present.
            assert_eq!((total(m), total(v)), (32, 192));
            assert_eq!(m[0], if on_device { 1 } else { 2 });
            assert_eq!(v, [if on_device { 10i64 } else { 12 }; 16]);
            assert_eq!(omp_target_is_present(v.as_ptr().cast(), 0), on_device);
            // Read by several threads at once, as a `&[T]` is.
            std::thread::scope(|s| {
                let a = s.spawn(|| total(v));
                let b = s.spawn(|| total(v));
                assert_eq!((a.join().unwrap(), b.join().unwrap()), (192, 192));
            });
        });
        assert_eq!(m, [1i64; 16], "on_device {on_device}");
        assert_eq!(v, [10i64; 16], "on_device {on_device}");
        assert!(!present(&m) && !present(&v));
        m[0] = 0; // still the user's `let mut`
    }
}

#[target(map(to: y[2..6]))]
fn middle(y: &[i64]) -> i64 {
    y[2..6].iter().sum()
}

/// A section: the view's copy is mapped as the section was, and regions given the view see the same elements.
#[test]
fn a_to_section_passed_on_writes_its_device_copy() {
    let x: Vec<i64> = (0..8).collect();
    target_data!(map(to: x[2..6]) => {
        assert_eq!(bump_middle(x), 8);
        assert_eq!(bump_middle(x), 8);
        assert!(present(&x[2..6]));
        // The writes stay in the device copy: the call found the section present.
        assert_eq!(middle(x), 2 + 3 + 4 + 5 + 4 * 20);
        assert_eq!(x[2..6], [2, 3, 4, 5]);
    });
    assert_eq!(x, (0..8).collect::<Vec<i64>>());
}

/// What else a block that passes a `to` slice on may do with it, as with the `&[T]` it stands for.
#[test]
fn a_to_slice_passed_on_compares_nests_and_iterates_as_a_slice() {
    let x = vec![3i64; 4];
    let y = vec![3i64; 4];
    let want = vec![3i64; 4];
    target_data!(map(to: x), map(to: y) => {
        assert_eq!(total(x), 12);
        assert_eq!(want, x);
        assert_eq!(&want[..], x);
        assert!(x == y);
        target_data!(map(to: x) => {
            assert_eq!(total(x), 12);
        });
        target_update!(to: x);
    });
    // Moved whole (`for v in x`): re-bound `&[T]` as before, so both uses compile.
    target_data!(map(to: x) => {
        assert_eq!(total(x), 12);
        let mut n = 0;
        for v in x {
            n += v;
        }
        assert_eq!(n, 12);
    });
}

/// A `to` slice present before the construct: its device copy may be newer than the host's, so a private copy made
/// from the host's would lose the device's writes. Passing it on to a `&mut` parameter is refused, saying what to
/// write, and the data stays mapped as it was.
#[test]
fn a_present_to_slice_passed_on_to_a_mut_parameter_is_refused() {
    let v = vec![1i64; 4];
    let mut m = target_enter_data!(map(to: v));
    inc(&mut m); // the device copy is [2; 4], the host's [1; 4]
    let err = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        target_data!(map(to: m) => {
            assert_eq!(total(m), 8);
            inc(m);
        })
    }))
    .expect_err("a stale private copy");
    let msg = err
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| err.downcast_ref::<String>().cloned())
        .unwrap_or_default();
    assert!(
        msg.contains("already present on the device") && msg.contains("&mut x"),
        "{msg}"
    );
    assert!(present(&m));
    let back = target_exit_data!(map(from: m));
    assert_eq!(back, [2i64; 4]);
}
