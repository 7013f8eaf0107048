//! The region body's names, resolved once: every use of a local (a path of one identifier) is bound to the
//! declaration it names, as rustc binds it, through shadowing, patterns, closures, nested blocks, `if let` and match
//! arms. The race-freedom, uniformity, reduction and `private` rules ask about these bindings ("is this the
//! parameter?", "is this the reduction variable?", "was this declared before the loop?"), never about spellings.
//!
//! What the resolver cannot follow it says so, and the rules fail closed on it: a macro's tokens are opaque, so every
//! binding in scope that a macro's tokens name counts as used there (read or written), and a statement macro that is
//! not one of std's expression macros may bind the names its tokens hold, so a later use of such a name resolves to
//! [`Site::Unknown`], which no rule accepts as a parameter, a reduction variable or a uniform value.

use crate::region::Param;
use std::collections::HashMap;
use syn::ext::IdentExt;
use syn::visit::Visit;
use syn::{Block, Expr, Ident, Pat, Stmt};

/// The name rustc resolves an identifier by: `r#x` is `x`.
pub fn key(ident: &Ident) -> String {
    ident.unraw().to_string()
}

/// An index into [`Resolved::bindings`].
pub type BindingId = usize;

/// Where a binding is declared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Site {
    /// The region's parameter `params[k]`.
    Param(usize),
    /// A `let` among the top-level statements of the region's body, `stmts[k]`: in a parallel region, every thread
    /// runs it for itself.
    Let(usize),
    /// Anything bound deeper: an inner block's `let`, a loop's, closure's or match arm's pattern.
    Inner,
    /// A name that the statement macro before it may have bound, a capitalised name in a pattern other than a
    /// `let`'s (a binding, or a constant), or one a block's `use` brings in: what it names is unknown.
    Unknown,
}

/// One binding of the body: a parameter, a name a pattern declares, or one a local item or `use` brings in.
#[derive(Clone, Debug)]
pub struct Binding {
    /// The name as declared.
    pub ident: Ident,
    /// Where it is declared.
    pub site: Site,
    /// `mut x`.
    pub mutable: bool,
    /// `ref x` / `ref mut x`: the binding borrows what the pattern matched.
    pub by_ref: bool,
    /// The whole pattern is this one name (`x`, `mut x`, `x: T`), so the `let`'s initialiser is its value.
    pub simple: bool,
    /// For [`Site::Unknown`]: what the name meant before the macro (the macro may not have bound it at all).
    pub shadows: Option<BindingId>,
    /// `let j = i;` or `let j = i as usize;` (also element by element from a tuple): the same value as `i`, perhaps
    /// in another integer type (C ports rebind their `int` loop variables so).
    pub alias_of: Option<BindingId>,
}

/// The body's bindings and what each use names.
pub struct Resolved {
    /// Every binding, indexed by [`BindingId`]: the parameters first, in order, then the body's in the order the
    /// resolver meets them.
    pub bindings: Vec<Binding>,
    uses: HashMap<*const syn::ExprPath, BindingId>,
    /// The bindings in scope that each macro's tokens name.
    macros: HashMap<*const syn::Macro, Vec<BindingId>>,
    /// What is in scope before each top-level statement of the body (innermost last).
    before: Vec<Vec<(String, BindingId)>>,
    /// Each `for` loop's variable.
    loops: HashMap<*const syn::ExprForLoop, BindingId>,
}

/// Std's macros whose arguments are expressions (and a format string): they bind nothing at their call site.
const EXPRESSION_MACROS: &[&str] = &[
    "assert",
    "assert_eq",
    "assert_ne",
    "debug_assert",
    "debug_assert_eq",
    "debug_assert_ne",
    "panic",
    "unreachable",
    "todo",
    "unimplemented",
    "print",
    "println",
    "eprint",
    "eprintln",
    "write",
    "writeln",
    "format_args",
    "matches",
];

impl Resolved {
    /// Resolves `block`, the body of a region with `params`.
    pub fn new(params: &[Param], block: &Block) -> Resolved {
        let mut r = Resolver {
            out: Resolved {
                bindings: Vec::new(),
                uses: HashMap::new(),
                macros: HashMap::new(),
                before: Vec::new(),
                loops: HashMap::new(),
            },
            scope: Vec::new(),
        };
        for (k, p) in params.iter().enumerate() {
            r.bind(&p.ident, Site::Param(k), p.mut_binding, false, true);
        }
        r.bind_items(&block.stmts);
        for (k, stmt) in block.stmts.iter().enumerate() {
            r.out.before.push(r.scope.clone());
            r.stmt(stmt, Some(k));
        }
        r.out
    }

    /// The binding a path expression names, if it is a local (one identifier, no generics) in scope.
    pub fn of(&self, p: &syn::ExprPath) -> Option<&Binding> {
        self.id_of(p).map(|id| &self.bindings[id])
    }

    /// As [`Resolved::of`], the binding's id. `p` must be a node of the resolved block itself: uses are keyed by
    /// address.
    pub fn id_of(&self, p: &syn::ExprPath) -> Option<BindingId> {
        self.uses.get(&(p as *const _)).copied()
    }

    /// The binding an expression names if it is a plain local (`x`, `(x)`).
    pub fn expr(&self, e: &Expr) -> Option<BindingId> {
        match e {
            Expr::Path(p) => self.id_of(p),
            Expr::Paren(p) => self.expr(&p.expr),
            Expr::Group(g) => self.expr(&g.expr),
            _ => None,
        }
    }

    /// The bindings in scope that a macro's tokens name.
    pub fn in_macro(&self, m: &syn::Macro) -> &[BindingId] {
        self.macros
            .get(&(m as *const _))
            .map_or(&[], |v| v.as_slice())
    }

    /// What `name` means just before the body's top-level statement `stmt` (for a clause's expression, which is
    /// read there).
    pub fn before(&self, stmt: usize, name: &str) -> Option<BindingId> {
        let name = name.strip_prefix("r#").unwrap_or(name);
        self.before
            .get(stmt)?
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, id)| *id)
    }

    /// `id` and, where a macro may have bound it, every binding it may still be: what a rule must treat it as.
    pub fn maybe(&self, id: BindingId) -> Vec<BindingId> {
        let mut out = vec![id];
        let mut at = id;
        while let Some(s) = self.bindings[at].shadows {
            out.push(s);
            at = s;
        }
        out
    }

    /// What `id` is a copy of, following [`Binding::alias_of`] to the first binding that is not one.
    pub fn root(&self, id: BindingId) -> BindingId {
        let mut at = id;
        while let Some(a) = self.bindings[at].alias_of {
            at = a;
        }
        at
    }

    /// The binding of the `for` loop's variable, when its pattern is one name.
    pub fn loop_var(&self, f: &syn::ExprForLoop) -> Option<BindingId> {
        self.loops.get(&(f as *const _)).copied()
    }

    /// The parameter `k`'s binding.
    pub fn param(&self, k: usize) -> BindingId {
        self.bindings
            .iter()
            .position(|b| b.site == Site::Param(k))
            .expect("every parameter is bound")
    }

    /// Every binding used inside `node` (paths, and names in macros), each once, in first-use order.
    pub fn used_in(&self, node: &impl UsesIn) -> Vec<BindingId> {
        struct V<'r> {
            r: &'r Resolved,
            out: Vec<BindingId>,
        }
        impl<'a> Visit<'a> for V<'_> {
            fn visit_expr_path(&mut self, p: &'a syn::ExprPath) {
                if let Some(id) = self.r.id_of(p) {
                    self.add(id);
                }
            }
            fn visit_macro(&mut self, m: &'a syn::Macro) {
                for id in self.r.in_macro(m) {
                    self.add(*id);
                }
            }
            fn visit_item(&mut self, _: &'a syn::Item) {}
        }
        impl V<'_> {
            fn add(&mut self, id: BindingId) {
                for id in self.r.maybe(id) {
                    if !self.out.contains(&id) {
                        self.out.push(id);
                    }
                }
            }
        }
        let mut v = V {
            r: self,
            out: Vec::new(),
        };
        node.visit_with(&mut v);
        v.out
    }
}

/// A syntax node [`Resolved::used_in`] can search.
pub trait UsesIn {
    /// Runs `v` over the node.
    fn visit_with<'a>(&'a self, v: &mut dyn Visit<'a>);
}

impl UsesIn for Block {
    fn visit_with<'a>(&'a self, v: &mut dyn Visit<'a>) {
        v.visit_block(self);
    }
}

impl UsesIn for Expr {
    fn visit_with<'a>(&'a self, v: &mut dyn Visit<'a>) {
        v.visit_expr(self);
    }
}

struct Resolver {
    out: Resolved,
    scope: Vec<(String, BindingId)>,
}

impl Resolver {
    fn bind(&mut self, ident: &Ident, site: Site, mutable: bool, by_ref: bool, simple: bool) {
        let id = self.out.bindings.len();
        let shadows = (site == Site::Unknown)
            .then(|| self.lookup(&key(ident)))
            .flatten();
        let name = key(ident);
        self.out.bindings.push(Binding {
            ident: ident.clone(),
            site,
            mutable,
            by_ref,
            simple,
            shadows,
            alias_of: None,
        });
        self.scope.push((name, id));
    }

    fn lookup(&self, name: &str) -> Option<BindingId> {
        self.scope
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, id)| *id)
    }

    /// Binds a pattern's names; any name in a pattern's paths or literals is not bound. A bare capitalised name is
    /// a constant, unit struct or variant (`None`) where such an item is in scope, and a binding where none is, which
    /// the resolver cannot tell: in a `let` (`let N = ..;`, which a constant's name would make refutable) it is a
    /// binding; elsewhere (a match arm's `S`, a closure's `|N|`) it may be either, so its uses mean "unknown"
    /// ([`Site::Unknown`]), which no rule accepts.
    fn bind_pat(&mut self, pat: &Pat, site: Site) {
        self.bind_pat_in(pat, site, false)
    }

    fn bind_pat_in(&mut self, pat: &Pat, site: Site, is_let: bool) {
        let simple =
            matches!(strip_type(pat), Pat::Ident(p) if p.subpat.is_none() && p.by_ref.is_none());
        struct V<'r> {
            r: &'r mut Resolver,
            site: Site,
            simple: bool,
            is_let: bool,
        }
        impl<'a> Visit<'a> for V<'_> {
            fn visit_pat_ident(&mut self, p: &'a syn::PatIdent) {
                // Subpatterns first: `x @ Some(y)` binds both.
                if let Some((_, sub)) = &p.subpat {
                    self.visit_pat(sub);
                }
                let constant = p.by_ref.is_none()
                    && p.mutability.is_none()
                    && p.subpat.is_none()
                    && p.ident
                        .to_string()
                        .starts_with(|c: char| c.is_ascii_uppercase());
                if !constant || self.is_let {
                    self.r.bind(
                        &p.ident,
                        self.site,
                        p.mutability.is_some(),
                        p.by_ref.is_some(),
                        self.simple,
                    );
                } else {
                    self.r.bind(&p.ident, Site::Unknown, false, false, false);
                }
            }
            // A range pattern's ends and a path pattern are constants, not bindings.
            fn visit_expr(&mut self, _: &'a Expr) {}
            fn visit_macro(&mut self, _: &'a syn::Macro) {}
        }
        V {
            r: self,
            site,
            simple,
            is_let,
        }
        .visit_pat(pat);
    }

    /// A statement; `top` is its index among the body's top-level statements.
    fn stmt(&mut self, stmt: &Stmt, top: Option<usize>) {
        match stmt {
            Stmt::Local(l) => {
                // The initialiser (and `else`) see the names before the `let`.
                if let Some(init) = &l.init {
                    self.visit_expr(&init.expr);
                    if let Some((_, e)) = &init.diverge {
                        self.visit_expr(e);
                    }
                }
                let first = self.out.bindings.len();
                self.bind_pat_in(&l.pat, top.map_or(Site::Inner, Site::Let), true);
                if let Some(init) = l.init.as_ref().filter(|i| i.diverge.is_none()) {
                    self.aliases(&l.pat, &init.expr, first);
                }
            }
            Stmt::Item(_) => {}
            Stmt::Expr(e, _) => self.visit_expr(e),
            Stmt::Macro(m) => {
                self.visit_macro(&m.mac);
                // Unless it is one of std's expression macros, the macro may expand to `let`s binding the names its
                // tokens hold: from here on they mean something unknown.
                if !is_expression_macro(&m.mac) {
                    let mut names = std::collections::BTreeSet::new();
                    collect_idents(m.mac.tokens.clone(), &mut names);
                    let span = syn::spanned::Spanned::span(&m.mac.path);
                    for n in names {
                        self.bind(&Ident::new(&n, span), Site::Unknown, true, false, false);
                    }
                }
            }
        }
    }

    /// Marks the bindings `pat` made (from `first` on) that copy another binding's value: `let j = i;`,
    /// `let j = i as T;`, and a tuple of these bound by a tuple pattern.
    fn aliases(&mut self, pat: &Pat, init: &Expr, first: BindingId) {
        fn copied(e: &Expr) -> Option<&syn::ExprPath> {
            match e {
                Expr::Path(p) => Some(p),
                Expr::Cast(c) => copied(&c.expr),
                Expr::Paren(p) => copied(&p.expr),
                _ => None,
            }
        }
        let pairs: Vec<(&Pat, &Expr)> = match (strip_type(pat), init) {
            (Pat::Tuple(p), Expr::Tuple(t)) if p.elems.len() == t.elems.len() => {
                p.elems.iter().zip(t.elems.iter()).collect()
            }
            (p, e) => vec![(p, e)],
        };
        for (p, e) in pairs {
            let (Pat::Ident(pi), Some(from)) = (strip_type(p), copied(e)) else {
                continue;
            };
            let Some(from) = self.out.id_of(from) else {
                continue;
            };
            if pi.subpat.is_some() || pi.by_ref.is_some() || pi.mutability.is_some() {
                continue;
            }
            if let Some(b) =
                (first..self.out.bindings.len()).find(|&id| self.out.bindings[id].ident == pi.ident)
            {
                self.out.bindings[b].alias_of = Some(from);
            }
        }
    }

    /// The items among a block's statements, which are in scope in the whole block and shadow what is outside it
    /// (`{ const s: u64 = 1; s }` is the constant, whatever local `s` the block is in): those in the value namespace
    /// (constants, statics, functions, unit and tuple structs) are other names than the locals outside; a `use` may
    /// bring any value in, so what it names is unknown.
    fn bind_items(&mut self, stmts: &[Stmt]) {
        for stmt in stmts {
            let Stmt::Item(item) = stmt else { continue };
            match item {
                syn::Item::Const(c) => self.bind(&c.ident, Site::Inner, false, false, false),
                syn::Item::Static(s) => self.bind(&s.ident, Site::Inner, false, false, false),
                syn::Item::Fn(f) => self.bind(&f.sig.ident, Site::Inner, false, false, false),
                syn::Item::Struct(s) if !matches!(s.fields, syn::Fields::Named(_)) => {
                    self.bind(&s.ident, Site::Inner, false, false, false)
                }
                syn::Item::Use(u) => {
                    let mut names = Vec::new();
                    use_names(&u.tree, &mut names);
                    for n in names {
                        self.bind(&n, Site::Unknown, false, false, false);
                    }
                }
                _ => {}
            }
        }
    }

    /// Runs `f` in a new scope.
    fn scoped(&mut self, f: impl FnOnce(&mut Self)) {
        let mark = self.scope.len();
        f(self);
        self.scope.truncate(mark);
    }

    /// An `if` or `while` condition: `let` patterns (and let chains' `&&`) bind for what follows them.
    fn condition(&mut self, cond: &Expr) {
        match cond {
            Expr::Let(l) => {
                self.visit_expr(&l.expr);
                self.bind_pat(&l.pat, Site::Inner);
            }
            Expr::Binary(b) if matches!(b.op, syn::BinOp::And(_)) => {
                self.condition(&b.left);
                self.condition(&b.right);
            }
            e => self.visit_expr(e),
        }
    }
}

fn strip_type(p: &Pat) -> &Pat {
    match p {
        Pat::Type(t) => strip_type(&t.pat),
        p => p,
    }
}

fn is_expression_macro(m: &syn::Macro) -> bool {
    m.path
        .segments
        .last()
        .is_some_and(|s| EXPRESSION_MACROS.contains(&&*s.ident.to_string()))
}

impl<'a> Visit<'a> for Resolver {
    fn visit_block(&mut self, b: &'a Block) {
        self.scoped(|r| {
            r.bind_items(&b.stmts);
            for s in &b.stmts {
                r.stmt(s, None);
            }
        });
    }

    fn visit_expr_path(&mut self, p: &'a syn::ExprPath) {
        if p.qself.is_none() && p.path.leading_colon.is_none() && p.path.segments.len() == 1 {
            let seg = &p.path.segments[0];
            if seg.arguments.is_none() {
                if let Some(id) = self.lookup(&key(&seg.ident)) {
                    self.out.uses.insert(p as *const _, id);
                }
            }
        }
    }

    fn visit_macro(&mut self, m: &'a syn::Macro) {
        let mut names = std::collections::BTreeSet::new();
        collect_idents(m.tokens.clone(), &mut names);
        // Format strings name locals too (`"{x}"`).
        collect_format_names(m.tokens.clone(), &mut names);
        let ids: Vec<BindingId> = names.iter().filter_map(|n| self.lookup(n)).collect();
        self.out.macros.insert(m as *const _, ids);
    }

    fn visit_expr_closure(&mut self, c: &'a syn::ExprClosure) {
        self.scoped(|r| {
            for p in &c.inputs {
                r.bind_pat(p, Site::Inner);
            }
            r.visit_expr(&c.body);
        });
    }

    fn visit_expr_for_loop(&mut self, f: &'a syn::ExprForLoop) {
        self.visit_expr(&f.expr);
        self.scoped(|r| {
            r.bind_pat(&f.pat, Site::Inner);
            if matches!(&*f.pat, Pat::Ident(p) if p.subpat.is_none()) {
                let id = r.out.bindings.len() - 1;
                r.out.loops.insert(f as *const _, id);
            }
            r.visit_block(&f.body);
        });
    }

    fn visit_expr_if(&mut self, i: &'a syn::ExprIf) {
        self.scoped(|r| {
            r.condition(&i.cond);
            r.visit_block(&i.then_branch);
        });
        if let Some((_, e)) = &i.else_branch {
            self.visit_expr(e);
        }
    }

    fn visit_expr_while(&mut self, w: &'a syn::ExprWhile) {
        self.scoped(|r| {
            r.condition(&w.cond);
            r.visit_block(&w.body);
        });
    }

    fn visit_expr_match(&mut self, m: &'a syn::ExprMatch) {
        self.visit_expr(&m.expr);
        for arm in &m.arms {
            self.scoped(|r| {
                r.bind_pat(&arm.pat, Site::Inner);
                if let Some((_, g)) = &arm.guard {
                    r.condition(g);
                }
                r.visit_expr(&arm.body);
            });
        }
    }

    // `let` outside a condition is no Rust; its pattern binds nothing anyone can use.
    fn visit_expr_let(&mut self, l: &'a syn::ExprLet) {
        self.visit_expr(&l.expr);
    }

    // Items cannot name the body's locals.
    fn visit_item(&mut self, _: &'a syn::Item) {}
}

/// The names a `use` tree brings into scope (a glob's are not known: none).
fn use_names(tree: &syn::UseTree, out: &mut Vec<Ident>) {
    match tree {
        syn::UseTree::Path(p) => use_names(&p.tree, out),
        syn::UseTree::Name(n) => out.push(n.ident.clone()),
        syn::UseTree::Rename(r) => out.push(r.rename.clone()),
        syn::UseTree::Group(g) => g.items.iter().for_each(|t| use_names(t, out)),
        syn::UseTree::Glob(_) => {}
    }
}

/// Every identifier in a token stream, groups included.
pub fn collect_idents(ts: proc_macro2::TokenStream, out: &mut std::collections::BTreeSet<String>) {
    for tt in ts {
        match tt {
            proc_macro2::TokenTree::Ident(i) => {
                out.insert(key(&i));
            }
            proc_macro2::TokenTree::Group(g) => collect_idents(g.stream(), out),
            _ => {}
        }
    }
}

/// The names a format string's `{name}` and `{name:..}` arguments capture.
fn collect_format_names(
    ts: proc_macro2::TokenStream,
    out: &mut std::collections::BTreeSet<String>,
) {
    for tt in ts {
        match tt {
            proc_macro2::TokenTree::Group(g) => collect_format_names(g.stream(), out),
            proc_macro2::TokenTree::Literal(l) => {
                if let Ok(syn::Lit::Str(s)) = syn::parse_str::<syn::Lit>(&l.to_string()) {
                    let s = s.value();
                    let mut rest = s.as_str();
                    while let Some(k) = rest.find('{') {
                        rest = &rest[k + 1..];
                        if rest.starts_with('{') {
                            rest = &rest[1..];
                            continue;
                        }
                        let end = rest
                            .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                            .unwrap_or(rest.len());
                        let name = &rest[..end];
                        if name.starts_with(|c: char| c.is_alphabetic() || c == '_') {
                            out.insert(name.to_string());
                        }
                    }
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolved(body: Block) -> (Block, Resolved) {
        let r = Resolved::new(&[], &body);
        (body, r)
    }

    /// The site of the binding the path `name` names in the top-level statement `stmt` (its first such path).
    fn site_in(body: &Block, r: &Resolved, stmt: usize, name: &str) -> Option<(Site, usize)> {
        struct V<'r> {
            r: &'r Resolved,
            name: &'r str,
            out: Option<(Site, usize)>,
        }
        impl<'a> Visit<'a> for V<'_> {
            fn visit_expr_path(&mut self, p: &'a syn::ExprPath) {
                if self.out.is_none() && p.path.is_ident(self.name) {
                    self.out = self.r.id_of(p).map(|id| (self.r.bindings[id].site, id));
                }
            }
        }
        let mut v = V { r, name, out: None };
        v.visit_stmt(&body.stmts[stmt]);
        v.out
    }

    #[test]
    fn shadowing_lets_and_inner_scopes() {
        let (b, r) = resolved(syn::parse_quote!({
            let s = 1;
            let s = s + 1;
            {
                let s = 5;
                s
            };
            let t = |s: u32| s;
            let u = match 3 {
                s => s,
            };
            let v = if let Some(s) = None::<u32> { s } else { s };
            s
        }));
        // `s + 1` reads the first `s`.
        assert_eq!(site_in(&b, &r, 1, "s").unwrap().0, Site::Let(0));
        // The block's `s` is its own.
        assert_eq!(site_in(&b, &r, 2, "s").unwrap().0, Site::Inner);
        assert_eq!(site_in(&b, &r, 3, "s").unwrap().0, Site::Inner);
        assert_eq!(site_in(&b, &r, 4, "s").unwrap().0, Site::Inner);
        // The tail's `s` is the second `let`.
        assert_eq!(site_in(&b, &r, 6, "s").unwrap().0, Site::Let(1));
        // `else { s }` is outside the `if let`'s pattern.
        struct Last<'r>(&'r Resolved, Vec<Site>);
        impl<'a> Visit<'a> for Last<'_> {
            fn visit_expr_path(&mut self, p: &'a syn::ExprPath) {
                if let Some(b) = self.0.of(p) {
                    self.1.push(b.site);
                }
            }
        }
        let mut l = Last(&r, Vec::new());
        l.visit_stmt(&b.stmts[5]);
        assert_eq!(l.1, [Site::Inner, Site::Let(1)]);
    }

    #[test]
    fn macros_are_uses_and_may_bind() {
        let (b, r) = resolved(syn::parse_quote!({
            let n = 4;
            let _k = {
                assert!(n > 0, "{n}");
                1
            };
            let m = {
                my_let!(n);
                n
            };
            n
        }));
        // `assert!` binds nothing: the tail's `n` is still the first `let`.
        assert_eq!(site_in(&b, &r, 3, "n").unwrap().0, Site::Let(0));
        // After an unknown statement macro naming `n`, `n` is unknown.
        assert_eq!(site_in(&b, &r, 2, "n").unwrap().0, Site::Unknown);
    }

    #[test]
    fn copies_are_aliases_of_what_they_copy() {
        let (b, r) = resolved(syn::parse_quote!({
            for j in 0..4i32 {
                let (j2, k) = (j as usize, j + 1);
                let m = j2;
                m
            }
        }));
        let Stmt::Expr(Expr::ForLoop(f), _) = &b.stmts[0] else {
            unreachable!()
        };
        let j = r.loop_var(f).unwrap();
        let Some(Stmt::Expr(tail, None)) = f.body.stmts.last() else {
            unreachable!()
        };
        // `m` copies `j2`, which copies `j`; `k` is no copy.
        assert_eq!(r.root(r.expr(tail).unwrap()), j);
        let k = r.bindings.iter().position(|b| b.ident == "k").unwrap();
        assert_eq!(r.root(k), k);
    }

    #[test]
    fn raw_names_capitalised_lets_and_block_items() {
        let (b, r) = resolved(syn::parse_quote!({
            let n = 1;
            let r#n = 2;
            let N = n;
            let _a = match 3 {
                N => N,
            };
            let _b = {
                const n: u32 = 4;
                n
            };
            N
        }));
        // `n` after `let r#n` is that `let`.
        assert_eq!(site_in(&b, &r, 2, "n").unwrap().0, Site::Let(1));
        // A capitalised `let` binds; a match arm's capitalised name is unknown (a binding or a constant).
        assert_eq!(site_in(&b, &r, 5, "N").unwrap().0, Site::Let(2));
        assert_eq!(site_in(&b, &r, 3, "N").unwrap().0, Site::Unknown);
        // A block's constant shadows the local outside it.
        assert_eq!(site_in(&b, &r, 4, "n").unwrap().0, Site::Inner);
    }

    #[test]
    fn format_strings_name_their_captures() {
        let mut names = std::collections::BTreeSet::new();
        collect_format_names(quote::quote!("{a} {{b}} {c:?} {0} {d.x}"), &mut names);
        assert_eq!(names.into_iter().collect::<Vec<_>>(), ["a", "c", "d"]);
    }
}
