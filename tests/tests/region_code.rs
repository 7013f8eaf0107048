//! Region code is Rust: what region code reaches of the package goes to the device without an attribute
//! (OpenMP 5.0's implicit declare target): functions, consts, statics, types with their impls, user traits with
//! default methods, generic helpers with trait bounds, and `macro_rules!`. Each region also runs in the host
//! fallback, and the results must agree.

use offload::{omp_is_initial_device, target};
// Region code may say `std` for what `core` has too.
use std::sync::atomic::{AtomicU32, Ordering};

const SCALE: f64 = 2.5;
static OFFSET: f64 = 0.5;
const PARTS: usize = 4;

fn affine(x: f64) -> f64 {
    x * SCALE + OFFSET
}

macro_rules! square {
    ($e:expr) => {{
        let v = $e;
        v * v
    }};
}

/// A C++ template's `T: Real`, as a trait with a default method.
trait Real: Copy {
    fn zero() -> Self;
    fn from_f64(v: f64) -> Self;
    fn add(self, o: Self) -> Self;
    fn twice(self) -> Self {
        self.add(self)
    }
}

impl Real for f32 {
    fn zero() -> Self {
        0.0
    }
    fn from_f64(v: f64) -> Self {
        v as f32
    }
    fn add(self, o: Self) -> Self {
        self + o
    }
}

impl Real for f64 {
    fn zero() -> Self {
        0.0
    }
    fn from_f64(v: f64) -> Self {
        v
    }
    fn add(self, o: Self) -> Self {
        self + o
    }
}

fn sum_twice<T: Real>(xs: &[T]) -> T {
    let mut s = T::zero();
    for &x in xs {
        s = s.add(x.twice());
    }
    s
}

#[derive(Clone, Copy)]
struct Interval {
    lo: f64,
    hi: f64,
}

impl Interval {
    fn width(&self) -> f64 {
        self.hi - self.lo
    }

    fn clamp(&self, v: f64) -> f64 {
        v.max(self.lo).min(self.hi)
    }

    /// A method a device cannot have: left out of the device's copy of the impl, which region code does not call.
    #[allow(dead_code)]
    fn describe(&self) -> String {
        format!("[{}, {}]", self.lo, self.hi)
    }
}

#[target(teams_distribute_parallel_for, if(on_device))]
fn transform(on_device: bool, x: &[f64], y: &mut [f64]) -> bool {
    let iv = Interval { lo: 0.0, hi: 10.0 };
    for i in 0..y.len() {
        y[i] = iv.clamp(affine(x[i])) + square!(x[i]) / iv.width();
    }
    omp_is_initial_device()
}

#[target(if(on_device))]
fn sums(on_device: bool, xs32: &[f32], xs64: &[f64], out: &mut [f64]) -> bool {
    out[0] = sum_twice(xs32) as f64;
    out[1] = sum_twice(xs64);
    out[2] = f64::from_f64(PARTS as f64);
    out[3] = <f32 as Real>::from_f64(1.5).twice() as f64;
    omp_is_initial_device()
}

#[test]
fn unmarked_consts_statics_functions_types_and_macros_reach_the_device() {
    let x: Vec<f64> = (0..100).map(|i| i as f64 * 0.1).collect();
    let want: Vec<f64> = x
        .iter()
        .map(|&v| (v * SCALE + OFFSET).clamp(0.0, 10.0) + v * v / 10.0)
        .collect();
    for on_device in [true, false] {
        let mut y = vec![0.0; 100];
        let initial = transform(on_device, &x, &mut y);
        assert_eq!(initial, !on_device, "ran where asked");
        assert_eq!(y, want, "device {on_device}");
    }
}

/// Device items a `macro_rules!` writes: a function and a type, reached by the names the invocations give them.
macro_rules! scaler {
    ($name:ident, $k:expr) => {
        fn $name(v: f64) -> f64 {
            v * $k
        }
    };
}
macro_rules! pair_type {
    ($name:ident, $t:ty) => {
        #[derive(Clone, Copy)]
        struct $name {
            a: $t,
            b: $t,
        }
        impl $name {
            fn sum(self) -> $t {
                self.a + self.b
            }
        }
    };
}
scaler!(quadruple, 4.0);
pair_type!(PairF64, f64);

#[target(teams_distribute_parallel_for, if(on_device))]
fn macro_written(on_device: bool, x: &[f64], y: &mut [f64]) {
    for i in 0..y.len() {
        y[i] = PairF64 {
            a: quadruple(x[i]),
            b: 1.0,
        }
        .sum();
    }
}

#[test]
fn items_a_macro_writes_reach_the_device() {
    let x: Vec<f64> = (0..64).map(|i| i as f64).collect();
    for on_device in [true, false] {
        let mut y = vec![0.0; 64];
        macro_written(on_device, &x, &mut y);
        assert!(
            y.iter().zip(&x).all(|(&y, &x)| y == 4.0 * x + 1.0),
            "device {on_device}: {y:?}"
        );
    }
}

fn halve(v: f64) -> f64 {
    v / 2.0
}

fn triple(v: f64) -> f64 {
    v * 3.0
}

/// Functions as values: a `fn` pointer chosen at run time, and a closure passed to a generic helper.
fn apply_each(f: fn(f64) -> f64, g: impl Fn(f64) -> f64, v: f64) -> f64 {
    g(f(v))
}

#[target(teams_distribute_parallel_for, if(on_device))]
fn through_fn_values(on_device: bool, pick: u32, x: &[f64], y: &mut [f64]) {
    let f: fn(f64) -> f64 = if pick == 0 { halve } else { triple };
    for i in 0..y.len() {
        y[i] = apply_each(f, |v| v + 1.0, x[i]);
    }
}

#[test]
fn functions_passed_as_values_reach_the_device() {
    let x: Vec<f64> = (0..64).map(|i| i as f64).collect();
    for on_device in [true, false] {
        for (pick, k) in [(0, 0.5), (1, 3.0)] {
            let mut y = vec![0.0; 64];
            through_fn_values(on_device, pick, &x, &mut y);
            assert!(
                y.iter().zip(&x).all(|(&y, &x)| y == x * k + 1.0),
                "device {on_device}: {y:?}"
            );
        }
    }
}

#[test]
fn user_traits_default_methods_and_generic_helpers_reach_the_device() {
    let xs32: Vec<f32> = (1..=4).map(|i| i as f32).collect();
    let xs64: Vec<f64> = (1..=4).map(|i| i as f64 * 0.5).collect();
    for on_device in [true, false] {
        let mut out = vec![0.0; 4];
        let initial = sums(on_device, &xs32, &xs64, &mut out);
        assert_eq!(initial, !on_device);
        assert_eq!(out, [20.0, 10.0, 4.0, 3.0], "device {on_device}");
    }
}

#[target(teams_distribute_parallel_for, if(on_device))]
fn count_with_std_paths(on_device: bool, hits: &[AtomicU32]) -> f64 {
    for i in 0..hits.len() {
        hits[i].fetch_add(1, Ordering::Relaxed);
    }
    std::f64::consts::PI + std::cmp::max(1, 2) as f64
}

#[test]
fn std_paths_to_what_core_has_work_in_region_code() {
    for on_device in [true, false] {
        let hits: Vec<AtomicU32> = (0..300).map(|_| AtomicU32::new(0)).collect();
        let v = count_with_std_paths(on_device, &hits);
        assert_eq!(v, std::f64::consts::PI + 2.0);
        assert!(
            hits.iter().all(|h| h.load(Ordering::Relaxed) == 1),
            "device {on_device}"
        );
    }
}

/// A `no_std` dependency of the package (`libm`, listed in `[package.metadata.offload] device-dependencies`).
#[target(teams_distribute_parallel_for, if(on_device))]
fn cube_roots(on_device: bool, x: &[f64], y: &mut [f64]) {
    for i in 0..y.len() {
        y[i] = libm::cbrt(x[i]) + libm::fabs(-1.0);
    }
}

#[test]
fn no_std_dependencies_work_in_region_code() {
    let x: Vec<f64> = (0..64).map(|i| (i * i * i) as f64).collect();
    for on_device in [true, false] {
        let mut y = vec![0.0; 64];
        cube_roots(on_device, &x, &mut y);
        assert!(
            y.iter()
                .enumerate()
                .all(|(i, &v)| (v - (i as f64 + 1.0)).abs() < 1e-9),
            "device {on_device}: {y:?}"
        );
    }
}

/// The package's own library: its `#[declare_target]` items are device code for its other targets too (here, an
/// integration test), by path and through `use`.
mod from_the_packages_library {
    use offload::target;
    use offload_tests::kernels::SCALE;

    #[target(teams_distribute_parallel_for, if(on_device))]
    fn steps(on_device: bool, y: &mut [i64]) {
        for i in 0..y.len() {
            y[i] = offload_tests::kernels::saturating_step(y[i], 100) * SCALE;
        }
    }

    #[test]
    fn the_packages_library_items_work_in_its_tests_regions() {
        for on_device in [true, false] {
            let mut y: Vec<i64> = (0..200).collect();
            steps(on_device, &mut y);
            for (i, &v) in y.iter().enumerate() {
                assert_eq!(v, (i as i64 + 3).min(100) * 3, "device {on_device}");
            }
        }
    }
}

/// An offload-aware library (`tests/devlib`, a path dependency built with offload): its `#[declare_target]`
/// functions, generic helpers, types, trait impls and default methods, called from this package's regions by path
/// and through `use`.
mod from_a_library {
    use devlib::shapes::{Circle, Rect, Shape};
    use offload::{omp_is_initial_device, target};

    #[target(teams_distribute_parallel_for, if(on_device))]
    fn lengths(on_device: bool, a: &[f64], b: &[f64], out: &mut [f64]) -> bool {
        for i in 0..out.len() {
            out[i] = devlib::hypot(a[i], b[i]) + devlib::sq(2.0);
        }
        omp_is_initial_device()
    }

    #[target(if(on_device))]
    fn areas(on_device: bool, radii: &[f64], out: &mut [f64]) -> f64 {
        for i in 0..out.len() {
            let c = Circle::new(radii[i]);
            let r = Rect {
                w: radii[i],
                h: 2.0,
            };
            out[i] = c.scaled_area(2.0) + r.area();
        }
        devlib::sum_of(radii, 0.0)
    }

    #[test]
    fn a_librarys_device_items_work_in_region_code() {
        let a: Vec<f64> = (0..256).map(|i| 3.0 * i as f64).collect();
        let b: Vec<f64> = (0..256).map(|i| 4.0 * i as f64).collect();
        let radii: Vec<f64> = (0..16).map(|i| i as f64 * 0.5).collect();
        for on_device in [true, false] {
            let mut out = vec![0.0; 256];
            let initial = lengths(on_device, &a, &b, &mut out);
            assert_eq!(initial, !on_device);
            for (i, &v) in out.iter().enumerate() {
                assert!(
                    (v - (5.0 * i as f64 + 4.0)).abs() < 1e-9,
                    "device {on_device}: {i}: {v}"
                );
            }
            let mut out = vec![0.0; 16];
            let sum = areas(on_device, &radii, &mut out);
            assert_eq!(sum, radii.iter().sum::<f64>());
            for (i, &v) in out.iter().enumerate() {
                let r = radii[i];
                let want = std::f64::consts::PI * r * r * 4.0 + 2.0 * r;
                assert!(
                    (v - want).abs() < 1e-9,
                    "device {on_device}: {i}: {v} != {want}"
                );
            }
        }
    }

    #[test]
    fn a_librarys_own_regions_run_from_its_image() {
        let mut v = vec![3.0; 100];
        assert!(!devlib::scale_all(0.5, &mut v), "ran in the host fallback");
        assert!(v.iter().all(|&x| x == 4.5), "{v:?}");
    }
}

/// Device globals (OpenMP's `declare target` variables): a `#[declare_target] static` is present on a device from
/// the start, its device copy starts from the host value, regions change it through atomics, and `target_update!`
/// moves it either way. In the host fallback the region uses the host static itself, and the same program gives the
/// same result.
mod device_globals {
    use offload::{
        declare_target, omp_get_default_device, omp_get_initial_device, omp_target_is_present,
        target, target_update,
    };
    use std::ffi::c_void;
    use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};

    #[declare_target]
    static STEP: u64 = 3;
    #[declare_target]
    static HITS: AtomicU32 = AtomicU32::new(0);
    #[declare_target]
    pub static BINS: [AtomicU64; 4] = [const { AtomicU64::new(0) }; 4];

    #[target(teams_distribute_parallel_for, if(on_device))]
    fn count(on_device: bool, x: &[u64]) {
        for i in 0..x.len() {
            HITS.fetch_add(1, Relaxed);
            BINS[(x[i] % 4) as usize].fetch_add(STEP, Relaxed);
        }
    }

    /// A plain global of an over-aligned type: its present copy keeps the alignment.
    #[declare_target]
    #[repr(C, align(256))]
    #[derive(Clone, Copy)]
    pub struct Aligned {
        pub v: [u64; 4],
    }
    #[declare_target]
    static TABLE: Aligned = Aligned { v: [1, 2, 3, 4] };

    #[target]
    fn misalignment(t: &Aligned) -> u64 {
        (t as *const Aligned as usize % 256) as u64 + t.v[0] + t.v[3] - 5
    }

    #[test]
    fn a_plain_globals_present_copy_keeps_its_types_alignment() {
        assert_eq!(misalignment(&TABLE), 0);
    }

    /// A generic `#[declare_target]` struct of plain fields maps as any struct (its fields are checked for atomics
    /// where it is used with its arguments: tests/ui/atomic_generic_struct_field.rs).
    #[declare_target]
    #[repr(C)]
    #[derive(Clone, Copy)]
    pub struct Pair<T: offload::DeviceCopy + Copy> {
        pub a: T,
        pub b: T,
    }

    #[declare_target]
    static HALVES: Pair<f64> = Pair { a: 0.5, b: 0.25 };

    #[target]
    fn sum_pair(p: &Pair<f64>) -> f64 {
        p.a + p.b
    }

    #[test]
    fn a_generic_struct_of_plain_fields_maps_and_is_a_device_global() {
        assert_eq!(sum_pair(&Pair { a: 1.0, b: 2.0 }), 3.0);
        assert_eq!(sum_pair(&HALVES), 0.75);
    }

    fn present<T>(v: &T, device: i32) -> bool {
        omp_target_is_present(v as *const T as *const c_void, device)
    }

    #[test]
    fn declare_target_statics_are_present_updatable_and_written_by_regions() {
        let dev = omp_get_default_device();
        let on_host = dev == omp_get_initial_device();
        // Present before any region ran, as OpenMP has them once the device is initialised.
        assert!(present(&HITS, dev) && present(&BINS, dev) && present(&STEP, dev));
        let x: Vec<u64> = (0..1000).collect();

        // The device copy starts from the host value at load; a new host value reaches it by `target_update!`.
        HITS.store(10, Relaxed);
        target_update!(to: HITS, STEP);
        count(true, &x);
        if !on_host {
            assert_eq!(
                HITS.load(Relaxed),
                10,
                "the host static is not the device's copy"
            );
        }
        target_update!(from: HITS, BINS);
        assert_eq!(HITS.load(Relaxed), 1010);
        for b in &BINS {
            assert_eq!(b.load(Relaxed), 250 * 3);
        }

        // In the host fallback the region uses the host static itself.
        count(false, &x);
        assert_eq!(HITS.load(Relaxed), 2010);
        // The device copy kept its own count: bringing it back overwrites the host's.
        target_update!(from: HITS);
        let want = if on_host { 2010 } else { 1010 };
        assert_eq!(HITS.load(Relaxed), want);
    }
}

/// `cfg` attributes in region code mean what they mean in the host code: the package's features are its device
/// crates' features, and `test` is set (regions in unit tests reach the device). A device that saw the other
/// alternative would hand back a differently laid out struct.
mod cfg_and_features {
    use offload::{omp_is_initial_device, target};

    #[cfg(feature = "wide")]
    type Acc = f64;
    #[cfg(not(feature = "wide"))]
    type Acc = f32;

    #[cfg(feature = "narrow")]
    const LANES: usize = 2;
    #[cfg(not(feature = "narrow"))]
    const LANES: usize = 8;

    #[offload::declare_target]
    #[derive(Clone, Copy, Debug, PartialEq)]
    #[repr(C)]
    pub struct Stats {
        pub sum: Acc,
        #[cfg(feature = "wide")]
        pub count: u64,
        pub lanes: u64,
    }

    #[cfg(feature = "narrow")]
    fn weight(v: Acc) -> Acc {
        v * 0.5
    }
    #[cfg(not(feature = "narrow"))]
    fn weight(v: Acc) -> Acc {
        v * 2.0
    }

    #[target(if(on_device))]
    fn accumulate(on_device: bool, x: &[f64], s: &mut Stats) -> bool {
        for &v in x {
            s.sum += weight(v as Acc);
            #[cfg(feature = "wide")]
            {
                s.count += 1;
            }
        }
        s.lanes = (LANES * core::mem::size_of::<Acc>()) as u64;
        omp_is_initial_device()
    }

    #[test]
    fn region_code_sees_the_packages_features() {
        let x: Vec<f64> = (1..=10).map(f64::from).collect();
        for on_device in [true, false] {
            let mut s = Stats {
                sum: 0.0,
                count: 0,
                lanes: 0,
            };
            assert_eq!(
                accumulate(on_device, &x, &mut s),
                !on_device,
                "ran where asked"
            );
            assert_eq!(
                s,
                Stats {
                    sum: 110.0,
                    count: 10,
                    lanes: 64
                },
                "device {on_device}"
            );
        }
    }
}
