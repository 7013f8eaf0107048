//! Generic regions and regions in `impl` blocks: what a kernel of one `instantiate(..)` argument list is, and the
//! names both sides give it.
//!
//! A generic region is compiled like C++'s explicit template instantiation: the region lists its argument lists
//! (`instantiate(f32, f64)`), the outliner writes one kernel entry per list, and the macro one offload entry per list,
//! each named `module::triad<f32>`. A call with another type finds no kernel and runs on the host.

use super::{ParamKind, Region};
use crate::errors::Errors;
use proc_macro2::{TokenStream, TokenTree};
use quote::ToTokens;
use syn::spanned::Spanned;
use syn::visit_mut::VisitMut;
use syn::{GenericArgument, Ident, Type};

/// A type or const parameter of a generic region.
#[derive(Clone, Debug)]
pub struct GenericParam {
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

impl Region {
    /// Whether the region has type or const parameters (it then has a kernel per `instantiate(..)` list).
    pub fn is_generic(&self) -> bool {
        !self.generic_params.is_empty()
    }

    /// The region's name after its module path: `triad`, `Grid::step` for a method region.
    pub fn local_name(&self) -> String {
        match &self.self_ty {
            Some(t) => format!("{}::{}", canonical_tokens(t.to_token_stream()), self.ident),
            None => self.ident.to_string(),
        }
    }

    /// The name of instance `k` after the module path: `triad<f32>`, `axpy<f64,4>`.
    pub fn instance_name(&self, k: usize) -> String {
        let args = &self.instances[k].args;
        format!(
            "{}<{}>",
            self.local_name(),
            canonical_tokens(quote::quote!(#(#args),*))
        )
    }

    /// The region with instance `k`'s arguments put for its parameters (and the impl's type for `Self`) in every
    /// type it declares: what a kernel entry, which is not generic, must name.
    pub fn instance(&self, k: Option<usize>) -> Region {
        // `Self` is the impl's type with the instance's arguments (`Grid<f32>` for `Grid<T>`).
        let mut subst = Subst {
            types: k.map_or_else(Vec::new, |k| self.substitutions(k)),
            self_ty: self.instance_self_ty(k),
        };
        let mut r = self.clone();
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
        r
    }

    /// Instance `k`'s arguments as a turbofish (`::<f32, 4>`), for the kernel entry's call: the function's own (a
    /// generic impl's go in its type, [`Region::instance_self_ty`]); none if it has none.
    pub fn turbofish(&self, k: usize) -> Option<TokenStream> {
        let args = &self.instances[k].args[self.impl_params.min(self.instances[k].args.len())..];
        (!args.is_empty()).then(|| quote::quote!(::<#(#args),*>))
    }

    /// The impl's type with instance `k`'s arguments put for the impl's parameters (`Grid<f32>` of `impl<T>
    /// Grid<T>`), for the kernel entry's call `<Grid<f32>>::step`.
    pub fn instance_self_ty(&self, k: Option<usize>) -> Option<Type> {
        let mut t = self.self_ty.clone()?;
        if let Some(k) = k {
            let mut subst = Subst {
                types: self.substitutions(k),
                self_ty: None,
            };
            subst.visit_type_mut(&mut t);
        }
        Some(t)
    }

    /// Each generic parameter's name with instance `k`'s argument for it.
    fn substitutions(&self, k: usize) -> Vec<(Ident, TokenStream)> {
        self.generic_params
            .iter()
            .zip(&self.instances[k].args)
            .map(|(p, a)| {
                let tokens = match a {
                    GenericArgument::Const(e) => e.to_token_stream(),
                    other => other.to_token_stream(),
                };
                (p.ident.clone(), tokens)
            })
            .collect()
    }
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

/// The rules of generic regions: each has `instantiate(..)`, each list fits the parameters, none twice.
pub(crate) fn check(region: &Region, sig: &syn::Signature, errors: &mut Errors) {
    let params = &region.generic_params;
    if params.is_empty() {
        if let Some(i) = region.instances.first() {
            errors.push(syn::Error::new(
                i.span,
                format!(
                    "`instantiate` lists the types a generic region is compiled for, but `{}` has no type or const \
                     parameters",
                    region.ident
                ),
            ));
        }
        return;
    }
    for p in params {
        if let Some(t) = &p.const_ty {
            let name = t.to_token_stream().to_string();
            if !CONST_PARAM_TYPES.contains(&name.as_str()) {
                errors.push(syn::Error::new(
                    t.span(),
                    format!(
                        "a generic region's const parameter must be an integer, `bool` or `char`, not `{name}`"
                    ),
                ));
            }
        }
    }
    // A clause list that did not parse was reported; it may well have held the `instantiate`.
    if region.instances.is_empty() && errors.is_empty() {
        let names: Vec<String> = params.iter().map(|p| p.ident.to_string()).collect();
        let example = if params.len() == 1 {
            "instantiate(f32, f64)".to_string()
        } else {
            "instantiate(<f32, u32>, <f64, u64>)".to_string()
        };
        let first = sig
            .generics
            .params
            .iter()
            .find(|g| !matches!(g, syn::GenericParam::Lifetime(_)))
            .map_or_else(|| sig.ident.span(), |g| g.span());
        let whose = if region.impl_params > 0 {
            " (a generic impl's parameters first, then the method's own)"
        } else {
            ""
        };
        errors.push(syn::Error::new(
            first,
            format!(
                "a generic region lists the arguments it is compiled for: add `{example}` to `#[target(..)]` (one \
                 kernel per list, for <{}>{whose}, as C++'s explicit template instantiation); a call with other \
                 arguments runs on the host",
                names.join(", ")
            ),
        ));
    }
    let mut seen: Vec<String> = Vec::new();
    for (k, inst) in region.instances.iter().enumerate() {
        if inst.args.len() != params.len() {
            errors.push(syn::Error::new(
                inst.span,
                format!(
                    "`{}` has {} type and const parameter{}, so each `instantiate` entry gives {}{}",
                    region.ident,
                    params.len(),
                    if params.len() == 1 { "" } else { "s" },
                    params.len(),
                    if params.len() > 1 {
                        format!(
                            ", in brackets: `<{}>`",
                            params.iter().map(|p| p.ident.to_string()).collect::<Vec<_>>().join(", ")
                        )
                    } else {
                        String::new()
                    }
                ),
            ));
            continue;
        }
        for (p, a) in params.iter().zip(&inst.args) {
            let ok = match (a, &p.const_ty) {
                (GenericArgument::Type(_), None) => true,
                // A const argument may read as a type (`N`, a path to a const) or an expression (`4`, `{ 2 * K }`).
                (GenericArgument::Const(_), Some(_)) => true,
                (GenericArgument::Type(Type::Path(_)), Some(_)) => true,
                _ => false,
            };
            if !ok {
                errors.push(syn::Error::new(
                    a.span(),
                    format!(
                        "`{}` is a {} parameter: give it a {}",
                        p.ident,
                        if p.const_ty.is_some() {
                            "const"
                        } else {
                            "type"
                        },
                        if p.const_ty.is_some() {
                            "value (`4`)"
                        } else {
                            "type (`f32`)"
                        }
                    ),
                ));
            }
        }
        let name = region.instance_name(k);
        if seen.contains(&name) {
            errors.push(syn::Error::new(
                inst.span,
                format!("`{name}` is listed twice in `instantiate`"),
            ));
        }
        seen.push(name);
    }
}
