//! What every side of `offload` must agree on at run time and in the build, in one place, `no_std` so the devices
//! share it:
//! - [`identity`]: how a region is named (crate + module path + function) and the device symbol that name mangles to;
//! - [`fatbin`]: the fat binary's tables (section names, entry and image-record layouts, their one encoder and
//!   decoder, image formats);
//! - [`abi`]: the kernel ABI's run-time half, shared by map lists, the runtime, offload-device and the kernel entries
//!   (its compile-time half, each region parameter's plan, is `offload_frontend::plan`);
//! - [`reduce`] and [`lanes`]: the reduction operators and the loop drivers work-shared loops are lowered to;
//! - [`view`]: what a `&mut [T]` parameter is inside a parallel body, and the tokens that make its writes race-free;
//! - [`device_kind`]: the device kinds, their triples and plugins, and how their architectures are written (`sm_XX`,
//!   `gfxNNN`, x86-64 levels);
//! - [`gpu_panic`] and [`device_print`]: the GPU panic record's and print buffer's protocols;
//! - [`hash`]: the one stable hash (package tags, image ids, cache keys).
//!
//! The clause model, the checks and the one lowering of a region's body, which parse Rust syntax, are the frontend
//! crate's (`offload-frontend`, in `model/frontend/`), which the macros and the build use.
//!
//! This crate is offload's internal agreement between its macros, build support, runtime and device library, used
//! through `offload` and `offload-build`; its API follows their versions but is not meant to be used directly.
#![cfg_attr(not(any(test, feature = "std")), no_std)]
#![deny(missing_docs)]

pub mod abi;
pub mod device_kind;
pub mod device_print;
pub mod fatbin;
pub mod gpu_panic;
pub mod hash;
pub mod identity;
pub mod lanes;
mod math;
pub mod reduce;
pub mod view;
