//! A `target_data!` block runs in a closure, called at once inside the data region's guards: a closure cannot be
//! suspended, so an `.await` in the block, whichever macro wrote it, is rustc's error (E0728), and no future can stop
//! between the region's entry and its exit. The control flow that leaves the block would mean something else in a
//! closure, so it is carried across it: `return e` becomes `return Flow::Return(e)`, `expr?` a `match` that returns
//! the residual the same way, and `break`/`continue` to a loop or labeled block outside the block `return
//! Flow::ExitK(value)`; after the closure the expansion matches the `Flow` and does the same `return`, `break` or
//! `continue` there, where the guards exit on the way out as they always did.
//!
//! What is rewritten: the block's own expressions, not those of the closures, `async` blocks, `const` blocks and
//! items inside it (their `return`s and `?`s are their own), and the blocks of nested `target_data!`s and the
//! arguments of the standard macros that evaluate theirs in place (`println!`, `assert_eq!`, `vec![a, b]`, ..). A
//! `return`, `?`, `break` or `continue` that another macro writes is left alone; in the closure it is an error
//! (a `Flow` is expected, `?` needs a function returning `Result`, `break` needs a loop), never another meaning.

use proc_macro2::{Span, TokenStream, TokenTree};
use quote::{quote, quote_spanned, ToTokens};
use syn::punctuated::Punctuated;
use syn::visit_mut::VisitMut;
use syn::{Expr, Lifetime, Token};

/// How many `break`/`continue` targets outside a block `offload::__private::Flow` carries.
const EXITS: usize = 8;

/// The standard macros whose arguments are expressions evaluated in place, where the block's control flow is
/// rewritten too.
const IN_PLACE_MACROS: &[&str] = &[
    "assert",
    "assert_eq",
    "assert_ne",
    "dbg",
    "debug_assert",
    "debug_assert_eq",
    "debug_assert_ne",
    "eprint",
    "eprintln",
    "format",
    "format_args",
    "panic",
    "print",
    "println",
    "todo",
    "unimplemented",
    "unreachable",
    "vec",
    "write",
    "writeln",
];

/// A `break` or `continue` target outside the block.
#[derive(Clone)]
pub struct Exit {
    /// The label, or `None` for the loop around the construct.
    pub label: Option<Lifetime>,
    /// What leaves for it.
    pub kind: ExitKind,
}

/// How the block leaves for an [`Exit`].
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum ExitKind {
    /// `break` (`value`: with a value, `break 'a v`).
    Break { value: bool },
    /// `continue`.
    Continue,
}

/// The block with its control flow rewritten, and what leaves it.
pub struct Rewritten {
    /// The block, to run in the closure.
    pub block: syn::Block,
    /// A `return` or `?` leaves it.
    pub returns: bool,
    /// The `break`/`continue` targets outside it, in order of appearance (`Flow::Exit0`, `Exit1`, ..).
    pub exits: Vec<Exit>,
}

/// Rewrites the block's control flow (see the module's comment).
pub fn rewrite(block: &syn::Block) -> syn::Result<Rewritten> {
    let mut v = Rewriter::default();
    let mut block = block.clone();
    v.visit_block_mut(&mut block);
    let mut errors = v.errors.into_iter();
    if let Some(mut e) = errors.next() {
        errors.for_each(|x| e.combine(x));
        return Err(e);
    }
    Ok(Rewritten {
        block,
        returns: v.returns,
        exits: v.exits,
    })
}

impl Rewritten {
    /// Runs the block in its closure and carries out its control flow: the statements that end the expansion's
    /// innermost block (where the guards live), whose value is the block's. `attrs` go on the closure's `let`.
    pub fn run(&self, attrs: TokenStream) -> TokenStream {
        let p = quote!(::offload::__private);
        let block = &self.block;
        // Always a `Flow`, even when nothing leaves the block: a `return` this did not rewrite (one a macro wrote)
        // then fails to type-check instead of leaving only the closure.
        let flow = syn::Ident::new("__offload_flow", Span::mixed_site());
        let (v, n) = (
            syn::Ident::new("__offload_v", Span::mixed_site()),
            syn::Ident::new("__offload_never", Span::mixed_site()),
        );
        let infallible = quote!(::core::convert::Infallible);
        let r_ty = if self.returns {
            quote!(_)
        } else {
            infallible.clone()
        };
        let x_tys = (0..EXITS).map(|k| {
            if k < self.exits.len() {
                quote!(_)
            } else {
                infallible.clone()
            }
        });
        let mut arms = vec![quote!(#p::Flow::Value(#v) => #v,)];
        let mut unused = Vec::new();
        if self.returns {
            arms.push(quote!(#p::Flow::Return(#v) => return #v,));
        } else {
            unused.push(quote!(#p::Flow::Return(#n)));
        }
        for k in 0..EXITS {
            let variant = quote::format_ident!("Exit{}", k);
            let Some(exit) = self.exits.get(k) else {
                unused.push(quote!(#p::Flow::#variant(#n)));
                continue;
            };
            let label = &exit.label;
            arms.push(match exit.kind {
                ExitKind::Break { value: true } => {
                    quote!(#p::Flow::#variant(#v) => break #label #v,)
                }
                ExitKind::Break { value: false } => quote!(#p::Flow::#variant(()) => break #label,),
                ExitKind::Continue => quote!(#p::Flow::#variant(()) => continue #label,),
            });
        }
        // The variants the block does not use are `Infallible`: their arm cannot be reached.
        let unused = (!unused.is_empty()).then(|| {
            quote! {
                #[allow(unreachable_patterns)]
                #(#unused)|* => match #n {},
            }
        });
        quote! {
            #attrs
            // The block is bound first: as a call's argument, a block of one expression draws `unused_braces`.
            let #flow = #p::run_block(|| -> #p::Flow<_, #r_ty, #(#x_tys),*> {
                let #v = #block;
                #p::Flow::Value(#v)
            });
            match #flow {
                #(#arms)*
                #unused
            }
        }
    }
}

/// A loop or labeled block inside the block, around the expression being visited.
struct Target {
    label: Option<Lifetime>,
}

#[derive(Default)]
struct Rewriter {
    /// The loops and labeled blocks around the visited expression, inside the block, innermost last.
    targets: Vec<Target>,
    returns: bool,
    exits: Vec<Exit>,
    errors: Vec<syn::Error>,
}

impl Rewriter {
    /// Whether a `break`/`continue` with `label` leaves the block: an unlabeled one outside every loop inside it (one
    /// inside a labeled block only is rustc's error, left to it), a labeled one whose label is not declared inside.
    fn leaves(&self, label: &Option<Lifetime>) -> bool {
        match label {
            None => self.targets.is_empty(),
            Some(l) => !self
                .targets
                .iter()
                .any(|t| t.label.as_ref().is_some_and(|x| x.ident == l.ident)),
        }
    }

    /// The `return Flow::ExitK(value)` for a `break`/`continue` that leaves the block.
    fn exit(
        &mut self,
        span: Span,
        label: &Option<Lifetime>,
        kind: ExitKind,
        value: Option<&Expr>,
    ) -> Expr {
        let same = |e: &Exit| {
            e.kind == kind
                && match (&e.label, label) {
                    (None, None) => true,
                    (Some(a), Some(b)) => a.ident == b.ident,
                    _ => false,
                }
        };
        let k = match self.exits.iter().position(same) {
            Some(k) => k,
            None => {
                if self.exits.len() == EXITS {
                    self.errors.push(syn::Error::new(
                        span,
                        format!(
                            "more than {EXITS} `break`/`continue` targets outside this `target_data!` block: the \
                             block runs in a closure, across which offload carries at most {EXITS}; set a flag and \
                             leave the loops after the construct"
                        ),
                    ));
                }
                self.exits.push(Exit {
                    label: label.clone(),
                    kind,
                });
                self.exits.len() - 1
            }
        };
        let variant = quote::format_ident!("Exit{}", k.min(EXITS - 1));
        let value = match value {
            Some(v) => v.to_token_stream(),
            None => quote!(()),
        };
        syn::parse_quote_spanned!(span=> return ::offload::__private::Flow::#variant(#value))
    }

    fn within(&mut self, label: Option<Lifetime>, f: impl FnOnce(&mut Self)) {
        self.targets.push(Target { label });
        f(self);
        self.targets.pop();
    }
}

/// Whether `tokens` hold a `return`, `break`, `continue` or `?`.
fn has_flow(tokens: TokenStream) -> bool {
    tokens.into_iter().any(|t| match t {
        TokenTree::Group(g) => has_flow(g.stream()),
        TokenTree::Ident(i) => i == "return" || i == "break" || i == "continue",
        TokenTree::Punct(p) => p.as_char() == '?',
        TokenTree::Literal(_) => false,
    })
}

impl VisitMut for Rewriter {
    fn visit_expr_mut(&mut self, e: &mut Expr) {
        match e {
            // Their control flow is their own.
            Expr::Closure(_) | Expr::Async(_) | Expr::Const(_) | Expr::TryBlock(_) => {}
            Expr::Return(r) => {
                if let Some(x) = &mut r.expr {
                    self.visit_expr_mut(x);
                }
                self.returns = true;
                let span = r.return_token.span;
                let value = match &r.expr {
                    Some(x) => x.to_token_stream(),
                    None => quote!(()),
                };
                r.expr = Some(Box::new(syn::parse_quote_spanned!(span=>
                    ::offload::__private::Flow::Return(#value))));
            }
            Expr::Try(t) => {
                self.visit_expr_mut(&mut t.expr);
                self.returns = true;
                let span = t.question_token.span;
                let inner = &t.expr;
                let (v, r) = (
                    syn::Ident::new("__offload_v", Span::mixed_site().located_at(span)),
                    syn::Ident::new("__offload_residual", Span::mixed_site().located_at(span)),
                );
                let p = quote_spanned!(span=> ::offload::__private);
                *e = syn::parse_quote_spanned!(span=>
                    match #p::BlockTry::branch(#inner) {
                        ::core::result::Result::Ok(#v) => #v,
                        ::core::result::Result::Err(#r) =>
                            return #p::Flow::Return(#p::FromBlockResidual::from_residual(#r)),
                    }
                );
            }
            Expr::Break(b) => {
                if let Some(x) = &mut b.expr {
                    self.visit_expr_mut(x);
                }
                if self.leaves(&b.label) {
                    let kind = ExitKind::Break {
                        value: b.expr.is_some(),
                    };
                    *e = self.exit(b.break_token.span, &b.label, kind, b.expr.as_deref());
                }
            }
            Expr::Continue(c) => {
                if self.leaves(&c.label) {
                    *e = self.exit(c.continue_token.span, &c.label, ExitKind::Continue, None);
                }
            }
            Expr::Loop(l) => {
                let label = l.label.as_ref().map(|l| l.name.clone());
                self.within(label, |v| v.visit_block_mut(&mut l.body));
            }
            Expr::While(w) => {
                let label = w.label.as_ref().map(|l| l.name.clone());
                self.within(label, |v| {
                    v.visit_expr_mut(&mut w.cond);
                    v.visit_block_mut(&mut w.body);
                });
            }
            Expr::ForLoop(f) => {
                self.visit_expr_mut(&mut f.expr);
                let label = f.label.as_ref().map(|l| l.name.clone());
                self.within(label, |v| v.visit_block_mut(&mut f.body));
            }
            Expr::Block(b) if b.label.is_some() => {
                let label = b.label.as_ref().map(|l| l.name.clone());
                self.within(label, |v| v.visit_block_mut(&mut b.block));
            }
            _ => syn::visit_mut::visit_expr_mut(self, e),
        }
    }

    // Items (functions, `macro_rules!` definitions, ..) are code of their own; types hold only constant expressions.
    fn visit_item_mut(&mut self, _: &mut syn::Item) {}
    fn visit_type_mut(&mut self, _: &mut syn::Type) {}

    fn visit_macro_mut(&mut self, m: &mut syn::Macro) {
        let Some(name) = m.path.segments.last().map(|s| s.ident.to_string()) else {
            return;
        };
        if name == "target_data" {
            // A nested data region's block is part of this one's control flow: its exits are this block's too (its
            // own expansion then carries the rewritten `return`s across its closure).
            let mut tokens: Vec<TokenTree> = m.tokens.clone().into_iter().collect();
            let n = tokens.len();
            let arrow = n >= 3
                && matches!(&tokens[n - 3], TokenTree::Punct(p) if p.as_char() == '=')
                && matches!(&tokens[n - 2], TokenTree::Punct(p) if p.as_char() == '>');
            if let (true, Some(TokenTree::Group(g))) = (arrow, tokens.last()) {
                if let Ok(mut block) = syn::parse2::<syn::Block>(TokenTree::Group(g.clone()).into())
                {
                    self.visit_block_mut(&mut block);
                    let mut group = proc_macro2::Group::new(g.delimiter(), block.stmts_tokens());
                    group.set_span(g.span());
                    tokens[n - 1] = TokenTree::Group(group);
                    m.tokens = tokens.into_iter().collect();
                }
            }
        } else if IN_PLACE_MACROS.contains(&name.as_str()) && has_flow(m.tokens.clone()) {
            let parser = Punctuated::<Expr, Token![,]>::parse_terminated;
            if let Ok(mut args) = m.parse_body_with(parser) {
                for a in args.iter_mut() {
                    self.visit_expr_mut(a);
                }
                m.tokens = args.into_token_stream();
            }
        }
    }
}

/// A block's statements as tokens, without its braces.
trait StmtsTokens {
    fn stmts_tokens(&self) -> TokenStream;
}

impl StmtsTokens for syn::Block {
    fn stmts_tokens(&self) -> TokenStream {
        let mut t = TokenStream::new();
        for s in &self.stmts {
            s.to_tokens(&mut t);
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rewritten(block: &str) -> (String, bool, usize) {
        let b: syn::Block = syn::parse_str(block).unwrap();
        let r = rewrite(&b).unwrap();
        (
            r.block.to_token_stream().to_string(),
            r.returns,
            r.exits.len(),
        )
    }

    #[test]
    fn what_leaves_the_block_is_rewritten() {
        let (s, returns, exits) = rewritten("{ if a { return 1; } let x = f()?; x }");
        assert!(returns && exits == 0, "{s}");
        assert!(
            s.contains("Flow :: Return (1)") && s.contains("BlockTry :: branch (f ())"),
            "{s}"
        );
        let (s, _, exits) =
            rewritten("{ if a { break; } if b { continue 'outer; } if c { break 'l 5; } }");
        assert_eq!(exits, 3, "{s}");
        assert!(
            s.contains("Flow :: Exit0 (())") && s.contains("Flow :: Exit2 (5)"),
            "{s}"
        );
    }

    #[test]
    fn what_stays_inside_is_left_alone() {
        for b in [
            "{ for i in 0..3 { if i == 1 { continue; } break; } }",
            "{ 'l: loop { loop { break 'l; } } }",
            "{ 'b: { break 'b; } }",
            "{ let c = || { return 1; }; let d = async { f()? }; }",
            "{ fn g() -> Option<u8> { None?; return Some(1); } }",
            "{ my_macro!(return 1); }",
        ] {
            let (s, returns, exits) = rewritten(b);
            assert!(!returns && exits == 0, "{b}: {s}");
            assert!(!s.contains("Flow"), "{b}: {s}");
        }
    }

    #[test]
    fn nested_data_regions_and_in_place_macros_are_rewritten() {
        let (s, returns, exits) =
            rewritten("{ target_data!(map(to: x) => { g(x)?; break; }); println!(\"{}\", h()?); }");
        assert!(returns && exits == 1, "{s}");
        assert!(s.contains("map (to : x) => {"), "{s}");
        assert_eq!(s.matches("BlockTry :: branch").count(), 2, "{s}");
        // A `for` loop's iterator is outside the loop.
        let (_, _, exits) = rewritten("{ for v in [if a { break } else { 1 }] {} }");
        assert_eq!(exits, 1);
    }

    #[test]
    fn more_exits_than_a_flow_carries_is_an_error() {
        let labels: String = (0..9).map(|k| format!("if a {{ break 'l{k}; }}")).collect();
        let b: syn::Block = syn::parse_str(&format!("{{ {labels} }}")).unwrap();
        assert!(rewrite(&b).is_err());
    }
}
