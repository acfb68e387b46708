//! The layout's boundaries, checked on the sources: adapters never reach into the domain.

use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn no_adapter_or_port_imports_the_domain_or_the_api() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src/cloud");
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    assert!(files.len() > 20, "the scan found too few files: {files:?}");
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        for forbidden in ["crate::service", "crate::api", "crate::mcp", "crate::ops"] {
            assert!(
                !text.contains(forbidden),
                "{} uses {forbidden}: ports and adapters must not know the domain",
                f.display()
            );
        }
    }
}

/// A file past ~600 lines usually holds two jobs; the project keeps none that long.
#[test]
fn no_source_or_ui_file_is_over_600_lines() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    for entry in std::fs::read_dir(root.join("web")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "js") {
            files.push(path);
        }
    }
    for f in files {
        let lines = std::fs::read_to_string(&f).unwrap().lines().count();
        assert!(lines <= 600, "{} has {lines} lines", f.display());
    }
}

/// Source text without its `#[cfg(test)]` part (test modules may glob their parent).
fn production_text(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    match text.find("#[cfg(test)]") {
        Some(at) => text[..at].to_string(),
        None => text,
    }
}

#[test]
fn no_two_sibling_files_import_each_other_and_no_file_globs_its_parent() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    // file → the sibling modules it imports (by `super::x` or `crate::<dir>::x`).
    let mut edges = std::collections::BTreeMap::new();
    for f in &files {
        let text = production_text(f);
        let rel = f.strip_prefix(&root).unwrap().to_string_lossy().to_string();
        if f.file_stem().is_some_and(|s| s == "tests") {
            continue; // a unit-test module of its parent
        }
        assert!(
            !text.lines().any(|l| l.trim() == "use super::*;"),
            "{rel} imports all of its parent (`use super::*`): name what it uses"
        );
        let dir = f.parent().unwrap();
        let stem = f.file_stem().unwrap().to_string_lossy().to_string();
        if stem == "mod" || stem == "lib" || stem == "main" {
            continue;
        }
        let module_path = dir
            .strip_prefix(&root)
            .unwrap()
            .to_string_lossy()
            .replace('/', "::");
        let mut targets = std::collections::BTreeSet::new();
        for l in text.lines().filter(|l| l.trim_start().starts_with("use ")) {
            for prefix in ["super::".to_string(), format!("crate::{module_path}::")] {
                let Some(rest) = l.split(prefix.as_str()).nth(1) else {
                    continue;
                };
                // `x::…`, or each name of `{x, y::…}` on the line.
                let names: Vec<String> = match rest.strip_prefix('{') {
                    Some(list) => list.split(',').map(|n| n.trim().to_string()).collect(),
                    None => vec![rest.to_string()],
                };
                for n in names {
                    let name: String = n
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                        .collect();
                    let sibling = !name.is_empty()
                        && (dir.join(format!("{name}.rs")).exists()
                            || dir.join(&name).join("mod.rs").exists());
                    if sibling && name != stem {
                        targets.insert(name);
                    }
                }
            }
        }
        edges.insert((dir.to_path_buf(), stem), targets);
    }
    for ((dir, a), targets) in &edges {
        for b in targets {
            if let Some(back) = edges.get(&(dir.clone(), b.clone())) {
                assert!(
                    !back.contains(a),
                    "{}/{a}.rs and {b}.rs import each other",
                    dir.strip_prefix(&root).unwrap().display()
                );
            }
        }
    }
}

#[test]
fn the_image_runs_as_a_numeric_non_root_user() {
    // A runtime enforcing non-root (Kubernetes `runAsNonRoot`) can only check a number.
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let dockerfile = std::fs::read_to_string(root.join("Dockerfile")).unwrap();
    let user = dockerfile
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("USER "))
        .expect("the image names its user");
    let ids: Vec<u32> = user
        .trim()
        .split(':')
        .map(|id| {
            id.parse()
                .unwrap_or_else(|_| panic!("`{user}` is not numeric"))
        })
        .collect();
    assert!(ids.iter().all(|&id| id != 0), "`{user}` is root");
}
