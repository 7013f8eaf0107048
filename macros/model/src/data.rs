//! The data constructs' input: `target_data!(clauses => block)`, `target_enter_data!(clauses)`,
//! `target_exit_data!(clauses)` and `target_update!(to: a, from: b, device(d), if(c))`.

use crate::clause::{
    parse_clause, parse_clauses, set_once, Clause, Construct, Errors, Map, MapItem,
};
use syn::parse::{ParseStream, Parser};
use syn::{Expr, Ident, Token};

pub struct DataConstruct {
    pub construct: Construct,
    pub maps: Vec<(Map, MapItem)>,
    pub device: Option<Expr>,
    pub if_cond: Option<Expr>,
    /// `target_data!`'s block.
    pub body: Option<syn::Block>,
}

impl DataConstruct {
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
                Clause::Construct(_)
                | Clause::NumTeams(..)
                | Clause::ThreadLimit(..)
                | Clause::Reduction(..)
                | Clause::Collapse(..)
                | Clause::Schedule(..)
                | Clause::Private(..) => {
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

/// Where a block awaits, outside the `async` blocks and closures it contains (their futures are new ones; awaiting
/// them here is what suspends this block). Inside macro calls, whose bodies are tokens, any `.await` counts.
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
        fn visit_macro(&mut self, m: &'a syn::Macro) {
            tokens_await(m.tokens.clone(), &mut self.0);
        }
    }
    fn tokens_await(tokens: proc_macro2::TokenStream, out: &mut Vec<proc_macro2::Span>) {
        let mut after_dot = false;
        for t in tokens {
            after_dot = match t {
                proc_macro2::TokenTree::Group(g) => {
                    tokens_await(g.stream(), out);
                    false
                }
                proc_macro2::TokenTree::Ident(i) => {
                    if after_dot && i == "await" {
                        out.push(i.span());
                    }
                    false
                }
                proc_macro2::TokenTree::Punct(p) => p.as_char() == '.',
                proc_macro2::TokenTree::Literal(_) => false,
            };
        }
    }
    let mut v = Awaits::default();
    v.visit_block(block);
    v.0
}

/// The direction of a `target_update!` item.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Motion {
    To,
    From,
}

pub struct Update {
    pub items: Vec<(Motion, MapItem)>,
    pub device: Option<Expr>,
    pub if_cond: Option<Expr>,
}

impl Update {
    /// `to: a, b[lo..hi], from: c, device(d), if(e)`, in any order.
    pub fn parse(tokens: proc_macro2::TokenStream) -> syn::Result<Update> {
        let parser = |input: ParseStream| {
            let mut u = Update {
                items: Vec::new(),
                device: None,
                if_cond: None,
            };
            let mut errors = Errors::default();
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
                        Clause::Construct(_)
                        | Clause::NumTeams(..)
                        | Clause::ThreadLimit(..)
                        | Clause::Reduction(..)
                        | Clause::Collapse(..)
                        | Clause::Schedule(..)
                        | Clause::Private(..) => {
                            unreachable!("parse_clause yields these for #[target] only")
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
            errors.finish(u)
        };
        parser.parse2(tokens)
    }
}
