//! `offload`: OpenMP target offloading for Rust.
//!
//! Mark a function `#[target(...)]` and it becomes a region: calling it runs its body on an offload device (the
//! `host-elf` device runs an x86_64 image with its own memory), or on the host when no device can take it. Functions,
//! consts and `#[repr(C)]` types that regions use are marked `#[declare_target]`. The package's `build.rs` is
//! `fn main() { offload_build::build(); }`.
//!
//! # Inside the runtime
//!
//! The crate is built in layers, libomptarget's, each a module named for what it holds. A module uses only modules of
//! its own layer (without a cycle) and of the layers below it, never one above; `tests/layers.rs` checks this on the
//! source. From the top:
//!
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
//! So the rule is `api` -> `region` -> `device` -> `plugin` -> `host` -> `registry` -> `observe` -> `env`. This
//! file only declares the layers and re-exports the public API.

mod api;
mod device;
mod env;
mod host;
mod observe;
mod plugin;
mod region;
mod registry;

pub use api::buffer::DeviceBuffer;
pub use api::math::*;
pub use api::routines::*;
pub use api::team::*;
pub use device::{inventory, PluginReport};
#[doc(hidden)]
pub use host::{
    reduce_init as __reduce_init, share as __share, share_chunks as __share_chunks,
    share_dynamic as __share_dynamic, share_nest as __share_nest,
};
pub use offload_macros::{
    declare_target, target, target_data, target_enter_data, target_exit_data, target_update,
};
pub use offload_model::abi::SharedAtomic;
#[doc(hidden)]
pub use offload_model::lanes as __lanes;
#[doc(hidden)]
pub use offload_model::reduce as __reduce;
pub use offload_model::reduce::ReduceOp;
#[doc(hidden)]
pub use offload_model::view as __view;
pub use plugin::DeviceDescription;
pub use region::{DeviceCopy, DevicePtr, Error, Firstprivate, MapOwner, Mapped};

/// Used by the code `#[target]` and `#[declare_target]` expand to; not a public API.
#[doc(hidden)]
pub mod __private {
    pub use crate::api::buffer::{host_slice, host_slice_mut};
    pub use crate::host::{run_fallback, run_fallback_reduce, Launch};
    pub use crate::region::data::{
        enter_data, exit_data, update_from, update_to, DataDevice, EnterTo, MapSource,
        MapSourceMut, MapTarget, MapToExcl, MapToShared, MapWrite, MappedMut, MappedRef,
    };
    pub use crate::region::launch::{
        fail, target, target_device_memory, target_on_device, RegionInfo,
    };
    pub use crate::region::maplist::MapArg;
    pub use offload_model::reduce::fold;

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
    pub use linkme;
    pub use offload_model::fatbin::{DeviceImageRecord, ImageFormat, OffloadEntry};
    pub use offload_model::identity::{mangle, mangled_len};
}
