//! The layout's boundaries, checked on the sources: adapters never reach into the domain.

use std::path::{Path, PathBuf};

pub(crate) fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Every directory of Rust sources: the server's `src/` and each crate's under `crates/`.
pub(crate) fn source_dirs() -> Vec<PathBuf> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut dirs = vec![root.join("src")];
    let mut crates: Vec<PathBuf> = std::fs::read_dir(root.join("crates"))
        .unwrap()
        .map(|e| e.unwrap().path().join("src"))
        .filter(|p| p.is_dir())
        .collect();
    crates.sort();
    dirs.extend(crates);
    dirs
}

/// The workspace crates a crate's manifest depends on (`instantstart-*`).
fn workspace_deps(manifest: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(manifest).unwrap();
    let mut section = "";
    let mut out = Vec::new();
    for line in text.lines() {
        if line.starts_with('[') {
            section = line;
        } else if section.ends_with("dependencies]") {
            // `name.workspace = true`, or `alias = { package = "name", … }`.
            let name = match line.split_once("package = \"") {
                Some((_, rest)) => rest.split('"').next().unwrap_or_default(),
                None => line.split(['.', ' ', '=']).next().unwrap_or_default(),
            };
            if name.starts_with("instantstart") {
                out.push(name.to_string());
            }
        }
    }
    out
}

/// Adapters cannot import the domain because Cargo forbids it: the domain and the server are the
/// root crate, which depends on the adapters, so an adapter naming it would be a cycle Cargo
/// refuses. What Cargo does not forbid is an adapter reaching into another adapter or the ports
/// into an adapter; this holds that each adapter knows the ports only, and the ports nothing.
#[test]
fn each_adapter_crate_depends_on_the_ports_only() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    assert_eq!(
        workspace_deps(&root.join("crates/ports/Cargo.toml")),
        Vec::<String>::new(),
        "the ports depend on no other crate of the workspace"
    );
    for adapter in ["aws", "kube", "sandbox"] {
        assert_eq!(
            workspace_deps(&root.join(format!("crates/{adapter}/Cargo.toml"))),
            ["instantstart-ports"],
            "the {adapter} adapter depends on the ports only"
        );
    }
    let server = workspace_deps(&root.join("Cargo.toml"));
    for adapter in ["ports", "aws", "kube", "sandbox"] {
        assert!(
            server.contains(&format!("instantstart-{adapter}")),
            "the server wires instantstart-{adapter}: {server:?}"
        );
    }
}

/// A file past ~600 lines usually holds two jobs; the project keeps none that long.
#[test]
fn no_source_or_ui_file_is_over_600_lines() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in source_dirs() {
        rust_files(&dir, &mut files);
    }
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
fn no_file_globs_its_parent() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in source_dirs() {
        rust_files(&dir, &mut files);
    }
    for f in &files {
        if f.file_stem().is_some_and(|s| s == "tests") {
            continue; // a unit-test module of its parent
        }
        let rel = f.strip_prefix(root).unwrap().display();
        assert!(
            !production_text(f)
                .lines()
                .any(|l| l.trim() == "use super::*;"),
            "{rel} imports all of its parent (`use super::*`): name what it uses"
        );
    }
}

/// The image's build file.
fn dockerfile() -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Dockerfile")).unwrap()
}

#[test]
fn the_image_runs_as_a_numeric_non_root_user() {
    // A runtime enforcing non-root (Kubernetes `runAsNonRoot`) can only check a number.
    let dockerfile = dockerfile();
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

#[test]
fn the_image_builds_from_everything_the_build_reads() {
    // `cargo build` in the image sees only what is copied into it: a build script left out
    // builds another binary (no packed relocations, no folding), an embedded directory left
    // out builds none.
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let dockerfile = dockerfile();
    let copied: Vec<&str> = dockerfile
        .lines()
        .filter_map(|l| l.strip_prefix("COPY "))
        .filter(|l| !l.starts_with("--from"))
        .flat_map(|l| {
            let words: Vec<&str> = l.split_whitespace().collect();
            words[..words.len().saturating_sub(1)].to_vec()
        })
        .collect();
    for read in [
        "Cargo.toml",
        "Cargo.lock",
        "build.rs",
        "src",
        "crates",
        "migrations",
        "web",
        "skills",
    ] {
        assert!(root.join(read).exists(), "{read} is not in the repository");
        assert!(
            copied.contains(&read),
            "the Dockerfile does not copy {read}"
        );
    }
}

/// Every file under `tests/`, `scripts/` and `.ci/` (the fixtures excepted: they are data).
fn harness_files() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.ends_with("tests/fixtures") || path.ends_with("__pycache__") {
                continue;
            }
            if path.is_dir() {
                walk(&path, out);
            } else {
                out.push(path);
            }
        }
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in ["tests", "scripts", ".ci"] {
        walk(&root.join(dir), &mut files);
    }
    files
}

/// The relative paths in `text` that climb out of the repository when read from `base`: a run
/// of path characters holding a parent step (`..` and a slash), resolved lexically. Absolute paths are data (such as a
/// traversal the validators must refuse), not places the harness reads.
fn paths_outside(text: &str, base: &Path, root: &Path) -> Vec<String> {
    let up = format!("..{}", '/');
    let is_path = |c: char| c.is_ascii_alphanumeric() || "._-/".contains(c);
    let (mut found, mut seen_to) = (Vec::new(), 0);
    for (at, _) in text.match_indices(&up) {
        if at < seen_to {
            continue; // another step of a path already read
        }
        let start = text[..at]
            .char_indices()
            .rev()
            .find(|(_, c)| !is_path(*c))
            .map_or(0, |(i, c)| i + c.len_utf8());
        let end = text[at..]
            .find(|c| !is_path(c))
            .map_or(text.len(), |e| at + e);
        seen_to = end;
        let token = &text[start..end];
        if token.starts_with('/') {
            continue;
        }
        let mut depth = base.strip_prefix(root).unwrap().components().count() as i64;
        for part in token.split('/') {
            match part {
                ".." => depth -= 1,
                "" | "." => {}
                _ => depth += 1,
            }
            if depth < 0 {
                found.push(token.to_string());
                break;
            }
        }
    }
    found
}

/// A plain clone has nothing beside it: no test, script or CI file may read outside the
/// repository (relative to its own folder or to the repository's root, as `CARGO_MANIFEST_DIR`
/// joins are).
#[test]
fn no_test_script_or_ci_file_reaches_outside_the_repository() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let files = harness_files();
    assert!(files.len() > 30, "the scan found too few files: {files:?}");
    let mut outside = Vec::new();
    for f in &files {
        let Ok(text) = std::fs::read_to_string(f) else {
            continue; // not text
        };
        for base in [f.parent().unwrap(), root] {
            for p in paths_outside(&text, base, root) {
                outside.push(format!("{}: {p}", f.strip_prefix(root).unwrap().display()));
            }
        }
    }
    assert_eq!(outside, Vec::<String>::new());
    // The check itself: what used to be read from beside the clone is caught.
    let tests = root.join("tests/api");
    let climb = format!("..{}shared/crds", '/');
    assert_eq!(paths_outside(&climb, root, root), vec![climb]);
    let from_peers = format!("here, \"..{0}..{0}..{0}shared/crds\"", '/');
    assert_eq!(paths_outside(&from_peers, &tests, root).len(), 1);
    assert_eq!(
        paths_outside("\"/s3/../etc\"", root, root),
        Vec::<String>::new()
    );
    assert_eq!(
        paths_outside("join(\"tests/../scripts\")", root, root),
        Vec::<String>::new()
    );
}
