//! offload-device: what region code sees under the name `offload` when it is compiled for a device. Every item has a
//! host twin in the `offload` crate with the host's meaning, so `#[declare_target]` code compiles on both sides.
//!
//! Two lowerings: the host image's (feature `host`: contiguous loop shares, reductions through thread-locals) and
//! the GPU's (NVIDIA, AMD, and gpu-sim, feature `gpu-sim`, which runs the GPU's code paths on the host).
#![no_std]
// Documented where docs are read (the host's builds: docs.rs, the host image, gpu-sim); a GPU build does not stop on
// a missing doc comment.
#![cfg_attr(
    not(any(target_arch = "nvptx64", target_arch = "amdgpu")),
    deny(missing_docs)
)]
#![cfg_attr(target_arch = "nvptx64", feature(stdarch_nvptx))]
#![cfg_attr(target_arch = "amdgpu", feature(stdarch_amdgpu))]

#[cfg(all(feature = "host", feature = "gpu-sim"))]
compile_error!(
    "offload-device is built for the host image (`host`) or for gpu-sim (`gpu-sim`), not both"
);

#[cfg(any(feature = "host", feature = "gpu-sim"))]
extern crate std;

#[cfg(any(feature = "host", feature = "gpu-sim"))]
mod clock;
#[cfg(any(feature = "host", feature = "gpu-sim"))]
mod host_env;

// The target's kernel support (the same functions in each): team geometry, the barrier, team-shared memory and the
// reduction's team step. `serial` is what a plain check of this crate compiles; no image uses it.
#[cfg(feature = "host")]
mod host;
#[cfg(feature = "host")]
use host as backend;
#[cfg(feature = "gpu-sim")]
mod sim;
#[cfg(feature = "gpu-sim")]
use sim as backend;
#[cfg(all(
    not(any(feature = "host", feature = "gpu-sim")),
    target_arch = "nvptx64"
))]
mod nvptx;
#[cfg(all(
    not(any(feature = "host", feature = "gpu-sim")),
    target_arch = "nvptx64"
))]
use nvptx as backend;
#[cfg(all(
    not(any(feature = "host", feature = "gpu-sim")),
    target_arch = "amdgpu"
))]
mod amdgpu;
#[cfg(all(
    not(any(feature = "host", feature = "gpu-sim")),
    target_arch = "amdgpu"
))]
use amdgpu as backend;
#[cfg(not(any(
    feature = "host",
    feature = "gpu-sim",
    target_arch = "nvptx64",
    target_arch = "amdgpu"
)))]
mod serial;
#[cfg(not(any(
    feature = "host",
    feature = "gpu-sim",
    target_arch = "nvptx64",
    target_arch = "amdgpu"
)))]
use serial as backend;

// The GPU lowering's pieces, over the backend's intrinsics: the reduction's team step (GPUs have no thread-locals)
// and the panic record.
#[cfg(all(
    not(feature = "host"),
    any(feature = "gpu-sim", target_arch = "nvptx64", target_arch = "amdgpu")
))]
mod gpu_reduce;
#[cfg(not(all(
    not(feature = "host"),
    any(feature = "gpu-sim", target_arch = "nvptx64", target_arch = "amdgpu")
)))]
use backend as reduce_step;
#[cfg(all(
    not(feature = "host"),
    any(feature = "gpu-sim", target_arch = "nvptx64", target_arch = "amdgpu")
))]
use gpu_reduce as reduce_step;
#[cfg(all(
    not(feature = "host"),
    any(feature = "gpu-sim", target_arch = "nvptx64", target_arch = "amdgpu")
))]
mod panic_record;
// The team step of a reduction value too large for team-shared slots, on every image.
#[cfg(any(
    feature = "host",
    feature = "gpu-sim",
    target_arch = "nvptx64",
    target_arch = "amdgpu"
))]
mod reduce_turns;
// What a kernel's entry does on either GPU, over the target's intrinsics.
#[cfg(all(
    not(any(feature = "host", feature = "gpu-sim")),
    any(target_arch = "nvptx64", target_arch = "amdgpu")
))]
mod gpu_entry;

mod math;
#[cfg(any(
    feature = "host",
    feature = "gpu-sim",
    target_arch = "nvptx64",
    target_arch = "amdgpu"
))]
pub use math::{
    abs, ceil, cos, exp, floor, ln, log2, max, min, mul_add, powf, powi, sin, sqrt, tan, tanh,
    Float,
};

/// `use offload::__prelude::*;` is put into every device module by the outliner: float methods that `core` lacks.
pub mod __prelude {
    pub use crate::math::FloatExt;
    pub use crate::{print, println};
}

mod memory;
pub use memory::{DeviceBuffer, DevicePtr};

mod device_vec;
pub use device_vec::DeviceVec;

mod print;
#[doc(hidden)]
pub use print::__print;

/// The team this thread belongs to.
pub fn omp_get_team_num() -> i32 {
    backend::geometry().0 as i32
}

/// Teams in this launch.
pub fn omp_get_num_teams() -> i32 {
    backend::geometry().1 as i32
}

/// This thread's number in its team.
pub fn omp_get_thread_num() -> i32 {
    backend::geometry().2 as i32
}

/// Threads in this thread's team.
pub fn omp_get_num_threads() -> i32 {
    backend::geometry().3 as i32
}

/// Waits until every thread of this team reaches the barrier. Only for `teams, parallel` regions: anywhere else
/// (a work-shared loop, a serial region) it fails the region. On the host devices a barrier that can no longer
/// complete (a thread of the team finished without reaching it) fails the region too; on GPUs every thread of a
/// team must reach it, or the team hangs.
#[track_caller]
pub fn barrier() {
    offload_model::abi::launch_kind::require_spmd("offload::barrier()", backend::launch_kind());
    backend::barrier()
}

// How a work-shared loop is split: contiguous blocks per thread on the host (what suits caches), a grid-stride on
// GPUs and gpu-sim (neighbouring threads touch neighbouring elements, so accesses coalesce).
#[cfg(not(all(
    not(feature = "host"),
    any(feature = "gpu-sim", target_arch = "nvptx64", target_arch = "amdgpu")
)))]
mod split {
    use super::backend::geometry;
    use offload_model::abi::{flat_share, FlatBlock, Nest, Share};

    /// The share of a work-shared loop's iterations this thread runs; the outliner wraps the loop in it.
    #[inline(always)]
    pub fn __share<I: Share>(it: I) -> I::Part {
        let (t, n, i, m) = geometry();
        it.share((t * m + i) as usize, (n * m) as usize)
    }

    /// The share of a `collapse(n)` loop nest `(a, b, ..)` this thread runs, as `(i, j, ..)` tuples.
    #[inline(always)]
    pub fn __share_nest<N: Nest>(nest: N) -> FlatBlock<N> {
        let (t, n, i, m) = geometry();
        flat_share(nest, (t * m + i) as usize, (n * m) as usize)
    }
}
#[cfg(all(
    not(feature = "host"),
    any(feature = "gpu-sim", target_arch = "nvptx64", target_arch = "amdgpu")
))]
mod split {
    use super::backend::geometry;
    use offload_model::abi::{flat_share_strided, Nest, Share, StridedNest};

    /// The share of a work-shared loop's iterations this thread runs: every `total`-th, from its global number.
    #[inline(always)]
    pub fn __share<I: Share>(it: I) -> I::Strided {
        let (t, n, i, m) = geometry();
        it.share_strided((t * m + i) as usize, (n * m) as usize)
    }

    /// The share of a `collapse(n)` loop nest this thread runs: every `total`-th tuple of the flattened space.
    #[inline(always)]
    pub fn __share_nest<N: Nest>(nest: N) -> StridedNest<N> {
        let (t, n, i, m) = geometry();
        flat_share_strided(nest, (t * m + i) as usize, (n * m) as usize)
    }
}
#[doc(hidden)]
pub use split::{__share, __share_nest};

/// `schedule(dynamic, c)`: chunks of `c` iterations this thread claims as it goes, from the launch's counter (on the
/// host image); dealt round-robin where there is none (GPUs).
#[doc(hidden)]
#[inline(always)]
pub fn __share_dynamic<I: offload_model::lanes::ChunkShare>(it: I, chunk: usize) -> I::Chunked {
    let counter = backend::chunk_counter();
    if counter.is_null() {
        return __share_chunks(it, chunk);
    }
    // SAFETY: the plugin's counter for this launch, shared by its threads alone, alive for the kernel's run.
    unsafe { it.dynamic(chunk, &*counter) }
}

/// `schedule(static, c)`: the chunks of `c` iterations this thread runs, dealt round-robin over every thread.
#[doc(hidden)]
#[inline(always)]
pub fn __share_chunks<I: offload_model::lanes::ChunkShare>(it: I, chunk: usize) -> I::Chunked {
    let (t, n, i, m) = backend::geometry();
    it.chunks(chunk, (t * m + i) as usize, (n * m) as usize)
}

#[doc(hidden)]
pub use offload_model::lanes as __lanes;
#[doc(hidden)]
pub use offload_model::reduce as __reduce;
#[doc(hidden)]
pub use offload_model::view as __view;

/// What a reduction variable's initial value becomes: for a small value, recorded (it is combined once, at the end)
/// while the thread's private copy starts at the operator's identity; for a larger one (nowhere to keep it aside),
/// the launch's first thread's copy starts at it, every other's at the identity.
#[doc(hidden)]
pub fn __reduce_init<Op: __reduce::ReduceOp<T>, T: Copy>(init: T) -> T {
    if __reduce::is_small(core::mem::size_of::<T>()) {
        reduce_step::record_init(init);
        Op::identity()
    } else if __first_thread() {
        init
    } else {
        Op::identity()
    }
}

/// Calls `f` with the first `len` atomics of this team's shared memory (zeroed at launch) and returns what it
/// returns. The slice lives only as long as the call (it cannot be kept: the memory dies with the launch). Only for
/// `teams, parallel` regions: anywhere else it fails the region. The launch's first call fixes the element type: a
/// later call with another type fails the region (one block viewed as atomics of two widths is a mixed-size race).
#[track_caller]
pub fn team_shared<T: offload_model::abi::SharedAtomic, R>(
    len: usize,
    f: impl FnOnce(&[T]) -> R,
) -> R {
    offload_model::abi::launch_kind::require_spmd("offload::team_shared()", backend::launch_kind());
    // SAFETY: the plugin gave the running team this block for the kernel's run, which outlasts this call, and the
    // claim word beside it (on a GPU, the entry cleared the word before the team's first call); only
    // `shared_atomics` writes the word.
    f(unsafe {
        offload_model::abi::shared_atomics(
            backend::team_shared(),
            backend::team_shared_claim(),
            len,
        )
    })
}

/// This team's shared memory as raw bytes (address, length). Only for `teams, parallel` regions: anywhere else it
/// fails the region.
///
/// # Safety
/// The caller keeps the team's threads' accesses apart (with `barrier()`), and uses it only during the region.
#[track_caller]
pub unsafe fn team_shared_raw() -> (*mut u8, usize) {
    offload_model::abi::launch_kind::require_spmd(
        "offload::team_shared_raw()",
        backend::launch_kind(),
    );
    backend::team_shared()
}

pub use offload_model::abi::SharedAtomic;
/// A reduction operator; implement it on a unit struct to name it in `reduction(Op: var)` (OpenMP's `declare
/// reduction`).
pub use offload_model::reduce::ReduceOp;
/// The numbers a reduction combines (the host's `offload::Numeric`, `offload::Integer`), so region code may name
/// them in bounds.
pub use offload_model::reduce::{Integer, Numeric};

/// The host's `offload::DeviceCopy`, so region code may name it in bounds (`trait Real: offload::DeviceCopy`, a
/// generic region's `T: offload::DeviceCopy`). The host build checks it, for every type a region is instantiated
/// with; here every type has it (the outliner leaves the host's impls of it out).
///
/// # Safety
/// Implemented by this crate only.
pub unsafe trait DeviceCopy {}
// SAFETY: a marker with no meaning on a device: the host checked the bound.
unsafe impl<T: ?Sized> DeviceCopy for T {}

/// The host's `offload::Firstprivate`, as [`DeviceCopy`].
///
/// # Safety
/// Implemented by this crate only.
pub unsafe trait Firstprivate: Copy {}
// SAFETY: as `DeviceCopy`'s.
unsafe impl<T: Copy> Firstprivate for T {}

/// Whether this is team 0, thread 0: the thread whose value a region returns.
#[doc(hidden)]
pub fn __first_thread() -> bool {
    let (t, _, i, _) = backend::geometry();
    t == 0 && i == 0
}

/// Elapsed wall-clock seconds from a fixed point in the past (OpenMP's `omp_get_wtime`): on the host image the
/// host's clock (the same time line as host code), on NVIDIA GPUs `%globaltimer`, on AMD GPUs the constant 100 MHz
/// real-time counter. Compare readings taken on one device.
#[inline]
pub fn omp_get_wtime() -> f64 {
    backend::wtime()
}

/// The resolution of [`omp_get_wtime`]'s clock in seconds.
#[inline]
pub fn omp_get_wtick() -> f64 {
    backend::wtick()
}

/// False: this code is running on an offload device.
#[inline]
pub fn omp_is_initial_device() -> bool {
    false
}

/// What the outliner's kernel entries call; not a public API.
#[doc(hidden)]
pub mod __rt {
    #[cfg(not(any(feature = "host", feature = "gpu-sim")))]
    pub use crate::backend::enter;
    #[cfg(any(feature = "host", feature = "gpu-sim"))]
    pub use crate::backend::entry;
    pub use crate::reduce_step::reduce_team;

    /// A firstprivate value: its bits when it fits in 8 bytes, else the address of a private copy.
    ///
    /// # Safety
    /// `a` follows the calling convention for a `T`.
    #[inline(always)]
    pub unsafe fn value<T: Copy>(a: u64) -> T {
        if offload_model::abi::passes_by_bits(core::mem::size_of::<T>()) {
            // SAFETY: the host copied a `T`'s bytes into the low bytes of `a`.
            unsafe { core::ptr::read_unaligned(&a as *const u64 as *const T) }
        } else {
            // SAFETY: `a` is the device address of a private `T`.
            unsafe { core::ptr::read(a as *const T) }
        }
    }

    /// # Safety
    /// `p` is the device address of `len` `T`s (any value when `len` is 0), valid for `'a`.
    #[inline(always)]
    pub unsafe fn slice<'a, T>(p: u64, len: u64) -> &'a [T] {
        if len == 0 {
            &[]
        } else {
            // SAFETY: per the contract.
            unsafe { core::slice::from_raw_parts(p as *const T, len as usize) }
        }
    }

    /// # Safety
    /// As [`slice`], and no other reference aliases the data.
    #[inline(always)]
    pub unsafe fn slice_mut<'a, T>(p: u64, len: u64) -> &'a mut [T] {
        if len == 0 {
            &mut []
        } else {
            // SAFETY: per the contract.
            unsafe { core::slice::from_raw_parts_mut(p as *mut T, len as usize) }
        }
    }

    /// A thread's view of a parallel region's `&mut [T]` parameter.
    ///
    /// # Safety
    /// As [`slice_mut`], shared only by the launch's views; see `offload_model::view`.
    #[inline(always)]
    pub unsafe fn view<'a, T>(p: u64, len: u64) -> crate::__view::View<'a, T> {
        // SAFETY: per the contract.
        unsafe { crate::__view::View::new(p as *mut T, len as usize) }
    }

    /// A thread's view of an `unsafe fn` parallel region's `&mut [T]` parameter.
    ///
    /// # Safety
    /// As [`view`].
    #[inline(always)]
    pub unsafe fn unsafe_view<'a, T>(p: u64, len: u64) -> crate::__view::UnsafeView<'a, T> {
        // SAFETY: per the contract.
        unsafe { crate::__view::UnsafeView::new(p as *mut T, len as usize) }
    }

    /// # Safety
    /// `p` is the device address of a `T` valid for `'a`.
    #[inline(always)]
    pub unsafe fn object<'a, T>(p: u64) -> &'a T {
        // SAFETY: per the contract.
        unsafe { &*(p as *const T) }
    }

    /// # Safety
    /// As [`object`], and no other reference aliases it.
    #[inline(always)]
    pub unsafe fn object_mut<'a, T>(p: u64) -> &'a mut T {
        // SAFETY: per the contract.
        unsafe { &mut *(p as *mut T) }
    }

    /// # Safety
    /// `a` is a device address of `T`s.
    #[inline(always)]
    pub unsafe fn device_ptr<T>(a: u64) -> crate::DevicePtr<T> {
        crate::DevicePtr::from_addr(a)
    }

    /// # Safety
    /// `p` is the device address of `len` `T`s valid for the kernel's run.
    #[inline(always)]
    pub unsafe fn device_buffer<T>(p: u64, len: u64) -> crate::DeviceBuffer<T> {
        // SAFETY: per the contract.
        unsafe { crate::DeviceBuffer::from_raw(p as *mut T, len as usize) }
    }

    pub use crate::device_vec::{MapperSlots, OwnedMapper, ProbeObject, ProbeOwned, RefProbe};

    /// A `Vec<T>` field of an owning mapper struct.
    ///
    /// # Safety
    /// As [`slice_mut`].
    #[inline(always)]
    pub unsafe fn device_vec<T>(p: u64, len: u64) -> crate::DeviceVec<T> {
        // SAFETY: per the contract.
        unsafe { crate::DeviceVec::__from_raw(p, len) }
    }

    /// # Safety
    /// `p` is the device address of the return slot.
    #[inline(always)]
    pub unsafe fn write_return<T>(p: u64, v: T) {
        // SAFETY: per the contract.
        unsafe { core::ptr::write(p as *mut T, v) }
    }
}

// The host crate's `use offload::{target, declare_target};` must resolve in device modules too; the outliner
// removes the attributes themselves.
#[doc(hidden)]
pub mod target {}
#[doc(hidden)]
pub mod declare_target {}
