//! What every side of `offload` must agree on, in one place:
//! - [`identity`]: how a region is named (crate + module path + function) and the device symbol that name mangles to;
//! - [`abi`]: the binary layouts shared by the fat binary, the runtime and the device images;
//! - [`reduce`] and [`lanes`]: the reduction operators and the loop drivers work-shared loops are lowered to;
//! - [`cpu`]: the x86-64 levels a host image may be built for;
//! - `clause`, `region`, `data` (feature `syntax`): the clause model, parsed and validated once for the macros and the
//!   outliner.
#![cfg_attr(not(feature = "syntax"), no_std)]

pub mod abi;
#[cfg(feature = "syntax")]
pub mod clause;
pub mod cpu;
#[cfg(feature = "syntax")]
pub mod data;
pub mod identity;
pub mod lanes;
mod math;
pub mod reduce;
#[cfg(feature = "syntax")]
pub mod region;
#[cfg(feature = "syntax")]
pub mod worksharing;
