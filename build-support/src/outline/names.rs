//! What kept code names: the `use` items a device crate keeps (those rooted where a device can follow them, and
//! whose names kept code mentions), the identifiers items mention, and device items nested where no kernel can go.

use super::*;

/// Roots of the `use` paths a device crate keeps (`std` is `core` there: `extern crate core as std`).
pub(super) const USE_ROOTS: &[&str] = &["crate", "self", "super", "offload", "core", "std"];

/// Whether macro tokens write a `#[target]` (or `#[offload::target]`) attribute.
pub(super) fn writes_region(ts: &proc_macro2::TokenStream) -> bool {
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

/// The part of a `use` tree a device crate can resolve: paths rooted at `crate`/`self`/`super` keep the leaves that
/// name kept items or modules, and paths rooted at an offload-aware library those its device crate keeps (a trait
/// brought into scope for its methods is named by no code); paths rooted at `offload`/`core`/`std` or a `no_std`
/// dependency keep the leaves kept code mentions (`std` paths only into what `core` has too).
pub(super) fn filter_use<'o>(
    tree: &UseTree,
    root: Option<&'o str>,
    o: &'o Outliner,
) -> Option<UseTree> {
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
pub(super) fn first_segment(t: &UseTree) -> String {
    match t {
        UseTree::Path(p) => p.ident.to_string(),
        UseTree::Name(n) => n.ident.to_string(),
        UseTree::Rename(r) => r.ident.to_string(),
        _ => String::new(),
    }
}

/// Items in function bodies marked `#[target]` or `#[declare_target]`: the outliner mirrors modules' items only, and a
/// device global there would share its symbol with a module's static of the same name.
pub(super) fn nested_device_items(file: &syn::File) -> Vec<(proc_macro2::Span, String)> {
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
pub(super) fn collect_kept(items: &[Item], out: &mut BTreeSet<String>) {
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
pub(super) fn collect_mentions(
    items: &[Item],
    file: usize,
    reach: &reach::Reach,
    out: &mut BTreeSet<String>,
) {
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
pub(super) fn mention_tokens(item: &Item) -> proc_macro2::TokenStream {
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

pub(super) fn idents(ts: proc_macro2::TokenStream, out: &mut BTreeSet<String>) {
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
