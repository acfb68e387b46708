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
