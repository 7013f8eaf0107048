//! GPU figures, ready for the day a GPU is there: on an NVIDIA GPU, saxpy, triad and dot bandwidth in GB/s
//! and as a fraction of a device-to-device copy measured in the same run, and the latency of an empty region against
//! a raw `cuLaunchKernel` (through cudarc) of an empty kernel of the same signature, medians of many runs. Without an
//! NVIDIA GPU it says so and exits 0.
//!
//! `OFFLOAD_TARGETS=host,nvptx64:sm_90 cargo run --release --example gpu_bench` (the regions need their NVIDIA image;
//! `OMP_TARGET_OFFLOAD=MANDATORY` makes a missing one an error instead of a host run).
//! Targets when measured: triad at least 0.9 of the copy's bandwidth; the empty region at most 1.2x the raw launch.

use cudarc::driver::{result, sys};
use offload::{omp_get_num_devices, target, target_data};
use std::ffi::{c_void, CString};
use std::time::Instant;

/// Elements per array: 64M `f32`, 256 MiB each, far above any GPU's caches.
const N: usize = 1 << 26;
/// Timed calls per figure (after one warm-up); the median is reported.
const RUNS: usize = 21;
/// Timed empty launches per latency figure.
const LAUNCHES: usize = 2001;

#[target(teams_distribute_parallel_for, device(dev))]
fn saxpy(dev: i32, a: f32, x: &[f32], y: &mut [f32]) {
    for i in 0..y.len() {
        y[i] += a * x[i];
    }
}

#[target(teams_distribute_parallel_for, device(dev))]
fn triad(dev: i32, s: f32, b: &[f32], c: &[f32], a: &mut [f32]) {
    for i in 0..a.len() {
        a[i] = b[i] + s * c[i];
    }
}

#[target(teams_distribute_parallel_for, device(dev), reduction(+: sum))]
fn dot(dev: i32, x: &[f32], y: &[f32]) -> f32 {
    let mut sum = 0.0;
    for i in 0..x.len() {
        sum += x[i] * y[i];
    }
    sum
}

#[target(device(dev))]
fn empty(dev: i32) {}

/// An empty kernel with `empty`'s entry signature (`dyn_ptr`, then `dev`), for the raw launch: the floor a region's
/// launch is measured against. PTX 7.0 for `sm_52`, which every driver since CUDA 11 JIT-compiles for its GPU.
const EMPTY_PTX: &str = ".version 7.0\n.target sm_52\n.address_size 64\n\
    .visible .entry offload_bench_empty(.param .u64 dyn_ptr, .param .u64 a0)\n{\n\tret;\n}\n";

fn main() {
    let Some(dev) = cuda_device() else {
        return;
    };
    let raw = match Raw::new() {
        Ok(r) => r,
        Err(e) => {
            println!("gpu_bench: the CUDA driver failed: {e:?}");
            std::process::exit(1);
        }
    };
    let x = vec![1.0f32; N];
    let z = vec![0.5f32; N];
    let mut y = vec![2.0f32; N];
    let bytes = (N * 4) as f64;
    // What the device moves per call: saxpy and triad read two arrays and write one, dot reads two; the copy reads
    // one and writes one.
    let copy = raw.copy_gbps(N * 4);
    target_data!(map(to: x, z), map(tofrom: y), device(dev) => {
        let gbps = |moved: f64, f: &mut dyn FnMut()| moved / median(RUNS, f) / 1e9;
        let s = gbps(3.0 * bytes, &mut || saxpy(dev, 0.5, x, y));
        let t = gbps(3.0 * bytes, &mut || triad(dev, 0.5, x, z, y));
        let mut sum = 0.0;
        let d = gbps(2.0 * bytes, &mut || sum = dot(dev, x, z));
        let want = 0.5 * N as f32;
        assert!((sum - want).abs() <= want * 1e-3, "dot computed {sum}, want {want}");
        println!("bandwidth, {N} f32 per array, median of {RUNS} calls (GB/s, fraction of the copy):");
        println!("  device-to-device copy  {copy:8.1}");
        for (name, g) in [("saxpy", s), ("triad", t), ("dot", d)] {
            println!("  {name:<22} {g:8.1}  {:.2}", g / copy);
        }
        println!("  triad / copy: {:.2} (target >= 0.9)", t / copy);
    });
    let region = median(LAUNCHES, &mut || empty(dev));
    let floor = median(LAUNCHES, &mut || raw.launch_empty());
    println!("empty launch, median of {LAUNCHES} (launch and wait):");
    println!("  region on device {dev}    {:8.2} us", region * 1e6);
    println!("  raw cuLaunchKernel    {:8.2} us", floor * 1e6);
    println!("  region / raw: {:.2} (target <= 1.2)", region / floor);
}

/// The first CUDA device's number, or `None` (said why) where there is none.
fn cuda_device() -> Option<i32> {
    let cuda = offload::inventory()
        .into_iter()
        .find(|p| p.plugin == "cuda")?;
    match cuda.devices.first() {
        Some((num, d)) if *num < omp_get_num_devices() => {
            println!("gpu_bench: device {num}, {} ({})", d.name, d.arch);
            Some(*num)
        }
        Some((num, _)) => {
            println!("gpu_bench: the CUDA device is {num}, which OFFLOAD_PLUGINS leaves out; nothing measured");
            None
        }
        None => {
            let why = cuda.none_because.unwrap_or_default();
            println!("gpu_bench: no NVIDIA GPU here ({why}); nothing measured");
            None
        }
    }
}

/// Median seconds of `runs` calls of `f`, after one warm-up call.
fn median(runs: usize, f: &mut dyn FnMut()) -> f64 {
    f();
    let mut t: Vec<f64> = (0..runs)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed().as_secs_f64()
        })
        .collect();
    t.sort_by(f64::total_cmp);
    t[t.len() / 2]
}

/// The driver used directly, on CUDA device 0's primary context (the one the `cuda` plugin uses).
struct Raw {
    empty: sys::CUfunction,
}

impl Raw {
    fn new() -> Result<Raw, result::DriverError> {
        result::init()?;
        let dev = result::device::get(0)?;
        let ptx = CString::new(EMPTY_PTX).expect("no NUL in the PTX");
        // SAFETY: the primary context of a device the driver listed, made current on this thread; the PTX is a
        // NUL-terminated string the driver copies.
        let empty = unsafe {
            let ctx = result::primary_ctx::retain(dev)?;
            result::ctx::set_current(ctx)?;
            let module = result::module::load_data(ptx.as_ptr().cast::<c_void>())?;
            result::module::get_function(
                module,
                CString::new("offload_bench_empty").expect("a name"),
            )?
        };
        Ok(Raw { empty })
    }

    /// `cuLaunchKernel` of the empty kernel on one block of one thread, and the wait for it.
    fn launch_empty(&self) {
        let (dyn_ptr, a0): (u64, u64) = (0, 0);
        let mut params = [&dyn_ptr, &a0].map(|p| (p as *const u64).cast_mut().cast::<c_void>());
        let stream = result::stream::null();
        // SAFETY: the kernel takes two `u64`s, which `params` point to for the call; the context is current.
        unsafe {
            result::launch_kernel(self.empty, (1, 1, 1), (1, 1, 1), 0, stream, &mut params)
                .and_then(|()| result::stream::synchronize(stream))
                .expect("the raw launch failed");
        }
    }

    /// Bandwidth of a device-to-device copy of `bytes` (read and written), GB/s.
    fn copy_gbps(&self, bytes: usize) -> f64 {
        // SAFETY: two fresh allocations of `bytes`, copied between and freed here.
        unsafe {
            let (src, dst) = (
                result::malloc_sync(bytes).expect("device memory for the copy"),
                result::malloc_sync(bytes).expect("device memory for the copy"),
            );
            // A device-to-device `cuMemcpy` returns before the copy ends (CUDA's API sync rules); without the wait an
            // H200 "copied" at 120 TB/s.
            let t = median(RUNS, &mut || {
                result::memcpy_dtod_sync(dst, src, bytes)
                    .and_then(|()| result::ctx::synchronize())
                    .expect("the copy failed");
            });
            let _ = result::free_sync(src);
            let _ = result::free_sync(dst);
            2.0 * bytes as f64 / t / 1e9
        }
    }
}
