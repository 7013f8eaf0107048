//! Structured data (OpenMP's `declare mapper`): a struct with named fields that holds slices, marked
//! `#[derive(offload::Mapper)]`, crossing into a region as its fields. This is the one reading of such a struct: the
//! derive (its trait impl, which builds the host's map list) and the outliner (the kernel entry, which rebuilds the
//! struct on the device) both take the fields from [`fields`], in declaration order, so they cannot disagree on the
//! kernel arguments.
//!
//! Per field, in order: a slice (`&'a [T]`, `&'a mut [T]`) is mapped and passes two kernel arguments (device
//! address, length); a single object (`&'a T`, `&'a mut T`) is mapped and passes one (device address); any other
//! field is a firstprivate value and passes one (its bits, or a private copy's address), as a by-value parameter
//! does. `&[T]` and `&T` map `to`, `&mut` ones `tofrom`; `#[map(to|from|tofrom|alloc)]` on a field overrides that
//! (`from`, `tofrom` and `alloc` need `&mut`: the region writes the data).
//!
//! A struct may own its arrays instead (C's `struct { double *concs; .. }` that `malloc`s them): `Vec<T>` fields,
//! no lifetime parameter, passed to a region as `&S` or `&mut S`. Each `Vec` is mapped as a slice of its elements,
//! `to` through `&S` and `tofrom` through `&mut S` (or its `#[map(..)]`, as the reference allows), and is an
//! `offload::DeviceVec<T>` on the device, a slice of the device copy (`Deref<Target = [T]>`).

use crate::clause::MapType;
use syn::spanned::Spanned;
use syn::{Fields, Ident, Type};

/// A slice's kernel arguments, a parameter's or a field's: its data's address, then its length.
pub const SLICE_SLOTS: usize = 2;

/// How a field crosses into a region.
#[derive(Clone, Debug)]
pub enum FieldKind {
    /// `&'a [T]` / `&'a mut [T]`: two kernel arguments (device address, length).
    Slice {
        /// The element type `T`.
        elem: Type,
        /// `&mut [T]`.
        mutable: bool,
    },
    /// `&'a T` / `&'a mut T`: one kernel argument (device address).
    Ref {
        /// The object's type `T`.
        ty: Type,
        /// `&mut T`.
        mutable: bool,
    },
    /// `Vec<T>`, owned: two kernel arguments (device address, length), written through `&mut S` only.
    Vec {
        /// The element type `T`.
        elem: Type,
    },
    /// Anything else: a firstprivate value, one kernel argument.
    Value,
}

/// One field of a mapper struct.
#[derive(Clone, Debug)]
pub struct Field {
    /// The field's name.
    pub ident: Ident,
    /// The field's type, as written.
    pub ty: Type,
    /// How it crosses into a region.
    pub kind: FieldKind,
    /// The map type of a slice or object field (`None` for values).
    pub map: Option<MapType>,
}

impl Field {
    /// How many kernel arguments the field passes: as a parameter of its kind does (an owned `Vec` as a slice), so
    /// the struct's slots are its fields' parameters' slots (`crate::plan` reads [`SLICE_SLOTS`] from here).
    pub fn kernel_args(&self) -> usize {
        match self.kind {
            FieldKind::Slice { .. } | FieldKind::Vec { .. } => SLICE_SLOTS,
            FieldKind::Ref { .. } | FieldKind::Value => 1,
        }
    }

    /// Whether the field is a `&mut` (a parallel region cannot share it among its threads).
    pub fn mutable(&self) -> bool {
        matches!(
            self.kind,
            FieldKind::Slice { mutable: true, .. } | FieldKind::Ref { mutable: true, .. }
        )
    }
}

/// Whether a mapper struct with these fields owns its arrays (has `Vec<T>` fields): it is then passed as `&S` or
/// `&mut S`, never by value.
pub fn owns(fields: &[Field]) -> bool {
    fields
        .iter()
        .any(|f| matches!(f.kind, FieldKind::Vec { .. }))
}

/// Whether `attrs` derive `Mapper` (by any path ending in it: `Mapper`, `offload::Mapper`).
pub fn derives_mapper(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        let mut found = false;
        if a.path().is_ident("derive") {
            let _ = a.parse_nested_meta(|meta| {
                found |= meta
                    .path
                    .segments
                    .last()
                    .is_some_and(|s| s.ident == "Mapper");
                Ok(())
            });
        }
        found
    })
}

/// The fields of a mapper struct, in declaration order, or every error in it.
pub fn fields(item: &syn::DeriveInput) -> Result<Vec<Field>, syn::Error> {
    let mut errors: Vec<syn::Error> = Vec::new();
    let named = named_fields(item, &mut errors)?;
    let mut out = Vec::new();
    for f in &named.named {
        let ident = f.ident.clone().expect("named field");
        let ty = f.ty.clone();
        let Some(kind) = field_kind(&ident, &ty, &mut errors) else {
            continue;
        };
        let map = field_map_type(f, &ident, &kind, &mut errors);
        out.push(Field {
            ident,
            ty,
            kind,
            map,
        });
    }
    if owns(&out) {
        for f in out
            .iter()
            .filter(|f| matches!(f.kind, FieldKind::Slice { .. } | FieldKind::Ref { .. }))
        {
            errors.push(syn::Error::new(
                f.ty.span(),
                format!(
                    "`{}` owns arrays (`Vec` fields), so its other fields are values; hold `{}` as a `Vec` too, or \
                     pass it to the region as a parameter of its own",
                    item.ident, f.ident
                ),
            ));
        }
        if let Some(l) = item.generics.lifetimes().next() {
            errors.push(syn::Error::new(
                l.span(),
                format!(
                    "`{}` owns arrays (`Vec` fields) and so is passed to a region as `&{0}` or `&mut {0}`; a mapper \
                     struct either owns its arrays or borrows them (slice fields with a lifetime), not both",
                    item.ident
                ),
            ));
        }
    }
    match errors.into_iter().reduce(|mut a, b| {
        a.combine(b);
        a
    }) {
        Some(e) => Err(e),
        None => Ok(out),
    }
}

/// The struct's named fields; a struct of another shape is an error, and generics other than lifetimes are pushed
/// to `errors`.
fn named_fields<'i>(
    item: &'i syn::DeriveInput,
    errors: &mut Vec<syn::Error>,
) -> Result<&'i syn::FieldsNamed, syn::Error> {
    let data = match &item.data {
        syn::Data::Struct(s) => s,
        _ => {
            return Err(syn::Error::new(
                item.ident.span(),
                "`#[derive(Mapper)]` goes on a struct with named fields (`struct Grid<'a> { data: &'a mut [f64], n: \
                 usize }`)",
            ))
        }
    };
    if let Some(p) = item.generics.type_params().next() {
        errors.push(syn::Error::new(
            p.span(),
            "a mapper struct takes lifetime parameters only; name the element types (`&'a [f64]`)",
        ));
    }
    if let Some(p) = item.generics.const_params().next() {
        errors.push(syn::Error::new(
            p.span(),
            "a mapper struct takes lifetime parameters only",
        ));
    }
    match &data.fields {
        Fields::Named(n) => Ok(n),
        other => Err(syn::Error::new(
            other.span(),
            "`#[derive(Mapper)]` needs named fields: the region reads them by name",
        )),
    }
}

/// How field `ident: ty` crosses, by its type; `None` (and an error) for a raw pointer.
fn field_kind(ident: &Ident, ty: &Type, errors: &mut Vec<syn::Error>) -> Option<FieldKind> {
    Some(match ty {
        Type::Reference(r) => {
            let mutable = r.mutability.is_some();
            match &*r.elem {
                Type::Slice(s) => FieldKind::Slice {
                    elem: (*s.elem).clone(),
                    mutable,
                },
                elem => FieldKind::Ref {
                    ty: elem.clone(),
                    mutable,
                },
            }
        }
        Type::Path(p) if p.qself.is_none() && vec_elem(p).is_some() => FieldKind::Vec {
            elem: vec_elem(p).expect("checked").clone(),
        },
        Type::Ptr(_) => {
            errors.push(syn::Error::new(
                ty.span(),
                format!(
                    "field `{ident}` is a raw pointer, which means nothing on a device; hold the data as a slice \
                     (`&'a mut [T]`, the port of C's `T *p` with its length) and the mapper maps it"
                ),
            ));
            return None;
        }
        _ => FieldKind::Value,
    })
}

/// `T` when `p` is `Vec<T>` (or a path ending in it: `std::vec::Vec<T>`).
fn vec_elem(p: &syn::TypePath) -> Option<&Type> {
    let last = p.path.segments.last()?;
    let syn::PathArguments::AngleBracketed(a) = &last.arguments else {
        return None;
    };
    match (last.ident == "Vec", a.args.len(), a.args.first()) {
        (true, 1, Some(syn::GenericArgument::Type(t))) => Some(t),
        _ => None,
    }
}

/// A slice or object field's map type: `to` for `&`, `tofrom` for `&mut`, or its `#[map(..)]`; `None` for a value.
/// A `Vec` field's is `tofrom` or its `#[map(..)]`, combined with the `&` (`to`) or `&mut` it is reached through.
fn field_map_type(
    f: &syn::Field,
    ident: &Ident,
    kind: &FieldKind,
    errors: &mut Vec<syn::Error>,
) -> Option<MapType> {
    let mutable = matches!(
        kind,
        FieldKind::Slice { mutable: true, .. } | FieldKind::Ref { mutable: true, .. }
    );
    // A `Vec` is as mutable as the reference the struct is passed by: its `#[map(..)]` may say anything.
    let mutable = mutable || matches!(kind, FieldKind::Vec { .. });
    let mut map = match kind {
        FieldKind::Value => None,
        _ if mutable => Some(MapType::ToFrom),
        _ => Some(MapType::To),
    };
    for a in f.attrs.iter().filter(|a| a.path().is_ident("map")) {
        match field_map(a) {
            Err(e) => errors.push(e),
            Ok(_) if map.is_none() => errors.push(syn::Error::new(
                a.span(),
                format!(
                    "field `{ident}` is a value (firstprivate: the region gets a copy), so it takes no map type; \
                     `#[map(..)]` goes on slice and reference fields"
                ),
            )),
            Ok((t, span)) if t != MapType::To && !mutable => errors.push(syn::Error::new(
                span,
                format!(
                    "field `{ident}` is a shared reference, which the region cannot write, so it cannot be mapped \
                     `{}`; map it `to`, or declare it `&'a mut` to receive device values",
                    t.name()
                ),
            )),
            Ok((t, _)) => map = Some(t),
        }
    }
    map
}

/// `#[map(from)]`: the map type and its span.
fn field_map(a: &syn::Attribute) -> Result<(MapType, proc_macro2::Span), syn::Error> {
    let word: Ident = a.parse_args().map_err(|e| {
        syn::Error::new(
            e.span(),
            "write a field's map type as `#[map(to)]`, `#[map(from)]`, `#[map(tofrom)]` or `#[map(alloc)]`",
        )
    })?;
    let t = match word.to_string().as_str() {
        "to" => MapType::To,
        "from" => MapType::From,
        "tofrom" => MapType::ToFrom,
        "alloc" => MapType::Alloc,
        other => {
            return Err(syn::Error::new(
                word.span(),
                format!(
                    "`{other}` is not a field's map type; a mapper field is mapped `to`, `from`, `tofrom` or `alloc` \
                     (`release` and `delete` belong to `target_exit_data!`)"
                ),
            ))
        }
    };
    Ok((t, word.span()))
}

/// Whether a region parameter's type is a mapper struct, by its form: a path with a lifetime argument
/// (`Grid<'_>`, `Grid<'a>`), which no by-value (`Firstprivate`) type has. `Some(None)` by value, `Some(Some(mutable))`
/// behind a reference (`&mut Grid<'_>`).
pub fn param_form(ty: &Type) -> Option<Option<bool>> {
    fn has_lifetime_arg(ty: &Type) -> bool {
        match ty {
            Type::Path(p) if p.qself.is_none() => p.path.segments.last().is_some_and(|s| {
                matches!(&s.arguments, syn::PathArguments::AngleBracketed(a)
                    if a.args.iter().any(|g| matches!(g, syn::GenericArgument::Lifetime(_))))
            }),
            Type::Group(g) => has_lifetime_arg(&g.elem),
            Type::Paren(p) => has_lifetime_arg(&p.elem),
            _ => false,
        }
    }
    match ty {
        Type::Reference(r) if has_lifetime_arg(&r.elem) => Some(Some(r.mutability.is_some())),
        t if has_lifetime_arg(t) => Some(None),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use offload_model::abi::map_type::{mapper_field, ALWAYS, DELETE, FROM, TO};

    #[test]
    fn fields_in_declaration_order_with_their_map_types_and_arguments() {
        let item: syn::DeriveInput = syn::parse_quote! {
            struct Grid<'a> {
                u: &'a mut [f64],
                #[map(from)]
                r: &'a mut [f64],
                coef: &'a [f64],
                count: &'a mut u64,
                n: usize,
            }
        };
        let f = fields(&item).unwrap();
        let names: Vec<String> = f.iter().map(|f| f.ident.to_string()).collect();
        assert_eq!(names, ["u", "r", "coef", "count", "n"]);
        let maps: Vec<Option<MapType>> = f.iter().map(|f| f.map).collect();
        assert_eq!(
            maps,
            [
                Some(MapType::ToFrom),
                Some(MapType::From),
                Some(MapType::To),
                Some(MapType::ToFrom),
                None
            ]
        );
        assert_eq!(
            f.iter().map(Field::kernel_args).sum::<usize>(),
            2 + 2 + 2 + 1 + 1
        );
        assert!(derives_mapper(&[
            syn::parse_quote!(#[derive(Clone, offload::Mapper)])
        ]));
    }

    #[test]
    fn a_struct_owning_vecs_maps_them_as_slices_and_borrows_nothing() {
        let item: syn::DeriveInput = syn::parse_quote! {
            struct Sim {
                concs: Vec<f64>,
                #[map(to)]
                mats: std::vec::Vec<i32>,
                lookups: usize,
            }
        };
        let f = fields(&item).unwrap();
        assert!(owns(&f));
        assert!(matches!(f[1].kind, FieldKind::Vec { .. }));
        assert_eq!(
            f.iter().map(|f| f.map).collect::<Vec<_>>(),
            [Some(MapType::ToFrom), Some(MapType::To), None]
        );
        assert_eq!(f.iter().map(Field::kernel_args).sum::<usize>(), 2 + 2 + 1);
        assert!(!f.iter().any(Field::mutable), "only `&mut Sim` writes them");

        let both: syn::DeriveInput = syn::parse_quote! {
            struct Sim<'a> { concs: Vec<f64>, x: &'a [f64] }
        };
        let e = fields(&both).unwrap_err().to_string();
        assert!(e.contains("owns arrays"), "{e}");
    }

    #[test]
    fn a_parameter_with_a_lifetime_argument_is_a_mapper() {
        assert_eq!(param_form(&syn::parse_quote!(Grid<'_>)), Some(None));
        assert_eq!(
            param_form(&syn::parse_quote!(&mut m::Grid<'a>)),
            Some(Some(true))
        );
        assert_eq!(param_form(&syn::parse_quote!(&'a [f64])), None);
        assert_eq!(param_form(&syn::parse_quote!(Particle)), None);
    }

    #[test]
    fn a_clause_combines_with_each_fields_map_type() {
        assert_eq!(mapper_field(TO | FROM, FROM), FROM);
        assert_eq!(
            mapper_field(TO, FROM),
            0,
            "`to` of a `from` field is `alloc`"
        );
        assert_eq!(mapper_field(FROM | ALWAYS, TO | FROM), FROM | ALWAYS);
        assert_eq!(mapper_field(DELETE, TO | FROM), DELETE);
    }
}
