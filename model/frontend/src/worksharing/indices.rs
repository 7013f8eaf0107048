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
/// index `(i * m + j) * p + k` (or in a column of it, `x * plane + flat`). The lowering computes them once, before the
/// loop, and an iteration owns the element at its flat index with these strides; `None` when no view index is
/// written so (then no element is owned).
pub fn nest_strides<'a>(region: &Region, ws: &WorkShared<'a>) -> Option<Vec<&'a Expr>> {
    if ws.inner.is_empty() {
        return None;
    }
    let vars = ws.nest_vars();
    first_view_index(region, ws, |e| {
        flat_parts(&ws.res, e, &vars).map(|(s, _)| s)
    })
}

/// Under `collapse(n)`: the `plane` of the first view index in the nest's body written as a column of the flat
/// index, `x * plane + flat` (hotspot3D's `t[k * plane + j * m + i]` for an inner serial `k`). The lowering computes
/// it once, before the loop; an iteration whose flat index `f` is below it then owns the column `{ e : e % plane ==
/// f }` (its element `f` among them), and one whose flat index is not owns nothing: columns of distinct residues are
/// disjoint.
pub fn nest_plane<'a>(region: &Region, ws: &WorkShared<'a>) -> Option<&'a Expr> {
    if ws.inner.is_empty() {
        return None;
    }
    let vars = ws.nest_vars();
    first_view_index(region, ws, |e| {
        flat_parts(&ws.res, e, &vars).and_then(|(_, c)| c.map(|c| c.plane))
    })
}

/// Where a view index written as a column of the flat index, `x * plane + flat`, has its parts.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ColumnSplit {
    /// `x * plane + flat`.
    ColumnFirst,
    /// `flat + x * plane`.
    FlatFirst,
    /// `x * plane + outer * m + j`, grouped by `+` as `((x * plane) + (outer * m)) + j`.
    Grouped,
}

/// A column of the flat index in a view index: its `plane`, and where its parts are.
#[derive(Clone, Copy)]
pub struct Column<'a> {
    /// The column's multiplier (`plane` of `x * plane + flat`).
    pub plane: &'a Expr,
    /// How the index's parts are arranged.
    pub split: ColumnSplit,
}

/// Under `collapse(n)`: every view index in the nest's body written as a column of the flat index, and how it
/// splits. The lowering checks such an index by its parts (`Own::at_column`: the flat part is the iteration's own,
/// the product does not overflow), where the whole index would need a division.
pub fn column_indices(region: &Region, ws: &WorkShared) -> Vec<(*const Expr, ColumnSplit)> {
    if ws.inner.is_empty() {
        return Vec::new();
    }
    let vars = ws.nest_vars();
    let mut out = Vec::new();
    every_view_index(region, ws, |e| {
        if let Some((_, Some(c))) = flat_parts(&ws.res, e, &vars) {
            out.push((e as *const Expr, c.split));
        }
    });
    out
}

/// The strides of `e` written as the flat index of the nest's variables `vars`, and its plane when it is written as
/// a column of it: `x * plane + flat`, `flat + x * plane`, or (as `+` groups) `x * plane + (..) * m + j`. `x` may be
/// anything: the column is checked against the plane at run time.
pub(super) fn flat_parts<'a>(
    res: &Resolved,
    e: &'a Expr,
    vars: &[Option<BindingId>],
) -> Option<(Vec<&'a Expr>, Option<Column<'a>>)> {
    if let Some(s) = flat_strides(res, e, vars) {
        return Some((s, None));
    }
    let Expr::Binary(add) = strip(e) else {
        return None;
    };
    if !matches!(add.op, syn::BinOp::Add(_)) {
        return None;
    }
    // `x * plane + flat` and `flat + x * plane`.
    let column = |plane, split| Some(Column { plane, split });
    if let (Some((_, plane)), Some(s)) = (mul(&add.left), flat_strides(res, &add.right, vars)) {
        return Some((s, column(plane, ColumnSplit::ColumnFirst)));
    }
    if let (Some(s), Some((_, plane))) = (flat_strides(res, &add.left, vars), mul(&add.right)) {
        return Some((s, column(plane, ColumnSplit::FlatFirst)));
    }
    // `x * plane + outer * m + j`: `((x * plane) + (outer * m)) + j`.
    let Expr::Binary(left) = strip(&add.left) else {
        return None;
    };
    if !matches!(left.op, syn::BinOp::Add(_)) {
        return None;
    }
    let (_, plane) = mul(&left.left)?;
    let (outer, m) = mul(&left.right)?;
    let (last, before) = vars.split_last()?;
    if last.is_none() || copy_of(res, &add.right) != *last {
        return None;
    }
    let mut s = flat_strides(res, outer, before)?;
    s.push(m);
    Some((s, column(plane, ColumnSplit::Grouped)))
}

/// `(x, m)` when `e` is written `x * m`.
fn mul(e: &Expr) -> Option<(&Expr, &Expr)> {
    match strip(e) {
        Expr::Binary(b) if matches!(b.op, syn::BinOp::Mul(_)) => Some((&b.left, &b.right)),
        _ => None,
    }
}

/// Without `collapse`: the row length `m` of the first view index in the loop's body written `i * m + e` (each
/// iteration then owns the row `[i * m, i * m + m)`; the lowering computes `m` once, before the loop).
pub fn row_length<'a>(region: &Region, ws: &WorkShared<'a>) -> Option<&'a Expr> {
    if !ws.inner.is_empty() {
        return None;
    }
    let i = ws.res.loop_var(ws.for_loop)?;
    first_view_index(region, ws, |e| {
        row_stride(&ws.res, e, i)
            .or_else(|| row_slice(&ws.res, e, i))
            .map(|m| vec![m])
    })
    .and_then(|v| v.into_iter().next())
}

/// `m` when `e` is a sub-slice of the row: `lo..hi` or `lo..` (the start of `y[lo..][..n]`) with `lo` written
/// `i * m` or `i * m + e2`. Which elements it reaches is checked against the row at run time ([`offload_model::view::Own`]'s
/// `range`, `range_len`).
pub fn row_slice<'a>(res: &Resolved, e: &'a Expr, index: BindingId) -> Option<&'a Expr> {
    let Expr::Range(r) = strip(e) else {
        return None;
    };
    if !matches!(r.limits, syn::RangeLimits::HalfOpen(_)) {
        return None;
    }
    let lo = r.start.as_deref()?;
    row_stride(res, lo, index).or_else(|| match strip(lo) {
        Expr::Binary(b) if matches!(b.op, syn::BinOp::Mul(_)) => {
            (copy_of(res, &b.left) == Some(index)).then_some(&*b.right)
        }
        _ => None,
    })
}

/// `(lo, n)` when `outer` is `y[lo..][..n]` (the view `y` itself is `outer`'s base's base).
pub fn slice_chain(outer: &syn::ExprIndex) -> Option<(&syn::ExprIndex, &Expr, &Expr)> {
    let Expr::Index(inner) = strip(&outer.expr) else {
        return None;
    };
    let (Expr::Range(from), Expr::Range(to)) = (strip(&inner.index), strip(&outer.index)) else {
        return None;
    };
    let half_open = |r: &syn::ExprRange| matches!(r.limits, syn::RangeLimits::HalfOpen(_));
    match (&from.start, &from.end, &to.start, &to.end) {
        (Some(lo), None, None, Some(n)) if half_open(from) && half_open(to) => Some((inner, lo, n)),
        _ => None,
    }
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
    let mut out = None;
    every_view_index(region, ws, |e| {
        if out.is_none() {
            out = f(e);
        }
    });
    out
}

/// Calls `f` on every view index of the loop's (innermost) body, in order.
fn every_view_index<'a>(region: &Region, ws: &WorkShared<'a>, f: impl FnMut(&'a Expr)) {
    struct V<'a, 'r, F> {
        res: &'r Resolved,
        views: Vec<BindingId>,
        f: F,
        _a: std::marker::PhantomData<&'a ()>,
    }
    impl<'a, F: FnMut(&'a Expr)> Visit<'a> for V<'a, '_, F> {
        fn visit_expr_index(&mut self, ix: &'a syn::ExprIndex) {
            if self
                .res
                .expr(&ix.expr)
                .is_some_and(|id| self.views.contains(&id))
            {
                (self.f)(&ix.index);
            }
            syn::visit::visit_expr_index(self, ix);
        }
        fn visit_item(&mut self, _: &'a syn::Item) {}
    }
    let mut v = V {
        res: &ws.res,
        views: ws.views(region),
        f,
        _a: std::marker::PhantomData,
    };
    v.visit_block(ws.body());
}

/// `[m, p]` when `e` is written `(i * m + j) * p + k`, `vars` the nest's variables' bindings `[i, j, k]`.
pub(super) fn flat_strides<'a>(
    res: &Resolved,
    e: &'a Expr,
    vars: &[Option<BindingId>],
) -> Option<Vec<&'a Expr>> {
    let mut strides = Vec::new();
    let mut e = e;
    let first = vars.first()?;
    for j in vars[1..].iter().rev() {
        let (x, m, y) = mul_add(e)?;
        if j.is_none() || copy_of(res, y) != *j {
            return None;
        }
        strides.push(m);
        e = x;
    }
    (first.is_some() && copy_of(res, e) == *first).then(|| {
        strides.reverse();
        strides
    })
}
