//! GPU-shaped programs for tests/gpu_sim.rs: the geometry a launch gets, how a loop is dealt to the threads, many
//! blocks with barriers, and panics in chosen threads. Prints `key=value` lines.

use core::sync::atomic::{AtomicU32, Ordering::Relaxed};
use offload::{
    barrier, omp_get_num_teams, omp_get_num_threads, omp_get_team_num, omp_get_thread_num,
    omp_is_initial_device, target,
};

/// Each thread records the geometry it sees: `seen[team * m + thread] = teams * 10000 + threads`.
#[target(teams, parallel, num_teams(3), thread_limit(200))]
fn census(seen: &[AtomicU32]) {
    let (t, n, i, m) = (
        omp_get_team_num(),
        omp_get_num_teams(),
        omp_get_thread_num(),
        omp_get_num_threads(),
    );
    seen[(t * m + i) as usize].store((n * 10000 + m) as u32, Relaxed);
}

/// The geometry a work-shared loop gets without clauses: `(teams, threads)` as `teams * 10000 + threads`.
#[target(teams_distribute_parallel_for)]
fn default_loop(y: &mut [u32]) -> u32 {
    for i in 0..y.len() {
        y[i] = 1;
    }
    (omp_get_num_teams() * 10000 + omp_get_num_threads()) as u32
}

/// The geometry a `teams, parallel` region gets without clauses.
#[target(teams, parallel)]
fn default_spmd() -> u32 {
    (omp_get_num_teams() * 10000 + omp_get_num_threads()) as u32
}

/// Which global thread ran each iteration.
#[target(teams_distribute_parallel_for, num_teams(4), thread_limit(32))]
fn owners(owner: &mut [u32]) -> u32 {
    for i in 0..owner.len() {
        owner[i] = (omp_get_team_num() * omp_get_num_threads() + omp_get_thread_num()) as u32;
    }
    (omp_get_num_teams() * omp_get_num_threads()) as u32
}

/// Thousands of blocks of 128 threads: each sums its thread numbers by a tree over shared memory, a barrier per
/// level; thread 0 writes its block's sum.
#[target(teams, parallel, num_teams(4096), thread_limit(128))]
fn tree_sums(sums: &[AtomicU32]) -> u32 {
    let (t, i, m) = (
        omp_get_team_num() as u32,
        omp_get_thread_num() as u32,
        omp_get_num_threads() as u32,
    );
    let total = offload::team_shared(128, |slots: &[AtomicU32]| {
        slots[i as usize].store(i + t, Relaxed);
        barrier();
        let mut stride = 1;
        while stride < m {
            if i % (2 * stride) == 0 && i + stride < m {
                let other = slots[(i + stride) as usize].load(Relaxed);
                slots[i as usize].fetch_add(other, Relaxed);
            }
            barrier();
            stride *= 2;
        }
        slots[0].load(Relaxed)
    });
    if i == 0 {
        sums[t as usize].store(total, Relaxed);
    }
    omp_get_num_teams() as u32
}

/// Thread `thread` of block `block` indexes past the end of `y` (which has 3 elements).
#[target(teams, parallel, num_teams(8), thread_limit(64))]
fn out_of_bounds(y: &[u32], block: i32, thread: i32) -> u32 {
    let (t, i) = (omp_get_team_num(), omp_get_thread_num());
    let k = if t == block && i == thread {
        i as usize
    } else {
        0
    };
    y[k]
}

/// Thread 3 of block 1 unwraps a `None`.
#[target(teams, parallel, num_teams(2), thread_limit(8))]
fn unwrap_none() -> u32 {
    let v = (omp_get_team_num() != 1 || omp_get_thread_num() != 3).then_some(1u32);
    v.unwrap()
}

/// Every thread of block 2 panics; the first to panic is reported.
#[target(teams, parallel, num_teams(4), thread_limit(16))]
fn explicit_panic(limit: u32) -> bool {
    if omp_get_team_num() == 2 {
        panic!("block 2 is over its limit of {limit}");
    }
    omp_is_initial_device()
}

/// Recursion with 2 KiB frames: `n` deep needs `2 n` KiB of stack.
#[offload::declare_target]
fn deep(n: u32) -> u32 {
    let frame = core::hint::black_box([n as u8; 2048]);
    if n == 0 {
        frame[0] as u32
    } else {
        deep(n - 1).wrapping_add(frame[1] as u32)
    }
}

/// Thread 3 of block 1 recurses `depth` deep; the others not at all.
#[target(teams, parallel, num_teams(2), thread_limit(8))]
fn recurse(depth: u32) -> u32 {
    let n = if omp_get_team_num() == 1 && omp_get_thread_num() == 3 {
        depth
    } else {
        0
    };
    deep(n)
}

/// Blocks of 1024 threads, each thread adding one.
#[target(teams, parallel, num_teams(16), thread_limit(1024))]
fn big_blocks(count: &AtomicU32) {
    count.fetch_add(1, Relaxed);
}

/// Every thread prints a line, through `offload::println!`, then a line of over 1000 bytes.
#[target(teams, parallel, num_teams(4), thread_limit(32))]
fn greet() {
    offload::println!(
        "hello from block {} thread {} of {}x{}",
        omp_get_team_num(),
        omp_get_thread_num(),
        omp_get_num_teams(),
        omp_get_num_threads()
    );
    offload::println!(
        "long line from block {} thread {}: {:-<1000}|",
        omp_get_team_num(),
        omp_get_thread_num(),
        ""
    );
}

/// Prints with a plain `print!` from a helper region code reaches, then fails.
fn shout(v: u32) {
    print!("value {v}");
    println!(" (shouted)");
}

/// One thread prints, in two calls (`print!`, then `println!`): a thread's calls are records of their own, between
/// which another thread's may come, so a second printing thread could split its line.
#[target(teams, parallel, num_teams(2), thread_limit(4))]
fn shout_then_fail() {
    if omp_get_team_num() == 1 && omp_get_thread_num() == 0 {
        shout(omp_get_team_num() as u32);
    }
    if omp_get_team_num() == 1 && omp_get_thread_num() == omp_get_num_threads() - 1 {
        panic!("done shouting");
    }
}

/// The process's memory mappings.
fn mappings() -> usize {
    std::fs::read_to_string("/proc/self/maps").map_or(0, |m| m.lines().count())
}

fn main() {
    let scenario = std::env::args().nth(1).unwrap_or_default();
    match scenario.as_str() {
        "geometry" => {
            let seen: Vec<AtomicU32> = (0..3 * 200).map(|_| AtomicU32::new(0)).collect();
            census(&seen);
            let values: Vec<u32> = seen.iter().map(|s| s.load(Relaxed)).collect();
            println!("census_all_ran={}", values.iter().all(|&v| v != 0));
            println!("census={}", values[0]);
            println!(
                "census_uniform={}",
                values.iter().all(|&v| v == values[0] || v == 0)
            );
            let mut y = vec![0u32; 10_000];
            println!("loop_geometry={}", default_loop(&mut y));
            println!("loop_correct={}", y.iter().all(|&v| v == 1));
            println!("spmd_geometry={}", default_spmd());
        }
        "grid-stride" => {
            let mut owner = vec![u32::MAX; 1000];
            let total = owners(&mut owner) as usize;
            println!("threads={total}");
            println!(
                "grid_stride={}",
                owner
                    .iter()
                    .enumerate()
                    .all(|(i, &o)| o as usize == i % total)
            );
            println!("contiguous={}", owner.windows(2).all(|w| w[0] <= w[1]));
        }
        "barriers" => {
            let sums: Vec<AtomicU32> = (0..4096).map(|_| AtomicU32::new(0)).collect();
            let start = std::time::Instant::now();
            let teams = tree_sums(&sums);
            println!("elapsed_ms={}", start.elapsed().as_millis());
            println!("teams={teams}");
            let want = |t: u32| 127 * 128 / 2 + 128 * t;
            println!(
                "sums_correct={}",
                (0..teams).all(|t| sums[t as usize].load(Relaxed) == want(t))
            );
        }
        "out-of-bounds" => {
            let y = [7u32; 3];
            println!("ok={}", try_out_of_bounds(&y, -1, -1).is_ok());
            match try_out_of_bounds(&y, 5, 17) {
                Ok(_) => println!("error=none"),
                Err(e) => println!("error={e}"),
            }
        }
        "unwrap-none" => match try_unwrap_none() {
            Ok(_) => println!("error=none"),
            Err(e) => println!("error={e}"),
        },
        "explicit-panic" => {
            match try_explicit_panic(9) {
                Ok(_) => println!("error=none"),
                Err(e) => println!("error={e}"),
            }
            // The device stays usable after a panic.
            println!("after_ok={}", try_default_spmd().is_ok());
        }
        "overflow" => {
            println!("shallow={}", recurse(10));
            println!("deep={}", recurse(1 << 20));
        }
        "stacks" => {
            let before = mappings();
            let count = AtomicU32::new(0);
            big_blocks(&count);
            println!("ran={}", count.load(Relaxed));
            println!("mappings_added={}", mappings().saturating_sub(before));
        }
        "print" => {
            greet();
            match try_shout_then_fail() {
                Ok(()) => println!("error=none"),
                Err(e) => println!("error={e}"),
            }
        }
        other => panic!("unknown scenario {other:?}"),
    }
}
