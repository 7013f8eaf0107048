//! BabelStream's kernels as a C++ template port writes them: one generic `T: Real` stream, instantiated for f32 and
//! f64 (`instantiate(..)`, C++'s explicit template instantiation), driven by generic host code; and a method region
//! on the stream's settings. `cargo run --release --example babelstream`

use offload::{target, target_data, DeviceCopy};

/// The element types the stream runs on. `DeviceCopy` as a supertrait lets slices of `T` map.
pub trait Real: DeviceCopy + Copy + PartialEq {
    fn of(v: f64) -> Self;
    fn to_f64(self) -> f64;
    fn add(self, o: Self) -> Self;
    fn mul(self, o: Self) -> Self;
}

impl Real for f32 {
    fn of(v: f64) -> Self {
        v as f32
    }
    fn to_f64(self) -> f64 {
        self as f64
    }
    fn add(self, o: Self) -> Self {
        self + o
    }
    fn mul(self, o: Self) -> Self {
        self * o
    }
}

impl Real for f64 {
    fn of(v: f64) -> Self {
        v
    }
    fn to_f64(self) -> f64 {
        self
    }
    fn add(self, o: Self) -> Self {
        self + o
    }
    fn mul(self, o: Self) -> Self {
        self * o
    }
}

#[target(teams_distribute_parallel_for, instantiate(f32, f64))]
fn triad<T: Real>(a: &mut [T], b: &[T], c: &[T], scalar: T) {
    for i in 0..a.len() {
        a[i] = b[i].add(scalar.mul(c[i]));
    }
}

#[target(teams_distribute_parallel_for, reduction(+: sum), instantiate(f32, f64))]
fn dot<T: Real>(a: &[T], b: &[T]) -> f64 {
    let mut sum = 0.0;
    for i in 0..a.len() {
        sum += a[i].mul(b[i]).to_f64();
    }
    sum
}

/// The run's settings, a `#[repr(C)]` struct the device reads.
#[derive(Clone, Copy)]
#[repr(C)]
#[offload::declare_target]
pub struct Settings {
    pub scalar: f64,
    pub start_a: f64,
}

#[target]
impl Settings {
    /// `&self` is mapped `to`, like a `&Settings` parameter.
    #[target(teams_distribute_parallel_for)]
    fn init(&self, a: &mut [f64]) {
        for i in 0..a.len() {
            a[i] = self.start_a;
        }
    }
}

/// Generic host code: the kernels of `T`'s instance.
fn run<T: Real>(n: usize, settings: &Settings) -> bool {
    let mut a = vec![T::of(0.0); n];
    let b = vec![T::of(2.0); n];
    let c = vec![T::of(1.0); n];
    let sum = target_data!(map(to: b, c), map(from: a) => {
        triad::<T>(a, b, c, T::of(settings.scalar)); // a = 2 + 0.4 * 1
        dot::<T>(a, b)
    });
    let want = 2.0 + settings.scalar;
    a.iter().all(|x| (x.to_f64() - want).abs() < 1e-6)
        && (sum - want * 2.0 * n as f64).abs() < 1e-3 * n as f64
}

fn main() {
    let settings = Settings {
        scalar: 0.4,
        start_a: 0.1,
    };
    let mut a = vec![0.0; 1 << 16];
    settings.init(&mut a);
    let ok = a.iter().all(|&x| x == 0.1)
        && run::<f32>(1 << 20, &settings)
        && run::<f64>(1 << 20, &settings);
    println!(
        "babelstream: f32 and f64 on {} device(s): {}",
        offload::omp_get_num_devices(),
        if ok { "ok" } else { "WRONG" }
    );
    if !ok {
        std::process::exit(1);
    }
}
