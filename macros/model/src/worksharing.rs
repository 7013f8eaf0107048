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
}

/// Finds the loop and checks the body's shape and the loop's form.
pub fn find<'a>(block: &'a Block, errors: &mut Errors) -> Option<WorkShared<'a>> {
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
    Some(WorkShared {
        lets,
        for_loop,
        index,
    })
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
    let mut c = Races {
        exclusive: &exclusive,
        outer: &outer,
        index: ws.index.to_string(),
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
                let own = name(&ix.index).is_some_and(|i| i == self.index);
                if !(self.in_loop && own) {
                    let msg = if self.in_loop {
                        format!(
                            "`{n}` is `&mut` and every thread has it: index it with the loop variable (`{n}[{}]`) so \
                             each element is written by one thread only, or declare the region `unsafe fn`",
                            self.index
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
