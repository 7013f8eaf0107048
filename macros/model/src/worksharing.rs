//! `teams_distribute_parallel_for`: the body's shape (per-thread `let`s, one work-shared `for` loop, a tail
//! expression), the loop forms that can be shared out, and the race-freedom rule for safe code.

use crate::clause::Errors;
use crate::region::{ParamKind, Region};
use proc_macro2::Span;
use syn::spanned::Spanned;
use syn::visit::Visit;
use syn::{Block, Expr, ExprForLoop, Pat, Stmt};

/// The work-shared loop of a region body.
pub struct WorkShared<'a> {
    pub lets: Vec<&'a syn::Local>,
    pub for_loop: &'a ExprForLoop,
    /// The loop variable.
    pub index: syn::Ident,
    /// Under `collapse(2)`: the inner loop, its variable, and its bound `m` when it is `0..m`.
    pub inner: Option<(&'a ExprForLoop, syn::Ident, Option<&'a Expr>)>,
}

/// Finds the loop and checks the body's shape and the loop's form.
pub fn find<'a>(block: &'a Block, collapse: usize, errors: &mut Errors) -> Option<WorkShared<'a>> {
    let mut lets = Vec::new();
    let mut found: Option<&ExprForLoop> = None;
    let n = block.stmts.len();
    for (k, stmt) in block.stmts.iter().enumerate() {
        match stmt {
            Stmt::Local(l) if found.is_none() => lets.push(l),
            Stmt::Expr(Expr::ForLoop(f), _) if found.is_none() => found = Some(f),
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
            "only `a..b` and `(a..b).step_by(s)` loops can be shared out over teams and threads; iterate over \
             indices (`for i in 0..y.len()`) and index the slices",
        ));
        return None;
    }
    let inner = if collapse == 2 {
        Some(find_inner(for_loop, &index, errors)?)
    } else {
        None
    };
    let ws = WorkShared {
        lets,
        for_loop,
        index,
        inner,
    };
    let exits = exits(&ws);
    for (span, what) in &exits.leaves {
        errors.push(syn::Error::new(
            *span,
            format!(
                "`{what}` would leave the work-shared loop, whose iterations are shared out over threads that each \
                 run only theirs; skip an iteration with `continue`, or keep a flag and test it in the body"
            ),
        ));
    }
    exits.leaves.is_empty().then_some(ws)
}

/// How the work-shared loop's body can end an iteration early.
pub struct Exits<'a> {
    /// `continue`s of the work-shared loop (a closure-based lowering turns them into `return`).
    pub continues: Vec<&'a syn::ExprContinue>,
    /// `break`s of the loop and `return`s, which OpenMP forbids in a work-shared loop: (span, keyword).
    pub leaves: Vec<(Span, &'static str)>,
}

/// The `continue`, `break` and `return` expressions in the work-shared loop's body that target the loop itself (or,
/// under `collapse(2)`, either loop of the nest).
pub fn exits<'a>(ws: &WorkShared<'a>) -> Exits<'a> {
    struct V<'a> {
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
    }
    impl<'a> Visit<'a> for V<'a> {
        fn visit_expr_continue(&mut self, c: &'a syn::ExprContinue) {
            if self.targets_us(c.label.as_ref()) {
                self.out.continues.push(c);
            }
        }
        fn visit_expr_break(&mut self, b: &'a syn::ExprBreak) {
            if self.targets_us(b.label.as_ref()) {
                self.out.leaves.push((b.span(), "break"));
            }
            syn::visit::visit_expr_break(self, b);
        }
        fn visit_expr_return(&mut self, r: &'a syn::ExprReturn) {
            self.out.leaves.push((r.span(), "return"));
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
    let (body, labels) = match &ws.inner {
        Some((inner, _, _)) => (&inner.body, [&ws.for_loop.label, &inner.label]),
        None => (&ws.for_loop.body, [&ws.for_loop.label, &None]),
    };
    let mut v = V {
        labels: labels
            .iter()
            .filter_map(|l| l.as_ref().map(|l| l.name.ident.to_string()))
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

/// The slices the loop body indexes with exactly the loop variable (`x[i]`), by name: slice parameters that no
/// per-thread `let` rebinds. A reduction loop's lowering runs groups of iterations below all their lengths first, where
/// those indexings need no bounds check.
pub fn indexed_slices(region: &Region, ws: &WorkShared) -> Vec<syn::Ident> {
    if ws.inner.is_some() {
        return Vec::new();
    }
    let mut rebound = std::collections::BTreeSet::new();
    for l in &ws.lets {
        collect_idents(quote::ToTokens::to_token_stream(&l.pat), &mut rebound);
    }
    struct V<'r> {
        slices: Vec<&'r syn::Ident>,
        index: String,
        out: Vec<syn::Ident>,
    }
    impl<'a> Visit<'a> for V<'_> {
        fn visit_expr_index(&mut self, ix: &'a syn::ExprIndex) {
            if let (Some(n), Some(i)) = (name(&ix.expr), name(&ix.index)) {
                if i == self.index && !self.out.iter().any(|o| *o == n) {
                    if let Some(p) = self.slices.iter().find(|p| ***p == n) {
                        self.out.push((*p).clone());
                    }
                }
            }
            syn::visit::visit_expr_index(self, ix);
        }
        fn visit_item(&mut self, _: &'a syn::Item) {}
    }
    let mut v = V {
        slices: region
            .params
            .iter()
            .filter(|p| {
                matches!(p.kind, ParamKind::Slice { .. }) && !rebound.contains(&p.ident.to_string())
            })
            .map(|p| &p.ident)
            .collect(),
        index: ws.index.to_string(),
        out: Vec::new(),
    };
    v.visit_block(&ws.for_loop.body);
    v.out
}

/// The loop nested in `outer` for `collapse(2)`: the outer body must be exactly that loop, over a range that does
/// not depend on the outer variable.
fn find_inner<'a>(
    outer: &'a ExprForLoop,
    outer_index: &syn::Ident,
    errors: &mut Errors,
) -> Option<(&'a ExprForLoop, syn::Ident, Option<&'a Expr>)> {
    let inner = match outer.body.stmts.as_slice() {
        [Stmt::Expr(Expr::ForLoop(f), _)] => f,
        _ => {
            errors.push(syn::Error::new(
                outer.body.span(),
                "`collapse(2)` needs perfectly nested loops: the outer loop's body is exactly one `for` loop",
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
    if !shareable(&inner.expr) || mentions.contains(&outer_index.to_string()) {
        errors.push(syn::Error::new(
            inner.expr.span(),
            "the inner loop of `collapse(2)` runs over `a..b` or `(a..b).step_by(s)` independent of the outer variable",
        ));
        return None;
    }
    let bound = match &*inner.expr {
        Expr::Range(r) if r.start.as_deref().is_some_and(is_zero) => r.end.as_deref(),
        _ => None,
    };
    Some((inner, p.ident.clone(), bound))
}

fn is_zero(e: &Expr) -> bool {
    matches!(e, Expr::Lit(l) if matches!(&l.lit, syn::Lit::Int(i) if i.base10_digits() == "0"))
}

/// Every identifier in a token stream, groups included.
pub fn collect_idents(ts: proc_macro2::TokenStream, out: &mut std::collections::BTreeSet<String>) {
    for tt in ts {
        match tt {
            proc_macro2::TokenTree::Ident(i) => {
                out.insert(i.to_string());
            }
            proc_macro2::TokenTree::Group(g) => collect_idents(g.stream(), out),
            _ => {}
        }
    }
}

fn shareable(e: &Expr) -> bool {
    match e {
        Expr::Range(r) => {
            r.start.is_some()
                && r.end.is_some()
                && matches!(r.limits, syn::RangeLimits::HalfOpen(_))
        }
        Expr::Paren(p) => shareable(&p.expr),
        Expr::MethodCall(m) => m.method == "step_by" && m.args.len() == 1 && shareable(&m.receiver),
        _ => false,
    }
}

/// The race-freedom rule: every thread runs the `let`s, the tail and its share of the loop, so a `&mut` parameter
/// may appear only as `y[i]` inside the loop (`i` the loop variable) or as `y.len()`, and the loop may assign only
/// what it declares. `unsafe fn` regions opt out.
pub fn check_races(region: &Region, block: &Block, ws: &WorkShared, errors: &mut Errors) {
    if region.is_unsafe {
        return;
    }
    let exclusive: Vec<String> = region
        .params
        .iter()
        .filter(|p| {
            matches!(
                p.kind,
                ParamKind::Slice { mutable: true, .. }
                    | ParamKind::Ref { mutable: true, .. }
                    | ParamKind::DeviceBuffer { mutable: true }
            )
        })
        .map(|p| p.ident.to_string())
        .collect();
    let outer: Vec<String> = ws
        .lets
        .iter()
        .filter_map(|l| match &l.pat {
            Pat::Ident(p) => Some(p.ident.to_string()),
            Pat::Type(t) => match &*t.pat {
                Pat::Ident(p) => Some(p.ident.to_string()),
                _ => None,
            },
            _ => None,
        })
        .collect();
    // The reduction variable is each thread's private copy, combined at the end: the loop may update it.
    let outer: Vec<String> = outer
        .into_iter()
        .filter(|n| {
            region
                .reduction
                .as_ref()
                .is_none_or(|(_, v)| v != n.as_str())
        })
        .collect();
    // Under `collapse(2)` each thread owns `(i, j)` pairs: `y[i * m + j]` (with `m` the inner bound) is its own.
    let collapsed = ws.inner.as_ref().map(|(_, j, m)| {
        (
            j.to_string(),
            m.map(|m| quote::ToTokens::to_token_stream(m).to_string()),
        )
    });
    let mut c = Races {
        exclusive: &exclusive,
        outer: &outer,
        index: ws.index.to_string(),
        collapsed,
        in_loop: false,
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
    exclusive: &'a [String],
    outer: &'a [String],
    index: String,
    /// Under `collapse(2)`: the inner variable and the inner bound's tokens.
    collapsed: Option<(String, Option<String>)>,
    in_loop: bool,
    errors: Vec<(Span, String)>,
}

fn name(e: &Expr) -> Option<String> {
    match e {
        Expr::Path(p) if p.qself.is_none() => p.path.get_ident().map(|i| i.to_string()),
        Expr::Paren(p) => name(&p.expr),
        _ => None,
    }
}

impl<'ast> Visit<'ast> for Races<'_> {
    fn visit_expr(&mut self, e: &'ast Expr) {
        match e {
            Expr::MethodCall(m)
                if m.method == "len"
                    && m.args.is_empty()
                    && name(&m.receiver).is_some_and(|n| self.exclusive.contains(&n)) => {}
            Expr::Index(ix) if name(&ix.expr).is_some_and(|n| self.exclusive.contains(&n)) => {
                let n = name(&ix.expr).unwrap_or_default();
                let own = match &self.collapsed {
                    None => name(&ix.index).is_some_and(|i| i == self.index),
                    Some((j, m)) => self.is_flat_index(&ix.index, j, m.as_deref()),
                };
                if !(self.in_loop && own) {
                    let msg = if self.in_loop {
                        format!(
                            "`{n}` is `&mut` and every thread has it: index it with the loop variable (`{n}[{}]`) so \
                             each element is written by one thread only, or declare the region `unsafe fn`",
                            match &self.collapsed {
                                Some((j, Some(m))) => format!("{} * {m} + {j}", self.index),
                                _ => self.index.clone(),
                            }
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
                self.visit_expr(&ix.index);
            }
            Expr::Path(_) if name(e).is_some_and(|n| self.exclusive.contains(&n)) => {
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
                syn::visit::visit_expr(self, e);
            }
            Expr::Binary(b) if self.in_loop && is_compound_assign(&b.op) => {
                self.check_assigned(&b.left);
                syn::visit::visit_expr(self, e);
            }
            _ => syn::visit::visit_expr(self, e),
        }
    }

    // Items and closures' own names are out of scope of this rule.
    fn visit_item(&mut self, _: &'ast syn::Item) {}
}

impl Races<'_> {
    /// `i * m + j`, with `i` the outer variable, `j` the inner one and `m` the inner loop's bound as written.
    fn is_flat_index(&self, e: &Expr, j: &str, m: Option<&str>) -> bool {
        let (Expr::Binary(add), Some(m)) = (e, m) else {
            return false;
        };
        let syn::BinOp::Add(_) = add.op else {
            return false;
        };
        let Expr::Binary(mul) = &*add.left else {
            return false;
        };
        let syn::BinOp::Mul(_) = mul.op else {
            return false;
        };
        name(&mul.left).is_some_and(|i| i == self.index)
            && quote::ToTokens::to_token_stream(&*mul.right).to_string() == m
            && name(&add.right).is_some_and(|n| n == j)
    }

    fn check_assigned(&mut self, left: &Expr) {
        if let Some(n) = name(left) {
            if self.outer.contains(&n) {
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

/// The `let mut var = INIT;` of a reduction variable among the per-thread `let`s, whose `INIT` the lowering
/// replaces by the operator's identity (the initial value is combined once, at the end).
pub fn reduction_init<'a>(ws: &WorkShared<'a>, var: &syn::Ident) -> Option<&'a Expr> {
    ws.lets.iter().find_map(|l| {
        let id = match &l.pat {
            Pat::Ident(p) => p,
            Pat::Type(t) => match &*t.pat {
                Pat::Ident(p) => p,
                _ => return None,
            },
            _ => return None,
        };
        (id.ident == *var && id.mutability.is_some())
            .then(|| l.init.as_ref().map(|i| &*i.expr))
            .flatten()
    })
}

/// A reduction variable is a `let mut var = INIT;` before the loop, and the body's tail is exactly `var`.
pub fn check_reduction(block: &Block, ws: &WorkShared, var: &syn::Ident, errors: &mut Errors) {
    if reduction_init(ws, var).is_none() {
        errors.push(syn::Error::new(
            var.span(),
            format!("declare the reduction variable before the loop with its initial value: `let mut {var} = ..;`"),
        ));
    }
    let tail_is_var = matches!(block.stmts.last(), Some(Stmt::Expr(e, None)) if name(e).is_some_and(|n| *var == n));
    if !tail_is_var {
        let span = block.stmts.last().map_or(block.span(), |s| s.span());
        errors.push(syn::Error::new(
            span,
            format!("a reduction region ends with its variable: make the tail `{var}`"),
        ));
    }
}

/// Every use of the reduction variable `var` in the loop body (as a plain path), which the lowering renames to the
/// current lane's private copy.
pub fn reduction_uses<'a>(body: &'a Block, var: &syn::Ident) -> Vec<&'a syn::ExprPath> {
    struct Uses<'a, 'v> {
        var: &'v syn::Ident,
        out: Vec<&'a syn::ExprPath>,
    }
    impl<'a> Visit<'a> for Uses<'a, '_> {
        fn visit_expr_path(&mut self, p: &'a syn::ExprPath) {
            if p.qself.is_none() && p.path.is_ident(self.var) {
                self.out.push(p);
            }
        }
        fn visit_item(&mut self, _: &'a syn::Item) {}
    }
    let mut u = Uses {
        var,
        out: Vec::new(),
    };
    u.visit_block(body);
    u.out
}
