//! The data constructs' input: `target_data!(clauses => block)`, `target_enter_data!(clauses)`,
//! `target_exit_data!(clauses)` and `target_update!(to: a, from: b, device(d), if(c))`.

use crate::clause::{parse_clause, parse_clauses, set_once, Clause, Construct, Map, MapItem};
use crate::errors::Errors;
use proc_macro2::{Delimiter, Spacing, TokenTree as T};
use syn::parse::{ParseStream, Parser};
use syn::{Expr, Ident, Token};

/// A data construct as its macro wrote it: the clauses, checked, and `target_data!`'s block.
pub struct DataConstruct {
    /// Which of the data constructs it is.
    pub construct: Construct,
    /// Each mapped variable with its map, in clause order; a variable appears once.
    pub maps: Vec<(Map, MapItem)>,
    /// `device(n)`, if given.
    pub device: Option<Expr>,
    /// `if(cond)`, if given.
    pub if_cond: Option<Expr>,
    /// `target_enter_data!`'s `scope(s)`: the data scope borrowed data is entered in.
    pub scope: Option<Expr>,
    /// `target_data!`'s block.
    pub body: Option<syn::Block>,
}

impl DataConstruct {
    /// Parses a data construct's tokens, reporting every mistake found (a variable mapped twice, a clause given twice,
    /// no map, an `.await` in `target_data!`'s block).
    pub fn parse(
        tokens: proc_macro2::TokenStream,
        construct: Construct,
    ) -> syn::Result<DataConstruct> {
        let parser = |input: ParseStream| {
            let clauses = parse_clauses(input, construct)?;
            let body = if construct == Construct::Data {
                if !input.peek(Token![=>]) {
                    return Err(input.error("`target_data!` ends with `=> { block }`: `target_data!(map(to: x) => { .. })`"));
                }
                input.parse::<Token![=>]>()?;
                let b: syn::Block = input.parse()?;
                if !input.is_empty() {
                    return Err(input.error("nothing may follow the block"));
                }
                Some(b)
            } else {
                None
            };
            Ok((clauses, body))
        };
        let (clauses, body) = parser.parse2(tokens)?;
        let mut errors = Errors::default();
        if let Some(b) = &body {
            for span in awaits(b) {
                errors.push(syn::Error::new(
                    span,
                    "`.await` inside a `target_data!` block: the block is synchronous data-environment code, and a \
                     future suspended in it that is then forgotten would never exit the data region, leaving a stale \
                     mapping of memory that may be freed and reused; await before or after the block (a `target_data!` \
                     inside an `async` block is fine as long as its own block does not await)",
                ));
            }
        }
        let mut c = DataConstruct {
            construct,
            maps: Vec::new(),
            device: None,
            if_cond: None,
            scope: None,
            body,
        };
        for clause in clauses {
            match clause {
                Clause::Map { map, items } => {
                    for item in items {
                        if c.maps.iter().any(|(_, i)| i.ident == item.ident) {
                            errors.push(syn::Error::new(
                                item.ident.span(),
                                format!(
                                    "`{}` is mapped twice; a variable takes one map clause",
                                    item.ident
                                ),
                            ));
                        } else {
                            c.maps.push((map.clone(), item));
                        }
                    }
                }
                Clause::Device(kw, e) => set_once(&mut c.device, kw, e, &mut errors),
                Clause::If(kw, e) => set_once(&mut c.if_cond, kw, e, &mut errors),
                Clause::Scope(kw, e) => set_once(&mut c.scope, kw, e, &mut errors),
                Clause::Construct(..)
                | Clause::NumTeams(..)
                | Clause::ThreadLimit(..)
                | Clause::Reduction(..)
                | Clause::Collapse(..)
                | Clause::Schedule(..)
                | Clause::Private(..)
                | Clause::Instantiate(..) => {
                    unreachable!("parse_clause yields these for #[target] only")
                }
            }
        }
        if c.maps.is_empty() {
            errors.push(syn::Error::new(
                proc_macro2::Span::call_site(),
                "a data construct needs at least one map clause",
            ));
        }
        errors.finish(c)
    }
}

/// Where a block awaits, outside the `async` blocks, closures and items it contains (their futures are new ones;
/// awaiting them here is what suspends this block): for a message that says why. The block runs in a closure
/// (`offload-macros`' `flow`), so any other `.await`, one a macro writes included, is rustc's error (E0728) anyway;
/// macro calls are not looked into (a token scan would count an `.await` in an `async` block there too).
fn awaits(block: &syn::Block) -> Vec<proc_macro2::Span> {
    use syn::visit::Visit;
    #[derive(Default)]
    struct Awaits(Vec<proc_macro2::Span>);
    impl<'a> Visit<'a> for Awaits {
        fn visit_expr_await(&mut self, e: &'a syn::ExprAwait) {
            self.0.push(e.await_token.span);
            syn::visit::visit_expr_await(self, e);
        }
        fn visit_expr_async(&mut self, _: &'a syn::ExprAsync) {}
        fn visit_expr_closure(&mut self, c: &'a syn::ExprClosure) {
            if c.asyncness.is_none() {
                syn::visit::visit_expr_closure(self, c);
            }
        }
        fn visit_item(&mut self, _: &'a syn::Item) {}
    }
    let mut v = Awaits::default();
    v.visit_block(block);
    v.0
}

/// The direction of a `target_update!` item.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Motion {
    /// `to:`: host to device.
    To,
    /// `from:`: device to host.
    From,
}

/// A `target_update!`'s input.
pub struct Update {
    /// Each variable with its direction, in the order written; a variable appears once.
    pub items: Vec<(Motion, MapItem)>,
    /// `device(n)`, if given.
    pub device: Option<Expr>,
    /// `if(cond)`, if given.
    pub if_cond: Option<Expr>,
}

impl Update {
    /// `to: a, b[lo..hi], from: c, device(d), if(e)`, in any order.
    pub fn parse(tokens: proc_macro2::TokenStream) -> syn::Result<Update> {
        let mut errors = Errors::default();
        let parser = |input: ParseStream| {
            let mut u = Update {
                items: Vec::new(),
                device: None,
                if_cond: None,
            };
            let mut motion: Option<Motion> = None;
            while !input.is_empty() {
                let is_motion = (input.peek(Ident) || input.peek(Token![if]))
                    && input.peek2(Token![:])
                    && !input.peek2(Token![::]);
                if is_motion {
                    let kw: Ident = input.call(syn::ext::IdentExt::parse_any)?;
                    input.parse::<Token![:]>()?;
                    motion = Some(match kw.to_string().as_str() {
                        "to" => Motion::To,
                        "from" => Motion::From,
                        _ => {
                            return Err(syn::Error::new(
                                kw.span(),
                                format!("unknown motion `{kw}:`; use `to:` or `from:`"),
                            ))
                        }
                    });
                    continue;
                } else if input.peek2(syn::token::Paren) {
                    match parse_clause(input, Construct::Data)? {
                        Clause::Device(kw, e) => set_once(&mut u.device, kw, e, &mut errors),
                        Clause::If(kw, e) => set_once(&mut u.if_cond, kw, e, &mut errors),
                        Clause::Construct(..)
                        | Clause::NumTeams(..)
                        | Clause::ThreadLimit(..)
                        | Clause::Reduction(..)
                        | Clause::Collapse(..)
                        | Clause::Schedule(..)
                        | Clause::Private(..)
                        | Clause::Instantiate(..)
                        | Clause::Scope(..) => {
                            unreachable!("parse_clause yields these for #[target] and target_enter_data! only")
                        }
                        Clause::Map { .. } => {
                            return Err(input.error(
                                "`target_update!` takes `to: x` and `from: y`, not map clauses",
                            ))
                        }
                    }
                } else {
                    let Some(m) = motion else {
                        return Err(input.error("name the direction first: `target_update!(to: x)` or `target_update!(from: y)`"));
                    };
                    let item = crate::clause::parse_item(input)?;
                    if u.items.iter().any(|(_, i)| i.ident == item.ident) {
                        errors.push(syn::Error::new(
                            item.ident.span(),
                            format!("`{}` is named twice", item.ident),
                        ));
                    }
                    u.items.push((m, item));
                }
                if !input.is_empty() {
                    input.parse::<Token![,]>()?;
                }
            }
            if u.items.is_empty() {
                errors.push(input.error("`target_update!` needs `to: x` or `from: y`"));
            }
            Ok(u)
        };
        match parser.parse2(tokens) {
            Ok(u) => errors.finish(u),
            Err(e) => errors.fail(e),
        }
    }
}

/// Whether `block` visibly writes the variable `id` (re-bound by a `map(to: id)` clause): an assignment or compound
/// assignment to it or through it (`id[k] = ..`, `id[k] += ..`, `*id = ..`), `&mut id..`, a `_mut` or other
/// mutating slice method on it (`id.iter_mut()`, `id.fill(..)`), or a nested data construct that maps or updates it
/// `from`/`tofrom`/`alloc`. Then `target_data!` borrows a `to` source exclusively, so the host may write it in the
/// block (OpenMP's `to` governs only the copy-in). A write the tokens do not show (passing `id` on to a `&mut`
/// parameter) needs `&mut id` at the call. Macro arguments are scanned as tokens, so writes inside them count too.
pub fn block_writes(block: &syn::Block, id: &Ident) -> bool {
    use quote::ToTokens;
    tokens_write(block.to_token_stream(), id)
}

/// Whether the block passes the variable `id` itself on as an argument of a function or method call (`f(id)`,
/// `f(a, id)`, `x.m(id)`, `f::<T>(id)`), not inside a macro's arguments: the parameter may be `&mut [T]`, which a
/// `to` variable of an immutable source can only be through `offload::ToView`'s private copy.
///
/// A block that also moves the name elsewhere (`for v in id`, `let y = id;`) does not count: the view is a `&mut`,
/// which those would move, where the `&[T]` it stands for is copied.
pub fn block_passes_on(block: &syn::Block, id: &Ident) -> bool {
    use quote::ToTokens;
    let tokens = block.to_token_stream();
    tokens_pass_on(tokens.clone(), id) && !tokens_move(tokens, id)
}

/// Whether `id` is moved whole: iterated (`in id`) or bound or assigned as it is (`= id;`, `= id,`).
fn tokens_move(tokens: proc_macro2::TokenStream, id: &Ident) -> bool {
    let ts: Vec<T> = tokens.into_iter().collect();
    let t = Tokens(&ts);
    ts.iter().enumerate().any(|(k, tok)| match tok {
        T::Group(g) => tokens_move(g.stream(), id),
        T::Ident(i) if i == id && k > 0 => {
            let iterated = t.ident_is(k - 1, "in");
            // `= id` ending a statement or an argument, not `== id`, `<= id`, `=> id`.
            let bound = t.punct(k - 1, '=')
                && !(k >= 2 && matches!(&ts[k - 2], T::Punct(p) if p.spacing() == Spacing::Joint))
                && (k + 1 == ts.len() || t.punct(k + 1, ';') || t.punct(k + 1, ','));
            iterated || bound
        }
        _ => false,
    })
}

fn tokens_pass_on(tokens: proc_macro2::TokenStream, id: &Ident) -> bool {
    let ts: Vec<T> = tokens.into_iter().collect();
    ts.iter().enumerate().any(|(k, tok)| match tok {
        T::Group(g) => {
            // The arguments of a call: a parenthesised group after a name or a turbofish, not after `!`, a keyword
            // (`if (..)`, `in (..)`) or an operator (a tuple, a parenthesised expression).
            let call = g.delimiter() == Delimiter::Parenthesis
                && k > 0
                && match &ts[k - 1] {
                    T::Ident(i) => !matches!(
                        i.to_string().as_str(),
                        "if" | "while"
                            | "match"
                            | "in"
                            | "return"
                            | "break"
                            | "let"
                            | "for"
                            | "move"
                    ),
                    T::Punct(p) => p.as_char() == '>',
                    T::Group(_) => true,
                    T::Literal(_) => false,
                };
            (call && args_include(g.stream(), id)) || tokens_pass_on(g.stream(), id)
        }
        _ => false,
    })
}

/// Whether one of the comma-separated arguments in `args` is exactly `id`.
fn args_include(args: proc_macro2::TokenStream, id: &Ident) -> bool {
    let mut arg: Vec<T> = Vec::new();
    let mut found = false;
    for tok in args
        .into_iter()
        .chain(std::iter::once(T::Punct(proc_macro2::Punct::new(
            ',',
            Spacing::Alone,
        ))))
    {
        match &tok {
            T::Punct(p) if p.as_char() == ',' => {
                found |= matches!(arg.as_slice(), [T::Ident(i)] if i == id);
                arg.clear();
            }
            _ => arg.push(tok),
        }
    }
    found
}

/// `[T]` methods that take `&mut self` without saying so in their name (`*_mut` methods are recognised by name).
const MUTATING_METHODS: &[&str] = &[
    "fill",
    "fill_with",
    "swap",
    "reverse",
    "sort",
    "sort_by",
    "sort_by_key",
    "sort_by_cached_key",
    "sort_unstable",
    "sort_unstable_by",
    "sort_unstable_by_key",
    "copy_from_slice",
    "clone_from_slice",
    "copy_within",
    "rotate_left",
    "rotate_right",
    "swap_with_slice",
    "select_nth_unstable",
    "select_nth_unstable_by",
    "select_nth_unstable_by_key",
    "as_mut_ptr",
    "as_mut_ptr_range",
];

fn tokens_write(tokens: proc_macro2::TokenStream, id: &Ident) -> bool {
    let ts: Vec<T> = tokens.into_iter().collect();
    let t = Tokens(&ts);
    ts.iter().enumerate().any(|(k, tok)| match tok {
        T::Group(g) => tokens_write(g.stream(), id) || t.construct_writes(k, g, id),
        T::Ident(i) if i == id => t.written_at(k),
        _ => false,
    })
}

/// A token list, read around the variable's occurrences.
struct Tokens<'a>(&'a [T]);

impl Tokens<'_> {
    fn punct(&self, k: usize, c: char) -> bool {
        matches!(self.0.get(k), Some(T::Punct(p)) if p.as_char() == c)
    }

    fn joint(&self, k: usize) -> bool {
        matches!(self.0.get(k), Some(T::Punct(p)) if p.spacing() == Spacing::Joint)
    }

    fn ident_is(&self, k: usize, s: &str) -> bool {
        matches!(self.0.get(k), Some(T::Ident(i)) if i == s)
    }

    /// Whether the group at `k` is a nested data construct that writes `id`: `target_update!(from: id)`,
    /// `target_data!(map(tofrom: id) => ..)`.
    fn construct_writes(&self, k: usize, g: &proc_macro2::Group, id: &Ident) -> bool {
        let is_macro = |name: &str| k >= 2 && self.ident_is(k - 2, name) && self.punct(k - 1, '!');
        if is_macro("target_update") {
            if let Ok(u) = Update::parse(g.stream()) {
                return u
                    .items
                    .iter()
                    .any(|(m, i)| *m == Motion::From && i.ident == *id);
            }
        } else if is_macro("target_data") {
            if let Ok(c) = DataConstruct::parse(g.stream(), Construct::Data) {
                return c
                    .maps
                    .iter()
                    .any(|(m, i)| m.map_type != crate::clause::MapType::To && i.ident == *id);
            }
        }
        false
    }

    /// Whether the variable's name at `k` is the variable, written: borrowed `&mut`, a mutating method called on
    /// it or on a place in it, or assigned.
    fn written_at(&self, k: usize) -> bool {
        // A field or method named like the variable, a path segment, a macro: not the variable.
        if (k > 0 && (self.punct(k - 1, '.') || self.punct(k - 1, ':')))
            || self.punct(k + 1, '!')
            || (self.punct(k + 1, ':') && self.punct(k + 2, ':'))
        {
            return false;
        }
        // `&mut id`, `&mut *id`.
        let mut b = k;
        while b > 0 && self.punct(b - 1, '*') {
            b -= 1;
        }
        if b >= 2 && self.ident_is(b - 1, "mut") && self.punct(b - 2, '&') {
            return true;
        }
        match self.place_end(k) {
            Some(a) => self.assigned_at(a),
            None => true,
        }
    }

    /// The token after the place `id[..]`, `id.field`, `id.0` that starts at `k`, where what is done with it is;
    /// `None` if a method that mutates is called on it.
    fn place_end(&self, k: usize) -> Option<usize> {
        let ts = self.0;
        let mut a = k + 1;
        loop {
            match ts.get(a) {
                Some(T::Group(g)) if g.delimiter() == Delimiter::Bracket => a += 1,
                Some(T::Punct(p)) if p.as_char() == '.' && !self.joint(a) => match ts.get(a + 1) {
                    Some(T::Ident(m)) => {
                        let called = matches!(ts.get(a + 2), Some(T::Group(g)) if g.delimiter() == Delimiter::Parenthesis)
                            || (self.punct(a + 2, ':') && self.punct(a + 3, ':'));
                        if called {
                            let m = m.to_string();
                            if m.ends_with("_mut") || MUTATING_METHODS.contains(&m.as_str()) {
                                return None;
                            }
                            return Some(a);
                        }
                        a += 2;
                    }
                    Some(T::Literal(_)) => a += 2,
                    _ => return Some(a),
                },
                _ => return Some(a),
            }
        }
    }

    /// Whether the tokens at `a`, after a place, assign it: `=`, or a compound assignment.
    fn assigned_at(&self, a: usize) -> bool {
        // `=` alone is an assignment (`==`, `=>`, `<=`, `>=`, `!=` are joint or follow a joint punct).
        if self.punct(a, '=') && !self.joint(a) {
            return true;
        }
        if !self.joint(a) {
            return false;
        }
        // Compound assignment: `+=` .. `|=`, `<<=`, `>>=`.
        let c = match self.0.get(a) {
            Some(T::Punct(p)) => p.as_char(),
            _ => ' ',
        };
        let op = if "+-*/%^&|".contains(c) {
            a + 1
        } else if (c == '<' || c == '>') && self.punct(a + 1, c) && self.joint(a + 1) {
            a + 2
        } else {
            return false;
        };
        self.punct(op, '=') && !self.joint(op)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `check` on the block `block`, for the variable `x`.
    fn on_x(check: fn(&syn::Block, &Ident) -> bool, block: &str) -> bool {
        let b: syn::Block = syn::parse_str(block).unwrap();
        check(&b, &Ident::new("x", proc_macro2::Span::call_site()))
    }

    fn writes(block: &str) -> bool {
        on_x(block_writes, block)
    }

    #[test]
    fn writes_are_recognised() {
        for w in [
            "{ x[0] = 1.0; }",
            "{ x[i][j] += 2; }",
            "{ *x = 3; }",
            "{ x[0] <<= 1; }",
            "{ f(&mut x); }",
            "{ g(&mut x[1..]); }",
            "{ for v in x.iter_mut() { *v = 0; } }",
            "{ x.fill(0); }",
            "{ x[2..].copy_from_slice(&y); }",
            "{ let c = || x[0] = 1; }",
            "{ println!(\"{}\", { x[0] = 1; 0 }); }",
            "{ target_update!(from: x); }",
            "{ offload::target_data!(map(tofrom: x) => {}); }",
            "{ x.0 = 1; }",
        ] {
            assert!(writes(w), "{w}");
        }
    }

    #[test]
    fn reads_are_not_writes() {
        for r in [
            "{ f(x); }",
            "{ let a = x[0] == 1; }",
            "{ if x[0] <= 1 {} }",
            "{ if x[0] >= 1 {} }",
            "{ if x[0] != 1 {} }",
            "{ match x[0] { _ => {} } }",
            "{ let p = x.as_ptr(); }",
            "{ s.x = 1; }",
            "{ y.x[0] = 1; }",
            "{ let a = &x; }",
            "{ target_update!(to: x); }",
            "{ target_data!(map(to: x) => { f(x) }); }",
            "{ self::x::y = 1; }",
            "{ let t = x.len(); }",
        ] {
            assert!(!writes(r), "{r}");
        }
    }

    fn passes_on(block: &str) -> bool {
        on_x(block_passes_on, block)
    }

    #[test]
    fn passing_on_is_recognised() {
        for p in [
            "{ f(x); }",
            "{ f(2.0, x, y); }",
            "{ m::f::<f32>(x); }",
            "{ s.step(x) }",
            "{ for _ in 0..3 { f(x, 1); } }",
            "{ let t = offload::task_scope(|s| nowait_f(s, x)); }",
        ] {
            assert!(passes_on(p), "{p}");
        }
        for q in [
            "{ f(&x); }",
            "{ f(x[0]); }",
            "{ f(x.len()); }",
            "{ f(xs); }",
            "{ let t = (a, x); }",
            "{ if (x) {} }",
            "{ assert_eq!(x, y); }",
            "{ let s: &[f32] = x; }",
            "{ f(x); for v in x {} }",
            "{ f(x); let y = x; }",
        ] {
            assert!(!passes_on(q), "{q}");
        }
    }
}
