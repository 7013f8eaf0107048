//! What each parameter becomes on the host side of a call: a raw pointer taken once (the map list and the fallback
//! both derive from it, so neither holds a borrow the other would invalidate), the fallback's argument (a view per
//! thread for a parallel `&mut`), the trait checks its type needs, and its entries in the map list.

use offload_frontend::lower::ViewKind;
use offload_frontend::plan::{plan, HostMaps, Rebuild};
use offload_frontend::region::{ParamKind, Region};
use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;

/// The per-parameter statements of a region call.
pub struct Params {
    /// `let __offload_ptr_x = ptr::from_mut(x);`, ..
    pub raw: Vec<TokenStream>,
    /// Compile-time checks of the by-value and return types.
    pub checks: Vec<TokenStream>,
    /// The host fallback's arguments, in order.
    pub fallback_args: Vec<TokenStream>,
}

pub fn params(region: &Region) -> Params {
    // Raw pointers to every reference parameter: the map list and the fallback both derive from them, so neither
    // holds a borrow the other would invalidate.
    let mut raw = Vec::new();
    let mut checks = Vec::new();
    let mut fallback_args = Vec::new();
    for plan in plan(region).iter().filter(|a| a.param.is_some()) {
        let p = plan.param();
        let id = &p.ident;
        let ptr = ptr(p);
        // A mutable reference's raw pointer is `*mut`, a shared one's `*const`.
        let take = |mutable: bool| {
            if mutable {
                quote!(let #ptr = ::core::ptr::from_mut(#id);)
            } else {
                quote!(let #ptr = ::core::ptr::from_ref(#id);)
            }
        };
        let view_path = |v: ViewKind| match v {
            ViewKind::Checked => quote!(View),
            ViewKind::Unchecked => quote!(UnsafeView),
        };
        match (plan.rebuild, &p.kind) {
            (Rebuild::View(v), ParamKind::Slice { .. }) => {
                // Each thread of the fallback gets its own view of the slice (see `offload_model::view`).
                raw.push(take(true));
                let (view, elem) = (view_path(v), offload_frontend::lower::view_elem(p));
                fallback_args.push(quote_spanned!(Span::mixed_site()=>
                    // SAFETY: the parameter's borrow lasts the whole call; every thread gets its own view.
                    unsafe { ::offload::__view::#view::<#elem>::new(#ptr as *mut #elem, #ptr.len()) }
                ));
            }
            (Rebuild::View(v), _) => {
                raw.push(take(true));
                let (view, elem) = (view_path(v), offload_frontend::lower::view_elem(p));
                fallback_args.push(quote_spanned!(Span::mixed_site()=>
                    // SAFETY: host memory (the fallback runs for the initial device's buffers only), borrowed
                    // for the whole call; every thread gets its own view.
                    unsafe {
                        ::offload::__view::#view::<#elem>::new(
                            (*#ptr).as_device_ptr().as_ptr(), (*#ptr).len())
                    }
                ));
            }
            (Rebuild::Slice { mutable } | Rebuild::Ref { mutable }, _) => {
                // `DeviceCopy` is checked by the map-list constructors below, spanned at this type.
                raw.push(take(mutable));
                fallback_args.push(if mutable {
                    quote!(&mut *#ptr)
                } else {
                    quote!(&*#ptr)
                });
            }
            (Rebuild::Value, _) => {
                let ty = &p.ty;
                checks.push(
                    quote_spanned!(ty.span()=> ::offload::__private::assert_firstprivate::<#ty>();),
                );
                fallback_args.push(quote!(#id));
            }
            // Device memory: the host fallback runs only when it is the initial device's, which is host memory.
            (Rebuild::DevicePtr, _) => fallback_args.push(quote!(#id)),
            (Rebuild::Buffer { mutable }, _) => {
                raw.push(take(mutable));
                // SAFETY (both): as for a view; one thread.
                fallback_args.push(if mutable {
                    quote_spanned!(Span::mixed_site()=>
                        unsafe { ::offload::__private::host_slice_mut(&mut *#ptr) }
                    )
                } else {
                    quote_spanned!(Span::mixed_site()=>
                        unsafe { ::offload::__private::host_slice(&*#ptr) }
                    )
                });
            }
            (Rebuild::Mapper { by_ref }, _) => {
                mapper_param(region, p, by_ref, &mut raw, &mut checks, &mut fallback_args)
            }
            (Rebuild::Return, _) => unreachable!("a parameter's plan"),
        }
    }

    // A reduction tail that is an expression of the variables is evaluated on the host: the variables cross.
    let crossing = match &region.reduce_tys {
        Some(tys) if tys.len() == 1 => Some(tys[0].clone()),
        Some(tys) => Some(syn::Type::Tuple(syn::parse_quote!((#(#tys),*)))),
        None => region.ret.clone(),
    };
    if let Some(t) = &crossing {
        // The kernel entry writes a typed `R` into the return slot, so any by-value type may come back (several
        // reduction variables: a tuple of such types, crossing as a `#[repr(C)]` tuple).
        match t {
            syn::Type::Tuple(tuple) => {
                for e in &tuple.elems {
                    checks.push(
                        quote_spanned!(e.span()=> ::offload::__private::assert_firstprivate::<#e>();),
                    );
                }
            }
            t => checks.push(
                quote_spanned!(t.span()=> ::offload::__private::assert_firstprivate::<#t>();),
            ),
        }
    }
    Params {
        raw,
        checks,
        fallback_args,
    }
}

/// A mapper struct parameter (`by_ref`: `Some(mutable)` through a reference): its raw parts, taken once (the map
/// list and the fallback's rebuilt struct both derive from them), and its parallel check.
fn mapper_param(
    region: &Region,
    p: &offload_frontend::region::Param,
    by_ref: Option<bool>,
    raw: &mut Vec<TokenStream>,
    checks: &mut Vec<TokenStream>,
    fallback_args: &mut Vec<TokenStream>,
) {
    let (id, ptr) = (&p.ident, ptr(p));
    match by_ref {
        None => {
            let own = format_ident!("__offload_own_{}", id);
            raw.push(quote!(
                let mut #own = #id;
                let #ptr = ::offload::__private::MapperRaw::new(&mut #own);
            ));
            fallback_args.push(quote_spanned!(Span::mixed_site()=>
                // SAFETY: the struct's borrows last the whole call.
                unsafe { #ptr.rebuild() }
            ));
        }
        Some(_) => {
            raw.push(quote!(let #ptr = ::offload::__private::MapperRaw::new(&mut *#id);));
            fallback_args.push(quote_spanned!(Span::mixed_site()=>
                // SAFETY: as above; the region gets its own struct, its values firstprivate.
                &mut unsafe { #ptr.rebuild() }
            ));
        }
    }
    if region.construct.is_parallel() {
        // Every thread gets the struct: it may hold no `&mut` (the derive's message names the field).
        let ty = static_mapper(&p.ty);
        checks.push(quote_spanned!(p.ty.span()=>
            const _: () = ::offload::__private::parallel_mapper::<#ty>();
        ));
    }
}

/// The mapper struct's type without its reference, each lifetime `'static` (for a check in a `const` item).
fn static_mapper(ty: &syn::Type) -> syn::Type {
    struct Static;
    impl syn::visit_mut::VisitMut for Static {
        fn visit_lifetime_mut(&mut self, l: &mut syn::Lifetime) {
            *l = syn::Lifetime::new("'static", l.span());
        }
    }
    let mut t = match ty {
        syn::Type::Reference(r) => (*r.elem).clone(),
        t => t.clone(),
    };
    syn::visit_mut::VisitMut::visit_type_mut(&mut Static, &mut t);
    t
}

/// One parameter's map-list entries: as many as its kernel arguments (`Fixed`), or a mapper struct's (`Many`: a
/// statement pushing them into `__offload_v`, as many as its definition gives).
pub enum MapEntry {
    Fixed(Vec<TokenStream>),
    Many(TokenStream),
}

/// The map list: statements building it when a mapper struct makes its length known only at run time, else an
/// array.
pub fn map_list_expr(region: &Region, slot_ty: &TokenStream) -> TokenStream {
    let entries = map_list(region, slot_ty);
    if entries.iter().all(|e| matches!(e, MapEntry::Fixed(_))) {
        let all = entries.into_iter().flat_map(|e| match e {
            MapEntry::Fixed(t) => t,
            MapEntry::Many(t) => vec![t],
        });
        return quote!([#(#all),*]);
    }
    let stmts = entries.into_iter().map(|e| match e {
        MapEntry::Fixed(t) => quote!(#(__offload_v.push(#t);)*),
        MapEntry::Many(t) => t,
    });
    quote!({
        let mut __offload_v = ::std::vec::Vec::new();
        #(#stmts)*
        __offload_v
    })
}

/// The raw pointer a parameter is taken as once (`__offload_ptr_x`), which the map list and the fallback share.
fn ptr(p: &offload_frontend::region::Param) -> syn::Ident {
    format_ident!("__offload_ptr_{}", p.ident)
}

/// A mapped section's bounds, computed before the raw pointers are taken (`__offload_lo_x`, `__offload_hi_x`).
fn section_idents(p: &offload_frontend::region::Param) -> (syn::Ident, syn::Ident) {
    (
        format_ident!("__offload_lo_{}", p.ident),
        format_ident!("__offload_hi_{}", p.ident),
    )
}

/// The map list: each parameter's entries, one per slot of its plan ([`plan`]), in the order the outliner's entry
/// unpacks them.
fn map_list(region: &Region, slot_ty: &TokenStream) -> Vec<MapEntry> {
    let p = quote!(::offload::__private);
    plan(region)
        .into_iter()
        .map(|arg| {
            let site = arg.param.map(site);
            let entries = match arg.host {
                HostMaps::Mapper { bits } => {
                    let ptr = ptr(arg.param());
                    let site = site.expect("a parameter");
                    return MapEntry::Many(quote!(
                        let __offload_from = __offload_v.len();
                        #ptr.kernel_maps(#bits, &mut __offload_v);
                        #p::name_entries(&mut __offload_v, __offload_from, #site);
                    ));
                }
                HostMaps::Slice {
                    elem,
                    section,
                    bits,
                } => {
                    let s = arg.param();
                    let ptr = ptr(s);
                    let data = if section {
                        let (lo, hi) = section_idents(s);
                        quote_spanned!(elem.span()=> #p::MapArg::section::<#elem>(#ptr, #lo, #hi, #bits))
                    } else {
                        quote_spanned!(elem.span()=> #p::MapArg::slice::<#elem>(#ptr, #bits))
                    };
                    vec![data, quote!(#p::MapArg::literal(#ptr.len() as u64))]
                }
                HostMaps::Ref { ty, mutable, bits } => {
                    let ptr = ptr(arg.param());
                    let raw = if mutable {
                        quote!(#ptr)
                    } else {
                        quote!(#ptr.cast_mut())
                    };
                    // One object, or an owning mapper struct's fields: `T` decides (see `RefParam`). Checked
                    // `DeviceCopy` (or `OwnedMapper`) there, spanned at this type.
                    let site = site.expect("a parameter");
                    return MapEntry::Many(quote_spanned!(ty.span()=> {
                        #[allow(unused_imports)]
                        use #p::{ViaObject as _, ViaOwnedMapper as _};
                        let param = (&&#p::RefParam::<#ty>::new(#raw, #mutable)).ref_param();
                        let __offload_from = __offload_v.len();
                        // SAFETY: the parameter's borrow outlives the map list's use.
                        unsafe { #p::RefMaps::kernel_maps(param, #bits, &mut __offload_v) };
                        #p::name_entries(&mut __offload_v, __offload_from, #site);
                    }));
                }
                HostMaps::Value => {
                    let id = &arg.param().ident;
                    vec![quote!(#p::MapArg::value(&#id))]
                }
                HostMaps::DevicePtr => {
                    let id = &arg.param().ident;
                    vec![quote!(#p::MapArg::device_ptr(#id))]
                }
                HostMaps::Buffer => {
                    let ptr = ptr(arg.param());
                    vec![
                        quote!(#p::MapArg::device_ptr((*#ptr).as_device_ptr())),
                        quote!(#p::MapArg::literal((*#ptr).len() as u64)),
                    ]
                }
                HostMaps::Reduction => vec![quote!(#p::MapArg::reduction::<#slot_ty>())],
                HostMaps::Return => vec![quote!(#p::MapArg::ret(__offload_ret))],
            };
            // The kernel entry takes as many arguments: one entry each.
            assert_eq!(entries.len(), arg.width(None), "offload's map list disagrees with its plan for {arg:?}");
            MapEntry::Fixed(match site {
                Some(site) => entries.into_iter().map(|e| quote!(#e.named(#site))).collect(),
                None => entries,
            })
        })
        .collect()
}

/// Where parameter `p` is written, for its map entries' errors: its name, and `file!()`/`line!()` spanned at it, so
/// they give its line in the user's source.
fn site(p: &offload_frontend::region::Param) -> TokenStream {
    let name = p.ident.to_string();
    quote_spanned!(p.ident.span()=> &::offload::__private::VarSite {
        name: #name, file: ::core::file!(), line: ::core::line!()
    })
}

/// `let __offload_lo_x: usize = ..; let __offload_hi_x ..` for the mapped sections, evaluated before the raw pointers
/// are taken.
pub fn section_bounds(region: &Region) -> Vec<TokenStream> {
    region
        .params
        .iter()
        .filter_map(|p| {
            let s = p.section.as_ref()?;
            let id = &p.ident;
            let (lo, hi) = s.bounds(quote!(#id.len()));
            let (l, h) = section_idents(p);
            Some(quote!(let #l: usize = #lo; let #h: usize = #hi;))
        })
        .collect()
}
