//! 2-D Jacobi over MPI ranks, one device each: the grid's interior rows are split among the ranks; each
//! keeps its slab and two halo rows resident on its device (`target_enter_data!`), sweeps it in a region, moves only
//! its boundary rows between device and host (`target_update!` of sections), swaps them with its neighbours over
//! MPI, and reduces the residual (a max, so every decomposition gives the same bits) with an all-reduce. Rank 0
//! gathers the grid and prints its hash, which equals the single-process run's bit for bit.
//!
//! ```text
//! cargo offload run --ranks 2 -p offload-examples --features mpi --release --example jacobi_mpi -- 512 512 200
//! mpirun -np 3 -x OFFLOAD_BIND=local-rank target/release/examples/jacobi_mpi 512 512 200
//! ```
//!
//! With `--direct`, the halo rows go to MPI straight from device memory, with no `target_update!`: valid where the
//! device's memory is host memory of this process (host-elf, gpu-sim), and on GPUs only with a CUDA-aware MPI (see
//! the guide, `docs/src/nodes.md`); elsewhere the program refuses.

use mpi::collective::SystemOperation;
use mpi::point_to_point::send_receive_into;
use mpi::traits::*;
use offload::{
    omp_get_default_device, omp_get_mapped_ptr, target, target_enter_data, target_update,
};
use std::time::Instant;

/// One sweep of the slab's interior rows `1..=rows` (row 0 and `rows + 1` are halos); returns the largest change.
#[target(teams_distribute_parallel_for, collapse(2), reduction(max: r))]
pub fn sweep(rows: usize, nx: usize, u: &[f64], unew: &mut [f64]) -> f64 {
    let mut r = 0.0f64;
    for i in 1..rows + 1 {
        for j in 1..nx - 1 {
            let v = 0.25
                * (u[(i - 1) * nx + j]
                    + u[(i + 1) * nx + j]
                    + u[i * nx + j - 1]
                    + u[i * nx + j + 1]);
            unew[i * nx + j] = v;
            r = r.max((v - u[i * nx + j]).abs());
        }
    }
    r
}

/// The interior rows (of `1..ny - 1`) rank `rank` of `size` owns: a contiguous run, the first ranks one row more.
fn slab(ny: usize, rank: usize, size: usize) -> (usize, usize) {
    let interior = ny - 2;
    let (base, extra) = (interior / size, interior % size);
    let first = 1 + rank * base + rank.min(extra);
    (first, base + usize::from(rank < extra))
}

/// FNV-1a over the values' bits: equal hashes, equal grids.
fn hash(values: &[f64]) -> u64 {
    values.iter().fold(0xcbf2_9ce4_8422_2325, |h, v| {
        v.to_bits()
            .to_le_bytes()
            .iter()
            .fold(h, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3))
    })
}

/// The device copy of `host[at..at + len]`, for MPI to read or write directly (`--direct`).
///
/// # Safety
/// `host` is mapped on the default device, whose memory is host memory of this process, and nothing else uses the
/// range while the slice lives.
unsafe fn device_rows<'a>(host: &[f64], at: usize, len: usize) -> &'a mut [f64] {
    let base = omp_get_mapped_ptr(host.as_ptr().cast(), omp_get_default_device()) as *mut f64;
    assert!(!base.is_null(), "the slab is mapped");
    // SAFETY: per the contract; the mapping covers the whole slab.
    unsafe { std::slice::from_raw_parts_mut(base.add(at), len) }
}

fn main() {
    let (nx, ny, iters, direct) = parse_args();
    let universe = mpi::initialize().expect("MPI initialises once");
    let world = universe.world();
    let (rank, size) = (world.rank() as usize, world.size() as usize);
    abort_on_panic(rank);
    refuse_unless_runnable(rank, size, ny, direct);
    let (first, rows) = slab(ny, rank, size);
    // The slab with its halo rows: global rows first - 1 ..= first + rows. The top edge is held at 1, the others at 0.
    let mut init = vec![0.0f64; (rows + 2) * nx];
    if first == 1 {
        init[..nx].fill(1.0);
    }
    let next = init.clone();
    let mut u = target_enter_data!(map(to: init));
    let mut unew = target_enter_data!(map(to: next));
    let up = (rank > 0).then(|| world.process_at_rank(rank as i32 - 1));
    let down = (rank + 1 < size).then(|| world.process_at_rank(rank as i32 + 1));

    let start = Instant::now();
    let mut residual = 0.0f64;
    for _ in 0..iters {
        exchange_halos(&mut u, nx, rows, direct, up.as_ref(), down.as_ref());
        let local = sweep(rows, nx, &u, &mut unew);
        std::mem::swap(&mut u, &mut unew);
        world.all_reduce_into(&local, &mut residual, SystemOperation::max());
    }
    let elapsed = start.elapsed();
    target_update!(from: u);

    // Rank 0 gathers every slab's interior rows, in order, with the fixed top and bottom rows.
    let mine = &u[nx..(rows + 1) * nx];
    let root = world.process_at_rank(0);
    if rank == 0 {
        let mut grid = vec![0.0f64; nx * ny];
        grid[..nx].fill(1.0);
        grid[nx..(1 + rows) * nx].copy_from_slice(mine);
        for r in 1..size {
            let (f, n) = slab(ny, r, size);
            world
                .process_at_rank(r as i32)
                .receive_into(&mut grid[f * nx..(f + n) * nx]);
        }
        println!(
            "jacobi {nx}x{ny}, {iters} iterations, {size} rank(s){}: residual {residual:e}, grid hash {:016x}, {:.1} ms",
            if direct { ", halos from device memory" } else { "" },
            hash(&grid),
            elapsed.as_secs_f64() * 1e3
        );
    } else {
        root.send(mine);
    }
}

/// `[NX NY ITERATIONS] [--direct]`: the grid, the sweeps, and whether halos go to MPI from device memory.
fn parse_args() -> (usize, usize, usize, bool) {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let direct = args.iter().any(|a| a == "--direct");
    let nums: Vec<usize> = args.iter().filter_map(|a| a.parse().ok()).collect();
    let (nx, ny, iters) = match nums[..] {
        [nx, ny, iters] if nx >= 3 && ny >= 3 => (nx, ny, iters),
        [] => (256, 256, 100),
        _ => {
            eprintln!("usage: jacobi_mpi [NX NY ITERATIONS] [--direct]  (NX, NY at least 3)");
            std::process::exit(2);
        }
    };
    (nx, ny, iters, direct)
}

/// A panicking rank must end at once: unwinding drops `universe`, whose MPI_Finalize waits for the other ranks,
/// which wait for this one, and the job would hang instead of failing.
fn abort_on_panic(rank: usize) {
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        eprintln!("jacobi_mpi: rank {rank} failed:");
        report(info);
        std::process::abort();
    }));
}

/// Exits (rank 0 saying why) when every rank cannot have a row, or `--direct` cannot work on the default device.
fn refuse_unless_runnable(rank: usize, size: usize, ny: usize, direct: bool) {
    if size > ny - 2 {
        if rank == 0 {
            eprintln!("{size} ranks for {} interior rows: use fewer ranks", ny - 2);
        }
        std::process::exit(2);
    }
    if direct && !device_memory_is_host() {
        if rank == 0 {
            eprintln!(
                "--direct passes device memory to MPI, which needs the device's memory to be this process's (host-elf, \
                 gpu-sim) or a CUDA-aware MPI; the default device is neither, so exchange through the host instead"
            );
        }
        std::process::exit(2);
    }
}

/// Halos: each rank's first interior row of `u` (the slab, `rows` interior rows of `nx`) goes up, its last goes
/// down, and the neighbours' come back into the halo rows, on the device; straight from device memory if `direct`.
fn exchange_halos(
    u: &mut offload::Mapped<Vec<f64>>,
    nx: usize,
    rows: usize,
    direct: bool,
    up: Option<&mpi::topology::Process<'_>>,
    down: Option<&mpi::topology::Process<'_>>,
) {
    let (top, bottom) = (nx..2 * nx, rows * nx..(rows + 1) * nx);
    let (halo_top, halo_bottom) = (0..nx, (rows + 1) * nx..(rows + 2) * nx);
    if direct {
        // SAFETY: `u` is mapped; the ranges are disjoint rows; no region runs meanwhile.
        let (t, b, ht, hb) = unsafe {
            (
                device_rows(u, top.start, nx),
                device_rows(u, bottom.start, nx),
                device_rows(u, halo_top.start, nx),
                device_rows(u, halo_bottom.start, nx),
            )
        };
        exchange(up, down, t, b, ht, hb);
    } else {
        target_update!(from: u[top.start..top.end]);
        target_update!(from: u[bottom.start..bottom.end]);
        let (t, b) = (u[top.clone()].to_vec(), u[bottom.clone()].to_vec());
        let (head, tail) = u.split_at_mut(halo_bottom.start);
        exchange(up, down, &t, &b, &mut head[halo_top], tail);
        if up.is_some() {
            target_update!(to: u[0..nx]);
        }
        if down.is_some() {
            target_update!(to: u[halo_bottom.start..halo_bottom.end]);
        }
    }
}

/// Sends `first` up and `last` down, and receives the top halo from above and the bottom one from below (an edge
/// rank has no neighbour on one side: that halo is the grid's fixed boundary).
fn exchange(
    up: Option<&mpi::topology::Process<'_>>,
    down: Option<&mpi::topology::Process<'_>>,
    first: &[f64],
    last: &[f64],
    halo_top: &mut [f64],
    halo_bottom: &mut [f64],
) {
    // Downwards: last row to the rank below, top halo from the rank above.
    match (up, down) {
        (Some(u), Some(d)) => {
            send_receive_into(last, d, halo_top, u);
        }
        (None, Some(d)) => d.send(last),
        (Some(u), None) => {
            u.receive_into(halo_top);
        }
        (None, None) => {}
    }
    // Upwards: first row to the rank above, bottom halo from the rank below.
    match (up, down) {
        (Some(u), Some(d)) => {
            send_receive_into(first, u, halo_bottom, d);
        }
        (Some(u), None) => u.send(first),
        (None, Some(d)) => {
            d.receive_into(halo_bottom);
        }
        (None, None) => {}
    }
}

/// Whether the default device's memory is this process's host memory (host-elf and gpu-sim, or the host itself).
fn device_memory_is_host() -> bool {
    let default = omp_get_default_device();
    let mut number = 0;
    for p in offload::inventory().iter().filter(|p| p.on_by_default) {
        for _ in &p.devices {
            if number == default {
                return matches!(p.plugin, "host-elf" | "gpu-sim");
            }
            number += 1;
        }
    }
    true // the initial device
}
