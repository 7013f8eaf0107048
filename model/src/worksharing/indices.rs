//! Which element a view index reaches: the loop variable (through copies such as `let j = i as usize;`), the
//! flat index of a collapsed nest, a row `i * m + e`; and the strides and row length the lowering takes from them.

use super::*;

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

/// The binding indexing with a loop variable uses: `i`, or `i as usize` for a loop over another integer type.
pub(super) fn loop_index(res: &Resolved, e: &Expr) -> Option<BindingId> {
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
pub(super) fn copy_of(res: &Resolved, e: &Expr) -> Option<BindingId> {
    res.expr(e).map(|id| res.root(id))
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
pub(super) fn row_stride<'a>(res: &Resolved, e: &'a Expr, index: BindingId) -> Option<&'a Expr> {
    let (x, m, _) = mul_add(e)?;
    (copy_of(res, x) == Some(index)).then_some(m)
}

/// `(x, m, y)` when `e` is written `x * m + y`.
pub(super) fn mul_add(e: &Expr) -> Option<(&Expr, &Expr, &Expr)> {
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

pub(super) fn strip(e: &Expr) -> &Expr {
    match e {
        Expr::Paren(p) => strip(&p.expr),
        Expr::Group(g) => strip(&g.expr),
        e => e,
    }
}

/// What `f` finds in the first view index of the loop's (innermost) body for which it finds anything.
pub(super) fn first_view_index<'a, R>(
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
        views: ws.views(region),
        f,
        out: None,
        _a: std::marker::PhantomData,
    };
    v.visit_block(ws.body());
    v.out
}

/// `[m, p]` when `e` is written `(i * m + j) * p + k`, `vars` the nest's variables' bindings `[i, j, k]`.
pub(super) fn flat_strides<'a>(
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
