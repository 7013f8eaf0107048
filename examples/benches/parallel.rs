//! Parallel regions against rayon and the clang-22 peer (libomptarget's x86_64 host plugin), side by side in one
//! run: STREAM triad and a dot product over 64M f32, data already present. Prints GB/s and ratios.
//! `cargo bench -p offload-examples --bench parallel`
//!
//! Targets (issue 4): at least 0.9x rayon and at least 1.0x the clang peer on both, and for dot at least 1.0x clang's
//! `teams distribute parallel for simd reduction`.

mod peer;

use offload::{target, target_data};
use rayon::prelude::*;
use std::hint::black_box;
use std::time::Instant;

const N: usize = 1 << 26;
const ROUNDS: usize = 5;

#[target(teams_distribute_parallel_for, if(on_device))]
fn triad(on_device: bool, s: f32, b: &[f32], c: &[f32], a: &mut [f32]) {
    for i in 0..a.len() {
        a[i] = b[i] + s * c[i];
    }
}

#[target(teams_distribute_parallel_for, reduction(+: d), if(on_device))]
fn dot(on_device: bool, b: &[f32], c: &[f32]) -> f32 {
    let mut d = 0.0;
    for i in 0..b.len() {
        d += b[i] * c[i];
    }
    d
}

/// Best of five, in seconds.
fn best(mut f: impl FnMut()) -> f64 {
    (0..5)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min)
}

fn gbs(arrays: usize, secs: f64) -> f64 {
    (arrays * N * 4) as f64 / secs / 1e9
}

fn main() {
    assert_eq!(
        offload::omp_get_num_devices(),
        1,
        "run with the host-elf device available"
    );
    let mut a = vec![0f32; N];
    let b = vec![1f32; N];
    let c = vec![2f32; N];
    let s = 3.0f32;

    // This machine is shared and its memory bandwidth drifts: ours and the peer take turns, each round's ratios
    // compare neighbours in time, and the median round is reported.
    let mut rounds: Vec<Round> = Vec::new();
    let mut peer_error = None;
    for _ in 0..ROUNDS {
        let (dev_triad, dev_dot) = target_data!(map(tofrom: a), map(to: b, c) => {
            (best(|| triad(true, s, b, c, a)), best(|| { black_box(dot(true, b, c)); }))
        });
        let host_triad = best(|| triad(false, s, &b, &c, &mut a));
        let host_dot = best(|| {
            black_box(dot(false, &b, &c));
        });
        let rayon_triad = best(|| {
            a.par_iter_mut()
                .zip(b.par_iter().zip(&c))
                .for_each(|(a, (b, c))| *a = b + s * c)
        });
        // Sums of 64M f32 are not exact in any order; the figures are bandwidth, the values are kept alive only.
        let rayon_dot = best(|| {
            black_box(b.par_iter().zip(&c).map(|(b, c)| b * c).sum::<f32>());
        });
        let peer = peer::run("parallel", &["-march=native"], &[N.to_string()]);
        let get = |k: &str| match &peer {
            Ok(p) => p.iter().find(|(n, _)| n == k).map_or(f64::NAN, |(_, v)| *v),
            Err(_) => f64::NAN,
        };
        rounds.push(Round {
            dev_triad: gbs(3, dev_triad),
            dev_dot: gbs(2, dev_dot),
            host_triad: gbs(3, host_triad),
            host_dot: gbs(2, host_dot),
            rayon_triad: gbs(3, rayon_triad),
            rayon_dot: gbs(2, rayon_dot),
            clang_triad: get("triad"),
            clang_dot: get("dot"),
            clang_dot_simd: get("dot_simd"),
        });
        peer_error = peer.err();
    }
    assert!(a.iter().all(|&v| v == 7.0));

    let best = |f: fn(&Round) -> f64| rounds.iter().map(f).fold(f64::NAN, f64::max);
    let ratio = |f: fn(&Round) -> f64| median(rounds.iter().map(f).collect());
    println!("STREAM triad, 64M f32 (GB/s, best of {ROUNDS} rounds):");
    println!("  ours, host-elf device   {:8.2}", best(|r| r.dev_triad));
    println!("  ours, host fallback     {:8.2}", best(|r| r.host_triad));
    println!("  rayon                   {:8.2}", best(|r| r.rayon_triad));
    println!("dot product, 64M f32 (GB/s):");
    println!("  ours, host-elf device   {:8.2}", best(|r| r.dev_dot));
    println!("  ours, host fallback     {:8.2}", best(|r| r.host_dot));
    println!("  rayon                   {:8.2}", best(|r| r.rayon_dot));
    println!(
        "ratios (median of the rounds'): triad device/rayon {:.2}, dot device/rayon {:.2} (target >= 0.9)",
        ratio(|r| r.dev_triad / r.rayon_triad),
        ratio(|r| r.dev_dot / r.rayon_dot)
    );
    match peer_error {
        None => {
            println!(
                "clang-22 peer on libomptarget's host plugin (GB/s): triad {:.2}, dot {:.2}, dot simd {:.2}",
                best(|r| r.clang_triad),
                best(|r| r.clang_dot),
                best(|r| r.clang_dot_simd)
            );
            println!(
                "ratios (median of the rounds'): triad device/clang {:.2}, dot device/clang {:.2}, \
                 dot device/clang simd {:.2} (target >= 1.0)",
                ratio(|r| r.dev_triad / r.clang_triad),
                ratio(|r| r.dev_dot / r.clang_dot),
                ratio(|r| r.dev_dot / r.clang_dot_simd)
            );
        }
        Some(why) => println!("peer not measured: {why}"),
    }
}

/// One round's figures, in GB/s.
struct Round {
    dev_triad: f64,
    dev_dot: f64,
    host_triad: f64,
    host_dot: f64,
    rayon_triad: f64,
    rayon_dot: f64,
    clang_triad: f64,
    clang_dot: f64,
    clang_dot_simd: f64,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}
