//! The parse phase: the clauses and the signature, read into a [`Region`]. Errors here are about what was written
//! (a clause given twice, a map naming no parameter, a type that cannot cross); the rules that relate the parts are
//! [`crate::validate`]'s.

use super::{Param, ParamKind, Region};
use crate::clause::{parse_clauses, set_once, Clause, Construct, Map, MapItem, MapType, Word};
use crate::errors::Errors;
use proc_macro2::{Span, TokenStream};
use quote::ToTokens;
use syn::parse::Parser;
use syn::spanned::Spanned;
use syn::{FnArg, Ident, ItemFn, Pat, ReturnType, Type};

/// The construct words and clause keywords as written, for the validation's messages.
pub(crate) struct Words {
    pub words: Vec<(Word, Span)>,
    pub collapse: Option<Ident>,
    pub schedule: Option<Ident>,
    pub private: Option<Ident>,
    /// `thread_limit(..)` or `num_threads(..)` as written (the parse supplies `teams_distribute`'s 1).
    pub thread_limit: Option<syn::Expr>,
}

/// The region `args` and `func` describe, as far as it could be read; `imp` is the `impl` block a method region is
/// in.
pub(crate) fn parse(
    args: TokenStream,
    func: &ItemFn,
    imp: Option<super::InImpl<'_>>,
    errors: &mut Errors,
) -> (Region, Words) {
    let self_ty = imp.map(|i| i.self_ty);
    let impl_params = imp.map_or_else(Vec::new, |i| super::generic::params(i.generics));
    let clauses = match (|input: syn::parse::ParseStream| parse_clauses(input, Construct::Target))
        .parse2(args)
    {
        Ok(c) => c,
        Err(e) => {
            errors.push(e);
            Vec::new()
        }
    };
    let mut params: Vec<Param> = Vec::new();
    for arg in &func.sig.inputs {
        if let Some(p) = classify_param(arg, self_ty, errors) {
            params.push(p);
        }
    }
    let ret = match &func.sig.output {
        ReturnType::Default => None,
        ReturnType::Type(_, ty) => match &**ty {
            Type::Tuple(t) if t.elems.is_empty() => None,
            // Several reduction variables come back as a tuple; checked once the clauses are known.
            Type::Tuple(_) => Some((**ty).clone()),
            ty => {
                if let Some(msg) = unsupported_type(ty) {
                    errors.push(syn::Error::new(
                        ty.span(),
                        format!("a region cannot return {msg}"),
                    ));
                }
                Some(ty.clone())
            }
        },
    };
    let mut region = Region {
        ident: func.sig.ident.clone(),
        params,
        ret,
        device: None,
        if_cond: None,
        construct: offload_model::abi::Construct::Serial,
        num_teams: None,
        thread_limit: None,
        is_unsafe: func.sig.unsafety.is_some(),
        reductions: Vec::new(),
        collapse: 1,
        schedule: None,
        private: Vec::new(),
        impl_params: impl_params.len(),
        generic_params: impl_params
            .into_iter()
            .chain(super::generic::params(&func.sig.generics))
            .collect(),
        instances: Vec::new(),
        reduce_tys: None,
        self_ty: self_ty.cloned(),
    };
    let words = apply_clauses(&mut region, clauses, errors);
    (region, words)
}

/// Records each clause on the region, then what its construct words make it; the words and keywords as written, for
/// the validation's messages.
fn apply_clauses(region: &mut Region, clauses: Vec<Clause>, errors: &mut Errors) -> Words {
    let mut words = Words {
        words: Vec::new(),
        collapse: None,
        schedule: None,
        private: None,
        thread_limit: None,
    };
    for clause in clauses {
        apply_clause(region, clause, &mut words, errors);
    }
    // As written: the construct below may supply one.
    words.thread_limit = region.thread_limit.clone();
    set_construct(region, &words.words);
    words
}

/// Records one clause on the region (a construct word or keyword on `words`); a clause given twice is an error.
fn apply_clause(region: &mut Region, clause: Clause, words: &mut Words, errors: &mut Errors) {
    match clause {
        Clause::Map { map, items } => {
            for item in items {
                apply_map(region, &map, item, errors);
            }
        }
        Clause::Device(kw, e) => set_once(&mut region.device, kw, e, errors),
        Clause::If(kw, e) => set_once(&mut region.if_cond, kw, e, errors),
        Clause::NumTeams(kw, e) => set_once(&mut region.num_teams, kw, e, errors),
        Clause::ThreadLimit(kw, e) => set_once(&mut region.thread_limit, kw, e, errors),
        Clause::Construct(word, span) => words.words.push((word, span)),
        Clause::Schedule(kw, sched) => {
            if words.schedule.is_some() {
                errors.push(syn::Error::new(kw.span(), "`schedule` is given twice"));
            }
            region.schedule = Some(sched);
            words.schedule = Some(kw);
        }
        Clause::Scope(..) => {
            unreachable!("parse_clause yields it for target_enter_data! only")
        }
        Clause::Instantiate(kw, list) => {
            if !region.instances.is_empty() {
                errors.push(syn::Error::new(kw.span(), "`instantiate` is given twice"));
            }
            region.instances.extend(list);
        }
        Clause::Private(kw, vars) => {
            region.private.extend(vars);
            words.private = Some(kw);
        }
        Clause::Collapse(kw, n) => {
            if !(1..=offload_model::abi::MAX_COLLAPSE).contains(&n) {
                errors.push(syn::Error::new(
                    kw.span(),
                    format!(
                        "`collapse(n)` takes 1 to {} loops",
                        offload_model::abi::MAX_COLLAPSE
                    ),
                ));
            } else {
                region.collapse = n;
                words.collapse = Some(kw);
            }
        }
        Clause::Reduction(op, span, vars) => add_reductions(region, op, span, vars, errors),
    }
}

/// `reduction(op: vars)`: each variable once, at most [`offload_model::reduce::MAX_VARS`] of them.
fn add_reductions(
    region: &mut Region,
    op: crate::clause::ReduceOp,
    span: Span,
    vars: Vec<Ident>,
    errors: &mut Errors,
) {
    for v in vars {
        if region.reductions.iter().any(|(_, w)| *w == v) {
            errors.push(syn::Error::new(v.span(), format!("`{v}` is reduced twice")));
        } else {
            region.reductions.push((op.clone(), v));
        }
    }
    if region.reductions.len() > offload_model::reduce::MAX_VARS {
        errors.push(syn::Error::new(
            span,
            format!(
                "at most {} reduction variables per region",
                offload_model::reduce::MAX_VARS
            ),
        ));
    }
}

/// What the region's teams and threads do, from its construct words (the validation checks their combination).
fn set_construct(region: &mut Region, words: &[(Word, Span)]) {
    use offload_model::abi::Construct;
    let has = |w: Word| words.iter().any(|(k, _)| *k == w);
    let loops: Vec<Word> = words
        .iter()
        .map(|(w, _)| *w)
        .filter(|w| w.is_loop())
        .collect();
    region.construct = match loops.first() {
        // OpenMP `target parallel for`: one team.
        Some(Word::ParallelFor | Word::ParallelForSimd) => Construct::ParallelFor,
        // OpenMP `target teams distribute`: the iterations go to the teams, one thread each (unless the
        // validation finds a `thread_limit` written).
        Some(Word::TeamsDistribute) => {
            if region.thread_limit.is_none() {
                region.thread_limit = Some(syn::parse_quote!(1u32));
            }
            Construct::TeamsDistribute
        }
        Some(_) => Construct::TeamsDistributeParallelFor,
        None if has(Word::Teams) && has(Word::Parallel) => Construct::Spmd,
        None => Construct::Serial,
    };
}

fn apply_map(region: &mut Region, map: &Map, item: MapItem, errors: &mut Errors) {
    let span = item.ident.span();
    let Some(param) = region.params.iter_mut().find(|p| p.ident == item.ident) else {
        let names: Vec<String> = region
            .params
            .iter()
            .map(|p| format!("`{}`", p.ident))
            .collect();
        errors.push(syn::Error::new(
            span,
            format!(
                "`{}` is not a parameter of this region; map clauses name parameters ({})",
                item.ident,
                if names.is_empty() {
                    "this region has none".to_string()
                } else {
                    names.join(", ")
                }
            ),
        ));
        return;
    };
    let (mutable, what) = match &param.kind {
        ParamKind::Slice { mutable, .. } => (*mutable, if *mutable { "&mut [T]" } else { "&[T]" }),
        ParamKind::Ref { mutable, .. } => (*mutable, if *mutable { "&mut T" } else { "&T" }),
        // A clause combines with each field's own map type (`to` leaves a `from` field uncopied both ways).
        ParamKind::Mapper { .. } => (true, "a mapper struct"),
        ParamKind::DevicePtr | ParamKind::DeviceBuffer { .. } => {
            errors.push(syn::Error::new(
                span,
                format!(
                    "`{}` is device memory, passed to the region as is; it takes no map clause",
                    param.ident
                ),
            ));
            return;
        }
        ParamKind::Value => {
            errors.push(syn::Error::new(
                span,
                format!(
                    "`{id}` is passed by value (firstprivate: the region gets its own copy), so it cannot be \
                     mapped `{ty}`; to get a value back, take `{id}: &mut {t}` or return it from the region",
                    id = param.ident,
                    ty = map.map_type.name(),
                    t = param.ty.to_token_stream(),
                ),
            ));
            return;
        }
    };
    if let Some(Map {
        clause_span: Some(_),
        ..
    }) = &param.map
    {
        errors.push(syn::Error::new(
            span,
            format!(
                "`{}` is mapped twice; a parameter takes one map clause",
                param.ident
            ),
        ));
        return;
    }
    if let (Some(sec), ParamKind::Ref { .. } | ParamKind::Mapper { .. }) =
        (&item.section, &param.kind)
    {
        errors.push(syn::Error::new(
            sec.span,
            format!("`{}` is not a slice; sections apply to slices", param.ident),
        ));
        return;
    }
    if map.map_type != MapType::To && !mutable {
        errors.push(syn::Error::new(
            span,
            format!(
                "`{id}` is `{what}`, which the region cannot write, so it cannot be mapped `{ty}`; map it `to`, \
                 or declare it `&mut` to receive device values",
                id = param.ident,
                ty = map.map_type.name(),
            ),
        ));
        return;
    }
    param.map = Some(Map {
        clause_span: Some(span),
        ..map.clone()
    });
    param.section = item.section;
}

fn classify_param(arg: &FnArg, self_ty: Option<&Type>, errors: &mut Errors) -> Option<Param> {
    let pt = match arg {
        FnArg::Receiver(r) if self_ty.is_none() => {
            errors.push(syn::Error::new(
                r.span(),
                "a method region needs `#[target]` on its `impl` block too (`#[target] impl Type { .. }`): the \
                 attribute on a method cannot see the type's name, which names the region's kernel",
            ));
            return None;
        }
        FnArg::Receiver(r) => return Some(receiver(r)),
        FnArg::Typed(pt) => pt,
    };
    let (ident, mut_binding) = match &*pt.pat {
        Pat::Ident(pi) if pi.by_ref.is_none() && pi.subpat.is_none() => {
            (pi.ident.clone(), pi.mutability.is_some())
        }
        other => {
            errors.push(syn::Error::new(
                other.span(),
                "region parameters must be plain names, like `x: &[f32]`",
            ));
            return None;
        }
    };
    let ty = (*pt.ty).clone();
    if let Some(msg) = unsupported_type(&ty) {
        errors.push(syn::Error::new(
            ty.span(),
            format!("`{ident}` cannot be passed to a region: it is {msg}"),
        ));
        return None;
    }
    if let Some(by_ref) = crate::mapper::param_form(&ty) {
        return mapper_param(ident, ty, by_ref, mut_binding, errors);
    }
    let named = |t: &Type, n: &str| last_segment(t).is_some_and(|s| s.ident == n);
    let kind = match &ty {
        Type::Reference(r) if named(&r.elem, "DeviceBuffer") => ParamKind::DeviceBuffer {
            mutable: r.mutability.is_some(),
        },
        t if named(t, "DevicePtr") => ParamKind::DevicePtr,
        Type::Reference(r) => {
            let mutable = r.mutability.is_some();
            match &*r.elem {
                Type::Slice(s) => ParamKind::Slice {
                    elem: (*s.elem).clone(),
                    mutable,
                },
                elem => ParamKind::Ref {
                    ty: elem.clone(),
                    mutable,
                },
            }
        }
        _ => ParamKind::Value,
    };
    let map = match &kind {
        // A shared slice of atomics becomes `tofrom` in the runtime, which knows the element type.
        ParamKind::Slice { mutable, .. } => Some(Map::implicit(if *mutable {
            MapType::ToFrom
        } else {
            MapType::To
        })),
        ParamKind::Ref { mutable, .. } => Some(Map::implicit(if *mutable {
            MapType::ToFrom
        } else {
            MapType::To
        })),
        ParamKind::Value
        | ParamKind::DevicePtr
        | ParamKind::DeviceBuffer { .. }
        | ParamKind::Mapper { .. } => None,
    };
    Some(Param {
        ident,
        ty,
        kind,
        map,
        section: None,
        mut_binding,
    })
}

/// A `#[derive(Mapper)]` struct parameter (by its form: a lifetime argument), by value or `&mut`.
fn mapper_param(
    ident: Ident,
    ty: Type,
    by_ref: Option<bool>,
    mut_binding: bool,
    errors: &mut Errors,
) -> Option<Param> {
    if by_ref == Some(false) {
        errors.push(syn::Error::new(
            ty.span(),
            format!(
                "`{ident}` is a shared reference to a mapper struct, through which the region could not write its \
                 `&mut` fields; take it by value (`{ident}: Grid<'_>`) or as `&mut Grid<'_>`"
            ),
        ));
        return None;
    }
    Some(Param {
        ident,
        ty,
        kind: ParamKind::Mapper { by_ref },
        // Each field by its own map type; a clause combines with them as OpenMP's mappers do.
        map: Some(Map::implicit(MapType::ToFrom)),
        section: None,
        mut_binding,
    })
}

/// The receiver, mapped per its type as the same parameter written out would be: `self` firstprivate, `&self` a
/// `&Self` mapped `to`, `&mut self` a `&mut Self` mapped `tofrom`.
fn receiver(r: &syn::Receiver) -> Param {
    let ident = Ident::new("self", r.self_token.span);
    let self_ty: Type = syn::parse_quote_spanned!(r.self_token.span=> Self);
    let (kind, map, mut_binding) = match &*r.ty {
        Type::Reference(t) => {
            let mutable = t.mutability.is_some();
            let map = Map::implicit(if mutable {
                MapType::ToFrom
            } else {
                MapType::To
            });
            let ty = match &*t.elem {
                Type::Path(p) if p.path.is_ident("Self") => self_ty.clone(),
                other => other.clone(),
            };
            (ParamKind::Ref { ty, mutable }, Some(map), false)
        }
        _ => (ParamKind::Value, None, r.mutability.is_some()),
    };
    let ty = match kind {
        ParamKind::Value => self_ty,
        _ => (*r.ty).clone(),
    };
    Param {
        ident,
        ty,
        kind,
        map,
        section: None,
        mut_binding,
    }
}

fn last_segment(ty: &Type) -> Option<&syn::PathSegment> {
    match ty {
        Type::Path(p) if p.qself.is_none() => p.path.segments.last(),
        Type::Group(g) => last_segment(&g.elem),
        Type::Paren(p) => last_segment(&p.elem),
        _ => None,
    }
}

/// Why a type cannot cross into a region, or `None` if it may (the trait bounds the expansion emits check the rest).
pub(crate) fn unsupported_type(ty: &Type) -> Option<String> {
    let owned =
        |what: &str, instead: &str| Some(format!("{what}, which owns host memory; {instead}"));
    match ty {
        Type::Reference(r) => match &*r.elem {
            Type::Path(_) if last_segment(&r.elem).is_some_and(|s| s.ident == "str") => {
                Some("a string slice; regions take `&[u8]` or other `DeviceCopy` data".into())
            }
            Type::Reference(_) => Some("a reference to a reference; pass the inner reference".into()),
            Type::Slice(s) => match &*s.elem {
                Type::Reference(_) | Type::Slice(_) => {
                    Some("a slice of references; device memory cannot hold host pointers".into())
                }
                inner => unsupported_type(inner).map(|m| format!("a slice of {m}")),
            },
            Type::TraitObject(_) | Type::ImplTrait(_) => {
                Some("a trait object; regions take concrete `DeviceCopy` types".into())
            }
            inner => unsupported_type(inner),
        },
        Type::Ptr(_) => Some(
            "a raw pointer, which means nothing on a device; map a slice or reference instead \
             (device pointers come as `offload::DevicePtr<T>`)"
                .into(),
        ),
        Type::ImplTrait(_) | Type::TraitObject(_) => Some("a trait object; regions take concrete types".into()),
        Type::BareFn(_) => Some("a function pointer; call a `#[declare_target]` function by name instead".into()),
        Type::Never(_) => Some("`!`".into()),
        Type::Tuple(t) if !t.elems.is_empty() => Some(
            "a tuple, whose layout Rust does not fix across compilers; use a `#[declare_target]` `#[repr(C)]` struct"
                .into(),
        ),
        Type::Infer(_) | Type::Macro(_) | Type::Verbatim(_) => Some("a type a region cannot name".into()),
        _ => {
            let seg = last_segment(ty)?;
            let name = seg.ident.to_string();
            match name.as_str() {
                "Vec" | "VecDeque" => owned(
                    &format!("`{name}`"),
                    "pass `&[T]` (mapped `to`) or `&mut [T]` (mapped `tofrom`) instead, e.g. `x: &[f32]` called as `f(&v)`",
                ),
                "String" => owned("`String`", "pass its bytes as `&[u8]`"),
                "Box" | "Rc" | "Arc" => owned(&format!("`{name}`"), "pass `&T` or `&mut T` to the contents instead"),
                "HashMap" | "BTreeMap" | "HashSet" | "BTreeSet" | "LinkedList" | "BinaryHeap" => {
                    owned(&format!("`{name}`"), "flatten it into slices")
                }
                "Option" | "Result" => Some(format!(
                    "`{name}`, which has no fixed device representation; pass a value and a flag instead"
                )),
                _ => None,
            }
        }
    }
}
