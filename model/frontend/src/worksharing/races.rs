//! The race-freedom rule for safe code: a `&mut` parameter reached only as the iteration's own element, nothing
//! declared before the loop written in it, and the names the lowering reserves.

use super::*;

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

pub(super) struct Races<'a> {
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

pub(super) fn name(e: &Expr) -> Option<String> {
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
    /// the lowering computes them once and checks each inner index against its stride) or a column of it
    /// (`x * plane + flat`, checked against the plane the lowering computes), or a row `i * m + e`.
    fn owned(&self, ix: &Expr) -> bool {
        let Some(Some(i)) = self.vars.first() else {
            return false;
        };
        if self.vars.len() == 1 {
            loop_index(self.res, ix) == Some(*i)
                || row_stride(self.res, ix, *i).is_some()
                // A sub-slice `lo..hi` of the row (`lo..` only in `y[lo..][..n]`, below).
                || (row_slice(self.res, ix, *i).is_some()
                    && matches!(strip(ix), Expr::Range(r) if r.end.is_some()))
        } else {
            flat_parts(self.res, ix, &self.vars).is_some()
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
            // `y[lo..][..n]`: the sub-slice `lo..lo + n` of the row, which the lowering checks as one.
            Expr::Index(outer)
                if slice_chain(outer).is_some_and(|(inner, _, _)| {
                    self.is(&inner.expr, self.exclusive) && !self.is(&inner.expr, self.objects)
                }) =>
            {
                let (inner, lo, n) = slice_chain(outer).unwrap_or_else(|| unreachable!());
                let row = match self.vars.as_slice() {
                    [Some(i)] => row_slice(self.res, &inner.index, *i).is_some(),
                    _ => false,
                };
                if !(self.in_loop && row) {
                    let msg = self.not_owned_message(&inner.expr);
                    self.errors.push((inner.expr.span(), msg));
                }
                let was = std::mem::replace(&mut self.writing, false);
                self.visit_expr(lo);
                self.visit_expr(n);
                self.writing = was;
            }
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
                    } else {
                        self.not_owned_message(&ix.expr)
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
    /// Why `y` (a `&mut` parameter indexed with what the iteration does not own) may not be indexed so.
    fn not_owned_message(&self, y: &Expr) -> String {
        let n = name(y).unwrap_or_default();
        if !self.in_loop {
            return format!(
                "`{n}` is `&mut` and every thread runs this part of the body: touch it only inside the work-shared \
                 loop, as `{n}[{}]`",
                self.index
            );
        }
        let i = &self.index;
        let forms = if self.collapsed.is_empty() {
            format!(
                "its row, `{n}[{i} * m + e]` (`e` below `m`), or a sub-slice of the row, `&mut {n}[{i} * m..{i} * m + \
                 m]` or `&mut {n}[{i} * m..][..m]`"
            )
        } else {
            format!(
                "a column of it, `{n}[x * plane + {}]` (the flat index below `plane`)",
                self.flat_index()
            )
        };
        format!(
            "`{n}` is `&mut` and every thread has it: index it with the loop variable (`{n}[{}]`) or {forms}, so each \
             element is written by one thread only, or declare the region `unsafe fn`",
            self.flat_index()
        )
    }

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

pub(super) fn is_compound_assign(op: &syn::BinOp) -> bool {
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

/// Whether a `&mut` parameter's element may be reached inside a parallel body only through a view: every
/// parallel region's `&mut [T]` and `&mut DeviceBuffer<T>`.
pub fn is_view(region: &Region, kind: &ParamKind) -> bool {
    region.construct.is_parallel()
        && matches!(
            kind,
            ParamKind::Slice { mutable: true, .. } | ParamKind::DeviceBuffer { mutable: true }
        )
}
