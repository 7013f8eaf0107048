//! The front end of a `#[target]` region, its phases in order, as serde_derive has them: parse, then validate. The
//! parse (`region/parse.rs`) reads the clauses and the signature into a [`Region`] (what each word and parameter
//! is); the validation (`validate.rs`) checks the region against the rules (construct combinations, generic
//! instances, race freedom, uniform bounds, reductions). Both push spanned errors into one [`Errors`], so a user sees
//! every mistake at once.
//!
//! The macro and the outliner both enter here. It is a module of its own because the phases read in one direction:
//! the clause model (`region`) knows nothing of the rules (`validate`, and the loop rules of `worksharing` it calls),
//! which read it; this module, above both, puts them together.

use crate::errors::Errors;
use crate::region::{InImpl, Region};
use proc_macro2::TokenStream;
use syn::ItemFn;

/// Parses the attribute arguments `args` against the function `func`, then validates the region; every error,
/// combined.
pub fn parse_region(args: TokenStream, func: &ItemFn) -> syn::Result<Region> {
    parse_region_in(args, func, None)
}

/// As [`parse_region`], for a method of the impl `imp` (`None`: a free function).
pub fn parse_region_in(
    args: TokenStream,
    func: &ItemFn,
    imp: Option<InImpl<'_>>,
) -> syn::Result<Region> {
    let mut errors = Errors::default();
    let (mut region, words) = crate::region::parse::parse(args, func, imp, &mut errors);
    crate::validate::validate(&region, &words, func, &mut errors);
    if errors.is_empty() {
        region.reduce_tys = reduce_tys(&region, func);
    }
    errors.finish(region)
}

/// The reduction variables' types where the tail is an expression of them ([`Region::reduce_tys`]).
fn reduce_tys(region: &Region, func: &ItemFn) -> Option<Vec<syn::Type>> {
    if region.reductions.is_empty() || !region.construct.is_work_shared() {
        return None;
    }
    // Validated: what the search reports was reported there.
    let mut errors = Errors::default();
    let ws = crate::worksharing::find(region, &func.block, &mut errors);
    let tail =
        ws.and_then(|ws| crate::worksharing::reduction_tail(region, &func.block, &ws, &mut errors));
    errors.discard();
    tail.map(|t| t.tys)
}
