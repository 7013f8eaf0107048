//! The uniformity rule: what every thread computes for itself but must compute alike (the nest's bounds, steps,
//! strides, row length, chunk size), and the lowering's hardened form of those values.

use super::*;

/// The uniformity rule: the work-shared loops' bounds must be the same in every thread, or the threads' shares of
/// "one" iteration space would overlap and two threads would own one element. So the bounds (and `step_by`'s step)
/// may use only integer literals, the region's by-value integer parameters, `x.len()` of its slice parameters,
/// constants and statics, per-thread `let`s computed from these alone, and arithmetic on them. `unsafe fn` regions
/// opt out.
pub fn check_uniform(region: &Region, ws: &WorkShared, errors: &mut Errors) {
    if region.is_unsafe {
        return;
    }
    let (env, _) = uniform_env(region, ws);
    check_uniform_parts(region, ws, &env, errors);
}

/// The per-thread `let`s the values every thread must compute alike use (bounds, steps, strides, row length, chunk
/// size), directly or through each other: their initial values. Other `let`s may hold anything.
pub fn uniform_lets<'a>(region: &Region, ws: &WorkShared<'a>) -> Vec<&'a Expr> {
    // The parts are evaluated where the loop starts: what their names mean there.
    let mut needed: BTreeSet<BindingId> = BTreeSet::new();
    for e in uniform_parts(region, ws) {
        let mut names = BTreeSet::new();
        collect_idents(quote::ToTokens::to_token_stream(e), &mut names);
        needed.extend(names.iter().filter_map(|n| ws.at_loop(n)));
    }
    // Latest first: a `let` is needed if a root or a later needed `let` names it.
    let mut out = Vec::new();
    for (id, init) in uniform_env(region, ws).1.into_iter().rev() {
        if needed.contains(&id) {
            needed.extend(ws.res.used_in(init));
            out.push(init);
        }
    }
    out
}

/// The chunk size of `schedule(static, c)` / `schedule(dynamic, c)`: threads dealing chunks of different sizes would
/// overlap.
pub(super) fn chunk(region: &Region) -> Option<&Expr> {
    use crate::clause::Schedule;
    match &region.schedule {
        Some(Schedule::StaticChunk(c) | Schedule::Dynamic(Some(c))) => Some(c),
        _ => None,
    }
}

/// What every thread must compute alike: the nest's ranges, the strides of its flat index and its column's plane,
/// the row length, and the chunk size (a clause's, resolved where the loop starts).
pub(super) fn uniform_parts<'b>(region: &'b Region, ws: &'b WorkShared) -> Vec<&'b Expr> {
    let loops = std::iter::once(&*ws.for_loop.expr).chain(ws.inner.iter().map(|l| &*l.0.expr));
    let mut parts: Vec<&Expr> = loops.flat_map(range_parts).collect();
    parts.extend(nest_strides(region, ws).unwrap_or_default());
    parts.extend(nest_plane(region, ws));
    parts.extend(row_length(region, ws));
    parts.extend(chunk(region));
    parts
}

/// `e` (which the uniformity rule accepted) computed from primitive integers only: every leaf goes through
/// `__lanes::int` (so only the built-in operators apply to it), a slice's `len()` through `__lanes::len`, and
/// `(a..b).step_by(s)` is `Iterator::step_by`: no operator, method or trait of the user's can make it differ between
/// threads.
///
/// A field of a by-value struct parameter (`structs`: [`value_structs`]) is read through its struct's own pattern,
/// `{ let Inputs { n: f, .. } = inp; int(f) }`: a pattern never goes through `Deref`, so `inp.n` is the struct's own
/// field (every thread's copy holds the same bits), not what a user's `deref` returns.
pub fn harden(e: &Expr, structs: &[ValueStruct]) -> Expr {
    let h = |e: &Expr| Box::new(harden(e, structs));
    match e {
        Expr::Field(f) if value_field(f, structs).is_some() => {
            let (s, member) = (
                value_field(f, structs).unwrap_or_else(|| unreachable!()),
                &f.member,
            );
            let (ty, base) = (&s.ty, &f.base);
            // Through `&S`, the built-in deref of a reference, never a user's.
            let base = if s.by_ref {
                quote::quote!(*#base)
            } else {
                quote::quote!(#base)
            };
            let v = syn::Ident::new("__offload_f", Span::mixed_site());
            syn::parse_quote_spanned!(e.span()=> {
                let #ty { #member: #v, .. } = #base;
                ::offload::__lanes::int(#v)
            })
        }
        // A mapper struct's field (the uniformity rule admits no other field).
        Expr::Lit(_) | Expr::Path(_) | Expr::Field(_) => {
            syn::parse_quote_spanned!(e.span()=> ::offload::__lanes::int(#e))
        }
        Expr::Paren(p) => Expr::Paren(syn::ExprParen {
            expr: h(&p.expr),
            ..p.clone()
        }),
        Expr::Group(g) => Expr::Group(syn::ExprGroup {
            expr: h(&g.expr),
            ..g.clone()
        }),
        // A leaf cast to an integer may be any primitive number (`N as usize` of an `f64` constant).
        Expr::Cast(c) if matches!(strip(&c.expr), Expr::Lit(_) | Expr::Path(_)) => {
            let x = &c.expr;
            Expr::Cast(syn::ExprCast {
                expr: Box::new(syn::parse_quote_spanned!(x.span()=> ::offload::__lanes::num(#x))),
                ..c.clone()
            })
        }
        Expr::Cast(c) => Expr::Cast(syn::ExprCast {
            expr: h(&c.expr),
            ..c.clone()
        }),
        Expr::Unary(u) => Expr::Unary(syn::ExprUnary {
            expr: h(&u.expr),
            ..u.clone()
        }),
        Expr::Binary(b) => Expr::Binary(syn::ExprBinary {
            left: h(&b.left),
            right: h(&b.right),
            ..b.clone()
        }),
        Expr::Range(r) => Expr::Range(syn::ExprRange {
            start: r.start.as_deref().map(h),
            end: r.end.as_deref().map(h),
            ..r.clone()
        }),
        // Every `len()` the rule accepted (a slice parameter's, a mapper field's, a constant's or a static's), by
        // path: a user's trait giving an integer constant a `len` method cannot stand in for a length.
        Expr::MethodCall(m) if m.method == "len" && m.args.is_empty() => {
            let x = &m.receiver;
            syn::parse_quote_spanned!(e.span()=> ::offload::__lanes::len(&#x))
        }
        Expr::MethodCall(m) if m.method == "step_by" && m.args.len() == 1 => {
            // The range as an argument needs no parentheses (they would draw `unused_parens`).
            let (r, step) = (h(strip(&m.receiver)), h(&m.args[0]));
            syn::parse_quote_spanned!(e.span()=> ::core::iter::Iterator::step_by(#r, #step))
        }
        Expr::MethodCall(m) => Expr::MethodCall(syn::ExprMethodCall {
            receiver: h(&m.receiver),
            args: m.args.iter().map(|a| harden(a, structs)).collect(),
            ..m.clone()
        }),
        e => e.clone(),
    }
}

/// A struct parameter whose named fields are uniform: taken by value (`inp: Inputs`) or through a shared reference
/// (`s: &Sim`, which no thread can write through), not `mut`.
#[derive(Clone, Debug)]
pub struct ValueStruct {
    /// The parameter's name.
    pub ident: syn::Ident,
    /// The type's path as a pattern names it (no generic arguments).
    pub ty: syn::Path,
    /// Taken as `&S`.
    pub by_ref: bool,
}

/// The struct parameters whose named fields are uniform.
pub fn value_structs(region: &Region) -> Vec<ValueStruct> {
    region
        .params
        .iter()
        .filter(|p| !p.mut_binding)
        .filter_map(|p| {
            let (ty, by_ref) = match &p.kind {
                ParamKind::Value if !is_primitive_type(&p.ty) => (&p.ty, false),
                ParamKind::Ref { ty, mutable: false } => (ty, true),
                _ => return None,
            };
            match ty {
                syn::Type::Path(t) if t.qself.is_none() && !is_primitive_type(ty) => {
                    let mut path = t.path.clone();
                    for s in &mut path.segments {
                        s.arguments = syn::PathArguments::None;
                    }
                    Some(ValueStruct {
                        ident: p.ident.clone(),
                        ty: path,
                        by_ref,
                    })
                }
                _ => None,
            }
        })
        .collect()
}

/// The struct parameter of `f`'s base when `f` is `inp.n`, a named field of a uniform struct parameter.
fn value_field<'s>(f: &syn::ExprField, structs: &'s [ValueStruct]) -> Option<&'s ValueStruct> {
    let syn::Member::Named(_) = f.member else {
        return None;
    };
    let Expr::Path(p) = strip(&f.base) else {
        return None;
    };
    let id = p.path.get_ident()?;
    structs.iter().find(|s| s.ident == *id)
}

/// The uniform bindings, and the uniform `let`s' values in order.
pub(super) fn uniform_env<'a, 'r>(
    region: &Region,
    ws: &'r WorkShared<'a>,
) -> (Uniform<'r>, Vec<(BindingId, &'a Expr)>) {
    let mut lets = Vec::new();
    let mut env = Uniform {
        res: &ws.res,
        at: None,
        ints: BTreeSet::new(),
        slices: BTreeSet::new(),
        mappers: BTreeSet::new(),
        structs: BTreeSet::new(),
    };
    let structs = value_structs(region);
    for (k, p) in region.params.iter().enumerate() {
        let id = ws.res.param(k);
        match &p.kind {
            // Its body may change it.
            _ if p.mut_binding => {}
            ParamKind::Value if is_int_type(&p.ty) => {
                env.ints.insert(id);
            }
            ParamKind::Slice { .. } | ParamKind::DeviceBuffer { .. } => {
                env.slices.insert(id);
            }
            // A mapper struct taken by value (and not `mut`): every thread gets the same fields, which its body
            // cannot assign, so `g.n` and `g.x.len()` are uniform.
            ParamKind::Mapper { by_ref: None } => {
                env.mappers.insert(id);
            }
            // A struct taken by value (a `#[declare_target]` one, `Copy`): every thread gets the same bits, which
            // its body cannot assign, so its named fields are uniform (read through its pattern, never a `Deref`:
            // see `harden`).
            ParamKind::Value | ParamKind::Ref { mutable: false, .. }
                if structs.iter().any(|s| s.ident == p.ident) =>
            {
                env.structs.insert(id);
            }
            // Other values, references and device pointers: only their own methods could read them, and those are
            // not known to be pure.
            _ => {}
        }
    }
    // In order, so each `let` is judged by what it may name.
    for (k, l) in ws.lets.iter().enumerate() {
        let uniform = l
            .init
            .as_ref()
            .is_some_and(|i| i.diverge.is_none() && env.check(&i.expr).is_ok());
        let id = (0..ws.res.bindings.len()).find(|&id| {
            let b = &ws.res.bindings[id];
            b.site == Site::Let(k) && b.simple && !b.mutable
        });
        if let (Some(id), true, Some(init)) = (id, uniform, &l.init) {
            env.ints.insert(id);
            lets.push((id, &*init.expr));
        }
    }
    (env, lets)
}

pub(super) fn check_uniform_parts(
    region: &Region,
    ws: &WorkShared,
    env: &Uniform,
    errors: &mut Errors,
) {
    const MSG: &str = "a work-shared loop's bounds must be the same in every thread (each thread runs the body's \
                       `let`s itself, and takes its share of the range it computed): compute them from integer \
                       literals, the region's integer parameters, `x.len()` of its slices, constants, and `let`s made \
                       of these, with arithmetic; or declare the region `unsafe fn`";
    let env = Uniform {
        at: Some(ws.at),
        ..env.clone()
    };
    for part in uniform_parts(region, ws) {
        if let Err(span) = env.check(part) {
            errors.push(syn::Error::new(span, MSG));
        }
    }
}

/// The bounds of `a..b` or `(a..b).step_by(s)`: `a`, `b` and `s`.
pub(super) fn range_parts(e: &Expr) -> Vec<&Expr> {
    match e {
        Expr::Range(r) => r.start.iter().chain(&r.end).map(|b| &**b).collect(),
        Expr::Paren(p) => range_parts(&p.expr),
        Expr::MethodCall(m) if m.method == "step_by" => {
            let mut v = range_parts(&m.receiver);
            v.extend(m.args.iter());
            v
        }
        e => vec![e],
    }
}

/// A primitive number, `bool` or `char`: cheap to copy.
pub fn is_primitive_type(ty: &syn::Type) -> bool {
    is_int_type(ty)
        || matches!(ty, syn::Type::Path(p) if p.qself.is_none()
            && p.path.get_ident().is_some_and(|i| ["f32", "f64", "bool", "char"].contains(&&*i.to_string())))
}

pub(super) fn is_int_type(ty: &syn::Type) -> bool {
    const INTS: &[&str] = &[
        "u8", "u16", "u32", "u64", "u128", "usize", "i8", "i16", "i32", "i64", "i128", "isize",
    ];
    matches!(ty, syn::Type::Path(p) if p.qself.is_none() && p.path.get_ident().is_some_and(|i| INTS.contains(&&*i.to_string())))
}

/// What a uniform bound may name, as the body's `let`s are read in order: bindings, never spellings.
#[derive(Clone)]
pub(super) struct Uniform<'r> {
    res: &'r Resolved,
    /// `Some(k)`: judge expressions as the lowering evaluates them, before the body's statement `k` (the loop): the
    /// nest's ranges, strides, row length and chunk size are all moved there. `None`: where they are written.
    at: Option<usize>,
    /// Integer-valued bindings every thread sees alike: integer parameters and uniform `let`s.
    ints: BTreeSet<BindingId>,
    /// Slice parameters, whose `len()` is uniform.
    slices: BTreeSet<BindingId>,
    /// By-value mapper struct parameters: their fields (`g.n`) and slice fields' `len()` are uniform.
    mappers: BTreeSet<BindingId>,
    /// Other by-value struct parameters: their named fields (`inp.lookups`) are uniform.
    structs: BTreeSet<BindingId>,
}

impl Uniform<'_> {
    /// Whether the local `e` names is in `set`; `None` if it names no local (a constant or a static, the same for
    /// every thread).
    fn local(&self, e: &Expr, set: &BTreeSet<BindingId>) -> Option<bool> {
        let Expr::Path(p) = strip(e) else {
            return Some(false);
        };
        let id = match self.at {
            Some(k) => self.res.before(k, &p.path.get_ident()?.to_string())?,
            None => self.res.id_of(p)?,
        };
        // A name a macro may have rebound is not known to be anything.
        Some(self.res.maybe(id).len() == 1 && set.contains(&id))
    }

    /// `Ok` if `e` evaluates alike in every thread, else the span of the first part that may not.
    fn check(&self, e: &Expr) -> Result<(), Span> {
        // Methods of the integer types that read only their operands.
        const PURE: &[&str] = &[
            "min",
            "max",
            "clamp",
            "pow",
            "abs",
            "unsigned_abs",
            "div_ceil",
            "next_multiple_of",
            "saturating_add",
            "saturating_sub",
            "saturating_mul",
            "wrapping_add",
            "wrapping_sub",
            "wrapping_mul",
            "isqrt",
            "ilog2",
        ];
        let check = |e: &Expr| self.check(e);
        match e {
            Expr::Lit(l) if matches!(l.lit, syn::Lit::Int(_)) => Ok(()),
            Expr::Paren(p) => check(&p.expr),
            Expr::Group(g) => check(&g.expr),
            Expr::Path(p) if p.qself.is_none() && p.path.get_ident().is_some() => {
                match self.local(e, &self.ints) {
                    Some(false) => Err(e.span()),
                    _ => Ok(()),
                }
            }
            Expr::Path(p) if p.qself.is_none() => Ok(()),
            Expr::Field(_) if self.mapper_field(e) || self.struct_field(e) => Ok(()),
            Expr::MethodCall(m)
                if m.method == "len" && m.args.is_empty() && self.mapper_field(&m.receiver) =>
            {
                Ok(())
            }
            Expr::Cast(c) if is_int_type(&c.ty) => check(&c.expr),
            Expr::Unary(u) if matches!(u.op, syn::UnOp::Neg(_)) => check(&u.expr),
            Expr::Binary(b) if !is_compound_assign(&b.op) => {
                check(&b.left)?;
                check(&b.right)
            }
            Expr::MethodCall(m)
                if m.method == "len"
                    && m.args.is_empty()
                    && self.local(&m.receiver, &self.slices) != Some(false)
                    && name(&m.receiver).is_some() =>
            {
                Ok(())
            }
            Expr::MethodCall(m)
                if PURE.contains(&&*m.method.to_string()) && m.turbofish.is_none() =>
            {
                self.check_int(&m.receiver)?;
                m.args.iter().try_for_each(check)
            }
            _ => Err(e.span()),
        }
    }

    /// `g.f`: a named field of a by-value mapper struct parameter.
    fn mapper_field(&self, e: &Expr) -> bool {
        match e {
            Expr::Field(f) => {
                matches!(f.member, syn::Member::Named(_))
                    && self.local(&f.base, &self.mappers) == Some(true)
            }
            Expr::Paren(p) => self.mapper_field(&p.expr),
            _ => false,
        }
    }

    /// `inp.f`: a named field of a by-value struct parameter.
    fn struct_field(&self, e: &Expr) -> bool {
        match e {
            Expr::Field(f) => {
                matches!(f.member, syn::Member::Named(_))
                    && self.local(&f.base, &self.structs) == Some(true)
            }
            Expr::Paren(p) => self.struct_field(&p.expr),
            _ => false,
        }
    }

    /// As [`Uniform::check`], for a method receiver: its type must be an integer's, so the method is the integer
    /// type's own.
    fn check_int(&self, e: &Expr) -> Result<(), Span> {
        match e {
            Expr::Lit(l) if matches!(l.lit, syn::Lit::Int(_)) => Ok(()),
            Expr::Paren(p) => self.check_int(&p.expr),
            Expr::Path(_) if self.local(e, &self.ints) == Some(true) => Ok(()),
            Expr::Field(_) if self.mapper_field(e) || self.struct_field(e) => Ok(()),
            Expr::Cast(c) if is_int_type(&c.ty) => self.check(&c.expr),
            Expr::MethodCall(m) if m.method == "len" => self.check(e),
            _ => Err(e.span()),
        }
    }
}
