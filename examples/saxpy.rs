//! SAXPY on the default offload device: `y = a * x + y` over 16M elements, checked element by element against the
//! same computation on the host. Exits non-zero on any mismatch.
//!
//! `OFFLOAD_INFO=1 cargo run --release --example saxpy` shows where the region ran.

use offload::{declare_target, target};

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

fn main() {
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
