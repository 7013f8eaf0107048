//! Data-environment costs, side by side in one run with the peer: clang-22's OpenMP offloading on libomptarget's
//! x86_64 host plugin, built from `benches/peer/data_env.c` when `clang-22` is installed
//! (`apt-get install clang-22 libomp-22-dev liboffload-22-dev`). `cargo bench -p offload-examples --bench data_env`
//!
//! (a) enter plus exit of an already-present buffer; (b) a region launch with 16 present mapped arguments.
//! Target: ours/theirs <= 0.5 on both. Then the same calls, an empty region and a region mapping one 4 KiB
//! slice `tofrom` under `OFFLOAD_RUNTIME=llvm` (LLVM's libomptarget, where `liboffload-22-dev` is installed: the bench
//! runs itself again with it), beside ours.

mod peer;

use offload::{target, target_data};
use std::hint::black_box;
use std::time::Instant;

const N: usize = 1024;

#[allow(clippy::too_many_arguments)]
#[target]
fn touch16(
    a0: &mut [f32],
    a1: &mut [f32],
    a2: &mut [f32],
    a3: &mut [f32],
    a4: &mut [f32],
    a5: &mut [f32],
    a6: &mut [f32],
    a7: &mut [f32],
    a8: &mut [f32],
    a9: &mut [f32],
    a10: &mut [f32],
    a11: &mut [f32],
    a12: &mut [f32],
    a13: &mut [f32],
    a14: &mut [f32],
    a15: &mut [f32],
) {
    a0[0] += a1[0]
        + a2[0]
        + a3[0]
        + a4[0]
        + a5[0]
        + a6[0]
        + a7[0]
        + a8[0]
        + a9[0]
        + a10[0]
        + a11[0]
        + a12[0]
        + a13[0]
        + a14[0]
        + a15[0];
}

fn best_ns(iters: u32, mut f: impl FnMut()) -> f64 {
    (0..7)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..iters {
                f();
            }
            t.elapsed().as_nanos() as f64 / iters as f64
        })
        .fold(f64::INFINITY, f64::min)
}

#[target]
fn nothing() {}

#[target]
fn bump(y: &mut [f32]) {
    y[0] += 1.0;
}

/// An empty region, and one mapping a 4 KiB slice `tofrom` that is not present: (empty, fresh).
fn calls() -> (f64, f64) {
    let mut y = vec![0f32; N];
    let empty = best_ns(20_000, nothing);
    let fresh = best_ns(20_000, || bump(&mut y));
    (empty, fresh)
}

fn ours() -> (f64, f64) {
    let mut bufs: Vec<Vec<f32>> = (0..16).map(|_| vec![0f32; N]).collect();
    let [a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15] = &mut bufs[..]
    else {
        unreachable!()
    };
    target_data!(map(tofrom: a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15) => {
        let enter_exit = best_ns(200_000, || {
            target_data!(map(tofrom: a0) => { black_box(&a0); });
        });
        let launch16 = best_ns(50_000, || {
            touch16(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15);
        });
        (enter_exit, launch16)
    })
}

fn main() {
    if std::env::var("OFFLOAD_RUNTIME").as_deref() == Ok("llvm") {
        // Run again by the bench itself: the same calls on libomptarget, as `name value` lines.
        let (enter_exit, launch16) = ours();
        let (empty, fresh) = calls();
        println!("enter_exit {enter_exit}\nlaunch16 {launch16}\nempty {empty}\nfresh {fresh}");
        return;
    }
    assert_eq!(
        offload::omp_get_num_devices(),
        1,
        "run with the host-elf device available"
    );
    let (enter_exit, launch16) = ours();
    let (empty, fresh) = calls();
    println!("ours  enter+exit of a present buffer     : {enter_exit:8.1} ns/op");
    println!("ours  launch with 16 present mapped args : {launch16:8.1} ns/op");
    println!("ours  empty region                       : {empty:8.1} ns/op");
    println!("ours  region mapping 4 KiB tofrom        : {fresh:8.1} ns/op");
    let llvm = on_llvm(&[
        (
            "enter_exit",
            "enter+exit of a present buffer    ",
            enter_exit,
        ),
        ("launch16", "launch with 16 present mapped args", launch16),
        ("empty", "empty region                      ", empty),
        ("fresh", "region mapping 4 KiB tofrom       ", fresh),
    ]);
    match peer::run("data_env", &[], &[]) {
        Ok(peer) => {
            let get = |k: &str| {
                peer.iter()
                    .find(|(n, _)| n == k)
                    .map_or(f64::NAN, |(_, v)| *v)
            };
            let (pe, pu, pl) = (
                get("enter_exit"),
                get("enter_exit_unstructured"),
                get("launch16"),
            );
            println!("clang enter+exit (target data)            : {pe:8.1} ns/op");
            println!("clang enter+exit (target enter/exit data) : {pu:8.1} ns/op");
            println!("clang launch with 16 present mapped args  : {pl:8.1} ns/op");
            println!(
                "ratio ours/clang enter+exit  : {:.2}  (target <= 0.5)",
                enter_exit / pe
            );
            println!(
                "ratio ours/clang launch16    : {:.2}  (target <= 0.5)",
                launch16 / pl
            );
            if let Some(l) = &llvm {
                // The same libomptarget under both: what our calls add to it, against what clang's do.
                println!("ratio llvm/clang enter+exit  : {:.2}", l[0] / pe);
                println!("ratio llvm/clang launch16    : {:.2}", l[1] / pl);
            }
        }
        Err(why) => println!("peer not measured: {why}"),
    }
}

/// The same calls under `OFFLOAD_RUNTIME=llvm`, run by this bench again, beside ours (`name`, what, ours); their
/// figures in the same order, if it ran.
fn on_llvm(ours: &[(&str, &str, f64)]) -> Option<Vec<f64>> {
    let out = std::process::Command::new(std::env::current_exe().expect("the bench binary"))
        .env("OFFLOAD_RUNTIME", "llvm")
        .env("OMP_TARGET_OFFLOAD", "MANDATORY")
        .output();
    let out = match out {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).into_owned(),
        Ok(o) => {
            let err = String::from_utf8_lossy(&o.stderr);
            println!(
                "llvm  not measured: {}",
                err.lines().last().unwrap_or("it failed")
            );
            return None;
        }
        Err(e) => {
            println!("llvm  not measured: {e}");
            return None;
        }
    };
    let mut figures = Vec::new();
    for (name, what, mine) in ours {
        let theirs = out
            .lines()
            .filter_map(|l| l.split_once(' '))
            .find(|(n, _)| n == name)
            .and_then(|(_, v)| v.parse::<f64>().ok())
            .unwrap_or(f64::NAN);
        println!(
            "llvm  {what} : {theirs:8.1} ns/op   (OFFLOAD_RUNTIME=llvm / ours: {:.1})",
            theirs / mine
        );
        figures.push(theirs);
    }
    Some(figures)
}
