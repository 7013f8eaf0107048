//! Generic regions and regions in `impl` blocks: what a kernel of one `instantiate(..)` argument list is, and the
//! names both sides give it.
//!
//! A generic region is compiled like C++'s explicit template instantiation: the region lists its argument lists
//! (`instantiate(f32, f64)`), the outliner writes one kernel entry per list, and the macro one offload entry per list,
//! each named `module::triad<f32>`. A call with another type finds no kernel and runs on the host.
//!
//! Here is the machinery: the parameters, the text of tokens both sides print alike, and the substitution of an
//! instance's arguments. The names and instances are asked of the region ([`Region::instance_name`],
//! [`Region::instance`], in `region/mod.rs`); the rules a generic region follows are `validate.rs`'s.

use super::{ParamKind, Region};
use proc_macro2::{TokenStream, TokenTree};
use quote::ToTokens;
use syn::visit_mut::VisitMut;
use syn::{GenericArgument, Ident, Type};

/// A type or const parameter of a generic region.
#[derive(Clone, Debug)]
pub struct GenericParam {
    /// The parameter's name.
    pub ident: Ident,
    /// A const parameter's type (`usize` of `const N: usize`); `None` for a type parameter.
    pub const_ty: Option<Type>,
}

/// The types a const parameter of a generic region may have: the host tells instances apart by a marker type per
/// const type (`offload::__private::ConstUsize<N>`), which stable Rust can only write for these.
pub const CONST_PARAM_TYPES: &[&str] = &[
    "u8", "u16", "u32", "u64", "u128", "usize", "i8", "i16", "i32", "i64", "i128", "isize", "bool",
    "char",
];

pub(crate) fn params(generics: &syn::Generics) -> Vec<GenericParam> {
    generics
        .params
        .iter()
        .filter_map(|g| match g {
            syn::GenericParam::Type(t) => Some(GenericParam {
                ident: t.ident.clone(),
                const_ty: None,
            }),
            syn::GenericParam::Const(c) => Some(GenericParam {
                ident: c.ident.clone(),
                const_ty: Some(c.ty.clone()),
            }),
            syn::GenericParam::Lifetime(_) => None,
        })
        .collect()
}

/// Tokens as text that does not depend on who printed them (the compiler's `proc_macro` and `proc_macro2`'s own
/// printer space tokens differently): a space only between two words, so `Vec3 < f32 >` is `Vec3<f32>`.
pub fn canonical_tokens(ts: TokenStream) -> String {
    fn walk(ts: TokenStream, out: &mut String, word: &mut bool) {
        for tt in ts {
            match tt {
                TokenTree::Group(g) => {
                    let (open, close) = match g.delimiter() {
                        proc_macro2::Delimiter::Parenthesis => ("(", ")"),
                        proc_macro2::Delimiter::Brace => ("{", "}"),
                        proc_macro2::Delimiter::Bracket => ("[", "]"),
                        proc_macro2::Delimiter::None => ("", ""),
                    };
                    out.push_str(open);
                    *word = false;
                    walk(g.stream(), out, word);
                    out.push_str(close);
                    *word = false;
                }
                TokenTree::Punct(p) => {
                    out.push(p.as_char());
                    *word = false;
                }
                TokenTree::Ident(_) | TokenTree::Literal(_) => {
                    if *word {
                        out.push(' ');
                    }
                    out.push_str(&tt.to_string());
                    *word = true;
                }
            }
        }
    }
    let mut out = String::new();
    walk(ts, &mut out, &mut false);
    out
}

/// The region with instance `k`'s arguments put for its parameters (and the impl's type for `Self`) in every type it
/// declares ([`Region::instance`]).
pub(super) fn instance(region: &Region, k: Option<usize>) -> Region {
    // `Self` is the impl's type with the instance's arguments (`Grid<f32>` for `Grid<T>`).
    let mut subst = Subst {
        types: k.map_or_else(Vec::new, |k| substitutions(region, k)),
        self_ty: instance_self_ty(region, k),
    };
    let mut r = region.clone();
    for p in &mut r.params {
        subst.visit_type_mut(&mut p.ty);
        match &mut p.kind {
            ParamKind::Slice { elem, .. } => subst.visit_type_mut(elem),
            ParamKind::Ref { ty, .. } => subst.visit_type_mut(ty),
            _ => {}
        }
    }
    if let Some(t) = &mut r.ret {
        subst.visit_type_mut(t);
    }
    for t in r.reduce_tys.iter_mut().flatten() {
        subst.visit_type_mut(t);
    }
    r
}

/// The impl's type with instance `k`'s arguments put for the impl's parameters ([`Region::instance_self_ty`]).
pub(super) fn instance_self_ty(region: &Region, k: Option<usize>) -> Option<Type> {
    let mut t = region.self_ty.clone()?;
    if let Some(k) = k {
        let mut subst = Subst {
            types: substitutions(region, k),
            self_ty: None,
        };
        subst.visit_type_mut(&mut t);
    }
    Some(t)
}

/// Each generic parameter's name with instance `k`'s argument for it.
fn substitutions(region: &Region, k: usize) -> Vec<(Ident, TokenStream)> {
    region
        .generic_params
        .iter()
        .zip(&region.instances[k].args)
        .map(|(p, a)| {
            let tokens = match a {
                GenericArgument::Const(e) => e.to_token_stream(),
                other => other.to_token_stream(),
            };
            (p.ident.clone(), tokens)
        })
        .collect()
}

/// Puts types for the names of type parameters (and const values for const parameters' names in array lengths).
struct Subst {
    types: Vec<(Ident, TokenStream)>,
    self_ty: Option<Type>,
}

impl VisitMut for Subst {
    fn visit_type_mut(&mut self, ty: &mut Type) {
        if let Type::Path(p) = ty {
            if p.qself.is_none() {
                if let Some(id) = p.path.get_ident() {
                    if let Some((_, t)) = self.types.iter().find(|(n, _)| n == id) {
                        *ty = syn::parse_quote!(#t);
                        return;
                    }
                    if id == "Self" {
                        if let Some(s) = &self.self_ty {
                            *ty = s.clone();
                            return;
                        }
                    }
                }
            }
        }
        syn::visit_mut::visit_type_mut(self, ty);
    }

    fn visit_expr_mut(&mut self, e: &mut syn::Expr) {
        if let syn::Expr::Path(p) = e {
            if let Some(id) = p.path.get_ident() {
                if let Some((_, t)) = self.types.iter().find(|(n, _)| n == id) {
                    *e = syn::parse_quote!({ #t });
                    return;
                }
            }
        }
        syn::visit_mut::visit_expr_mut(self, e);
    }
}
