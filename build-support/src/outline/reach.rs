//! Implicit declare target (OpenMP 5.0): the package's functions, consts, statics, types, traits, impls and
//! `macro_rules!` that region code reaches go to the device without an attribute. Starting from the regions and the
//! `#[declare_target]` items, every name their code uses (paths, types, macros; not its own local bindings) that
//! names an item of the package reaches that item; a reached type or trait reaches its impls. Names are matched
//! without resolving modules, so a name shared by two items reaches both: harmless, unless one of them cannot go to
//! a device, which is then left out (a device build that needed it says why).
//!
//! What cannot go to a device (it uses `std`, `alloc` or their prelude: `Vec`, `String`, `format!`, ..; `print!` and
//! `println!` are offload-device's there) is an error
//! naming the item and the chain of uses from the region, when a region reaches it as a whole item; a method that
//! cannot go is left out of its reached impl (calling it from region code is then a device build error).

use super::has_attr;
use super::tree::ModuleTree;
use crate::diag::Diagnostic;
use crate::package::Package;
use proc_macro2::{TokenStream, TokenTree};
use quote::ToTokens;
use std::collections::{HashMap, HashSet, VecDeque};
use syn::spanned::Spanned;
use syn::visit::Visit;
use syn::Item;

/// Where an item is: its file and the start of its span.
pub type Site = (usize, usize, usize);

pub fn site(file: usize, item: &impl Spanned) -> Site {
    let s = item.span().start();
    (file, s.line, s.column)
}

/// What region code reaches.
#[derive(Default)]
pub struct Reach {
    /// Items to mirror (beside regions and `#[declare_target]` items).
    pub kept: HashSet<Site>,
    /// Methods of kept impls left out, by their own site.
    pub dropped: HashSet<Site>,
    /// The same methods, for the device build's messages.
    pub left_out: Vec<LeftOut>,
    /// Names of kept items.
    pub names: HashSet<String>,
}

/// A method left out of a kept impl, or an item reached only by a name a device-capable item shares, because a
/// device cannot have it: region code using it fails in the device build, whose message then says why.
#[derive(Debug, Clone)]
pub struct LeftOut {
    /// Its name, as rustc's "no method named `NAME`" or "cannot find function `NAME`" says it.
    pub name: String,
    /// `Grid::dump`, `fn helper`.
    pub what: String,
    /// What it uses that a device has not.
    pub why: String,
}

/// An item of the package, with what it is called and the module file it is in.
struct Entry<'a> {
    file: usize,
    item: &'a Item,
    /// `fn name`, `struct Name`, ...: for messages.
    what: String,
}

pub fn reach(pkg: &Package, tree: &ModuleTree) -> (Reach, Vec<Diagnostic>) {
    let items = Items::new(tree);
    // Names a file imports from outside the package (`use core::cmp::max;`) name no item of it.
    let external: Vec<HashMap<String, String>> = tree
        .files
        .iter()
        .map(|f| imported_from_outside(&f.ast.items))
        .collect();
    let hc = HostCrates::new(pkg, &external);
    let mut walk = Walk {
        pkg,
        tree,
        items: &items,
        external: &external,
        hc: &hc,
        from: HashMap::new(),
        queue: VecDeque::new(),
        out: Reach::default(),
        diags: Vec::new(),
    };
    // Breadth first from the roots, remembering who reached whom (for the chain in messages).
    for (k, e) in items.entries.iter().enumerate() {
        if is_root(e.item) {
            walk.from.insert(k, None);
            walk.queue.push_back(k);
        }
    }
    while let Some(k) = walk.queue.pop_front() {
        walk.visit(k);
    }
    (walk.out, walk.diags)
}

/// The package's items, and the names that reach them.
struct Items<'a> {
    entries: Vec<Entry<'a>>,
    /// The items each name names.
    by_name: HashMap<String, Vec<usize>>,
    /// The impls of each type or trait, by its name.
    impls_of: HashMap<String, Vec<usize>>,
    /// Item-level invocations of the package's macros, by the identifiers in their arguments: `make_scale!(triple,
    /// 3.0)` likely writes `fn triple`, which no item of the source is named.
    by_argument: HashMap<String, Vec<usize>>,
}

impl<'a> Items<'a> {
    fn new(tree: &'a ModuleTree) -> Items<'a> {
        let mut entries: Vec<Entry> = Vec::new();
        for (file, f) in tree.files.iter().enumerate() {
            index(&f.ast.items, file, &mut entries);
        }
        let mut by_name: HashMap<String, Vec<usize>> = HashMap::new();
        for (k, e) in entries.iter().enumerate() {
            if let Some(n) = name(e.item) {
                by_name.entry(n).or_default().push(k);
            }
        }
        let by_argument = macro_arguments(&entries, &by_name);
        let impls_of = impls_of(&entries);
        Items {
            entries,
            by_name,
            impls_of,
            by_argument,
        }
    }

    /// The items `uses`, the names entry `e`'s code uses, reach: the items they name (or the package's macro
    /// invocations that mention them, for a name no item has), and the impls of the types and traits among them
    /// and of `e` itself.
    fn reached_by(
        &self,
        e: &Entry,
        uses: &Uses,
        external: &[HashMap<String, String>],
    ) -> Vec<usize> {
        let mut next: Vec<usize> = Vec::new();
        let names = uses.names.iter().filter(|n| {
            // A name the file imports from outside names no item of it, unless the file also defines one so
            // named (in another of its modules: imports are tracked per file).
            let defined_here = || {
                self.by_name
                    .get(*n)
                    .is_some_and(|v| v.iter().any(|&j| self.entries[j].file == e.file))
            };
            !uses.locals.contains(*n) && (!external[e.file].contains_key(*n) || defined_here())
        });
        for n in names.chain(&uses.paths) {
            next.extend(self.by_name.get(n).into_iter().flatten());
            if !self.by_name.contains_key(n) {
                next.extend(self.by_argument.get(n).into_iter().flatten());
            }
            if matches!(
                self.by_name
                    .get(n)
                    .map(|v| v.iter().any(|&j| is_type_or_trait(self.entries[j].item))),
                Some(true)
            ) {
                next.extend(self.impls_of.get(n).into_iter().flatten());
            }
        }
        if let Some(n) = name(e.item).filter(|_| is_type_or_trait(e.item)) {
            next.extend(self.impls_of.get(&n).into_iter().flatten());
        }
        next
    }
}

/// Item-level invocations of the package's own macros, by the identifiers in their arguments.
fn macro_arguments(
    entries: &[Entry],
    by_name: &HashMap<String, Vec<usize>>,
) -> HashMap<String, Vec<usize>> {
    let package_macro = |m: &syn::ItemMacro| {
        m.mac.path.get_ident().is_some_and(|i| {
            by_name.get(&i.to_string()).is_some_and(|v| {
                v.iter()
                    .any(|&j| matches!(entries[j].item, Item::Macro(d) if d.ident.is_some()))
            })
        })
    };
    let mut by_argument: HashMap<String, Vec<usize>> = HashMap::new();
    for (k, e) in entries.iter().enumerate() {
        if let Item::Macro(m) = e.item {
            if m.ident.is_none() && package_macro(m) {
                let mut args = HashSet::new();
                idents(&m.mac.tokens, &mut args);
                for a in args {
                    by_argument.entry(a).or_default().push(k);
                }
            }
        }
    }
    by_argument
}

/// The impls of each type and trait, by its name.
fn impls_of(entries: &[Entry]) -> HashMap<String, Vec<usize>> {
    let mut impls_of: HashMap<String, Vec<usize>> = HashMap::new();
    for (k, e) in entries.iter().enumerate() {
        if let Item::Impl(i) = e.item {
            // offload-device has every type `DeviceCopy` and `Firstprivate` (the host checks them): the host's impls
            // of them stay out.
            let marker = i.trait_.as_ref().is_some_and(|(_, p, _)| {
                p.segments
                    .last()
                    .is_some_and(|s| s.ident == "DeviceCopy" || s.ident == "Firstprivate")
            });
            if marker {
                continue;
            }
            for n in impl_names(i) {
                impls_of.entry(n).or_default().push(k);
            }
        }
    }
    impls_of
}

/// The walk from the roots: who reached whom, what is still to visit, and what it found.
struct Walk<'w, 'a> {
    pkg: &'w Package,
    tree: &'w ModuleTree,
    items: &'w Items<'a>,
    external: &'w [HashMap<String, String>],
    hc: &'w HostCrates<'w>,
    from: HashMap<usize, Option<usize>>,
    queue: VecDeque<usize>,
    out: Reach,
    diags: Vec<Diagnostic>,
}

impl Walk<'_, '_> {
    /// Entry `k`: kept if a device can have it (else an error or left out), and what its code uses queued.
    fn visit(&mut self, k: usize) {
        let items = self.items;
        let e = &items.entries[k];
        let root = is_root(e.item);
        let mut uses = Uses::default();
        let kept = match e.item {
            Item::Impl(i) => self.visit_impl(e, i, root, &mut uses),
            item => self.visit_item(k, item, root, &mut uses),
        };
        if !kept {
            return;
        }
        if !root {
            self.out.kept.insert(site(e.file, e.item));
        }
        if let Some(n) = name(e.item) {
            self.out.names.insert(n);
        }
        for j in items.reached_by(e, &uses, self.external) {
            if j != k && !self.from.contains_key(&j) {
                self.from.insert(j, Some(k));
                self.queue.push_back(j);
            }
        }
    }

    /// A reached impl keeps the methods a device can have; its header must be device code. Whether it is kept.
    fn visit_impl(&mut self, e: &Entry, i: &syn::ItemImpl, root: bool, uses: &mut Uses) -> bool {
        let hc = self.hc;
        uses.visit_type(&i.self_ty);
        if let Some((_, p, _)) = &i.trait_ {
            uses.visit_path(p);
        }
        uses.visit_generics(&i.generics);
        let header_host_only = host_only(&i.self_ty.to_token_stream(), hc, e.file).is_some()
            || i.trait_
                .as_ref()
                .is_some_and(|(_, p, _)| host_only(&p.to_token_stream(), hc, e.file).is_some());
        if !root && header_host_only {
            return false;
        }
        // A `#[declare_target]` impl goes as written; a `#[target]` impl (regions in it) keeps its regions
        // and, as a reached impl does, the methods a device can have.
        let whole = root && !has_attr(&i.attrs, "target");
        for it in &i.items {
            let region = matches!(it, syn::ImplItem::Fn(f) if has_attr(&f.attrs, "target"));
            let why = (!whole && !region)
                .then(|| host_only(&it.to_token_stream(), hc, e.file))
                .flatten();
            if let Some(why) = why {
                self.out.dropped.insert(site(e.file, it));
                if let syn::ImplItem::Fn(f) = it {
                    self.out.left_out.push(LeftOut {
                        name: f.sig.ident.to_string(),
                        what: format!("{}::{}", i.self_ty.to_token_stream(), f.sig.ident)
                            .replace(' ', ""),
                        why: why.what,
                    });
                }
            } else {
                uses.visit_impl_item(it);
            }
        }
        true
    }

    /// Any other reached item (entry `k`) goes whole or not at all. Whether it is kept.
    fn visit_item(&mut self, k: usize, item: &Item, root: bool, uses: &mut Uses) -> bool {
        let e = &self.items.entries[k];
        let Some(why) = not_device(item, root, self.hc, e.file) else {
            uses.visit_item(item);
            return true;
        };
        // Reached by a name another item of the package shares: region code may mean the other one, so this one
        // stays out, and a device build that needed it says why.
        let shared = name(item).filter(|n| self.items.by_name.get(n).is_some_and(|v| v.len() > 1));
        match shared {
            Some(n) if !root => self.out.left_out.push(LeftOut {
                name: n,
                what: e.what.clone(),
                why: why.what,
            }),
            _ => self.diags.push(cannot_go(
                self.pkg,
                self.tree,
                &self.items.entries,
                &self.from,
                k,
                &why,
            )),
        }
        false
    }
}

fn index<'a>(items: &'a [Item], file: usize, out: &mut Vec<Entry<'a>>) {
    for item in items {
        let what = match item {
            Item::Fn(i) => format!("fn {}", i.sig.ident),
            Item::Const(i) => format!("const {}", i.ident),
            Item::Static(i) => format!("static {}", i.ident),
            Item::Struct(i) => format!("struct {}", i.ident),
            Item::Enum(i) => format!("enum {}", i.ident),
            Item::Union(i) => format!("union {}", i.ident),
            Item::Type(i) => format!("type {}", i.ident),
            Item::Trait(i) => format!("trait {}", i.ident),
            Item::Impl(i) => format!("impl {}", i.self_ty.to_token_stream()),
            Item::Macro(m) => match &m.ident {
                Some(i) => format!("macro_rules! {i}"),
                // An invocation writing items.
                None => format!("{}!(..)", m.mac.path.to_token_stream()).replace(' ', ""),
            },
            Item::Mod(m) => {
                if let Some((_, inner)) = &m.content {
                    index(inner, file, out);
                }
                continue;
            }
            _ => continue,
        };
        out.push(Entry { file, item, what });
    }
}

/// What an item is called, where code can name it.
fn name(item: &Item) -> Option<String> {
    let i = match item {
        Item::Fn(i) => &i.sig.ident,
        Item::Const(i) => &i.ident,
        Item::Static(i) => &i.ident,
        Item::Struct(i) => &i.ident,
        Item::Enum(i) => &i.ident,
        Item::Union(i) => &i.ident,
        Item::Type(i) => &i.ident,
        Item::Trait(i) => &i.ident,
        Item::Macro(m) => m.ident.as_ref()?,
        _ => return None,
    };
    Some(i.to_string().trim_start_matches("r#").to_string())
}

fn is_type_or_trait(item: &Item) -> bool {
    matches!(
        item,
        Item::Struct(_) | Item::Enum(_) | Item::Union(_) | Item::Type(_) | Item::Trait(_)
    )
}

/// The names an impl is reached through: its type's and its trait's.
fn impl_names(i: &syn::ItemImpl) -> Vec<String> {
    let mut out = Vec::new();
    if let syn::Type::Path(p) = &*i.self_ty {
        out.extend(p.path.segments.last().map(|s| s.ident.to_string()));
    }
    if let Some((_, p, _)) = &i.trait_ {
        out.extend(p.segments.last().map(|s| s.ident.to_string()));
    }
    out
}

/// Regions and `#[declare_target]` items: device code by the programmer's word.
fn is_root(item: &Item) -> bool {
    let attrs = match item {
        Item::Fn(i) => &i.attrs,
        Item::Const(i) => &i.attrs,
        Item::Static(i) => &i.attrs,
        Item::Struct(i) => &i.attrs,
        Item::Enum(i) => &i.attrs,
        Item::Union(i) => &i.attrs,
        Item::Type(i) => &i.attrs,
        Item::Trait(i) => &i.attrs,
        Item::Impl(i) => &i.attrs,
        _ => return false,
    };
    has_attr(attrs, "target") || has_attr(attrs, "declare_target")
}

/// Names of `std`'s prelude and macros that `core` does not have.
const STD_ONLY: &[&str] = &[
    "alloc", "Vec", "String", "Box", "Rc", "Arc", "ToString", "ToOwned", "HashMap", "HashSet",
    "BTreeMap", "BTreeSet", "VecDeque", "eprintln", "eprint", "format", "vec", "dbg",
];

/// `std`'s modules that `core` has too: region code may name them through `std` (the device crate's `std` is
/// `core`).
const CORE_MODULES: &[&str] = &[
    "alloc",
    "any",
    "arch",
    "array",
    "ascii",
    "cell",
    "char",
    "clone",
    "cmp",
    "convert",
    "default",
    "error",
    "f32",
    "f64",
    "ffi",
    "fmt",
    "future",
    "hash",
    "hint",
    "i8",
    "i16",
    "i32",
    "i64",
    "i128",
    "isize",
    "iter",
    "marker",
    "mem",
    "num",
    "ops",
    "option",
    "panic",
    "pin",
    "primitive",
    "ptr",
    "result",
    "slice",
    "str",
    "sync",
    "task",
    "time",
    "u8",
    "u16",
    "u32",
    "u64",
    "u128",
    "usize",
];

/// Whether `std::NAME` is a module `core` has.
pub fn in_core(name: &str) -> bool {
    CORE_MODULES.contains(&name)
}

/// The crates of the package that are not built for devices, and the names each file imports from them.
struct HostCrates<'p> {
    crates: &'p [String],
    /// Per file: a name `use`d from one of them, and its crate.
    imported: Vec<HashMap<String, String>>,
}

impl<'p> HostCrates<'p> {
    /// `external`: per file, the names it imports from outside the package, and their crates.
    fn new(pkg: &'p Package, external: &[HashMap<String, String>]) -> HostCrates<'p> {
        HostCrates {
            crates: &pkg.host_crates,
            imported: external
                .iter()
                .map(|names| {
                    names
                        .iter()
                        .filter(|(_, c)| pkg.host_crates.contains(c))
                        .map(|(n, c)| (n.clone(), c.clone()))
                        .collect()
                })
                .collect(),
        }
    }
}

/// Why code cannot go to a device, and what to do instead, as the error says them.
struct Why {
    what: String,
    fix: String,
}

impl Why {
    fn std(what: String) -> Why {
        Why {
            what,
            fix: "write it for a device (`core` only)".into(),
        }
    }
}

/// Why code cannot go to a device: the first name it uses that only `std` has (`std::` followed by a module `core`
/// lacks, `Vec`, `format!`), or that comes from a crate not built for devices.
fn host_only(ts: &TokenStream, hc: &HostCrates, file: usize) -> Option<Why> {
    let tokens: Vec<TokenTree> = ts.clone().into_iter().collect();
    let path_sep = |k: usize| {
        matches!((tokens.get(k), tokens.get(k + 1)), (Some(TokenTree::Punct(a)), Some(TokenTree::Punct(b)))
            if a.as_char() == ':' && b.as_char() == ':')
    };
    for (k, tt) in tokens.iter().enumerate() {
        match tt {
            TokenTree::Ident(i) if i == "std" => {
                let next = match tokens.get(k + 3) {
                    Some(TokenTree::Ident(n)) => n.to_string(),
                    _ => String::new(),
                };
                if !in_core(&next) || next == "alloc" {
                    return Some(Why::std("`std`: a device has no `std`".into()));
                }
            }
            TokenTree::Ident(i) => {
                let s = i.to_string();
                // A lowercase name is a macro only when invoked (`format!`); a local may share it.
                let macro_name = s.starts_with(char::is_lowercase);
                let invoked =
                    matches!(tokens.get(k + 1), Some(TokenTree::Punct(p)) if p.as_char() == '!');
                let after_sep = k >= 2 && path_sep(k - 2);
                if s == "alloc" && path_sep(k + 1) && !after_sep {
                    return Some(Why::std("`alloc`: a device has no `std`".into()));
                }
                if STD_ONLY.contains(&s.as_str()) && (invoked || !macro_name) {
                    return Some(Why::std(if macro_name {
                        format!("`{s}!` (from `std`): a device has no `std`")
                    } else {
                        format!("`{s}` (from `std`): a device has no `std`")
                    }));
                }
                // `rand::random()`, or a name imported from a host crate at the top of the file.
                let krate = if hc.crates.contains(&s) && path_sep(k + 1) && !after_sep {
                    Some(s.clone())
                } else if !after_sep {
                    hc.imported[file].get(&s).cloned()
                } else {
                    None
                };
                if let Some(krate) = krate {
                    let what = if krate == s {
                        format!("crate `{s}`")
                    } else {
                        format!("`{s}` (from crate `{krate}`)")
                    };
                    return Some(Why {
                        what: format!("{what}, which is not built for devices"),
                        fix: format!(
                            "list `{krate}` in `[package.metadata.offload] device-dependencies` if it is `no_std`, \
                             or make it an offload-aware library (it depends on `offload` and marks its device items \
                             `#[declare_target]`)"
                        ),
                    });
                }
            }
            TokenTree::Group(g) => {
                if let Some(s) = host_only(&g.stream(), hc, file) {
                    return Some(s);
                }
            }
            _ => {}
        }
    }
    None
}

/// Why a reached item (or a region, or a `#[declare_target]` item) cannot go to a device, as the error says it: a
/// `static mut`, or code that uses what only `std` or a host crate has.
fn not_device(item: &Item, root: bool, hc: &HostCrates, file: usize) -> Option<Why> {
    if let Item::Static(st) = item {
        if matches!(st.mutability, syn::StaticMutability::Mut(_)) {
            return Some(Why {
                what: "`static mut` (a device's threads would race on it)".into(),
                fix: "use an atomic, or pass the value as a parameter".into(),
            });
        }
    }
    // A `#[declare_target]` impl keeps its methods as written (the device build reports one that uses `std`).
    if root && matches!(item, Item::Impl(_)) {
        return None;
    }
    // An owning mapper struct's `Vec` fields are `offload::DeviceVec` on a device: only their elements are asked.
    if let Item::Struct(st) = item {
        let input: syn::DeriveInput = st.clone().into();
        if let Ok(fields) = offload_frontend::mapper::fields(&input) {
            if offload_frontend::mapper::derives_mapper(&st.attrs)
                && offload_frontend::mapper::owns(&fields)
            {
                return fields.iter().find_map(|f| match &f.kind {
                    offload_frontend::mapper::FieldKind::Vec { elem } => {
                        host_only(&elem.to_token_stream(), hc, file)
                    }
                    _ => host_only(&f.ty.to_token_stream(), hc, file),
                });
            }
        }
    }
    host_only(&item.to_token_stream(), hc, file)
}

/// The error for a reached item that cannot go to a device: the chain from the region, and what to do.
fn cannot_go(
    pkg: &Package,
    tree: &ModuleTree,
    entries: &[Entry],
    from: &HashMap<usize, Option<usize>>,
    k: usize,
    why: &Why,
) -> Diagnostic {
    let mut chain = vec![entries[k].what.clone()];
    let mut at = k;
    while let Some(Some(p)) = from.get(&at) {
        chain.push(entries[*p].what.clone());
        at = *p;
    }
    chain.reverse();
    let e = &entries[k];
    let f = &tree.files[e.file];
    let span = match e.item {
        Item::Fn(i) => i.sig.ident.span(),
        _ => e.item.span(),
    };
    let (s, end) = (span.start(), span.end());
    // The region or `#[declare_target]` item itself, or an item reached from one.
    let (message, help) = if chain.len() == 1 {
        (
            format!("`{}` is device code, and uses {}", e.what, why.what),
            format!("do this work outside the region, or {}", why.fix),
        )
    } else {
        (
            format!("region code reaches `{}`, which uses {}", e.what, why.what),
            format!(
                "reached through {}; keep `{}` out of region code, or {}",
                chain.join(" -> "),
                e.what,
                why.fix
            ),
        )
    };
    Diagnostic {
        message,
        file: pkg.display_path(&f.path),
        abs_file: f.path.clone(),
        line: s.line,
        column: s.column + 1,
        len: if s.line == end.line {
            end.column.saturating_sub(s.column).max(1)
        } else {
            1
        },
        help: Some(help),
    }
}

/// The names code uses: path segments (in expressions, types, patterns and bounds), macro names, and the names it
/// binds itself (a single-segment path naming a local binding is not an item).
#[derive(Default)]
struct Uses {
    /// Single-segment paths and macro names.
    names: HashSet<String>,
    /// Segments of longer paths (`crate::m::f`, `Type::method`).
    paths: HashSet<String>,
    locals: HashSet<String>,
}

impl<'ast> Visit<'ast> for Uses {
    fn visit_path(&mut self, p: &'ast syn::Path) {
        let idents = p.segments.iter().map(|s| s.ident.to_string());
        if p.segments.len() == 1 && p.leading_colon.is_none() {
            self.names.extend(idents);
        } else {
            self.paths.extend(idents);
        }
        syn::visit::visit_path(self, p);
    }

    fn visit_pat_ident(&mut self, p: &'ast syn::PatIdent) {
        self.locals.insert(p.ident.to_string());
        syn::visit::visit_pat_ident(self, p);
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        self.visit_path(&m.path);
        // A macro's arguments are tokens: every identifier in them may be a name (or a local binding).
        idents(&m.tokens, &mut self.names);
    }

    fn visit_item_macro(&mut self, m: &'ast syn::ItemMacro) {
        // A `macro_rules!` body names what its expansions use; an invocation names its macro too.
        idents(&m.mac.tokens, &mut self.names);
        if m.ident.is_none() {
            self.visit_path(&m.mac.path);
        }
    }
}

fn idents(ts: &TokenStream, out: &mut HashSet<String>) {
    for tt in ts.clone() {
        match tt {
            TokenTree::Ident(i) => {
                out.insert(i.to_string());
            }
            TokenTree::Group(g) => idents(&g.stream(), out),
            _ => {}
        }
    }
}

/// Names brought in by a file's `use` items rooted outside the crate, each with the crate it comes from.
fn imported_from_outside(items: &[Item]) -> HashMap<String, String> {
    fn walk(t: &syn::UseTree, root: &str, out: &mut HashMap<String, String>) {
        match t {
            syn::UseTree::Path(p) => walk(&p.tree, root, out),
            syn::UseTree::Name(n) => {
                out.insert(n.ident.to_string(), root.into());
            }
            syn::UseTree::Rename(r) => {
                out.insert(r.rename.to_string(), root.into());
            }
            syn::UseTree::Group(g) => g.items.iter().for_each(|t| walk(t, root, out)),
            syn::UseTree::Glob(_) => {}
        }
    }
    let mut out = HashMap::new();
    for item in items {
        match item {
            Item::Use(u) => {
                let root = match &u.tree {
                    syn::UseTree::Path(p) => p.ident.to_string(),
                    _ => String::new(),
                };
                if !["crate", "self", "super"].contains(&root.as_str()) {
                    walk(&u.tree, &root, &mut out);
                }
            }
            Item::Mod(m) => {
                if let Some((_, inner)) = &m.content {
                    out.extend(imported_from_outside(inner));
                }
            }
            _ => {}
        }
    }
    out
}
