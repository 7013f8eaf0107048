//! Device code may only call crate functions that are themselves device code. rustc would say "cannot find function"
//! in the device crate; this says which function and what to do, before the device build starts.

use super::has_attr;
use super::tree::ModuleTree;
use crate::diag::Diagnostic;
use crate::package::Package;
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use syn::visit::Visit;
use syn::{Item, ItemFn};

#[derive(Default)]
struct Functions<'a> {
    /// Plain crate functions: name -> (file, line).
    host_only: HashMap<String, (PathBuf, usize)>,
    device: HashSet<String>,
    /// Device functions to check: (file index, the function, is it a region).
    bodies: Vec<(usize, &'a ItemFn, bool)>,
}

fn collect<'a>(items: &'a [Item], file: usize, tree: &ModuleTree, f: &mut Functions<'a>) {
    for item in items {
        match item {
            Item::Fn(func) => {
                let name = func.sig.ident.to_string();
                let region = has_attr(&func.attrs, "target");
                if region || has_attr(&func.attrs, "declare_target") {
                    f.device.insert(name);
                    f.bodies.push((file, func, region));
                } else {
                    f.host_only.insert(
                        name,
                        (
                            tree.files[file].path.clone(),
                            func.sig.ident.span().start().line,
                        ),
                    );
                }
            }
            Item::Mod(m) => {
                if let Some((_, inner)) = &m.content {
                    collect(inner, file, tree, f);
                }
            }
            _ => {}
        }
    }
}

pub fn calls(pkg: &Package, tree: &ModuleTree) -> Vec<Diagnostic> {
    let mut fns = Functions::default();
    for (i, file) in tree.files.iter().enumerate() {
        collect(&file.ast.items, i, tree, &mut fns);
    }
    // Names a file imports from elsewhere (`use core::cmp::max;`): calling them is not calling a crate function.
    let imported: Vec<HashSet<String>> = tree
        .files
        .iter()
        .map(|f| imported_names(&f.ast.items))
        .collect();
    let mut diags = Vec::new();
    for &(file, func, region) in &fns.bodies {
        let mut v = Calls {
            locals: HashSet::new(),
            calls: Vec::new(),
        };
        v.visit_item_fn(func);
        for path in v.calls {
            let segs: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
            let crate_local =
                segs.len() == 1 || ["crate", "self", "super"].contains(&segs[0].as_str());
            let name = segs.last().cloned().unwrap_or_default();
            if !crate_local
                || (segs.len() == 1 && (v.locals.contains(&name) || imported[file].contains(&name)))
                || fns.device.contains(&name)
            {
                continue;
            }
            let Some((def_file, def_line)) = fns.host_only.get(&name) else {
                continue;
            };
            let span = path
                .segments
                .last()
                .map(|s| s.ident.span())
                .unwrap_or_else(proc_macro2::Span::call_site);
            let s = span.start();
            let what = if region {
                format!("region `{}`", func.sig.ident)
            } else {
                format!("`#[declare_target]` function `{}`", func.sig.ident)
            };
            let f = &tree.files[file];
            diags.push(Diagnostic {
                message: format!("{what} calls `{name}`, which is not `#[declare_target]`, so device code cannot call it"),
                file: pkg.display_path(&f.path),
                abs_file: f.path.clone(),
                line: s.line,
                column: s.column + 1,
                len: name.len(),
                help: Some(format!(
                    "mark `fn {name}` ({}:{def_line}) with `#[offload::declare_target]`, or do this work outside the region",
                    pkg.display_path(def_file).display()
                )),
            });
        }
    }
    diags
}

struct Calls {
    /// Names bound in the function (parameters, `let`s, closure parameters): calling one is not a crate call.
    locals: HashSet<String>,
    calls: Vec<syn::Path>,
}

impl<'ast> Visit<'ast> for Calls {
    fn visit_pat_ident(&mut self, p: &'ast syn::PatIdent) {
        self.locals.insert(p.ident.to_string());
        syn::visit::visit_pat_ident(self, p);
    }

    fn visit_expr_call(&mut self, c: &'ast syn::ExprCall) {
        if let syn::Expr::Path(p) = &*c.func {
            if p.qself.is_none() {
                self.calls.push(p.path.clone());
            }
        }
        syn::visit::visit_expr_call(self, c);
    }

    // Items nested in the body are their own scope.
    fn visit_item(&mut self, _: &'ast Item) {}
}

/// Names brought in by a file's top-level `use` items rooted outside the crate.
fn imported_names(items: &[Item]) -> HashSet<String> {
    fn walk(t: &syn::UseTree, out: &mut HashSet<String>) {
        match t {
            syn::UseTree::Path(p) => walk(&p.tree, out),
            syn::UseTree::Name(n) => {
                out.insert(n.ident.to_string());
            }
            syn::UseTree::Rename(r) => {
                out.insert(r.rename.to_string());
            }
            syn::UseTree::Group(g) => g.items.iter().for_each(|t| walk(t, out)),
            syn::UseTree::Glob(_) => {}
        }
    }
    let mut out = HashSet::new();
    for item in items {
        if let Item::Use(u) = item {
            let root = match &u.tree {
                syn::UseTree::Path(p) => p.ident.to_string(),
                _ => String::new(),
            };
            if !["crate", "self", "super"].contains(&root.as_str()) {
                walk(&u.tree, &mut out);
            }
        }
    }
    out
}
