//! `offload`: OpenMP target offloading for Rust.
//!
//! Mark a function `#[target(...)]` and it becomes a region: calling it runs its body on an offload device (the
//! `host-elf` device runs an x86_64 image with its own memory), or on the host when no device can take it. Functions,
//! consts and `#[repr(C)]` types that regions use are marked `#[declare_target]`. The package's `build.rs` is
//! `fn main() { offload_build::build(); }`.
//!
//! The layers, as in libomptarget: [`tables`] (offload entries and device images in the fat binary, registered
//! before `main`), [`plugin`] (one trait, one implementation per device kind), [`device`] (the device table, loaded
//! lazily), [`mapping`] (each device's present table with OpenMP's reference counts), [`launch`] (a region call:
//! select a device, map, launch, unmap, or fall back), [`icv`] (the environment).

mod api;
mod buffer;
mod data;
mod device;
mod error;
mod icv;
mod launch;
mod mapping;
mod math;
mod observe;
mod plugin;
mod pool;
mod profile;
mod tables;
mod team;
mod team_api;
mod types;

pub use api::*;
pub use buffer::{DeviceBuffer, DevicePtr};
pub use data::{MapOwner, Mapped};
pub use error::Error;
pub use math::*;
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
pub use plugin::{inventory, DeviceDescription, PluginReport};
#[doc(hidden)]
pub use team::{
    reduce_init as __reduce_init, share as __share, share_chunks as __share_chunks,
    share_dynamic as __share_dynamic, share_nest as __share_nest,
};
pub use team_api::*;
pub use types::{DeviceCopy, Firstprivate};

/// Used by the code `#[target]` and `#[declare_target]` expand to; not a public API.
#[doc(hidden)]
pub mod __private {
    pub use crate::buffer::{host_slice, host_slice_mut};
    pub use crate::data::{
        enter_data, exit_data, update_from, update_to, DataDevice, EnterTo, MapSource,
        MapSourceMut, MapTarget, MapToExcl, MapToShared, MapWrite, MappedMut, MappedRef,
    };
    pub use crate::launch::{
        fail, target, target_device_memory, target_on_device, MapArg, RegionInfo,
    };
    pub use crate::team::{run_fallback, run_fallback_reduce, Launch};
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
    pub use crate::tables::{OFFLOAD_ENTRIES, OFFLOAD_IMAGES};
    pub use crate::types::{assert_device_copy, assert_firstprivate, count, DeviceNum};
    pub use linkme;
    pub use offload_model::fatbin::{DeviceImageRecord, ImageFormat, OffloadEntry};
    pub use offload_model::identity::{mangle, mangled_len};
}
