//! Which attributes a device crate keeps, blanks or rewrites (`cfg` for the device, core derives, lint levels,
//! `repr`), and what an item's attributes say it is (a region, `#[declare_target]`, a mapper struct).

use super::*;

/// The arguments of an item's `#[target(..)]` (none for `#[target]`).
pub(super) fn target_args(attrs: &[Attribute]) -> proc_macro2::TokenStream {
    attrs
        .iter()
        .find(|a| is_attr(a, "target"))
        .and_then(|a| match &a.meta {
            syn::Meta::List(l) => Some(l.tokens.clone()),
            _ => None,
        })
        .unwrap_or_default()
}

/// Whether an attribute is `#[NAME]` or `#[offload::NAME]` (any path ending in NAME).
pub(crate) fn is_attr(a: &Attribute, name: &str) -> bool {
    a.path().segments.last().is_some_and(|s| s.ident == name)
}

pub(crate) fn has_attr(attrs: &[Attribute], name: &str) -> bool {
    attrs.iter().any(|a| is_attr(a, name))
}

pub(super) const CORE_DERIVES: &[&str] = &[
    "Clone",
    "Copy",
    "Debug",
    "Default",
    "PartialEq",
    "Eq",
    "PartialOrd",
    "Ord",
    "Hash",
];

pub(super) const KEPT_ATTRS: &[&str] = &[
    "repr",
    "allow",
    "warn",
    "deny",
    "forbid",
    "expect",
    "inline",
    "doc",
    "must_use",
    "cold",
    "track_caller",
    "macro_export",
    "macro_use",
];

/// The attributes of an item the device crate keeps because it is `#[declare_target]`.
pub(super) fn declare_target_attrs(item: &Item) -> Option<&[Attribute]> {
    let attrs = item_attrs(item);
    has_attr(attrs, "declare_target").then_some(attrs)
}

/// An item's attributes (none for the kinds the device crate never keeps).
pub(super) fn item_attrs(item: &Item) -> &[Attribute] {
    match item {
        Item::Fn(i) => &i.attrs,
        Item::Const(i) => &i.attrs,
        Item::Static(i) => &i.attrs,
        Item::Struct(i) => &i.attrs,
        Item::Enum(i) => &i.attrs,
        Item::Union(i) => &i.attrs,
        Item::Impl(i) => &i.attrs,
        Item::Type(i) => &i.attrs,
        Item::Trait(i) => &i.attrs,
        Item::Macro(i) => &i.attrs,
        _ => &[],
    }
}

/// Copies an item and blanks the attributes a device crate must not see.
pub(super) fn keep_item(m: &mut Mirror, item: &impl Spanned, attrs: &[Attribute]) {
    let r = m.range(item.span());
    m.keep(r);
    blank_attrs(m, attrs);
}

/// Keeps an item the device crate needs (a `#[declare_target]` one, or one region code reaches), and for a mapper
/// struct what its derive means on a device: its `#[map(..)]` field attributes blanked; for one that owns its arrays,
/// each `Vec<T>` field's type written `::offload::DeviceVec<T>` (the kernel entry rebuilds it from the field's
/// device copy), the derives a `DeviceVec` cannot have dropped (`Clone`, `Copy`, `Default`: a device cannot
/// allocate), and the marker `offload::__rt::OwnedMapper` implemented, which the kernel entries check.
pub(super) fn keep_with_mapper(m: &mut Mirror, item: &Item, attrs: &[Attribute]) {
    let mapper = match item {
        Item::Struct(st) if offload_frontend::mapper::derives_mapper(&st.attrs) => {
            let input: syn::DeriveInput = st.clone().into();
            offload_frontend::mapper::fields(&input)
                .ok()
                .map(|f| (st, f))
        }
        _ => None,
    };
    let Some((st, fields)) = mapper else {
        keep_item(m, item, attrs);
        blank_field_maps(m, item);
        return;
    };
    let r = m.range(item.span());
    if !offload_frontend::mapper::owns(&fields) {
        keep_item(m, item, attrs);
        blank_field_maps(m, item);
        m.insert(r.end, mapper_slots(st, &fields));
        return;
    }
    m.keep(r.clone());
    blank_attrs_dropping(m, attrs, &["Clone", "Copy", "Default"]);
    blank_field_maps(m, item);
    for (f, field) in fields.iter().zip(&st.fields) {
        if let (offload_frontend::mapper::FieldKind::Vec { .. }, syn::Type::Path(tp)) =
            (&f.kind, &field.ty)
        {
            // The path up to its generic arguments (`Vec`, `std::vec::Vec`), which stay as written.
            let first = tp.path.segments.first().expect("a path");
            let last = tp.path.segments.last().expect("a path");
            let start = tp.path.leading_colon.map_or_else(
                || m.range(first.ident.span()).start,
                |c| m.range(c.span()).start,
            );
            let end = m.range(last.ident.span()).end;
            m.replace(start..end, "::offload::DeviceVec");
        }
    }
    m.insert(
        r.end,
        format!(
            " impl ::offload::__rt::OwnedMapper for {} {{}}{}",
            st.ident,
            mapper_slots(st, &fields)
        ),
    );
}

/// `impl MapperSlots for S`: the struct's kernel arguments, which the kernel entries rebuilding it check.
fn mapper_slots(st: &syn::ItemStruct, fields: &[offload_frontend::mapper::Field]) -> String {
    let slots: usize = fields
        .iter()
        .map(offload_frontend::mapper::Field::kernel_args)
        .sum();
    let name = &st.ident;
    let (impl_generics, ty_generics, where_clause) = st.generics.split_for_impl();
    let slots = proc_macro2::Literal::usize_unsuffixed(slots);
    // The struct's own `cfg`s: the impl exists where the struct does.
    let cfgs = st.attrs.iter().filter(|a| a.path().is_ident("cfg"));
    // On the struct's last line: the mirror keeps every item on its original line.
    format!(
        " {}",
        quote::quote!(
            #(#cfgs)*
            impl #impl_generics ::offload::__rt::MapperSlots for #name #ty_generics #where_clause {
                const SLOTS: usize = #slots;
            }
        )
    )
}

/// A mapper struct's `#[map(..)]` field attributes belong to its derive, which the device crate does not run.
pub(super) fn blank_field_maps(m: &mut Mirror, item: &Item) {
    let Item::Struct(st) = item else { return };
    if !offload_frontend::mapper::derives_mapper(&st.attrs) {
        return;
    }
    for a in st.fields.iter().flat_map(|f| &f.attrs) {
        if a.path().is_ident("map") {
            let r = m.range(a.span());
            m.blank(r);
        }
    }
}

/// The package's mapper structs (`#[derive(Mapper)]`), by name, in every module; one whose fields are in error is
/// left out (the derive reports it in the host build). A kernel entry finds a struct by its name and passes its
/// fields in the order read here, so a name two of them share, or a field under `#[cfg]` (which the host's derive
/// may not see), is `None`: an entry that needs it is a build error, never arguments that disagree with the host's.
pub(super) fn collect_mappers(items: &[Item], out: &mut kernel::Mappers) {
    for item in items {
        match item {
            Item::Struct(s) if offload_frontend::mapper::derives_mapper(&s.attrs) => {
                let input: syn::DeriveInput = s.clone().into();
                if let Ok(fields) = offload_frontend::mapper::fields(&input) {
                    let cfg = s.fields.iter().any(|f| {
                        f.attrs
                            .iter()
                            .any(|a| a.path().is_ident("cfg") || a.path().is_ident("cfg_attr"))
                    });
                    let name = s.ident.to_string();
                    let usable = (!cfg && !out.contains_key(&name)).then_some(fields);
                    out.insert(name, usable);
                }
            }
            Item::Mod(m) => {
                if let Some((_, inner)) = &m.content {
                    collect_mappers(inner, out);
                }
            }
            _ => {}
        }
    }
}

pub(super) fn blank_attrs(m: &mut Mirror, attrs: &[Attribute]) {
    blank_attrs_dropping(m, attrs, &[]);
}

/// [`blank_attrs`], dropping the core derives `dropped` too.
fn blank_attrs_dropping(m: &mut Mirror, attrs: &[Attribute], dropped: &[&str]) {
    for a in attrs {
        let r = m.range(a.span());
        if a.path().is_ident("derive") {
            // Keep the derives of core traits only.
            let mut core = Vec::new();
            let mut other = false;
            let _ = a.parse_nested_meta(|meta| {
                match meta.path.segments.last().map(|s| s.ident.to_string()) {
                    Some(n)
                        if CORE_DERIVES.contains(&n.as_str()) && !dropped.contains(&n.as_str()) =>
                    {
                        core.push(n)
                    }
                    // A dropped or non-core derive: the attribute is rewritten without it.
                    _ => other = true,
                }
                Ok(())
            });
            if other {
                m.replace(
                    r,
                    if core.is_empty() {
                        String::new()
                    } else {
                        format!("#[derive({})]", core.join(", "))
                    },
                );
            }
        } else if a.path().is_ident("cfg") {
            m.replace(r, device_cfg(a).to_string());
        } else if !a
            .path()
            .get_ident()
            .is_some_and(|i| KEPT_ATTRS.contains(&i.to_string().as_str()))
        {
            m.blank(r);
        }
    }
}

/// A `#[cfg(..)]` as a device crate keeps it: the device's rustc decides it with the package's features (the device
/// crates declare and enable them) and the device's own target (`target_arch = "nvptx64"` selects per-device code),
/// and `test` is set, so regions and items of unit tests reach the device whichever target the one build serves.
pub(super) fn device_cfg(a: &Attribute) -> proc_macro2::TokenStream {
    fn set_test(ts: proc_macro2::TokenStream) -> proc_macro2::TokenStream {
        ts.into_iter()
            .flat_map(|tt| match tt {
                proc_macro2::TokenTree::Ident(i) if i == "test" => {
                    quote::quote_spanned!(i.span()=> all())
                        .into_iter()
                        .collect::<Vec<_>>()
                }
                proc_macro2::TokenTree::Group(g) => {
                    let mut n = proc_macro2::Group::new(g.delimiter(), set_test(g.stream()));
                    n.set_span(g.span());
                    vec![proc_macro2::TokenTree::Group(n)]
                }
                other => vec![other],
            })
            .collect()
    }
    match &a.meta {
        syn::Meta::List(l) => {
            let inner = set_test(l.tokens.clone());
            quote::quote!(#[cfg(#inner)])
        }
        _ => a.to_token_stream(),
    }
}
