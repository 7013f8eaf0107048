//! The repository stands on its own: no file in it points at a document outside it (the team's working notes are not
//! shipped; what users and contributors need of them is in README.md, the guide in docs/, ARCHITECTURE.md and CONTRIBUTING.md, in their own words), and
//! the map of the code names only paths that exist.

use std::path::Path;

/// Names of documents that live outside the repository, spelt in pieces so this file does not name them itself.
fn outside() -> Vec<String> {
    ["DESIGN", "TOOLCHAIN", "CONFORMANCE"]
        .iter()
        .map(|d| format!("{d}.md"))
        .chain([format!("..{}shared", '/')])
        .collect()
}

fn walk(dir: &Path, found: &mut Vec<String>, names: &[String]) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let path = e.path();
        let name = e.file_name().to_string_lossy().into_owned();
        if path.is_dir() {
            // Build outputs and git's own files are not the repository's text.
            if !["target", ".git", "wip"].contains(&name.as_str()) && !name.starts_with(".gpu") {
                walk(&path, found, names);
            }
        } else if let Ok(text) = std::fs::read_to_string(&path) {
            for n in names {
                if text.contains(n.as_str()) {
                    found.push(format!("{} names {n}", path.display()));
                }
            }
        }
    }
}

#[test]
fn nothing_points_outside_the_repository() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut found = Vec::new();
    walk(&root, &mut found, &outside());
    assert!(found.is_empty(), "{found:#?}");
}

/// Every path ARCHITECTURE.md names from a top-level folder (`model/src/lower.rs`, `runtime/src/region/`) exists.
#[test]
fn every_path_the_architecture_names_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let text = std::fs::read_to_string(root.join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    let tops = [
        "model/",
        "macros/",
        "runtime/",
        "device-std/",
        "build-support/",
        "cargo-offload/",
        "examples/",
        "tests/",
    ];
    let mut missing = Vec::new();
    let mut checked = 0;
    for (k, quoted) in text.split('`').enumerate() {
        // Odd pieces are inside backticks; `clause.rs::Errors` names an item in a file.
        let path = quoted.split("::").next().unwrap_or(quoted);
        if k % 2 == 1 && tops.iter().any(|t| path.starts_with(t)) {
            checked += 1;
            if !root.join(path).exists() {
                missing.push(path.to_string());
            }
        }
    }
    assert!(
        checked > 20,
        "only {checked} paths found: is the page's format still backticked paths?"
    );
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md names paths that do not exist: {missing:?}"
    );
}
