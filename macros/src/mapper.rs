//! `#[derive(Mapper)]` (OpenMP's `declare mapper`): a struct holding slices crosses into a region field by field.
//! The fields come from the model (`offload_frontend::mapper::fields`), which the outliner's kernel entry reads too, so
//! the map list built here and the struct rebuilt on the device agree on the kernel arguments.

use offload_frontend::mapper::{fields, Field, FieldKind};
use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned, ToTokens};
use syn::spanned::Spanned;

pub fn derive(input: TokenStream) -> TokenStream {
    let item: syn::DeriveInput = match syn::parse2(input) {
        Ok(i) => i,
        Err(e) => return e.to_compile_error(),
    };
    match fields(&item) {
        Ok(fields) if offload_frontend::mapper::owns(&fields) => expand_owned(&item, &fields),
        Ok(fields) => expand(&item, &fields),
        Err(e) => e.to_compile_error(),
    }
}

fn expand(item: &syn::DeriveInput, fields: &[Field]) -> TokenStream {
    let parts = FieldParts::new(fields);
    let no_drop = no_drop(item);
    let checks = &parts.checks;
    let mapper = mapper_impl(item, &parts, parallel_error(&item.ident, fields));
    let sources = source_impls(item);
    let lifetimes: Vec<_> = item.generics.lifetimes().map(|l| &l.lifetime).collect();
    let check_fn = format_ident!("__offload_mapper_checks");
    quote! {
        const _: () = {
            #no_drop

            #[allow(dead_code, clippy::extra_unused_lifetimes)]
            fn #check_fn <#(#lifetimes),*> () {
                #(#checks)*
            }

            #mapper

            #sources
        };
    }
}

/// A struct that owns its arrays: `OwnedMapper` (its map list through `&S`/`&mut S`) and the data constructs' traits
/// (the constructs map it as `offload::Fixed<S>`).
fn expand_owned(item: &syn::DeriveInput, fields: &[Field]) -> TokenStream {
    let p = quote!(::offload::__private);
    let name = &item.ident;
    let no_drop = no_drop(item);
    let (mut checks, mut maps) = (Vec::new(), Vec::new());
    for f in fields {
        let (id, ty) = (&f.ident, &f.ty);
        let bits = f.map.map_or(0, |m| m.bits());
        match &f.kind {
            FieldKind::Vec { elem } => maps.push(quote_spanned!(elem.span()=> {
                let v: *mut ::std::vec::Vec<#elem> = &raw mut (*this).#id;
                // Neither makes a reference to the elements (`Vec`'s guarantee), so the pointer stays valid beside
                // the region's own reference to the struct.
                let data: *const [#elem] = if mutable {
                    ::core::ptr::slice_from_raw_parts_mut((*v).as_mut_ptr(), (*v).len())
                } else {
                    ::core::ptr::slice_from_raw_parts((*v).as_ptr(), (*v).len())
                };
                // Through `&S` the region reads it: `to`, whatever the field's `#[map(..)]` (a `from` or `alloc`
                // copy would be read uninitialised).
                let field = if mutable { #bits } else { #p::TO };
                let writes = if kernel && mutable { #p::DEVICE_WRITES } else { 0 };
                out.push(#p::MapArg::slice::<#elem>(data, #p::mapper_field(clause, field) | writes));
                if kernel {
                    out.push(#p::MapArg::literal(data.len() as u64));
                }
            })),
            _ => {
                checks.push(quote_spanned!(ty.span()=> #p::assert_firstprivate::<#ty>();));
                // Through `&S` a firstprivate value; through `&mut S` an object mapped as the struct is, so the
                // region's writes come back on a device as they stay in the host fallback.
                maps.push(quote!(
                    if kernel && mutable {
                        // SAFETY: `Firstprivate`, checked above; `*this` is borrowed exclusively (the contract).
                        // Always copied in and out, whatever the clause: the entry reads the value and writes
                        // it back, so a `from` or `alloc` copy would carry uninitialised bytes into a `bool`.
                        out.push(#p::MapArg::value_object(&raw mut (*this).#id, #p::TO | #p::FROM));
                    } else if kernel {
                        // SAFETY: `Firstprivate`, checked above; `*this` outlives the entry (the trait's contract).
                        out.push(#p::MapArg::value(&(*this).#id));
                    }
                ));
            }
        }
    }
    let check_fn = format_ident!("__offload_mapper_checks");
    let slots: usize = fields.iter().map(Field::kernel_args).sum();
    quote! {
        const _: () = {
            #no_drop

            #[allow(dead_code)]
            fn #check_fn() {
                #(#checks)*
            }

            // SAFETY: generated from the fields (offload_frontend::mapper::fields): each `Vec`'s entries are a slice's
            // over its elements, taken without a reference to them, `FROM` and `DEVICE_WRITES` only through
            // `&mut`; values are checked `Firstprivate` and point into the struct.
            unsafe impl #p::OwnedMapper for #name {
                const SLOTS: usize = #slots;

                #[allow(unused_variables, unused_unsafe)]
                unsafe fn maps(
                    this: *mut Self,
                    mutable: bool,
                    clause: u64,
                    kernel: bool,
                    out: &mut ::std::vec::Vec<#p::MapArg>,
                ) {
                    // SAFETY: `this` points to a live struct borrowed as `mutable` says (the trait's contract).
                    unsafe { #(#maps)* }
                }
            }

            // A data construct maps the struct as `offload::Fixed<Self>`, which is what a `target_data!` block and
            // a `ScopedMapped` see: through it nothing can grow, replace or drop a `Vec` while it is mapped.
            impl #p::MapSource for #name {
                type Target = ::offload::Fixed<Self>;
                fn map_ref(&self) -> &::offload::Fixed<Self> {
                    ::offload::Fixed::from_ref(self)
                }
            }

            impl #p::MapSourceMut for #name {
                fn map_mut(&mut self) -> &mut ::offload::Fixed<Self> {
                    ::offload::Fixed::from_mut(self)
                }
            }
        };
    }
}

/// What each field contributes to the impl, in declaration order: its raw pointer's (or value's) type and how it is
/// taken from the struct, how the struct is rebuilt from it, its map-list entries, and the checks on its type.
#[derive(Default)]
struct FieldParts {
    raw_tys: Vec<TokenStream>,
    raw_parts: Vec<TokenStream>,
    rebuilt: Vec<TokenStream>,
    maps: Vec<TokenStream>,
    checks: Vec<TokenStream>,
    /// The struct's kernel arguments: its fields' slots.
    slots: usize,
}

impl FieldParts {
    fn new(fields: &[Field]) -> FieldParts {
        let mut parts = FieldParts::default();
        for (k, f) in fields.iter().enumerate() {
            parts.push(k, f);
        }
        parts.slots = fields.iter().map(Field::kernel_args).sum();
        parts
    }

    /// Field `k`'s parts.
    fn push(&mut self, k: usize, f: &Field) {
        let p = quote!(::offload::__private);
        let (id, ty) = (&f.ident, &f.ty);
        let k = syn::Index::from(k);
        let bits = f.map.map_or(0, |m| m.bits());
        // A region may write a `&mut` field's device copy whatever its map type (`#[map(to)]` included): the
        // present table then knows the device copy may be newer than the host's.
        let writes = matches!(
            f.kind,
            FieldKind::Slice { mutable: true, .. } | FieldKind::Ref { mutable: true, .. }
        )
        .then(|| quote!(| if kernel { #p::DEVICE_WRITES } else { 0 }));
        let bits = quote!(::offload::__private::mapper_field(clause, #bits) #writes);
        match &f.kind {
            FieldKind::Slice { elem, mutable } => {
                self.push_reference(id, &k, quote!([#elem]), *mutable);
                // `DeviceCopy` is checked by `MapArg::slice`, spanned at the element type.
                self.maps.push(quote_spanned!(elem.span()=>
                    out.push(#p::MapArg::slice::<#elem>(raw.#k, #bits));
                    if kernel {
                        out.push(#p::MapArg::literal(raw.#k.len() as u64));
                    }
                ));
            }
            FieldKind::Ref { ty: t, mutable } => {
                self.push_reference(id, &k, quote!(#t), *mutable);
                self.maps.push(quote_spanned!(t.span()=>
                    out.push(#p::MapArg::object::<#t>(raw.#k, #bits));
                ));
            }
            FieldKind::Vec { .. } => unreachable!("an owning struct is expanded by `expand_owned`"),
            FieldKind::Value => {
                self.raw_tys.push(ty.to_token_stream());
                // Read, not moved: a value that is not `Copy` gets only the `Firstprivate` error below.
                self.raw_parts
                    .push(quote!(::core::ptr::read(&raw const (*this).#id)));
                self.rebuilt.push(quote!(#id: raw.#k));
                self.checks
                    .push(quote_spanned!(ty.span()=> #p::assert_firstprivate::<#ty>();));
                self.maps.push(quote!(
                    if kernel {
                        // SAFETY: `Firstprivate`, checked above; `raw` outlives the entry (the trait's contract).
                        out.push(unsafe { #p::MapArg::value(&raw.#k) });
                    }
                ));
            }
        }
    }

    /// A reference field (to `target`, a slice or an object): a raw pointer of its mutability, rebuilt as the same
    /// kind of reference.
    fn push_reference(
        &mut self,
        id: &syn::Ident,
        k: &syn::Index,
        target: TokenStream,
        mutable: bool,
    ) {
        if mutable {
            self.raw_tys.push(quote!(*mut #target));
            self.raw_parts.push(quote!(&raw mut *(*this).#id));
            self.rebuilt.push(quote!(#id: &mut *raw.#k));
        } else {
            self.raw_tys.push(quote!(*const #target));
            self.raw_parts.push(quote!(&raw const *(*this).#id));
            self.rebuilt.push(quote!(#id: &*raw.#k));
        }
    }
}

/// `Mapper::PARALLEL_ERROR`: why a parallel region cannot take the struct, if a field is `&mut`.
fn parallel_error(name: &syn::Ident, fields: &[Field]) -> TokenStream {
    let Some(f) = fields.iter().find(|f| f.mutable()) else {
        return quote!(::core::option::Option::None);
    };
    let msg = format!(
        "field `{id}` of `{name}` is `{ty}`, which every thread of a parallel region would hold (a data \
         race): pass it as its own `&mut` parameter (`fn f({lower}: {name}<'_>, {id}: &mut ..)`), which a \
         parallel body writes only at each iteration's own elements, and keep `&` slices and values in \
         `{name}`",
        id = f.ident,
        ty = match &f.kind {
            FieldKind::Slice { elem, .. } => format!("&mut [{}]", elem.to_token_stream()),
            FieldKind::Ref { ty, .. } => format!("&mut {}", ty.to_token_stream()),
            FieldKind::Value | FieldKind::Vec { .. } => f.ty.to_token_stream().to_string(),
        },
        lower = name.to_string().to_lowercase(),
    );
    quote!(::core::option::Option::Some(#msg))
}

/// A struct passed by value is rebuilt from its fields in the host fallback and in the kernel entry, and each copy
/// is dropped: a `Drop` of the struct's own would run once per copy (freeing or counting twice). This impl conflicts
/// with the blanket one exactly when the struct implements `Drop`, so that is a compile error (E0119) at the
/// struct's name, naming the rule (pin-project's `MustNotImplDrop`).
fn no_drop(item: &syn::DeriveInput) -> TokenStream {
    let name = &item.ident;
    let (impl_generics, ty_generics, where_clause) = item.generics.split_for_impl();
    quote_spanned! {name.span()=>
        #[allow(non_camel_case_types, dead_code)]
        trait offload_Mapper_structs_must_not_implement_Drop__they_are_rebuilt_per_copy {}
        #[allow(drop_bounds)]
        impl<T: ::core::ops::Drop + ?::core::marker::Sized>
            offload_Mapper_structs_must_not_implement_Drop__they_are_rebuilt_per_copy for T {}
        impl #impl_generics offload_Mapper_structs_must_not_implement_Drop__they_are_rebuilt_per_copy
            for #name #ty_generics #where_clause {}
    }
}

/// The `Mapper` impl: the struct as raw parts and back, and its map list.
fn mapper_impl(
    item: &syn::DeriveInput,
    parts: &FieldParts,
    parallel_error: TokenStream,
) -> TokenStream {
    let name = &item.ident;
    let (impl_generics, ty_generics, where_clause) = item.generics.split_for_impl();
    let p = quote!(::offload::__private);
    let FieldParts {
        raw_tys,
        raw_parts,
        rebuilt,
        maps,
        slots,
        ..
    } = parts;
    quote! {
        // SAFETY: generated from the fields (offload_frontend::mapper::fields): each reference field's raw pointer
        // is derived from the field itself and rebuilt as the same kind of reference, its entries are those
        // of a parameter of its type with `FROM` only on `&mut` fields, values are checked `Firstprivate`, and
        // the parallel error names a `&mut` field if there is one.
        unsafe impl #impl_generics #p::Mapper for #name #ty_generics #where_clause {
            type Raw = (#(#raw_tys,)*);
            const PARALLEL_ERROR: ::core::option::Option<&'static str> = #parallel_error;
            const SLOTS: usize = #slots;

            unsafe fn raw(this: *mut Self) -> Self::Raw {
                // SAFETY: `this` points to a live struct (the caller's contract).
                unsafe { (#(#raw_parts,)*) }
            }

            unsafe fn from_raw(raw: Self::Raw) -> Self {
                // SAFETY: the pointers came from `raw` of a struct whose borrows outlive the result.
                unsafe { #name { #(#rebuilt),* } }
            }

            #[allow(unused_variables)]
            unsafe fn maps(
                raw: &Self::Raw,
                clause: u64,
                kernel: bool,
                out: &mut ::std::vec::Vec<#p::MapArg>,
            ) {
                #(#maps)*
            }
        }
    }
}

/// The struct as a map source and target of the data constructs (`target_data!` and the others), as a whole.
fn source_impls(item: &syn::DeriveInput) -> TokenStream {
    let name = &item.ident;
    let (impl_generics, ty_generics, where_clause) = item.generics.split_for_impl();
    let p = quote!(::offload::__private);
    quote! {
        impl #impl_generics #p::MapSource for #name #ty_generics #where_clause {
            type Target = Self;
            fn map_ref(&self) -> &Self {
                self
            }
        }

        impl #impl_generics #p::MapSourceMut for #name #ty_generics #where_clause {
            fn map_mut(&mut self) -> &mut Self {
                self
            }
        }

        // SAFETY: a data construct's entries are the slice and object fields' data, which the fields borrow:
        // outside the struct, and put while it lives.
        unsafe impl #impl_generics ::offload::ScopedSource for #name #ty_generics #where_clause {}

        impl #impl_generics #p::MapTarget for #name #ty_generics #where_clause {
            unsafe fn map_args(
                this: *const Self,
                section: #p::Section,
                map_type: u64,
                out: &mut ::std::vec::Vec<#p::MapArg>,
            ) {
                // SAFETY: forwarded (the caller's contract).
                unsafe { #p::mapper_data_maps(this, section, map_type, out) }
            }
        }
    }
}
