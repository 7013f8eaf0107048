use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Fields, Item};

pub fn expand(args: TokenStream, item: TokenStream) -> TokenStream {
    let mut errors = Vec::new();
    if !args.is_empty() {
        errors.push(syn::Error::new(
            args.span(),
            "`#[declare_target]` takes no arguments (`declare target to/link` for statics comes later)",
        ));
    }
    let parsed: Item = match syn::parse2(item.clone()) {
        Ok(i) => i,
        Err(e) => return e.to_compile_error(),
    };
    let extra = match &parsed {
        Item::Fn(_) | Item::Const(_) | Item::Impl(_) | Item::Type(_) => quote!(),
        Item::Struct(s) => struct_impl(s, &mut errors),
        Item::Enum(e) => enum_impl(e, &mut errors),
        Item::Static(s) => static_entry(s, &mut errors),
        other => {
            errors.push(syn::Error::new(
                other.span(),
                "`#[declare_target]` goes on functions, consts, type aliases, `#[repr(C)]` structs, `Copy` enums and their \
                 `impl` blocks",
            ));
            quote!()
        }
    };
    let errors = errors.into_iter().map(|e| e.to_compile_error());
    quote!(#(#errors)* #parsed #extra)
}

/// A device global (OpenMP's `declare target` variable): the static's entry in the offload table, which the runtime
/// pairs with its copy in each image it loads (exported under the same symbol by the outliner), making the static
/// present on that device, its copy initialised from the host value.
fn static_entry(s: &syn::ItemStatic, errors: &mut Vec<syn::Error>) -> TokenStream {
    if let syn::StaticMutability::Mut(m) = &s.mutability {
        errors.push(syn::Error::new(
            m.span(),
            "a `#[declare_target] static mut` would race between a device's threads: use an atomic \
             (`static HITS: AtomicU32`), which regions update and `target_update!(from: HITS)` brings back",
        ));
        return quote!();
    }
    let (name, ty) = (&s.ident, &s.ty);
    let name_str = name.to_string();
    let tag = offload_model::identity::package_tag(
        &std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default(),
    );
    quote_spanned! {ty.span()=>
        const _: () = {
            const __OFFLOAD_NAME: &str = ::core::concat!(::core::module_path!(), "::", #name_str);
            static __OFFLOAD_SYMBOL: [u8; ::offload::__private::mangled_len(__OFFLOAD_NAME) + 1] =
                ::offload::__private::mangle(__OFFLOAD_NAME);
            #[::offload::__private::linkme::distributed_slice(::offload::__private::OFFLOAD_ENTRIES)]
            #[linkme(crate = ::offload::__private::linkme)]
            static __OFFLOAD_ENTRY: ::offload::__private::OffloadEntry = ::offload::__private::OffloadEntry::global(
                ::core::ptr::addr_of!(#name) as *const ::core::ffi::c_void,
                &__OFFLOAD_SYMBOL,
                ::core::mem::size_of::<#ty>(),
                ::core::mem::align_of::<#ty>(),
                <#ty as ::offload::DeviceCopy>::HOST_ATOMIC as u32,
                #tag,
            );
            const _: () = ::core::assert!(
                ::core::mem::size_of::<#ty>() != 0,
                "a zero-sized #[declare_target] static has nothing to put on a device"
            );
            // Its bytes are what the device's copy holds.
            #[allow(dead_code)]
            fn __offload_device_copy() {
                ::offload::__private::assert_device_copy::<#ty>();
            }
        };
    }
}

fn has_repr_c(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("repr") && {
            let mut found = false;
            let _ = a.parse_nested_meta(|m| {
                found |= m.path.is_ident("C") || m.path.is_ident("transparent");
                Ok(())
            });
            found
        }
    })
}

/// `unsafe impl DeviceCopy`, justified field by field: a `#[repr(C)]` struct of `DeviceCopy` fields has a layout
/// host and device agree on and accepts every bit pattern.
fn struct_impl(s: &syn::ItemStruct, errors: &mut Vec<syn::Error>) -> TokenStream {
    // A struct holding slices (C's `struct { double *p; int n; }`) is no plain data: it is a mapper.
    if s.generics.lifetimes().next().is_some()
        || s.fields
            .iter()
            .any(|f| matches!(f.ty, syn::Type::Reference(_) | syn::Type::Ptr(_)))
    {
        errors.push(syn::Error::new(
            s.ident.span(),
            format!(
                "`{}` holds references, so it is not plain data a device can copy: write `#[derive(offload::Mapper)]` \
                 instead of `#[declare_target]`, and a region taking it (`g: {}<'_>`) gets each slice field mapped \
                 and each other field by value",
                s.ident, s.ident
            ),
        ));
        return quote!();
    }
    if !has_repr_c(&s.attrs) {
        errors.push(syn::Error::new(
            s.ident.span(),
            format!(
                "add `#[repr(C)]` to `{}`: host and device must agree on its layout, and Rust's default layout \
                 may differ between compilations",
                s.ident
            ),
        ));
        return quote!();
    }
    let name = &s.ident;
    let (impl_g, ty_g, where_c) = s.generics.split_for_impl();
    let checks = field_types(&s.fields)
        .map(|ty| quote_spanned!(ty.span()=> ::offload::__private::assert_device_copy::<#ty>();));
    // Atomic fields would be copied byte by byte while other host threads use them: not allowed in structs. An
    // item-level const is always evaluated (generic structs cannot name their parameters there: below).
    let no_atomics = field_types(&s.fields).filter(|_| s.generics.params.is_empty()).map(|ty| {
        quote_spanned!(ty.span()=>
            const _: () = assert!(
                <#ty as ::offload::DeviceCopy>::HOST_ATOMIC == 0,
                "atomics cannot be fields of a #[declare_target] struct; pass them as a `&[AtomicT]` parameter"
            );
        )
    });
    // A generic struct's fields are checked where the type is used with its arguments (a mapped `W<AtomicU32>`, a
    // device global of it): its `HOST_ATOMIC`, read by every copy, asserts that no field is atomic.
    let generic_no_atomics = (!s.generics.params.is_empty()).then(|| {
        let tys = field_types(&s.fields);
        quote! {
            const HOST_ATOMIC: u64 = {
                #(::core::assert!(
                    <#tys as ::offload::DeviceCopy>::HOST_ATOMIC == 0,
                    "atomics cannot be fields of a #[declare_target] struct; pass them as a `&[AtomicT]` parameter"
                );)*
                0
            };
        }
    });
    quote! {
        const _: () = {
            #[allow(dead_code)]
            fn __offload_fields_are_device_copy #impl_g () #where_c { #(#checks)* }
        };
        #(#no_atomics)*
        // SAFETY: `#[repr(C)]` and every field is `DeviceCopy` (checked above); no field is atomic (checked above, or
        // by `HOST_ATOMIC` for a generic struct).
        unsafe impl #impl_g ::offload::DeviceCopy for #name #ty_g #where_c { #generic_no_atomics }
    }
}

/// Whether an enum has a layout fixed across compilations: `#[repr(C)]` or a primitive `#[repr(u8)]` and the like
/// (RFC 2195 fixes data-carrying variants under both).
fn has_fixed_enum_repr(attrs: &[syn::Attribute]) -> bool {
    const FIXED: &[&str] = &[
        "C", "u8", "u16", "u32", "u64", "u128", "usize", "i8", "i16", "i32", "i64", "i128", "isize",
    ];
    attrs.iter().any(|a| {
        a.path().is_ident("repr") && {
            let mut found = false;
            let _ = a.parse_nested_meta(|m| {
                found |= FIXED.iter().any(|r| m.path.is_ident(r));
                Ok(())
            });
            found
        }
    })
}

/// Enums cross by value only (their bits are checked by construction on the host), so they are `Firstprivate`.
/// Their bytes are what the device reads, so their layout must be one host and device agree on.
fn enum_impl(e: &syn::ItemEnum, errors: &mut Vec<syn::Error>) -> TokenStream {
    if !has_fixed_enum_repr(&e.attrs) {
        errors.push(syn::Error::new(
            e.ident.span(),
            format!(
                "add `#[repr(u8)]` (or another integer, or `#[repr(C)]`) to `{}`: it crosses into regions by value, \
                 so host and device must agree on its layout, and Rust's default enum layout may differ between \
                 compilations",
                e.ident
            ),
        ));
        return quote!();
    }
    let name = &e.ident;
    let (impl_g, ty_g, where_c) = e.generics.split_for_impl();
    let checks =
        e.variants.iter().flat_map(|v| field_types(&v.fields)).map(
            |ty| quote_spanned!(ty.span()=> ::offload::__private::assert_firstprivate::<#ty>();),
        );
    quote! {
        const _: () = {
            #[allow(dead_code)]
            fn __offload_fields_are_firstprivate #impl_g () #where_c { #(#checks)* }
        };
        // SAFETY: a `Copy` enum of `Firstprivate` fields; values are only ever copied from valid host values.
        unsafe impl #impl_g ::offload::Firstprivate for #name #ty_g #where_c {}
    }
}

fn field_types(f: &Fields) -> impl Iterator<Item = &syn::Type> {
    f.iter().map(|f| &f.ty)
}
