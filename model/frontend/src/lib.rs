//! The clause model and everything that reads region syntax, once, for the macros and the outliner:
//! - `clause`, `region`, `data`: the clause model of `#[target]` regions and the data constructs, parsed and
//!   validated once ([`frontend`]: the parse, then `validate`), every phase's mistakes collected by `errors`;
//! - [`resolve`]: the body's names resolved to their bindings, which every rule asks instead of spellings;
//! - [`worksharing`]: the work-shared loop's shape and rules (races, indices, uniform bounds, reductions);
//! - [`lower`]: the one lowering of a region's body, which the macro and the outliner both apply;
//! - [`plan`]: the kernel ABI's compile-time half, each region parameter's slots, map entries and rebuild;
//! - [`mapper`]: the one reading of a `#[derive(Mapper)]` struct's fields, for the derive and the outliner.
//!
//! What the runtime and the devices share with it (the kernel ABI's run-time half, identity, the fat binary, views
//! and loop drivers) is `offload-model`, `no_std`.
//!
//! This crate is offload's internal agreement between its macros and build support; its API follows their
//! versions but is not meant to be used directly.
#![deny(missing_docs)]

pub mod clause;
pub mod data;
pub mod errors;
pub mod frontend;
pub mod lower;
pub mod mapper;
pub mod plan;
pub mod region;
pub mod resolve;
pub mod validate;
pub mod worksharing;
