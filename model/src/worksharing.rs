//! `teams_distribute_parallel_for`: the body's shape (per-thread `let`s, one work-shared `for` loop, a tail
//! expression), the loop forms that can be shared out, and the race-freedom rule for safe code.

use crate::clause::Errors;
use crate::region::{ParamKind, Region};
use crate::resolve::collect_idents;
use crate::resolve::{BindingId, Resolved, Site};
use proc_macro2::Span;
use std::collections::BTreeSet;
use syn::spanned::Spanned;
use syn::visit::Visit;
use syn::{Block, Expr, ExprForLoop, Pat, Stmt};

/// The work-shared loop of a region body.
pub struct WorkShared<'a> {
    pub lets: Vec<&'a syn::Local>,
    pub for_loop: &'a ExprForLoop,
    /// The loop variable.
    pub index: syn::Ident,
    /// Under `collapse(n)`: the `n - 1` loops nested in it, outermost first, each with its variable and its bound
    /// `m` when it is `0..m`.
    pub inner: Vec<(&'a ExprForLoop, syn::Ident, Option<&'a Expr>)>,
    /// The body's names, resolved: every rule below asks about bindings, not spellings.
    pub res: Resolved,
    /// The loop's index among the body's statements (the `let`s before it are `stmts[..at]`).
    pub at: usize,
}

impl<'a> WorkShared<'a> {
    /// The loop variables' bindings, outermost first.
    fn nest_vars(&self) -> Vec<Option<BindingId>> {
        std::iter::once(self.for_loop)
            .chain(self.inner.iter().map(|l| l.0))
            .map(|f| self.res.loop_var(f))
            .collect()
    }

    /// The per-thread `let` bindings before the loop (`Site::Let`).
    pub fn lets_before(&self) -> Vec<BindingId> {
        (0..self.res.bindings.len())
            .filter(|&id| matches!(self.res.bindings[id].site, Site::Let(k) if k < self.at))
            .collect()
    }

    /// What a clause's expression (read where the loop starts) names.
    fn at_loop(&self, name: &str) -> Option<BindingId> {
        self.res.before(self.at, name)
    }

    /// The innermost body of the nest: what runs per iteration.
    pub fn body(&self) -> &'a Block {
        self.inner.last().map_or(&self.for_loop.body, |l| &l.0.body)
    }

    /// The reduction variable `var`'s binding: the one in scope where the loop starts, if it is a `let mut var =
    /// INIT;` before it.
    pub fn reduction_var(&self, var: &syn::Ident) -> Option<BindingId> {
        self.at_loop(&var.to_string()).filter(|&id| {
            let b = &self.res.bindings[id];
            matches!(b.site, Site::Let(_)) && b.mutable && b.simple && {
                let Site::Let(k) = b.site else { return false };
                self.lets[k].init.is_some()
            }
        })
    }
}

/// Finds the loop and checks the body's shape and the loop's form.
pub fn find<'a>(region: &Region, block: &'a Block, errors: &mut Errors) -> Option<WorkShared<'a>> {
    let collapse = region.collapse;
    let mut lets = Vec::new();
    let mut found: Option<&ExprForLoop> = None;
    let mut at = 0;
    let n = block.stmts.len();
    for (k, stmt) in block.stmts.iter().enumerate() {
        match stmt {
            Stmt::Local(l) if found.is_none() => lets.push(l),
            Stmt::Expr(Expr::ForLoop(f), _) if found.is_none() => {
                found = Some(f);
                at = k;
            }
            // The tail expression.
            Stmt::Expr(_, None) if k + 1 == n && found.is_some() => {}
            other => {
                errors.push(syn::Error::new(
                    other.span(),
                    "a `teams_distribute_parallel_for` body is per-thread `let`s, one `for` loop whose iterations are \
                     shared out, and a tail expression; move this into the loop, or before it as a `let`",
                ));
                return None;
            }
        }
    }
    let Some(for_loop) = found else {
        errors.push(syn::Error::new(
            block.span(),
            "a `teams_distribute_parallel_for` region needs a `for` loop to share out: `for i in a..b { .. }`",
        ));
        return None;
    };
    let index = match &*for_loop.pat {
        Pat::Ident(p) => p.ident.clone(),
        other => {
            errors.push(syn::Error::new(
                other.span(),
                "the work-shared loop's variable must be a plain name, like `i`",
            ));
            return None;
        }
    };
    if !shareable(&for_loop.expr) {
        errors.push(syn::Error::new(
            for_loop.expr.span(),
            "only `a..b`, `a..=b` and `(a..b).step_by(s)` loops can be shared out over teams and threads; \
             iterate over indices (`for i in 0..y.len()`) and index the slices",
        ));
        return None;
    }
    let mut inner: Vec<(&ExprForLoop, syn::Ident, Option<&Expr>)> = Vec::new();
    let mut outer_indices = vec![index.clone()];
    for _ in 1..collapse {
        let outer = inner.last().map_or(for_loop, |l| l.0);
        let level = find_inner(outer, &outer_indices, collapse, errors)?;
        outer_indices.push(level.1.clone());
        inner.push(level);
    }
    let ws = WorkShared {
        lets,
        for_loop,
        index,
        inner,
        res: Resolved::new(&region.params, block),
        at,
    };
    let exits = exits(&ws);
    for (span, msg) in &exits.leaves {
        errors.push(syn::Error::new(*span, msg));
    }
    exits.leaves.is_empty().then_some(ws)
}

/// How the work-shared loop's body can end an iteration early.
pub struct Exits<'a> {
    /// `continue`s of the work-shared loop (a closure-based lowering turns them into `return`).
    pub continues: Vec<&'a syn::ExprContinue>,
    /// `break`s of the loop and `return`s, which OpenMP forbids in a work-shared loop, and `continue`s of an outer
    /// loop of a collapsed nest: (span, message).
    pub leaves: Vec<(Span, String)>,
}

/// The `continue`, `break` and `return` expressions in the work-shared loop's body that target the loop itself (or,
/// under `collapse(n)`, any loop of the nest).
pub fn exits<'a>(ws: &WorkShared<'a>) -> Exits<'a> {
    struct V<'a> {
        /// The labels of the nest's loops, innermost last.
        labels: Vec<String>,
        depth: usize,
        out: Exits<'a>,
    }
    impl V<'_> {
        fn targets_us(&self, label: Option<&syn::Lifetime>) -> bool {
            match label {
                Some(l) => self.labels.contains(&l.ident.to_string()),
                None => self.depth == 0,
            }
        }
        fn leave(&mut self, span: Span, what: &str) {
            self.out.leaves.push((
                span,
                format!(
                    "`{what}` would leave the work-shared loop, whose iterations are shared out over threads that \
                     each run only theirs; skip an iteration with `continue`, or keep a flag and test it in the body"
                ),
            ));
        }
    }
    impl<'a> Visit<'a> for V<'a> {
        fn visit_expr_continue(&mut self, c: &'a syn::ExprContinue) {
            let innermost = self.labels.last();
            match &c.label {
                // `continue 'outer` in a collapsed nest skips the rest of an inner loop: iterations of the one
                // flattened space that other threads may own.
                Some(l) if self.targets_us(Some(l)) && innermost != Some(&l.ident.to_string()) => {
                    self.out.leaves.push((
                        c.span(),
                        format!(
                            "`continue {l}` skips the rest of an inner loop, but `collapse(n)` shares the nest out as \
                             one space of iterations: only the innermost loop's iteration can be skipped"
                        ),
                    ))
                }
                label if self.targets_us(label.as_ref()) => self.out.continues.push(c),
                _ => {}
            }
        }
        fn visit_expr_break(&mut self, b: &'a syn::ExprBreak) {
            if self.targets_us(b.label.as_ref()) {
                self.leave(b.span(), "break");
            }
            syn::visit::visit_expr_break(self, b);
        }
        fn visit_expr_return(&mut self, r: &'a syn::ExprReturn) {
            self.leave(r.span(), "return");
            syn::visit::visit_expr_return(self, r);
        }
        fn visit_expr_for_loop(&mut self, f: &'a ExprForLoop) {
            self.visit_expr(&f.expr);
            self.depth += 1;
            self.visit_block(&f.body);
            self.depth -= 1;
        }
        fn visit_expr_while(&mut self, w: &'a syn::ExprWhile) {
            self.visit_expr(&w.cond);
            self.depth += 1;
            self.visit_block(&w.body);
            self.depth -= 1;
        }
        fn visit_expr_loop(&mut self, l: &'a syn::ExprLoop) {
            self.depth += 1;
            self.visit_block(&l.body);
            self.depth -= 1;
        }
        // A closure's `return` and loops are its own; so are items'.
        fn visit_expr_closure(&mut self, _: &'a syn::ExprClosure) {}
        fn visit_item(&mut self, _: &'a syn::Item) {}
    }
    let body = ws.inner.last().map_or(&ws.for_loop.body, |l| &l.0.body);
    let mut v = V {
        labels: std::iter::once(ws.for_loop)
            .chain(ws.inner.iter().map(|l| l.0))
            .map(|f| {
                f.label
                    .as_ref()
                    .map_or(String::new(), |l| l.name.ident.to_string())
            })
            .collect(),
        depth: 0,
        out: Exits {
            continues: Vec::new(),
            leaves: Vec::new(),
        },
    };
    v.visit_block(body);
    v.out
}

/// The slice parameters the loop body indexes with exactly the loop variable (`x[i]`, both resolved). A reduction
/// loop's lowering runs groups of iterations below all their lengths first, where those indexings need no bounds check.
pub fn indexed_slices(region: &Region, ws: &WorkShared) -> Vec<syn::Ident> {
    if !ws.inner.is_empty() {
        return Vec::new();
    }
    struct V<'r> {
        res: &'r Resolved,
        slices: Vec<(BindingId, &'r syn::Ident)>,
        index: Option<BindingId>,
        out: Vec<syn::Ident>,
    }
    impl<'a> Visit<'a> for V<'_> {
        fn visit_expr_index(&mut self, ix: &'a syn::ExprIndex) {
            let x = self.res.expr(&ix.expr);
            if self.index.is_some() && loop_index(self.res, &ix.index) == self.index {
                if let Some((_, p)) = self.slices.iter().find(|(id, _)| Some(*id) == x) {
                    if !self.out.contains(p) {
                        self.out.push((*p).clone());
                    }
                }
            }
            syn::visit::visit_expr_index(self, ix);
        }
        fn visit_item(&mut self, _: &'a syn::Item) {}
    }
    let mut v = V {
        res: &ws.res,
        slices: region
            .params
            .iter()
            .enumerate()
            .filter(|(_, p)| matches!(p.kind, ParamKind::Slice { .. }))
            .map(|(k, p)| (ws.res.param(k), &p.ident))
            .collect(),
        index: ws.res.loop_var(ws.for_loop),
        out: Vec::new(),
    };
    v.visit_block(&ws.for_loop.body);
    v.out
}

/// The loop nested in `outer` for `collapse(n)`: the outer body must be exactly that loop, over a range that does
/// not depend on any outer variable.
fn find_inner<'a>(
    outer: &'a ExprForLoop,
    outer_indices: &[syn::Ident],
    collapse: usize,
    errors: &mut Errors,
) -> Option<(&'a ExprForLoop, syn::Ident, Option<&'a Expr>)> {
    let inner = match outer.body.stmts.as_slice() {
        [Stmt::Expr(Expr::ForLoop(f), _)] => f,
        _ => {
            errors.push(syn::Error::new(
                outer.body.span(),
                format!(
                    "`collapse({collapse})` needs {collapse} perfectly nested loops: each outer loop's body is exactly \
                     one `for` loop"
                ),
            ));
            return None;
        }
    };
    let Pat::Ident(p) = &*inner.pat else {
        errors.push(syn::Error::new(
            inner.pat.span(),
            "the inner loop's variable must be a plain name, like `j`",
        ));
        return None;
    };
    let mut mentions = std::collections::BTreeSet::new();
    collect_idents(
        quote::ToTokens::to_token_stream(&*inner.expr),
        &mut mentions,
    );
    if !shareable(&inner.expr)
        || outer_indices
            .iter()
            .any(|i| mentions.contains(&i.to_string()))
    {
        errors.push(syn::Error::new(
            inner.expr.span(),
            format!(
                "an inner loop of `collapse({collapse})` runs over `a..b` or `(a..b).step_by(s)` independent of the \
                 outer loops' variables"
            ),
        ));
        return None;
    }
    Some((inner, p.ident.clone(), zero_based_bound(&inner.expr)))
}

/// `m` in `0..m` or `(0..m).step_by(s)`: the loop's variable stays below it.
fn zero_based_bound(e: &Expr) -> Option<&Expr> {
    match e {
        Expr::Range(r) if r.start.as_deref().is_some_and(is_zero) => r.end.as_deref(),
        Expr::Paren(p) => zero_based_bound(&p.expr),
        Expr::MethodCall(m) if m.method == "step_by" => zero_based_bound(&m.receiver),
        _ => None,
    }
}

fn is_zero(e: &Expr) -> bool {
    matches!(e, Expr::Lit(l) if matches!(&l.lit, syn::Lit::Int(i) if i.base10_digits() == "0"))
}

fn shareable(e: &Expr) -> bool {
    match e {
        // `a..b`, and `a..=b` (which may end at the type's maximum).
        Expr::Range(r) => r.start.is_some() && r.end.is_some(),
        Expr::Paren(p) => shareable(&p.expr),
        Expr::MethodCall(m) => {
            fn half_open(e: &Expr) -> bool {
                match e {
                    Expr::Range(r) => {
                        r.start.is_some()
                            && r.end.is_some()
                            && matches!(r.limits, syn::RangeLimits::HalfOpen(_))
                    }
                    Expr::Paren(p) => half_open(&p.expr),
                    _ => false,
                }
            }
            m.method == "step_by" && m.args.len() == 1 && half_open(&m.receiver)
        }
        _ => false,
    }
}

/// The race-freedom rule: every thread runs the `let`s, the tail and its share of the loop, so a `&mut` parameter
/// may appear only as `y[i]` inside the loop (`i` the loop variable) or as `y.len()`, and the loop may not write what
/// was declared before it (each thread has its own copy, and only one would be returned) unless it is a reduction
/// variable or `private`. Every name is asked about by its binding ([`crate::resolve`]). `unsafe fn` regions opt out.
pub fn check_races(region: &Region, block: &Block, ws: &WorkShared, errors: &mut Errors) {
    if region.is_unsafe {
        return;
    }
    let res = &ws.res;
    let params_of = |f: &dyn Fn(&ParamKind) -> bool| -> Vec<BindingId> {
        region
            .params
            .iter()
            .enumerate()
            .filter(|(_, p)| f(&p.kind))
            .map(|(k, _)| res.param(k))
            .collect()
    };
    let exclusive = params_of(&|k| {
        matches!(
            k,
            ParamKind::Slice { mutable: true, .. }
                | ParamKind::Ref { mutable: true, .. }
                | ParamKind::DeviceBuffer { mutable: true }
        )
    });
    // One object every thread holds: any use of it races (the signature's error says so too).
    let objects = params_of(&|k| matches!(k, ParamKind::Ref { mutable: true, .. }));
    // The reduction variable is each thread's private copy, combined at the end, and `private(x)` says `x` is the
    // thread's own: the loop may update them.
    let mut own = Vec::new();
    for p in &region.private {
        match ws.at_loop(&p.to_string()) {
            Some(id) if matches!(res.bindings[id].site, Site::Let(_)) => own.push(id),
            _ => errors.push(syn::Error::new(
                p.span(),
                format!(
                    "`private({p})` names a per-thread local: declare it before the loop, `let mut {p}: T;` (or with \
                     a value)"
                ),
            )),
        }
    }
    let reductions: Vec<BindingId> = region
        .reductions
        .iter()
        .filter_map(|(_, v)| ws.reduction_var(v))
        .collect();
    own.extend(&reductions);
    let outer: Vec<BindingId> = ws
        .lets_before()
        .into_iter()
        .filter(|id| !own.contains(id))
        .collect();
    let mut c = Races {
        res,
        objects: &objects,
        exclusive: &exclusive,
        outer: &outer,
        reductions: &reductions,
        index: ws.index.to_string(),
        vars: ws.nest_vars(),
        collapsed: ws
            .inner
            .iter()
            .map(|(_, j, m)| {
                (
                    j.to_string(),
                    m.map(|m| quote::ToTokens::to_token_stream(m).to_string()),
                )
            })
            .collect(),
        in_loop: false,
        writing: false,
        errors: Vec::new(),
    };
    for stmt in &block.stmts {
        match stmt {
            Stmt::Expr(Expr::ForLoop(f), _) if std::ptr::eq(f, ws.for_loop) => {
                c.visit_expr(&f.expr);
                c.in_loop = true;
                c.visit_block(&f.body);
                c.in_loop = false;
            }
            other => c.visit_stmt(other),
        }
    }
    for (span, msg) in c.errors {
        errors.push(syn::Error::new(span, msg));
    }
}

struct Races<'a> {
    res: &'a Resolved,
    /// `&mut T` parameters.
    objects: &'a [BindingId],
    exclusive: &'a [BindingId],
    /// The per-thread `let`s before the loop that are neither reduction variables nor `private`.
    outer: &'a [BindingId],
    reductions: &'a [BindingId],
    /// The loop variable's name, for messages.
    index: String,
    /// The nest's variables' bindings, outermost first.
    vars: Vec<Option<BindingId>>,
    /// Under `collapse(n)`: the inner variables and the inner bounds' tokens, outermost first, for messages.
    collapsed: Vec<(String, Option<String>)>,
    in_loop: bool,
    /// Visiting a place being written (not read).
    writing: bool,
    errors: Vec<(Span, String)>,
}

fn name(e: &Expr) -> Option<String> {
    match e {
        Expr::Path(p) if p.qself.is_none() => p.path.get_ident().map(crate::resolve::key),
        Expr::Paren(p) => name(&p.expr),
        _ => None,
    }
}

impl Races<'_> {
    /// The bindings `e` may name, if it is a plain local (every one a macro may have left it as).
    fn names(&self, e: &Expr) -> Vec<BindingId> {
        self.res.expr(e).map_or(Vec::new(), |id| self.res.maybe(id))
    }

    fn is(&self, e: &Expr, set: &[BindingId]) -> bool {
        self.names(e).iter().any(|id| set.contains(id))
    }

    /// Whether `ix` is an index this iteration owns: its element, its flat index under `collapse(n)` (any strides:
    /// the lowering computes them once and checks each inner index against its stride), or a row `i * m + e`.
    fn owned(&self, ix: &Expr) -> bool {
        let Some(Some(i)) = self.vars.first() else {
            return false;
        };
        if self.vars.len() == 1 {
            loop_index(self.res, ix) == Some(*i) || row_stride(self.res, ix, *i).is_some()
        } else {
            flat_strides(self.res, ix, &self.vars).is_some()
        }
    }
}

impl<'ast> Visit<'ast> for Races<'_> {
    fn visit_expr(&mut self, e: &'ast Expr) {
        match e {
            Expr::Path(_) if self.is(e, self.objects) => {
                let n = name(e).unwrap_or_default();
                self.errors.push((
                    e.span(),
                    format!(
                        "`{n}` is a `&mut` to one object, and every thread of the loop would write it at once: take a \
                         `&mut [T]` and write `{n}[{}]`, or use atomics",
                        self.index
                    ),
                ));
            }
            Expr::MethodCall(m)
                if m.method == "len"
                    && m.args.is_empty()
                    && self.is(&m.receiver, self.exclusive)
                    && !self.is(&m.receiver, self.objects) => {}
            Expr::Index(ix)
                if self.is(&ix.expr, self.exclusive) && !self.is(&ix.expr, self.objects) =>
            {
                let n = name(&ix.expr).unwrap_or_default();
                if !(self.in_loop && self.owned(&ix.index)) {
                    let msg = if self.in_loop && !self.writing {
                        format!(
                            "reading `{n}[{index}]` races: `{n}` is `&mut`, and the iteration that owns that element \
                             may be writing it on another thread at the same time; read only `{n}[{own}]`, or take the \
                             values to read as a separate `&[T]` parameter (a copy made before the region, as \
                             Jacobi's `a` and `anew`), or declare the region `unsafe fn`",
                            index = quote::ToTokens::to_token_stream(&*ix.index),
                            own = self.flat_index()
                        )
                    } else if self.in_loop && name(&ix.index).is_some_and(|i| i == self.index) {
                        format!(
                            "`{n}[{i}]`: this `{i}` is not the loop variable but a name that rebinds it (a `let`, a \
                             closure's parameter, an inner loop's variable), so the element may be another \
                             iteration's; index with the loop variable itself, or declare the region `unsafe fn`",
                            i = self.index
                        )
                    } else if self.in_loop {
                        format!(
                            "`{n}` is `&mut` and every thread has it: index it with the loop variable (`{n}[{}]`) so \
                             each element is written by one thread only, or declare the region `unsafe fn`",
                            self.flat_index()
                        )
                    } else {
                        format!(
                            "`{n}` is `&mut` and every thread runs this part of the body: touch it only inside the \
                             work-shared loop, as `{n}[{}]`",
                            self.index
                        )
                    };
                    self.errors.push((ix.expr.span(), msg));
                }
                // The index itself is read.
                let was = std::mem::replace(&mut self.writing, false);
                self.visit_expr(&ix.index);
                self.writing = was;
            }
            Expr::Path(_) if self.is(e, self.exclusive) => {
                let n = name(e).unwrap_or_default();
                self.errors.push((
                    e.span(),
                    format!(
                        "`{n}` is `&mut` and shared by every thread of the loop: use it only as `{n}[{}]` or \
                         `{n}.len()`, or declare the region `unsafe fn`",
                        self.index
                    ),
                ));
            }
            Expr::Assign(a) if self.in_loop => {
                self.check_assigned(&a.left);
                self.written(&a.left);
                self.visit_expr(&a.right);
            }
            Expr::Binary(b) if self.in_loop && is_compound_assign(&b.op) => {
                self.check_assigned(&b.left);
                self.written(&b.left);
                self.visit_expr(&b.right);
            }
            Expr::Reference(r) if r.mutability.is_some() => {
                if self.in_loop {
                    self.check_assigned(&r.expr);
                }
                self.written(&r.expr)
            }
            _ => syn::visit::visit_expr(self, e),
        }
    }

    // A macro's arguments are tokens the lowering cannot see into: a view named there would not be reached through
    // an iteration's token (a type error at best), and a reduction variable there would not be the thread's private
    // copy, so say why.
    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        let ids: Vec<BindingId> = self
            .res
            .in_macro(m)
            .iter()
            .flat_map(|id| self.res.maybe(*id))
            .collect();
        for id in ids {
            let n = &self.res.bindings[id].ident;
            if self.exclusive.contains(&id) {
                self.errors.push((
                    m.span(),
                    format!(
                        "`{n}` is `&mut`, which a parallel region reaches only through `{n}[{}]` written outside \
                         macros (the lowering cannot see into a macro's arguments); compute the value into a `let` \
                         first",
                        self.index
                    ),
                ));
            } else if self.in_loop && self.reductions.contains(&id) {
                self.errors.push((
                    m.span(),
                    format!(
                        "`{n}` is a reduction variable, which the loop reaches as each thread's private copy; the \
                         lowering cannot see into a macro's arguments to make it so: use `{n}` outside the macro \
                         (`let v = {n};` first)"
                    ),
                ));
            }
        }
    }

    // Items' names are out of scope of this rule.
    fn visit_item(&mut self, _: &'ast syn::Item) {}
}

/// Names starting `__offload` are the lowering's: in the device crate (plain text) a body could name or shadow them.
pub fn check_reserved(block: &Block, errors: &mut Errors) {
    fn walk(ts: proc_macro2::TokenStream, errors: &mut Errors) {
        for tt in ts {
            match tt {
                proc_macro2::TokenTree::Ident(i)
                    if crate::resolve::key(&i).starts_with("__offload") =>
                {
                    errors.push(syn::Error::new(
                        i.span(),
                        format!("`{i}`: names starting `__offload` are reserved for the code `#[target]` generates"),
                    ))
                }
                proc_macro2::TokenTree::Group(g) => walk(g.stream(), errors),
                _ => {}
            }
        }
    }
    walk(quote::ToTokens::to_token_stream(block), errors);
}

impl Races<'_> {
    /// The flat index as the user should write it, for messages.
    fn flat_index(&self) -> String {
        self.collapsed
            .iter()
            .fold(self.index.clone(), |outer, (j, m)| {
                let outer = if outer.contains(' ') {
                    format!("({outer})")
                } else {
                    outer
                };
                format!("{outer} * {} + {j}", m.as_deref().unwrap_or("m"))
            })
    }

    /// Visits a place the code writes (an assignment's left side, a `&mut`'s operand).
    fn written(&mut self, place: &Expr) {
        let was = std::mem::replace(&mut self.writing, true);
        self.visit_expr(place);
        self.writing = was;
    }

    /// A place written in the loop (`x = ..`, `x[k] += ..`, `x.f = ..`, `&mut x`) whose root is declared before it.
    fn check_assigned(&mut self, left: &Expr) {
        let mut root = left;
        loop {
            root = match root {
                Expr::Index(ix) => &ix.expr,
                Expr::Field(f) => &f.base,
                Expr::Paren(p) => &p.expr,
                Expr::Group(g) => &g.expr,
                _ => break,
            };
        }
        if self.is(root, self.outer) {
            let n = name(root).unwrap_or_default();
            self.errors.push((
                left.span(),
                format!(
                    "`{n}` is declared before the work-shared loop, so every thread updates its own copy and only \
                     one would be returned; declare it inside the loop, or combine the copies with `reduction(op: {n})`"
                ),
            ));
        }
    }
}

fn is_compound_assign(op: &syn::BinOp) -> bool {
    use syn::BinOp::*;
    matches!(
        op,
        AddAssign(_)
            | SubAssign(_)
            | MulAssign(_)
            | DivAssign(_)
            | RemAssign(_)
            | BitXorAssign(_)
            | BitAndAssign(_)
            | BitOrAssign(_)
            | ShlAssign(_)
            | ShrAssign(_)
    )
}

/// A reduction variable is the `let mut var = INIT;` in scope where the loop starts (a name shadowed before it is
/// another variable), and the body's tail is exactly that variable (a tuple of the variables, in clause order, for
/// several).
pub fn check_reduction(
    block: &Block,
    ws: &WorkShared,
    vars: &[(crate::clause::ReduceOp, syn::Ident)],
    errors: &mut Errors,
) {
    let mut ids = Vec::new();
    for (_, var) in vars {
        match ws.reduction_var(var) {
            Some(id) => ids.push(Some(id)),
            None => {
                ids.push(None);
                errors.push(syn::Error::new(
                    var.span(),
                    format!(
                        "declare the reduction variable before the loop with its initial value: `let mut {var} = ..;`"
                    ),
                ));
            }
        }
    }
    let is = |e: &Expr, k: usize| ids[k].is_some() && ws.res.expr(e) == ids[k];
    let tail_ok = match (block.stmts.last(), ids.len()) {
        (Some(Stmt::Expr(e, None)), 1) => is(e, 0),
        (Some(Stmt::Expr(Expr::Tuple(t), None)), n) => {
            t.elems.len() == n && t.elems.iter().enumerate().all(|(k, e)| is(e, k))
        }
        _ => false,
    };
    if !tail_ok {
        let names: Vec<String> = vars.iter().map(|(_, v)| v.to_string()).collect();
        let span = block.stmts.last().map_or(block.span(), |s| s.span());
        let want = match names.as_slice() {
            [one] => one.clone(),
            more => format!("({})", more.join(", ")),
        };
        errors.push(syn::Error::new(
            span,
            format!("a reduction region ends with its variables: make the tail `{want}`"),
        ));
    }
}

/// Every use of the reduction variable `var` in the nest's body (a path bound to it), which the lowering renames to
/// the current lane's private copy.
pub fn reduction_uses<'a>(ws: &'a WorkShared, var: &syn::Ident) -> Vec<&'a syn::ExprPath> {
    struct Uses<'a, 'r> {
        res: &'r Resolved,
        var: BindingId,
        out: Vec<&'a syn::ExprPath>,
    }
    impl<'a> Visit<'a> for Uses<'a, '_> {
        fn visit_expr_path(&mut self, p: &'a syn::ExprPath) {
            if self.res.id_of(p) == Some(self.var) {
                self.out.push(p);
            }
        }
        fn visit_item(&mut self, _: &'a syn::Item) {}
    }
    let Some(var) = ws.reduction_var(var) else {
        return Vec::new();
    };
    let mut u = Uses {
        res: &ws.res,
        var,
        out: Vec::new(),
    };
    u.visit_block(ws.body());
    u.out
}

/// Whether a `&mut` parameter's element may be reached inside a parallel body only through a view: every
/// parallel region's `&mut [T]` and `&mut DeviceBuffer<T>`.
pub fn is_view(region: &Region, kind: &ParamKind) -> bool {
    (region.work_shared || region.spmd)
        && matches!(
            kind,
            ParamKind::Slice { mutable: true, .. } | ParamKind::DeviceBuffer { mutable: true }
        )
}

/// The uniformity rule: the work-shared loops' bounds must be the same in every thread, or the threads' shares of
/// "one" iteration space would overlap and two threads would own one element. So the bounds (and `step_by`'s step)
/// may use only integer literals, the region's by-value integer parameters, `x.len()` of its slice parameters,
/// constants and statics, per-thread `let`s computed from these alone, and arithmetic on them. `unsafe fn` regions
/// opt out.
pub fn check_uniform(region: &Region, ws: &WorkShared, errors: &mut Errors) {
    if region.is_unsafe {
        return;
    }
    let (env, _) = uniform_env(region, ws);
    check_uniform_parts(region, ws, &env, errors);
}

/// The per-thread `let`s the values every thread must compute alike use (bounds, steps, strides, row length, chunk
/// size), directly or through each other: their initial values. Other `let`s may hold anything.
pub fn uniform_lets<'a>(region: &Region, ws: &WorkShared<'a>) -> Vec<&'a Expr> {
    // The parts are evaluated where the loop starts: what their names mean there.
    let mut needed: BTreeSet<BindingId> = BTreeSet::new();
    for e in uniform_parts(region, ws) {
        let mut names = BTreeSet::new();
        collect_idents(quote::ToTokens::to_token_stream(e), &mut names);
        needed.extend(names.iter().filter_map(|n| ws.at_loop(n)));
    }
    // Latest first: a `let` is needed if a root or a later needed `let` names it.
    let mut out = Vec::new();
    for (id, init) in uniform_env(region, ws).1.into_iter().rev() {
        if needed.contains(&id) {
            needed.extend(ws.res.used_in(init));
            out.push(init);
        }
    }
    out
}

/// The chunk size of `schedule(static, c)` / `schedule(dynamic, c)`: threads dealing chunks of different sizes would
/// overlap.
fn chunk(region: &Region) -> Option<&Expr> {
    use crate::clause::Schedule;
    match &region.schedule {
        Some(Schedule::StaticChunk(c) | Schedule::Dynamic(Some(c))) => Some(c),
        _ => None,
    }
}

/// What every thread must compute alike: the nest's ranges, the strides of its flat index, the row length, and the
/// chunk size (a clause's, resolved where the loop starts).
fn uniform_parts<'b>(region: &'b Region, ws: &'b WorkShared) -> Vec<&'b Expr> {
    let loops = std::iter::once(&*ws.for_loop.expr).chain(ws.inner.iter().map(|l| &*l.0.expr));
    let mut parts: Vec<&Expr> = loops.flat_map(range_parts).collect();
    parts.extend(nest_strides(region, ws).unwrap_or_default());
    parts.extend(row_length(region, ws));
    parts.extend(chunk(region));
    parts
}

/// `e` (which the uniformity rule accepted) computed from primitive integers only: every leaf goes through
/// `__lanes::int` (so only the built-in operators apply to it), a slice's `len()` through `__lanes::len`, and
/// `(a..b).step_by(s)` is `Iterator::step_by`: no operator, method or trait of the user's can make it differ between
/// threads.
pub fn harden(e: &Expr) -> Expr {
    let h = |e: &Expr| Box::new(harden(e));
    match e {
        // A mapper struct's field (the uniformity rule admits no other field).
        Expr::Lit(_) | Expr::Path(_) | Expr::Field(_) => {
            syn::parse_quote_spanned!(e.span()=> ::offload::__lanes::int(#e))
        }
        Expr::Paren(p) => Expr::Paren(syn::ExprParen {
            expr: h(&p.expr),
            ..p.clone()
        }),
        Expr::Group(g) => Expr::Group(syn::ExprGroup {
            expr: h(&g.expr),
            ..g.clone()
        }),
        // A leaf cast to an integer may be any primitive number (`N as usize` of an `f64` constant).
        Expr::Cast(c) if matches!(strip(&c.expr), Expr::Lit(_) | Expr::Path(_)) => {
            let x = &c.expr;
            Expr::Cast(syn::ExprCast {
                expr: Box::new(syn::parse_quote_spanned!(x.span()=> ::offload::__lanes::num(#x))),
                ..c.clone()
            })
        }
        Expr::Cast(c) => Expr::Cast(syn::ExprCast {
            expr: h(&c.expr),
            ..c.clone()
        }),
        Expr::Unary(u) => Expr::Unary(syn::ExprUnary {
            expr: h(&u.expr),
            ..u.clone()
        }),
        Expr::Binary(b) => Expr::Binary(syn::ExprBinary {
            left: h(&b.left),
            right: h(&b.right),
            ..b.clone()
        }),
        Expr::Range(r) => Expr::Range(syn::ExprRange {
            start: r.start.as_deref().map(h),
            end: r.end.as_deref().map(h),
            ..r.clone()
        }),
        // Every `len()` the rule accepted (a slice parameter's, a mapper field's, a constant's or a static's), by
        // path: a user's trait giving an integer constant a `len` method cannot stand in for a length.
        Expr::MethodCall(m) if m.method == "len" && m.args.is_empty() => {
            let x = &m.receiver;
            syn::parse_quote_spanned!(e.span()=> ::offload::__lanes::len(&#x))
        }
        Expr::MethodCall(m) if m.method == "step_by" && m.args.len() == 1 => {
            // The range as an argument needs no parentheses (they would draw `unused_parens`).
            let (r, step) = (h(strip(&m.receiver)), h(&m.args[0]));
            syn::parse_quote_spanned!(e.span()=> ::core::iter::Iterator::step_by(#r, #step))
        }
        Expr::MethodCall(m) => Expr::MethodCall(syn::ExprMethodCall {
            receiver: h(&m.receiver),
            args: m.args.iter().map(harden).collect(),
            ..m.clone()
        }),
        e => e.clone(),
    }
}

/// The uniform bindings, and the uniform `let`s' values in order.
fn uniform_env<'a, 'r>(
    region: &Region,
    ws: &'r WorkShared<'a>,
) -> (Uniform<'r>, Vec<(BindingId, &'a Expr)>) {
    let mut lets = Vec::new();
    let mut env = Uniform {
        res: &ws.res,
        at: None,
        ints: BTreeSet::new(),
        slices: BTreeSet::new(),
        mappers: BTreeSet::new(),
    };
    for (k, p) in region.params.iter().enumerate() {
        let id = ws.res.param(k);
        match &p.kind {
            // Its body may change it.
            _ if p.mut_binding => {}
            ParamKind::Value if is_int_type(&p.ty) => {
                env.ints.insert(id);
            }
            ParamKind::Slice { .. } | ParamKind::DeviceBuffer { .. } => {
                env.slices.insert(id);
            }
            // A mapper struct taken by value (and not `mut`): every thread gets the same fields, which its body
            // cannot assign, so `g.n` and `g.x.len()` are uniform.
            ParamKind::Mapper { by_ref: None } => {
                env.mappers.insert(id);
            }
            // Other values, references and device pointers: only their own methods could read them, and those are
            // not known to be pure.
            _ => {}
        }
    }
    // In order, so each `let` is judged by what it may name.
    for (k, l) in ws.lets.iter().enumerate() {
        let uniform = l
            .init
            .as_ref()
            .is_some_and(|i| i.diverge.is_none() && env.check(&i.expr).is_ok());
        let id = (0..ws.res.bindings.len()).find(|&id| {
            let b = &ws.res.bindings[id];
            b.site == Site::Let(k) && b.simple && !b.mutable
        });
        if let (Some(id), true, Some(init)) = (id, uniform, &l.init) {
            env.ints.insert(id);
            lets.push((id, &*init.expr));
        }
    }
    (env, lets)
}

fn check_uniform_parts(region: &Region, ws: &WorkShared, env: &Uniform, errors: &mut Errors) {
    const MSG: &str = "a work-shared loop's bounds must be the same in every thread (each thread runs the body's \
                       `let`s itself, and takes its share of the range it computed): compute them from integer \
                       literals, the region's integer parameters, `x.len()` of its slices, constants, and `let`s made \
                       of these, with arithmetic; or declare the region `unsafe fn`";
    let env = Uniform {
        at: Some(ws.at),
        ..env.clone()
    };
    for part in uniform_parts(region, ws) {
        if let Err(span) = env.check(part) {
            errors.push(syn::Error::new(span, MSG));
        }
    }
}

/// The bounds of `a..b` or `(a..b).step_by(s)`: `a`, `b` and `s`.
fn range_parts(e: &Expr) -> Vec<&Expr> {
    match e {
        Expr::Range(r) => r.start.iter().chain(&r.end).map(|b| &**b).collect(),
        Expr::Paren(p) => range_parts(&p.expr),
        Expr::MethodCall(m) if m.method == "step_by" => {
            let mut v = range_parts(&m.receiver);
            v.extend(m.args.iter());
            v
        }
        e => vec![e],
    }
}

/// A primitive number, `bool` or `char`: cheap to copy.
pub fn is_primitive_type(ty: &syn::Type) -> bool {
    is_int_type(ty)
        || matches!(ty, syn::Type::Path(p) if p.qself.is_none()
            && p.path.get_ident().is_some_and(|i| ["f32", "f64", "bool", "char"].contains(&&*i.to_string())))
}

fn is_int_type(ty: &syn::Type) -> bool {
    const INTS: &[&str] = &[
        "u8", "u16", "u32", "u64", "u128", "usize", "i8", "i16", "i32", "i64", "i128", "isize",
    ];
    matches!(ty, syn::Type::Path(p) if p.qself.is_none() && p.path.get_ident().is_some_and(|i| INTS.contains(&&*i.to_string())))
}

/// What a uniform bound may name, as the body's `let`s are read in order: bindings, never spellings.
#[derive(Clone)]
struct Uniform<'r> {
    res: &'r Resolved,
    /// `Some(k)`: judge expressions as the lowering evaluates them, before the body's statement `k` (the loop): the
    /// nest's ranges, strides, row length and chunk size are all moved there. `None`: where they are written.
    at: Option<usize>,
    /// Integer-valued bindings every thread sees alike: integer parameters and uniform `let`s.
    ints: BTreeSet<BindingId>,
    /// Slice parameters, whose `len()` is uniform.
    slices: BTreeSet<BindingId>,
    /// By-value mapper struct parameters: their fields (`g.n`) and slice fields' `len()` are uniform.
    mappers: BTreeSet<BindingId>,
}

impl Uniform<'_> {
    /// Whether the local `e` names is in `set`; `None` if it names no local (a constant or a static, the same for
    /// every thread).
    fn local(&self, e: &Expr, set: &BTreeSet<BindingId>) -> Option<bool> {
        let Expr::Path(p) = strip(e) else {
            return Some(false);
        };
        let id = match self.at {
            Some(k) => self.res.before(k, &p.path.get_ident()?.to_string())?,
            None => self.res.id_of(p)?,
        };
        // A name a macro may have rebound is not known to be anything.
        Some(self.res.maybe(id).len() == 1 && set.contains(&id))
    }

    /// `Ok` if `e` evaluates alike in every thread, else the span of the first part that may not.
    fn check(&self, e: &Expr) -> Result<(), Span> {
        // Methods of the integer types that read only their operands.
        const PURE: &[&str] = &[
            "min",
            "max",
            "clamp",
            "pow",
            "abs",
            "unsigned_abs",
            "div_ceil",
            "next_multiple_of",
            "saturating_add",
            "saturating_sub",
            "saturating_mul",
            "wrapping_add",
            "wrapping_sub",
            "wrapping_mul",
            "isqrt",
            "ilog2",
        ];
        let check = |e: &Expr| self.check(e);
        match e {
            Expr::Lit(l) if matches!(l.lit, syn::Lit::Int(_)) => Ok(()),
            Expr::Paren(p) => check(&p.expr),
            Expr::Group(g) => check(&g.expr),
            Expr::Path(p) if p.qself.is_none() && p.path.get_ident().is_some() => {
                match self.local(e, &self.ints) {
                    Some(false) => Err(e.span()),
                    _ => Ok(()),
                }
            }
            Expr::Path(p) if p.qself.is_none() => Ok(()),
            Expr::Field(_) if self.mapper_field(e) => Ok(()),
            Expr::MethodCall(m)
                if m.method == "len" && m.args.is_empty() && self.mapper_field(&m.receiver) =>
            {
                Ok(())
            }
            Expr::Cast(c) if is_int_type(&c.ty) => check(&c.expr),
            Expr::Unary(u) if matches!(u.op, syn::UnOp::Neg(_)) => check(&u.expr),
            Expr::Binary(b) if !is_compound_assign(&b.op) => {
                check(&b.left)?;
                check(&b.right)
            }
            Expr::MethodCall(m)
                if m.method == "len"
                    && m.args.is_empty()
                    && self.local(&m.receiver, &self.slices) != Some(false)
                    && name(&m.receiver).is_some() =>
            {
                Ok(())
            }
            Expr::MethodCall(m)
                if PURE.contains(&&*m.method.to_string()) && m.turbofish.is_none() =>
            {
                self.check_int(&m.receiver)?;
                m.args.iter().try_for_each(check)
            }
            _ => Err(e.span()),
        }
    }

    /// `g.f`: a named field of a by-value mapper struct parameter.
    fn mapper_field(&self, e: &Expr) -> bool {
        match e {
            Expr::Field(f) => {
                matches!(f.member, syn::Member::Named(_))
                    && self.local(&f.base, &self.mappers) == Some(true)
            }
            Expr::Paren(p) => self.mapper_field(&p.expr),
            _ => false,
        }
    }

    /// As [`Uniform::check`], for a method receiver: its type must be an integer's, so the method is the integer
    /// type's own.
    fn check_int(&self, e: &Expr) -> Result<(), Span> {
        match e {
            Expr::Lit(l) if matches!(l.lit, syn::Lit::Int(_)) => Ok(()),
            Expr::Paren(p) => self.check_int(&p.expr),
            Expr::Path(_) if self.local(e, &self.ints) == Some(true) => Ok(()),
            Expr::Field(_) if self.mapper_field(e) => Ok(()),
            Expr::Cast(c) if is_int_type(&c.ty) => self.check(&c.expr),
            Expr::MethodCall(m) if m.method == "len" => self.check(e),
            _ => Err(e.span()),
        }
    }
}

/// The binding indexing with a loop variable uses: `i`, or `i as usize` for a loop over another integer type.
fn loop_index(res: &Resolved, e: &Expr) -> Option<BindingId> {
    match e {
        Expr::Cast(c) if matches!(&*c.ty, syn::Type::Path(p) if p.path.is_ident("usize")) => {
            copy_of(res, &c.expr)
        }
        Expr::Paren(p) => loop_index(res, &p.expr),
        e => copy_of(res, e),
    }
}

/// The binding whose value the plain local `e` holds (through `let j = i as usize;` copies). Which element a view
/// index reaches is checked again when it runs (`Own::at`), so a copy in another integer type that changed the value
/// fails the region there.
fn copy_of(res: &Resolved, e: &Expr) -> Option<BindingId> {
    res.expr(e).map(|id| res.root(id))
}

/// A plain name, as an expression (`y`, `(y)`).
pub fn name_of(e: &Expr) -> Option<String> {
    name(e)
}

/// Under `collapse(n)`: the strides `[m, p, ..]` of the first view index in the nest's body written as the flat
/// index `(i * m + j) * p + k`. The lowering computes them once, before the loop, and an iteration owns the element
/// at its flat index with these strides; `None` when no view index is written so (then no element is owned).
pub fn nest_strides<'a>(region: &Region, ws: &WorkShared<'a>) -> Option<Vec<&'a Expr>> {
    if ws.inner.is_empty() {
        return None;
    }
    let vars = ws.nest_vars();
    first_view_index(region, ws, |e| flat_strides(&ws.res, e, &vars))
}

/// Without `collapse`: the row length `m` of the first view index in the loop's body written `i * m + e` (each
/// iteration then owns the row `[i * m, i * m + m)`; the lowering computes `m` once, before the loop).
pub fn row_length<'a>(region: &Region, ws: &WorkShared<'a>) -> Option<&'a Expr> {
    if !ws.inner.is_empty() {
        return None;
    }
    let i = ws.res.loop_var(ws.for_loop)?;
    first_view_index(region, ws, |e| row_stride(&ws.res, e, i).map(|m| vec![m]))
        .and_then(|v| v.into_iter().next())
}

/// `m` when `e` is written `i * m + e2` (`i` the loop variable's binding).
fn row_stride<'a>(res: &Resolved, e: &'a Expr, index: BindingId) -> Option<&'a Expr> {
    let (x, m, _) = mul_add(e)?;
    (copy_of(res, x) == Some(index)).then_some(m)
}

/// `(x, m, y)` when `e` is written `x * m + y`.
fn mul_add(e: &Expr) -> Option<(&Expr, &Expr, &Expr)> {
    let Expr::Binary(add) = strip(e) else {
        return None;
    };
    let Expr::Binary(mul) = strip(&add.left) else {
        return None;
    };
    (matches!(add.op, syn::BinOp::Add(_)) && matches!(mul.op, syn::BinOp::Mul(_))).then_some((
        &*mul.left,
        &*mul.right,
        &*add.right,
    ))
}

fn strip(e: &Expr) -> &Expr {
    match e {
        Expr::Paren(p) => strip(&p.expr),
        Expr::Group(g) => strip(&g.expr),
        e => e,
    }
}

/// What `f` finds in the first view index of the loop's (innermost) body for which it finds anything.
fn first_view_index<'a, R>(
    region: &Region,
    ws: &WorkShared<'a>,
    f: impl Fn(&'a Expr) -> Option<R>,
) -> Option<R> {
    struct V<'a, 'r, R, F> {
        res: &'r Resolved,
        views: Vec<BindingId>,
        f: F,
        out: Option<R>,
        _a: std::marker::PhantomData<&'a ()>,
    }
    impl<'a, R, F: Fn(&'a Expr) -> Option<R>> Visit<'a> for V<'a, '_, R, F> {
        fn visit_expr_index(&mut self, ix: &'a syn::ExprIndex) {
            if self.out.is_none()
                && self
                    .res
                    .expr(&ix.expr)
                    .is_some_and(|id| self.views.contains(&id))
            {
                self.out = (self.f)(&ix.index);
            }
            syn::visit::visit_expr_index(self, ix);
        }
        fn visit_item(&mut self, _: &'a syn::Item) {}
    }
    let mut v = V {
        res: &ws.res,
        views: region
            .params
            .iter()
            .enumerate()
            .filter(|(_, p)| is_view(region, &p.kind))
            .map(|(k, _)| ws.res.param(k))
            .collect(),
        f,
        out: None,
        _a: std::marker::PhantomData,
    };
    v.visit_block(ws.body());
    v.out
}

/// `[m, p]` when `e` is written `(i * m + j) * p + k`, `vars` the nest's variables' bindings `[i, j, k]`.
fn flat_strides<'a>(
    res: &Resolved,
    e: &'a Expr,
    vars: &[Option<BindingId>],
) -> Option<Vec<&'a Expr>> {
    let mut strides = Vec::new();
    let mut e = e;
    for j in vars[1..].iter().rev() {
        let (x, m, y) = mul_add(e)?;
        if j.is_none() || copy_of(res, y) != *j {
            return None;
        }
        strides.push(m);
        e = x;
    }
    (vars[0].is_some() && copy_of(res, e) == vars[0]).then(|| {
        strides.reverse();
        strides
    })
}

/// The per-thread `let`s before the loop that its iterations use: directly, in a macro, or through another such
/// `let`'s value (`let r = &c;`, a closure capturing `c`). Each thread runs its own copy of them, so a value one
/// iteration changed would be seen by that thread's next iterations only, and only one thread's copy would remain:
/// the loop body may read them, never change them. Reduction variables and `private(..)` locals, which are the
/// thread's own by intent, are not among them, but what they are made from is.
///
/// The lowering rebinds the directly used ones as immutable copies at the top of each iteration (assigning one,
/// `x[k] += 1` and `&mut x` included, is a compile error), and has every one of them pass
/// `offload::__lanes::across`, which only `Copy` types pass: `Copy` is the type-level proof that a value has no
/// interior mutability (`UnsafeCell`, under `Cell`, `RefCell` and the atomics, is not `Copy`), so an iteration cannot
/// change one through `&self` either. A reference to such a value must be to a `let` of this set (checked with it),
/// never to a temporary, and a `ref` binding is refused: [`check_across`].
pub fn across_loop(region: &Region, ws: &WorkShared) -> Across {
    let res = &ws.res;
    let lets = ws.lets_before();
    let own: Vec<BindingId> = region
        .reductions
        .iter()
        .filter_map(|(_, v)| ws.reduction_var(v))
        .chain(
            region
                .private
                .iter()
                .filter_map(|p| ws.at_loop(&p.to_string())),
        )
        .collect();
    let direct: Vec<BindingId> = res
        .used_in(ws.body())
        .into_iter()
        .filter(|id| lets.contains(id) && !own.contains(id))
        .collect();
    let mut reached = direct.clone();
    let mut k = 0;
    while k < reached.len() {
        if let Site::Let(stmt) = res.bindings[reached[k]].site {
            if let Some(init) = &ws.lets[stmt].init {
                let mut from = res.used_in(&*init.expr);
                if let Some((_, e)) = &init.diverge {
                    from.extend(res.used_in(&**e));
                }
                for id in from {
                    if lets.contains(&id) && !reached.contains(&id) {
                        reached.push(id);
                    }
                }
            }
        }
        k += 1;
    }
    Across { direct, reached }
}

/// [`across_loop`]'s answer.
pub struct Across {
    /// Used in the loop body itself: rebound there as immutable copies.
    pub direct: Vec<BindingId>,
    /// Those and what their values are made from: each must pass `offload::__lanes::across` right after its `let`.
    pub reached: Vec<BindingId>,
}

/// What [`across_loop`]'s type check cannot see: a `ref` binding (the binding is a reference to the matched value,
/// which is not checked) and a reference to a temporary in a `let`'s value (`&Cell::new(0)`, kept alive by the `let`
/// and never checked itself). Both fail closed.
pub fn check_across(region: &Region, ws: &WorkShared, errors: &mut Errors) {
    if region.is_unsafe {
        return;
    }
    let across = across_loop(region, ws);
    let mut lets_seen = BTreeSet::new();
    for &id in &across.reached {
        let b = &ws.res.bindings[id];
        let Site::Let(k) = b.site else { continue };
        if b.by_ref {
            errors.push(syn::Error::new(
                b.ident.span(),
                format!(
                    "`{}` is used by the work-shared loop and bound by `ref`: bind it by value (every value the \
                     loop shares across its iterations must be `Copy`, so none can be changed through it)",
                    b.ident
                ),
            ));
        }
        if !lets_seen.insert(k) {
            continue;
        }
        if let Some(init) = &ws.lets[k].init {
            for r in extended_temporaries(&init.expr) {
                errors.push(syn::Error::new(
                    r.span(),
                    format!(
                        "`{}` is used by the work-shared loop and holds a reference to a temporary value, whose type \
                         the loop's check cannot see (it must have no interior mutability, as `Cell` and atomics \
                         have): bind the value with its own `let` first, and refer to that",
                        b.ident
                    ),
                ));
            }
        }
    }
}

/// The `&EXPR` in a `let`'s value whose temporary the `let` keeps alive (its operand is not a place, nor literals
/// only), in the positions where Rust extends a temporary's life.
fn extended_temporaries(e: &Expr) -> Vec<&syn::ExprReference> {
    fn place(e: &Expr) -> bool {
        match e {
            Expr::Path(_) => true,
            Expr::Field(f) => place(&f.base),
            Expr::Index(i) => place(&i.expr),
            Expr::Paren(p) => place(&p.expr),
            Expr::Group(g) => place(&g.expr),
            Expr::Unary(u) => matches!(u.op, syn::UnOp::Deref(_)),
            _ => false,
        }
    }
    fn literal(e: &Expr) -> bool {
        match e {
            Expr::Lit(_) => true,
            Expr::Unary(u) if matches!(u.op, syn::UnOp::Neg(_)) => literal(&u.expr),
            Expr::Array(a) => a.elems.iter().all(literal),
            Expr::Repeat(r) => literal(&r.expr),
            Expr::Tuple(t) => t.elems.iter().all(literal),
            Expr::Paren(p) => literal(&p.expr),
            _ => false,
        }
    }
    fn walk<'e>(e: &'e Expr, out: &mut Vec<&'e syn::ExprReference>) {
        match e {
            Expr::Reference(r) => {
                if !place(&r.expr) && !literal(&r.expr) {
                    out.push(r);
                }
                walk(&r.expr, out);
            }
            Expr::Paren(p) => walk(&p.expr, out),
            Expr::Group(g) => walk(&g.expr, out),
            Expr::Cast(c) => walk(&c.expr, out),
            Expr::Tuple(t) => t.elems.iter().for_each(|e| walk(e, out)),
            Expr::Array(a) => a.elems.iter().for_each(|e| walk(e, out)),
            Expr::Struct(s) => s.fields.iter().for_each(|f| walk(&f.expr, out)),
            Expr::Call(c) if matches!(&*c.func, Expr::Path(_)) => {
                c.args.iter().for_each(|e| walk(e, out))
            }
            Expr::Block(b) => block_tail(&b.block, out),
            Expr::Unsafe(u) => block_tail(&u.block, out),
            Expr::If(i) => {
                block_tail(&i.then_branch, out);
                if let Some((_, e)) = &i.else_branch {
                    walk(e, out);
                }
            }
            Expr::Match(m) => m.arms.iter().for_each(|a| walk(&a.body, out)),
            _ => {}
        }
    }
    fn block_tail<'e>(b: &'e Block, out: &mut Vec<&'e syn::ExprReference>) {
        if let Some(Stmt::Expr(e, None)) = b.stmts.last() {
            walk(e, out);
        }
    }
    let mut out = Vec::new();
    walk(e, &mut out);
    out
}

/// `barrier()`, `team_shared()` and `team_shared_raw()` written in a region that is not `teams, parallel`: a barrier
/// in a work-shared loop waits for threads that may have no iteration, and a work-shared reduction keeps its partials
/// where team-shared memory would be. (Calls the macro cannot see fail at run time.)
pub fn check_team_calls(block: &Block, errors: &mut Errors) {
    struct V<'e>(&'e mut Errors);
    impl<'a> Visit<'a> for V<'_> {
        fn visit_expr_call(&mut self, c: &'a syn::ExprCall) {
            if let Expr::Path(p) = &*c.func {
                if let Some(last) = p.path.segments.last() {
                    let n = last.ident.to_string();
                    if ["barrier", "team_shared", "team_shared_raw"].contains(&n.as_str()) {
                        self.0.push(syn::Error::new(
                            c.span(),
                            format!(
                                "`{n}()` is for `teams, parallel` regions, whose every thread runs the whole body; in \
                                 a work-shared loop a thread may have no iteration to reach it (and reductions use the \
                                 team's memory), and a serial region has one thread: write the region as `teams, \
                                 parallel`"
                            ),
                        ));
                    }
                }
            }
            syn::visit::visit_expr_call(self, c);
        }
        fn visit_item(&mut self, _: &'a syn::Item) {}
    }
    V(errors).visit_block(block);
}

/// `team_shared()` calls in one region body whose element types differ, where the call shows its type (a closure
/// parameter written `&[AtomicU64]`, or `team_shared::<AtomicU64, _>`): a launch's team-shared memory is handed out
/// under one type, the first call's, and a later call with another fails the region at run time (`offload_model::
/// abi::shared_atomics`). Here the macro sees it first, and points at the second call. (Calls in other functions,
/// or whose type is inferred, are left to the run-time check.)
pub fn check_team_shared_types(block: &Block, errors: &mut Errors) {
    /// The element type a `team_shared(len, f)` call shows, as written (its last path segment).
    fn shown_type(c: &syn::ExprCall, last: &syn::PathSegment) -> Option<String> {
        if let syn::PathArguments::AngleBracketed(a) = &last.arguments {
            if let Some(syn::GenericArgument::Type(t)) = a.args.first() {
                return type_name(t);
            }
        }
        let Some(Expr::Closure(f)) = c.args.iter().nth(1) else {
            return None;
        };
        let Some(Pat::Type(pt)) = f.inputs.first() else {
            return None;
        };
        let syn::Type::Reference(r) = &*pt.ty else {
            return None;
        };
        let syn::Type::Slice(s) = &*r.elem else {
            return None;
        };
        type_name(&s.elem)
    }
    fn type_name(t: &syn::Type) -> Option<String> {
        match t {
            syn::Type::Path(p) => p.path.segments.last().map(|s| s.ident.to_string()),
            _ => None,
        }
    }
    struct V<'e> {
        errors: &'e mut Errors,
        first: Option<String>,
    }
    impl<'a> Visit<'a> for V<'_> {
        fn visit_expr_call(&mut self, c: &'a syn::ExprCall) {
            if let Expr::Path(p) = &*c.func {
                if let Some(last) = p.path.segments.last() {
                    if last.ident == "team_shared" {
                        if let Some(ty) = shown_type(c, last) {
                            match &self.first {
                                None => self.first = Some(ty),
                                Some(first) if *first != ty => {
                                    self.errors.push(syn::Error::new(
                                        c.span(),
                                        format!(
                                            "this `team_shared()` asks for the team's memory as `{ty}`, but an \
                                             earlier call of this region hands it out as `{first}`: one launch's team-shared \
                                             memory has one element type (the same bytes as atomics of two types \
                                             or widths are a mixed-size race, which is undefined behaviour), and \
                                             this call would fail the region. Use `{first}` here too (the widest \
                                             type the region needs, splitting values with shifts)"
                                        ),
                                    ));
                                }
                                Some(_) => {}
                            }
                        }
                    }
                }
            }
            syn::visit::visit_expr_call(self, c);
        }
        fn visit_item(&mut self, _: &'a syn::Item) {}
    }
    V {
        errors,
        first: None,
    }
    .visit_block(block);
}
