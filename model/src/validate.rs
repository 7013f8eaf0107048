//! The validate phase: the rules that relate a region's parts (construct combinations, what a parallel region may
//! take, reductions and their return, race freedom and uniform bounds in the body, the kernel-argument limit). It
//! reads the parsed [`Region`] and pushes every violation. `Region::parse`, the two phases together, is here too, so
//! that the clause model (`region`) does not depend on the loop rules (`worksharing`), which read it.

use crate::clause::Word;
use crate::errors::Errors;
use crate::region::parse::{unsupported_type, Words};
use crate::region::{InImpl, ParamKind, Region};
use proc_macro2::TokenStream;
use syn::spanned::Spanned;
use syn::{ItemFn, Type};

impl Region {
    /// Parses the attribute arguments against the function, then validates the region; every error, combined.
    pub fn parse(args: TokenStream, func: &ItemFn) -> syn::Result<Region> {
        Region::parse_in(args, func, None)
    }

    /// As [`Region::parse`], for a method of the impl `imp` (`None`: a free function).
    pub fn parse_in(
        args: TokenStream,
        func: &ItemFn,
        imp: Option<InImpl<'_>>,
    ) -> syn::Result<Region> {
        let mut errors = Errors::default();
        let (region, words) = crate::region::parse::parse(args, func, imp, &mut errors);
        validate(&region, &words, func, &mut errors);
        errors.finish(region)
    }
}

fn validate(region: &Region, words: &Words, func: &ItemFn, errors: &mut Errors) {
    check_signature(func, errors);
    crate::region::generic::check(region, &func.sig, errors);
    region.check_constructs(words, errors);
    region.check_reduction_return(errors);
    check_body(region, func, errors);
    // A mapper struct counts one here: its fields are checked where its definition is known.
    let n: usize = region.kernel_args().iter().map(|a| a.width(1)).sum();
    if n > crate::abi::MAX_KERNEL_ARGS {
        errors.push(syn::Error::new(
            region.ident.span(),
            format!(
                "this region has {n} kernel arguments (a slice counts two, a return value one); at most {} fit: \
                 group parameters into `#[declare_target]` `#[repr(C)]` structs",
                crate::abi::MAX_KERNEL_ARGS
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
                crate::worksharing::check_reduction(&func.block, &ws, &region.reductions, errors);
            }
        }
    } else if let Some((_, var)) = region.reductions.first() {
        errors.push(syn::Error::new(
            var.span(),
            "`reduction` combines a work-shared loop's partial results: add `teams_distribute_parallel_for`",
        ));
    }
}

impl Region {
    /// The construct words and clauses together: one loop construct, and each clause where it applies.
    fn check_constructs(&self, words: &Words, errors: &mut Errors) {
        let all = &words.words;
        let has = |w: Word| all.iter().any(|(k, _)| *k == w);
        let loops: Vec<&(Word, proc_macro2::Span)> =
            all.iter().filter(|(w, _)| w.is_loop()).collect();
        if let [_, (_, second), ..] = loops.as_slice() {
            errors.push(syn::Error::new(
                *second,
                "a region has one loop construct: `teams_distribute_parallel_for`, `parallel_for` or \
                 `teams_distribute` (each with `_simd` where it applies)",
            ));
        }
        if let (Some((_, w)), false) = (
            all.iter().find(|(w, _)| *w == Word::Simd),
            self.construct.is_work_shared(),
        ) {
            errors.push(syn::Error::new(
                *w,
                "`simd` goes with a loop construct (`teams_distribute_parallel_for, simd`, or \
                 `teams_distribute_parallel_for_simd`)",
            ));
        }
        if let (Some(kw), false) = (&words.collapse, self.construct.is_work_shared()) {
            errors.push(syn::Error::new(
                kw.span(),
                "`collapse` applies to a loop construct such as `teams_distribute_parallel_for`",
            ));
        }
        if let (true, Some(e)) = (self.construct.is_one_team(), &self.num_teams) {
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
            if let (Some(kw), false) = (kw, self.construct.is_work_shared()) {
                errors.push(syn::Error::new(
                    kw.span(),
                    format!("`{what}` applies to a loop construct such as `teams_distribute_parallel_for`"),
                ));
            }
        }
        match (has(Word::Teams), has(Word::Parallel)) {
            (true, true) if self.construct.is_work_shared() => errors.push(syn::Error::new(
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
        if !self.construct.is_parallel() {
            for (name, e) in [
                ("num_teams", &self.num_teams),
                ("thread_limit", &self.thread_limit),
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
        if self.construct.is_spmd() && !self.is_unsafe {
            // Every thread runs the whole body: a `&mut` would be written by all of them at once.
            for p in &self.params {
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
        if self.construct.is_parallel() {
            // A slice becomes a view with per-element access; a whole `&mut T` would be held by every thread at once.
            for p in &self.params {
                if matches!(p.kind, ParamKind::Ref { mutable: true, .. })
                    && (self.construct.is_work_shared() || self.is_unsafe)
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

    /// Several reduction variables return as a tuple of as many; any other tuple is rejected.
    fn check_reduction_return(&self, errors: &mut Errors) {
        let k = self.reductions.len();
        match &self.ret {
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
