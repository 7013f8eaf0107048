//! A target's module tree, read from its root file by following `mod` declarations and `#[path]`, as rustc does.

use crate::diag::Diagnostic;
use crate::package::{Package, Target};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use syn::Item;

pub struct ModuleFile {
    /// Absolute path.
    pub path: PathBuf,
    pub src: String,
    pub ast: syn::File,
    /// `crate_name::a::b`, as `module_path!()` prints it.
    pub module_path: Vec<String>,
    /// `mod x;` declarations of this file (by the `mod` keyword's line and column) and the file each loads.
    children: HashMap<(usize, usize), usize>,
}

pub struct ModuleTree {
    pub files: Vec<ModuleFile>,
    package_dir: PathBuf,
    crate_dir: PathBuf,
}

impl ModuleTree {
    /// Loads the tree of `target`; its device crate will live in `crate_dir`.
    pub fn load(
        pkg: &Package,
        target: &Target,
        crate_dir: &Path,
    ) -> Result<ModuleTree, Vec<Diagnostic>> {
        let mut t = ModuleTree {
            files: Vec::new(),
            package_dir: pkg.manifest_dir.clone(),
            crate_dir: crate_dir.into(),
        };
        let mut diags = Vec::new();
        let root = target
            .src_path
            .canonicalize()
            .unwrap_or_else(|_| target.src_path.clone());
        let dir = root.parent().unwrap_or(Path::new("/")).to_path_buf();
        t.load_file(pkg, &root, vec![target.crate_name()], dir, &mut diags);
        if diags.is_empty() {
            Ok(t)
        } else {
            Err(diags)
        }
    }

    fn load_file(
        &mut self,
        pkg: &Package,
        path: &Path,
        module_path: Vec<String>,
        child_dir: PathBuf,
        diags: &mut Vec<Diagnostic>,
    ) -> Option<usize> {
        // A module including its own ancestor would recurse forever; rustc rejects it too.
        if self.files.len() > 10_000 || module_path.len() > 64 {
            return None;
        }
        let src = std::fs::read_to_string(path).ok()?;
        // syn skips a byte-order mark; the mirror's columns must count from the same place.
        let src = src
            .strip_prefix('\u{feff}')
            .map(String::from)
            .unwrap_or(src);
        let ast = match syn::parse_file(&src) {
            Ok(a) => a,
            Err(e) => {
                let s = e.span().start();
                diags.push(Diagnostic {
                    message: format!("offload-build cannot parse this file: {e}"),
                    file: pkg.display_path(path),
                    abs_file: path.into(),
                    line: s.line,
                    column: s.column + 1,
                    len: 1,
                    help: None,
                });
                return None;
            }
        };
        let index = self.files.len();
        let items = ast.items.clone();
        self.files.push(ModuleFile {
            path: path.into(),
            src,
            ast,
            module_path: module_path.clone(),
            children: HashMap::new(),
        });
        let file_dir = path.parent().unwrap_or(Path::new("/")).to_path_buf();
        self.walk(
            pkg,
            index,
            &items,
            &module_path,
            &file_dir,
            &child_dir,
            true,
            diags,
        );
        Some(index)
    }

    #[allow(clippy::too_many_arguments)]
    fn walk(
        &mut self,
        pkg: &Package,
        index: usize,
        items: &[Item],
        module_path: &[String],
        file_dir: &Path,
        dir: &Path,
        top: bool,
        diags: &mut Vec<Diagnostic>,
    ) {
        for item in items {
            let Item::Mod(m) = item else { continue };
            let name = m.ident.to_string();
            let name = name.trim_start_matches("r#");
            let mut path = module_path.to_vec();
            path.push(name.to_string());
            let path_attr =
                m.attrs
                    .iter()
                    .find(|a| a.path().is_ident("path"))
                    .and_then(|a| match &a.meta {
                        syn::Meta::NameValue(nv) => match &nv.value {
                            syn::Expr::Lit(syn::ExprLit {
                                lit: syn::Lit::Str(s),
                                ..
                            }) => Some(s.value()),
                            _ => None,
                        },
                        _ => None,
                    });
            match &m.content {
                Some((_, inner)) => {
                    let sub = match &path_attr {
                        Some(p) => dir.join(p),
                        None => dir.join(name),
                    };
                    self.walk(pkg, index, inner, &path, file_dir, &sub, false, diags);
                }
                None => {
                    // (file, directory its own `mod` declarations resolve in)
                    let found = match &path_attr {
                        Some(p) => {
                            let f = if top { file_dir.join(p) } else { dir.join(p) };
                            let d = f.parent().unwrap_or(Path::new("/")).to_path_buf();
                            Some((f, d))
                        }
                        None => {
                            let flat = dir.join(format!("{name}.rs"));
                            let nested = dir.join(name).join("mod.rs");
                            if flat.is_file() {
                                Some((flat, dir.join(name)))
                            } else if nested.is_file() {
                                Some((nested, dir.join(name)))
                            } else {
                                None
                            }
                        }
                    };
                    // A missing file is rustc's to report (it may be `cfg`'d out); the mirror drops the declaration.
                    let Some((file, child_dir)) = found else {
                        continue;
                    };
                    let file = file.canonicalize().unwrap_or(file);
                    if let Some(child) = self.load_file(pkg, &file, path, child_dir, diags) {
                        let s = m.mod_token.span.start();
                        self.files[index].children.insert((s.line, s.column), child);
                    }
                }
            }
        }
    }

    /// The file a `mod x;` item of file `index` loads.
    pub fn child_of(&self, index: usize, m: &syn::ItemMod) -> Option<usize> {
        let s = m.mod_token.span.start();
        self.files[index].children.get(&(s.line, s.column)).copied()
    }

    /// Where file `i`'s mirror lives, relative to the device crate: `src/<path in the package>`, or `abs/<path>` for a
    /// file outside the package. A file loaded twice (two `#[path]`s) gets one mirror per module.
    pub fn mirror_path(&self, i: usize) -> PathBuf {
        let p = super::rel_or_abs(&self.package_dir, &self.files[i].path);
        if self.files[..i].iter().any(|f| f.path == self.files[i].path) {
            p.with_extension(format!("{i}.rs"))
        } else {
            p
        }
    }

    pub fn mirror_abs(&self, i: usize) -> PathBuf {
        self.crate_dir.join(self.mirror_path(i))
    }
}
