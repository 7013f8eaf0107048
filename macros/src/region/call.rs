//! The region call, as the macro expands it: the `Launch` request (device, `if`, construct and geometry clauses), the
//! parameters only clauses use, and the runtime call that picks a device or falls back to the host (on teams of host
//! threads for a parallel region).

use offload_frontend::region::Region;
use proc_macro2::TokenStream;
use quote::{quote, ToTokens};
use syn::Ident;

/// The `Launch` request: device, `if`, construct and geometry clauses.
pub fn launch_request(region: &Region) -> TokenStream {
    let count = |e: &Option<syn::Expr>| match e {
        Some(e) => quote!(::core::option::Option::Some(::offload::__private::count(#e))),
        None => quote!(::core::option::Option::None),
    };
    let construct = quote::format_ident!("{}", region.construct.name());
    let one: syn::Expr = syn::parse_quote!(1u32);
    let num_teams = count(&if region.construct.is_one_team() {
        Some(one)
    } else {
        region.num_teams.clone()
    });
    let thread_limit = count(&region.thread_limit);
    quote!(::offload::__private::Launch {
        device: __offload_device, cond: __offload_if,
        construct: ::offload::__private::Construct::#construct, num_teams: #num_teams,
        thread_limit: #thread_limit
    })
}

/// `let _ = &x;` for the parameters only clauses use (`device(dev)`), which are used as far as the user is concerned.
pub fn clause_touches(region: &Region, idents: &[&Ident]) -> Vec<TokenStream> {
    let mut clause_idents = std::collections::BTreeSet::new();
    for e in region
        .device
        .iter()
        .chain(&region.if_cond)
        .chain(&region.num_teams)
        .chain(&region.thread_limit)
    {
        offload_frontend::resolve::collect_idents(e.to_token_stream(), &mut clause_idents);
    }
    for s in region.params.iter().filter_map(|p| p.section.as_ref()) {
        for e in s.lo.iter().chain(&s.hi) {
            offload_frontend::resolve::collect_idents(e.to_token_stream(), &mut clause_idents);
        }
    }
    idents
        .iter()
        .filter(|i| clause_idents.contains(&i.to_string()))
        .map(|i| quote!(let _ = &#i;))
        .collect()
}

/// The runtime call that runs the region on a device or falls back to `call_host` (the lowered body; on teams of
/// host threads for a parallel region).
pub fn runtime_call(
    region: &Region,
    call_host: &TokenStream,
    slot_ty: &TokenStream,
) -> TokenStream {
    // A parallel region's host fallback runs the body on teams of host threads too. Only shared data (atomics for
    // writes) reaches such a body in safe code, so sharing the call across threads is sound.
    let reduce = match region.reduce_op() {
        Some(op) => quote!(::core::option::Option::Some(
            ::offload::__private::fold::<#op, #slot_ty> as fn(#slot_ty, &[#slot_ty]) -> #slot_ty
        )),
        None => quote!(::core::option::Option::None),
    };
    let fallback = if let Some(op) = region.reduce_op() {
        quote!(move || {
            let __offload_body = unsafe { ::offload::__private::AssertSync::new(move || #call_host) };
            match ::offload::__private::run_fallback_reduce::<#op, #slot_ty>(
                __offload_launch, &|| ::core::convert::Into::into(__offload_body.call())
            ) {
                ::core::result::Result::Ok(r) => r,
                ::core::result::Result::Err(m) => ::core::panic!("{}", m),
            }
        })
    } else if region.construct.is_parallel() {
        quote!(move || {
            let __offload_body = unsafe { ::offload::__private::AssertSync::new(move || #call_host) };
            match ::offload::__private::run_fallback(__offload_launch, &|| __offload_body.call()) {
                ::core::result::Result::Ok(r) => r,
                ::core::result::Result::Err(m) => ::core::panic!("{}", m),
            }
        })
    } else {
        quote!(move || #call_host)
    };
    // A region taking device memory runs on its device, or on the host when the memory is the initial device's
    // (host memory, as clang does); never in a fallback otherwise, since the host cannot reach a device's memory.
    let device_memory = region.needs_device();
    let p = quote!(::offload::__private);
    // The one request: which kernel, the launch, the map list, the return slot and the reduction.
    let request = |kernel: TokenStream| {
        quote!(#p::Call {
            kernel: #kernel, launch: __offload_launch, maps: &__offload_maps, ret: __offload_ret,
            reduce: #reduce, device_memory: #device_memory,
        })
    };
    if !region.is_generic() {
        let request = request(quote!(#p::Callee::Of(&__OFFLOAD_REGION)));
        return quote!(#p::call(#request, #fallback));
    }
    // A generic region: the kernel of the arguments' instance, or none, with the arguments for the reason.
    let key = super::instance_key(region, None);
    let args = region.generic_params.iter().map(|p| {
        let id = &p.ident;
        let what = format!("{id} = {{}}");
        match p.const_ty {
            Some(_) => quote!(::std::format!(#what, #id)),
            None => quote!(::std::format!(#what, ::core::any::type_name::<#id>())),
        }
    });
    let request = request(quote!(
        match __OFFLOAD_GENERIC.find(#p::instance_key::<#key>()) {
            ::core::option::Option::Some(__offload_region) => #p::Callee::Of(__offload_region),
            ::core::option::Option::None => #p::Callee::Missing {
                generic: &__OFFLOAD_GENERIC, args: &|| [#(#args),*].join(", "),
            },
        }
    ));
    quote!(#p::call(#request, #fallback))
}
