//! The outliner: from each target root of the package, walk the module tree (following `mod` and `#[path]`) and write
//! that target's device crate, a `#![no_std]` mirror of the tree that keeps:
//! - `#[target]` regions, `#[declare_target]` items, and what region code reaches of the package without an attribute
//!   (functions, consts, statics, types, traits, impls, `macro_rules!`: the `reach` module), where they were written;
//! - `use` items rooted at `crate`, `self`, `super`, `offload` or `core` whose names kept code mentions;
//! - only the attributes a device can honour (repr, core derives, lint levels, inline, doc);
//!
//! and appends to each module a kernel entry per region and `use offload::__prelude::*`.

mod kernel;
mod mirror;
mod print;
mod reach;
mod tree;

pub use kernel::KernelAbi;

use crate::diag::Diagnostic;
use crate::package::{DepSource, Kind, Package};
use mirror::Mirror;
use offload_model::identity::mangle_string;
use offload_model::lower::lower;
use offload_model::region::Region;
use quote::ToTokens;
use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use syn::spanned::Spanned;
use syn::{Attribute, Item, UseTree};
use tree::{ModuleFile, ModuleTree};

/// A region found in the source.
#[derive(Debug, Clone)]
pub struct RegionSite {
    pub identity: String,
    pub symbol: String,
    pub region: Region,
    pub file: PathBuf,
    pub line: usize,
}

/// One target's device crate: mirrored files (paths relative to the crate's `src/`) and its root.
#[derive(Debug, Clone)]
pub struct DeviceCrate {
    /// `kind-name`, unique in the package.
    pub key: String,
    /// The kind of target: each kind gets its own image.
    pub kind: Kind,
    pub root: PathBuf,
    pub files: Vec<(PathBuf, String)>,
    pub regions: Vec<RegionSite>,
    /// The exported symbols of its `#[declare_target]` statics (device globals).
    pub globals: Vec<String>,
    /// A library's device globals that regions change, which another image's regions would see a copy of.
    pub unpaired: Vec<String>,
    /// Methods left out of the impls it keeps, and why.
    pub left_out: Vec<reach::LeftOut>,
    /// Names of its kept items and of its modules: what another crate's `use` of it can name.
    pub kept: BTreeSet<String>,
}

#[derive(Debug, Clone, Default)]
pub struct Outlined {
    pub crates: Vec<DeviceCrate>,
    /// The device crates of the offload-aware libraries the package depends on, dependencies first: their device
    /// items, without kernel entries (their regions are in their own images).
    pub libraries: Vec<(Package, DeviceCrate)>,
    /// Every user source file read.
    pub files: Vec<PathBuf>,
}

impl Outlined {
    pub fn regions(&self) -> impl Iterator<Item = &RegionSite> {
        self.crates.iter().flat_map(|c| &c.regions)
    }

    /// Warnings for the build: device globals of libraries that regions of other images may reach, where this
    /// package has such regions (the package's library's own regions are in its own image).
    pub fn warnings(&self, pkg: &Package) -> Vec<String> {
        self.libraries
            .iter()
            .filter(|(lib, _)| {
                self.crates
                    .iter()
                    .any(|c| !c.regions.is_empty() && (!pkg.is_self(lib) || c.kind != Kind::Lib))
            })
            .flat_map(|(_, c)| c.unpaired.iter().cloned())
            .collect()
    }

    /// Notes for a failed device build's `output`: why each method or item it cannot find was left out of the device
    /// crate.
    pub fn explain(&self, output: &str) -> String {
        let mut notes = String::new();
        let left_out = self
            .crates
            .iter()
            .chain(self.libraries.iter().map(|(_, c)| c))
            .flat_map(|c| &c.left_out);
        let mut seen = BTreeSet::new();
        // rustc's words for a missing method, function, value, type or macro.
        let missing = |name: &str| {
            output.lines().any(|line| {
                line.starts_with("error")
                    && (line.contains(&format!("no method named `{name}`"))
                        || (line.contains("cannot find") && line.contains(&format!("`{name}`"))))
            })
        };
        for l in left_out {
            if missing(&l.name) && seen.insert(&l.what) {
                notes.push_str(&format!(
                    "note: offload left `{}` out of the device build: it uses {}; region code cannot call it\n",
                    l.what, l.why
                ));
            }
        }
        notes
    }
}

/// Outlines every target of `pkg` into device crates under `gen_dir` (one directory per target), with kernel
/// entries declared for `abi`.
pub fn outline_package(
    pkg: &Package,
    gen_dir: &Path,
    abi: KernelAbi,
) -> Result<Outlined, Vec<Diagnostic>> {
    let mut out = Outlined::default();
    let mut diags = Vec::new();
    // Each kind of target gets its own image (see `nested`), so a region name need only be unique within a kind:
    // an example and a bench may share a name, and a file shared by a library and a binary keeps its kernel in both.
    let mut seen: HashMap<(Kind, String), (PathBuf, usize)> = HashMap::new();
    // Libraries first: a crate's `use` of a library keeps what the library's device crate has.
    for lib in pkg.offload_libraries() {
        let Some(target) = lib.targets.iter().find(|t| t.kind == Kind::Lib) else {
            continue;
        };
        // The package's own library serves its other targets, if it has any; its outline below reports its errors.
        let own = pkg.is_self(lib);
        if own && pkg.targets.iter().all(|t| t.kind == Kind::Lib) {
            continue;
        }
        let key = library_key(lib);
        let tree = match ModuleTree::load(lib, target, &gen_dir.join(&key)) {
            Ok(t) => t,
            Err(d) => {
                diags.extend(d);
                continue;
            }
        };
        out.files.extend(tree.files.iter().map(|f| f.path.clone()));
        let mut outliner = Outliner::new(lib, &tree, abi);
        outliner.entries = false;
        outliner.dep_kept = dep_kept(lib, &out.libraries);
        let mut lib_diags = Vec::new();
        let krate = outliner.run(key, Kind::Lib, &mut lib_diags);
        if !own {
            diags.extend(lib_diags);
        }
        out.libraries.push((lib.clone(), krate));
    }
    for target in &pkg.targets {
        let key = format!("{}-{}", target.kind.name(), target.name);
        let tree = match ModuleTree::load(pkg, target, &gen_dir.join(&key)) {
            Ok(t) => t,
            Err(d) => {
                diags.extend(d);
                continue;
            }
        };
        out.files.extend(tree.files.iter().map(|f| f.path.clone()));
        let mut outliner = Outliner::new(pkg, &tree, abi);
        outliner.dep_kept = dep_kept(pkg, &out.libraries);
        let mut krate = outliner.run(key, target.kind, &mut diags);
        for r in &krate.regions {
            match seen.get(&(target.kind, r.identity.clone())) {
                Some((f, l)) => diags.push(Diagnostic {
                    message: format!("two regions are named `{}`", r.identity),
                    file: pkg.display_path(&r.file),
                    abs_file: r.file.clone(),
                    line: r.line,
                    column: 1,
                    len: 1,
                    help: Some(format!(
                        "the other is at {}:{l}; rename one",
                        pkg.display_path(f).display()
                    )),
                }),
                None => {
                    seen.insert((target.kind, r.identity.clone()), (r.file.clone(), r.line));
                }
            }
        }
        krate.regions.sort_by(|a, b| a.identity.cmp(&b.identity));
        out.crates.push(krate);
    }
    out.files.sort();
    out.files.dedup();
    if diags.is_empty() {
        Ok(out)
    } else {
        Err(diags)
    }
}

/// What the device crates of `pkg`'s offload-aware libraries keep, by the name `pkg`'s code gives each library.
fn dep_kept(
    pkg: &Package,
    libraries: &[(Package, DeviceCrate)],
) -> HashMap<String, BTreeSet<String>> {
    pkg.device_deps
        .iter()
        .filter_map(|d| match &d.source {
            DepSource::Offload(lib) => libraries
                .iter()
                .find(|(l, _)| l.manifest_dir == lib.manifest_dir)
                .map(|(_, c)| (d.ident.clone(), c.kept.clone())),
            DepSource::Crate { .. } => None,
        })
        .collect()
}

/// The device crate key of an offload-aware library: unique across a link, as its package tag is.
pub fn library_key(lib: &Package) -> String {
    format!("dep-{}-{}", lib.name, lib.unique_suffix())
}

/// The arguments of an item's `#[target(..)]` (none for `#[target]`).
fn target_args(attrs: &[Attribute]) -> proc_macro2::TokenStream {
    attrs
        .iter()
        .find(|a| is_attr(a, "target"))
        .and_then(|a| match &a.meta {
            syn::Meta::List(l) => Some(l.tokens.clone()),
            _ => None,
        })
        .unwrap_or_default()
}

/// Whether an attribute is `#[NAME]` or `#[offload::NAME]` (any path ending in NAME).
pub(crate) fn is_attr(a: &Attribute, name: &str) -> bool {
    a.path().segments.last().is_some_and(|s| s.ident == name)
}

pub(crate) fn has_attr(attrs: &[Attribute], name: &str) -> bool {
    attrs.iter().any(|a| is_attr(a, name))
}

const CORE_DERIVES: &[&str] = &[
    "Clone",
    "Copy",
    "Debug",
    "Default",
    "PartialEq",
    "Eq",
    "PartialOrd",
    "Ord",
    "Hash",
];
const KEPT_ATTRS: &[&str] = &[
    "repr",
    "allow",
    "warn",
    "deny",
    "forbid",
    "expect",
    "inline",
    "doc",
    "must_use",
    "cold",
    "track_caller",
    "macro_export",
    "macro_use",
];
/// Roots of the `use` paths a device crate keeps (`std` is `core` there: `extern crate core as std`).
const USE_ROOTS: &[&str] = &["crate", "self", "super", "offload", "core", "std"];

struct Outliner<'a> {
    pkg: &'a Package,
    tree: &'a ModuleTree,
    abi: KernelAbi,
    /// Every identifier kept code mentions: a `use` leaf survives only if its name is among them.
    mentioned: BTreeSet<String>,
    /// Names of kept items and modules: a `use crate::..` leaf survives only if it names one.
    kept: BTreeSet<String>,
    /// What region code reaches without an attribute, and what it reaches that cannot go to a device.
    reach: reach::Reach,
    reach_errors: Vec<Diagnostic>,
    regions: Vec<RegionSite>,
    /// Whether regions get kernel entries and `#[declare_target]` statics are exported: not in a library's device
    /// crate outlined for a dependent package.
    entries: bool,
    /// The exported symbols of `#[declare_target]` statics.
    globals: Vec<String>,
    /// Warnings for the library's `#[declare_target]` statics of atomics, outlined for another image.
    unpaired: Vec<String>,
    /// What each offload-aware library's device crate keeps, by the name code gives the library.
    dep_kept: HashMap<String, BTreeSet<String>>,
    /// The package's `#[derive(Mapper)]` structs by name, with their fields (the kernel entry rebuilds them).
    mappers: kernel::Mappers,
}

impl<'a> Outliner<'a> {
    fn new(pkg: &'a Package, tree: &'a ModuleTree, abi: KernelAbi) -> Self {
        let (reach, reach_errors) = reach::reach(pkg, tree);
        let mut mentioned = BTreeSet::new();
        let mut kept = BTreeSet::new();
        for (i, f) in tree.files.iter().enumerate() {
            collect_mentions(&f.ast.items, i, &reach, &mut mentioned);
            collect_kept(&f.ast.items, &mut kept);
        }
        kept.extend(reach.names.iter().cloned());
        let mut mappers = kernel::Mappers::new();
        for f in &tree.files {
            collect_mappers(&f.ast.items, &mut mappers);
        }
        Outliner {
            pkg,
            tree,
            abi,
            mentioned,
            kept,
            reach,
            reach_errors,
            regions: Vec::new(),
            entries: true,
            globals: Vec::new(),
            unpaired: Vec::new(),
            dep_kept: HashMap::new(),
            mappers,
        }
    }

    fn run(mut self, key: String, kind: Kind, diags: &mut Vec<Diagnostic>) -> DeviceCrate {
        diags.append(&mut self.reach_errors);
        let mut files = Vec::new();
        for (i, f) in self.tree.files.iter().enumerate() {
            let text = self.mirror_file(i, f, diags);
            files.push((self.tree.mirror_path(i), text));
            for (span, what) in nested_device_items(&f.ast) {
                diags.push(self.diag(
                    f,
                    span,
                    &format!("{what} inside a function's body, where the outliner does not look"),
                    Some("move it out of the function, to a module"),
                ));
            }
        }
        DeviceCrate {
            key,
            kind,
            root: self.tree.mirror_path(0),
            files,
            regions: self.regions,
            globals: self.globals,
            unpaired: self.unpaired,
            left_out: std::mem::take(&mut self.reach.left_out),
            kept: self.kept,
        }
    }

    fn mirror_file(&mut self, index: usize, f: &ModuleFile, diags: &mut Vec<Diagnostic>) -> String {
        let mut m = Mirror::new(&f.src);
        // Inner attributes (`#![...]`, `//!`) cannot appear in an included file; the device crate root sets its own.
        for a in &f.ast.attrs {
            let r = m.range(a.span());
            m.blank(r);
        }
        let tail = self.mirror_items(index, f, &f.ast.items, &f.module_path, &mut m, diags);
        m.finish(&tail)
    }

    /// Mirrors a module's items and returns the code to append at the module's end: the prelude and a kernel entry
    /// per region.
    fn mirror_items(
        &mut self,
        index: usize,
        f: &ModuleFile,
        items: &[Item],
        module_path: &[String],
        m: &mut Mirror,
        diags: &mut Vec<Diagnostic>,
    ) -> String {
        let mut tail = String::from("#[allow(unused_imports)] use ::offload::__prelude::*;");
        for item in items {
            match item {
                Item::Fn(func) if has_attr(&func.attrs, "target") => {
                    if let Some(entry) = self.mirror_target_fn(f, func, module_path, m) {
                        tail.push('\n');
                        tail.push_str(&entry);
                    }
                }
                Item::Impl(i) if has_attr(&i.attrs, "target") => {
                    self.mirror_region_impl(index, f, i, module_path, m, &mut tail);
                }
                Item::Impl(i) if !has_attr(&i.attrs, "declare_target") => {
                    diags.extend(self.regions_in_impl(f, i));
                    if self.reach.kept.contains(&reach::site(index, item)) {
                        keep_item(m, item, &i.attrs);
                        // Methods a device cannot have stay out of a reached impl.
                        for it in &i.items {
                            if self.reach.dropped.contains(&reach::site(index, it)) {
                                let r = m.range(it.span());
                                m.blank(r);
                            }
                        }
                    }
                }
                Item::Macro(mac) if mac.ident.is_some() && writes_region(&mac.mac.tokens) => {
                    let name = mac
                        .ident
                        .as_ref()
                        .map(|i| i.to_string())
                        .unwrap_or_default();
                    diags.push(self.diag(
                        f,
                        mac.ident.as_ref().map_or_else(|| mac.span(), |i| i.span()),
                        &format!(
                            "`macro_rules! {name}` writes a `#[target]` region, which the outliner cannot see (it \
                             does not expand macros): its regions would always run on the host"
                        ),
                        Some("write each region out as a function (a macro may still write the code inside one)"),
                    ));
                    if self.reach.kept.contains(&reach::site(index, item)) {
                        keep_item(m, item, &mac.attrs);
                    }
                }
                Item::Use(u) => self.mirror_use(m, u),
                Item::Mod(md) => self.mirror_mod(index, f, md, module_path, m, diags),
                _ => {
                    if let Some(attrs) = declare_target_attrs(item) {
                        keep_item(m, item, attrs);
                        blank_field_maps(m, item);
                        if let Item::Static(st) = item {
                            self.export_global(m, st, module_path);
                        }
                    } else if self.reach.kept.contains(&reach::site(index, item)) {
                        keep_item(m, item, item_attrs(item));
                        blank_field_maps(m, item);
                    }
                }
            }
        }
        tail
    }

    /// A `#[target]` function: the region as lowered, on its lines. Returns its kernel entries; a region whose
    /// clauses do not parse is copied as written (the macro reports them, spanned, in the host build) and has none.
    fn mirror_target_fn(
        &mut self,
        f: &ModuleFile,
        func: &syn::ItemFn,
        module_path: &[String],
        m: &mut Mirror,
    ) -> Option<String> {
        let Ok(region) = Region::parse(target_args(&func.attrs), func) else {
            keep_item(m, func, &func.attrs);
            return None;
        };
        self.mirror_region(m, func, &region);
        if !self.entries {
            return None;
        }
        Some(self.kernels(f, func, &region, module_path))
    }

    /// A `#[declare_target] static`: exported under the symbol its offload entry names, where the runtime finds the
    /// image's copy. A library's device crate outlined for a dependent exports nothing: the library's own image
    /// holds the copy its entry pairs with.
    fn export_global(&mut self, m: &mut Mirror, st: &syn::ItemStatic, module_path: &[String]) {
        if !self.entries {
            // A global regions change (atomics) is paired with the library image's copy only: another image's
            // regions would change a copy of their own.
            let mut names = BTreeSet::new();
            idents(st.ty.to_token_stream(), &mut names);
            if names.iter().any(|i| i.starts_with("Atomic")) {
                self.unpaired.push(format!(
                    "`{}::{}` of `{}` is a device global that regions change: regions of another image (this \
                     package's binaries, tests or examples, or a dependent package) that reach it change a copy of \
                     their own, which `target_update!` does not see; change it from the library's own regions, or \
                     pass the atomics to the region as a `&[AtomicT]` parameter",
                    module_path.join("::"),
                    st.ident,
                    self.pkg.name
                ));
            }
            return;
        }
        let symbol = mangle_string(&format!("{}::{}", module_path.join("::"), st.ident));
        let at = m.range(st.span()).start;
        m.insert(at, format!("#[export_name = {symbol:?}] "));
        self.globals.push(symbol);
    }

    /// `#[target] impl Type { .. }`: the impl as written, its region methods lowered on their lines, the methods a
    /// device cannot have left out (as in a reached impl); a kernel entry per region, at module level, calling
    /// `<Type>::method`. An impl the macro rejects (a trait impl, a generic one) is left out: the host build
    /// reports it.
    fn mirror_region_impl(
        &mut self,
        index: usize,
        f: &ModuleFile,
        i: &syn::ItemImpl,
        module_path: &[String],
        m: &mut Mirror,
        tail: &mut String,
    ) {
        if i.trait_.is_some() {
            return;
        }
        keep_item(m, i, &i.attrs);
        for it in &i.items {
            match it {
                syn::ImplItem::Fn(method) if has_attr(&method.attrs, "target") => {
                    let func = syn::ItemFn {
                        attrs: method.attrs.clone(),
                        vis: method.vis.clone(),
                        sig: method.sig.clone(),
                        block: Box::new(method.block.clone()),
                    };
                    let Ok(region) =
                        Region::parse_in(target_args(&method.attrs), &func, Some(i.into()))
                    else {
                        blank_attrs(m, &method.attrs);
                        continue;
                    };
                    self.mirror_region(m, &func, &region);
                    if self.entries {
                        tail.push('\n');
                        tail.push_str(&self.kernels(f, &func, &region, module_path));
                    }
                }
                _ if self.reach.dropped.contains(&reach::site(index, it)) => {
                    let r = m.range(it.span());
                    m.blank(r);
                }
                _ => {}
            }
        }
    }

    /// The kernel entries of a region: one, or one per `instantiate(..)` list of a generic region, each named by
    /// its identity (`module::triad<f32>`) and calling the region with those arguments.
    fn kernels(
        &mut self,
        f: &ModuleFile,
        func: &syn::ItemFn,
        region: &Region,
        module_path: &[String],
    ) -> String {
        let instances: Vec<Option<usize>> = if region.is_generic() {
            (0..region.instances.len()).map(Some).collect()
        } else {
            vec![None]
        };
        let mut out = Vec::new();
        for k in instances {
            let local = k.map_or_else(|| region.local_name(), |k| region.instance_name(k));
            let identity = format!("{}::{}", module_path.join("::"), local);
            let symbol = mangle_string(&identity);
            let name = &region.ident;
            let turbofish = k.and_then(|k| region.turbofish(k));
            let callee = match region.instance_self_ty(k) {
                Some(t) => quote::quote!(<#t>::#name #turbofish),
                None => quote::quote!(#name #turbofish),
            };
            let kernel_name = quote::format_ident!(
                "__offload_kernel_{}",
                local
                    .chars()
                    .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
                    .collect::<String>()
            );
            let instance = region.instance(k);
            out.push(
                kernel::entry(
                    &instance,
                    &symbol,
                    self.abi,
                    callee,
                    kernel_name,
                    &self.mappers,
                )
                .to_string(),
            );
            self.regions.push(RegionSite {
                identity,
                symbol,
                region: instance,
                file: f.path.clone(),
                line: func.sig.ident.span().start().line,
            });
        }
        out.join("\n")
    }

    /// `#[target]` on a method of an `impl` block without `#[target]`, whose region the macro cannot name.
    fn regions_in_impl(&self, f: &ModuleFile, i: &syn::ItemImpl) -> Vec<Diagnostic> {
        i.items
            .iter()
            .filter_map(|it| match it {
                syn::ImplItem::Fn(method) if has_attr(&method.attrs, "target") => Some(self.diag(
                    f,
                    method.sig.ident.span(),
                    "a region in an `impl` block needs `#[target]` on the impl too",
                    Some("write `#[target] impl Type { .. }`: the attribute on the impl names the region `Type::method`"),
                )),
                _ => None,
            })
            .collect()
    }

    /// A module: an inline one is mirrored in place, its own tail before its closing brace; `mod x;` points at x's
    /// mirrored file, on the same line.
    fn mirror_mod(
        &mut self,
        index: usize,
        f: &ModuleFile,
        md: &syn::ItemMod,
        module_path: &[String],
        m: &mut Mirror,
        diags: &mut Vec<Diagnostic>,
    ) {
        match &md.content {
            Some((brace, inner)) => {
                let whole = m.range(md.span());
                let open = m.range(brace.span.open());
                let close = m.range(brace.span.close());
                m.keep(whole.start..open.end);
                m.keep(close.clone());
                blank_attrs(m, &md.attrs);
                let mut path = module_path.to_vec();
                path.push(md.ident.to_string());
                let inner_tail = self.mirror_items(index, f, inner, &path, m, diags);
                m.insert(close.start, inner_tail.replace('\n', " "));
            }
            None => {
                let Some(child) = self.tree.child_of(index, md) else {
                    return;
                };
                keep_item(m, md, &md.attrs);
                for a in md.attrs.iter().filter(|a| a.path().is_ident("path")) {
                    let r = m.range(a.span());
                    m.blank(r);
                }
                let at = m.range(md.span()).start;
                let path = self.tree.mirror_abs(child);
                m.insert(at, format!("#[path = {:?}] ", path.display().to_string()));
            }
        }
    }

    /// Writes the region's function as [`lower`] lowers it (the macro compiles the same for the host fallback), every
    /// token on its original line.
    fn mirror_region(&self, m: &mut Mirror, func: &syn::ItemFn, region: &Region) {
        let lowered = lower(region, func);
        let attrs = func.attrs.iter().filter_map(|a| {
            if a.path().is_ident("cfg") {
                return Some(device_cfg(a));
            }
            a.path()
                .get_ident()
                .is_some_and(|i| KEPT_ATTRS.contains(&i.to_string().as_str()))
                .then(|| a.to_token_stream())
        });
        // A reduction's entry on the host image is optimised on its own, not inlined into the entry's unwinding
        // closure, where LLVM kept the accumulator in memory (dot products 4x slower). GPU entries have no such
        // closure.
        let inline = (!region.reductions.is_empty() && matches!(self.abi, KernelAbi::Host))
            .then(|| quote::quote!(#[inline(never)]));
        let mut sig = func.sig.clone();
        sig.inputs = lowered.inputs.into_iter().collect();
        let (vis, block) = (&func.vis, &lowered.block);
        let tokens = quote::quote!(#(#attrs)* #inline #vis #sig #block);
        let r = m.range(func.span());
        m.replace_lines(r, |first, last| print::at_lines(tokens, first, last));
    }

    /// Keeps the leaves of a `use` that kept code mentions, rooted where a device crate can reach.
    fn mirror_use(&self, m: &mut Mirror, u: &syn::ItemUse) {
        let Some(tree) = filter_use(&u.tree, None, self) else {
            return;
        };
        let r = m.range(u.span());
        if tree.to_token_stream().to_string() == u.tree.to_token_stream().to_string() {
            m.keep(r);
            blank_attrs(m, &u.attrs);
        } else {
            let vis = &u.vis;
            let colon = &u.leading_colon;
            m.replace(r, quote::quote!(#vis use #colon #tree;).to_string());
        }
    }

    fn diag(
        &self,
        f: &ModuleFile,
        span: proc_macro2::Span,
        msg: &str,
        help: Option<&str>,
    ) -> Diagnostic {
        Diagnostic {
            message: msg.into(),
            file: self.pkg.display_path(&f.path),
            abs_file: f.path.clone(),
            line: span.start().line,
            column: span.start().column + 1,
            len: span.end().column.saturating_sub(span.start().column).max(1),
            help: help.map(String::from),
        }
    }
}

/// Whether macro tokens write a `#[target]` (or `#[offload::target]`) attribute.
fn writes_region(ts: &proc_macro2::TokenStream) -> bool {
    let mut after_pound = false;
    for tt in ts.clone() {
        match tt {
            proc_macro2::TokenTree::Punct(p) => after_pound = p.as_char() == '#',
            proc_macro2::TokenTree::Group(g) => {
                if after_pound && g.delimiter() == proc_macro2::Delimiter::Bracket {
                    let path: Vec<String> = g
                        .stream()
                        .into_iter()
                        .take_while(|t| !matches!(t, proc_macro2::TokenTree::Group(_)))
                        .filter_map(|t| match t {
                            proc_macro2::TokenTree::Ident(i) => Some(i.to_string()),
                            _ => None,
                        })
                        .collect();
                    if path.last().is_some_and(|l| l == "target") {
                        return true;
                    }
                }
                if writes_region(&g.stream()) {
                    return true;
                }
                after_pound = false;
            }
            _ => after_pound = false,
        }
    }
    false
}

/// The attributes of an item the device crate keeps because it is `#[declare_target]`.
fn declare_target_attrs(item: &Item) -> Option<&[Attribute]> {
    let attrs = item_attrs(item);
    has_attr(attrs, "declare_target").then_some(attrs)
}

/// An item's attributes (none for the kinds the device crate never keeps).
fn item_attrs(item: &Item) -> &[Attribute] {
    match item {
        Item::Fn(i) => &i.attrs,
        Item::Const(i) => &i.attrs,
        Item::Static(i) => &i.attrs,
        Item::Struct(i) => &i.attrs,
        Item::Enum(i) => &i.attrs,
        Item::Union(i) => &i.attrs,
        Item::Impl(i) => &i.attrs,
        Item::Type(i) => &i.attrs,
        Item::Trait(i) => &i.attrs,
        Item::Macro(i) => &i.attrs,
        _ => &[],
    }
}

/// Copies an item and blanks the attributes a device crate must not see.
fn keep_item(m: &mut Mirror, item: &impl Spanned, attrs: &[Attribute]) {
    let r = m.range(item.span());
    m.keep(r);
    blank_attrs(m, attrs);
}

/// A mapper struct's `#[map(..)]` field attributes belong to its derive, which the device crate does not run.
fn blank_field_maps(m: &mut Mirror, item: &Item) {
    let Item::Struct(st) = item else { return };
    if !offload_model::mapper::derives_mapper(&st.attrs) {
        return;
    }
    for a in st.fields.iter().flat_map(|f| &f.attrs) {
        if a.path().is_ident("map") {
            let r = m.range(a.span());
            m.blank(r);
        }
    }
}

/// The package's mapper structs (`#[derive(Mapper)]`), by name, in every module; one whose fields are in error is
/// left out (the derive reports it in the host build).
fn collect_mappers(items: &[Item], out: &mut kernel::Mappers) {
    for item in items {
        match item {
            Item::Struct(s) if offload_model::mapper::derives_mapper(&s.attrs) => {
                let input: syn::DeriveInput = s.clone().into();
                if let Ok(fields) = offload_model::mapper::fields(&input) {
                    out.insert(s.ident.to_string(), fields);
                }
            }
            Item::Mod(m) => {
                if let Some((_, inner)) = &m.content {
                    collect_mappers(inner, out);
                }
            }
            _ => {}
        }
    }
}

fn blank_attrs(m: &mut Mirror, attrs: &[Attribute]) {
    for a in attrs {
        let r = m.range(a.span());
        if a.path().is_ident("derive") {
            // Keep the derives of core traits only.
            let mut core = Vec::new();
            let mut other = false;
            let _ = a.parse_nested_meta(|meta| {
                match meta.path.segments.last().map(|s| s.ident.to_string()) {
                    Some(n) if CORE_DERIVES.contains(&n.as_str()) => core.push(n),
                    _ => other = true,
                }
                Ok(())
            });
            if other {
                m.replace(
                    r,
                    if core.is_empty() {
                        String::new()
                    } else {
                        format!("#[derive({})]", core.join(", "))
                    },
                );
            }
        } else if a.path().is_ident("cfg") {
            m.replace(r, device_cfg(a).to_string());
        } else if !a
            .path()
            .get_ident()
            .is_some_and(|i| KEPT_ATTRS.contains(&i.to_string().as_str()))
        {
            m.blank(r);
        }
    }
}

/// A `#[cfg(..)]` as a device crate keeps it: the device's rustc decides it with the package's features (the device
/// crates declare and enable them) and the device's own target (`target_arch = "nvptx64"` selects per-device code),
/// and `test` is set, so regions and items of unit tests reach the device whichever target the one build serves.
fn device_cfg(a: &Attribute) -> proc_macro2::TokenStream {
    fn set_test(ts: proc_macro2::TokenStream) -> proc_macro2::TokenStream {
        ts.into_iter()
            .flat_map(|tt| match tt {
                proc_macro2::TokenTree::Ident(i) if i == "test" => {
                    quote::quote_spanned!(i.span()=> all())
                        .into_iter()
                        .collect::<Vec<_>>()
                }
                proc_macro2::TokenTree::Group(g) => {
                    let mut n = proc_macro2::Group::new(g.delimiter(), set_test(g.stream()));
                    n.set_span(g.span());
                    vec![proc_macro2::TokenTree::Group(n)]
                }
                other => vec![other],
            })
            .collect()
    }
    match &a.meta {
        syn::Meta::List(l) => {
            let inner = set_test(l.tokens.clone());
            quote::quote!(#[cfg(#inner)])
        }
        _ => a.to_token_stream(),
    }
}

/// The part of a `use` tree a device crate can resolve: paths rooted at `crate`/`self`/`super` keep the leaves that
/// name kept items or modules, and paths rooted at an offload-aware library those its device crate keeps (a trait
/// brought into scope for its methods is named by no code); paths rooted at `offload`/`core`/`std` or a `no_std`
/// dependency keep the leaves kept code mentions (`std` paths only into what `core` has too).
fn filter_use<'o>(tree: &UseTree, root: Option<&'o str>, o: &'o Outliner) -> Option<UseTree> {
    let kept = match root {
        Some("crate" | "self" | "super") => Some(&o.kept),
        Some(r) => o.dep_kept.get(r),
        None => None,
    };
    let keep = |name: &syn::Ident, alias: &syn::Ident| match kept {
        Some(kept) => kept.contains(&name.to_string()),
        None => o.mentioned.contains(&alias.to_string()),
    };
    match tree {
        UseTree::Path(p) => {
            let here = p.ident.to_string();
            let root = match root {
                Some(r) => r,
                None => USE_ROOTS
                    .iter()
                    .copied()
                    .chain(o.pkg.device_dep_idents())
                    .find(|r| *r == here)?,
            };
            if here == "std" && root == "std" && !reach::in_core(&first_segment(&p.tree)) {
                return None;
            }
            let inner = filter_use(&p.tree, Some(root), o)?;
            Some(UseTree::Path(syn::UsePath {
                tree: Box::new(inner),
                ..p.clone()
            }))
        }
        UseTree::Name(n) => (root.is_some() && (n.ident == "self" || keep(&n.ident, &n.ident)))
            .then(|| tree.clone()),
        UseTree::Rename(r) => (root.is_some() && keep(&r.ident, &r.rename)).then(|| tree.clone()),
        UseTree::Glob(_) => root.is_some().then(|| tree.clone()),
        UseTree::Group(g) => {
            let items: syn::punctuated::Punctuated<UseTree, syn::Token![,]> = g
                .items
                .iter()
                .filter_map(|t| filter_use(t, root, o))
                .collect();
            (!items.is_empty()).then_some(UseTree::Group(syn::UseGroup {
                brace_token: g.brace_token,
                items,
            }))
        }
    }
}

/// The first name of a `use` tree under a path (`sync` of `std::sync::atomic::..`).
fn first_segment(t: &UseTree) -> String {
    match t {
        UseTree::Path(p) => p.ident.to_string(),
        UseTree::Name(n) => n.ident.to_string(),
        UseTree::Rename(r) => r.ident.to_string(),
        _ => String::new(),
    }
}

/// Items in function bodies marked `#[target]` or `#[declare_target]`: the outliner mirrors modules' items only, and a
/// device global there would share its symbol with a module's static of the same name.
fn nested_device_items(file: &syn::File) -> Vec<(proc_macro2::Span, String)> {
    struct Nested {
        depth: usize,
        found: Vec<(proc_macro2::Span, String)>,
    }
    impl<'ast> syn::visit::Visit<'ast> for Nested {
        fn visit_block(&mut self, b: &'ast syn::Block) {
            self.depth += 1;
            syn::visit::visit_block(self, b);
            self.depth -= 1;
        }
        fn visit_item(&mut self, item: &'ast Item) {
            if self.depth > 0 {
                let attrs = item_attrs(item);
                for name in ["target", "declare_target"] {
                    if let Some(a) = attrs.iter().find(|a| is_attr(a, name)) {
                        self.found.push((a.span(), format!("a `#[{name}]` item")));
                    }
                }
            }
            syn::visit::visit_item(self, item);
        }
    }
    let mut v = Nested {
        depth: 0,
        found: Vec::new(),
    };
    syn::visit::Visit::visit_file(&mut v, file);
    v.found
}

/// Names of items the device crate keeps, and of every module (all modules are mirrored).
fn collect_kept(items: &[Item], out: &mut BTreeSet<String>) {
    for item in items {
        let (attrs, name) = match item {
            Item::Fn(i) => (&i.attrs, &i.sig.ident),
            Item::Const(i) => (&i.attrs, &i.ident),
            Item::Struct(i) => (&i.attrs, &i.ident),
            Item::Enum(i) => (&i.attrs, &i.ident),
            Item::Type(i) => (&i.attrs, &i.ident),
            Item::Static(i) => (&i.attrs, &i.ident),
            Item::Trait(i) => (&i.attrs, &i.ident),
            Item::Union(i) => (&i.attrs, &i.ident),
            Item::Mod(m) => {
                out.insert(m.ident.to_string());
                if let Some((_, inner)) = &m.content {
                    collect_kept(inner, out);
                }
                continue;
            }
            _ => continue,
        };
        if has_attr(attrs, "target") || has_attr(attrs, "declare_target") {
            out.insert(name.to_string().trim_start_matches("r#").to_string());
        }
    }
}

/// Identifiers mentioned by kept items (regions, `#[declare_target]` items and what they reach), in any module.
fn collect_mentions(items: &[Item], file: usize, reach: &reach::Reach, out: &mut BTreeSet<String>) {
    for item in items {
        let kept = match item {
            Item::Fn(i) if has_attr(&i.attrs, "target") => true,
            Item::Impl(i) if has_attr(&i.attrs, "target") => true,
            Item::Mod(md) => {
                if let Some((_, inner)) = &md.content {
                    collect_mentions(inner, file, reach, out);
                }
                false
            }
            _ => {
                declare_target_attrs(item).is_some()
                    || reach.kept.contains(&reach::site(file, item))
            }
        };
        if kept {
            idents(mention_tokens(item), out);
        }
    }
}

/// An item's tokens as the device crate keeps them: a type's derives of other than core traits (`Mapper`) and a
/// mapper struct's `#[map(..)]` field attributes are blanked there, so their names import nothing.
fn mention_tokens(item: &Item) -> proc_macro2::TokenStream {
    let Item::Struct(st) = item else {
        return item.to_token_stream();
    };
    let mut st = st.clone();
    st.attrs.retain(|a| !a.path().is_ident("derive"));
    for f in st.fields.iter_mut() {
        f.attrs.retain(|a| !a.path().is_ident("map"));
    }
    st.to_token_stream()
}

fn idents(ts: proc_macro2::TokenStream, out: &mut BTreeSet<String>) {
    for tt in ts {
        match tt {
            proc_macro2::TokenTree::Ident(i) => {
                out.insert(i.to_string().trim_start_matches("r#").to_string());
            }
            proc_macro2::TokenTree::Group(g) => idents(g.stream(), out),
            _ => {}
        }
    }
}

pub(crate) fn rel_or_abs(base: &Path, p: &Path) -> PathBuf {
    match p.strip_prefix(base) {
        Ok(rel) => PathBuf::from("src").join(rel),
        Err(_) => PathBuf::from("abs").join(p.strip_prefix("/").unwrap_or(p)),
    }
}
