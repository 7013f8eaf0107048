//! Reduction variables: the `let mut` in scope where the loop starts, returned as the body's tail, and their uses
//! in the loop, which the lowering renames to the lane's private copy.

use super::*;
use syn::Type;

/// A reduction variable is the `let mut var = INIT;` in scope where the loop starts (a name shadowed before it is
/// another variable). The body's tail is those variables (a tuple of them, in clause order, for several), or an
/// expression of them and of values computed before the loop ([`reduction_tail`]).
pub fn check_reduction(region: &Region, block: &Block, ws: &WorkShared, errors: &mut Errors) {
    let vars = &region.reductions;
    let mut all = true;
    for (_, var) in vars {
        if ws.reduction_var(var).is_none() {
            all = false;
            errors.push(syn::Error::new(
                var.span(),
                format!(
                    "declare the reduction variable before the loop with its initial value: `let mut {var} = ..;`"
                ),
            ));
        }
    }
    if !matches!(block.stmts.last(), Some(Stmt::Expr(_, None))) {
        let names: Vec<String> = vars.iter().map(|(_, v)| v.to_string()).collect();
        let span = block.stmts.last().map_or(block.span(), |s| s.span());
        let want = match names.as_slice() {
            [one] => one.clone(),
            more => format!("({})", more.join(", ")),
        };
        errors.push(syn::Error::new(
            span,
            format!("a reduction region ends with its variables: make the tail `{want}` (or an expression of them)"),
        ));
    } else if all {
        reduction_tail(region, block, ws, errors);
    }
}

/// A reduction region's tail that is more than its variables (`sum * step`, `(s / n as f64, m)`): the device and the
/// host fallback return the variables, and the host evaluates the tail once, after the reduction, with the
/// variables bound to their combined values. What else it reads is computed again there: the region's by-value
/// parameters, slices' lengths, and the `let`s before the loop made of these (and of constants, operators, casts and
/// calls); anything else is an error.
pub struct Tail {
    /// The reduction variables' types, in clause order: annotated (`let mut s: f64`), a suffixed literal
    /// (`0u32`, `[0u32; 16]`), or the type of the tail (or of its tuple element) they are an operand of
    /// (`sum * step` returning `f64`).
    pub tys: Vec<Type>,
    /// The `let`s before the loop the tail reads, in order.
    pub lets: Vec<syn::Local>,
    /// Their places among the body's statements.
    pub let_stmts: Vec<usize>,
    /// The tail expression.
    pub expr: Expr,
}

/// The tail of a reduction region whose tail is not exactly its variables (see [`Tail`]); `None` when it is (or the
/// region is in error: `errors` has why).
pub fn reduction_tail(
    region: &Region,
    block: &Block,
    ws: &WorkShared,
    errors: &mut Errors,
) -> Option<Tail> {
    let ids: Vec<BindingId> = region
        .reductions
        .iter()
        .map(|(_, v)| ws.reduction_var(v))
        .collect::<Option<_>>()?;
    let Some(Stmt::Expr(tail, None)) = block.stmts.last() else {
        return None;
    };
    let is = |e: &Expr, k: usize| ws.res.expr(e) == Some(ids[k]);
    let plain = match (tail, ids.len()) {
        (e, 1) => is(e, 0),
        (Expr::Tuple(t), n) => {
            t.elems.len() == n && t.elems.iter().enumerate().all(|(k, e)| is(e, k))
        }
        _ => false,
    };
    if plain {
        return None;
    }
    let n_errors = errors.len();
    let mut reader = TailReads {
        region,
        ws,
        vars: &ids,
        lets: BTreeSet::new(),
        errors,
    };
    reader.visit_expr(tail);
    let let_stmts: Vec<usize> = reader.lets.into_iter().collect();
    let mut tys = Vec::new();
    for (k, &id) in ids.iter().enumerate() {
        let b = &ws.res.bindings[id];
        let Site::Let(at) = b.site else { return None };
        match var_type(ws.lets[at]).or_else(|| operand_type(&ws.res, id, tail, region.ret.as_ref())) {
            Some(t) => tys.push(t),
            None => errors.push(syn::Error::new(
                b.ident.span(),
                format!(
                    "give the reduction variable a type (`let mut {v}: f64 = ..`): the tail does not fix it, and it \
                     crosses from the device as that type",
                    v = region.reductions[k].1
                ),
            )),
        }
    }
    let lets = let_stmts.iter().map(|&k| ws.lets[k].clone()).collect();
    (errors.len() == n_errors).then(|| Tail {
        tys,
        lets,
        let_stmts,
        expr: tail.clone(),
    })
}

/// The type a reduction variable's `let` gives it: annotated, or a suffixed literal (an array of one).
fn var_type(l: &syn::Local) -> Option<Type> {
    if let Pat::Type(t) = &l.pat {
        return Some((*t.ty).clone());
    }
    fn lit(e: &Expr) -> Option<Type> {
        match e {
            Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Int(i),
                ..
            }) if !i.suffix().is_empty() => syn::parse_str(i.suffix()).ok(),
            Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Float(f),
                ..
            }) if !f.suffix().is_empty() => syn::parse_str(f.suffix()).ok(),
            Expr::Unary(u) => lit(&u.expr),
            Expr::Paren(p) => lit(&p.expr),
            Expr::Repeat(r) => {
                let elem = lit(&r.expr)?;
                let len = &r.len;
                Some(syn::parse_quote!([#elem; #len]))
            }
            _ => None,
        }
    }
    lit(&l.init.as_ref()?.expr)
}

/// The type of the variable `id` where it is an operand of `e`'s arithmetic and `e` has type `ty` (a tuple tail
/// element by element): `sum * step` returning `f64` makes `sum` an `f64`.
fn operand_type(res: &Resolved, id: BindingId, e: &Expr, ty: Option<&Type>) -> Option<Type> {
    let ty = ty?;
    match (e, ty) {
        (Expr::Tuple(t), Type::Tuple(tt)) if t.elems.len() == tt.elems.len() => t
            .elems
            .iter()
            .zip(&tt.elems)
            .find_map(|(e, ty)| operand_type(res, id, e, Some(ty))),
        (Expr::Paren(p), _) => operand_type(res, id, &p.expr, Some(ty)),
        (Expr::Group(g), _) => operand_type(res, id, &g.expr, Some(ty)),
        (Expr::Unary(u), _) if matches!(u.op, syn::UnOp::Neg(_) | syn::UnOp::Not(_)) => {
            operand_type(res, id, &u.expr, Some(ty))
        }
        (Expr::Binary(b), _) => {
            use syn::BinOp::*;
            match b.op {
                Add(_) | Sub(_) | Mul(_) | Div(_) | Rem(_) | BitAnd(_) | BitOr(_) | BitXor(_) => {
                    operand_type(res, id, &b.left, Some(ty))
                        .or_else(|| operand_type(res, id, &b.right, Some(ty)))
                }
                Shl(_) | Shr(_) => operand_type(res, id, &b.left, Some(ty)),
                _ => None,
            }
        }
        (Expr::Path(p), _) if res.id_of(p) == Some(id) => Some(ty.clone()),
        _ => None,
    }
}

/// What a reduction tail reads besides the variables: by-value parameters, slices' lengths and the `let`s before the
/// loop made of these, collected (`lets`, statement indices); anything else, an error.
struct TailReads<'r, 'w> {
    region: &'r Region,
    ws: &'r WorkShared<'w>,
    vars: &'r [BindingId],
    lets: BTreeSet<usize>,
    errors: &'r mut Errors,
}

impl TailReads<'_, '_> {
    /// Whether `id` may be read in the tail, or (`in_let`) in a `let` it reads; such a `let` is collected.
    fn readable(&mut self, id: BindingId, in_let: bool) -> bool {
        if !in_let && self.vars.contains(&id) {
            return true;
        }
        let b = &self.ws.res.bindings[id];
        match b.site {
            Site::Param(k) => {
                let p = &self.region.params[k];
                matches!(p.kind, ParamKind::Value) && !p.mut_binding
            }
            Site::Let(k) if k < self.ws.at && !b.mutable && b.simple && !b.by_ref => {
                if self.lets.contains(&k) {
                    return true;
                }
                let Some(init) = &self.ws.lets[k].init else {
                    return false;
                };
                if init.diverge.is_some() {
                    return false;
                }
                self.lets.insert(k);
                let before = self.errors.len();
                self.let_value(&init.expr);
                self.errors.len() == before
            }
            Site::Inner if !in_let => true,
            _ => false,
        }
    }

    /// Checks a `let`'s value the tail reads: constants, the readable names, operators, casts and calls.
    fn let_value(&mut self, e: &Expr) {
        match e {
            Expr::Lit(_) => {}
            Expr::Path(p) => self.path(p, true),
            Expr::Paren(x) => self.let_value(&x.expr),
            Expr::Group(x) => self.let_value(&x.expr),
            Expr::Cast(c) => self.let_value(&c.expr),
            Expr::Unary(u) if !matches!(u.op, syn::UnOp::Deref(_)) => self.let_value(&u.expr),
            Expr::Binary(b) if !is_compound_assign(&b.op) => {
                self.let_value(&b.left);
                self.let_value(&b.right);
            }
            Expr::Tuple(t) => t.elems.iter().for_each(|e| self.let_value(e)),
            Expr::Call(c) if matches!(&*c.func, Expr::Path(p) if self.ws.res.id_of(p).is_none()) => {
                c.args.iter().for_each(|e| self.let_value(e))
            }
            Expr::MethodCall(m) => {
                if !self.slice_len(m) {
                    self.let_value(&m.receiver);
                    m.args.iter().for_each(|e| self.let_value(e));
                }
            }
            other => self.errors.push(syn::Error::new(
                other.span(),
                "a reduction's tail is evaluated on the host after the reduction, which computes again the `let`s \
                 before the loop that it reads: those may use only by-value parameters, slices' lengths, constants, \
                 operators, casts and calls",
            )),
        }
    }

    /// `x.len()` on a slice parameter.
    fn slice_len(&self, m: &syn::ExprMethodCall) -> bool {
        m.method == "len"
            && m.args.is_empty()
            && matches!(&*m.receiver, Expr::Path(p) if self.ws.res.id_of(p).is_some_and(|id| {
                matches!(self.ws.res.bindings[id].site, Site::Param(k)
                    if matches!(self.region.params[k].kind, ParamKind::Slice { .. }))
            }))
    }

    fn path(&mut self, p: &syn::ExprPath, in_let: bool) {
        let Some(id) = self.ws.res.id_of(p) else {
            return;
        };
        if !self.readable(id, in_let) {
            let name = &self.ws.res.bindings[id].ident;
            self.errors.push(syn::Error::new(
                p.span(),
                format!(
                    "a reduction's tail is evaluated on the host after the reduction: it may read the reduction \
                     variables, by-value parameters, slices' lengths and the `let`s before the loop made of these \
                     (computed again there), not `{name}`"
                ),
            ));
        }
    }
}

impl<'a> Visit<'a> for TailReads<'_, '_> {
    fn visit_expr_path(&mut self, p: &'a syn::ExprPath) {
        self.path(p, false);
    }
    fn visit_expr_method_call(&mut self, m: &'a syn::ExprMethodCall) {
        if !self.slice_len(m) {
            syn::visit::visit_expr_method_call(self, m);
        }
    }
    fn visit_macro(&mut self, m: &'a syn::Macro) {
        for &id in self.ws.res.in_macro(m).to_vec().iter() {
            if !self.readable(id, false) {
                self.errors.push(syn::Error::new(
                    m.span(),
                    format!(
                        "a reduction's tail is evaluated on the host after the reduction: this macro may not read \
                         `{}`",
                        self.ws.res.bindings[id].ident
                    ),
                ));
            }
        }
    }
    fn visit_item(&mut self, _: &'a syn::Item) {}
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
