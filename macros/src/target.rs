use offload_model::lower::{view_kind, ViewKind};
use offload_model::region::{KernelArg, ParamKind, Region};
use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned, ToTokens};
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
        Err(e) => {
            // The function stays as written so callers still type-check and one mistake does not cascade.
            let err = e.to_compile_error();
            quote!(#err #func)
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

    // The outer functions take the parameters without `mut`: only the body (kept in `__offload_host`) mutates them.
    let outer_inputs = sig.inputs.iter().map(|a| match a {
        FnArg::Typed(pt) => {
            let mut pt = pt.clone();
            if let Pat::Ident(pi) = &mut *pt.pat {
                pi.mutability = None;
            }
            quote!(#pt)
        }
        other => quote!(#other),
    });
    let outer_inputs: Vec<TokenStream> = outer_inputs.collect();
    let idents: Vec<_> = region.params.iter().map(|p| &p.ident).collect();

    // Raw pointers to every reference parameter: the map list and the fallback both derive from them, so neither
    // holds a borrow the other would invalidate.
    let mut raw = Vec::new();
    let mut checks = Vec::new();
    let mut fallback_args = Vec::new();
    for p in &region.params {
        let id = &p.ident;
        let ptr = format_ident!("__offload_ptr_{}", id);
        match &p.kind {
            kind @ ParamKind::Slice { .. } if view_kind(region, kind).is_some() => {
                // Each thread of the fallback gets its own view of the slice (see `offload_model::view`).
                raw.push(quote!(let #ptr = ::core::ptr::from_mut(#id);));
                let view = match view_kind(region, kind) {
                    Some(ViewKind::Checked) => quote!(View),
                    _ => quote!(UnsafeView),
                };
                let elem = offload_model::lower::view_elem(p);
                fallback_args.push(quote_spanned!(Span::mixed_site()=>
                    // SAFETY: the parameter's borrow lasts the whole call; every thread gets its own view.
                    unsafe { ::offload::__view::#view::<#elem>::new(#ptr as *mut #elem, #ptr.len()) }
                ));
            }
            ParamKind::Slice { mutable, .. } | ParamKind::Ref { mutable, .. } => {
                // `DeviceCopy` is checked by the map-list constructors below, spanned at this type.
                if *mutable {
                    raw.push(quote!(let #ptr = ::core::ptr::from_mut(#id);));
                    fallback_args.push(quote!(&mut *#ptr));
                } else {
                    raw.push(quote!(let #ptr = ::core::ptr::from_ref(#id);));
                    fallback_args.push(quote!(&*#ptr));
                }
            }
            ParamKind::Value => {
                let ty = &p.ty;
                checks.push(
                    quote_spanned!(ty.span()=> ::offload::__private::assert_firstprivate::<#ty>();),
                );
                fallback_args.push(quote!(#id));
            }
            // Device memory: the host fallback runs only when it is the initial device's, which is host memory.
            ParamKind::DevicePtr => fallback_args.push(quote!(#id)),
            kind @ ParamKind::DeviceBuffer { mutable } => {
                let elem = offload_model::lower::view_elem(p);
                if *mutable {
                    raw.push(quote!(let #ptr = ::core::ptr::from_mut(#id);));
                } else {
                    raw.push(quote!(let #ptr = ::core::ptr::from_ref(#id);));
                }
                fallback_args.push(match view_kind(region, kind) {
                    Some(v) => {
                        let view = match v {
                            ViewKind::Checked => quote!(View),
                            ViewKind::Unchecked => quote!(UnsafeView),
                        };
                        quote_spanned!(Span::mixed_site()=>
                            // SAFETY: host memory (the fallback runs for the initial device's buffers only), borrowed
                            // for the whole call; every thread gets its own view.
                            unsafe {
                                ::offload::__view::#view::<#elem>::new(
                                    (*#ptr).as_device_ptr().as_ptr(), (*#ptr).len())
                            }
                        )
                    }
                    // SAFETY: as above; one thread.
                    None if *mutable => quote_spanned!(Span::mixed_site()=>
                        unsafe { ::offload::__private::host_slice_mut(&mut *#ptr) }
                    ),
                    None => quote_spanned!(Span::mixed_site()=>
                        unsafe { ::offload::__private::host_slice(&*#ptr) }
                    ),
                });
            }
        }
    }

    if let Some(t) = &region.ret {
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
        if !region.reductions.is_empty() {
            // Each thread passes its partial through team-shared memory.
            checks.push(quote_spanned!(t.span()=>
                const _: () = ::core::assert!(
                    ::core::mem::size_of::<#t>() <= ::offload::__reduce::MAX_BYTES,
                    "a reduction value is at most 512 bytes (an array of 128 `u32`s)"
                );
            ));
        }
    }

    let maps = region.kernel_args().into_iter().map(|arg| match arg {
        KernelArg::SlicePtr(p) => {
            let ptr = format_ident!("__offload_ptr_{}", p.ident);
            let bits = p.map.as_ref().map_or(0, |m| m.bits());
            let ParamKind::Slice { elem, .. } = &p.kind else { unreachable!("a slice parameter") };
            match &p.section {
                Some(_) => {
                    let (lo, hi) = (format_ident!("__offload_lo_{}", p.ident), format_ident!("__offload_hi_{}", p.ident));
                    quote_spanned!(elem.span()=> ::offload::__private::MapArg::section::<#elem>(#ptr, #lo, #hi, #bits))
                }
                None => quote_spanned!(elem.span()=> ::offload::__private::MapArg::slice::<#elem>(#ptr, #bits)),
            }
        }
        KernelArg::SliceLen(p) => {
            let ptr = format_ident!("__offload_ptr_{}", p.ident);
            quote!(::offload::__private::MapArg::literal(#ptr.len() as u64))
        }
        KernelArg::RefPtr(p) => {
            let ptr = format_ident!("__offload_ptr_{}", p.ident);
            let bits = p.map.as_ref().map_or(0, |m| m.bits());
            let ParamKind::Ref { ty, .. } = &p.kind else { unreachable!("a reference parameter") };
            quote_spanned!(ty.span()=> ::offload::__private::MapArg::object::<#ty>(#ptr, #bits))
        }
        KernelArg::Value(p) => {
            let id = &p.ident;
            quote!(::offload::__private::MapArg::value(&#id))
        }
        KernelArg::Return if !region.reductions.is_empty() => quote!(::offload::__private::MapArg::reduction::<#slot_ty>()),
        KernelArg::Return => quote!(::offload::__private::MapArg::ret(__offload_ret)),
        KernelArg::DevicePtr(p) => {
            let id = &p.ident;
            quote!(::offload::__private::MapArg::device_ptr(#id))
        }
        KernelArg::BufferPtr(p) => {
            let ptr = format_ident!("__offload_ptr_{}", p.ident);
            quote!(::offload::__private::MapArg::device_ptr((*#ptr).as_device_ptr()))
        }
        KernelArg::BufferLen(p) => {
            let ptr = format_ident!("__offload_ptr_{}", p.ident);
            quote!(::offload::__private::MapArg::literal((*#ptr).len() as u64))
        }
    });

    let (device, if_cond) = crate::data::device_and_if(&region.device, &region.if_cond);
    // Section bounds too are evaluated before the raw pointers are taken.
    let section_bounds = region.params.iter().filter_map(|p| {
        let s = p.section.as_ref()?;
        let id = &p.ident;
        let (lo, hi) = s.bounds(quote!(#id.len()));
        let (l, h) = (
            format_ident!("__offload_lo_{}", id),
            format_ident!("__offload_hi_{}", id),
        );
        Some(quote!(let #l: usize = #lo; let #h: usize = #hi;))
    });
    let count = |e: &Option<syn::Expr>| match e {
        Some(e) => quote!(::core::option::Option::Some(::offload::__private::count(#e))),
        None => quote!(::core::option::Option::None),
    };
    let (spmd, work_shared, one_team) = (region.spmd, region.work_shared, region.one_team);
    let one: syn::Expr = syn::parse_quote!(1u32);
    let num_teams = count(&if one_team {
        Some(one)
    } else {
        region.num_teams.clone()
    });
    let thread_limit = count(&region.thread_limit);
    let geometry = quote!(::offload::__private::Launch {
        device: __offload_device, cond: __offload_if,
        spmd: #spmd, work_shared: #work_shared, one_team: #one_team, num_teams: #num_teams,
        thread_limit: #thread_limit
    });
    let call_host = match unsafety {
        Some(_) => quote!(unsafe { __offload_host(#(#fallback_args),*) }),
        None => quote!(__offload_host(#(#fallback_args),*)),
    };
    // Parameters used only by clauses (`device(dev)`) are used, as far as the user is concerned.
    let mut clause_idents = std::collections::BTreeSet::new();
    for e in region
        .device
        .iter()
        .chain(&region.if_cond)
        .chain(&region.num_teams)
        .chain(&region.thread_limit)
    {
        offload_model::worksharing::collect_idents(e.to_token_stream(), &mut clause_idents);
    }
    for s in region.params.iter().filter_map(|p| p.section.as_ref()) {
        for e in s.lo.iter().chain(&s.hi) {
            offload_model::worksharing::collect_idents(e.to_token_stream(), &mut clause_idents);
        }
    }
    let touch = idents
        .iter()
        .filter(|i| clause_idents.contains(&i.to_string()))
        .map(|i| quote!(let _ = &#i;));
    let touch: Vec<TokenStream> = touch.collect();
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
    } else if region.spmd || region.work_shared {
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
    // Several reduction variables come back from their `#[repr(C)]` tuple.
    let finish = (region.reductions.len() > 1).then(|| quote!(.map(::core::convert::Into::into)));
    let host_fn = quote!(
        #(#lint_attrs)*
        #[allow(clippy::too_many_arguments)]
        #unsafety fn __offload_host #generics (#(#host_inputs),*) #output #host_body
    );
    // A region taking device memory runs on its device, or on the host when the memory is the initial device's
    // (host memory, as clang does); never in a fallback otherwise, since the host cannot reach a device's memory.
    let launch = if region.needs_device() {
        quote!(::offload::__private::target_device_memory(
            &__OFFLOAD_REGION, __offload_launch, &__offload_maps, __offload_ret,
            #reduce, #fallback,
        ))
    } else {
        quote!(::offload::__private::target(
            &__OFFLOAD_REGION, __offload_launch, &__offload_maps, __offload_ret,
            #reduce, #fallback,
        ))
    };
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
                let __offload_maps = [#(#maps),*];
                #launch #finish
            }
        }
    }
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
