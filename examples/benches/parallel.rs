//! Parallel regions against rayon and the clang-22 peer (libomptarget's x86_64 host plugin), side by side in one
//! run: STREAM triad and a dot product over 64M f32, data already present. Prints GB/s and ratios.
//! `cargo bench -p offload-examples --bench parallel`
//!
//! Targets: at least 0.9x rayon and at least 1.0x the clang peer on both, and for dot at least 1.0x clang's
//! `teams distribute parallel for simd reduction`.

mod peer;

use offload::{target, target_data};
use rayon::prelude::*;
use std::hint::black_box;
use std::time::Instant;

const N: usize = 1 << 26;
/// This machine is shared and its memory bandwidth drifts by half from one minute to the next, so the contenders
/// take turns kernel by kernel (the peer stays running, its data set up once), each round's ratios compare
/// neighbours in time, and the median round's ratio is reported.
const ROUNDS: usize = 15;
const RUNS: usize = 5;

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

#[derive(Clone, Copy, PartialEq)]
enum Kernel {
    Triad,
    Dot,
}

#[derive(Clone, Copy, PartialEq)]
enum Who {
    Device,
    Fallback,
    Rayon,
    Clang,
    ClangSimd,
}
use Who::*;

const CONTENDERS: [(Kernel, Who, &str); 9] = [
    (Kernel::Triad, Device, "ours, host-elf device"),
    (Kernel::Triad, Fallback, "ours, host fallback"),
    (Kernel::Triad, Rayon, "rayon"),
    (Kernel::Triad, Clang, "clang-22 peer"),
    (Kernel::Dot, Device, "ours, host-elf device"),
    (Kernel::Dot, Fallback, "ours, host fallback"),
    (Kernel::Dot, Rayon, "rayon"),
    (Kernel::Dot, Clang, "clang-22 peer"),
    (Kernel::Dot, ClangSimd, "clang-22 peer, simd"),
];

/// Best of [`RUNS`], in GB/s.
fn best(bytes: usize, mut f: impl FnMut()) -> f64 {
    (0..RUNS)
        .map(|_| {
            let t = Instant::now();
            f();
            bytes as f64 / t.elapsed().as_secs_f64() / 1e9
        })
        .fold(0.0, f64::max)
}

fn main() {
    assert_eq!(
        offload::omp_get_num_devices(),
        1,
        "run with the host-elf device available"
    );
    let mut a = vec![0f32; N];
    // The host contenders' own output: inside the data region the device's copy of `a` is newer once its triad ran,
    // and the host fallback is refused rather than write over a stale host copy.
    let mut host_a = vec![0f32; N];
    let b = vec![1f32; N];
    let c = vec![2f32; N];
    let s = 3.0f32;
    let mut peer = peer::Session::start("parallel", &["-march=native"], &[N.to_string()]);

    // figures[contender][round], GB/s.
    let mut figures = vec![Vec::new(); CONTENDERS.len()];
    target_data!(map(tofrom: a), map(to: b, c) => {
        for round in 0..ROUNDS {
            // Alternate who goes first, so neither side always follows the other.
            let mut order: Vec<usize> = (0..CONTENDERS.len()).collect();
            if round % 2 == 1 {
                order.reverse();
            }
            for i in order {
                let (k, who, _) = CONTENDERS[i];
                let out = if who == Device { &mut *a } else { &mut host_a[..] };
                figures[i].push(measure(k, who, s, out, b, c, &mut peer));
            }
        }
    });
    assert!(a.iter().all(|&v| v == 7.0));
    assert!(host_a.iter().all(|&v| v == 7.0));
    print_figures(&figures, &peer);
    print_ratios(&figures);
}

/// One contender's figure for kernel `k` over `a = b + s * c` (triad) or `b . c` (dot), in GB/s.
fn measure(
    k: Kernel,
    who: Who,
    s: f32,
    a: &mut [f32],
    b: &[f32],
    c: &[f32],
    peer: &mut Result<peer::Session, String>,
) -> f64 {
    let bytes = match k {
        Kernel::Triad => 3 * N * 4,
        Kernel::Dot => 2 * N * 4,
    };
    match (k, who) {
        (Kernel::Triad, Device) => best(bytes, || triad(true, s, b, c, a)),
        (Kernel::Triad, Fallback) => best(bytes, || triad(false, s, b, c, a)),
        (Kernel::Triad, Rayon) => best(bytes, || {
            a.par_iter_mut()
                .zip(b.par_iter().zip(c))
                .for_each(|(a, (b, c))| *a = b + s * c)
        }),
        (Kernel::Dot, Device) => best(bytes, || {
            black_box(dot(true, b, c));
        }),
        (Kernel::Dot, Fallback) => best(bytes, || {
            black_box(dot(false, b, c));
        }),
        // Sums of 64M f32 are not exact in any order; the figures are bandwidth, the values kept alive only.
        (Kernel::Dot, Rayon) => best(bytes, || {
            black_box(b.par_iter().zip(c).map(|(b, c)| b * c).sum::<f32>());
        }),
        (k, who) => {
            let what = match (k, who) {
                (Kernel::Triad, _) => "triad",
                (_, Clang) => "dot",
                _ => "dot_simd",
            };
            match peer {
                Ok(p) => p.ask(what).unwrap_or_else(|e| {
                    eprintln!("{e}");
                    f64::NAN
                }),
                Err(_) => f64::NAN,
            }
        }
    }
}

/// Each kernel's contenders, their best figures.
fn print_figures(figures: &[Vec<f64>], peer: &Result<peer::Session, String>) {
    for (k, title) in [
        (Kernel::Triad, "STREAM triad, 64M f32"),
        (Kernel::Dot, "dot product, 64M f32"),
    ] {
        println!("{title} (GB/s, best of {ROUNDS} rounds of {RUNS} runs):");
        for (i, &(ck, _, name)) in CONTENDERS.iter().enumerate() {
            if ck == k {
                let best = figures[i].iter().copied().fold(f64::NAN, f64::max);
                println!("  {name:<24}{best:8.2}");
            }
        }
    }
    if let Err(why) = peer {
        println!("peer not measured: {why}");
    }
}

/// Ours (device and fallback) over each other contender, per kernel: the median of the rounds' ratios.
fn print_ratios(figures: &[Vec<f64>]) {
    let find = |k: Kernel, who: Who| {
        CONTENDERS
            .iter()
            .position(|&(ck, cw, _)| (ck, cw) == (k, who))
            .expect("a contender")
    };
    println!("ratios, the median of the rounds' (targets: >= 0.9 rayon, >= 1.0 clang):");
    for (k, kname) in [(Kernel::Triad, "triad"), (Kernel::Dot, "dot")] {
        for ours in [Device, Fallback] {
            let line: Vec<String> = [
                (Rayon, "rayon"),
                (Clang, "clang"),
                (ClangSimd, "clang simd"),
            ]
            .into_iter()
            .filter(|&(them, _)| k == Kernel::Dot || them != ClangSimd)
            .map(|(them, tname)| {
                let (o, t) = (&figures[find(k, ours)], &figures[find(k, them)]);
                let r = median(o.iter().zip(t).map(|(o, t)| o / t).collect());
                format!("/{tname} {r:.2}")
            })
            .collect();
            let oname = if ours == Device { "device" } else { "fallback" };
            println!("  {kname} {oname:<8} {}", line.join(", "));
        }
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}
