//! The repository stands on its own: no file in it points at a document outside it (the team's working notes are not
//! shipped; what users and contributors need of them is in README.md and ARCHITECTURE.md, in their own words).

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
