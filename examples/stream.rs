//! STREAM on the default offload device: copy, scale, add and triad over arrays kept on the device, each checked
//! against the host. `cargo run --release --example stream`

use offload::{target, target_data};

#[target(teams_distribute_parallel_for)]
fn copy(a: &[f32], c: &mut [f32]) {
    for i in 0..c.len() {
        c[i] = a[i];
    }
}

#[target(teams_distribute_parallel_for)]
fn scale(s: f32, c: &[f32], b: &mut [f32]) {
    for i in 0..b.len() {
        b[i] = s * c[i];
    }
}

#[target(teams_distribute_parallel_for)]
fn add(a: &[f32], b: &[f32], c: &mut [f32]) {
    for i in 0..c.len() {
        c[i] = a[i] + b[i];
    }
}

#[target(teams_distribute_parallel_for)]
pub fn triad(s: f32, b: &[f32], c: &[f32], a: &mut [f32]) {
    for i in 0..a.len() {
        a[i] = b[i] + s * c[i];
    }
}

fn main() {
    const N: usize = 1 << 22;
    let mut a = vec![1.0f32; N];
    let mut b = vec![2.0f32; N];
    let mut c = vec![0.0f32; N];
    let s = 3.0f32;
    let start = std::time::Instant::now();
    target_data!(map(tofrom: a, b, c) => {
        copy(a, c); // c = 1
        scale(s, c, b); // b = 3
        add(a, b, c); // c = 4
        triad(s, b, c, a); // a = 3 + 3 * 4 = 15
    });
    let ok = |v: &[f32], want: f32| v.iter().all(|&x| x == want);
    let good = ok(&a, 15.0) && ok(&b, 3.0) && ok(&c, 4.0);
    println!(
        "stream: {N} elements, 4 kernels in {:.1} ms on {} device(s): {}",
        start.elapsed().as_secs_f64() * 1e3,
        offload::omp_get_num_devices(),
        if good { "ok" } else { "WRONG" }
    );
    if !good {
        std::process::exit(1);
    }
}
