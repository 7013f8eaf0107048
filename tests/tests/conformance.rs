//! OpenMP mapping and value semantics on the host-elf device (CONFORMANCE 1-6, 8, 20, 28). The host-elf device has
//! its own memory, so every copy, and every missing copy, is observable.

use core::sync::atomic::{AtomicU32, Ordering};
use offload::{
    declare_target, omp_get_initial_device, omp_is_initial_device, omp_target_is_present, target,
};

// 1. `&mut [T]` with no clause is `tofrom`.
#[target]
fn add_one(y: &mut [f64]) {
    for v in y.iter_mut() {
        *v += 1.0;
    }
}

#[test]
fn mut_slice_defaults_to_tofrom() {
    let mut y: Vec<f64> = (0..1000).map(f64::from).collect();
    add_one(&mut y);
    assert!(y.iter().enumerate().all(|(i, &v)| v == i as f64 + 1.0));
}

// 2. `&[T]` with no clause is `to`; `map(to:)` on `&mut` copies nothing back.
#[target]
fn copy_into(x: &[u32], y: &mut [u32]) {
    y.copy_from_slice(x);
}

#[target(map(to: y))]
fn scribble(y: &mut [u32]) -> u32 {
    for v in y.iter_mut() {
        *v = 7;
    }
    y.iter().sum()
}

#[test]
fn shared_slice_defaults_to_to() {
    let x: Vec<u32> = (0..257).map(|i| i * 3).collect();
    let mut y = vec![0u32; 257];
    copy_into(&x, &mut y);
    assert_eq!(x, y, "the device saw the host data");
}

#[test]
fn map_to_copies_nothing_back() {
    let mut y = vec![1u32; 100];
    assert_eq!(scribble(&mut y), 700, "the device wrote its copy");
    assert!(y.iter().all(|&v| v == 1), "the host copy is untouched");
}

// 3. A `Copy` scalar is firstprivate.
#[target]
fn bump(mut k: u32, out: &mut [u32]) {
    k += 1;
    out[0] = k;
}

#[test]
fn scalars_are_firstprivate() {
    let k = 41;
    let mut out = [0u32; 1];
    bump(k, &mut out);
    assert_eq!(out[0], 42, "the region saw k and changed its own copy");
    assert_eq!(k, 41);
}

// 4. `map(from:)`: the device copy does not start from the host values.
#[target(map(from: y))]
fn add_index(y: &mut [i32]) {
    for (i, v) in y.iter_mut().enumerate() {
        *v += i as i32;
    }
}

#[test]
fn map_from_copies_out_only() {
    let mut y = vec![99i32; 300];
    add_index(&mut y);
    if offload_tests::runtime_is_llvm() {
        // libomptarget's host plugin does not zero its memory: a `from` copy starts as the host's values there.
        assert!(y.iter().enumerate().all(|(i, &v)| v == 99 + i as i32));
        return;
    }
    // host-elf device memory starts zeroed; with `tofrom` this would be 99 + i.
    assert!(
        y.iter().enumerate().all(|(i, &v)| v == i as i32),
        "{:?}",
        &y[..4]
    );
}

// 5. `map(alloc:)`: device storage only.
#[target(map(alloc: scratch), map(from: total))]
fn fill_and_sum(n: u64, scratch: &mut [u64], total: &mut u64) {
    for (i, s) in scratch.iter_mut().enumerate() {
        *s = i as u64 * n;
    }
    *total = scratch.iter().sum();
}

#[test]
fn map_alloc_neither_copies_in_nor_out() {
    let mut scratch = vec![5u64; 1000];
    let mut total = 0;
    fill_and_sum(3, &mut scratch, &mut total);
    assert_eq!(total, 3 * 999 * 1000 / 2);
    assert!(scratch.iter().all(|&v| v == 5));
}

// 6 and 20. `if` and `omp_is_initial_device`.
#[target(if(on_device))]
fn sum_squares(on_device: bool, x: &[f64]) -> f64 {
    x.iter().map(|v| v * v).sum()
}

#[target(if(on_device))]
fn initial(on_device: bool) -> bool {
    omp_is_initial_device()
}

#[test]
fn if_clause_chooses_host_or_device_with_equal_results() {
    assert!(!initial(true), "runs on the device");
    assert!(initial(false), "runs in the host fallback");
    let x: Vec<f64> = (0..1000).map(|i| i as f64 * 0.25).collect();
    let dev = sum_squares(true, &x);
    let host = sum_squares(false, &x);
    assert_eq!(dev.to_bits(), host.to_bits());
}

// omp_get_wtime and omp_get_wtick in region code: the host image and the host fallback read the host's clock,
// so a region's reading lies between two taken around the call.
#[target(if(on_device))]
fn region_clock(on_device: bool) -> Clock {
    Clock {
        time: offload::omp_get_wtime(),
        tick: offload::omp_get_wtick(),
    }
}

#[declare_target]
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    pub time: f64,
    pub tick: f64,
}

#[test]
fn wtime_is_one_clock_on_the_host_and_in_regions() {
    let tick = offload::omp_get_wtick();
    assert!(tick > 0.0 && tick <= 1e-6, "{tick}");
    for on_device in [true, false] {
        if on_device && offload_tests::default_device_is_gpu() {
            // A GPU's clock is its own (`%globaltimer`, AMD's real-time counter): readings compare on one device.
            let (a, b) = (region_clock(true), region_clock(true));
            assert!(
                0.0 < a.time && a.time <= b.time && a.tick > 0.0,
                "{a:?} {b:?}"
            );
            continue;
        }
        let before = offload::omp_get_wtime();
        let c = region_clock(on_device);
        let after = offload::omp_get_wtime();
        assert!(
            before <= c.time && c.time <= after,
            "{before} <= {} <= {after}",
            c.time
        );
        assert_eq!(c.tick, tick);
    }
    let t0 = offload::omp_get_wtime();
    std::thread::sleep(std::time::Duration::from_millis(20));
    let elapsed = offload::omp_get_wtime() - t0;
    assert!((0.02..1.0).contains(&elapsed), "{elapsed}");
}

// 7 (in-process part). `device(omp_get_initial_device())` is the host.
#[target(device(dev))]
fn initial_on(dev: i32) -> bool {
    omp_is_initial_device()
}

#[test]
fn device_clause_zero_and_initial() {
    assert!(!initial_on(0));
    assert!(initial_on(omp_get_initial_device()));
}

// 8. Return values, structs by value (larger than 8 bytes: a private copy) and by reference, enums.
#[declare_target]
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Stats {
    pub min: f32,
    pub max: f32,
    pub sum: f64,
    pub count: u64,
}

#[declare_target]
impl Stats {
    fn add(&mut self, v: f32) {
        self.min = self.min.min(v);
        self.max = self.max.max(v);
        self.sum += v as f64;
        self.count += 1;
    }
}

#[declare_target]
const EMPTY: Stats = Stats {
    min: f32::INFINITY,
    max: f32::NEG_INFINITY,
    sum: 0.0,
    count: 0,
};

#[target]
fn stats(x: &[f32], init: Stats) -> Stats {
    let mut s = init;
    for &v in x {
        s.add(v);
    }
    s
}

#[target]
fn merge(part: &Stats, acc: &mut Stats) {
    acc.sum += part.sum;
    acc.count += part.count;
    acc.min = acc.min.min(part.min);
    acc.max = acc.max.max(part.max);
}

#[declare_target]
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Op {
    Add(i64),
    Mul(i64),
}

#[target]
fn apply(op: Op, y: &mut [i64]) -> char {
    for v in y.iter_mut() {
        *v = match op {
            Op::Add(k) => *v + k,
            Op::Mul(k) => *v * k,
        };
    }
    if omp_is_initial_device() {
        'h'
    } else {
        'd'
    }
}

#[test]
fn values_cross_both_ways() {
    let x: Vec<f32> = (0..100).map(|i| i as f32 - 50.0).collect();
    let s = stats(&x, EMPTY);
    assert_eq!(
        s,
        Stats {
            min: -50.0,
            max: 49.0,
            sum: -50.0,
            count: 100
        }
    );
    let mut acc = Stats {
        min: -60.0,
        max: 0.0,
        sum: 1.0,
        count: 1,
    };
    merge(&s, &mut acc);
    assert_eq!(
        acc,
        Stats {
            min: -60.0,
            max: 49.0,
            sum: -49.0,
            count: 101
        }
    );
    let mut y = vec![2i64; 10];
    assert_eq!(apply(Op::Mul(21), &mut y), 'd');
    assert_eq!(apply(Op::Add(-2), &mut y), 'd');
    assert!(y.iter().all(|&v| v == 40));
}

// Zero-length maps skip the table and still give the region valid (empty) slices.
#[target]
fn lengths(x: &[u8], y: &mut [u16]) -> u64 {
    (x.len() + y.len()) as u64
}

#[test]
fn zero_length_slices() {
    assert_eq!(lengths(&[], &mut []), 0);
    assert_eq!(lengths(&[1, 2, 3], &mut []), 3);
}

// 28. A failing region: reported with its name, message and location; not re-run on the host; nothing copied back;
// nothing left mapped.
const PANIC_LINE: u32 = line!() + 6;

#[target]
fn fails_after_writing(hits: &[AtomicU32], y: &mut [i32], i: usize) -> i32 {
    hits[0].fetch_add(1, Ordering::Relaxed);
    y[0] = -1;
    y[i]
}

#[test]
fn a_failing_region_is_reported_and_not_rerun() {
    let hits = [AtomicU32::new(0)];
    let mut y = vec![5i32; 4];
    let err = try_fails_after_writing(&hits, &mut y, 10).expect_err("index 10 is out of bounds");
    let msg = err.to_string();
    assert!(
        msg.starts_with(&format!(
            "offload: region conformance::fails_after_writing failed on {}: ",
            offload_tests::default_device_name()
        )),
        "{msg}"
    );
    assert!(
        offload_tests::says(
            &msg,
            "index out of bounds: the len is 4 but the index is 10"
        ),
        "{msg}"
    );
    assert!(
        msg.contains(&format!(" at tests/tests/conformance.rs:{PANIC_LINE}:5")),
        "{msg}"
    );
    assert_eq!(
        hits[0].load(Ordering::Relaxed),
        1,
        "run once, not re-run on the host (atomics are used in place: the device's count is the host's)"
    );
    assert!(y.iter().all(|&v| v == 5), "nothing copied back");
    assert!(
        !omp_target_is_present(y.as_ptr().cast(), 0),
        "no mapping left behind"
    );
    assert!(!omp_target_is_present(hits.as_ptr().cast(), 0));

    // The device is still usable, and the same region works with good input.
    assert_eq!(fails_after_writing(&hits, &mut y, 3), 5);
    assert_eq!(hits[0].load(Ordering::Relaxed), 2);
    assert_eq!(y[0], -1);
}

#[target]
fn explicit_panic(k: u32) {
    if k > 2 {
        panic!("k is too large: {k}");
    }
}

#[test]
fn the_panicking_entry_point_names_the_region() {
    let p = std::panic::catch_unwind(|| explicit_panic(3)).expect_err("must panic");
    let msg = p.downcast_ref::<String>().cloned().unwrap_or_default();
    let failed = format!(
        "region conformance::explicit_panic failed on {}: ",
        offload_tests::default_device_name()
    );
    assert!(
        msg.contains(&failed)
            && offload_tests::says(&msg, "k is too large: 3")
            && msg.contains(" at tests/tests/conformance.rs:"),
        "{msg}"
    );
    explicit_panic(1);
}

#[target(if(on_device))]
fn fallback_panics(on_device: bool, y: &[u8]) -> u8 {
    y[3]
}

#[test]
fn a_panic_in_the_host_fallback_is_reraised_with_the_region_name() {
    let p = std::panic::catch_unwind(|| fallback_panics(false, &[1])).expect_err("must panic");
    let msg = p.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(msg.contains("offload: region conformance::fallback_panics panicked in the host fallback: index out of bounds"), "{msg}");
}

// Many arguments: 20 slices and a scalar are 41 kernel arguments plus the return slot.
#[allow(clippy::too_many_arguments)]
#[target]
fn wide(
    k: u32,
    a0: &[u32],
    a1: &[u32],
    a2: &[u32],
    a3: &[u32],
    a4: &[u32],
    a5: &[u32],
    a6: &[u32],
    a7: &[u32],
    a8: &[u32],
    a9: &[u32],
    b0: &mut [u32],
    b1: &mut [u32],
    b2: &mut [u32],
    b3: &mut [u32],
    b4: &mut [u32],
    b5: &mut [u32],
    b6: &mut [u32],
    b7: &mut [u32],
    b8: &mut [u32],
    b9: &mut [u32],
) -> u32 {
    let ins = [a0, a1, a2, a3, a4, a5, a6, a7, a8, a9];
    let outs = [b0, b1, b2, b3, b4, b5, b6, b7, b8, b9];
    let mut total = 0;
    for (i, o) in ins.iter().zip(outs) {
        o[0] = i[0] * k;
        total += o[0];
    }
    total
}

#[test]
fn a_region_with_42_kernel_arguments() {
    let ins: Vec<[u32; 1]> = (1..=10).map(|i| [i]).collect();
    let mut outs = [[0u32; 1]; 10];
    let [b0, b1, b2, b3, b4, b5, b6, b7, b8, b9] = &mut outs;
    let i = &ins;
    let total = wide(
        3, &i[0], &i[1], &i[2], &i[3], &i[4], &i[5], &i[6], &i[7], &i[8], &i[9], b0, b1, b2, b3,
        b4, b5, b6, b7, b8, b9,
    );
    assert_eq!(total, 3 * 55);
    assert!(outs
        .iter()
        .enumerate()
        .all(|(j, o)| o[0] == 3 * (j as u32 + 1)));
}

// Atomics are recognised by type, not name: shared atomics come back, a struct called `Atomic..` is plain data.
#[declare_target]
#[repr(C)]
#[derive(Clone, Copy)]
pub struct AtomicPair {
    pub a: u32,
    pub b: u32,
}

#[target]
fn bump_atomics(
    one: &core::sync::atomic::AtomicU64,
    many: &[AtomicU32],
    pairs: &[AtomicPair],
) -> u32 {
    one.fetch_add(1, Ordering::Relaxed);
    for m in many {
        m.fetch_add(2, Ordering::Relaxed);
    }
    pairs.iter().map(|p| p.a + p.b).sum()
}

#[test]
fn shared_atomics_are_tofrom_and_plain_data_is_to() {
    let one = core::sync::atomic::AtomicU64::new(10);
    let many: Vec<AtomicU32> = (0..5).map(AtomicU32::new).collect();
    // A promoted constant: read-only memory, which a wrong `tofrom` would write into.
    let pairs: &[AtomicPair] = &[AtomicPair { a: 1, b: 2 }, AtomicPair { a: 3, b: 4 }];
    assert_eq!(bump_atomics(&one, &many, pairs), 10);
    assert_eq!(one.load(Ordering::Relaxed), 11);
    assert!(many
        .iter()
        .enumerate()
        .all(|(i, m)| m.load(Ordering::Relaxed) == i as u32 + 2));
}

// Atomics nested in arrays are atomics too: a shared `&[AtomicU32; 4]` or `&[[AtomicU32; 2]]` is written through, so
// it maps `tofrom` and its updates come back (copied element by element with atomic loads and stores).
#[target]
fn bump_atomic_arrays(
    four: &[AtomicU32; 4],
    rows: &[[AtomicU32; 2]],
    deep: &[[[core::sync::atomic::AtomicU16; 2]; 2]],
) {
    for a in four {
        a.fetch_add(1, Ordering::Relaxed);
    }
    for row in rows {
        row[1].fetch_add(10, Ordering::Relaxed);
    }
    for plane in deep {
        plane[1][0].fetch_add(100, Ordering::Relaxed);
    }
}

#[test]
fn arrays_of_atomics_are_tofrom() {
    use core::sync::atomic::AtomicU16;
    let four: [AtomicU32; 4] = core::array::from_fn(|i| AtomicU32::new(i as u32));
    let rows: Vec<[AtomicU32; 2]> = (0..3)
        .map(|_| [AtomicU32::new(1), AtomicU32::new(2)])
        .collect();
    let deep: Vec<[[AtomicU16; 2]; 2]> = (0..2)
        .map(|_| core::array::from_fn(|_| core::array::from_fn(|_| AtomicU16::new(5))))
        .collect();
    bump_atomic_arrays(&four, &rows, &deep);
    let four: Vec<u32> = four.iter().map(|a| a.load(Ordering::Relaxed)).collect();
    assert_eq!(four, [1, 2, 3, 4], "&[AtomicU32; 4] came back");
    for row in &rows {
        assert_eq!(row[0].load(Ordering::Relaxed), 1);
        assert_eq!(
            row[1].load(Ordering::Relaxed),
            12,
            "&[[AtomicU32; 2]] came back"
        );
    }
    for plane in &deep {
        assert_eq!(
            plane[1][0].load(Ordering::Relaxed),
            105,
            "three levels deep came back"
        );
        assert_eq!(plane[0][0].load(Ordering::Relaxed), 5);
    }
}

// A small by-value struct with padding travels as kernel-argument bits (its padding is never read as a number).
#[declare_target]
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Padded {
    pub tag: u8,
    pub value: u32,
}

#[target]
fn unpack(p: Padded) -> u32 {
    p.tag as u32 * 1000 + p.value
}

#[test]
fn a_padded_struct_by_value() {
    assert_eq!(unpack(Padded { tag: 7, value: 42 }), 7042);
}
