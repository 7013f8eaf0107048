//! A dot product as an OpenMP reduction on the default offload device, checked against the host.
//! `cargo run --release --example dot`

use offload::target;

#[target(teams_distribute_parallel_for, reduction(+: s))]
pub fn dot(x: &[f64], y: &[f64]) -> f64 {
    let mut s = 0.0;
    for i in 0..x.len() {
        s += x[i] * y[i];
    }
    s
}

fn main() {
    const N: usize = 1 << 22;
    let x: Vec<f64> = (0..N).map(|i| (i % 100) as f64 * 0.01).collect();
    let y: Vec<f64> = (0..N).map(|i| ((i * 7) % 13) as f64).collect();
    let want: f64 = x.iter().zip(&y).map(|(a, b)| a * b).sum();
    let got = dot(&x, &y);
    let rel = ((got - want) / want).abs();
    println!("dot: {got} (host {want}, relative difference {rel:.1e})");
    if rel > 1e-12 {
        std::process::exit(1);
    }
}
