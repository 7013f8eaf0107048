//! `#[target]` and `#[declare_target]`: parse (the model crate) -> validate (spanned errors, all at once) -> expand.
//! The expansion compiles no device code and never refers to build-script outputs, so crates without images still
//! build; build support outlines the same regions into the device crate.

mod declare_target;
mod target;

use proc_macro::TokenStream;

/// Marks a function as an offload region (OpenMP's `#pragma omp target`). See the crate `offload` for the clauses.
#[proc_macro_attribute]
pub fn target(args: TokenStream, item: TokenStream) -> TokenStream {
    target::expand(args.into(), item.into()).into()
}

/// Makes a function, const, `#[repr(C)]` struct, `Copy` enum or `impl` block usable in regions (OpenMP's
/// `declare target`).
#[proc_macro_attribute]
pub fn declare_target(args: TokenStream, item: TokenStream) -> TokenStream {
    declare_target::expand(args.into(), item.into()).into()
}
