//! `#[target]`: parse and validate the region (the model crate), then expand the host side: the region's function
//! (a call that picks a device or falls back), its `try_` twin, the entry record and the host fallback.

mod launch;
mod params;

use offload_model::lower::view_kind;
use offload_model::region::{ParamKind, Region};
use proc_macro2::TokenStream;
use quote::{format_ident, quote};
use syn::spanned::Spanned;
use syn::{FnArg, ItemFn, Pat};

pub fn expand(args: TokenStream, item: TokenStream) -> TokenStream {
    let func: ItemFn = match syn::parse2(item.clone()) {
        Ok(f) => f,
        Err(e) => {
            let msg = syn::Error::new(
                e.span(),
                "`#[target]` goes on a free function (`fn name(params) { body }`); methods, closures and other items \
                 cannot be regions",
            )
            .to_compile_error();
            return quote!(#msg #item);
        }
    };
    match Region::parse(args, &func) {
        Ok(region) => expand_region(&region, func),
        Err(e) => failed(e, &func),
    }
}

/// The errors, the function as written and a `try_<name>` of the same signature, so that callers still type-check
/// and one mistake does not cascade into an error at every call site.
fn failed(e: syn::Error, func: &ItemFn) -> TokenStream {
    let err = e.to_compile_error();
    let sig = &func.sig;
    let (vis, unsafety, generics) = (&func.vis, &sig.unsafety, &sig.generics);
    let try_name = format_ident!("try_{}", sig.ident);
    let ret = match &sig.output {
        syn::ReturnType::Default => quote!(()),
        syn::ReturnType::Type(_, t) => quote!(#t),
    };
    let inputs = outer_inputs(sig);
    quote! {
        #err
        #func
        #[allow(unused_variables, clippy::too_many_arguments)]
        #vis #unsafety fn #try_name #generics (#(#inputs),*) -> ::core::result::Result<#ret, ::offload::Error> {
            ::core::unreachable!("the region did not compile")
        }
    }
}

fn expand_region(region: &Region, func: ItemFn) -> TokenStream {
    let ItemFn {
        attrs,
        vis,
        sig,
        block,
    } = func;
    let name = &sig.ident;
    let name_str = name.to_string();
    let try_name = format_ident!("try_{}", name);
    let ret_ty = match &region.ret {
        Some(t) => quote!(#t),
        None => quote!(()),
    };
    // What the return slot holds: the return type, or for several reduction variables their `#[repr(C)]` tuple.
    let slot_ty = region.reduce_wire().unwrap_or_else(|| ret_ty.clone());
    let unsafety = &sig.unsafety;
    let generics = &sig.generics;
    let output = &sig.output;

    let outer_inputs = outer_inputs(&sig);
    let idents: Vec<_> = region.params.iter().map(|p| &p.ident).collect();

    let params::Params {
        raw,
        checks,
        fallback_args,
    } = params::params(region);
    let maps = params::map_list_expr(region, &slot_ty);
    let (device, if_cond) = crate::data::device_and_if(&region.device, &region.if_cond);
    let section_bounds = params::section_bounds(region);
    let geometry = launch::geometry(region);
    let call_host = match unsafety {
        Some(_) => quote!(unsafe { __offload_host(#(#fallback_args),*) }),
        None => quote!(__offload_host(#(#fallback_args),*)),
    };
    let touch = launch::clause_touches(region, &idents);
    // The one lowering the outliner applies too: views for parallel `&mut` parameters, the work-shared loop as a
    // closure over the thread's share.
    let lowered = offload_model::lower::lower(
        region,
        &ItemFn {
            attrs: Vec::new(),
            vis: vis.clone(),
            sig: sig.clone(),
            block,
        },
    );
    let block = &lowered.block;
    // In the host fallback a device buffer (on the initial device) is its slice, what device code sees by `Deref`.
    let host_inputs = host_inputs(region, &lowered.inputs);
    // Wrapping an untouched body would draw `unused_braces` on single-expression bodies.
    let host_body = if touch.is_empty() {
        quote!(#block)
    } else {
        quote!({ #(#touch)* #block })
    };
    let tag = offload_model::identity::package_tag(
        &std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default(),
    );
    let lint_attrs = attrs.iter().filter(|a| {
        a.path().get_ident().is_some_and(|i| {
            ["allow", "warn", "deny", "expect", "forbid"].contains(&&*i.to_string())
        })
    });
    // Several reduction variables come back from their `#[repr(C)]` tuple.
    let finish = (region.reductions.len() > 1).then(|| quote!(.map(::core::convert::Into::into)));
    let host_fn = quote!(
        #(#lint_attrs)*
        #[allow(clippy::too_many_arguments)]
        #unsafety fn __offload_host #generics (#(#host_inputs),*) #output #host_body
    );
    let launch = launch::launch(region, &call_host, &slot_ty);
    let try_doc = format!("Runs the region [`{name_str}`], returning a device failure as an `Err` instead of panicking.");

    quote! {
        #(#attrs)*
        #vis #unsafety fn #name #generics (#(#outer_inputs),*) #output {
            match #try_name(#(#idents),*) {
                ::core::result::Result::Ok(r) => r,
                ::core::result::Result::Err(e) => ::offload::__private::fail(e),
            }
        }

        #[doc = #try_doc]
        #[allow(clippy::too_many_arguments)]
        #vis #unsafety fn #try_name #generics (#(#outer_inputs),*)
            -> ::core::result::Result<#ret_ty, ::offload::Error>
        {
            #host_fn

            const __OFFLOAD_NAME: &str = ::core::concat!(::core::module_path!(), "::", #name_str);
            static __OFFLOAD_SYMBOL: [u8; ::offload::__private::mangled_len(__OFFLOAD_NAME) + 1] =
                ::offload::__private::mangle(__OFFLOAD_NAME);
            #[::offload::__private::linkme::distributed_slice(::offload::__private::OFFLOAD_ENTRIES)]
            #[linkme(crate = ::offload::__private::linkme)]
            static __OFFLOAD_ENTRY: ::offload::__private::OffloadEntry =
                ::offload::__private::OffloadEntry::kernel(__offload_host as *const ::core::ffi::c_void, &__OFFLOAD_SYMBOL, #tag);
            static __OFFLOAD_REGION: ::offload::__private::RegionInfo = ::offload::__private::RegionInfo {
                name: __OFFLOAD_NAME,
                file: ::core::file!(),
                line: ::core::line!(),
                entry: &__OFFLOAD_ENTRY,
            };

            #(#checks)*
            // Clauses first: they may read the parameters, which the raw pointers below must not see change.
            let __offload_device = #device;
            let __offload_if = #if_cond;
            let __offload_launch = #geometry;
            #(#section_bounds)*
            #(#raw)*
            let mut __offload_ret_slot = ::core::mem::MaybeUninit::<#slot_ty>::uninit();
            // One raw pointer to the slot serves the map list and the runtime, so neither invalidates the other.
            let __offload_ret = ::core::ptr::addr_of_mut!(__offload_ret_slot);
            #[allow(unused_unsafe)]
            // SAFETY: the map list describes live parameters (raw pointers taken above, used only by this call) and
            // the return slot, in the kernel argument order the outliner's entry unpacks; by-value types were
            // checked `Firstprivate` above.
            unsafe {
                let __offload_maps = #maps;
                #launch #finish
            }
        }
    }
}

/// The parameters of the region's function and its `try_` twin: as written, without `mut` (only the body, kept in
/// `__offload_host`, mutates them).
fn outer_inputs(sig: &syn::Signature) -> Vec<TokenStream> {
    sig.inputs
        .iter()
        .map(|a| match a {
            FnArg::Typed(pt) => {
                let mut pt = pt.clone();
                if let Pat::Ident(pi) = &mut *pt.pat {
                    pi.mutability = None;
                }
                quote!(#pt)
            }
            other => quote!(#other),
        })
        .collect()
}

/// The host fallback's parameters: the lowered ones, with a device buffer that is not a view as its slice (`&[T]`,
/// `&mut [T]`).
fn host_inputs(region: &Region, lowered: &[FnArg]) -> Vec<FnArg> {
    lowered
        .iter()
        .map(|arg| {
            let FnArg::Typed(pt) = arg else {
                return arg.clone();
            };
            let Pat::Ident(pi) = &*pt.pat else {
                return arg.clone();
            };
            let Some(p) = region.params.iter().find(|p| p.ident == pi.ident) else {
                return arg.clone();
            };
            let (ParamKind::DeviceBuffer { mutable }, None) = (&p.kind, view_kind(region, &p.kind))
            else {
                return arg.clone();
            };
            let elem = offload_model::lower::view_elem(p);
            let mut pt = pt.clone();
            *pt.ty = if *mutable {
                syn::parse_quote_spanned!(p.ty.span()=> &mut [#elem])
            } else {
                syn::parse_quote_spanned!(p.ty.span()=> &[#elem])
            };
            FnArg::Typed(pt)
        })
        .collect()
}
