//! `nowait_f(s, args..)` (a method's `x.nowait_m(s, args..)`): the region `f` as a task of the task scope `s`
//! (OpenMP's `target nowait`), beside `f` and `try_f`. Its parameters are `f`'s with every elided lifetime (`&[T]`,
//! `Grid<'_>`) made a lifetime of its own that outlives the scope (not the scope's itself: `&mut Grid<'_>` is
//! invariant in the struct's lifetime, so a caller's `&mut Grid<'a>` fits only `&'scope mut Grid<'a>`), and every
//! named one and every type parameter bound to outlive it, so the task borrows exactly what the call lends it.

use offload_frontend::region::Region;
use proc_macro2::TokenStream;
use quote::{format_ident, quote};
use syn::visit_mut::VisitMut;
use syn::{FnArg, Lifetime, Signature, Visibility};

/// The function `nowait_<name>`, whose body spawns `call` (the region's `try_` call, by its parameters' names), or
/// whose body is unreachable (`call: None`, when the region did not compile).
pub(super) fn nowait(
    vis: &Visibility,
    sig: &Signature,
    region: Option<&Region>,
    ret_ty: &TokenStream,
    call: Option<TokenStream>,
) -> TokenStream {
    let name = format_ident!("nowait_{}", sig.ident);
    let scope = Lifetime::new("'__offload_scope", sig.ident.span());
    let env = Lifetime::new("'__offload_env", sig.ident.span());
    let mut elided = ScopeElided {
        span: sig.ident.span(),
        fresh: Vec::new(),
    };
    // `&mut S` parameters take what the region's own function takes (`&mut impl offload::MutArg<S>`), sent to the
    // task.
    let mut_args = region.map_or_else(Vec::new, |r| super::mut_arg_params(r, sig));
    let inputs: Vec<TokenStream> = sig
        .inputs
        .iter()
        .map(|a| scoped_input(a, &scope, &mut elided, &mut_args))
        .collect();
    let fresh = &elided.fresh;
    // A method's receiver stays first (`x.nowait_m(s, ..)`); the scope comes before the other parameters.
    let split = usize::from(matches!(sig.inputs.first(), Some(FnArg::Receiver(_))));
    let (receiver, inputs) = inputs.split_at(split);
    let params = &sig.generics.params;
    let mut bounds: Vec<TokenStream> = sig
        .generics
        .lifetimes()
        .map(|l| &l.lifetime)
        .chain(fresh)
        .map(|l| quote!(#l: #scope))
        .collect();
    // A method's `Self` may name the impl's lifetimes; its type parameters are the region's generic parameters.
    if let Some(self_ty) = region.and_then(|r| r.self_ty.as_ref()) {
        let mut named = NamedLifetimes(Vec::new());
        named.visit_type_mut(&mut self_ty.clone());
        bounds.extend(named.0.iter().map(|l| quote!(#l: #scope)));
    }
    let type_params: Vec<&syn::Ident> = match region {
        Some(r) => r
            .generic_params
            .iter()
            .filter(|p| p.const_ty.is_none())
            .map(|p| &p.ident)
            .collect(),
        None => sig.generics.type_params().map(|t| &t.ident).collect(),
    };
    bounds.extend(
        type_params
            .iter()
            .map(|t| quote!(#t: ::core::marker::Send + ::core::marker::Sync + #scope)),
    );
    let predicates = sig.generics.where_clause.as_ref().map(|w| {
        w.predicates
            .iter()
            .map(|p| quote!(#p,))
            .collect::<TokenStream>()
    });
    let unsafety = &sig.unsafety;
    let body = match (call, unsafety) {
        (None, _) => quote!(::core::unreachable!("the region did not compile")),
        (Some(call), Some(_)) => quote!(__offload_scope.__spawn_try(move || unsafe { #call })),
        (Some(call), None) => quote!(__offload_scope.__spawn_try(move || #call)),
    };
    let doc = format!(
        "Runs the region [`{0}`] as a task of the task scope `s` (OpenMP's `target nowait`), returning once it is \
         handed to the task; its `wait` returns what `try_{0}` returns.",
        sig.ident
    );
    quote! {
        #[doc = #doc]
        #[allow(dead_code, unused_variables, clippy::too_many_arguments, clippy::multiple_bound_locations)]
        #vis #unsafety fn #name <#scope, #env, #(#fresh,)* #params> (
            #(#receiver,)*
            __offload_scope: &#scope ::offload::TaskScope<#scope, #env>,
            #(#inputs),*
        ) -> ::offload::Task<#scope, #ret_ty>
        where
            #predicates
            #(#bounds,)*
        {
            #body
        }
    }
}

/// A parameter as written (without `mut`; one of `mut_args` as `&mut impl MutArg<S>`), every elided lifetime in its
/// type a fresh one (a receiver's, the scope's).
fn scoped_input(
    arg: &FnArg,
    scope: &Lifetime,
    elided: &mut ScopeElided,
    mut_args: &[(syn::Ident, syn::Type)],
) -> TokenStream {
    match arg {
        FnArg::Typed(pt) => {
            let mut pt = pt.clone();
            if let syn::Pat::Ident(pi) = &mut *pt.pat {
                pi.mutability = None;
                if let Some((_, ty)) = mut_args.iter().find(|(id, _)| *id == pi.ident) {
                    super::mut_arg_type(&mut pt.ty, ty, quote!(+ ::core::marker::Send));
                }
            }
            elided.visit_type_mut(&mut pt.ty);
            quote!(#pt)
        }
        FnArg::Receiver(r) => match &r.reference {
            Some((_, Some(l))) if l.ident != "_" => {
                let m = &r.mutability;
                quote!(&#l #m self)
            }
            Some(_) => {
                let m = &r.mutability;
                quote!(&#scope #m self)
            }
            None => quote!(self),
        },
    }
}

/// Names every elided lifetime (`&T`, `'_`) with a fresh lifetime of its own, which `nowait_f` declares and bounds
/// to outlive the scope.
struct ScopeElided {
    span: proc_macro2::Span,
    fresh: Vec<Lifetime>,
}

impl ScopeElided {
    fn fresh(&mut self) -> Lifetime {
        let l = Lifetime::new(&format!("'__offload_l{}", self.fresh.len()), self.span);
        self.fresh.push(l.clone());
        l
    }
}

impl VisitMut for ScopeElided {
    fn visit_type_reference_mut(&mut self, r: &mut syn::TypeReference) {
        if r.lifetime.is_none() {
            r.lifetime = Some(self.fresh());
        }
        syn::visit_mut::visit_type_reference_mut(self, r);
    }
    fn visit_lifetime_mut(&mut self, l: &mut Lifetime) {
        if l.ident == "_" {
            *l = self.fresh();
        }
    }
}

/// The named lifetimes a type mentions (not `'_` or `'static`).
struct NamedLifetimes(Vec<Lifetime>);

impl VisitMut for NamedLifetimes {
    fn visit_lifetime_mut(&mut self, l: &mut Lifetime) {
        if l.ident != "_" && l.ident != "static" && !self.0.contains(l) {
            self.0.push(l.clone());
        }
    }
}
