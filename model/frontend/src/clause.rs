//! OpenMP clauses as the macros spell them: `map([always,] [present,] [close,] TYPE: a, b[lo..hi])`, `device(expr)`,
//! `if(expr)`, with the map types each construct allows. One grammar for `#[target]` and the data constructs.

use crate::errors::Errors;
use proc_macro2::{Span, TokenStream};
use syn::parse::ParseStream;
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{Expr, Ident, Token};

/// OpenMP map types.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MapType {
    /// `to`: copied to the device on entry.
    To,
    /// `from`: copied back to the host on exit.
    From,
    /// `tofrom`: both; what `map(x)` without a type means on `#[target]` and `target_data!`.
    ToFrom,
    /// `alloc`: device storage only, no copy.
    Alloc,
    /// `release`: on exit, drop one reference without copying back.
    Release,
    /// `delete`: on exit, remove the mapping whatever its reference count.
    Delete,
}

impl MapType {
    /// The map type as clauses spell it (`tofrom`).
    pub fn name(self) -> &'static str {
        match self {
            MapType::To => "to",
            MapType::From => "from",
            MapType::ToFrom => "tofrom",
            MapType::Alloc => "alloc",
            MapType::Release => "release",
            MapType::Delete => "delete",
        }
    }

    /// The map-type bits of [`offload_model::abi::map_type`].
    pub fn bits(self) -> u64 {
        use offload_model::abi::map_type::*;
        match self {
            MapType::To => TO,
            MapType::From => FROM,
            MapType::ToFrom => TO | FROM,
            MapType::Alloc | MapType::Release => 0,
            MapType::Delete => DELETE,
        }
    }

    /// Whether the construct writes the host data (so it must be reachable mutably).
    pub fn writes_host(self) -> bool {
        matches!(self, MapType::From | MapType::ToFrom)
    }
}

/// Which construct a clause list belongs to: it decides the map types allowed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Construct {
    /// `#[target]`.
    Target,
    /// `target_data!`.
    Data,
    /// `target_enter_data!`.
    EnterData,
    /// `target_exit_data!`.
    ExitData,
}

impl Construct {
    fn name(self) -> &'static str {
        match self {
            Construct::Target => "#[target]",
            Construct::Data => "target_data!",
            Construct::EnterData => "target_enter_data!",
            Construct::ExitData => "target_exit_data!",
        }
    }

    fn allowed(self) -> &'static [MapType] {
        use MapType::*;
        match self {
            Construct::Target | Construct::Data => &[To, From, ToFrom, Alloc],
            Construct::EnterData => &[To, Alloc],
            Construct::ExitData => &[From, Release, Delete],
        }
    }

    fn default_map_type(self) -> MapType {
        match self {
            Construct::Target | Construct::Data => MapType::ToFrom,
            Construct::EnterData => MapType::To,
            Construct::ExitData => MapType::From,
        }
    }
}

/// How a variable is mapped: explicitly by a clause, or implicitly from its type.
#[derive(Clone, Debug)]
pub struct Map {
    /// The map type: as written, the construct's default for `map(x)`, or what the parameter's type implies.
    pub map_type: MapType,
    /// The `always` modifier: copy even if the data are present.
    pub always: bool,
    /// The `present` modifier: the data must be mapped already.
    pub present: bool,
    /// The `close` modifier: allocate close to the device.
    pub close: bool,
    /// Where the clause named the variable; `None` for an implicit map.
    pub clause_span: Option<Span>,
}

impl Map {
    /// The map a variable no clause names gets: `map_type`, no modifiers, no clause span.
    pub fn implicit(map_type: MapType) -> Self {
        Map {
            map_type,
            always: false,
            present: false,
            close: false,
            clause_span: None,
        }
    }

    /// All map-type bits, modifiers included.
    pub fn bits(&self) -> u64 {
        use offload_model::abi::map_type::*;
        let mut b = self.map_type.bits() | TARGET_PARAM;
        if self.always {
            b |= ALWAYS;
        }
        if self.present {
            b |= PRESENT;
        }
        if self.close {
            b |= CLOSE;
        }
        if self.clause_span.is_none() {
            b |= IMPLICIT;
        }
        b
    }
}

/// An array section `x[lo..hi]` (either bound may be left out, `..=` includes `hi`).
#[derive(Clone, Debug)]
pub struct Section {
    /// The first index, 0 if left out.
    pub lo: Option<Expr>,
    /// The end (included if `inclusive`), the slice's length if left out.
    pub hi: Option<Expr>,
    /// `..=`: `hi` is included.
    pub inclusive: bool,
    /// The brackets' span.
    pub span: Span,
}

impl Section {
    /// `(lo, hi)` as `usize` expressions, `hi` defaulting to `len`; each bound is typed `usize` at its own span.
    pub fn bounds(&self, len: TokenStream) -> (TokenStream, TokenStream) {
        let lo = self.lo.as_ref().map_or(quote::quote!(0usize), usize_at);
        let hi = match &self.hi {
            Some(e) if self.inclusive => {
                let e = usize_at(e);
                quote::quote!(#e + 1)
            }
            Some(e) => usize_at(e),
            None => len,
        };
        (lo, hi)
    }

    /// The runtime's `Section` value: `Some((lo, Some(hi)))`, or `Some((lo, None))` to the end.
    pub fn runtime_bounds(&self) -> TokenStream {
        let lo = self.lo.as_ref().map_or(quote::quote!(0usize), usize_at);
        let hi = match &self.hi {
            Some(e) if self.inclusive => {
                let e = usize_at(e);
                quote::quote!(::core::option::Option::Some(#e + 1))
            }
            Some(e) => {
                let e = usize_at(e);
                quote::quote!(::core::option::Option::Some(#e))
            }
            None => quote::quote!(::core::option::Option::None),
        };
        quote::quote!(::core::option::Option::Some((#lo, #hi)))
    }
}

/// `e` as a `usize`, with a type error at `e` itself if it is not one.
fn usize_at(e: &Expr) -> TokenStream {
    quote::quote_spanned!(e.span()=> ::core::convert::identity::<usize>(#e))
}

/// A variable in a map clause.
#[derive(Clone, Debug)]
pub struct MapItem {
    /// The variable (`self` for a method region's receiver).
    pub ident: Ident,
    /// `[lo..hi]`, if written.
    pub section: Option<Section>,
}

/// Parses a map item of a data construct or `target_update!`: a variable, with an optional array section (`self` is
/// refused: only a `#[target]` method region maps its receiver).
pub fn parse_item(input: ParseStream) -> syn::Result<MapItem> {
    parse_item_of(input, Construct::Data)
}

/// A map item of `construct`: on `#[target]` a method region's receiver, `self`, is one.
fn parse_item_of(input: ParseStream, construct: Construct) -> syn::Result<MapItem> {
    let receiver =
        construct == Construct::Target && input.peek(Token![self]) && !input.peek2(Token![.]);
    if !receiver && (input.peek(Token![self]) || (input.peek(Ident) && input.peek2(Token![.]))) {
        return Err(input.error(
            "map clauses name variables; bind a field or expression first: `let buf = &mut self.buf;` then \
             `map(tofrom: buf)`",
        ));
    }
    if input.peek(Token![&]) || input.peek(Token![*]) {
        return Err(input.error(
            "map clauses name variables, not expressions: write `map(to: v)`; the construct borrows `v` itself \
             (`target_enter_data!` takes it by value)",
        ));
    }
    // `self`: a method region's receiver.
    let ident: Ident = if input.peek(Token![self]) {
        input.call(syn::ext::IdentExt::parse_any)?
    } else {
        input.parse()?
    };
    let section = if input.peek(syn::token::Bracket) {
        let content;
        let b = syn::bracketed!(content in input);
        let span = b.span.join();
        match content.parse::<Expr>()? {
            Expr::Range(r) => Some(Section {
                lo: r.start.map(|e| *e),
                hi: r.end.map(|e| *e),
                inclusive: matches!(r.limits, syn::RangeLimits::Closed(_)),
                span,
            }),
            other => {
                return Err(syn::Error::new(
                    other.span(),
                    "an array section is a range: `x[lo..hi]`, `x[lo..]` or `x[..hi]`",
                ))
            }
        }
    } else {
        None
    };
    Ok(MapItem { ident, section })
}

/// One clause.
pub enum Clause {
    /// `map(..)`: one map type and its modifiers for each listed variable.
    Map {
        /// The map type and modifiers.
        map: Map,
        /// The variables, in clause order.
        items: Vec<MapItem>,
    },
    /// `device(n)`: the keyword and the device number's expression.
    Device(Ident, Expr),
    /// `if(cond)`: the keyword and the condition under which the construct uses the device.
    If(Ident, Expr),
    /// `teams_distribute_parallel_for`, `teams`, `simd`, ..: construct words of `#[target]`.
    Construct(Word, proc_macro2::Span),
    /// `collapse(n)`.
    Collapse(Ident, usize),
    /// `reduction(op: a, b)`: the operator, its span, and the variables.
    Reduction(ReduceOp, proc_macro2::Span, Vec<Ident>),
    /// `num_teams(n)`: the keyword and the number of teams.
    NumTeams(Ident, Expr),
    /// `thread_limit(n)`, or `num_threads(n)` (a `parallel` construct's name for it).
    ThreadLimit(Ident, Expr),
    /// `schedule(static)`, `schedule(static, c)`, `schedule(dynamic[, c])`.
    Schedule(Ident, Schedule),
    /// `private(x, y)`: per-thread locals declared before the loop.
    Private(Ident, Vec<Ident>),
    /// `instantiate(f32, f64)` / `instantiate(<f32, 4>, ..)`: a generic region's kernels, one per argument list.
    Instantiate(Ident, Vec<Instance>),
    /// `scope(s)` on `target_enter_data!`: the `offload::data_scope` that borrowed data is entered in.
    Scope(Ident, Expr),
}

/// One argument list of `instantiate(..)`: the generic arguments of one kernel, in the region's parameter order
/// (lifetimes left out).
#[derive(Clone, Debug)]
pub struct Instance {
    /// The generic arguments, one per type or const parameter.
    pub args: Vec<syn::GenericArgument>,
    /// Where the list was written.
    pub span: proc_macro2::Span,
}

fn parse_instance(input: ParseStream) -> syn::Result<Instance> {
    let span = input.span();
    if input.peek(Token![<]) {
        input.parse::<Token![<]>()?;
        let mut args = Vec::new();
        while !input.peek(Token![>]) {
            args.push(input.parse::<syn::GenericArgument>()?);
            if input.peek(Token![>]) {
                break;
            }
            input.parse::<Token![,]>()?;
        }
        input.parse::<Token![>]>()?;
        Ok(Instance { args, span })
    } else {
        Ok(Instance {
            args: vec![input.parse::<syn::GenericArgument>()?],
            span,
        })
    }
}

/// How a work-shared loop's iterations are dealt out.
#[derive(Clone, Debug)]
pub enum Schedule {
    /// One contiguous block per thread, in thread order (the default).
    Static,
    /// Chunks of `c` iterations dealt round-robin.
    StaticChunk(Expr),
    /// Chunks of `c` (1 if not given) handed to whichever thread asks next.
    Dynamic(Option<Expr>),
}

/// The construct words `#[target]` takes (OpenMP's names, `target` left out).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Word {
    /// `teams_distribute_parallel_for`: the loop is shared over every team and thread.
    TeamsDistributeParallelFor,
    /// `teams_distribute_parallel_for_simd`: the same, with OpenMP's `simd` (a hint: the shared loop vectorises
    /// either way).
    TeamsDistributeParallelForSimd,
    /// `parallel_for`: the loop is shared over one team's threads.
    ParallelFor,
    /// `parallel_for_simd`: the same, with OpenMP's `simd` hint.
    ParallelForSimd,
    /// `teams_distribute`: the loop is shared over the teams, one thread each.
    TeamsDistribute,
    /// `teams`: with `parallel`, every thread of every team runs the whole body (SPMD).
    Teams,
    /// `parallel`: with `teams` (SPMD).
    Parallel,
    /// `simd`: OpenMP's vectorisation hint, only with a loop construct.
    Simd,
}

impl Word {
    const ALL: [(&'static str, Word); 8] = [
        (
            "teams_distribute_parallel_for",
            Word::TeamsDistributeParallelFor,
        ),
        (
            "teams_distribute_parallel_for_simd",
            Word::TeamsDistributeParallelForSimd,
        ),
        ("parallel_for", Word::ParallelFor),
        ("parallel_for_simd", Word::ParallelForSimd),
        ("teams_distribute", Word::TeamsDistribute),
        ("teams", Word::Teams),
        ("parallel", Word::Parallel),
        ("simd", Word::Simd),
    ];

    fn named(name: &str) -> Option<Word> {
        Word::ALL.iter().find(|(n, _)| *n == name).map(|(_, w)| *w)
    }

    /// A loop construct: it shares the body's loop out.
    pub fn is_loop(self) -> bool {
        !matches!(self, Word::Teams | Word::Parallel | Word::Simd)
    }
}

const CLAUSES: &str = "map, device, if; scope on `target_enter_data!`; and on `#[target]`: the loop constructs teams_distribute_parallel_for[_simd], \
     parallel_for[_simd] and teams_distribute, `teams, parallel` (SPMD), simd, num_teams, thread_limit, num_threads, \
     collapse, reduction, schedule, private, instantiate";

/// Parses one clause of `construct`.
pub fn parse_clause(input: ParseStream, construct: Construct) -> syn::Result<Clause> {
    let kw: Ident = input.call(syn::ext::IdentExt::parse_any)?;
    let name = kw.to_string();
    if let (Construct::Target, Some(word)) = (construct, Word::named(&name)) {
        return Ok(Clause::Construct(word, kw.span()));
    }
    let target = construct == Construct::Target;
    match name.as_str() {
        "map" => {
            if !input.peek(syn::token::Paren) {
                return Err(takes_arguments(&kw));
            }
            let content;
            syn::parenthesized!(content in input);
            parse_map(&content, &kw, construct)
        }
        "device" | "if" => {
            let e = one_expr(input, &kw, takes_arguments(&kw))?;
            Ok(if name == "device" {
                Clause::Device(kw, e)
            } else {
                Clause::If(kw, e)
            })
        }
        "schedule" if target => parse_schedule(input, kw),
        "private" if target => {
            let content;
            syn::parenthesized!(content in input);
            let vars = Punctuated::<Ident, Token![,]>::parse_separated_nonempty(&content)?;
            Ok(Clause::Private(kw, vars.into_iter().collect()))
        }
        "instantiate" if target => parse_instantiate(input, kw),
        "scope" if construct == Construct::EnterData => {
            let e = one_expr(
                input,
                &kw,
                syn::Error::new(kw.span(), "`scope` takes the data scope: `scope(s)`"),
            )?;
            Ok(Clause::Scope(kw, e))
        }
        "num_teams" | "thread_limit" | "num_threads" if target => {
            let e = one_expr(input, &kw, takes_arguments(&kw))?;
            Ok(if name == "num_teams" {
                Clause::NumTeams(kw, e)
            } else {
                Clause::ThreadLimit(kw, e)
            })
        }
        "reduction" if target => {
            let content;
            syn::parenthesized!(content in input);
            let op = parse_reduce_op(&content)?;
            content.parse::<Token![:]>()?;
            let vars = Punctuated::<Ident, Token![,]>::parse_separated_nonempty(&content)?;
            Ok(Clause::Reduction(op.0, op.1, vars.into_iter().collect()))
        }
        "collapse" if target => {
            let content;
            syn::parenthesized!(content in input);
            let n: syn::LitInt = content.parse()?;
            Ok(Clause::Collapse(kw, n.base10_parse()?))
        }
        _ => Err(not_a_clause(&kw, construct)),
    }
}

/// The error for a clause written without its parentheses.
fn takes_arguments(kw: &Ident) -> syn::Error {
    syn::Error::new(kw.span(), format!("`{kw}` takes arguments: `{kw}(...)`"))
}

/// `kw(expr)`: the one expression in the parentheses; `missing` when there are none.
fn one_expr(input: ParseStream, kw: &Ident, missing: syn::Error) -> syn::Result<Expr> {
    if !input.peek(syn::token::Paren) {
        return Err(missing);
    }
    let content;
    syn::parenthesized!(content in input);
    let e: Expr = content.parse()?;
    if !content.is_empty() {
        return Err(content.error(format!("`{kw}` takes one expression")));
    }
    Ok(e)
}

/// `schedule(static)`, `schedule(static, c)`, `schedule(dynamic[, c])`.
fn parse_schedule(input: ParseStream, kw: Ident) -> syn::Result<Clause> {
    let content;
    syn::parenthesized!(content in input);
    let kind: Ident = content.call(syn::ext::IdentExt::parse_any)?;
    let chunk = if content.peek(Token![,]) {
        content.parse::<Token![,]>()?;
        Some(content.parse::<Expr>()?)
    } else {
        None
    };
    if !content.is_empty() {
        return Err(content
            .error("`schedule` takes a kind and an optional chunk size: `schedule(static, 64)`"));
    }
    let schedule = match (kind.to_string().as_str(), chunk) {
        ("static", None) => Schedule::Static,
        ("static", Some(c)) => Schedule::StaticChunk(c),
        ("dynamic", c) => Schedule::Dynamic(c),
        (other, _) => {
            return Err(syn::Error::new(
                kind.span(),
                format!("unknown schedule `{other}`; use `static`, `static, c` or `dynamic, c`"),
            ))
        }
    };
    Ok(Clause::Schedule(kw, schedule))
}

/// `instantiate(f32, f64)`, or `instantiate(<f32, u32>, <f64, u64>)` for several parameters: one kernel per list.
fn parse_instantiate(input: ParseStream, kw: Ident) -> syn::Result<Clause> {
    if !input.peek(syn::token::Paren) {
        return Err(syn::Error::new(
            kw.span(),
            "`instantiate` lists the types a generic region is compiled for: `instantiate(f32, f64)`, or \
             `instantiate(<f32, u32>, <f64, u64>)` for several parameters",
        ));
    }
    let content;
    syn::parenthesized!(content in input);
    let list = Punctuated::<Instance, Token![,]>::parse_terminated_with(&content, parse_instance)
        .map_err(|e| {
        syn::Error::new(
            e.span(),
            format!(
                "{e}; `instantiate` takes types (`instantiate(f32, f64)`), or one `<..>` list per \
                     kernel for several parameters (`instantiate(<f32, u32>, <f64, u64>)`)"
            ),
        )
    })?;
    if list.is_empty() {
        return Err(syn::Error::new(
            kw.span(),
            "`instantiate()` lists no types; name at least one",
        ));
    }
    Ok(Clause::Instantiate(kw, list.into_iter().collect()))
}

/// Why `kw` is no clause of `construct`: an OpenMP clause not supported yet, one the parameter's type stands for, or
/// none at all.
fn not_a_clause(kw: &Ident, construct: Construct) -> syn::Error {
    match kw.to_string().as_str() {
        "nowait" => syn::Error::new(
            kw.span(),
            format!("`{kw}` is an OpenMP clause this version of offload does not support yet; supported: {CLAUSES}"),
        ),
        "is_device_ptr" | "firstprivate" | "defaultmap" | "depend" => syn::Error::new(
            kw.span(),
            format!(
                "`{kw}` is not a clause of `{}`: the parameter's type decides (by-value parameters are firstprivate); \
                 supported: {CLAUSES}",
                construct.name()
            ),
        ),
        _ => syn::Error::new(kw.span(), format!("unknown clause `{kw}`; supported: {CLAUSES}")),
    }
}

/// A reduction's operator: one of OpenMP's, or a user's (OpenMP's `declare reduction`): a unit struct implementing
/// `offload::ReduceOp<T>` for the variable's type, named by its path.
#[derive(Clone, Debug)]
pub enum ReduceOp {
    /// `+ * min max & | ^ && ||`.
    Builtin(Builtin),
    /// A user's operator type, by its path.
    User(syn::Path),
}

/// OpenMP's reduction operators, each a unit struct of `offload_model::reduce`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Builtin {
    /// `+`.
    Add,
    /// `*`.
    Mul,
    /// `min`.
    Min,
    /// `max`.
    Max,
    /// `&`.
    BitAnd,
    /// `|`.
    BitOr,
    /// `^`.
    BitXor,
    /// `&&`.
    And,
    /// `||`.
    Or,
}

impl ReduceOp {
    /// The operator's type (a unit struct, so also its value).
    pub fn path(&self) -> proc_macro2::TokenStream {
        use quote::quote;
        match self {
            ReduceOp::Builtin(b) => match b {
                Builtin::Add => quote!(::offload::__reduce::Add),
                Builtin::Mul => quote!(::offload::__reduce::Mul),
                Builtin::Min => quote!(::offload::__reduce::Min),
                Builtin::Max => quote!(::offload::__reduce::Max),
                Builtin::BitAnd => quote!(::offload::__reduce::BitAnd),
                Builtin::BitOr => quote!(::offload::__reduce::BitOr),
                Builtin::BitXor => quote!(::offload::__reduce::BitXor),
                Builtin::And => quote!(::offload::__reduce::And),
                Builtin::Or => quote!(::offload::__reduce::Or),
            },
            ReduceOp::User(p) => quote::ToTokens::to_token_stream(p),
        }
    }
}

/// A reduction operator: `+ * & | ^ && ||`, `min`, `max`, or the path of a user's operator type.
fn parse_reduce_op(input: ParseStream) -> syn::Result<(ReduceOp, proc_macro2::Span)> {
    let span = input.span();
    if !(input.peek(Token![&&])
        || input.peek(Token![||])
        || input.peek(Token![+])
        || input.peek(Token![*])
        || input.peek(Token![&])
        || input.peek(Token![|])
        || input.peek(Token![^]))
    {
        let path: syn::Path = input.parse().map_err(|_| {
            input.error("expected a reduction operator: + * min max & | ^ && ||, or a type implementing `offload::ReduceOp`")
        })?;
        return Ok((
            match path.get_ident().map(|i| i.to_string()).as_deref() {
                Some("min") => ReduceOp::Builtin(Builtin::Min),
                Some("max") => ReduceOp::Builtin(Builtin::Max),
                _ => ReduceOp::User(path),
            },
            span,
        ));
    }
    let (op, span) = parse_builtin_op(input)?;
    Ok((ReduceOp::Builtin(op), span))
}

fn parse_builtin_op(input: ParseStream) -> syn::Result<(Builtin, proc_macro2::Span)> {
    let span = input.span();
    let op = if input.peek(Token![&&]) {
        input.parse::<Token![&&]>()?;
        Builtin::And
    } else if input.peek(Token![||]) {
        input.parse::<Token![||]>()?;
        Builtin::Or
    } else if input.peek(Token![+]) {
        input.parse::<Token![+]>()?;
        Builtin::Add
    } else if input.peek(Token![*]) {
        input.parse::<Token![*]>()?;
        Builtin::Mul
    } else if input.peek(Token![&]) {
        input.parse::<Token![&]>()?;
        Builtin::BitAnd
    } else if input.peek(Token![|]) {
        input.parse::<Token![|]>()?;
        Builtin::BitOr
    } else if input.peek(Token![^]) {
        input.parse::<Token![^]>()?;
        Builtin::BitXor
    } else {
        let id: Ident = input
            .parse()
            .map_err(|_| input.error("expected a reduction operator: + * min max & | ^ && ||"))?;
        match id.to_string().as_str() {
            "min" => Builtin::Min,
            "max" => Builtin::Max,
            _ => {
                return Err(syn::Error::new(
                    id.span(),
                    "unknown reduction operator; use + * min max & | ^ && ||",
                ))
            }
        }
    };
    Ok((op, span))
}

/// Parses `clause, clause, ...` up to the end of `input` or a `=>`.
pub fn parse_clauses(input: ParseStream, construct: Construct) -> syn::Result<Vec<Clause>> {
    let mut out = Vec::new();
    while !input.is_empty() && !input.peek(Token![=>]) {
        out.push(parse_clause(input, construct)?);
        if input.is_empty() || input.peek(Token![=>]) {
            break;
        }
        input.parse::<Token![,]>()?;
    }
    Ok(out)
}

fn parse_map(content: ParseStream, kw: &Ident, construct: Construct) -> syn::Result<Clause> {
    let mut map = Map::implicit(construct.default_map_type());
    map.clause_span = Some(kw.span());
    // `map([always,] [present,] [close,] TYPE: list)`, or `map(list)` meaning the construct's default, as OpenMP.
    let has_colon = {
        let fork = content.fork();
        let mut found = false;
        while !fork.is_empty() {
            if fork.peek(Token![:]) && !fork.peek(Token![::]) {
                found = true;
                break;
            }
            let _: proc_macro2::TokenTree = fork.parse()?;
        }
        found
    };
    if has_colon {
        let mut words: Vec<Ident> = Vec::new();
        while !content.peek(Token![:]) {
            words.push(content.call(syn::ext::IdentExt::parse_any)?);
            if content.peek(Token![,]) {
                let _: Token![,] = content.parse()?;
            }
        }
        let _: Token![:] = content.parse()?;
        let Some(ty) = words.pop() else {
            return Err(content.error("expected a map type before `:`"));
        };
        let allowed = construct.allowed();
        let names = allowed
            .iter()
            .map(|t| t.name())
            .collect::<Vec<_>>()
            .join(", ");
        map.map_type = match ty.to_string().as_str() {
            "to" => MapType::To,
            "from" => MapType::From,
            "tofrom" => MapType::ToFrom,
            "alloc" => MapType::Alloc,
            "release" => MapType::Release,
            "delete" => MapType::Delete,
            _ => {
                return Err(syn::Error::new(
                    ty.span(),
                    format!("unknown map type `{ty}`; use {names}"),
                ))
            }
        };
        if !allowed.contains(&map.map_type) {
            return Err(syn::Error::new(
                ty.span(),
                format!(
                    "`{ty}` is not a map type of `{}`; use {names}",
                    construct.name()
                ),
            ));
        }
        for m in words {
            match m.to_string().as_str() {
                "always" => map.always = true,
                "present" => map.present = true,
                "close" => map.close = true,
                _ => {
                    return Err(syn::Error::new(
                        m.span(),
                        format!("unknown map-type modifier `{m}`; use always, present or close"),
                    ))
                }
            }
        }
    }
    let item: fn(ParseStream) -> syn::Result<MapItem> = match construct {
        Construct::Target => |i| parse_item_of(i, Construct::Target),
        _ => parse_item,
    };
    let items = Punctuated::<MapItem, Token![,]>::parse_terminated_with(content, item)?;
    if items.is_empty() {
        return Err(syn::Error::new(
            kw.span(),
            "`map` needs at least one variable",
        ));
    }
    Ok(Clause::Map {
        map,
        items: items.into_iter().collect(),
    })
}

/// Records a `device`/`if` clause, or an error if the clause was already given.
pub fn set_once(slot: &mut Option<Expr>, kw: Ident, e: Expr, errors: &mut Errors) {
    if slot.is_some() {
        errors.push(syn::Error::new(
            kw.span(),
            format!("`{kw}` is given twice; keep one"),
        ));
    } else {
        *slot = Some(e);
    }
}
