//! `teams_distribute_parallel_for`: the body's shape (per-thread `let`s, one work-shared `for` loop, a tail
//! expression) and the loop forms that can be shared out, here; the rules for safe code on the resolved body, one
//! file each: `races` (a `&mut` parameter reached only as the iteration's own element: `indices`), `uniform` (bounds
//! every thread computes alike), `reduction`, `across` (what the loop may share of what each thread declared before
//! it), and `team` (team calls outside `teams, parallel`).

use crate::errors::Errors;
use crate::region::{ParamKind, Region};
use crate::resolve::collect_idents;
use crate::resolve::{BindingId, Resolved, Site};
use proc_macro2::Span;
use std::collections::BTreeSet;
use syn::spanned::Spanned;
use syn::visit::Visit;
use syn::{Block, Expr, ExprForLoop, Pat, Stmt};

mod across;
mod indices;
mod races;
mod reduction;
mod team;
mod uniform;

pub use across::*;
pub use indices::*;
pub use races::*;
pub use reduction::*;
pub use team::*;
pub use uniform::*;

/// The work-shared loop of a region body.
pub struct WorkShared<'a> {
    /// The per-thread `let`s before the loop.
    pub lets: Vec<&'a syn::Local>,
    /// The loop whose iterations are shared out.
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

    /// The bindings of the parameters that are views in the body (`&mut [T]`, `&mut DeviceBuffer<T>`).
    pub fn views(&self, region: &Region) -> Vec<BindingId> {
        region
            .params
            .iter()
            .enumerate()
            .filter(|(_, p)| is_view(region, &p.kind))
            .map(|(k, _)| self.res.param(k))
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

/// The loop nested in `outer` for `collapse(n)`: the outer body must be exactly that loop, over a range that does
/// not depend on any outer variable.
pub(super) fn find_inner<'a>(
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
pub(super) fn zero_based_bound(e: &Expr) -> Option<&Expr> {
    match e {
        Expr::Range(r) if r.start.as_deref().is_some_and(is_zero) => r.end.as_deref(),
        Expr::Paren(p) => zero_based_bound(&p.expr),
        Expr::MethodCall(m) if m.method == "step_by" => zero_based_bound(&m.receiver),
        _ => None,
    }
}

pub(super) fn is_zero(e: &Expr) -> bool {
    matches!(e, Expr::Lit(l) if matches!(&l.lit, syn::Lit::Int(i) if i.base10_digits() == "0"))
}

pub(super) fn shareable(e: &Expr) -> bool {
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
