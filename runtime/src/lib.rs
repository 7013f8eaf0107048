//! `offload`: OpenMP target offloading for Rust.
//!
//! Mark a function `#[target(...)]` and it becomes a region: calling it runs its body on an offload device (the
//! `host-elf` device runs an x86_64 image with its own memory), or on the host when no device can take it. Functions,
//! consts and `#[repr(C)]` types that regions use are marked `#[declare_target]`. The package's `build.rs` is
//! `fn main() { offload_build::build(); }`.
//!
//! ```
//! use offload::{declare_target, target};
//!
//! #[declare_target]
//! fn fma(a: f32, x: f32, y: f32) -> f32 {
//!     a * x + y
//! }
//!
//! #[target(map(to: x), map(tofrom: y))]
//! fn saxpy(a: f32, x: &[f32], y: &mut [f32]) {
//!     for i in 0..y.len() {
//!         y[i] = fma(a, x[i], y[i]);
//!     }
//! }
//!
//! fn main() {
//!     let x = vec![1.0f32; 1 << 16];
//!     let mut y = vec![2.0f32; 1 << 16];
//!     saxpy(2.0, &x, &mut y); // the default device; the host if no device can take it
//!     assert!(y.iter().all(|&v| v == 4.0));
//!     // The same, returning a device failure as `Err` instead of panicking.
//!     try_saxpy(2.0, &x, &mut y).expect("saxpy failed");
//!     assert!(y.iter().all(|&v| v == 6.0));
//! }
//! ```
//!
//! The examples in these docs run as doctests, which have no build script and so no device image: their regions
//! run on the host, with the same results. In a package whose `build.rs` builds images they run on the device
//! (`OFFLOAD_INFO=1` prints where each launch ran). Examples that keep data on a device or pass device memory make
//! the host their default device first, in a hidden line: a region whose data is present on a device never falls
//! back to the host, and one taking device memory runs only on that memory's device.
//!
//! # The API
//!
//! - [`#[target]`](macro@target) makes a region (clauses for mapping, devices, parallel loops, reductions, teams);
//!   [`#[declare_target]`](macro@declare_target) makes what it uses available on devices.
//! - [`target_data!`], [`target_enter_data!`], [`target_exit_data!`] and [`target_update!`] keep data on a device
//!   across regions, as OpenMP's data constructs do.
//! - [`DeviceBuffer`], [`DevicePtr`] and OpenMP's device memory routines ([`omp_target_alloc`], ..) manage device
//!   memory directly.
//! - [`omp_get_num_devices`], [`omp_get_default_device`] and the other routines query and choose devices;
//!   [`omp_get_team_num`], [`omp_get_thread_num`], [`barrier`] and [`team_shared`] serve parallel regions.
//! - [`task_scope`], [`TaskScope::spawn`], [`spawn`] and each region's `nowait_f` run host code and regions as
//!   [`Task`]s (OpenMP's `target nowait`, `taskgroup`, `taskwait`): wait for them, or `.await` them.
//! - [`DeviceCopy`] and [`Firstprivate`] say which types may cross into a region; [`ReduceOp`] defines a
//!   reduction operator; [`Error`] says why a region or call failed.
//! - Float math as functions ([`sqrt`], [`powi`], ..) that read the same in region and host code.
//!
//! # Inside the runtime
//!
//! The crate is built in layers, libomptarget's, each a module named for what it holds. A module uses only modules of
//! its own layer (without a cycle) and of the layers below it, never one above; `tests/layers.rs` checks this on the
//! source. From the top:
//!
//! - `task`: tasks ([`task_scope`], [`TaskScope::spawn`], [`spawn`], a region's `nowait_f`) and the helper threads
//!   that run them: host code run asynchronously, so it sits above everything a task may call.
//! - `api`: the public runtime routines (`omp_get_num_devices`, `omp_target_alloc`, ...), [`DeviceBuffer`], the
//!   team queries and [`barrier`] as host code sees them, the float math.
//! - `region`: what `#[target]` and the data macros expand to: a region call (select a device, map, launch, unmap,
//!   or run the host fallback), the map-list walk, the data environments, [`DeviceCopy`] and the public [`Error`].
//! - `device`: the device table (every plugin's devices, numbered, loaded lazily), the one device wrapper through
//!   which every plugin call is made and observed, and each device's present table with OpenMP's reference counts.
//! - `plugin`: vendor code only, behind one interface: `host-elf` (the host as a device), `cuda`, `amdgpu`. A plugin
//!   returns what happened as a typed error or a note; it never prints.
//! - `host`: the host team executor: the thread pool, teams of host threads and their barriers, the shares of a
//!   loop, what a host thread runs as inside a region. The `host-elf` plugin and the host fallback both run on it.
//! - `registry`: the offload entries and device images of the fat binary, registered before `main`.
//! - `observe`: `OFFLOAD_INFO` lines and the `OFFLOAD_PROFILE` trace; it takes plain values, so it depends on
//!   nothing it observes.
//! - `env`: every setting read from the environment (`OMP_TARGET_OFFLOAD`, `OMP_DEFAULT_DEVICE`, `OFFLOAD_INFO`,
//!   ...) and the per-thread default device.
//!
//! So the rule is `task` -> `api` -> `region` -> `device` -> `plugin` -> `host` -> `registry` -> `observe` -> `env`. This
//! file only declares the layers and re-exports the public API, and `eprintln_whole!`, which every layer prints
//! with.

#![deny(missing_docs)]

/// `eprintln!` in one `write`: std's writes each piece of the format apart, so when processes share a stderr (MPI
/// ranks under one launcher, a job's steps into one log) another's output lands inside a line.
macro_rules! eprintln_whole {
    ($($arg:tt)*) => {{
        use ::std::io::Write as _;
        let mut line = ::std::format!($($arg)*);
        line.push('\n');
        let _ = ::std::io::stderr().lock().write_all(line.as_bytes());
    }};
}

mod api;
mod device;
mod env;
mod host;
mod observe;
mod plugin;
mod region;
mod registry;
mod task;

pub use api::buffer::DeviceBuffer;
pub use api::math::*;
pub use api::routines::*;
pub use api::team::*;
pub use device::{inventory, PluginReport};
/// Loop shares and reduction setup that a parallel region's lowered body calls (expansion plumbing).
#[doc(hidden)]
pub use host::{
    reduce_init as __reduce_init, share as __share, share_chunks as __share_chunks,
    share_dynamic as __share_dynamic, share_nest as __share_nest,
};
pub use offload_macros::{
    declare_target, target, target_data, target_enter_data, target_exit_data, target_update, Mapper,
};
pub use offload_model::abi::SharedAtomic;
/// The loop drivers a work-shared loop is lowered to (expansion plumbing).
#[doc(hidden)]
pub use offload_model::lanes as __lanes;
/// The reduction operators and tuples the `reduction` clause expands to (expansion plumbing).
#[doc(hidden)]
pub use offload_model::reduce as __reduce;
/// An operator of `reduction(op: var)`: built in (`+ * min max & | ^ && ||`), or your own (OpenMP's
/// `declare reduction`), a `#[declare_target]` unit struct implementing this trait for a `#[declare_target]` type
/// and named in the clause as the built-in ones are: `reduction(Span: r)`.
///
/// ```
/// use offload::{declare_target, target, ReduceOp};
///
/// #[declare_target]
/// #[repr(C)]
/// #[derive(Clone, Copy, Debug, PartialEq)]
/// pub struct Range {
///     lo: f64,
///     hi: f64,
/// }
///
/// /// The smallest range holding both.
/// #[declare_target]
/// #[repr(C)]
/// pub struct Span;
///
/// #[declare_target]
/// impl ReduceOp<Range> for Span {
///     fn identity() -> Range {
///         Range { lo: f64::INFINITY, hi: f64::NEG_INFINITY }
///     }
///     fn combine(a: Range, b: Range) -> Range {
///         Range { lo: a.lo.min(b.lo), hi: a.hi.max(b.hi) }
///     }
/// }
///
/// #[target(teams_distribute_parallel_for, num_teams(4), reduction(Span: r))]
/// fn range_of(x: &[f64]) -> Range {
///     let mut r = Range { lo: 0.0, hi: 0.0 };
///     for i in 0..x.len() {
///         r.lo = r.lo.min(x[i]);
///         r.hi = r.hi.max(x[i]);
///     }
///     r
/// }
///
/// fn main() {
///     let x: Vec<f64> = (0..1000).map(|i| (i % 37) as f64 - 10.0).collect();
///     assert_eq!(range_of(&x), Range { lo: -10.0, hi: 26.0 });
/// }
/// ```
pub use offload_model::reduce::ReduceOp;
/// The numbers `reduction(+|*|min|max: ..)` combines: every integer and float type. A generic region's reduction
/// over its own `T` needs `T: Numeric`, as BabelStream's templated `dot` does:
///
/// ```
/// use offload::{target, DeviceCopy, Numeric};
///
/// pub trait Real: DeviceCopy + Numeric + std::ops::Add<Output = Self> + std::ops::Mul<Output = Self> {}
/// impl Real for f32 {}
/// impl Real for f64 {}
///
/// #[target(teams_distribute_parallel_for, reduction(+: s), instantiate(f32, f64))]
/// fn dot<T: Real>(a: &[T], b: &[T]) -> T {
///     let mut s = T::ZERO;
///     for i in 0..a.len() {
///         s = s + a[i] * b[i];
///     }
///     s
/// }
///
/// assert_eq!(dot(&[1.0f32, 2.0], &[3.0, 4.0]), 11.0);
/// ```
pub use offload_model::reduce::{Integer, Numeric};
/// The per-thread views a `&mut [T]` parameter becomes in a parallel body (expansion plumbing).
#[doc(hidden)]
pub use offload_model::view as __view;
pub use plugin::DeviceDescription;
pub use region::{
    data_scope, DataScope, DeviceCopy, DevicePtr, Error, Firstprivate, Fixed, MapOwner, Mapped,
    MutArg, ScopedMapped, ScopedSource, ToView,
};
pub use task::{spawn, task_scope, Task, TaskScope};

/// Used by the code `#[target]` and `#[declare_target]` expand to; not a public API.
#[doc(hidden)]
pub mod __private {
    pub use crate::api::buffer::{host_slice, host_slice_mut};
    pub use crate::device::llvm;
    pub use crate::host::{run_fallback, run_fallback_reduce, Launch};
    pub use crate::region::block::{run_block, BlockTry, Flow, FromBlockResidual};
    pub use crate::region::call::{
        call, fail, instance_key, Call, Callee, GenericRegion, Instance, RegionInfo,
    };
    pub use crate::region::data::{
        enter_data, exit_data, update_from, update_to, DataDevice, EnterTo, MapSource,
        MapSourceMut, MapTarget, MapToExcl, MapToShared, MapWrite, MapWriteAtomic, MappedMut,
        MappedRef, Rebind, Section, ViewFallback,
    };
    pub use crate::region::maplist::{name_entries, MapArg};
    pub use crate::region::mapper::{
        mapper_data_maps, owned_mapper_data_maps, parallel_mapper, Mapper, MapperRaw, OwnedMapper,
        RefMaps, RefParam, ViaObject, ViaOwnedMapper,
    };
    pub use offload_model::abi::map_type::{mapper_field, DEVICE_WRITES, FROM, TO};
    pub use offload_model::abi::{Construct, VarSite};
    pub use offload_model::reduce::fold;

    /// Marker types that stand for a generic region's const arguments in its instance keys (`ConstUsize<4>`).
    pub mod konst {
        macro_rules! markers {
            ($($name:ident: $t:ty),*) => { $(pub struct $name<const N: $t>;)* };
        }
        markers!(
            ConstU8: u8, ConstU16: u16, ConstU32: u32, ConstU64: u64, ConstU128: u128, ConstUsize: usize,
            ConstI8: i8, ConstI16: i16, ConstI32: i32, ConstI64: i64, ConstI128: i128, ConstIsize: isize,
            ConstBool: bool, ConstChar: char
        );
    }

    /// Lets a parallel region's host fallback run its body on several threads. The expansion wraps only regions
    /// whose shared data is `&T`/`&[T]` (atomics for writes) or that are `unsafe fn`. The field is private and
    /// [`AssertSync::new`] is `unsafe`, so safe code cannot use it to share a `Cell` across threads.
    pub struct AssertSync<F>(F);
    // SAFETY: `new`'s contract: whoever wrapped the value promised that sharing it across threads is sound.
    unsafe impl<F> Sync for AssertSync<F> {}

    impl<F> AssertSync<F> {
        /// Wraps `f` so that it may be shared across threads.
        ///
        /// # Safety
        /// Calling (or otherwise using) `f` from several threads at once must be free of data races: everything it
        /// captures that it writes is written through atomics or kept apart by the caller, as `#[target]` ensures
        /// for a parallel region's body (shared data are `&T`/`&[T]`, atomics for writes, or the region is an
        /// `unsafe fn`).
        pub unsafe fn new(f: F) -> Self {
            AssertSync(f)
        }

        /// Calls the body through the wrapper, so a closure calling this captures the wrapper, not the body.
        pub fn call<R>(&self) -> R
        where
            F: Fn() -> R,
        {
            (self.0)()
        }
    }
    pub use crate::region::types::{assert_device_copy, assert_firstprivate, count, DeviceNum};
    pub use crate::registry::{OFFLOAD_ENTRIES, OFFLOAD_IMAGES};
    /// The crate behind the tables: the expansion adds each region's entry to `OFFLOAD_ENTRIES` with it.
    pub use linkme;
    pub use offload_model::fatbin::{DeviceImageRecord, ImageFormat, OffloadEntry};
    pub use offload_model::identity::{mangle, mangled_len};
}
