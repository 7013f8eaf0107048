//! The host's monotonic clock, for `omp_get_wtime` in the host-compiled images (host and gpu-sim).

/// `struct timespec` on 64-bit Linux.
#[repr(C)]
struct Timespec {
    tv_sec: i64,
    tv_nsec: i64,
}

unsafe extern "C" {
    // From the C library std links. The runtime's `omp_get_wtime` reads the same clock, so host code and regions
    // share one time line (std's `Instant` is this clock, but its value is opaque).
    fn clock_gettime(clock: i32, ts: *mut Timespec) -> i32;
    fn clock_getres(clock: i32, ts: *mut Timespec) -> i32;
}

const CLOCK_MONOTONIC: i32 = 1;

fn clock(res: bool) -> f64 {
    let mut ts = Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-parameter of the layout the C library expects; the clock exists on Linux.
    unsafe {
        if res {
            clock_getres(CLOCK_MONOTONIC, &mut ts);
        } else {
            clock_gettime(CLOCK_MONOTONIC, &mut ts);
        }
    }
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

pub fn wtime() -> f64 {
    clock(false)
}

pub fn wtick() -> f64 {
    clock(true)
}
