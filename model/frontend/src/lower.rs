//! The one lowering of a region's function: what the macro compiles as the host fallback and the outliner writes into
//! the device crate are both [`lower`]'s output, so the two cannot diverge.
//!
//! - A parallel region's `&mut [T]` and `&mut DeviceBuffer<T>` parameters become [`offload_model::view`]s (`View` in safe
//!   regions, `UnsafeView` in `unsafe fn` ones); the caller (fallback or kernel entry) makes one per thread.
//! - A work-shared loop becomes a closure run by a driver of [`offload_model::lanes`] over the thread's share:
//!   `for i in A { BODY }` -> `{ let s = __share(A); let s = unsafe { Exclusive::new(s) }; each(s, [x.len(), ..],
//!   [m?], |i, t| BODY) }` (`reduce` with the private copies for a reduction, `each_nest`/`reduce_nest` over the
//!   tuples of a `collapse(n)` nest, with the strides of its flat index and `[plane]` where it writes a column of it;
//!   `[m]` when each iteration owns a row). In
//!   `BODY`, `y[E]` on a view becomes `y[Own::at(&t, E)]`, a reduction variable the private copy `*__offload_s` (a
//!   field of it for several), and the loop's `continue` a `return`.
//! - A reduction variable's initial value is recorded and the private copy starts at the identity.
//! - What must be the same in every thread (bounds, steps, strides, chunk sizes, and the `let`s they use) is computed
//!   from primitive integers only: each leaf goes through `__lanes::int`, a slice's length through `__lanes::len`, and
//!   `step_by` is `Iterator::step_by`, so no operator, method or trait of the user's runs there.
//!
//! Generated names are mixed-site in the macro; the device crate is plain text, so region bodies may not write names
//! starting with `__offload` at all (a compile error), and the lowering's own are all such names.

use crate::region::{ParamKind, Region};
use crate::worksharing::{self, WorkShared};
use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned, ToTokens};
use syn::spanned::Spanned;
use syn::visit_mut::VisitMut;
use syn::{Block, Expr, FnArg, Ident, ItemFn, Pat, Stmt, Type};

/// The region's function, lowered.
pub struct Lowered {
    /// The parameters, views where the region runs in parallel.
    pub inputs: Vec<FnArg>,
    /// The return type: the reduction's wire type (`Region::reduce_wire`) where the tail is an expression of the
    /// variables, which the lowered body returns instead.
    pub output: syn::ReturnType,
    /// The body: for a work-shared region, its loop lowered to a driver call and a tail the host evaluates replaced by
    /// the variables; otherwise as written.
    pub block: Block,
    /// That tail, which the host evaluates once after the reduction.
    pub tail: Option<worksharing::Tail>,
}

/// How a parameter reaches a parallel body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ViewKind {
    /// `offload::__view::View`: elements reached through the iteration's token.
    Checked,
    /// `offload::__view::UnsafeView` (`unsafe fn` regions): any element by `usize`.
    Unchecked,
}

/// The view a parameter becomes in the region's body, if any.
pub fn view_kind(region: &Region, kind: &ParamKind) -> Option<ViewKind> {
    worksharing::is_view(region, kind).then_some(if region.is_unsafe {
        ViewKind::Unchecked
    } else {
        ViewKind::Checked
    })
}

impl ViewKind {
    /// The view's type for elements `elem`, spanned for hygiene-neutral paths.
    pub fn ty(self, elem: &TokenStream) -> TokenStream {
        match self {
            ViewKind::Checked => quote!(::offload::__view::View<'_, #elem>),
            ViewKind::Unchecked => quote!(::offload::__view::UnsafeView<'_, #elem>),
        }
    }
}

/// The element type of a view parameter: `T` of `&mut [T]` or `&mut DeviceBuffer<T>`.
pub fn view_elem(p: &crate::region::Param) -> TokenStream {
    match &p.kind {
        ParamKind::Slice { elem, .. } => elem.to_token_stream(),
        _ => {
            let inner = match &p.ty {
                Type::Reference(r) => &*r.elem,
                t => t,
            };
            match inner {
                Type::Path(tp) => match tp.path.segments.last().map(|s| &s.arguments) {
                    Some(syn::PathArguments::AngleBracketed(a)) => a.args.to_token_stream(),
                    _ => quote!(_),
                },
                _ => quote!(_),
            }
        }
    }
}

/// Lowers `func`, which [`crate::frontend::parse_region`] accepted as `region`.
pub fn lower(region: &Region, func: &ItemFn) -> Lowered {
    let inputs = func
        .sig
        .inputs
        .iter()
        .map(|arg| {
            let FnArg::Typed(pt) = arg else {
                return arg.clone();
            };
            let Some(p) = region
                .params
                .iter()
                .find(|p| matches!(&*pt.pat, Pat::Ident(pi) if pi.ident == p.ident))
            else {
                return arg.clone();
            };
            match view_kind(region, &p.kind) {
                Some(v) => {
                    let mut pt = pt.clone();
                    let ty = v.ty(&view_elem(p));
                    *pt.ty = syn::parse_quote_spanned!(p.ty.span()=> #ty);
                    // Writing through a view borrows it mutably.
                    if let Pat::Ident(pi) = &mut *pt.pat {
                        if pi.mutability.is_none() {
                            pi.mutability = Some(syn::Token![mut](Span::mixed_site()));
                            pt.attrs.push(syn::parse_quote!(#[allow(unused_mut)]));
                        }
                    }
                    FnArg::Typed(pt)
                }
                None => arg.clone(),
            }
        })
        .collect();
    let mut block = (*func.block).clone();
    let mut output = func.sig.output.clone();
    let mut tail = None;
    if region.construct.is_work_shared() {
        tail = reduction_tail(region, &mut block);
        if tail.is_some() {
            // Shown where the written return type was: the wire type's own tokens (a variable's annotation further
            // down) would push the device crate's body off its lines.
            let wire = region.reduce_wire().map(|w| relocate(w, output.span()));
            output = syn::parse_quote_spanned!(output.span()=> -> #wire);
        }
        lower_work_shared(region, &mut block);
    }
    Lowered {
        inputs,
        output,
        block,
        tail,
    }
}

/// A reduction tail that is an expression of the variables (`sum * step`): replaced by the variables (their
/// `TupleK` for several), and returned for the host to evaluate. The `let`s only the tail read stay used.
fn reduction_tail(region: &Region, block: &mut Block) -> Option<worksharing::Tail> {
    if region.reductions.is_empty() || region.reduce_tys.is_none() {
        return None;
    }
    let mut errors = crate::errors::Errors::default();
    let tail = worksharing::find(region, block, &mut errors)
        .and_then(|ws| worksharing::reduction_tail(region, block, &ws, &mut errors));
    errors.discard();
    let tail = tail?;
    let vars: Vec<&Ident> = region.reductions.iter().map(|(_, v)| v).collect();
    let value: Expr = match vars.as_slice() {
        [one] => syn::parse_quote_spanned!(one.span()=> #one),
        more => {
            let tuple = format_ident!("Tuple{}", more.len());
            syn::parse_quote!(::offload::__reduce::#tuple(#(#more),*))
        }
    };
    // The `let`s only the tail reads are unused on the device.
    for &k in &tail.let_stmts {
        if let Some(Stmt::Local(l)) = block.stmts.get_mut(k) {
            l.attrs.push(syn::parse_quote!(#[allow(unused_variables)]));
        }
    }
    if let Some(last) = block.stmts.last_mut() {
        *last = Stmt::Expr(value, None);
    }
    Some(tail)
}

fn lower_work_shared(region: &Region, block: &mut Block) {
    // `private(x)` declared without a value (`let mut x: f64;`, C's `double x;`): each iteration starts with its own
    // uninitialised `x`, which Rust then checks is assigned before it is read. First, so the addresses taken below
    // stay valid.
    let mut moved = take_uninitialised_privates(region, block);
    let mut errors = crate::errors::Errors::default();
    // Found again in the copy, so the addresses below are the copy's; the front end reported what is wrong with it.
    let ws = worksharing::find(region, block, &mut errors);
    errors.discard();
    let Some(ws) = ws else {
        return;
    };
    let lens = worksharing::indexed_slices(region, &ws);
    let rewrite = Rewrite::new(region, &ws);
    let target: *const syn::ExprForLoop = ws.for_loop;
    let across = AcrossChecks::new(region, &ws);
    let used_params: Vec<usize> = {
        let used = ws.res.used_in(ws.body());
        (0..region.params.len())
            .filter(|&k| used.contains(&ws.res.param(k)))
            .collect()
    };
    let driver = DriverArgs::new(region, &ws, lens);
    let uniform_lets: Vec<*const Expr> = if driver.safe {
        worksharing::uniform_lets(region, &ws)
            .into_iter()
            .map(|e| e as *const Expr)
            .collect()
    } else {
        Vec::new()
    };
    let mut rewrite = Some(rewrite);

    for stmt in &mut block.stmts {
        match stmt {
            Stmt::Local(l) => {
                if let Some(i) = &mut l.init {
                    if uniform_lets.iter().any(|u| std::ptr::eq(*u, &*i.expr)) {
                        *i.expr = driver.harden(&i.expr);
                    }
                }
            }
            Stmt::Expr(e @ Expr::ForLoop(_), _) => {
                let Expr::ForLoop(f) = &mut *e else {
                    continue;
                };
                if !std::ptr::eq(&*f, target) {
                    continue;
                }
                // The innermost body of the nest, rewritten in place (the addresses above point into it).
                let Some(body) = innermost_body(region, f) else {
                    return;
                };
                let Some(mut rw) = rewrite.take() else {
                    return;
                };
                rw.visit_block_mut(body);
                body.stmts.splice(0..0, moved.drain(..));
                let mut prelude = rebind(region, &used_params);
                prelude.extend(across.rebinds());
                body.stmts.splice(0..0, prelude);
                let lowered = driver.lower_loop(region, body);
                *e = syn::parse2(lowered).expect("the lowering's own syntax, around a parsed body");
            }
            _ => {}
        }
    }
    across.place_checks(block);
}

/// The body of the `collapse(n)` nest's innermost loop, `f`'s own for one loop.
fn innermost_body<'f>(region: &Region, f: &'f mut syn::ExprForLoop) -> Option<&'f mut Block> {
    let mut body: &mut Block = &mut f.body;
    for _ in 1..region.collapse {
        let Some(Stmt::Expr(Expr::ForLoop(inner), _)) = body.stmts.first_mut() else {
            return None;
        };
        body = &mut inner.body;
    }
    Some(body)
}

/// What the loop driver takes besides the body, computed once every thread alike: the nest's patterns and ranges,
/// the lengths and row of one loop, the strides of a nest.
struct DriverArgs {
    /// A safe region's: what every thread must compute alike, computed from primitive integers only (see the module
    /// doc).
    safe: bool,
    pats: Vec<Pat>,
    ranges: Vec<Expr>,
    lens: Vec<Ident>,
    strides: Vec<TokenStream>,
    /// A nest whose body writes a column of its flat index (`x * plane + flat`): `[plane]`.
    planes: Vec<TokenStream>,
    rows: Vec<TokenStream>,
    /// The by-value struct parameters whose fields may be uniform, read through their patterns.
    structs: Vec<worksharing::ValueStruct>,
}

impl DriverArgs {
    fn new(region: &Region, ws: &WorkShared, lens: Vec<Ident>) -> DriverArgs {
        let (pats, ranges) = nest_parts(ws);
        let mut driver = DriverArgs {
            safe: !region.is_unsafe,
            pats,
            ranges: Vec::new(),
            lens,
            strides: Vec::new(),
            planes: Vec::new(),
            rows: Vec::new(),
            structs: worksharing::value_structs(region),
        };
        driver.ranges = ranges.iter().map(|e| driver.harden(e)).collect();
        // No flat index written: strides no inner index is below, so no element is owned.
        // They are computed before the loop, so they are placed on its line (the outliner keeps tokens on their lines).
        let at = ws.for_loop.expr.span();
        let stride = |e: &Expr| {
            let e = driver.harden(e);
            relocate(quote!(::offload::__lanes::stride(#e)), at)
        };
        let strides: Vec<TokenStream> = match worksharing::nest_strides(region, ws) {
            Some(s) => s.into_iter().map(stride).collect(),
            None => vec![quote!(0); ws.inner.len()],
        };
        // A loop whose body writes `y[i * m + e]`: each iteration owns a row of `m`.
        let rows: Vec<TokenStream> = worksharing::row_length(region, ws)
            .map(stride)
            .into_iter()
            .collect();
        driver.planes = worksharing::nest_plane(region, ws)
            .map(stride)
            .into_iter()
            .collect();
        driver.strides = strides;
        driver.rows = rows;
        driver
    }

    /// `e` computed from primitive integers only, in a safe region.
    fn harden(&self, e: &Expr) -> Expr {
        if self.safe {
            worksharing::harden(e, &self.structs)
        } else {
            e.clone()
        }
    }

    /// The loop, lowered to the driver's call over the thread's share, with what the driver takes besides the
    /// share: the lengths and row (one loop) or the strides (a nest), and the closure's item pattern.
    fn lower_loop(&self, region: &Region, body: &Block) -> TokenStream {
        let mixed = Span::mixed_site();
        let harden = |e: &Expr| self.harden(e);
        let (pats, ranges, lens, strides, planes, rows) = (
            &self.pats,
            &self.ranges,
            &self.lens,
            &self.strides,
            &self.planes,
            &self.rows,
        );
        let (share_call, args, item) = if region.collapse > 1 {
            (
                share_call(region, &quote!((#(#ranges),*)), true, &harden),
                quote_spanned!(mixed=> [#(#strides),*], [#(#planes),*]),
                quote!((#(#pats),*)),
            )
        } else {
            let pat = &pats[0];
            (
                share_call(region, &ranges[0].to_token_stream(), false, &harden),
                quote_spanned!(mixed=> [#(#lens.len()),*], [#(#rows),*]),
                quote!(#pat),
            )
        };
        drive(region, share_call, args, item, body)
    }
}

/// Removes the `private(x)` locals declared without a value (`let mut x: f64;`, C's `double x;`) from the body's
/// top, for the loop's body: each iteration starts with its own uninitialised `x`, which Rust then checks is assigned
/// before it is read.
fn take_uninitialised_privates(region: &Region, block: &mut Block) -> Vec<Stmt> {
    let mut moved = Vec::new();
    block.stmts.retain(|stmt| match stmt {
        Stmt::Local(l) if l.init.is_none() && is_private(region, &l.pat) => {
            // Assigned once per iteration now, where `mut` was written for the whole loop.
            let mut l = l.clone();
            l.attrs.push(syn::parse_quote!(#[allow(unused_mut)]));
            moved.push(Stmt::Local(l));
            false
        }
        _ => true,
    });
    moved
}

/// What the loop body uses of the per-thread `let`s before it (see `worksharing::across_loop`): rebound as immutable
/// copies at the top of each iteration, and each, with what it is made from, checked to be `Copy + Sync` right after
/// its `let`.
struct AcrossChecks {
    /// Rebound in each iteration.
    direct: Vec<Ident>,
    /// The names to check after the body's top-level statement `k`.
    after_let: std::collections::BTreeMap<usize, Vec<Ident>>,
    /// The reduction variables, which each iteration borrows mutably.
    reductions: Vec<Ident>,
}

impl AcrossChecks {
    fn new(region: &Region, ws: &WorkShared) -> AcrossChecks {
        let across = if region.is_unsafe {
            worksharing::Across {
                direct: Vec::new(),
                reached: Vec::new(),
            }
        } else {
            worksharing::across_loop(region, ws)
        };
        let mut after_let: std::collections::BTreeMap<usize, Vec<Ident>> = Default::default();
        for &id in &across.reached {
            let b = &ws.res.bindings[id];
            if let crate::resolve::Site::Let(k) = b.site {
                after_let.entry(k).or_default().push(b.ident.clone());
            }
        }
        AcrossChecks {
            direct: across
                .direct
                .iter()
                .map(|&id| ws.res.bindings[id].ident.clone())
                .collect(),
            after_let,
            reductions: region.reductions.iter().map(|(_, v)| v.clone()).collect(),
        }
    }

    /// `let x = x;` for each value used across the loop, and `let _ = &mut s;` for each reduction variable: the loop
    /// writes it (its private copy stands in for it), so it borrows the variable mutably, as a sequential loop does,
    /// and a reference to it or a closure reading it, made before the loop and used in it, is rustc's borrow error,
    /// never a read of its initial value.
    fn rebinds(&self) -> Vec<Stmt> {
        let copies = self.direct.iter().map(|x| -> Stmt {
            syn::parse_quote_spanned!(x.span()=>
                #[allow(unused_variables, clippy::redundant_locals)]
                let #x = #x;
            )
        });
        let borrows = self
            .reductions
            .iter()
            .map(|v| -> Stmt { syn::parse_quote_spanned!(v.span()=> let _ = &mut #v;) });
        copies.chain(borrows).collect()
    }

    /// `::offload::__lanes::across(&raw const x);` after each `let` whose value the loop uses.
    fn place_checks(&self, block: &mut Block) {
        let stmts = std::mem::take(&mut block.stmts);
        for (k, stmt) in stmts.into_iter().enumerate() {
            block.stmts.push(stmt);
            for x in self.after_let.get(&k).into_iter().flatten() {
                block.stmts.push(
                    syn::parse_quote_spanned!(x.span()=> ::offload::__lanes::across(&raw const #x);),
                );
            }
        }
    }
}

/// The paths in the nest's body that name a checked view parameter (by binding: a local of the same name is not
/// one).
fn view_uses(region: &Region, ws: &WorkShared) -> Vec<*const syn::ExprPath> {
    struct V<'r> {
        res: &'r crate::resolve::Resolved,
        views: Vec<crate::resolve::BindingId>,
        out: Vec<*const syn::ExprPath>,
    }
    impl<'a> syn::visit::Visit<'a> for V<'_> {
        fn visit_expr_path(&mut self, p: &'a syn::ExprPath) {
            if self.res.id_of(p).is_some_and(|id| self.views.contains(&id)) {
                self.out.push(p);
            }
        }
        fn visit_item(&mut self, _: &'a syn::Item) {}
    }
    let mut v = V {
        res: &ws.res,
        views: ws.views(region),
        out: Vec::new(),
    };
    syn::visit::Visit::visit_block(&mut v, ws.body());
    v.out
}

/// The lowered loop: `{ let s = SHARE; let s = unsafe { Exclusive::new(s) }; DRIVER(s, ARGS, |ITEM, t| BODY) }`, the
/// driver `each`/`each_nest`, or `reduce`/`reduce_nest` with the private copy (a `TupleK` of them for several
/// variables, whose fields go back to the variables after).
fn drive(
    region: &Region,
    share_call: TokenStream,
    args: TokenStream,
    item: TokenStream,
    body: &Block,
) -> TokenStream {
    let mixed = Span::mixed_site();
    let share = format_ident!("__offload_share", span = mixed);
    let token = format_ident!("__offload_t", span = mixed);
    let private = format_ident!("__offload_s", span = mixed);
    let (each, reduce) = if region.collapse > 1 {
        (
            quote_spanned!(mixed=> each_nest),
            quote_spanned!(mixed=> reduce_nest),
        )
    } else {
        (quote_spanned!(mixed=> each), quote_spanned!(mixed=> reduce))
    };
    let run = match region.reductions.as_slice() {
        [] => quote_spanned!(mixed=>
            ::offload::__lanes::#each(#share, #args, |#item, #token: ::offload::__view::Own<'_>| #body);
        ),
        // The initial value is what the variable holds where the loop starts (a `let` before it may have read it),
        // recorded; the private copies start at the identity.
        [(op, var)] => {
            let (op, op_value) = (op.path(), region.reduce_op_value());
            quote_spanned!(mixed=>
                #var = ::offload::__lanes::#reduce(
                    #op_value, #share, #args, ::offload::__reduce_init::<#op, _>(#var),
                    |#item, #private, #token: ::offload::__view::Own<'_>| #body,
                );
            )
        }
        several => {
            let (op, op_value) = (region.reduce_op(), region.reduce_op_value());
            let tuple = format_ident!("Tuple{}", several.len());
            let vars: Vec<&Ident> = several.iter().map(|(_, v)| v).collect();
            let k = (0..several.len()).map(syn::Index::from);
            let (start, r) = (
                format_ident!("__offload_start", span = mixed),
                format_ident!("__offload_r", span = mixed),
            );
            quote_spanned!(mixed=>
                let #start = ::offload::__reduce_init::<#op, _>(
                    ::offload::__reduce::#tuple(#(#vars),*)
                );
                let #r = ::offload::__lanes::#reduce(
                    #op_value, #share, #args, #start,
                    |#item, #private, #token: ::offload::__view::Own<'_>| #body,
                );
                #(#vars = #r.#k;)*
            )
        }
    };
    // SAFETY (of the generated `unsafe`): this thread's part of the loop's iteration space, whose bounds
    // every thread computes alike (the uniformity rule).
    let lowered = quote_spanned!(mixed=> {
        let #share = #share_call;
        let #share = unsafe { ::offload::__view::Exclusive::new(#share) };
        #run
    });
    lowered
}

/// `let x = x;` for the parameters the loop body uses (`used`, by binding) that are cheap to copy (references,
/// primitive values, device pointers), and `let mut y = y.reborrow();` for its views, at the top of the driver's
/// closure. Captured, they are read through the closure's reference to the region's locals, and since a store through
/// a view or a slice might (as far as the optimiser knows) change those locals, every store reloads them: the loop
/// neither vectorises nor sheds its bounds checks. Rebound, they are the call's own values.
fn rebind(region: &Region, used: &[usize]) -> Vec<Stmt> {
    used.iter()
        .map(|&k| &region.params[k])
        .filter(|p| {
            // `self` cannot be rebound (`let self = self;` is no Rust): a method region's receiver stays captured.
            !p.mut_binding && p.ident != "self"
        })
        .filter_map(|p| {
            let x = &p.ident;
            let copy = match &p.kind {
                ParamKind::Slice { mutable, .. } | ParamKind::Ref { mutable, .. } => !mutable,
                ParamKind::DeviceBuffer { mutable } => !mutable,
                ParamKind::Value => worksharing::is_primitive_type(&p.ty),
                ParamKind::DevicePtr => true,
                // Holds slices; a parallel region's has no `&mut` field (the expansion checks), and stays captured.
                ParamKind::Mapper { .. } => false,
            };
            if let Some(v) = view_kind(region, &p.kind) {
                // By its path: no method a user's trait gives the view can stand in for it.
                let view = match v {
                    ViewKind::Checked => quote!(View),
                    ViewKind::Unchecked => quote!(UnsafeView),
                };
                Some(syn::parse_quote_spanned!(x.span()=>
                    #[allow(unused_mut, unused_variables)]
                    let mut #x = ::offload::__view::#view::reborrow(&mut #x);
                ))
            } else if copy {
                // Unused where the body shadows it before its use; redundant to the eye, not to the optimiser.
                Some(syn::parse_quote_spanned!(x.span()=>
                    #[allow(unused_variables, clippy::redundant_locals)]
                    let #x = #x;
                ))
            } else {
                None
            }
        })
        .collect()
}

/// The nest's loop patterns and ranges, outermost first.
fn nest_parts(ws: &WorkShared) -> (Vec<Pat>, Vec<Expr>) {
    std::iter::once(ws.for_loop)
        .chain(ws.inner.iter().map(|l| l.0))
        .map(|f| ((*f.pat).clone(), (*f.expr).clone()))
        .unzip()
}

/// Rewrites the work-shared loop's body into the driver closure's (see the module doc).
struct Rewrite {
    /// The paths that name a checked view parameter.
    views: Vec<*const syn::ExprPath>,
    /// The reduction variables' uses, with the variable's field in the private copy when there are several.
    uses: Vec<(*const syn::ExprPath, Option<usize>)>,
    /// The loop's `continue`s.
    continues: Vec<*const syn::ExprContinue>,
    /// The view indices written as a column of a `collapse(n)` nest's flat index.
    columns: Vec<(*const Expr, worksharing::ColumnSplit)>,
}

/// `(x, plane, flat)` of a view index written as a column of the flat index, split as `split` says.
fn column_parts(index: &Expr, split: worksharing::ColumnSplit) -> Option<(Expr, Expr, Expr)> {
    use worksharing::ColumnSplit::*;
    fn add(e: &Expr) -> Option<(&Expr, &Expr)> {
        match e {
            Expr::Paren(p) => add(&p.expr),
            Expr::Group(g) => add(&g.expr),
            Expr::Binary(b) if matches!(b.op, syn::BinOp::Add(_)) => Some((&b.left, &b.right)),
            _ => None,
        }
    }
    fn mul(e: &Expr) -> Option<(&Expr, &Expr)> {
        match e {
            Expr::Paren(p) => mul(&p.expr),
            Expr::Group(g) => mul(&g.expr),
            Expr::Binary(b) if matches!(b.op, syn::BinOp::Mul(_)) => Some((&b.left, &b.right)),
            _ => None,
        }
    }
    let (left, right) = add(index)?;
    let (column, flat): (&Expr, Expr) = match split {
        ColumnFirst => (left, right.clone()),
        FlatFirst => (right, left.clone()),
        Grouped => {
            let (column, outer) = add(left)?;
            (column, syn::parse_quote!(#outer + #right))
        }
    };
    // Without their parentheses, which would be unused as arguments (`k * (plane + 1)`).
    fn bare(e: &Expr) -> Expr {
        match e {
            Expr::Paren(p) => bare(&p.expr),
            e => e.clone(),
        }
    }
    let (x, plane) = mul(column)?;
    Some((bare(x), bare(plane), bare(&flat)))
}

impl VisitMut for Rewrite {
    fn visit_expr_mut(&mut self, e: &mut Expr) {
        let mixed = Span::mixed_site();
        match e {
            // The private copy, `*__offload_s`; in parentheses only where a postfix operator follows (`.max(..)`,
            // `[k]`, `.field`, `?`), so no `unused_parens` warning quotes the lowering. Several variables are the
            // copy's fields, `(*__offload_s).k`.
            Expr::Path(p) if self.use_of(p).is_some() => {
                let private = format_ident!("__offload_s", span = mixed);
                *e = match self.use_of(p).flatten() {
                    Some(k) => {
                        let k = syn::Index::from(k);
                        syn::parse_quote_spanned!(p.span()=> (*#private).#k)
                    }
                    None => syn::parse_quote_spanned!(p.span()=> *#private),
                };
            }
            Expr::MethodCall(syn::ExprMethodCall { receiver: x, .. })
            | Expr::Field(syn::ExprField { base: x, .. })
            | Expr::Index(syn::ExprIndex { expr: x, .. })
            | Expr::Try(syn::ExprTry { expr: x, .. })
                if matches!(&**x, Expr::Path(p) if self.use_of(p) == Some(None)) =>
            {
                let private = format_ident!("__offload_s", span = mixed);
                let span = x.span();
                **x = syn::parse_quote_spanned!(span=> (*#private));
                syn::visit_mut::visit_expr_mut(self, e);
            }
            Expr::Continue(c) if self.continues.contains(&(&*c as *const _)) => {
                *e = syn::parse_quote_spanned!(c.span()=> return);
            }
            // `y[lo..][..n]`: the row's sub-slice `lo..lo + n`, checked as one.
            Expr::Index(outer)
                if worksharing::slice_chain(outer)
                    .is_some_and(|(inner, _, _)| self.is_view(&inner.expr)) =>
            {
                let Some((inner, lo, n)) = worksharing::slice_chain(outer) else {
                    return;
                };
                let (y, mut lo, mut n) = (inner.expr.clone(), lo.clone(), n.clone());
                self.visit_expr_mut(&mut lo);
                self.visit_expr_mut(&mut n);
                let token = format_ident!("__offload_t", span = mixed);
                let span = outer.span();
                *e = syn::parse_quote_spanned!(span=> #y[::offload::__view::Own::range_len(&#token, #lo, #n)]);
            }
            Expr::Index(ix) if self.is_view(&ix.expr) => {
                let column = self.column_of(&ix.index);
                // The index first: it may hold other rewrites.
                syn::visit_mut::visit_expr_mut(self, &mut ix.index);
                let token = format_ident!("__offload_t", span = mixed);
                let index = &ix.index;
                // By its path: no method a user gives `Own` can stand in for the check. A sub-slice `lo..hi` of
                // the row is checked as one; a column `x * plane + flat` by its parts.
                *ix.index = if let Some((x, plane, flat)) =
                    column.and_then(|c| column_parts(index, c))
                {
                    syn::parse_quote_spanned!(index.span()=>
                        ::offload::__view::Own::at_column(&#token, #x, #plane, #flat))
                } else if matches!(&**index, Expr::Range(_)) {
                    syn::parse_quote_spanned!(index.span()=> ::offload::__view::Own::range(&#token, #index))
                } else {
                    syn::parse_quote_spanned!(index.span()=> ::offload::__view::Own::at(&#token, #index))
                };
            }
            _ => syn::visit_mut::visit_expr_mut(self, e),
        }
    }

    // Items are their own scope.
    fn visit_item_mut(&mut self, _: &mut syn::Item) {}
}

impl Rewrite {
    fn new(region: &Region, ws: &WorkShared) -> Rewrite {
        // One variable is the private copy itself; several are the fields of one `TupleK` copy.
        let several = region.reductions.len() > 1;
        Rewrite {
            views: if region.is_unsafe {
                Vec::new()
            } else {
                view_uses(region, ws)
            },
            uses: region
                .reductions
                .iter()
                .enumerate()
                .flat_map(|(k, (_, var))| {
                    worksharing::reduction_uses(ws, var)
                        .into_iter()
                        .map(move |u| (u as *const _, several.then_some(k)))
                })
                .collect(),
            continues: worksharing::exits(ws)
                .continues
                .into_iter()
                .map(|c| c as *const _)
                .collect(),
            columns: if region.is_unsafe {
                Vec::new()
            } else {
                worksharing::column_indices(region, ws)
            },
        }
    }

    fn column_of(&self, index: &Expr) -> Option<worksharing::ColumnSplit> {
        self.columns
            .iter()
            .find(|(e, _)| std::ptr::eq(*e, index))
            .map(|(_, s)| *s)
    }

    fn is_view(&self, e: &Expr) -> bool {
        match e {
            Expr::Path(p) => self.views.contains(&(p as *const _)),
            Expr::Paren(p) => self.is_view(&p.expr),
            _ => false,
        }
    }

    /// `Some(field)` if `p` is a use of a reduction variable (`field` when there are several).
    fn use_of(&self, p: &syn::ExprPath) -> Option<Option<usize>> {
        self.uses
            .iter()
            .find(|(u, _)| std::ptr::eq(*u, p))
            .map(|(_, k)| *k)
    }
}

/// `tokens` shown at `at`, each still resolved where it was written.
fn relocate(tokens: TokenStream, at: Span) -> TokenStream {
    tokens
        .into_iter()
        .map(|mut tt| {
            if let proc_macro2::TokenTree::Group(g) = &tt {
                let mut n = proc_macro2::Group::new(g.delimiter(), relocate(g.stream(), at));
                n.set_span(g.span().located_at(at));
                tt = n.into();
            } else {
                tt.set_span(tt.span().located_at(at));
            }
            tt
        })
        .collect()
}

/// Whether a `let` binds a `private(..)` variable.
fn is_private(region: &Region, pat: &Pat) -> bool {
    let ident = match pat {
        Pat::Ident(p) => &p.ident,
        Pat::Type(t) => match &*t.pat {
            Pat::Ident(p) => &p.ident,
            _ => return false,
        },
        _ => return false,
    };
    region.private.iter().any(|p| p == ident)
}

/// The thread's share of a loop's range, or of a `collapse(n)` nest's tuple of ranges: one block
/// (`schedule(static)`, the default), or chunks dealt round-robin or on demand.
fn share_call(
    region: &Region,
    range: &TokenStream,
    nest: bool,
    harden: &dyn Fn(&Expr) -> Expr,
) -> TokenStream {
    use crate::clause::Schedule;
    let mixed = Span::mixed_site();
    match &region.schedule {
        Some(Schedule::StaticChunk(c)) => {
            let c = harden(c);
            quote_spanned!(mixed=> ::offload::__share_chunks(#range, (#c) as usize))
        }
        Some(Schedule::Dynamic(c)) => {
            let c = harden(&c.clone().unwrap_or_else(|| syn::parse_quote!(1)));
            quote_spanned!(mixed=> ::offload::__share_dynamic(#range, (#c) as usize))
        }
        Some(Schedule::Static) | None if nest => {
            quote_spanned!(mixed=> ::offload::__share_nest(#range))
        }
        Some(Schedule::Static) | None => quote_spanned!(mixed=> ::offload::__share(#range)),
    }
}
