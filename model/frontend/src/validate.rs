//! The validate phase: the rules that relate a region's parts (construct combinations, what a parallel region may
//! take, a generic region's instances, reductions and their return, race freedom and uniform bounds in the body, the
//! kernel-argument limit). It reads the parsed [`Region`] and pushes every violation; [`crate::frontend`] runs it
//! after the parse.

use crate::clause::Word;
use crate::errors::Errors;
use crate::region::parse::{unsupported_type, Words};
use crate::region::{ParamKind, Region, CONST_PARAM_TYPES};
use quote::ToTokens;
use syn::spanned::Spanned;
use syn::{GenericArgument, ItemFn, Type};

/// Every rule, in the order their errors are reported.
pub(crate) fn validate(region: &Region, words: &Words, func: &ItemFn, errors: &mut Errors) {
    check_signature(func, errors);
    check_generic(region, &func.sig, errors);
    check_constructs(region, words, errors);
    check_reduction_return(region, func, errors);
    check_body(region, func, errors);
    // A mapper struct counts one here: its fields are checked where its definition is known.
    let n: usize = crate::plan::plan(region)
        .iter()
        .map(|a| a.width(Some(1)))
        .sum();
    if n > offload_model::abi::MAX_KERNEL_ARGS {
        errors.push(syn::Error::new(
            region.ident.span(),
            format!(
                "this region has {n} kernel arguments (a slice counts two, a return value one); at most {} fit: \
                 group parameters into `#[declare_target]` `#[repr(C)]` structs",
                offload_model::abi::MAX_KERNEL_ARGS
            ),
        ));
    }
}

/// Race freedom, uniform bounds and reductions in the body; names the lowering reserves; team calls outside SPMD.
fn check_body(region: &Region, func: &ItemFn, errors: &mut Errors) {
    crate::worksharing::check_reserved(&func.block, errors);
    if !region.construct.is_spmd() {
        crate::worksharing::check_team_calls(&func.block, errors);
    } else {
        crate::worksharing::check_team_shared_types(&func.block, errors);
    }
    if region.construct.is_work_shared() {
        if let Some(ws) = crate::worksharing::find(region, &func.block, errors) {
            crate::worksharing::check_races(region, &func.block, &ws, errors);
            crate::worksharing::check_uniform(region, &ws, errors);
            crate::worksharing::check_across(region, &ws, errors);
            if !region.reductions.is_empty() {
                crate::worksharing::check_reduction(region, &func.block, &ws, errors);
            }
        }
    } else if let Some((_, var)) = region.reductions.first() {
        errors.push(syn::Error::new(
            var.span(),
            "`reduction` combines a work-shared loop's partial results: add `teams_distribute_parallel_for`",
        ));
    }
}

/// The construct words and clauses together: one loop construct, and each clause where it applies.
fn check_constructs(region: &Region, words: &Words, errors: &mut Errors) {
    check_loop_construct(region, words, errors);
    check_teams_parallel(region, words, errors);
    check_geometry_clauses(region, errors);
    check_shared_writes(region, errors);
}

/// One loop construct, and the clauses that apply to a loop construct (or to one kind of it) only with it.
fn check_loop_construct(region: &Region, words: &Words, errors: &mut Errors) {
    let all = &words.words;
    let loops: Vec<&(Word, proc_macro2::Span)> = all.iter().filter(|(w, _)| w.is_loop()).collect();
    if let [_, (_, second), ..] = loops.as_slice() {
        errors.push(syn::Error::new(
            *second,
            "a region has one loop construct: `teams_distribute_parallel_for`, `parallel_for` or \
             `teams_distribute` (each with `_simd` where it applies)",
        ));
    }
    if let (Some((_, w)), false) = (
        all.iter().find(|(w, _)| *w == Word::Simd),
        region.construct.is_work_shared(),
    ) {
        errors.push(syn::Error::new(
            *w,
            "`simd` goes with a loop construct (`teams_distribute_parallel_for, simd`, or \
             `teams_distribute_parallel_for_simd`)",
        ));
    }
    if let (Some(kw), false) = (&words.collapse, region.construct.is_work_shared()) {
        errors.push(syn::Error::new(
            kw.span(),
            "`collapse` applies to a loop construct such as `teams_distribute_parallel_for`",
        ));
    }
    if let (true, Some(e)) = (region.construct.is_one_team(), &region.num_teams) {
        errors.push(syn::Error::new(
            e.span(),
            "`parallel_for` runs one team; bound its threads with `num_threads(n)` (or use \
             `teams_distribute_parallel_for` for several teams)",
        ));
    }
    if let (Some((Word::TeamsDistribute, _)), Some(e)) = (loops.first(), &words.thread_limit) {
        errors.push(syn::Error::new(
            e.span(),
            "`teams_distribute` runs one thread per team; use `teams_distribute_parallel_for` for more",
        ));
    }
    for (kw, what) in [(&words.schedule, "schedule"), (&words.private, "private")] {
        if let (Some(kw), false) = (kw, region.construct.is_work_shared()) {
            errors.push(syn::Error::new(
                kw.span(),
                format!(
                    "`{what}` applies to a loop construct such as `teams_distribute_parallel_for`"
                ),
            ));
        }
    }
}

/// `teams` and `parallel` go together (SPMD), and not with a loop construct.
fn check_teams_parallel(region: &Region, words: &Words, errors: &mut Errors) {
    let all = &words.words;
    let has = |w: Word| all.iter().any(|(k, _)| *k == w);
    match (has(Word::Teams), has(Word::Parallel)) {
        (true, true) if region.construct.is_work_shared() => errors.push(syn::Error::new(
            all[0].1,
            "choose one construct: a loop construct (`teams_distribute_parallel_for`, ..) shares a loop out, \
             `teams, parallel` runs the whole body in every thread",
        )),
        (true, true) | (false, false) => {}
        _ => {
            errors.push(syn::Error::new(
                all[0].1,
                "write `teams, parallel` for a region whose whole body runs in every thread of every team \
                 (SPMD); `teams` or `parallel` alone is not supported",
            ));
        }
    }
}

/// `num_teams` and `thread_limit` size a parallel region's grid, so only a parallel region takes them.
fn check_geometry_clauses(region: &Region, errors: &mut Errors) {
    if region.construct.is_parallel() {
        return;
    }
    for (name, e) in [
        ("num_teams", &region.num_teams),
        ("thread_limit", &region.thread_limit),
    ] {
        if let Some(e) = e {
            errors.push(syn::Error::new(
                e.span(),
                format!(
                    "`{name}` applies to a parallel region: add `teams_distribute_parallel_for` or \
                     `teams, parallel`"
                ),
            ));
        }
    }
}

/// What every thread of a parallel region would hold at once: a `&mut` parameter, unless the writes are kept apart.
fn check_shared_writes(region: &Region, errors: &mut Errors) {
    if region.construct.is_spmd() && !region.is_unsafe {
        // Every thread runs the whole body: a `&mut` would be written by all of them at once.
        for p in &region.params {
            if matches!(
                p.kind,
                ParamKind::Slice { mutable: true, .. }
                    | ParamKind::Ref { mutable: true, .. }
                    | ParamKind::DeviceBuffer { mutable: true }
            ) {
                errors.push(syn::Error::new(
                    p.ty.span(),
                    format!(
                        "in a `teams, parallel` region every thread runs the whole body, so `{}` would be written \
                         by all of them at once; take `&[AtomicT]` and write through atomics, or declare the region \
                         `unsafe fn` and keep the writes apart yourself",
                        p.ident
                    ),
                ));
            }
        }
    }
    if region.construct.is_parallel() {
        // A slice becomes a view with per-element access; a whole `&mut T` would be held by every thread at once.
        for p in &region.params {
            if matches!(p.kind, ParamKind::Ref { mutable: true, .. })
                && (region.construct.is_work_shared() || region.is_unsafe)
            {
                errors.push(syn::Error::new(
                    p.ty.span(),
                    format!(
                        "every thread of a parallel region would hold `{id}`, a `&mut` to one object: take a `&mut [T]` (each iteration then writes its own element), return the value with \
                         `reduction`, or use atomics (`&AtomicT`)",
                        id = p.ident
                    ),
                ));
            }
        }
    }
}

/// Several reduction variables return as a tuple of as many; any other tuple is rejected. A tail that is an
/// expression of the variables is evaluated on the host, so its value crosses nothing and may be of any type.
fn check_reduction_return(region: &Region, func: &ItemFn, errors: &mut Errors) {
    let k = region.reductions.len();
    let var = |e: &syn::Expr, j: usize| matches!(e, syn::Expr::Path(p) if p.path.is_ident(&region.reductions[j].1));
    let plain = match func.block.stmts.last() {
        Some(syn::Stmt::Expr(syn::Expr::Tuple(t), None)) if k >= 2 => {
            t.elems.len() == k && t.elems.iter().enumerate().all(|(j, e)| var(e, j))
        }
        Some(syn::Stmt::Expr(e, None)) if k == 1 => var(e, 0),
        _ => true,
    };
    if k > 0 && !plain {
        return;
    }
    match &region.ret {
        Some(Type::Tuple(t)) if k < 2 || t.elems.len() != k => {
            errors.push(syn::Error::new(
                t.span(),
                if k >= 2 {
                    format!("a region with {k} reduction variables returns them as a tuple of {k}, in clause order")
                } else {
                    "a region cannot return a tuple, whose layout Rust does not fix across compilers (a region \
                     with several reduction variables returns them as one); use a `#[declare_target]` \
                     `#[repr(C)]` struct"
                        .into()
                },
            ));
        }
        Some(Type::Tuple(t)) => {
            for e in &t.elems {
                if let Some(msg) = unsupported_type(e) {
                    errors.push(syn::Error::new(e.span(), format!("a region cannot return {msg}")));
                }
            }
        }
        Some(ty) if k >= 2 => errors.push(syn::Error::new(
            ty.span(),
            format!("a region with {k} reduction variables returns them as a tuple of {k}, in clause order"),
        )),
        _ => {}
    }
}

fn check_signature(func: &ItemFn, errors: &mut Errors) {
    let sig = &func.sig;
    if let Some(a) = &sig.asyncness {
        errors.push(syn::Error::new(
            a.span(),
            "a region cannot be `async`: it runs to completion on the device; call it from async code instead",
        ));
    }
    if let Some(c) = &sig.constness {
        errors.push(syn::Error::new(c.span(), "a region cannot be `const`"));
    }
    if let Some(abi) = &sig.abi {
        errors.push(syn::Error::new(
            abi.span(),
            "a region cannot declare an ABI; the kernel entry has its own",
        ));
    }
    if let Some(v) = &sig.variadic {
        errors.push(syn::Error::new(v.span(), "a region cannot be variadic"));
    }
}

/// The rules of generic regions: each has `instantiate(..)`, each list fits the parameters, none twice.
fn check_generic(region: &Region, sig: &syn::Signature, errors: &mut Errors) {
    if region.generic_params.is_empty() {
        if let Some(i) = region.instances.first() {
            errors.push(syn::Error::new(
                i.span,
                format!(
                    "`instantiate` lists the types a generic region is compiled for, but `{}` has no type or const \
                     parameters",
                    region.ident
                ),
            ));
        }
        return;
    }
    check_const_param_types(region, errors);
    // A clause list that did not parse was reported; it may well have held the `instantiate`.
    if region.instances.is_empty() && errors.is_empty() {
        errors.push(missing_instantiate(region, sig));
    }
    check_instances(region, errors);
}

/// A const parameter's type is one the host can tell instances apart by ([`CONST_PARAM_TYPES`]).
fn check_const_param_types(region: &Region, errors: &mut Errors) {
    for p in &region.generic_params {
        if let Some(t) = &p.const_ty {
            let name = t.to_token_stream().to_string();
            if !CONST_PARAM_TYPES.contains(&name.as_str()) {
                errors.push(syn::Error::new(
                    t.span(),
                    format!(
                        "a generic region's const parameter must be an integer, `bool` or `char`, not `{name}`"
                    ),
                ));
            }
        }
    }
}

/// A generic region without `instantiate(..)`: what to add, at its first type or const parameter.
fn missing_instantiate(region: &Region, sig: &syn::Signature) -> syn::Error {
    let params = &region.generic_params;
    let names: Vec<String> = params.iter().map(|p| p.ident.to_string()).collect();
    let example = if params.len() == 1 {
        "instantiate(f32, f64)".to_string()
    } else {
        "instantiate(<f32, u32>, <f64, u64>)".to_string()
    };
    let first = sig
        .generics
        .params
        .iter()
        .find(|g| !matches!(g, syn::GenericParam::Lifetime(_)))
        .map_or_else(|| sig.ident.span(), |g| g.span());
    let whose = if region.impl_params > 0 {
        " (a generic impl's parameters first, then the method's own)"
    } else {
        ""
    };
    syn::Error::new(
        first,
        format!(
            "a generic region lists the arguments it is compiled for: add `{example}` to `#[target(..)]` (one \
             kernel per list, for <{}>{whose}, as C++'s explicit template instantiation); a call with other \
             arguments runs on the host",
            names.join(", ")
        ),
    )
}

/// Each `instantiate(..)` list: one argument per parameter, each of the parameter's kind, no list twice.
fn check_instances(region: &Region, errors: &mut Errors) {
    let params = &region.generic_params;
    let mut seen: Vec<String> = Vec::new();
    for (k, inst) in region.instances.iter().enumerate() {
        if inst.args.len() != params.len() {
            errors.push(wrong_arity(region, inst));
            continue;
        }
        for (p, a) in params.iter().zip(&inst.args) {
            let ok = match (a, &p.const_ty) {
                (GenericArgument::Type(_), None) => true,
                // A const argument may read as a type (`N`, a path to a const) or an expression (`4`, `{ 2 * K }`).
                (GenericArgument::Const(_), Some(_)) => true,
                (GenericArgument::Type(Type::Path(_)), Some(_)) => true,
                _ => false,
            };
            if !ok {
                errors.push(syn::Error::new(
                    a.span(),
                    format!(
                        "`{}` is a {} parameter: give it a {}",
                        p.ident,
                        if p.const_ty.is_some() {
                            "const"
                        } else {
                            "type"
                        },
                        if p.const_ty.is_some() {
                            "value (`4`)"
                        } else {
                            "type (`f32`)"
                        }
                    ),
                ));
            }
        }
        let name = region.instance_name(k);
        if seen.contains(&name) {
            errors.push(syn::Error::new(
                inst.span,
                format!("`{name}` is listed twice in `instantiate`"),
            ));
        }
        seen.push(name);
    }
}

/// An `instantiate(..)` list with more or fewer arguments than the region has type and const parameters.
fn wrong_arity(region: &Region, inst: &crate::clause::Instance) -> syn::Error {
    let params = &region.generic_params;
    syn::Error::new(
        inst.span,
        format!(
            "`{}` has {} type and const parameter{}, so each `instantiate` entry gives {}{}",
            region.ident,
            params.len(),
            if params.len() == 1 { "" } else { "s" },
            params.len(),
            if params.len() > 1 {
                format!(
                    ", in brackets: `<{}>`",
                    params
                        .iter()
                        .map(|p| p.ident.to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            } else {
                String::new()
            }
        ),
    )
}
