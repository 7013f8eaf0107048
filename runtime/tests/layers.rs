//! The runtime's dependency rule, checked on its source: every `crate::` path (in `use` items, in code, and in macro
//! bodies) goes from a layer to a layer below it, and the module graph has no cycle.
//!
//! The layers, top to bottom (the crate doc in `lib.rs` says what each holds):
//! `api` -> `region` -> `device` -> `plugin` -> `host` -> `registry` -> `observe` -> `env`.
//! A module may name modules of its own layer (without a cycle) and of layers below it, never above. `lib.rs`, the
//! crate root, only declares the layers and re-exports the public API; nothing names items through it.

use proc_macro2::{TokenStream, TokenTree};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use syn::visit::Visit;

/// Top to bottom: a layer may depend only on the layers after it.
const LAYERS: &[&str] = &[
    "task", "api", "region", "device", "plugin", "host", "registry", "observe", "env",
];

/// A module of the crate, as a path below the root (`["device", "entry"]`); the root is `[]`.
type ModPath = Vec<String>;

fn show(m: &[String]) -> String {
    if m.is_empty() {
        "crate".into()
    } else {
        m.join("::")
    }
}

/// One `crate::` reference: the file and line it is on, and the module it names.
#[derive(Clone, Debug)]
struct Edge {
    from: ModPath,
    to: ModPath,
    file: PathBuf,
    line: usize,
    /// The path as written, for the message.
    text: String,
}

/// Every `.rs` file under `dir` with the module path it defines (`a/mod.rs` and `a.rs` are `a`).
fn modules(src: &Path) -> BTreeMap<ModPath, PathBuf> {
    fn walk(dir: &Path, prefix: &[String], out: &mut BTreeMap<ModPath, PathBuf>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
            .map(|e| e.expect("directory entry").path())
            .collect();
        entries.sort();
        for path in entries {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if path.is_dir() {
                let mut p = prefix.to_vec();
                p.push(name);
                walk(&path, &p, out);
            } else if let Some(stem) = name.strip_suffix(".rs") {
                let mut p = prefix.to_vec();
                if stem != "mod" && !(prefix.is_empty() && stem == "lib") {
                    p.push(stem.to_string());
                }
                out.insert(p, path);
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(src, &[], &mut out);
    out
}

/// Collects the `crate::`, `super::` and `self::` paths of one file, and paths that start with a child module's name,
/// resolved to absolute module paths (the longest prefix that is a module of the crate).
struct Collector<'a> {
    file_module: ModPath,
    /// The module the visitor is in: the file's, plus inline modules (`mod tests { .. }`).
    current: ModPath,
    known: &'a BTreeSet<ModPath>,
    file: PathBuf,
    edges: Vec<Edge>,
}

impl Collector<'_> {
    /// The module a path names, if it names something of this crate.
    fn resolve(&self, segments: &[String]) -> Option<ModPath> {
        let first = segments.first()?;
        let mut abs: ModPath = match first.as_str() {
            "crate" => segments[1..].to_vec(),
            "self" => self.current.iter().chain(&segments[1..]).cloned().collect(),
            "super" => {
                let mut base = self.current.clone();
                let mut rest = segments;
                while rest.first().is_some_and(|s| s == "super") {
                    base.pop();
                    rest = &rest[1..];
                }
                base.into_iter().chain(rest.iter().cloned()).collect()
            }
            _ => {
                // A path relative to this module: only a child module's name makes it one of ours.
                let mut child = self.current.clone();
                child.push(first.clone());
                if !self.known.contains(&child) {
                    return None;
                }
                self.current.iter().chain(segments).cloned().collect()
            }
        };
        // The longest prefix naming a file module (inline modules belong to their file).
        while !abs.is_empty() && !self.known.contains(&abs) {
            abs.pop();
        }
        Some(abs)
    }

    fn record(&mut self, segments: Vec<String>, line: usize) {
        if let Some(to) = self.resolve(&segments) {
            self.edges.push(Edge {
                from: self.file_module.clone(),
                to,
                file: self.file.clone(),
                line,
                text: segments.join("::"),
            });
        }
    }

    /// `crate :: a :: b` (and `super ::`, `self ::`) sequences in a macro's tokens, which syn does not parse.
    fn scan_tokens(&mut self, tokens: TokenStream) {
        let tokens: Vec<TokenTree> = tokens.into_iter().collect();
        let mut i = 0;
        while i < tokens.len() {
            match &tokens[i] {
                TokenTree::Group(g) => {
                    self.scan_tokens(g.stream());
                    i += 1;
                }
                TokenTree::Ident(id) if ["crate", "super", "self"].contains(&&*id.to_string()) => {
                    let line = id.span().start().line;
                    let mut segments = vec![id.to_string()];
                    let mut j = i + 1;
                    while let (
                        Some(TokenTree::Punct(a)),
                        Some(TokenTree::Punct(b)),
                        Some(TokenTree::Ident(next)),
                    ) = (tokens.get(j), tokens.get(j + 1), tokens.get(j + 2))
                    {
                        if a.as_char() != ':' || b.as_char() != ':' {
                            break;
                        }
                        segments.push(next.to_string());
                        j += 3;
                    }
                    if segments.len() > 1 {
                        self.record(segments, line);
                    }
                    i = j;
                }
                _ => i += 1,
            }
        }
    }

    /// Every path a `use` tree imports.
    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree, line: usize) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(prefix, &p.tree, line);
                prefix.pop();
            }
            syn::UseTree::Name(n) => {
                let mut s = prefix.clone();
                if n.ident != "self" {
                    s.push(n.ident.to_string());
                }
                self.record(s, line);
            }
            syn::UseTree::Rename(r) => {
                let mut s = prefix.clone();
                if r.ident != "self" {
                    s.push(r.ident.to_string());
                }
                self.record(s, line);
            }
            syn::UseTree::Glob(_) => self.record(prefix.clone(), line),
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    self.use_tree(prefix, t, line);
                }
            }
        }
    }
}

impl<'ast> Visit<'ast> for Collector<'_> {
    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        if m.content.is_some() {
            self.current.push(m.ident.to_string());
            syn::visit::visit_item_mod(self, m);
            self.current.pop();
        }
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        let line = u.use_token.span.start().line;
        self.use_tree(&mut Vec::new(), &u.tree, line);
    }

    fn visit_path(&mut self, p: &'ast syn::Path) {
        let segments: Vec<String> = p.segments.iter().map(|s| s.ident.to_string()).collect();
        if segments.len() > 1 {
            let line = p.segments[0].ident.span().start().line;
            self.record(segments, line);
        }
        syn::visit::visit_path(self, p);
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        self.scan_tokens(m.tokens.clone());
        syn::visit::visit_macro(self, m);
    }

    // `pub(in crate::x)` and `pub(crate)` are visibility, not dependencies.
    fn visit_visibility(&mut self, _: &'ast syn::Visibility) {}
}

fn collect() -> (BTreeMap<ModPath, PathBuf>, Vec<Edge>) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let files = modules(&src);
    let known: BTreeSet<ModPath> = files.keys().cloned().collect();
    let mut edges = Vec::new();
    for (module, path) in &files {
        let text = std::fs::read_to_string(path).unwrap();
        let file = syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let mut c = Collector {
            file_module: module.clone(),
            current: module.clone(),
            known: &known,
            file: path
                .strip_prefix(src.parent().unwrap())
                .unwrap_or(path)
                .to_path_buf(),
            edges: Vec::new(),
        };
        c.visit_file(&file);
        edges.extend(c.edges.into_iter().filter(|e| e.to != e.from));
    }
    (files, edges)
}

fn layer(m: &[String]) -> Option<usize> {
    LAYERS
        .iter()
        .position(|l| Some(*l) == m.first().map(String::as_str))
}

#[test]
fn every_module_is_in_a_layer() {
    let (files, _) = collect();
    let strays: Vec<String> = files
        .iter()
        .filter(|(m, _)| !m.is_empty() && layer(m).is_none())
        .map(|(m, f)| format!("{} ({})", show(m), f.display()))
        .collect();
    assert!(
        strays.is_empty(),
        "modules outside the layers {LAYERS:?}; move each into the layer it belongs to:\n  {}",
        strays.join("\n  ")
    );
}

#[test]
fn every_import_goes_down_the_layers() {
    let (_, edges) = collect();
    let mut wrong = Vec::new();
    for e in &edges {
        if e.from.is_empty() {
            // The root declares the layers and re-exports the public API.
            continue;
        }
        let (Some(from), to) = (layer(&e.from), layer(&e.to)) else {
            continue;
        };
        let why = match to {
            None if e.to.is_empty() => {
                "names an item through the crate root; name the module that defines it"
            }
            None => "names a module outside the layers",
            Some(to) if to < from => "goes up the layers",
            _ => continue,
        };
        wrong.push(format!(
            "{}:{}: {} -> {} (`{}`): {why}",
            e.file.display(),
            e.line,
            show(&e.from),
            show(&e.to),
            e.text
        ));
    }
    assert!(
        wrong.is_empty(),
        "imports against the rule {}:\n  {}",
        LAYERS.join(" -> "),
        wrong.join("\n  ")
    );
}

#[test]
fn the_module_graph_has_no_cycle() {
    let (files, edges) = collect();
    let mut next: BTreeMap<&ModPath, BTreeMap<&ModPath, &Edge>> = BTreeMap::new();
    for e in &edges {
        next.entry(&e.from).or_default().entry(&e.to).or_insert(e);
    }
    // Depth-first search; a back edge closes a cycle, reported with the line of each of its edges.
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        Open,
        Done,
    }
    let mut mark: BTreeMap<&ModPath, Mark> = files.keys().map(|m| (m, Mark::New)).collect();
    let mut cycles = Vec::new();
    fn visit<'a>(
        m: &'a ModPath,
        next: &BTreeMap<&'a ModPath, BTreeMap<&'a ModPath, &'a Edge>>,
        mark: &mut BTreeMap<&'a ModPath, Mark>,
        stack: &mut Vec<&'a Edge>,
        cycles: &mut Vec<String>,
    ) {
        mark.insert(m, Mark::Open);
        for (to, e) in next.get(m).into_iter().flatten() {
            match mark.get(to).copied().unwrap_or(Mark::Done) {
                Mark::New => {
                    stack.push(e);
                    visit(to, next, mark, stack, cycles);
                    stack.pop();
                }
                Mark::Open => {
                    let start = stack
                        .iter()
                        .position(|s| s.from == **to)
                        .unwrap_or(stack.len());
                    let lines: Vec<String> = stack[start..]
                        .iter()
                        .chain([e])
                        .map(|s| {
                            format!(
                                "{} -> {} at {}:{} (`{}`)",
                                show(&s.from),
                                show(&s.to),
                                s.file.display(),
                                s.line,
                                s.text
                            )
                        })
                        .collect();
                    cycles.push(lines.join("\n    "));
                }
                Mark::Done => {}
            }
        }
        mark.insert(m, Mark::Done);
    }
    for m in files.keys() {
        if mark[m] == Mark::New {
            visit(m, &next, &mut mark, &mut Vec::new(), &mut cycles);
        }
    }
    assert!(
        cycles.is_empty(),
        "import cycles between modules:\n  {}",
        cycles.join("\n  ")
    );
}

#[test]
fn the_checker_sees_paths_in_use_items_code_and_macros() {
    // A file of its own, so the check of the checker does not depend on the crate's current layout.
    let known: BTreeSet<ModPath> = [
        vec![],
        vec!["a".to_string()],
        vec!["a".into(), "b".into()],
        vec!["c".into()],
    ]
    .into_iter()
    .collect();
    let file: syn::File = syn::parse_str(
        "use crate::c::X;\n\
         use super::{b::Y, Z};\n\
         mod b;\n\
         fn f() { b::g(); crate::c::h(); std::mem::drop(1); }\n\
         fn m() { println!(\"{}\", crate::c::K); }\n\
         mod tests { use super::*; }",
    )
    .unwrap();
    let mut c = Collector {
        file_module: vec!["a".into()],
        current: vec!["a".into()],
        known: &known,
        file: "a.rs".into(),
        edges: Vec::new(),
    };
    c.visit_file(&file);
    let got: Vec<(String, usize)> = c.edges.iter().map(|e| (show(&e.to), e.line)).collect();
    assert_eq!(
        got,
        [
            ("c".to_string(), 1),
            // `super` of `a` is the root, which has no `b`: both names go through the root.
            ("crate".into(), 2),
            ("crate".into(), 2),
            ("a::b".into(), 4),
            ("c".into(), 4),
            ("c".into(), 5),
            ("a".into(), 6),
        ]
    );
}
