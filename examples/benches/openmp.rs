//! OpenMP's common kernels against the clang-22 peer (`peer/openmp.c`, libomptarget's x86_64 host plugin), side by
//! side in one run: pi (1e8 steps, a `u64` loop), one Jacobi sweep of 2048x2048 (`collapse(2)` and
//! rows), n-body (4000 bodies, `thread_limit(256)` as the C code has it), a histogram (`teams, parallel` with
//! team-shared atomics), BabelStream's copy, mul, add, triad and dot (2^25 f64), and four ports of public OpenMP
//! programs, each as its C original shares the work out: one time step of hotspot3D (`hotspot3d`: 512x512x8 f32,
//! `collapse(2)` over the plane, each iteration walking its column through the layers), a CSR sparse matrix-vector
//! product (`spmv`: 2^19 rows of 10 to 30 nonzeros in pseudo-random columns), XSBench's event-based lookups on the
//! unionized grid (`xsbench`: 250 000 lookups, 68 nuclides of 1000 grid points, one verification value per lookup)
//! and miniBUDE's `fasten` (1024 poses in groups of 4 per iteration, bm1's 938 protein and 26 ligand atoms,
//! synthetic). Data is present on both sides. Prints times per call and the ratios ours/clang (lower is better).
//! `cargo bench -p offload-examples --bench openmp [-- NAME..]` (only the kernels whose names contain a NAME)
//!
//! Targets: at most 1.1x clang's time on pi, Jacobi, n-body and the histogram; at most 1.0x on BabelStream.
//! Issue 27: at most 1.1x on hotspot3D, SpMV, XSBench and fasten.

#[path = "kernels/histogram.rs"]
mod histogram;
#[path = "openmp/inputs.rs"]
mod inputs;
mod peer;
#[path = "openmp/ports.rs"]
mod ports;
#[path = "openmp/reference.rs"]
mod reference;

use crate::histogram::{histogram, BINS};
use core::sync::atomic::{AtomicU32, Ordering::Relaxed};
use inputs::{Data, Inputs};
use offload::{declare_target, target, target_data, target_update};
use ports::*;
use reference::{reference, verify};
use std::hint::black_box;
use std::time::Instant;

const PI_STEPS: u64 = 100_000_000;
const GRID: usize = 2048;
const BODIES: usize = 4000;
const HIST_N: usize = 1 << 24;
const STREAM_N: usize = 1 << 25;
#[declare_target]
const SOFTENING: f32 = 1e-9;
#[declare_target]
const DT: f32 = 0.01;
const SCALAR: f64 = 0.4;

/// This machine is shared (others build on its 2 cores) and its speed drifts from one second to the next, so the
/// contenders take turns kernel by kernel (the peer stays running, its data set up once), each round's ratio compares
/// neighbours in time, and the median round's ratio is reported. 7 rounds of 3 runs keep the whole bench near a
/// minute here.
const ROUNDS: usize = 7;
const RUNS: usize = 3;

#[target(teams_distribute_parallel_for, reduction(+: s), if(on_device))]
fn pi(on_device: bool, steps: u64) -> f64 {
    let step = 1.0 / steps as f64;
    let mut s = 0.0;
    for i in 0..steps {
        let x = (i as f64 + 0.5) * step;
        s += 4.0 / (1.0 + x * x);
    }
    s
}

/// `pi` over a `usize` loop: a `u64` loop (C's `long`) should cost no more (issue: within 1.15x).
#[target(teams_distribute_parallel_for, reduction(+: s), if(on_device))]
fn pi_usize(on_device: bool, steps: usize) -> f64 {
    let step = 1.0 / steps as f64;
    let mut s = 0.0;
    for i in 0..steps {
        let x = (i as f64 + 0.5) * step;
        s += 4.0 / (1.0 + x * x);
    }
    s
}

// One Jacobi sweep (without its residual, so both forms do the same work).
#[target(teams_distribute_parallel_for, collapse(2), if(on_device))]
fn jacobi_collapse(on_device: bool, n: usize, m: usize, a: &[f64], anew: &mut [f64]) {
    for j in 1..n - 1 {
        for i in 1..m - 1 {
            anew[j * m + i] = 0.25
                * (a[j * m + i + 1] + a[j * m + i - 1] + a[(j - 1) * m + i] + a[(j + 1) * m + i]);
        }
    }
}

#[target(teams_distribute_parallel_for, if(on_device))]
fn jacobi_rows(on_device: bool, n: usize, m: usize, a: &[f64], anew: &mut [f64]) {
    for j in 1..n - 1 {
        for i in 1..m - 1 {
            anew[j * m + i] = 0.25
                * (a[j * m + i + 1] + a[j * m + i - 1] + a[(j - 1) * m + i] + a[(j + 1) * m + i]);
        }
    }
}

/// mini-nbody's force step; positions apart from the velocities the threads write (each its own body's).
#[target(teams_distribute_parallel_for, thread_limit(256), if(on_device))]
fn nbody(on_device: bool, p: &[[f32; 4]], v: &mut [[f32; 4]]) {
    for i in 0..v.len() {
        let (mut fx, mut fy, mut fz) = (0.0f32, 0.0f32, 0.0f32);
        for j in 0..p.len() {
            let (dx, dy, dz) = (p[j][0] - p[i][0], p[j][1] - p[i][1], p[j][2] - p[i][2]);
            let d2 = dx * dx + dy * dy + dz * dz + SOFTENING;
            let inv = 1.0 / d2.sqrt();
            let inv3 = inv * inv * inv;
            fx += dx * inv3;
            fy += dy * inv3;
            fz += dz * inv3;
        }
        v[i][0] += DT * fx;
        v[i][1] += DT * fy;
        v[i][2] += DT * fz;
    }
}

// BabelStream's kernels.
#[target(teams_distribute_parallel_for, if(on_device))]
fn copy(on_device: bool, a: &[f64], c: &mut [f64]) {
    for i in 0..c.len() {
        c[i] = a[i];
    }
}

#[target(teams_distribute_parallel_for, if(on_device))]
fn mul(on_device: bool, scalar: f64, c: &[f64], b: &mut [f64]) {
    for i in 0..b.len() {
        b[i] = scalar * c[i];
    }
}

#[target(teams_distribute_parallel_for, if(on_device))]
fn add(on_device: bool, a: &[f64], b: &[f64], c: &mut [f64]) {
    for i in 0..c.len() {
        c[i] = a[i] + b[i];
    }
}

#[target(teams_distribute_parallel_for, if(on_device))]
fn triad(on_device: bool, scalar: f64, b: &[f64], c: &[f64], a: &mut [f64]) {
    for i in 0..a.len() {
        a[i] = b[i] + scalar * c[i];
    }
}

#[target(teams_distribute_parallel_for, reduction(+: sum), if(on_device))]
fn dot(on_device: bool, a: &[f64], b: &[f64]) -> f64 {
    let mut sum = 0.0;
    for i in 0..a.len() {
        sum += a[i] * b[i];
    }
    sum
}

const KERNELS: [(&str, f64); 14] = [
    ("pi", 1.1),
    ("jacobi_collapse", 1.1),
    ("jacobi_rows", 1.1),
    ("nbody", 1.1),
    ("histogram", 1.1),
    ("copy", 1.0),
    ("mul", 1.0),
    ("add", 1.0),
    ("triad", 1.0),
    ("dot", 1.0),
    ("hotspot3d", 1.1),
    ("spmv", 1.1),
    ("xsbench", 1.1),
    ("fasten", 1.1),
];
const DEVICE: usize = 0;
const FALLBACK: usize = 1;
const CLANG: usize = 2;

/// `(teams, threads per team)` of the histogram: teams of 2 threads, so the team-shared atomics are shared.
fn hist_geometry() -> (u32, u32) {
    let hw = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
    ((hw / 2).max(1), 2.min(hw))
}

/// Runs kernel `k` once, ours on the device or in the host fallback.
fn run(k: &str, on_device: bool, d: &mut Data) {
    let (teams, threads) = hist_geometry();
    match k {
        "pi" => {
            black_box(pi(on_device, PI_STEPS));
        }
        "jacobi_collapse" => jacobi_collapse(on_device, GRID, GRID, d.a, d.anew),
        "jacobi_rows" => jacobi_rows(on_device, GRID, GRID, d.a, d.anew),
        "nbody" => nbody(on_device, d.pos, d.vel),
        "histogram" => histogram(on_device, teams, threads, d.hdata, d.hist),
        "copy" => copy(on_device, d.sa, d.sc),
        "mul" => mul(on_device, SCALAR, d.sc, d.sb),
        "add" => add(on_device, d.sa, d.sb, d.sc),
        "triad" => triad(on_device, SCALAR, d.sb, d.sc, d.sa),
        "dot" => {
            black_box(dot(on_device, d.sa, d.sb));
        }
        "hotspot3d" => hotspot3d(
            on_device, HS_NX, HS_NY, HS_NZ, d.hs_power, d.hs_in, d.hs_out,
        ),
        "spmv" => spmv(on_device, d.sp_row, d.sp_col, d.sp_val, d.sp_x, d.sp_y),
        "xsbench" => xsbench(on_device, XS_INPUTS, d.xs, d.xs_verification),
        "fasten" => fasten(
            on_device,
            d.protein,
            d.ligand,
            d.forcefield,
            d.poses,
            d.energies,
        ),
        _ => unreachable!("{k}"),
    }
}

/// Best time of [`RUNS`] calls, in seconds.
fn best(mut f: impl FnMut()) -> f64 {
    (0..RUNS)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min)
}

fn stream_init(sa: &mut [f64], sb: &mut [f64], sc: &mut [f64]) {
    sa.fill(0.1);
    sb.fill(0.2);
    sc.fill(0.0);
}

/// The sum of `x[i] * (i % 13 + 1)`: a value moved to another element changes it.
fn weighted(x: impl IntoIterator<Item = f64>) -> f64 {
    x.into_iter()
        .enumerate()
        .map(|(i, v)| v * (i % 13 + 1) as f64)
        .sum()
}

/// A deterministic fraction in [0, 1), the inputs' building block (the peer has the same).
fn unit(k: usize, p: usize) -> f64 {
    ((k * p) % 1009) as f64 / 1009.0
}

fn interior_sum(anew: &[f64]) -> f64 {
    (1..GRID - 1)
        .flat_map(|j| (1..GRID - 1).map(move |i| j * GRID + i))
        .map(|k| anew[k])
        .sum()
}

fn min_max(x: &[f64]) -> [f64; 2] {
    x.iter()
        .fold([f64::INFINITY, f64::NEG_INFINITY], |[lo, hi], &v| {
            [lo.min(v), hi.max(v)]
        })
}

/// Ours: one run of every kernel from the initial state, the figures as the peer's `check` gives them.
fn check(on_device: bool, d: &mut Data) -> Vec<f64> {
    // On the device the outputs start from zero there (`to` after zeroing) and come back (`from`); in the host
    // fallback the kernels work on the host arrays themselves.
    macro_rules! to_device {
        ($($x:ident),*) => {
            if on_device {
                $(let x = &mut *d.$x; target_update!(to: x);)*
            }
        };
    }
    macro_rules! from_device {
        ($($x:ident),*) => {
            if on_device {
                $(let x = &mut *d.$x; target_update!(from: x);)*
            }
        };
    }
    let mut out = vec![pi(on_device, PI_STEPS) / PI_STEPS as f64];
    for collapse in [true, false] {
        d.anew.fill(0.0);
        to_device!(anew);
        if collapse {
            jacobi_collapse(on_device, GRID, GRID, d.a, d.anew)
        } else {
            jacobi_rows(on_device, GRID, GRID, d.a, d.anew)
        }
        from_device!(anew);
        out.push(interior_sum(d.anew));
    }
    d.vel.fill([0.0; 4]);
    to_device!(vel);
    nbody(on_device, d.pos, d.vel);
    from_device!(vel);
    out.push(
        d.vel
            .iter()
            .map(|v| v[..3].iter().map(|c| c.abs() as f64).sum::<f64>())
            .sum(),
    );
    d.hist.iter().for_each(|h| h.store(0, Relaxed));
    if on_device {
        let hist = &mut *d.hist;
        target_update!(to: hist);
    }
    run("histogram", on_device, d);
    if on_device {
        let hist = &mut *d.hist;
        target_update!(from: hist);
    }
    let hist: Vec<u32> = d.hist.iter().map(|h| h.load(Relaxed)).collect();
    out.push(
        hist.iter()
            .enumerate()
            .map(|(b, &h)| h as f64 * (b + 1) as f64)
            .sum(),
    );
    out.push(hist.iter().map(|&h| h as f64).sum());
    stream_init(d.sa, d.sb, d.sc);
    to_device!(sa, sb, sc);
    for k in ["copy", "mul", "add", "triad"] {
        run(k, on_device, d);
    }
    let dot = dot(on_device, d.sa, d.sb);
    from_device!(sa, sb, sc);
    for x in [&*d.sa, &*d.sb, &*d.sc] {
        out.extend(min_max(x));
    }
    out.push(dot);
    d.hs_out.fill(0.0);
    to_device!(hs_out);
    run("hotspot3d", on_device, d);
    from_device!(hs_out);
    out.push(weighted(d.hs_out.iter().map(|&t| t as f64)));
    d.sp_y.fill(0.0);
    to_device!(sp_y);
    run("spmv", on_device, d);
    from_device!(sp_y);
    out.push(weighted(d.sp_y.iter().copied()));
    d.xs_verification.fill(0);
    to_device!(xs_verification);
    run("xsbench", on_device, d);
    from_device!(xs_verification);
    out.push(d.xs_verification.iter().sum::<u64>() as f64);
    d.energies.fill(0.0);
    to_device!(energies);
    run("fasten", on_device, d);
    from_device!(energies);
    out.push(weighted(d.energies.iter().map(|&e| e as f64)));
    out
}

/// The peer is built for the x86-64 level this program is (and so its host image and fallback are), so both sides
/// have the same instructions: `RUSTFLAGS=-Ctarget-cpu=native` compares native with native.
fn peer_march() -> &'static str {
    if cfg!(target_feature = "avx512f") {
        "-march=x86-64-v4"
    } else if cfg!(target_feature = "avx2") {
        "-march=x86-64-v3"
    } else if cfg!(target_feature = "sse4.2") {
        "-march=x86-64-v2"
    } else {
        "-march=x86-64"
    }
}

fn main() {
    let started = Instant::now();
    // Cargo passes `--bench`; any other argument picks kernels by name.
    let only: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let picked = |name: &str| only.is_empty() || only.iter().any(|o| name.contains(o.as_str()));
    assert_eq!(
        offload::omp_get_num_devices(),
        1,
        "run with the host-elf device available"
    );
    let inputs = Inputs::new();
    let mut fallback_inputs = Inputs::new();
    let want = reference(&inputs);
    let Inputs {
        a,
        mut anew,
        pos,
        mut vel,
        hdata,
        mut hist,
        mut sa,
        mut sb,
        mut sc,
        hs_power,
        hs_in,
        mut hs_out,
        sp_row,
        sp_col,
        sp_val,
        sp_x,
        mut sp_y,
        xs_num_nucs,
        xs_concs,
        xs_mats,
        xs_egrid,
        xs_index,
        xs_grid,
        mut xs_verification,
        protein,
        ligand,
        forcefield,
        poses,
        mut energies,
    } = inputs;
    let (teams, threads) = hist_geometry();
    // miniBUDE's sinf and cosf come from libm.
    let mut peer =
        peer::Session::start("openmp", &[peer_march(), "-lm"], &peer_args(teams, threads));
    let xs = SimulationData {
        num_nucs: &xs_num_nucs,
        concs: &xs_concs,
        mats: &xs_mats,
        unionized_energy_array: &xs_egrid,
        index_grid: &xs_index,
        nuclide_grid: &xs_grid,
    };

    // times[kernel][contender][round], seconds.
    let mut times = vec![vec![Vec::new(); 3]; KERNELS.len()];
    // The block's value: it runs in a closure, which cannot initialize a `let ok;` declared outside it.
    let (ok, set_up) = target_data!(
        map(to: a, pos, hdata, hs_power, hs_in, sp_row, sp_col, sp_val, sp_x, xs, protein, ligand, forcefield, poses),
        map(tofrom: anew, vel, hist, sa, sb, sc, hs_out, sp_y, xs_verification, energies) => {
        let mut d = Data {
            a, anew, pos, vel, hdata, hist, sa, sb, sc, hs_power, hs_in, hs_out, sp_row, sp_col, sp_val, sp_x, sp_y, xs: *xs,
            xs_verification, protein, ligand, forcefield, poses, energies,
        };
        let ok = check_all(&mut d, &mut peer, &want);
        let set_up = started.elapsed().as_secs_f64();
        measure(&mut d, &mut fallback_inputs.data(), &mut peer, &picked, &mut times);
        (ok, set_up)
    });

    print_table(&times, &picked, &peer, (teams, threads));
    print_side_targets(&times, &picked);
    println!(
        "({:.0} s, of which {set_up:.0} s setting up and checking)",
        started.elapsed().as_secs_f64()
    );
    assert!(ok, "a kernel computed a wrong result (above)");
}

/// The peer's command line: the sizes, the histogram's geometry, the runs per measurement, the ports' sizes.
fn peer_args(teams: u32, threads: u32) -> [String; 14] {
    [
        PI_STEPS.to_string(),
        GRID.to_string(),
        BODIES.to_string(),
        HIST_N.to_string(),
        teams.to_string(),
        threads.to_string(),
        STREAM_N.to_string(),
        RUNS.to_string(),
        HS_NX.to_string(),
        HS_NY.to_string(),
        HS_NZ.to_string(),
        SPMV_ROWS.to_string(),
        XS_LOOKUPS.to_string(),
        POSES.to_string(),
    ]
}

/// Every contender's results against the reference: ours on the device and in the fallback, and the peer's.
fn check_all(d: &mut Data, peer: &mut Result<peer::Session, String>, want: &[f64]) -> bool {
    let mut ok = true;
    ok &= verify("ours, host-elf device", &check(true, d), want);
    ok &= verify("ours, host fallback", &check(false, d), want);
    if let Ok(p) = peer {
        match p.ask_all("check") {
            Ok(got) => ok &= verify("clang-22 peer", &got, want),
            Err(e) => {
                println!("{e}");
                ok = false;
            }
        }
    }
    ok
}

/// [`ROUNDS`] rounds of every picked kernel, the contenders taking turns, into `times[kernel][contender]`. The host
/// fallback runs on `host`, data of its own: `d`'s device copies are newer than its host copies once a kernel ran
/// there, and the host fallback never computes on a stale copy (it would be refused).
fn measure(
    d: &mut Data,
    host: &mut Data,
    peer: &mut Result<peer::Session, String>,
    picked: &dyn Fn(&str) -> bool,
    times: &mut [Vec<Vec<f64>>],
) {
    for round in 0..ROUNDS {
        for (k, &(name, _)) in KERNELS.iter().enumerate() {
            if !picked(name) {
                continue;
            }
            // Alternate who goes first, so neither side always follows the other.
            let mut order = [DEVICE, FALLBACK, CLANG];
            if round % 2 == 1 {
                order.reverse();
            }
            for who in order {
                let t = match who {
                    DEVICE => best(|| run(name, true, d)),
                    FALLBACK => best(|| run(name, false, host)),
                    _ => match peer {
                        Ok(p) => p.ask(name).unwrap_or_else(|e| {
                            eprintln!("{e}");
                            f64::NAN
                        }),
                        Err(_) => f64::NAN,
                    },
                };
                times[k][who].push(t);
            }
        }
    }
}

/// The table of times and ratios per kernel, each against its target, then whether all were met (or why the peer was
/// not measured).
fn print_table(
    times: &[Vec<Vec<f64>>],
    picked: &dyn Fn(&str) -> bool,
    peer: &Result<peer::Session, String>,
    (teams, threads): (u32, u32),
) {
    println!(
        "OpenMP kernels, ms per call (best of {ROUNDS} rounds of {RUNS} runs); ratios ours/clang, the median round's \
         (lower is better); peer built -O3 {}; histogram {teams} team(s) x {threads} threads",
        peer_march()
    );
    println!(
        "  {:<16}{:>10}{:>10}{:>10}{:>9}{:>9}{:>8}",
        "kernel", "device", "fallback", "clang", "dev/cl", "fb/cl", "target"
    );
    let mut met = true;
    for (k, &(name, target)) in KERNELS.iter().enumerate() {
        if !picked(name) {
            continue;
        }
        let ms = |who: usize| times[k][who].iter().copied().fold(f64::NAN, f64::min) * 1e3;
        let ratio = |who: usize| {
            median(
                times[k][who]
                    .iter()
                    .zip(&times[k][CLANG])
                    .map(|(o, t)| o / t)
                    .collect(),
            )
        };
        let (rd, rf) = (ratio(DEVICE), ratio(FALLBACK));
        // The targets are for ours on the device; the host fallback's ratio is shown beside it.
        let verdict = if rd.is_nan() {
            "-"
        } else if rd <= target {
            "met"
        } else {
            met = false;
            "NOT met"
        };
        println!(
            "  {name:<16}{:>10.2}{:>10.2}{:>10.2}{rd:>9.2}{rf:>9.2}{:>8} {verdict}",
            ms(DEVICE),
            ms(FALLBACK),
            ms(CLANG),
            format!("<={target}")
        );
    }
    if let Err(why) = peer {
        println!("peer not measured: {why}");
    } else {
        println!(
            "targets (ours on the device): {}",
            if met { "all met" } else { "not all met" }
        );
    }
}

/// Ours against ours, on the device: the stencil target (the collapsed nest within 1.2x of sharing the rows),
/// and a `u64` loop variable against `usize` (measured here, alternating).
fn print_side_targets(times: &[Vec<Vec<f64>>], picked: &dyn Fn(&str) -> bool) {
    if picked("jacobi_collapse") && picked("jacobi_rows") {
        let at = |name: &str| KERNELS.iter().position(|k| k.0 == name).expect("a kernel");
        let (c, r) = (at("jacobi_collapse"), at("jacobi_rows"));
        let ratios = times[c][DEVICE]
            .iter()
            .zip(&times[r][DEVICE])
            .map(|(c, r)| c / r)
            .collect();
        println!(
            "Jacobi, collapse(2) / rows on the device: {:.2} (target <= 1.2)",
            median(ratios)
        );
    }
    if picked("pi") {
        let ratios: Vec<f64> = (0..ROUNDS)
            .map(|_| {
                let wide = best(|| {
                    std::hint::black_box(pi(true, PI_STEPS));
                });
                let native = best(|| {
                    std::hint::black_box(pi_usize(true, PI_STEPS as usize));
                });
                wide / native
            })
            .collect();
        println!(
            "pi, u64 loop / usize loop on the device: {:.2} (target <= 1.15)",
            median(ratios)
        );
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}
