//! One lowering: what the macro compiles as a region's host fallback and what the outliner writes into the device crate
//! are the same tokens (`offload_frontend::lower`), for every region of the test suite, and the device crate keeps every
//! token of the user's body on its original line (errors and panic locations name the user's lines).

use offload_frontend::frontend;
use offload_frontend::lower::lower;
use quote::{quote, ToTokens};
use std::collections::BTreeSet;
use std::path::Path;
use syn::{Item, ItemFn};

/// Every `fn` item of a file, modules included, and every method of an `impl`, with its `Self` type.
fn fns(items: &[Item], out: &mut Vec<(ItemFn, Option<syn::ItemImpl>)>) {
    for item in items {
        match item {
            Item::Fn(f) => out.push((f.clone(), None)),
            Item::Impl(i) => {
                for it in &i.items {
                    if let syn::ImplItem::Fn(m) = it {
                        let f = ItemFn {
                            attrs: m.attrs.clone(),
                            vis: m.vis.clone(),
                            sig: m.sig.clone(),
                            block: Box::new(m.block.clone()),
                        };
                        out.push((f, Some(i.clone())));
                    }
                }
            }
            Item::Mod(m) => {
                if let Some((_, inner)) = &m.content {
                    fns(inner, out);
                }
            }
            _ => {}
        }
    }
}

/// The function named `name` whose name is on `line`, and its `Self` type if it is a method.
fn find(src: &str, name: &str, line: usize) -> (ItemFn, Option<syn::ItemImpl>) {
    let file = syn::parse_file(src).expect("parses");
    let mut all = Vec::new();
    fns(&file.items, &mut all);
    all.into_iter()
        .find(|(f, _)| f.sig.ident == name && f.sig.ident.span().start().line == line)
        .unwrap_or_else(|| panic!("no fn {name} on line {line}"))
}

/// `(line, identifier)` of every identifier in `tokens`.
fn placed_idents(tokens: proc_macro2::TokenStream, out: &mut BTreeSet<(usize, String)>) {
    for tt in tokens {
        match tt {
            proc_macro2::TokenTree::Ident(i) => {
                out.insert((i.span().start().line, i.to_string()));
            }
            proc_macro2::TokenTree::Group(g) => placed_idents(g.stream(), out),
            _ => {}
        }
    }
}

#[test]
fn the_host_fallback_and_the_device_crate_lower_every_region_alike() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests");
    let root = root.canonicalize().unwrap();
    let gen = Path::new(env!("CARGO_TARGET_TMPDIR")).join("one_lowering");
    let _ = std::fs::remove_dir_all(&gen);
    let out = offload_build::outline_dir(&root, &gen).expect("the test suite outlines");
    let mut forms = BTreeSet::new();
    let mut regions = 0;
    for krate in &out.crates {
        for site in &krate.regions {
            // `triad<f32>`: an instance of a generic region, written once.
            let name = site.identity.rsplit("::").next().unwrap();
            let name = name.split('<').next().unwrap();
            let src = std::fs::read_to_string(&site.file).unwrap();
            let (func, imp) = find(&src, name, site.line);
            let attr = func
                .attrs
                .iter()
                .find(|a| {
                    a.path()
                        .segments
                        .last()
                        .is_some_and(|s| s.ident == "target")
                })
                .unwrap();
            let args = match &attr.meta {
                syn::Meta::List(l) => l.tokens.clone(),
                _ => Default::default(),
            };
            let region = frontend::parse_region_in(args, &func, imp.as_ref().map(Into::into))
                .expect("the suite's regions are valid");
            let r = &site.region;
            forms.insert(
                match (
                    r.construct.is_spmd(),
                    r.construct.is_work_shared(),
                    r.collapse > 1,
                    !r.reductions.is_empty(),
                ) {
                    (true, ..) => "spmd",
                    (_, true, true, _) => "collapse",
                    (_, true, _, true) => "reduction",
                    (_, true, ..) => "work-shared",
                    _ => "serial",
                },
            );

            // The macro's side: the lowered parameters and body, as `__offload_host` is compiled.
            let lowered = lower(&region, &func);
            let (inputs, block) = (&lowered.inputs, &lowered.block);
            let host = quote!((#(#inputs),*) #block).to_string();

            // The outliner's side: the function as written into the device crate, read back.
            let rel = Path::new("src").join(site.file.strip_prefix(&root).unwrap());
            let (_, text) = krate
                .files
                .iter()
                .find(|(p, _)| *p == rel)
                .unwrap_or_else(|| panic!("{rel:?} is mirrored"));
            let (device, _) = find(text, name, site.line);
            let (inputs, block) = (device.sig.inputs.iter(), &device.block);
            let device_tokens = quote!((#(#inputs),*) #block).to_string();
            assert_eq!(
                host, device_tokens,
                "{}: the two sides' lowering differs",
                site.identity
            );

            // Every identifier of the user's body that the lowering keeps is on its line in the device crate.
            let (mut written, mut kept, mut mirrored) =
                (BTreeSet::new(), BTreeSet::new(), BTreeSet::new());
            placed_idents(func.block.to_token_stream(), &mut written);
            placed_idents(lowered.block.to_token_stream(), &mut kept);
            placed_idents(device.block.to_token_stream(), &mut mirrored);
            // A collapsed nest's headers become one line (their patterns and ranges are one call's arguments).
            let headers = if region.construct.is_work_shared() {
                let mut errors = offload_frontend::errors::Errors::default();
                let ws = offload_frontend::worksharing::find(&region, &func.block, &mut errors)
                    .expect("the suite's loops are valid");
                errors.finish(()).expect("the suite's loops are valid");
                let body = ws.inner.last().map_or(&ws.for_loop.body, |l| &l.0.body);
                ws.for_loop.for_token.span.start().line
                    ..body.brace_token.span.open().start().line + 1
            } else {
                0..0
            };
            // `private(x)` declared without a value moves into the loop's body.
            let private_lets: Vec<usize> = func
                .block
                .stmts
                .iter()
                .filter_map(|s| match s {
                    syn::Stmt::Local(l) if l.init.is_none() => Some(l.let_token.span.start().line),
                    _ => None,
                })
                .collect();
            let moved: Vec<_> = kept
                .intersection(&written)
                .filter(|k| {
                    !mirrored.contains(k) && !headers.contains(&k.0) && !private_lets.contains(&k.0)
                })
                .collect();
            assert!(
                moved.is_empty(),
                "{}: moved off their lines: {moved:?}",
                site.identity
            );
            regions += 1;
        }
    }
    assert!(regions >= 40, "only {regions} regions found");
    assert_eq!(
        forms.into_iter().collect::<Vec<_>>(),
        ["collapse", "reduction", "serial", "spmd", "work-shared"],
        "every form of region is compared"
    );
}
