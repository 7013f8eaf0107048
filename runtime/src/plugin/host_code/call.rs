//! Calls a host-image kernel `extern "C" fn(dyn_ptr, a0: u64, .., ak: u64)` with a run-time argument count: the
//! System V ABI needs the count at the call site, so each arity is its own call (what libffi does for LLVM's host
//! plugin). The macro walks the indices, emitting `if a.len() == k { f(env, a[0], .., a[k-1]) }` for each `k`.

use crate::plugin::interface::Arg;
use std::ffi::c_void;

/// The most kernel arguments a host-image kernel may take (the arity list below goes this far).
#[cfg(feature = "gpu-sim")]
pub const MAX_ARGS: usize = offload_model::abi::MAX_KERNEL_ARGS;

macro_rules! by_arity {
    ($f:ident, $env:ident, $a:ident; [$($done:tt)*]; $k:tt $($rest:tt)*) => {{
        if $a.len() == $k {
            // `Arg` has `u64`'s ABI: the kernel receives its parameters as `u64`s.
            let f: extern "C" fn(*mut c_void $(, by_arity!(@arg $done))*) = core::mem::transmute($f);
            return f($env $(, $a[$done])*);
        }
        by_arity!($f, $env, $a; [$($done)* $k]; $($rest)*)
    }};
    ($f:ident, $env:ident, $a:ident; [$($done:tt)*];) => {
        unreachable!("checked against MAX_ARGS by the caller")
    };
    (@arg $i:tt) => { Arg };
}

/// # Safety
/// `f` is a kernel taking `dyn_ptr` and exactly `a.len()` `u64` arguments, `a.len() <= MAX_ARGS`.
#[allow(clippy::type_complexity)]
pub unsafe fn call(f: *const c_void, env: *mut c_void, a: &[Arg]) {
    // SAFETY: per the function's contract, the transmuted signature is the kernel's.
    unsafe {
        by_arity!(f, env, a; [];
            0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32
            33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63 64)
    }
}
