//! `#[target]`: parse and validate the region (the model crate), then expand the host side: the region's function
//! (a call that picks a device or falls back), its `try_` twin, the entry record and the host fallback.

mod call;
mod nowait;
mod params;

use offload_frontend::lower::view_kind;
use offload_frontend::region::{ParamKind, Region};
use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{FnArg, ItemFn, Pat};

pub fn expand(args: TokenStream, item: TokenStream) -> TokenStream {
    if let Ok(imp) = syn::parse2::<syn::ItemImpl>(item.clone()) {
        return expand_impl(args, imp);
    }
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
    match offload_frontend::frontend::parse_region(args, &func) {
        Ok(region) => expand_region(&region, func),
        Err(e) => failed(e, &func),
    }
}

/// `#[target] impl Type { #[target(..)] fn step(&mut self, ..) { .. } .. }`: each marked method is a region named
/// `module::Type::step`. The impl's attribute is what lets the regions know `Type` (a method's own attribute sees
/// only the method).
fn expand_impl(args: TokenStream, mut imp: syn::ItemImpl) -> TokenStream {
    let mut errors: Vec<syn::Error> = Vec::new();
    if !args.is_empty() {
        errors.push(syn::Error::new(
            args.span(),
            "`#[target]` on an `impl` block takes no clauses: it marks the block whose methods are regions; put the \
             clauses on each region method (`#[target(map(tofrom: self))] fn step(&mut self)`)",
        ));
    }
    if let Some((_, path, _)) = &imp.trait_ {
        errors.push(syn::Error::new(
            path.span(),
            "regions go in an inherent `impl Type { .. }`, not in a trait impl (a trait method cannot be a kernel \
             entry); write the region in `impl Type` and call it from the trait method",
        ));
    }
    let self_ty = (*imp.self_ty).clone();
    let mut items = Vec::new();
    for item in std::mem::take(&mut imp.items) {
        let syn::ImplItem::Fn(method) = item else {
            items.push(quote!(#item));
            continue;
        };
        let Some(at) = method.attrs.iter().position(is_target_attr) else {
            items.push(quote!(#method));
            continue;
        };
        let mut attrs = method.attrs.clone();
        let attr = attrs.remove(at);
        let args = match &attr.meta {
            syn::Meta::List(l) => l.tokens.clone(),
            _ => TokenStream::new(),
        };
        let func = ItemFn {
            attrs,
            vis: method.vis.clone(),
            sig: method.sig.clone(),
            block: Box::new(method.block.clone()),
        };
        if !errors.is_empty() {
            // The method as written, without its attribute: the impl's error is the one to see.
            items.push(quote!(#func));
            continue;
        }
        let in_impl = offload_frontend::region::InImpl {
            self_ty: &self_ty,
            generics: &imp.generics,
        };
        items.push(
            match offload_frontend::frontend::parse_region_in(args, &func, Some(in_impl)) {
                Ok(region) => expand_region(&region, func),
                Err(e) => failed(e, &func),
            },
        );
    }
    let errs = errors.iter().map(syn::Error::to_compile_error);
    let (attrs, defaultness, unsafety, generics, trait_, self_ty) = (
        &imp.attrs,
        &imp.defaultness,
        &imp.unsafety,
        &imp.generics,
        imp.trait_
            .as_ref()
            .map(|(bang, path, for_)| quote!(#bang #path #for_)),
        &imp.self_ty,
    );
    let where_clause = &generics.where_clause;
    quote! {
        #(#errs)*
        #(#attrs)*
        #defaultness #unsafety impl #generics #trait_ #self_ty #where_clause {
            #(#items)*
        }
    }
}

fn is_target_attr(a: &syn::Attribute) -> bool {
    a.path()
        .segments
        .last()
        .is_some_and(|s| s.ident == "target")
}

/// The errors, the function as written and a `try_<name>` of the same signature, so that callers still type-check
/// and one mistake does not cascade into an error at every call site.
fn failed(e: syn::Error, func: &ItemFn) -> TokenStream {
    let err = e.to_compile_error();
    let sig = &func.sig;
    let (vis, unsafety, generics) = (&func.vis, &sig.unsafety, &sig.generics);
    let where_clause = &generics.where_clause;

    let try_name = format_ident!("try_{}", sig.ident);
    let ret = match &sig.output {
        syn::ReturnType::Default => quote!(()),
        syn::ReturnType::Type(_, t) => quote!(#t),
    };
    let inputs = outer_inputs(sig, &[]);
    let nowait = nowait::nowait(&func.vis, sig, None, &ret, None);
    quote! {
        #err
        #func
        #nowait
        #[allow(unused_variables, clippy::too_many_arguments)]
        #vis #unsafety fn #try_name #generics (#(#inputs),*) -> ::core::result::Result<#ret, ::offload::Error>
            #where_clause
        {
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
    let where_clause = &generics.where_clause;
    let output = &sig.output;
    // A method region's functions are associated: called through `Self`, its fallback beside it (a function nested
    // in the method could not name `Self`).
    let in_impl = region.self_ty.is_some();
    let host_name = if in_impl {
        format_ident!("__offload_host_{}", name)
    } else {
        format_ident!("__offload_host")
    };
    let (this, host_path) = if in_impl {
        (quote!(Self::), quote!(Self::#host_name))
    } else {
        (quote!(), quote!(#host_name))
    };

    let mut_args = mut_arg_params(region, &sig);
    let outer_inputs = outer_inputs(&sig, &mut_args);
    // Each `&mut impl MutArg<S>` parameter as the `&mut S` the rest of the call uses.
    let mut_arg_lets = mut_args.iter().map(|(id, ty)| {
        quote_spanned!(ty.span()=>
            #[allow(unused_unsafe)]
            // SAFETY: the region alone uses the struct (its map list and host fallback).
            let #id: &mut #ty = unsafe { ::offload::MutArg::__mut_arg(#id) };
        )
    });
    let idents: Vec<_> = region.params.iter().map(|p| &p.ident).collect();

    let params::Params {
        raw,
        checks,
        fallback_args,
    } = params::params(region);
    let maps = params::map_list_expr(region, &slot_ty);
    let (device, if_cond) = crate::data::device_and_if(&region.device, &region.if_cond);
    let section_bounds = params::section_bounds(region);
    let launch_request = call::launch_request(region);
    // The fallback is called with the region's own arguments, so its generic parameters are inferred.
    let call_host = match unsafety {
        Some(_) => quote!(unsafe { #host_path(#(#fallback_args),*) }),
        None => quote!(#host_path(#(#fallback_args),*)),
    };
    let touch = call::clause_touches(region, &idents);
    // The one lowering the outliner applies too: views for parallel `&mut` parameters, the work-shared loop as a
    // closure over the thread's share.
    let lowered = offload_frontend::lower::lower(
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
    let lint_attrs: Vec<_> = attrs
        .iter()
        .filter(|a| {
            a.path().get_ident().is_some_and(|i| {
                ["allow", "warn", "deny", "expect", "forbid"].contains(&&*i.to_string())
            })
        })
        .collect();
    // Several reduction variables come back from their `#[repr(C)]` tuple; a tail that is an expression of them is
    // evaluated here, once, with the variables bound to their combined values.
    // Outside the `unsafe` block: it is the user's code.
    let (finish, tail) = match &lowered.tail {
        Some(tail) => (None, Some(tail_closure(region, tail, &slot_ty))),
        None => (
            (region.reductions.len() > 1).then(|| quote!(.map(::core::convert::Into::into))),
            None,
        ),
    };
    let host_output = &lowered.output;
    let host_fn = quote!(
        #(#lint_attrs)*
        #[doc(hidden)]
        #[allow(clippy::too_many_arguments)]
        #unsafety fn #host_name #generics (#(#host_inputs),*) #host_output #where_clause #host_body
    );
    let (host_fn_inside, host_fn_beside) = if in_impl {
        (quote!(), host_fn)
    } else {
        (host_fn, quote!())
    };
    let entries = entries(region, &host_name, tag);
    let runtime_call = call::runtime_call(region, &call_host, &slot_ty);
    let try_doc = format!("Runs the region [`{name_str}`], returning a device failure as an `Err` instead of panicking.");
    let nowait = nowait::nowait(
        &vis,
        &sig,
        Some(region),
        &ret_ty,
        Some(quote!(#this #try_name(#(#idents),*))),
    );

    quote! {
        #(#attrs)*
        #vis #unsafety fn #name #generics (#(#outer_inputs),*) #output #where_clause {
            match #this #try_name(#(#idents),*) {
                ::core::result::Result::Ok(r) => r,
                ::core::result::Result::Err(e) => ::offload::__private::fail(e),
            }
        }

        #host_fn_beside

        #nowait

        #[doc = #try_doc]
        #[allow(clippy::too_many_arguments)]
        #vis #unsafety fn #try_name #generics (#(#outer_inputs),*)
            -> ::core::result::Result<#ret_ty, ::offload::Error>
            #where_clause
        {
            #(#mut_arg_lets)*
            #host_fn_inside
            #entries

            #(#checks)*
            // Clauses first: they may read the parameters, which the raw pointers below must not see change.
            let __offload_device = #device;
            let __offload_if = #if_cond;
            let __offload_launch = #launch_request;
            #(#section_bounds)*
            #(#raw)*
            let mut __offload_ret_slot = ::core::mem::MaybeUninit::<#slot_ty>::uninit();
            // One raw pointer to the slot serves the map list and the runtime, so neither invalidates the other.
            let __offload_ret = ::core::ptr::addr_of_mut!(__offload_ret_slot);
            #[allow(unused_unsafe)]
            // SAFETY: the map list describes live parameters (raw pointers taken above, used only by this call) and
            // the return slot, in the kernel argument order the outliner's entry unpacks; by-value types were
            // checked `Firstprivate` above.
            let __offload_result = unsafe {
                let __offload_maps = #maps;
                (#runtime_call) #finish
            };
            __offload_result #tail
        }
    }
}

/// `.map(|w| TAIL)`: the reduction tail evaluated on the combined value `w` of the wire type `wire`, with the variables
/// bound to it (to its fields, for several) and the `let`s before the loop that it reads computed again.
fn tail_closure(
    region: &Region,
    tail: &offload_frontend::worksharing::Tail,
    wire: &TokenStream,
) -> TokenStream {
    let w = format_ident!("__offload_w", span = proc_macro2::Span::mixed_site());
    let binds = region.reductions.iter().enumerate().map(|(k, (_, v))| {
        if region.reductions.len() == 1 {
            quote!(#[allow(unused_variables)] let #v = #w;)
        } else {
            let k = syn::Index::from(k);
            quote!(#[allow(unused_variables)] let #v = #w.#k;)
        }
    });
    let lets = &tail.lets;
    let expr = &tail.expr;
    quote!(.map(|#w: #wire| { #(#binds)* #(#lets)* #expr }))
}

/// The region's offload entries, statics in its `try_` function: one, or one per `instantiate(..)` list of a generic
/// region, with the table the call picks its entry from by the arguments' `TypeId`. An entry's address is the region's
/// host id (clang's region id): its fallback where the statics can name it, else its symbol (a method's fallback is
/// `Self::..`, which a static cannot name).
fn entries(region: &Region, host_name: &syn::Ident, tag: u64) -> TokenStream {
    let local = region.local_name();
    let in_impl = region.self_ty.is_some();
    let entry = |k: Option<usize>| {
        let suffix = k.map_or(String::new(), |k| format!("_{k}"));
        let (name_c, symbol, entry, info) = (
            format_ident!("__OFFLOAD_NAME{}", suffix),
            format_ident!("__OFFLOAD_SYMBOL{}", suffix),
            format_ident!("__OFFLOAD_ENTRY{}", suffix),
            format_ident!("__OFFLOAD_REGION{}", suffix),
        );
        let local = match k {
            Some(k) => region.instance_name(k),
            None => local.clone(),
        };
        let address = match (in_impl, k) {
            (true, _) => quote!(&#symbol as *const _ as *const ::core::ffi::c_void),
            (false, Some(k)) => {
                let turbofish = region.turbofish(k);
                quote_spanned!(region.instances[k].span=> #host_name #turbofish as *const ::core::ffi::c_void)
            }
            (false, None) => quote!(#host_name as *const ::core::ffi::c_void),
        };
        quote! {
            const #name_c: &str = ::core::concat!(::core::module_path!(), "::", #local);
            static #symbol: [u8; ::offload::__private::mangled_len(#name_c) + 1] =
                ::offload::__private::mangle(#name_c);
            #[::offload::__private::linkme::distributed_slice(::offload::__private::OFFLOAD_ENTRIES)]
            #[linkme(crate = ::offload::__private::linkme)]
            static #entry: ::offload::__private::OffloadEntry =
                ::offload::__private::OffloadEntry::kernel(#address, &#symbol, #tag);
            static #info: ::offload::__private::RegionInfo = ::offload::__private::RegionInfo {
                name: #name_c,
                file: ::core::file!(),
                line: ::core::line!(),
                entry: &#entry,
            };
        }
    };
    if !region.is_generic() {
        return entry(None);
    }
    let each: Vec<TokenStream> = (0..region.instances.len())
        .map(|k| entry(Some(k)))
        .collect();
    let keys = (0..region.instances.len()).map(|k| {
        let key = instance_key(region, Some(k));
        let info = format_ident!("__OFFLOAD_REGION_{}", k);
        quote!((::offload::__private::instance_key::<#key> as fn() -> ::core::any::TypeId, &#info))
    });
    let n = region.instances.len();
    let listed = region
        .instances
        .iter()
        .map(|i| {
            let args: Vec<String> = i
                .args
                .iter()
                .map(|a| offload_frontend::region::canonical_tokens(quote!(#a)))
                .collect();
            if args.len() == 1 {
                args[0].clone()
            } else {
                format!("<{}>", args.join(", "))
            }
        })
        .collect::<Vec<_>>()
        .join(", ");
    quote! {
        #(#each)*
        static __OFFLOAD_INSTANCES: [::offload::__private::Instance; #n] = [#(#keys),*];
        static __OFFLOAD_GENERIC: ::offload::__private::GenericRegion = ::offload::__private::GenericRegion {
            name: ::core::concat!(::core::module_path!(), "::", #local),
            listed: #listed,
            instances: &__OFFLOAD_INSTANCES,
        };
    }
}

/// The tuple type whose `TypeId` keys a generic region's kernel: its parameters' names (`k: None`, in the region's
/// functions) or instance `k`'s arguments, a const one as its marker type.
pub(crate) fn instance_key(region: &Region, k: Option<usize>) -> TokenStream {
    let parts = region.generic_params.iter().enumerate().map(|(i, p)| {
        let arg = match k {
            Some(k) => {
                let a = &region.instances[k].args[i];
                quote!(#a)
            }
            None => {
                let id = &p.ident;
                quote!(#id)
            }
        };
        match &p.const_ty {
            None => arg,
            Some(t) => {
                let marker = format_ident!("Const{}", {
                    let t = quote!(#t).to_string();
                    let mut c = t.chars();
                    c.next()
                        .map_or(String::new(), |f| f.to_uppercase().chain(c).collect())
                });
                quote!(::offload::__private::konst::#marker<{ #arg }>)
            }
        }
    });
    quote!((#(#parts,)*))
}

/// The `&mut S` parameters (`S` named by a path: a struct, `Self`) that take `&mut impl offload::MutArg<S>` on the
/// host, by name, with `S`: so a `target_data!` block's re-bound struct that owns its arrays, `&mut Fixed<S>`, which
/// gives no `&mut S` to anything else, can be passed to them. Not numbers (`&mut f64`, whose literal arguments
/// infer their type from the parameter), nor a generic parameter or a type with generic arguments (no struct that
/// owns its arrays is one), which keep their deref coercions.
pub(crate) fn mut_arg_params(
    region: &Region,
    sig: &syn::Signature,
) -> Vec<(syn::Ident, syn::Type)> {
    const PRIMITIVES: &[&str] = &[
        "bool", "char", "f32", "f64", "i8", "i16", "i32", "i64", "i128", "isize", "u8", "u16",
        "u32", "u64", "u128", "usize",
    ];
    let generic = |id: &syn::Ident| {
        region.generic_params.iter().any(|g| g.ident == *id)
            || sig.generics.type_params().any(|t| t.ident == *id)
    };
    region
        .params
        .iter()
        .filter_map(|p| {
            let ParamKind::Ref { ty, mutable: true } = &p.kind else {
                return None;
            };
            // A typed parameter (not `&mut self`) written `&mut Path`.
            let written_ref = sig.inputs.iter().any(|a| match a {
                FnArg::Typed(pt) => {
                    matches!(&*pt.pat, Pat::Ident(pi) if pi.ident == p.ident)
                        && matches!(&*pt.ty, syn::Type::Reference(_))
                }
                FnArg::Receiver(_) => false,
            });
            let (true, syn::Type::Path(path)) = (written_ref, ty) else {
                return None;
            };
            let last = path.path.segments.last()?;
            let plain = path.qself.is_none() && last.arguments.is_none();
            let single = path.path.segments.len() == 1 && path.path.leading_colon.is_none();
            let excluded =
                single && (PRIMITIVES.contains(&&*last.ident.to_string()) || generic(&last.ident));
            (plain && !excluded).then(|| (p.ident.clone(), ty.clone()))
        })
        .collect()
}

/// The parameters of the region's function and its `try_` twin: as written, without `mut` (only the body, kept in
/// `__offload_host`, mutates them), and each of `mut_args` as `&mut impl offload::MutArg<S>`.
fn outer_inputs(sig: &syn::Signature, mut_args: &[(syn::Ident, syn::Type)]) -> Vec<TokenStream> {
    sig.inputs
        .iter()
        .map(|a| match a {
            FnArg::Typed(pt) => {
                let mut pt = pt.clone();
                if let Pat::Ident(pi) = &mut *pt.pat {
                    pi.mutability = None;
                    if let Some((_, ty)) = mut_args.iter().find(|(id, _)| *id == pi.ident) {
                        mut_arg_type(&mut pt.ty, ty, quote!());
                    }
                }
                quote!(#pt)
            }
            FnArg::Receiver(r) => {
                let mut r = r.clone();
                if r.reference.is_none() {
                    r.mutability = None;
                }
                quote!(#r)
            }
        })
        .collect()
}

/// `&'a mut S` as `&'a mut (impl offload::MutArg<S> + extra)` (the reference's own lifetime kept).
pub(crate) fn mut_arg_type(param: &mut syn::Type, s: &syn::Type, extra: TokenStream) {
    if let syn::Type::Reference(r) = param {
        let bound: syn::Type =
            syn::parse_quote_spanned!(s.span()=> (impl ::offload::MutArg<#s> #extra));
        *r.elem = bound;
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
            let elem = offload_frontend::lower::view_elem(p);
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
