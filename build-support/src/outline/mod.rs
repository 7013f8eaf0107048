//! The outliner: from each target root of the package, walk the module tree (following `mod` and `#[path]`) and write
//! that target's device crate, a `#![no_std]` mirror of the tree that keeps:
//! - `#[target]` regions, `#[declare_target]` items, and what region code reaches of the package without an attribute
//!   (functions, consts, statics, types, traits, impls, `macro_rules!`: the `reach` module), where they were written;
//! - `use` items rooted at `crate`, `self`, `super`, `offload` or `core` whose names kept code mentions;
//! - only the attributes a device can honour (repr, core derives, lint levels, inline, doc);
//!
//! and appends to each module a kernel entry per region and `use offload::__prelude::*`.

mod attrs;
mod kernel;
mod mirror;
mod names;
mod print;
mod reach;
mod tree;

pub use kernel::KernelAbi;

use attrs::*;
pub(crate) use attrs::{has_attr, is_attr};
use names::*;

use crate::diag::Diagnostic;
use crate::package::{DepSource, Kind, Package};
use mirror::Mirror;
use offload_frontend::frontend;
use offload_frontend::lower::lower;
use offload_frontend::region::Region;
use offload_model::identity::mangle_string;
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
                        keep_with_mapper(m, item, attrs);
                        if let Item::Static(st) = item {
                            self.export_global(m, st, module_path);
                        }
                    } else if self.reach.kept.contains(&reach::site(index, item)) {
                        keep_with_mapper(m, item, item_attrs(item));
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
        let Ok(region) = frontend::parse_region(target_args(&func.attrs), func) else {
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
                    let Ok(region) = frontend::parse_region_in(
                        target_args(&method.attrs),
                        &func,
                        Some(i.into()),
                    ) else {
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
        sig.output = lowered.output;
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

pub(crate) fn rel_or_abs(base: &Path, p: &Path) -> PathBuf {
    match p.strip_prefix(base) {
        Ok(rel) => PathBuf::from("src").join(rel),
        Err(_) => PathBuf::from("abs").join(p.strip_prefix("/").unwrap_or(p)),
    }
}
