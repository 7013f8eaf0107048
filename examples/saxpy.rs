//! SAXPY on the default offload device: `y = a * x + y` over 16M elements, checked element by element against the
//! same computation on the host. Exits non-zero on any mismatch.
//!
//! `OFFLOAD_INFO=1 cargo run --release --example saxpy` shows where the region ran.

use offload::{declare_target, target, Mapper};

#[declare_target]
fn fma(a: f32, x: f32, y: f32) -> f32 {
    a * x + y
}

#[target(map(to: x), map(tofrom: y))]
fn saxpy(a: f32, x: &[f32], y: &mut [f32]) {
    for i in 0..y.len() {
        y[i] = fma(a, x[i], y[i]);
    }
}

/// The inputs in a struct (OpenMP's `declare mapper`): `x` is mapped `to`, `a` passed by value. A parallel region's
/// struct holds no `&mut`, so the output is its own parameter.
#[derive(Mapper)]
struct Inputs<'a> {
    x: &'a [f32],
    a: f32,
}

#[target(teams_distribute_parallel_for)]
fn saxpy_mapped(p: Inputs<'_>, y: &mut [f32]) {
    for i in 0..y.len() {
        y[i] = fma(p.a, p.x[i], y[i]);
    }
}

/// A port of C's `struct { float *y; const float *x; float a; }`, updated by a serial region.
#[derive(Mapper)]
struct Axpy<'a> {
    y: &'a mut [f32],
    #[map(to)]
    x: &'a [f32],
    a: f32,
}

#[target]
fn axpy_struct(s: &mut Axpy<'_>) {
    for i in 0..s.y.len() {
        s.y[i] = fma(s.a, s.x[i], s.y[i]);
    }
}

/// A struct that owns its arrays (C's struct whose pointers it `malloc`s): its `Vec`s are mapped as slices, `to`
/// through `&`, `tofrom` through `&mut` (or as `#[map(..)]` says).
#[derive(Mapper)]
struct Owned {
    y: Vec<f32>,
    #[map(to)]
    x: Vec<f32>,
    a: f32,
}

#[target]
fn axpy_owned(s: &mut Owned) {
    for i in 0..s.y.len() {
        s.y[i] = fma(s.a, s.x[i], s.y[i]);
    }
}

/// The struct read through `&` by every thread; the output is its own parameter.
#[target(teams_distribute_parallel_for)]
fn saxpy_owned(s: &Owned, y: &mut [f32]) {
    for i in 0..y.len() {
        y[i] = fma(s.a, s.x[i], y[i]);
    }
}

/// The struct forms agree with the plain region on a small input.
fn mapped_forms_agree() -> bool {
    let x: Vec<f32> = (0..1000).map(|i| i as f32 * 0.25).collect();
    let mut want = vec![1.0f32; 1000];
    saxpy(3.0, &x, &mut want);
    let mut y = vec![1.0f32; 1000];
    saxpy_mapped(Inputs { x: &x, a: 3.0 }, &mut y);
    let mut z = vec![1.0f32; 1000];
    axpy_struct(&mut Axpy {
        y: &mut z,
        x: &x,
        a: 3.0,
    });
    let mut owned = Owned {
        y: vec![1.0f32; 1000],
        x: x.clone(),
        a: 3.0,
    };
    axpy_owned(&mut owned);
    let mut w = vec![1.0f32; 1000];
    saxpy_owned(&owned, &mut w);
    y == want && z == want && owned.y == want && w == want
}

fn main() {
    if !mapped_forms_agree() {
        eprintln!("saxpy: the struct (mapper) forms disagree with the plain region");
        std::process::exit(1);
    }
    const N: usize = 1 << 24;
    let a = 2.5f32;
    let x: Vec<f32> = (0..N).map(|i| (i % 1024) as f32 * 0.5).collect();
    let mut y: Vec<f32> = (0..N).map(|i| (i % 333) as f32 - 100.0).collect();
    let expected: Vec<f32> = x.iter().zip(&y).map(|(&x, &y)| fma(a, x, y)).collect();

    let start = std::time::Instant::now();
    saxpy(a, &x, &mut y);
    let elapsed = start.elapsed();

    let wrong = y
        .iter()
        .zip(&expected)
        .filter(|(got, want)| got.to_bits() != want.to_bits())
        .count();
    println!(
        "saxpy: {N} elements in {:.1} ms on {} device(s); {wrong} wrong",
        elapsed.as_secs_f64() * 1e3,
        offload::omp_get_num_devices()
    );
    if wrong != 0 {
        let i = y
            .iter()
            .zip(&expected)
            .position(|(g, w)| g.to_bits() != w.to_bits())
            .unwrap_or(0);
        eprintln!(
            "first mismatch at {i}: got {}, expected {}",
            y[i], expected[i]
        );
        std::process::exit(1);
    }
}
