//! The clause model: a `#[target]` region parsed and validated against its signature, once, for both the macro (which
//! expands the host side) and the outliner (which writes the kernel entry). Errors are spanned and collected, so a
//! user sees every mistake at once.

use crate::clause::{
    parse_clauses, set_once, Clause, Construct, Errors, Map, MapItem, MapType, Section,
    LOOP_CONSTRUCTS,
};
use proc_macro2::TokenStream;
use quote::ToTokens;
use syn::parse::Parser;
use syn::spanned::Spanned;
use syn::{Expr, FnArg, Ident, ItemFn, Pat, ReturnType, Type};

/// What kind of value a parameter is, which decides how it crosses to the device.
#[derive(Clone, Debug)]
pub enum ParamKind {
    /// `&[T]` / `&mut [T]`: a mapped buffer; two kernel arguments (device address, length).
    Slice { elem: Type, mutable: bool },
    /// `&T` / `&mut T`: a mapped object; one kernel argument (device address).
    Ref { ty: Type, mutable: bool },
    /// A `Copy` value, firstprivate: one kernel argument (the bits if 8 bytes or less, else a private copy's address).
    Value,
    /// `offload::DevicePtr<T>`: device memory passed as is (OpenMP's `is_device_ptr`); one argument (the address).
    DevicePtr,
    /// `&offload::DeviceBuffer<T>` / `&mut ..`: device memory passed as is; two arguments (address, length).
    DeviceBuffer { mutable: bool },
}

#[derive(Clone, Debug)]
pub struct Param {
    pub ident: Ident,
    pub ty: Type,
    pub kind: ParamKind,
    /// `None` for by-value parameters.
    pub map: Option<Map>,
    /// `map(TYPE: x[lo..hi])`: only this part of a slice is transferred and present.
    pub section: Option<Section>,
    /// Declared `mut x: ..`: the body may change its value, so it may differ between threads.
    pub mut_binding: bool,
}

/// One kernel argument in the calling convention `(dyn_ptr, a0, .., ak)`.
#[derive(Clone, Copy, Debug)]
pub enum KernelArg<'a> {
    /// Device address of a slice's data.
    SlicePtr(&'a Param),
    /// A slice's length, a literal.
    SliceLen(&'a Param),
    /// Device address of a `&T` / `&mut T`.
    RefPtr(&'a Param),
    /// A firstprivate value.
    Value(&'a Param),
    /// A `DevicePtr`'s address.
    DevicePtr(&'a Param),
    /// A `DeviceBuffer`'s address.
    BufferPtr(&'a Param),
    /// A `DeviceBuffer`'s length.
    BufferLen(&'a Param),
    /// Device address of the return slot (mapped `from`).
    Return,
}

/// A validated `#[target]` region.
#[derive(Clone, Debug)]
pub struct Region {
    pub ident: Ident,
    pub params: Vec<Param>,
    /// `None` for `()`.
    pub ret: Option<Type>,
    pub device: Option<Expr>,
    pub if_cond: Option<Expr>,
    /// `teams, parallel`: the body runs in every thread of every team (SPMD).
    pub spmd: bool,
    /// `teams_distribute_parallel_for`: the body's one loop is shared out over every team and thread.
    pub work_shared: bool,
    pub num_teams: Option<Expr>,
    pub thread_limit: Option<Expr>,
    /// Declared `unsafe fn`: opts out of the race-freedom rules.
    pub is_unsafe: bool,
    /// `reduction(op: var, ..)`, in clause order: each variable's operator and the variable.
    pub reductions: Vec<(crate::clause::ReduceOp, Ident)>,
    /// `collapse(n)`: how many perfectly nested loops are shared out as one (1 without the clause).
    pub collapse: usize,
    /// `parallel_for[_simd]`: one team, whose threads share the loop.
    pub one_team: bool,
    /// `schedule(..)`: how the loop's iterations are dealt out (one block per thread without it).
    pub schedule: Option<crate::clause::Schedule>,
    /// `private(x, ..)`: per-thread locals declared before the loop that the loop may assign.
    pub private: Vec<Ident>,
}

impl Region {
    /// Parses the attribute arguments and validates them against the function; every error, combined.
    pub fn parse(args: TokenStream, func: &ItemFn) -> syn::Result<Region> {
        let mut errors = Errors::default();
        let clauses =
            match (|input: syn::parse::ParseStream| parse_clauses(input, Construct::Target))
                .parse2(args)
            {
                Ok(c) => c,
                Err(e) => {
                    errors.push(e);
                    Vec::new()
                }
            };
        check_signature(func, &mut errors);
        let mut params: Vec<Param> = Vec::new();
        for arg in &func.sig.inputs {
            if let Some(p) = classify_param(arg, &mut errors) {
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
            spmd: false,
            work_shared: false,
            num_teams: None,
            thread_limit: None,
            is_unsafe: func.sig.unsafety.is_some(),
            reductions: Vec::new(),
            collapse: 1,
            one_team: false,
            schedule: None,
            private: Vec::new(),
        };
        region.apply_clauses(clauses, &mut errors);
        region.check_reduction_return(&mut errors);
        crate::worksharing::check_reserved(&func.block, &mut errors);
        if !region.spmd {
            crate::worksharing::check_team_calls(&func.block, &mut errors);
        }
        if region.work_shared {
            if let Some(ws) = crate::worksharing::find(&func.block, region.collapse, &mut errors) {
                crate::worksharing::check_races(&region, &func.block, &ws, &mut errors);
                crate::worksharing::check_uniform(&region, &ws, &mut errors);
                if !region.reductions.is_empty() {
                    crate::worksharing::check_reduction(
                        &func.block,
                        &ws,
                        &region.reductions,
                        &mut errors,
                    );
                }
            }
        } else if let Some((_, var)) = region.reductions.first() {
            errors.push(syn::Error::new(
                var.span(),
                "`reduction` combines a work-shared loop's partial results: add `teams_distribute_parallel_for`",
            ));
        }
        let n = region.kernel_args().len();
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
        errors.finish(region)
    }

    fn apply_clauses(&mut self, clauses: Vec<Clause>, errors: &mut Errors) {
        let mut words: Vec<Ident> = Vec::new();
        let mut collapse_kw: Option<Ident> = None;
        let (mut schedule_kw, mut private_kw): (Option<Ident>, Option<Ident>) = (None, None);
        for clause in clauses {
            match clause {
                Clause::Map { map, items } => {
                    for item in items {
                        self.apply_map(&map, item, errors);
                    }
                }
                Clause::Device(kw, e) => set_once(&mut self.device, kw, e, errors),
                Clause::If(kw, e) => set_once(&mut self.if_cond, kw, e, errors),
                Clause::NumTeams(kw, e) => set_once(&mut self.num_teams, kw, e, errors),
                Clause::ThreadLimit(kw, e) => set_once(&mut self.thread_limit, kw, e, errors),
                Clause::Construct(kw) => words.push(kw),
                Clause::Schedule(kw, sched) => {
                    if schedule_kw.is_some() {
                        errors.push(syn::Error::new(kw.span(), "`schedule` is given twice"));
                    }
                    self.schedule = Some(sched);
                    schedule_kw = Some(kw);
                }
                Clause::Private(kw, vars) => {
                    self.private.extend(vars);
                    private_kw = Some(kw);
                }
                Clause::Collapse(kw, n) => {
                    if !(1..=crate::abi::MAX_COLLAPSE).contains(&n) {
                        errors.push(syn::Error::new(
                            kw.span(),
                            format!(
                                "`collapse(n)` takes 1 to {} loops",
                                crate::abi::MAX_COLLAPSE
                            ),
                        ));
                    } else {
                        self.collapse = n;
                        collapse_kw = Some(kw);
                    }
                }
                Clause::Reduction(op, span, vars) => {
                    for v in vars {
                        if self.reductions.iter().any(|(_, w)| *w == v) {
                            errors
                                .push(syn::Error::new(v.span(), format!("`{v}` is reduced twice")));
                        } else {
                            self.reductions.push((op.clone(), v));
                        }
                    }
                    if self.reductions.len() > crate::reduce::MAX_VARS {
                        errors.push(syn::Error::new(
                            span,
                            format!(
                                "at most {} reduction variables per region",
                                crate::reduce::MAX_VARS
                            ),
                        ));
                    }
                }
            }
        }
        let has = |w: &str| words.iter().any(|k| k == w);
        let loops: Vec<&Ident> = words
            .iter()
            .filter(|w| LOOP_CONSTRUCTS.contains(&&*w.to_string()))
            .collect();
        if let [_, second, ..] = loops.as_slice() {
            errors.push(syn::Error::new(
                second.span(),
                "a region has one loop construct: `teams_distribute_parallel_for`, `parallel_for` or \
                 `teams_distribute` (each with `_simd` where it applies)",
            ));
        }
        self.work_shared = !loops.is_empty();
        let mut one_thread = false;
        match loops.first().map(|w| w.to_string()).as_deref() {
            // OpenMP `target parallel for`: one team.
            Some("parallel_for" | "parallel_for_simd") => self.one_team = true,
            // OpenMP `target teams distribute`: the iterations go to the teams, one thread each.
            Some("teams_distribute") => one_thread = true,
            _ => {}
        }
        if let (Some(w), false) = (words.iter().find(|w| *w == "simd"), self.work_shared) {
            errors.push(syn::Error::new(
                w.span(),
                "`simd` goes with a loop construct (`teams_distribute_parallel_for, simd`, or \
                 `teams_distribute_parallel_for_simd`)",
            ));
        }
        if let (Some(kw), false) = (&collapse_kw, self.work_shared) {
            errors.push(syn::Error::new(
                kw.span(),
                "`collapse` applies to a loop construct such as `teams_distribute_parallel_for`",
            ));
        }
        if let (true, Some(e)) = (self.one_team, &self.num_teams) {
            errors.push(syn::Error::new(
                e.span(),
                "`parallel_for` runs one team; bound its threads with `num_threads(n)` (or use \
                 `teams_distribute_parallel_for` for several teams)",
            ));
        }
        if one_thread {
            match &self.thread_limit {
                Some(e) => errors.push(syn::Error::new(
                    e.span(),
                    "`teams_distribute` runs one thread per team; use `teams_distribute_parallel_for` for more",
                )),
                None => self.thread_limit = Some(syn::parse_quote!(1u32)),
            }
        }
        for (kw, what) in [(&schedule_kw, "schedule"), (&private_kw, "private")] {
            if let (Some(kw), false) = (kw, self.work_shared) {
                errors.push(syn::Error::new(
                    kw.span(),
                    format!("`{what}` applies to a loop construct such as `teams_distribute_parallel_for`"),
                ));
            }
        }
        match (has("teams"), has("parallel")) {
            (true, true) if self.work_shared => errors.push(syn::Error::new(
                words[0].span(),
                "choose one construct: a loop construct (`teams_distribute_parallel_for`, ..) shares a loop out, \
                 `teams, parallel` runs the whole body in every thread",
            )),
            (true, true) => self.spmd = true,
            (false, false) => {}
            _ => {
                let kw = &words[0];
                errors.push(syn::Error::new(
                    kw.span(),
                    "write `teams, parallel` for a region whose whole body runs in every thread of every team \
                     (SPMD); `teams` or `parallel` alone is not supported",
                ));
            }
        }
        if !self.spmd && !self.work_shared {
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
        if self.spmd && !self.is_unsafe {
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
        if self.spmd || self.work_shared {
            // A slice becomes a view with per-element access; a whole `&mut T` would be held by every thread at once.
            for p in &self.params {
                if matches!(p.kind, ParamKind::Ref { mutable: true, .. })
                    && (self.work_shared || self.is_unsafe)
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

    fn apply_map(&mut self, map: &Map, item: MapItem, errors: &mut Errors) {
        let span = item.ident.span();
        let Some(param) = self.params.iter_mut().find(|p| p.ident == item.ident) else {
            let names: Vec<String> = self
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
            ParamKind::Slice { mutable, .. } => {
                (*mutable, if *mutable { "&mut [T]" } else { "&[T]" })
            }
            ParamKind::Ref { mutable, .. } => (*mutable, if *mutable { "&mut T" } else { "&T" }),
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
        if let (Some(sec), ParamKind::Ref { .. }) = (&item.section, &param.kind) {
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

    /// The reduction's operator type (a [`crate::reduce`] operator, or a `TupleK` of them for several variables).
    pub fn reduce_op(&self) -> Option<TokenStream> {
        self.reduce_ops(|tuple, ops| quote::quote!(::offload::__reduce::#tuple<#(#ops),*>))
    }

    /// The operator as a value, for the loop driver (operators are unit structs).
    pub fn reduce_op_value(&self) -> Option<TokenStream> {
        self.reduce_ops(|tuple, ops| quote::quote!(::offload::__reduce::#tuple(#(#ops),*)))
    }

    /// The one operator, or `several(TupleK, ops)` for several variables.
    fn reduce_ops(
        &self,
        several: impl Fn(Ident, &[TokenStream]) -> TokenStream,
    ) -> Option<TokenStream> {
        let ops: Vec<TokenStream> = self.reductions.iter().map(|(op, _)| op.path()).collect();
        match ops.as_slice() {
            [] => None,
            [one] => Some(one.clone()),
            _ => Some(several(quote::format_ident!("Tuple{}", ops.len()), &ops)),
        }
    }

    /// The reduction value's type as it crosses to and from the device: the return type, or for several variables
    /// the `#[repr(C)]` `TupleK` of the returned tuple's types.
    pub fn reduce_wire(&self) -> Option<TokenStream> {
        match (&self.ret, self.reductions.len()) {
            (_, 0) | (None, _) => None,
            (Some(Type::Tuple(t)), k) if k >= 2 => {
                let tuple = quote::format_ident!("Tuple{}", k);
                let elems = t.elems.iter();
                Some(quote::quote!(::offload::__reduce::#tuple<#(#elems),*>))
            }
            (Some(ty), _) => Some(ty.to_token_stream()),
        }
    }

    /// The kernel arguments, in order: the calling convention both the host stub and the kernel entry follow.
    pub fn kernel_args(&self) -> Vec<KernelArg<'_>> {
        let mut args = Vec::new();
        for p in &self.params {
            match p.kind {
                ParamKind::Slice { .. } => {
                    args.push(KernelArg::SlicePtr(p));
                    args.push(KernelArg::SliceLen(p));
                }
                ParamKind::Ref { .. } => args.push(KernelArg::RefPtr(p)),
                ParamKind::Value => args.push(KernelArg::Value(p)),
                ParamKind::DevicePtr => args.push(KernelArg::DevicePtr(p)),
                ParamKind::DeviceBuffer { .. } => {
                    args.push(KernelArg::BufferPtr(p));
                    args.push(KernelArg::BufferLen(p));
                }
            }
        }
        if self.ret.is_some() {
            args.push(KernelArg::Return);
        }
        args
    }

    /// Whether the region takes device memory: then it runs on a device or fails, never in a host fallback.
    pub fn needs_device(&self) -> bool {
        self.params.iter().any(|p| {
            matches!(
                p.kind,
                ParamKind::DevicePtr | ParamKind::DeviceBuffer { .. }
            )
        })
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
    for g in &sig.generics.params {
        if !matches!(g, syn::GenericParam::Lifetime(_)) {
            errors.push(syn::Error::new(
                g.span(),
                "a region cannot be generic: each region is compiled once into the device image; \
                 write one region per concrete type (a `#[declare_target]` generic helper can share the code)",
            ));
        }
    }
    if let Some(w) = &sig.generics.where_clause {
        errors.push(syn::Error::new(
            w.span(),
            "a region cannot have a `where` clause",
        ));
    }
}

fn classify_param(arg: &FnArg, errors: &mut Errors) -> Option<Param> {
    let pt = match arg {
        FnArg::Receiver(r) => {
            errors.push(syn::Error::new(
                r.span(),
                "`#[target]` goes on free functions, not methods: move the region out of the `impl` and pass the \
                 receiver as an ordinary parameter (e.g. `fn step(state: &mut State, ..)`)",
            ));
            return None;
        }
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
        ParamKind::Value | ParamKind::DevicePtr | ParamKind::DeviceBuffer { .. } => None,
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

fn last_segment(ty: &Type) -> Option<&syn::PathSegment> {
    match ty {
        Type::Path(p) if p.qself.is_none() => p.path.segments.last(),
        Type::Group(g) => last_segment(&g.elem),
        Type::Paren(p) => last_segment(&p.elem),
        _ => None,
    }
}

/// Why a type cannot cross into a region, or `None` if it may (the trait bounds the expansion emits check the rest).
fn unsupported_type(ty: &Type) -> Option<String> {
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
