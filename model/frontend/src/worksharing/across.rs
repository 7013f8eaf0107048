//! What a work-shared loop may share across its iterations of what each thread declared before it: immutable
//! `Copy` values, checked by type.

use super::*;

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
pub(super) fn extended_temporaries(e: &Expr) -> Vec<&syn::ExprReference> {
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
