//! `target_data!`, `target_enter_data!`, `target_exit_data!`, `target_update!`: parsed by the model, expanded into
//! calls of the runtime's data-environment API.

use offload_model::clause::{Construct, MapType, Section};
use offload_model::data::{DataConstruct, Motion, Update};
use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};

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

/// `Some((lo, hi))` for a section of the target behind raw pointer `p`.
fn section(s: &Option<Section>, p: &syn::Ident) -> TokenStream {
    match s {
        Some(s) => {
            let (lo, hi) = s.bounds(quote!(::offload::__private::MapTarget::len(#p)));
            quote!(::core::option::Option::Some((#lo, #hi)))
        }
        None => quote!(::core::option::Option::None),
    }
}

fn or_error(r: syn::Result<TokenStream>) -> TokenStream {
    r.unwrap_or_else(|e| e.to_compile_error())
}

pub fn target_data(input: TokenStream) -> TokenStream {
    or_error(DataConstruct::parse(input, Construct::Data).map(|c| {
        let (device, cond) = device_and_if(&c.device, &c.if_cond);
        let mut binds = Vec::new();
        let mut maps = Vec::new();
        let mut rebinds = Vec::new();
        for (map, item) in &c.maps {
            let id = &item.ident;
            let p = format_ident!("__offload_p_{}", id);
            let bits = map.bits();
            if map.map_type == MapType::To {
                binds.push(quote_spanned!(id.span()=>
                    let #id = ::offload::__private::MapSource::map_ref(&#id);
                    let #p = #id as *const _;
                ));
                rebinds.push(quote!());
            } else {
                binds.push(quote_spanned!(id.span()=>
                    // Method syntax reborrows through a `&mut` binding instead of needing `let mut`.
                    let (#p, #id) = ::offload::__private::rebind_mut({
                        use ::offload::__private::MapSourceMut as _;
                        #id.map_mut()
                    });
                    let #p = #p as *const _;
                ));
                rebinds.push(quote!(#[allow(unused_mut)] let mut #id = #id;));
            }
            let sec = section(&item.section, &p);
            maps.push(quote!(::offload::__private::MapTarget::map_arg(#p, #sec, #bits)));
        }
        let body = c.body.as_ref().expect("target_data! has a block");
        quote!({
            #(#binds)*
            let __offload_maps = [#(#maps),*];
            // SAFETY: every entry points into data the block's re-bound names borrow until the scope ends.
            let __offload_scope = unsafe { ::offload::__private::DataScope::begin(#device, #cond, &__offload_maps) };
            #(#rebinds)*
            #body
        })
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
            out.push(quote_spanned!(id.span()=> ::offload::Mapped::enter(#id, #bits, __offload_device, __offload_if)));
        }
        Ok(quote!({
            let __offload_device = #device;
            let __offload_if = #cond;
            (#(#out),*)
        }))
    }))
}

pub fn target_exit_data(input: TokenStream) -> TokenStream {
    or_error(DataConstruct::parse(input, Construct::ExitData).and_then(|c| {
        if let Some(e) = c.device.as_ref().or(c.if_cond.as_ref()) {
            return Err(syn::Error::new_spanned(
                e,
                "`target_exit_data!` acts on the device the data was entered on; `device` and `if` belong to `target_enter_data!`",
            ));
        }
        let mut out = Vec::new();
        for (map, item) in &c.maps {
            if let Some(s) = &item.section {
                return Err(syn::Error::new(s.span, "`target_exit_data!` exits the whole buffer `target_enter_data!` mapped"));
            }
            let id = &item.ident;
            let bits = map.bits();
            out.push(quote_spanned!(id.span()=> ::offload::Mapped::exit(#id, #bits)));
        }
        Ok(quote!((#(#out),*)))
    }))
}

pub fn target_update(input: TokenStream) -> TokenStream {
    or_error(Update::parse(input).map(|u| {
        let (device, cond) = device_and_if(&u.device, &u.if_cond);
        let mut binds = Vec::new();
        let mut maps = Vec::new();
        for (motion, item) in &u.items {
            let id = &item.ident;
            let p = format_ident!("__offload_p_{}", id);
            let bits = match motion {
                Motion::To => offload_model::abi::map_type::TO,
                Motion::From => offload_model::abi::map_type::FROM,
            };
            binds.push(match motion {
                Motion::To => quote_spanned!(id.span()=>
                    let #p = ::offload::__private::MapSource::map_ref(&#id) as *const _;),
                Motion::From => quote_spanned!(id.span()=>
                    let #p = { use ::offload::__private::MapSourceMut as _; #id.map_mut() } as *mut _ as *const _;),
            });
            let sec = section(&item.section, &p);
            maps.push(quote!(::offload::__private::MapTarget::map_arg(#p, #sec, #bits)));
        }
        quote!({
            #(#binds)*
            // SAFETY: `to` entries point at data borrowed for reading, `from` entries at data borrowed mutably just
            // above; nothing else touches it during the update.
            unsafe { ::offload::__private::update(#device, #cond, &[#(#maps),*]) }
        })
    }))
}
