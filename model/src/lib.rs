//! What every side of `offload` must agree on, in one place:
//! - [`identity`]: how a region is named (crate + module path + function) and the device symbol that name mangles to;
//! - [`fatbin`]: the fat binary's tables (section names, entry and image-record layouts, their one encoder and
//!   decoder, image formats);
//! - [`abi`]: the kernel ABI's run-time half, shared by map lists, the runtime, offload-device and the kernel entries;
//!   `plan` (feature `syntax`): its compile-time half, each region parameter's slots, map entries and rebuild,
//!   computed once for the macro and the outliner;
//! - [`reduce`] and [`lanes`]: the reduction operators and the loop drivers work-shared loops are lowered to;
//! - [`view`]: what a `&mut [T]` parameter is inside a parallel body, and the tokens that make its writes race-free;
//! - `lower` (feature `syntax`): the one lowering of a region's body, which the macro and the outliner both apply;
//! - [`device_kind`]: the device kinds, their triples and plugins, and how their architectures are written (`sm_XX`,
//!   `gfxNNN`, x86-64 levels);
//! - [`hash`]: the one stable hash (package tags, image ids, cache keys);
//! - `clause`, `region`, `data` (feature `syntax`): the clause model, parsed and validated once for the macros and the
//!   outliner (`frontend`: the parse, then `validate`), every phase's mistakes collected by `errors`;
//! - `mapper` (feature `syntax`): the one reading of a `#[derive(Mapper)]` struct's fields, for the derive and the
//!   outliner.
//!
//! This crate is offload's internal agreement between its macros, build support, runtime and device library, used
//! through `offload` and `offload-build`; its API follows their versions but is not meant to be used directly.
#![cfg_attr(not(feature = "syntax"), no_std)]
#![deny(missing_docs)]

pub mod abi;
#[cfg(feature = "syntax")]
pub mod clause;
#[cfg(feature = "syntax")]
pub mod data;
pub mod device_kind;
pub mod device_print;
#[cfg(feature = "syntax")]
pub mod errors;
pub mod fatbin;
#[cfg(feature = "syntax")]
pub mod frontend;
pub mod gpu_panic;
pub mod hash;
pub mod identity;
pub mod lanes;
#[cfg(feature = "syntax")]
pub mod lower;
#[cfg(feature = "syntax")]
pub mod mapper;
mod math;
#[cfg(feature = "syntax")]
pub mod plan;
pub mod reduce;
#[cfg(feature = "syntax")]
pub mod region;
#[cfg(feature = "syntax")]
pub mod resolve;
#[cfg(feature = "syntax")]
pub mod validate;
pub mod view;
#[cfg(feature = "syntax")]
pub mod worksharing;
