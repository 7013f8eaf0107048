//! A chunked pipeline, OpenMP's `target update to(..) nowait depend(out: ..)`, `target nowait depend(inout: ..)`,
//! `target update from(..) nowait depend(in: ..)` per chunk, written with tasks: the buffer is mapped once
//! (`target_data!(map(alloc: ..))`), split into chunks, and each chunk is one task that copies its part in, runs the
//! kernel on it and copies it out, so one chunk's copies overlap another's kernel. The dependences are the borrows:
//! each task holds `&mut` its own chunk, and the steps of a task run in order. Checked against one synchronous
//! region over the whole buffer; exits non-zero on any difference.
//!
//! `cargo run --release --example pipeline [chunks]`

use offload::{target, target_data, target_update, task_scope};
use std::time::Instant;

const LEN: usize = 1 << 22;

/// A few flops per element, so the kernel is worth overlapping.
#[target(teams_distribute_parallel_for)]
fn smooth(y: &mut [f32]) {
    for i in 0..y.len() {
        let mut v = y[i];
        for _ in 0..8 {
            v = v * 0.5 + 1.0;
        }
        y[i] = v;
    }
}

fn main() {
    let chunks: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(8)
        .max(1);
    let input: Vec<f32> = (0..LEN).map(|i| (i % 1000) as f32).collect();

    let mut whole = input.clone();
    let start = Instant::now();
    smooth(&mut whole);
    let synchronous = start.elapsed();

    let mut y = input.clone();
    let start = Instant::now();
    target_data!(map(alloc: y) => {
        task_scope(|s| {
            for part in y.chunks_mut(LEN.div_ceil(chunks)) {
                drop(s.spawn(move || {
                    target_update!(to: part);
                    smooth(part);
                    target_update!(from: part);
                }));
            }
        });
    });
    let pipelined = start.elapsed();

    if y != whole {
        let wrong = y.iter().zip(&whole).filter(|(a, b)| a != b).count();
        eprintln!("pipeline: {wrong} of {LEN} elements differ from the synchronous region");
        std::process::exit(1);
    }
    println!(
        "pipeline: {LEN} elements in {chunks} chunks: {:.1} ms, one synchronous region {:.1} ms; results equal",
        pipelined.as_secs_f64() * 1e3,
        synchronous.as_secs_f64() * 1e3
    );
}
