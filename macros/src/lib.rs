//! `#[target]` and `#[declare_target]`: parse (the model crate) -> validate (spanned errors, all at once) -> expand.
//! The expansion compiles no device code and never refers to build-script outputs, so crates without images still
//! build; build support outlines the same regions into the device crate.

mod data;
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

/// A structured device data environment (OpenMP's `target data`):
/// `target_data!(map(to: x), map(tofrom: y), device(d), if(c) => { .. })`. Inside the block each mapped name is
/// re-bound to a reference to its data (`&mut [T]`; for `to` only where the source is a `&mut` or the block writes
/// it, else `&[T]`: OpenMP's `to` governs only the copy-in); regions called there find it present and copy nothing. The exit runs on every way out of the block.
#[proc_macro]
pub fn target_data(input: TokenStream) -> TokenStream {
    data::target_data(input.into()).into()
}

/// `target_enter_data!(map(to: v))`: maps an owned `Vec<T>`, `Box<[T]>` or `Box<T>` until it is exited, returning
/// `offload::Mapped<V>` (a tuple of them for several maps).
#[proc_macro]
pub fn target_enter_data(input: TokenStream) -> TokenStream {
    data::target_enter_data(input.into()).into()
}

/// `target_exit_data!(map(from: m), device(d))` (or `release`, `delete`; `device` optional, and must be the
/// entry's): exits a `Mapped<V>` and returns the buffer.
#[proc_macro]
pub fn target_exit_data(input: TokenStream) -> TokenStream {
    data::target_exit_data(input.into()).into()
}

/// `target_update!(to: x)`, `target_update!(from: y[lo..hi], device(d))`: refreshes the device or host copy of
/// mapped data; data that is not mapped is left alone.
#[proc_macro]
pub fn target_update(input: TokenStream) -> TokenStream {
    data::target_update(input.into()).into()
}
