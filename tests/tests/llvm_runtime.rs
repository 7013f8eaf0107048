//! `OFFLOAD_RUNTIME=llvm`: the fat binary's x86-64 image registered with LLVM's libomptarget, region
//! calls and data constructs going through its devices and its present table (the one C and C++ code compiled by
//! clang uses), parallel regions on the host's cores through our launch plan (teams, barriers, team-shared memory,
//! reductions, a panicking thread reported), and what does not run there yet failing with an error that says so. Every test here
//! runs under `OFFLOAD_RUNTIME=llvm`; they are skipped, saying so, where `liboffload-22-dev` is not installed
//! (`.ci/run` installs it).

use offload::{
    barrier, omp_get_initial_device, omp_get_mapped_ptr, omp_get_num_devices, omp_get_num_teams,
    omp_get_num_threads, omp_get_team_num, omp_get_thread_num, omp_target_is_present, target,
    target_data, target_enter_data, target_update, team_shared,
};
use std::sync::atomic::{AtomicU32, Ordering::Relaxed};

#[target]
fn add_one(y: &mut [i64]) {
    for v in y.iter_mut() {
        *v += 1;
    }
}

#[target(teams_distribute_parallel_for)]
fn scale(k: f32, x: &[f32], y: &mut [f32]) {
    for i in 0..y.len() {
        y[i] = k * x[i] + y[i];
    }
}

#[target(teams_distribute_parallel_for, reduction(+: s))]
fn sum(x: &[i64]) -> i64 {
    let mut s = 0;
    for i in 0..x.len() {
        s += x[i];
    }
    s
}

/// A 256-bin histogram, 1 KiB: an array reduction that combines through device memory, not team-shared slots.
#[target(teams_distribute_parallel_for, reduction(+: hist))]
fn histogram(data: &[u32]) -> [u32; 256] {
    let mut hist = [3u32; 256];
    for i in 0..data.len() {
        hist[(data[i] % 256) as usize] += 1;
    }
    hist
}

/// Which team and thread ran each iteration, and the geometry they saw.
#[target(teams_distribute_parallel_for, num_teams(2), thread_limit(1))]
fn who(team: &mut [u32], teams: &mut [u32]) {
    for i in 0..team.len() {
        team[i] = omp_get_team_num() as u32;
        teams[i] = omp_get_num_teams() as u32;
    }
}

/// Every thread of each team writes its slot of team-shared memory, waits at the barrier, and reads its neighbour's;
/// each thread stores what it read in its own element of `out`.
#[target(teams, parallel, num_teams(2), thread_limit(2))]
unsafe fn neighbours(out: &mut [u32]) {
    let (t, i, m) = (
        omp_get_team_num() as u32,
        omp_get_thread_num() as u32,
        omp_get_num_threads() as u32,
    );
    let next = team_shared(4, |slots: &[AtomicU32]| {
        slots[i as usize].store(t * 100 + i + 1, Relaxed);
        barrier();
        slots[((i + 1) % m) as usize].load(Relaxed)
    });
    // SAFETY (the region's contract): each thread writes only its own element.
    unsafe { *(out.as_ptr() as *mut u32).add((t * m + i) as usize) = next };
}

/// Writes every element, then one iteration fails.
#[target(teams_distribute_parallel_for)]
fn fails_midway(y: &mut [i64]) {
    for i in 0..y.len() {
        y[i] = -1;
        if i == y.len() / 2 {
            panic!("iteration {i} gives up");
        }
    }
}

/// Whether this process runs under `OFFLOAD_RUNTIME=llvm` with libomptarget there (the runtime reads its settings
/// before `main`, so [`under_offload_runtime_llvm`] runs these tests again in a process of their own).
fn llvm() -> bool {
    if std::env::var("OFFLOAD_RUNTIME").as_deref() != Ok("llvm") {
        return false;
    }
    match offload::__private::llvm::active() {
        Some(Ok(_)) => true,
        Some(Err(e)) => {
            eprintln!("skipped: {e}");
            false
        }
        None => panic!("OFFLOAD_RUNTIME=llvm was read as another runtime"),
    }
}

/// Runs this binary's tests again under `OFFLOAD_RUNTIME=llvm` and `OMP_TARGET_OFFLOAD=MANDATORY`.
#[test]
fn under_offload_runtime_llvm() {
    if std::env::var_os("OFFLOAD_RUNTIME").is_some() {
        return; // the child itself, or a run under the variable already
    }
    let out = offload_tests::rerun_self(
        &["--test-threads=1", "--nocapture"],
        &["OFFLOAD_INFO"],
        &[
            ("OFFLOAD_RUNTIME", "llvm"),
            ("OMP_TARGET_OFFLOAD", "MANDATORY"),
        ],
    );
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stdout}\n{stderr}");
    if stderr.contains("skipped:") {
        eprintln!("{stderr}");
    } else {
        assert!(
            stdout.contains("test result: ok. 19 passed"),
            "{stdout}\n{stderr}"
        );
    }
}

#[test]
fn the_devices_are_libomptargets() {
    if !llvm() {
        return;
    }
    let n = omp_get_num_devices();
    assert!(n >= 1, "LLVM's host plugin has devices");
    assert_eq!(
        omp_get_initial_device(),
        n,
        "OpenMP's initial device number"
    );
    // Told apart from a GPU plugin's by libomptarget's device UID: each gets the host's geometry.
    for d in 0..n {
        let info = offload::device_info(d).expect("a device of libomptarget");
        assert_eq!(info.plugin, "llvm");
        assert!(
            info.description.name.contains("host plugin"),
            "{}",
            info.description.name
        );
        assert!(info.max_threads <= std::thread::available_parallelism().unwrap().get() as u32);
    }
}

/// What C's `target enter data map(to: y[0:3])` does, through libomptarget itself: a region call then finds `y`
/// present, computes on the entered copy, and C's `target exit data map(from: ..)` brings the result back.
#[test]
fn a_region_finds_data_entered_in_libomptargets_table() {
    if !llvm() {
        return;
    }
    use offload::__private::llvm::{Map, FROM, TO};
    let Some(Ok(lib)) = offload::__private::llvm::active() else {
        unreachable!()
    };
    let mut y = vec![1i64, 2, 3];
    let whole: *mut [i64] = &mut y[..];
    // SAFETY: `y` outlives the mapping, which the exit below ends.
    unsafe { lib.enter(0, &[Map::slice_data(whole, TO)]) };
    let device_y = omp_get_mapped_ptr(y.as_ptr().cast(), 0);
    assert!(
        !device_y.is_null(),
        "entered in libomptarget's present table"
    );
    assert_ne!(
        device_y,
        y.as_mut_ptr().cast(),
        "the host plugin's own copy"
    );

    y[0] = 100; // the host copy only: present, so the call copies nothing in, and nothing out (still held)
    add_one(&mut y);
    assert_eq!(
        y[0], 100,
        "present: nothing copied back while the entry holds it"
    );
    assert_eq!(
        omp_get_mapped_ptr(y.as_ptr().cast(), 0),
        device_y,
        "the same device copy"
    );

    let whole: *mut [i64] = &mut y[..];
    // SAFETY: as above; the exit copies the device values back into `y`.
    unsafe { lib.exit(0, &[Map::slice_data(whole, FROM)]) };
    assert_eq!(y, [2, 3, 4], "the region wrote the entered copy");
    assert!(!omp_target_is_present(y.as_ptr().cast(), 0), "unmapped");
}

#[test]
fn regions_and_data_constructs_run_there() {
    if !llvm() {
        return;
    }
    let x: Vec<f32> = (0..1000).map(|i| i as f32).collect();
    let mut y = vec![1.0f32; 1000];
    scale(2.0, &x, &mut y);
    assert!(y
        .iter()
        .enumerate()
        .all(|(i, &v)| v == 2.0 * i as f32 + 1.0));

    let mut z = vec![1i64; 4];
    target_data!(map(tofrom: z) => {
        assert!(omp_target_is_present(z.as_ptr().cast(), 0));
        z[0] = 100; // the host copy only
        add_one(z);
        add_one(z);
        assert_eq!(z[0], 100, "nothing copied back inside the data region");
        target_update!(from: z);
        assert_eq!(z[..], [3, 3, 3, 3], "the device copy, which never saw 100");
        z[1] = 10;
        target_update!(to: z);
    });
    assert_eq!(z, [3, 10, 3, 3], "copied back at the end");

    let v = vec![5i64; 3];
    let mut m = target_enter_data!(map(to: v));
    add_one(&mut m);
    let v = m.exit_from();
    assert_eq!(v, [6, 6, 6]);
}

/// Integer atomics as a section: used in place, as all atomics are (nothing is mapped, so no section either).
#[target(map(to: hits[2..4]))]
fn bump_atomic_section(hits: &[AtomicU32]) {
    hits[2].fetch_add(1, Relaxed);
}

/// The same atomics passed twice: both are the host's.
#[target]
fn count_twice(a: &[AtomicU32], b: &[AtomicU32]) {
    a[0].fetch_add(1, Relaxed);
    b[0].fetch_add(1, Relaxed);
}

/// Atomics mapped `to`: the device's writes come back all the same, as on our runtime.
#[target(map(to: hits))]
fn bump_to(hits: &[AtomicU32]) {
    hits[0].fetch_add(1, Relaxed);
}

/// Sets its own flag and waits (boundedly) for the other thread's: two calls running at once on the same atomics meet.
#[target]
fn meet(flags: &[AtomicU32], me: usize) -> bool {
    flags[me].store(1, Relaxed);
    let mut spins = 0u64;
    while flags[1 - me].load(Relaxed) == 0 {
        spins += 1;
        if spins > 2_000_000_000 {
            return false;
        }
        core::hint::spin_loop();
    }
    true
}

#[target]
fn raise(flags: &[AtomicU32], me: usize) {
    flags[me].store(1, Relaxed);
}

#[target]
fn total(x: &[i64]) -> i64 {
    let mut t = 0;
    for v in x {
        t += *v;
    }
    t
}

#[offload::declare_target]
static STEP: u64 = 3;

#[target]
fn step() -> u64 {
    STEP
}

#[test]
fn atomics_are_used_in_place_by_every_call() {
    if !llvm() {
        return;
    }
    let hits = [AtomicU32::new(0)];
    count_twice(&hits, &hits);
    assert_eq!(
        hits[0].load(Relaxed),
        2,
        "the host's atomics for both arguments"
    );
    bump_to(&hits);
    assert_eq!(
        hits[0].load(Relaxed),
        3,
        "a `to` map's device writes come back"
    );
    let flags = [AtomicU32::new(0), AtomicU32::new(0)];
    let (a, b) = std::thread::scope(|s| {
        let a = s.spawn(|| meet(&flags, 0));
        let b = s.spawn(|| meet(&flags, 1));
        (a.join().unwrap(), b.join().unwrap())
    });
    assert!(
        a && b,
        "two calls on the same atomics run at once and see each other's writes: {a} {b}"
    );
}

#[test]
fn data_the_device_holds_in_part_is_copied_for_reading_and_an_error_for_writing() {
    if !llvm() {
        return;
    }
    let v = vec![1i64; 8];
    // A part mapped at the start, and one inside: a read-only region gets a copy of the whole, as on our runtime.
    for part in [&v[..4], &v[2..4]] {
        target_data!(map(to: part) => {
            assert_eq!(total(&v), 8);
        });
    }
    // A region writing it cannot: its writes would go to two copies. (C maps a part here, as safe Rust cannot.)
    use offload::__private::llvm::{Map, TO};
    let Some(Ok(lib)) = offload::__private::llvm::active() else {
        unreachable!()
    };
    let mut y = vec![1i64; 8];
    let part: *mut [i64] = &mut y[..4];
    // SAFETY: `y` outlives the mapping, which the exit below ends.
    unsafe { lib.enter(0, &[Map::slice_data(part, TO)]) };
    let e = try_add_one(&mut y).unwrap_err();
    assert!(e.to_string().contains("partly mapped"), "{e}");
    let part: *mut [i64] = &mut y[..4];
    // SAFETY: as above.
    unsafe { lib.exit(0, &[Map::slice_data(part, 0)]) };
}

#[test]
fn calls_running_at_once_on_overlapping_windows_of_one_buffer() {
    if !llvm() {
        return;
    }
    let x = vec![1i64; 1000];
    std::thread::scope(|s| {
        let a = s.spawn(|| (0..100).all(|_| total(&x[0..600]) == 600));
        let b = s.spawn(|| (0..100).all(|_| total(&x[400..1000]) == 600));
        assert!(a.join().unwrap() && b.join().unwrap());
    });
    // A data construct mapping a part while regions read the whole.
    std::thread::scope(|s| {
        s.spawn(|| {
            for _ in 0..200 {
                let part = &x[..4];
                target_data!(map(to: part) => {});
            }
        });
        s.spawn(|| assert!((0..200).all(|_| total(&x) == 1000)));
    });
}

#[test]
fn calls_on_a_slice_and_a_part_of_it_meet_on_the_hosts_atomics() {
    if !llvm() {
        return;
    }
    // A call on a part of the atomics that starts while the whole's call runs writes the host's atomics, which the
    // whole's call reads: `meet` returns.
    let flags = [AtomicU32::new(0), AtomicU32::new(0), AtomicU32::new(0)];
    let met = std::thread::scope(|s| {
        let whole = s.spawn(|| meet(&flags[..], 0));
        std::thread::sleep(std::time::Duration::from_millis(20));
        raise(&flags[..2], 1);
        whole.join().unwrap()
    });
    assert!(met);
    assert_eq!((flags[0].load(Relaxed), flags[1].load(Relaxed)), (1, 1));
    // In one call: the part is the whole's.
    let hits = [AtomicU32::new(0), AtomicU32::new(0)];
    count_twice(&hits, &hits[..1]);
    assert_eq!(hits[0].load(Relaxed), 2);
}

#[test]
fn kernels_that_wait_for_each_other_start_while_a_data_construct_waits() {
    if !llvm() {
        return;
    }
    let flags = [AtomicU32::new(0), AtomicU32::new(0)];
    let v = vec![1i64; 4];
    let (a, b) = std::thread::scope(|s| {
        let a = s.spawn(|| meet(&flags, 0));
        std::thread::sleep(std::time::Duration::from_millis(50));
        // Waits for the running kernel; the second kernel must not queue behind it.
        s.spawn(|| {
            let w = v.clone();
            drop(target_enter_data!(map(to: w)));
        });
        std::thread::sleep(std::time::Duration::from_millis(50));
        let b = s.spawn(|| meet(&flags, 1));
        (a.join().unwrap(), b.join().unwrap())
    });
    assert!(a && b, "{a} {b}");
}

/// Reads `x[0]`, says it started (`flags[0]`), waits (boundedly) for `flags[1]`, reads `x[0]` again.
#[target]
fn read_twice(flags: &[AtomicU32], x: &[i64]) -> i64 {
    let before = x[0];
    flags[0].store(1, Relaxed);
    let mut spins = 0u64;
    while flags[1].load(Relaxed) == 0 && spins < 2_000_000_000 {
        spins += 1;
        core::hint::spin_loop();
    }
    before * 1000 + x[0]
}

#[target(map(always, to: x))]
fn first_always(x: &[i64]) -> i64 {
    x[0]
}

// Finding 6 of the third review: a region with `map(always, to: y)` started while another thread's region read `y`
// through `&[i64]`, and its copy landed under the running region (which read 7, then 0): a data race from safe code.
// Now it is refused while the other region runs, as on our runtime.
#[test]
fn an_always_to_region_under_a_running_reader_is_refused() {
    if !llvm() {
        return;
    }
    let flags = [AtomicU32::new(0), AtomicU32::new(0)];
    let mut x = vec![0i64; 4];
    target_data!(map(tofrom: x) => {
        add_one(x);
        let x: &[i64] = x;
        let (read, refused) = std::thread::scope(|s| {
            let reader = s.spawn(|| read_twice(&flags, x));
            while flags[0].load(Relaxed) == 0 {
                std::thread::yield_now();
            }
            let refused = try_first_always(x);
            flags[1].store(1, Relaxed);
            (reader.join().unwrap(), refused)
        });
        assert_eq!(read, 1001, "the running region's copy was not written under it");
        let e = refused.expect_err("refused while the reader runs");
        assert!(e.to_string().contains("running region"), "{e}");
        // Once it is done, the `always` copy runs.
        assert_eq!(first_always(x), 0, "the host's value, copied in");
    });
}

// Finding 7 of the third review: a data construct on unrelated data waited until no kernel ran at all, so two
// regions that wait for each other with a data construct between them deadlocked (broken only by their own time
// limit). A data construct waits only for kernels that use its data.
#[test]
fn a_data_construct_waits_only_for_the_kernels_using_its_data() {
    if !llvm() {
        return;
    }
    let flags = [AtomicU32::new(0), AtomicU32::new(0)];
    let w = vec![1i64; 4];
    let t0 = std::time::Instant::now();
    let (a, b) = std::thread::scope(|s| {
        let a = s.spawn(|| meet(&flags, 0));
        while flags[0].load(Relaxed) == 0 {
            std::thread::yield_now();
        }
        let b = s.spawn(|| {
            target_data!(map(to: w) => {
                meet(&flags, 1)
            })
        });
        (a.join().unwrap(), b.join().unwrap())
    });
    assert!(a && b, "the regions met: {a} {b}");
    assert!(t0.elapsed().as_secs() < 20, "{:?}", t0.elapsed());
}

#[test]
fn device_globals_are_the_images_copies() {
    if !llvm() {
        return;
    }
    // An update of an immutable static has nothing to change (its copy may be read-only memory).
    target_update!(to: STEP);
    assert_eq!(step(), 3);
}

#[target]
fn fill_raw(p: offload::DevicePtr<i64>, n: usize) {
    // SAFETY: the test allocated `n` elements for this pointer.
    let s = unsafe { p.as_slice_mut(n) };
    for (i, v) in s.iter_mut().enumerate() {
        *v = 100 + i as i64;
    }
}

#[test]
fn device_memory_is_libomptargets_and_passed_as_is() {
    if !llvm() {
        return;
    }
    use offload::{omp_target_alloc, omp_target_free, omp_target_memcpy, DevicePtr};
    let (dev, host) = (0, omp_get_initial_device());
    let bytes = 4 * size_of::<i64>();
    let raw = omp_target_alloc(bytes, dev);
    assert!(!raw.is_null(), "libomptarget's omp_target_alloc");
    // SAFETY: `raw` holds 4 `i64`s of device 0.
    fill_raw(unsafe { DevicePtr::<i64>::from_raw(raw, dev) }, 4);
    let mut back = [0i64; 4];
    // SAFETY: both ranges are `bytes` long on their devices.
    let status =
        unsafe { omp_target_memcpy(back.as_mut_ptr().cast(), raw, bytes, 0, 0, host, dev) };
    assert_eq!(status, 0);
    assert_eq!(back, [100, 101, 102, 103]);
    // Memory of another device is refused, not passed.
    // SAFETY: as above; the call is refused before anything reads it.
    let e = try_fill_raw(unsafe { DevicePtr::<i64>::from_raw(raw, 1) }, 4).unwrap_err();
    assert!(e.to_string().contains("memory of device 1"), "{e}");
    // SAFETY: from `omp_target_alloc(_, dev)`, not used again.
    unsafe { omp_target_free(raw, dev) };
    assert!(offload::device_info(dev).is_some_and(|i| i.plugin == "llvm"));
}

#[target(map(tofrom: y[1..3]))]
fn bump_section(y: &mut [i64]) {
    y[1] += 1;
}

#[target]
fn count(hits: &[AtomicU32]) {
    hits[0].fetch_add(1, Relaxed);
}

#[test]
fn what_does_not_run_there_yet_is_an_error_naming_it() {
    if !llvm() {
        return;
    }
    let says = |e: offload::Error, what: &str| {
        let msg = e.to_string();
        assert!(
            msg.contains("OFFLOAD_RUNTIME=llvm") && msg.contains(what),
            "{msg}"
        );
    };
    // libomptarget would allocate the section alone, where the region addresses the whole slice.
    says(try_bump_section(&mut [0; 4]).unwrap_err(), "map section");
    // Atomics are never copied, so neither a section of them nor a data construct's is refused: they are used in
    // place.
    let hits: Vec<AtomicU32> = (0..8).map(|_| AtomicU32::new(0)).collect();
    try_bump_atomic_section(&hits).expect("used in place");
    assert_eq!(hits[2].load(Relaxed), 1);
    let mut hits = [AtomicU32::new(0)];
    target_data!(map(tofrom: hits) => { count(hits); });
    assert_eq!(hits[0].load(Relaxed), 1);
    // `present` data that is not there is an error, not libomptarget's abort.
    let x = vec![1i64; 5];
    let absent = std::panic::catch_unwind(|| {
        target_data!(map(present, to: x) => {});
    })
    .expect_err("not present");
    let msg = absent.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(msg.contains("`present` data is not mapped"), "{msg}");
}

#[test]
fn concurrent_regions_on_the_same_atomics_lose_no_update() {
    if !llvm() {
        return;
    }
    let hits = [AtomicU32::new(0)];
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for _ in 0..50 {
                    count(&hits);
                }
            });
        }
    });
    assert_eq!(hits[0].load(Relaxed), 200);
}

#[test]
fn work_shared_loops_run_on_the_hosts_cores_in_teams() {
    if !llvm() {
        return;
    }
    let n = 1000;
    let (mut team, mut teams) = (vec![9u32; n], vec![0u32; n]);
    who(&mut team, &mut teams);
    assert!(teams.iter().all(|&t| t == 2), "two teams: {teams:?}");
    // Contiguous blocks: the first half is team 0's, the second team 1's.
    assert_eq!(team[0], 0);
    assert_eq!(team[n - 1], 1, "team 1 ran its share");
}

#[test]
fn reductions_combine_every_teams_partial() {
    if !llvm() {
        return;
    }
    let x: Vec<i64> = (1..=10_000).collect();
    assert_eq!(sum(&x), 10_000 * 10_001 / 2);
    let data: Vec<u32> = (0..10_000).collect();
    let hist = histogram(&data);
    // 10 000 values over 256 bins: 39 or 40 each, plus the initial 3.
    for (b, &h) in hist.iter().enumerate() {
        let expected = 3 + data.iter().filter(|&&v| v as usize % 256 == b).count() as u32;
        assert_eq!(h, expected, "bin {b}");
    }
}

#[test]
fn spmd_regions_have_barriers_and_team_shared_memory() {
    if !llvm() {
        return;
    }
    let mut out = [0u32; 4];
    // SAFETY: each thread writes only its own element.
    unsafe { neighbours(&mut out) };
    // Team t's thread i read thread (i + 1) % 2's slot: t * 100 + that + 1.
    assert_eq!(out, [2, 1, 102, 101]);
}

#[test]
fn a_region_that_fails_is_an_error_and_copies_nothing_back() {
    if !llvm() {
        return;
    }
    let mut y = vec![7i64; 64];
    let e = try_fails_midway(&mut y).unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("fails_midway") && msg.contains("gives up") && msg.contains("llvm"),
        "{msg}"
    );
    assert!(
        y.iter().all(|&v| v == 7),
        "released without copying back, as on our runtime: {y:?}"
    );
    // The device is still usable.
    let mut z = vec![1i64; 3];
    add_one(&mut z);
    assert_eq!(z, [2, 2, 2]);
}
