//! `target_data!`, `target_enter_data!`, `target_exit_data!`, `target_update!`: parsed by the model, expanded into
//! calls of the runtime's data-environment API.

use offload_frontend::clause::{Construct, MapType, Section};
use offload_frontend::data::{DataConstruct, Motion, Update};
use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned};

/// The `device(..)` and `if(..)` clauses as runtime values (`Option<i32>`, `bool`), for every construct.
pub fn device_and_if(
    device: &Option<syn::Expr>,
    if_cond: &Option<syn::Expr>,
) -> (TokenStream, TokenStream) {
    let device = match device {
        Some(e) => {
            quote!(::core::option::Option::Some(::offload::__private::DeviceNum::device_num(#e)))
        }
        None => quote!(::core::option::Option::None),
    };
    let cond = match if_cond {
        Some(e) => quote!({ let __offload_if: bool = #e; __offload_if }),
        None => quote!(true),
    };
    (device, cond)
}

/// The runtime's `Section`: `None`, or `Some((lo, Some(hi) | None))`, the bounds typed `usize` at their spans.
fn section(s: &Option<Section>) -> TokenStream {
    match s {
        Some(s) => s.runtime_bounds(),
        None => quote!(::core::option::Option::None),
    }
}

fn or_error(r: syn::Result<TokenStream>) -> TokenStream {
    r.unwrap_or_else(|e| e.to_compile_error())
}

pub fn target_data(input: TokenStream) -> TokenStream {
    or_error(DataConstruct::parse(input, Construct::Data).and_then(|c| {
        let (device, cond) = device_and_if(&c.device, &c.if_cond);
        // The scaffolding's names are mixed-site: the block cannot name (and so cannot forget or move) a guard, or
        // shadow the device the guards use.
        let hygienic = |name: String| syn::Ident::new(&name, Span::mixed_site());
        let dev = hygienic("__offload_dev".into());
        let value = hygienic("__offload_value".into());
        let mut guards = Vec::new();
        let mut written_to = false;
        let mut rebinds = Vec::new();
        for (map, item) in &c.maps {
            let id = &item.ident;
            let g = hygienic(format!("__offload_mapped_{id}"));
            let (bits, sec) = (map.bits(), section(&item.section));
            // Each guard borrows its source until the region's exit, and the block's name borrows the guard, so
            // neither the source nor a reference into it can be touched or escape before the copy back.
            let body = c.body.as_ref().expect("target_data! has a block");
            if map.map_type == MapType::To && !offload_frontend::data::block_writes(body, id) {
                // OpenMP's `to` governs only the copy-in. A block that does not visibly write `x` borrows it shared
                // (so an immutable source maps `to`), unless the source is a `&mut`: then `map_to` resolves to the
                // exclusive borrow, and the block may pass `x` on to `&mut` parameters.
                // The section once: a view that makes its private copy maps it again.
                let section = hygienic(format!("__offload_section_{id}"));
                guards.push(quote_spanned!(id.span()=>
                    let #section = #sec;
                    #[allow(unused_mut)]
                    let mut #g = {
                        // One of the two `map_to`s is used, depending on the source's type.
                        #[allow(unused_imports)]
                        use ::offload::__private::{EnterTo as _, MapToExcl as _, MapToShared as _};
                        #id.map_to().enter_to(#dev, #section, #bits)
                    };
                ));
                if offload_frontend::data::block_passes_on(body, id) {
                    // Passed on to a function whose parameter may be `&mut [T]`: a slice from a shared borrow is
                    // re-bound as `&mut offload::ToView`, which gives the device copy to write (a private host copy
                    // of its own, made at the first `&mut`); anything else as `rebind` gives it.
                    let view = hygienic(format!("__offload_view_{id}"));
                    rebinds.push(quote!(
                        #[allow(unused_mut, unused_variables)]
                        let mut #view = {
                            #[allow(unused_imports)]
                            use ::offload::__private::ViewFallback as _;
                            #g.view(#dev, #section, #bits)
                        };
                        #[allow(unused_mut, unused_variables)]
                        let mut #id = ::offload::__private::Rebind::rebind(&mut #view);
                    ));
                } else {
                    rebinds.push(quote!(#[allow(unused_mut, unused_variables)] let mut #id = #g.rebind();));
                }
            } else {
                written_to |= map.map_type == MapType::To;
                // A `to` variable the block writes is borrowed exclusively too (the source must be mutable); the
                // exit copies back only for `from`/`tofrom`.
                guards.push(quote_spanned!(id.span()=>
                    let mut #g = ::offload::__private::MappedMut::enter(
                        #dev, { use ::offload::__private::MapWrite as _; #id.map_write() }, #sec, #bits);
                ));
                rebinds.push(quote!(#[allow(unused_mut, unused_variables)] let mut #id = #g.get_mut();));
            }
        }
        let body = c.body.as_ref().expect("target_data! has a block");
        // A `to` variable re-bound `&mut` because the block writes `&mut x` is a `&mut [T]` there, so clippy calls
        // that borrow needless; without it the macro would see no write and re-bind `x` shared, so the suggested
        // `f(x)` would not compile.
        let lints = if written_to {
            quote!(#[allow(clippy::needless_borrow)])
        } else {
            quote!()
        };
        // The block runs in a closure, called here: it cannot be suspended (an `.await` in it, whatever macro wrote
        // it, is rustc's error), and what leaves it (`return`, `?`, `break`, `continue`) is carried across the
        // closure and done after it (`crate::flow`), where the guards exit on the way out.
        let run = crate::flow::rewrite(body)?.run(lints);
        // The block's value is the closure's, bound in a `let`, so its temporaries die before the guards (edition
        // 2021 would keep a tail expression's temporaries past them); a block that always diverges draws no lint
        // on our scaffolding.
        Ok(quote!({
            #[allow(unreachable_code)]
            let #value = {
                let #dev = ::offload::__private::DataDevice::select("target_data!", #device, #cond);
                #(#guards)*
                #(#rebinds)*
                #run
            };
            #value
        }))
    }))
}

pub fn target_enter_data(input: TokenStream) -> TokenStream {
    or_error(DataConstruct::parse(input, Construct::EnterData).and_then(|c| {
        let (device, cond) = device_and_if(&c.device, &c.if_cond);
        let mut out = Vec::new();
        for (map, item) in &c.maps {
            if let Some(s) = &item.section {
                return Err(syn::Error::new(
                    s.span,
                    "`target_enter_data!` maps the whole buffer it takes; map a section inside `target_data!` or a region",
                ));
            }
            let id = &item.ident;
            let bits = map.bits();
            out.push(match &c.scope {
                // Borrowed data, entered until its exit or the scope's end.
                Some(_) => quote_spanned!(id.span()=>
                    ::offload::DataScope::enter(__offload_scope, #id, #bits, __offload_device, __offload_if)),
                None => quote_spanned!(id.span()=>
                    ::offload::__private::enter_data(#id, #bits, __offload_device, __offload_if)),
            });
        }
        let scope = c.scope.as_ref().map(|s| quote!(let __offload_scope = #s;));
        Ok(quote!({
            #scope
            let __offload_device = #device;
            let __offload_if = #cond;
            (#(#out),*)
        }))
    }))
}

pub fn target_exit_data(input: TokenStream) -> TokenStream {
    or_error(DataConstruct::parse(input, Construct::ExitData).and_then(|c| {
        if let Some(e) = &c.if_cond {
            return Err(syn::Error::new_spanned(
                e,
                "`target_exit_data!` takes no `if`: it returns the buffer, so it must always run; to keep the data \
                 mapped, keep the `Mapped` value instead of exiting",
            ));
        }
        let (device, _) = device_and_if(&c.device, &None);
        let mut out = Vec::new();
        for (map, item) in &c.maps {
            if let Some(s) = &item.section {
                return Err(syn::Error::new(s.span, "`target_exit_data!` exits the whole buffer `target_enter_data!` mapped"));
            }
            let id = &item.ident;
            let bits = map.bits();
            out.push(quote_spanned!(id.span()=> ::offload::__private::exit_data(#id, #bits, __offload_device)));
        }
        Ok(quote!({
            let __offload_device = #device;
            (#(#out),*)
        }))
    }))
}

pub fn target_update(input: TokenStream) -> TokenStream {
    or_error(Update::parse(input).map(|u| {
        let (device, cond) = device_and_if(&u.device, &u.if_cond);
        // One call per item: its borrow is taken before its section bounds are evaluated, in the same expression,
        // so a bound cannot change the data behind the runtime's back.
        let updates = u.items.iter().map(|(motion, item)| {
            let id = &item.ident;
            let sec = section(&item.section);
            match motion {
                Motion::To => quote_spanned!(id.span()=> ::offload::__private::update_to(
                    __offload_dev, { use ::offload::__private::MapSource as _; #id.map_ref() }, #sec);),
                Motion::From => quote_spanned!(id.span()=> ::offload::__private::update_from(
                    __offload_dev, {
                        // One of the two is picked, by the receiver: atomics shared, anything else exclusive.
                        #[allow(unused_imports)]
                        use ::offload::__private::{MapWrite as _, MapWriteAtomic as _};
                        #id.map_write()
                    }, #sec);),
            }
        });
        quote!({
            let __offload_dev = ::offload::__private::DataDevice::select("target_update!", #device, #cond);
            #(#updates)*
        })
    }))
}
