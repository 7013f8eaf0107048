//! Float methods `core` lacks (`sqrt`, `mul_add`, `floor`, ...), so `x.sqrt()` reads the same in host and region
//! code. On the host image and gpu-sim they are std's, so results match the host fallback bit for bit; on NVIDIA GPUs they are
//! libdevice's (`__nv_*`), on AMD GPUs ROCm's ocml (`__ocml_*`), both linked and inlined by the device linker.

macro_rules! float_ext {
    ($($name:ident($($arg:ident: $ty:ident),*) -> $ret:ident = $nv32:ident, $nv64:ident, $oc32:ident, $oc64:ident;)*) => {
        /// Float math for region code; brought in by `offload::__prelude`.
        pub trait FloatExt: Sized {
            $(
                #[doc = concat!("`", stringify!($name), "` as std's float method of that name computes it.")]
                fn $name(self $(, $arg: $ty)*) -> $ret;
            )*
        }
        #[cfg(any(feature = "host", feature = "gpu-sim"))]
        impl FloatExt for f32 {
            $(#[inline] fn $name(self $(, $arg: float_ext!(@ty f32 $ty))*) -> float_ext!(@ty f32 $ret) { f32::$name(self $(, $arg)*) })*
        }
        #[cfg(any(feature = "host", feature = "gpu-sim"))]
        impl FloatExt for f64 {
            $(#[inline] fn $name(self $(, $arg: float_ext!(@ty f64 $ty))*) -> float_ext!(@ty f64 $ret) { f64::$name(self $(, $arg)*) })*
        }
        #[cfg(all(not(any(feature = "host", feature = "gpu-sim")), target_arch = "nvptx64"))]
        unsafe extern "C" {
            $(fn $nv32(x: f32 $(, $arg: float_ext!(@ty f32 $ty))*) -> f32;)*
            $(fn $nv64(x: f64 $(, $arg: float_ext!(@ty f64 $ty))*) -> f64;)*
        }
        #[cfg(all(not(any(feature = "host", feature = "gpu-sim")), target_arch = "nvptx64"))]
        impl FloatExt for f32 {
            // SAFETY: libdevice's functions are pure.
            $(#[inline] fn $name(self $(, $arg: float_ext!(@ty f32 $ty))*) -> f32 { unsafe { $nv32(self $(, $arg)*) } })*
        }
        #[cfg(all(not(any(feature = "host", feature = "gpu-sim")), target_arch = "nvptx64"))]
        impl FloatExt for f64 {
            // SAFETY: libdevice's functions are pure.
            $(#[inline] fn $name(self $(, $arg: float_ext!(@ty f64 $ty))*) -> f64 { unsafe { $nv64(self $(, $arg)*) } })*
        }
        #[cfg(all(not(any(feature = "host", feature = "gpu-sim")), target_arch = "amdgpu"))]
        unsafe extern "C" {
            $(fn $oc32(x: f32 $(, $arg: float_ext!(@ty f32 $ty))*) -> f32;)*
            $(fn $oc64(x: f64 $(, $arg: float_ext!(@ty f64 $ty))*) -> f64;)*
        }
        #[cfg(all(not(any(feature = "host", feature = "gpu-sim")), target_arch = "amdgpu"))]
        impl FloatExt for f32 {
            // SAFETY: ocml's functions are pure.
            $(#[inline] fn $name(self $(, $arg: float_ext!(@ty f32 $ty))*) -> f32 { unsafe { $oc32(self $(, $arg)*) } })*
        }
        #[cfg(all(not(any(feature = "host", feature = "gpu-sim")), target_arch = "amdgpu"))]
        impl FloatExt for f64 {
            // SAFETY: ocml's functions are pure.
            $(#[inline] fn $name(self $(, $arg: float_ext!(@ty f64 $ty))*) -> f64 { unsafe { $oc64(self $(, $arg)*) } })*
        }
    };
    (@ty $f:ident Self) => { $f };
    (@ty $f:ident i32) => { i32 };
}

float_ext! {
    sqrt() -> Self = __nv_sqrtf, __nv_sqrt, __ocml_sqrt_f32, __ocml_sqrt_f64;
    exp() -> Self = __nv_expf, __nv_exp, __ocml_exp_f32, __ocml_exp_f64;
    ln() -> Self = __nv_logf, __nv_log, __ocml_log_f32, __ocml_log_f64;
    log2() -> Self = __nv_log2f, __nv_log2, __ocml_log2_f32, __ocml_log2_f64;
    sin() -> Self = __nv_sinf, __nv_sin, __ocml_sin_f32, __ocml_sin_f64;
    cos() -> Self = __nv_cosf, __nv_cos, __ocml_cos_f32, __ocml_cos_f64;
    tan() -> Self = __nv_tanf, __nv_tan, __ocml_tan_f32, __ocml_tan_f64;
    tanh() -> Self = __nv_tanhf, __nv_tanh, __ocml_tanh_f32, __ocml_tanh_f64;
    powf(n: Self) -> Self = __nv_powf, __nv_pow, __ocml_pow_f32, __ocml_pow_f64;
    powi(n: i32) -> Self = __nv_powif, __nv_powi, __ocml_pown_f32, __ocml_pown_f64;
    mul_add(a: Self, b: Self) -> Self = __nv_fmaf, __nv_fma, __ocml_fma_f32, __ocml_fma_f64;
    floor() -> Self = __nv_floorf, __nv_floor, __ocml_floor_f32, __ocml_floor_f64;
    ceil() -> Self = __nv_ceilf, __nv_ceil, __ocml_ceil_f32, __ocml_ceil_f64;
}

#[cfg(any(feature = "host", feature = "gpu-sim"))]
mod free {
    //! The same functions as the host's `offload::sqrt(x)` etc.
    offload_model::float_math!();
}
#[cfg(all(
    not(any(feature = "host", feature = "gpu-sim")),
    any(target_arch = "nvptx64", target_arch = "amdgpu")
))]
mod free {
    offload_model::float_math!(via super::FloatExt);
}
#[cfg(any(
    feature = "host",
    feature = "gpu-sim",
    target_arch = "nvptx64",
    target_arch = "amdgpu"
))]
pub use free::*;
