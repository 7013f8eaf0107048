//! Matrix multiply with `collapse(2)`: the `(i, j)` iteration space is shared out over teams and threads, each
//! element of `c` written by one thread. Checked against the host. `cargo run --release --example matmul`

use offload::target;

#[target(teams_distribute_parallel_for, collapse(2))]
pub fn matmul(n: usize, m: usize, k: usize, a: &[f32], b: &[f32], c: &mut [f32]) {
    for i in 0..n {
        for j in 0..m {
            let mut s = 0.0;
            for p in 0..k {
                s += a[i * k + p] * b[p * m + j];
            }
            c[i * m + j] = s;
        }
    }
}

fn main() {
    let (n, m, k) = (300, 200, 250);
    let a: Vec<f32> = (0..n * k).map(|i| (i % 17) as f32 * 0.25).collect();
    let b: Vec<f32> = (0..k * m).map(|i| (i % 13) as f32 - 6.0).collect();
    let mut c = vec![0f32; n * m];
    let start = std::time::Instant::now();
    matmul(n, m, k, &a, &b, &mut c);
    let elapsed = start.elapsed();
    let mut wrong = 0;
    for i in 0..n {
        for j in 0..m {
            let want: f32 = (0..k).map(|p| a[i * k + p] * b[p * m + j]).sum();
            if c[i * m + j] != want {
                wrong += 1;
            }
        }
    }
    println!(
        "matmul {n}x{k} * {k}x{m} in {:.1} ms: {wrong} wrong",
        elapsed.as_secs_f64() * 1e3
    );
    if wrong != 0 {
        std::process::exit(1);
    }
}
