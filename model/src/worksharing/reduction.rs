//! Reduction variables: the `let mut` in scope where the loop starts, returned as the body's tail, and their uses
//! in the loop, which the lowering renames to the lane's private copy.

use super::*;

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
