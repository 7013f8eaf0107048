//! Runs regions under whatever environment the test gives it (OMP_TARGET_OFFLOAD, OMP_DEFAULT_DEVICE,
//! OFFLOAD_PLUGINS, ...) and prints what happened, one `key=value` per line, for tests/policy.rs to check.

use offload::{
    omp_get_default_device, omp_get_initial_device, omp_get_num_devices, omp_set_default_device,
};
use offload_tests::kernels::{double, sum_from, try_scale_on};
use offload_tests::ran_on;

/// A region defined in a binary.
#[offload::target]
fn negate(y: &mut [i64]) -> bool {
    for v in y.iter_mut() {
        *v = -*v;
    }
    offload::omp_is_initial_device()
}

/// Adds `big[0]` to every element of `y`; `big` is large enough that its device copy may not fit.
#[offload::target]
fn bump_with(y: &mut [i64], big: &[i64]) -> bool {
    for v in y.iter_mut() {
        *v += big[0];
    }
    offload::omp_is_initial_device()
}

/// A loop asking for more threads per team than any host this runs on has (for tests/observability.rs).
#[offload::target(teams_distribute_parallel_for, thread_limit(4096), if(on_device))]
fn wide(on_device: bool, y: &mut [i64]) {
    for i in 0..y.len() {
        y[i] += 1;
    }
}

/// The same loop asking for one thread per team: it gets what it asks.
#[offload::target(teams_distribute_parallel_for, thread_limit(1), if(on_device))]
fn narrow(on_device: bool, y: &mut [i64]) {
    for i in 0..y.len() {
        y[i] += 1;
    }
}

/// Fills `n` elements through a device pointer.
#[offload::target]
fn fill_ptr(p: offload::DevicePtr<i64>, n: usize) {
    // SAFETY: the caller allocated `n` elements for `p`.
    let s = unsafe { p.as_slice_mut(n) };
    for (i, v) in s.iter_mut().enumerate() {
        *v = i as i64 * 2;
    }
}

fn scaled(y: &[i64], factor: i64) -> bool {
    y.iter().enumerate().all(|(i, &v)| v == i as i64 * factor)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let scenario = args.next().unwrap_or_default();
    let device: i32 = args.next().and_then(|s| s.parse().ok()).unwrap_or(0);
    println!("num_devices={}", omp_get_num_devices());
    println!("initial_device={}", omp_get_initial_device());
    println!("default_device={}", omp_get_default_device());
    let mut y: Vec<i64> = (0..100).collect();
    println!("y_addr={:#x}", y.as_ptr() as usize);
    match scenario.as_str() {
        "double" => {
            println!("ran_on={}", ran_on(double(&mut y)));
            println!("results_correct={}", scaled(&y, 2));
        }
        // A region inside a data environment that also updates the host copy: every kind of present-table change
        // and transfers from three constructs (for tests/observability.rs).
        "data-env" => {
            offload::target_data!(map(tofrom: y) => {
                println!("ran_on={}", ran_on(double(y)));
                offload::target_update!(from: y);
            });
            println!("results_correct={}", scaled(&y, 2));
        }
        "tasks" => {
            // A region as a task on the default device, another on `device`, and host code as a task, in one scope.
            let mut z: Vec<i64> = (0..y.len() as i64).collect();
            let (a, b, sum) = offload::task_scope(|s| {
                let ta = offload_tests::kernels::nowait_double(s, &mut y);
                let tb = offload_tests::kernels::nowait_scale_on(s, device, &mut z);
                let tc = s.spawn(|| (0..10i64).sum::<i64>());
                (ta.wait(), tb.wait(), tc.wait())
            });
            // A 'static task nobody waits for until it has ended: a helper thread runs it.
            let helper = offload::spawn(|| {
                let mut w: Vec<i64> = (0..100).collect();
                double(&mut w);
                w
            });
            while !helper.is_finished() {
                std::thread::yield_now();
            }
            let w = helper.wait().expect("the 'static task");
            // And one call outside any task.
            let mut v: Vec<i64> = (0..10).collect();
            double(&mut v);
            println!("ran_on={}", ran_on(a.expect("double, as a task")));
            println!("second_ran_on={}", ran_on(b.expect("scale_on, as a task")));
            let sum = sum.expect("the host task");
            println!(
                "results_correct={}",
                scaled(&y, 2) && scaled(&z, 3) && scaled(&w, 2) && scaled(&v, 2) && sum == 45
            );
        }
        // Many launches, for processes whose `OFFLOAD_INFO` lines share one pipe (tests/observability.rs).
        "repeat" => {
            let ok = (0..device.max(1)).all(|_| {
                let mut z = y.clone();
                ran_on(double(&mut z)) == "device" && scaled(&z, 2)
            });
            println!("results_correct={ok}");
        }
        "bin-region" => {
            println!("ran_on={}", ran_on(negate(&mut y)));
            println!("results_correct={}", scaled(&y, -1));
        }
        "set-default" => {
            omp_set_default_device(device);
            println!("default_device_now={}", omp_get_default_device());
            println!("ran_on={}", ran_on(double(&mut y)));
            println!("results_correct={}", scaled(&y, 2));
        }
        "device" => match try_scale_on(device, &mut y) {
            Ok(initial) => {
                println!("ran_on={}", ran_on(initial));
                println!("results_correct={}", scaled(&y, 3));
            }
            Err(e) => {
                println!("error={e}");
                println!("results_unchanged={}", scaled(&y, 1));
            }
        },
        // Parallel launches back to back, on the device and in the host fallback, with a different initial value
        // each time: the host's team threads are reused from one launch to the next and must carry nothing over.
        "parallel-launches" => {
            let total: i64 = y.iter().sum();
            let wrong = (0..200)
                .filter(|&k| sum_from(k % 2 == 0, k, &y) != k + total)
                .count();
            println!("results_correct={}", wrong == 0);
        }
        // Device memory is limited (OFFLOAD_HOST_MEMORY) so that `big` cannot be copied while `small` is present:
        // the region must fail rather than compute on the stale host copy of `small`.
        "alloc-fails-with-present-data" => {
            let mut small = vec![1i64; 16];
            let big = vec![1i64; 1 << 18];
            offload::target_data!(map(tofrom: small) => {
                small[0] = 100; // host only: the device copy stays 1
                let r = try_bump_with(small, &big);
                println!("failed={}", r.is_err());
                if let Err(e) = r {
                    println!("error={e}");
                }
            });
            println!(
                "host_copy_kept_device_result={}",
                small.iter().all(|&v| v == 1)
            );
            // Nothing present: the same failure is a region that could not start, run on the host.
            let mut alone = vec![1i64; 16];
            let on_host = bump_with(&mut alone, &big);
            println!(
                "alone_falls_back={}",
                on_host && alone.iter().all(|&v| v == 2)
            );
        }
        // Host launches that get fewer threads than their `thread_limit` asks, on the device and in the host
        // fallback, and one that gets what it asks (for tests/observability.rs).
        "wide" => {
            wide(true, &mut y);
            wide(false, &mut y);
            narrow(true, &mut y);
            narrow(false, &mut y);
            println!(
                "hardware_threads={}",
                std::thread::available_parallelism().map_or(1, |n| n.get())
            );
            println!(
                "results_correct={}",
                y.iter().enumerate().all(|(i, &v)| v == i as i64 + 4)
            );
        }
        // OpenMP V&V's test_target_is_device_ptr: memory from omp_target_alloc on the default device, filled by a
        // region that takes it as a device pointer, checked after a copy to the host.
        "is-device-ptr" => {
            let dev = omp_get_default_device();
            println!("default_is_initial={}", dev == omp_get_initial_device());
            let n = 16;
            let raw = offload::omp_target_alloc(n * 8, dev);
            println!("alloc_ok={}", !raw.is_null());
            match offload::DeviceBuffer::from_slice(&[1i64, 2, 3], dev) {
                Ok(b) => println!("buffer={:?}", b.to_vec().unwrap()),
                Err(e) => println!("buffer_error={e}"),
            }
            // SAFETY: `n` i64 of `dev`'s memory, freed below.
            let p = unsafe { offload::DevicePtr::<i64>::from_raw(raw, dev) };
            match try_fill_ptr(p, n) {
                Ok(()) => {
                    let mut out = vec![0i64; n];
                    let host = omp_get_initial_device();
                    // SAFETY: both ranges hold `n` i64.
                    let rc = unsafe {
                        offload::omp_target_memcpy(
                            out.as_mut_ptr().cast(),
                            raw,
                            n * 8,
                            0,
                            0,
                            host,
                            dev,
                        )
                    };
                    println!(
                        "region_correct={}",
                        rc == 0 && out.iter().enumerate().all(|(i, &v)| v == i as i64 * 2)
                    );
                }
                Err(e) => println!("region_error={e}"),
            }
            // SAFETY: from omp_target_alloc on `dev`, no longer used.
            unsafe { offload::omp_target_free(raw, dev) };
        }
        other => panic!("unknown scenario {other:?}"),
    }
}
