//! The import graph of the sources, file by file: data walks one way, so no circle of files.
//!
//! Every path a file names (`use` trees, and `crate::`/`super::`/`self::`/module-alias paths in
//! its code) is resolved to the file that defines the item: through the module tree, then
//! through `pub use` re-exports (named or glob) to where the item really lives; a re-export is
//! a façade, not a use of its own. A child using
//! what its parent file defines is an edge like any other; a file and its own ancestor using
//! each other is the one pair allowed (the parent owns the child), but a longer way back through
//! a parent file is a circle. (The check once dropped every edge to an ancestor, which hid such
//! circles.) Tests (`#[cfg(test)]` onwards) and comments are not read.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

type Module = Vec<String>;

struct Source {
    /// Paths named by `use` items and in the code, made absolute (from the crate root).
    uses: Vec<Module>,
    /// Re-exported names (`pub use a::b::c;`) → the path they stand for.
    reexports: BTreeMap<String, Module>,
    /// Modules whose public items are re-exported whole (`pub use child::*;`).
    globs: Vec<Module>,
    /// Names of the public items the file defines.
    defines: BTreeSet<String>,
}

/// Production text without comments (`//…` to the line's end).
fn code(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    let text = match text.find("#[cfg(test)]") {
        Some(at) => &text[..at],
        None => &text[..],
    };
    text.lines()
        .map(|l| match l.find("//") {
            Some(at) => &l[..at],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// `a::{b, c::{d as e}}` → `a::b`, `a::c::d` (the alias is dropped).
fn expand(tree: &str) -> Vec<String> {
    let tree = tree.trim();
    let Some(open) = tree.find('{') else {
        let path = tree.split(" as ").next().unwrap_or("").trim();
        return vec![path.to_string()];
    };
    let prefix = &tree[..open];
    let close = tree.rfind('}').filter(|c| *c > open).unwrap_or(tree.len());
    let inner = &tree[open + 1..close];
    let (mut parts, mut depth, mut current) = (Vec::new(), 0, String::new());
    for c in inner.chars() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(std::mem::take(&mut current));
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    parts.push(current);
    parts
        .iter()
        .filter(|p| !p.trim().is_empty())
        .flat_map(|p| expand(p))
        .map(|p| format!("{prefix}{p}"))
        .collect()
}

/// `use` items of `text`: (public, tree), and the text with them removed.
fn use_items(text: &str) -> (Vec<(bool, String)>, String) {
    let (mut items, mut rest, mut at) = (Vec::new(), String::new(), 0);
    while let Some(found) = text[at..].find("use ") {
        let start = at + found;
        let before = text[..start].chars().next_back();
        if before.is_some_and(ident_char) {
            rest.push_str(&text[at..start + 4]);
            at = start + 4;
            continue;
        }
        // An item starts its line (after `pub`/`pub(…)`): a `use ` inside a string is text.
        let line_start = text[..start].rfind('\n').map_or(0, |i| i + 1);
        let lead = text[line_start..start].trim();
        let public = lead.starts_with("pub");
        if !(lead.is_empty() || lead == "pub" || (public && lead.ends_with(')'))) {
            rest.push_str(&text[at..start + 4]);
            at = start + 4;
            continue;
        }
        let end = text[start..].find(';').map_or(text.len(), |e| start + e);
        items.push((public, text[start + 4..end].to_string()));
        rest.push_str(&text[at..start]);
        at = (end + 1).min(text.len());
    }
    rest.push_str(&text[at..]);
    (items, rest)
}

/// Paths of two or more segments in code (`a::b`, `crate::x::y`); `::<` ends one.
fn code_paths(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let (mut paths, mut i) = (Vec::new(), 0);
    while i < chars.len() {
        let starts =
            ident_char(chars[i]) && (i == 0 || (!ident_char(chars[i - 1]) && chars[i - 1] != ':'));
        if !starts {
            i += 1;
            continue;
        }
        let mut segments = Vec::new();
        loop {
            let begin = i;
            while i < chars.len() && ident_char(chars[i]) {
                i += 1;
            }
            segments.push(chars[begin..i].iter().collect::<String>());
            let more = i + 2 < chars.len()
                && chars[i] == ':'
                && chars[i + 1] == ':'
                && ident_char(chars[i + 2]);
            if !more {
                break;
            }
            i += 2;
        }
        if segments.len() > 1 {
            paths.push(segments.join("::"));
        }
    }
    paths
}

/// The public items a file defines, by name.
fn definitions(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for line in text.lines() {
        let Some(rest) = line.trim_start().strip_prefix("pub") else {
            continue;
        };
        let rest = match rest.strip_prefix('(') {
            Some(r) => r.split_once(')').map_or("", |(_, r)| r),
            None => rest,
        };
        let mut words = rest.split_whitespace().skip_while(|w| *w == "async");
        if let (Some(kind), Some(name)) = (words.next(), words.next()) {
            if [
                "struct", "enum", "fn", "const", "type", "trait", "static", "mod",
            ]
            .contains(&kind)
            {
                let name: String = name.chars().take_while(|c| ident_char(*c)).collect();
                names.insert(name);
            }
        }
    }
    names
}

struct Graph {
    modules: BTreeSet<Module>,
    sources: BTreeMap<Module, Source>,
}

impl Graph {
    /// Reads every `.rs` file under `src` (the binary's `main.rs` aside: it is another crate).
    fn read(src: &Path) -> Self {
        let mut files = Vec::new();
        super::layout::rust_files(src, &mut files);
        let mut paths = BTreeMap::new();
        for f in files {
            let rel = f.strip_prefix(src).unwrap().with_extension("");
            let mut module: Module = rel.iter().map(|s| s.to_string_lossy().into()).collect();
            if module == ["main"] {
                continue;
            }
            if matches!(module.last().map(String::as_str), Some("mod" | "lib")) {
                module.pop();
            }
            paths.insert(module, f);
        }
        let modules: BTreeSet<Module> = paths.keys().cloned().collect();
        let mut sources = BTreeMap::new();
        for (module, path) in &paths {
            let text = code(path);
            let (items, body) = use_items(&text);
            let mut source = Source {
                uses: Vec::new(),
                reexports: BTreeMap::new(),
                globs: Vec::new(),
                defines: definitions(&text),
            };
            let mut aliases: BTreeMap<String, Module> = BTreeMap::new();
            for (public, tree) in &items {
                for path in expand(tree) {
                    let Some(mut absolute) = absolute(&modules, module, &path) else {
                        continue;
                    };
                    // A public re-export is a façade, not a use: its users are resolved through
                    // it to the file that defines the item.
                    if absolute.last().is_some_and(|s| s == "*") {
                        absolute.pop();
                        if *public {
                            source.globs.push(absolute);
                        } else {
                            source.uses.push(absolute);
                        }
                        continue;
                    }
                    if absolute.last().is_some_and(|s| s == "self") {
                        absolute.pop();
                    }
                    // `use x::module;` names a module: the edges are what is used through it.
                    if !public && modules.contains(&absolute) {
                        if let Some(alias) = absolute.last() {
                            aliases.insert(alias.clone(), absolute.clone());
                        }
                        continue;
                    }
                    if *public {
                        if let Some(name) = absolute.last() {
                            source.reexports.insert(name.clone(), absolute.clone());
                        }
                        continue;
                    }
                    source.uses.push(absolute);
                }
            }
            for path in code_paths(&body) {
                let first = path.split("::").next().unwrap_or_default();
                let absolute = match aliases.get(first) {
                    Some(m) => Some(
                        m.iter()
                            .cloned()
                            .chain(path.split("::").skip(1).map(String::from))
                            .collect(),
                    ),
                    None => absolute(&modules, module, &path),
                };
                source.uses.extend(absolute);
            }
            sources.insert(module.clone(), source);
        }
        Self { modules, sources }
    }

    /// The file (module) that defines what `path` names.
    fn resolve(&self, path: &[String], depth: usize) -> Module {
        let mut module: Module = Vec::new();
        let mut i = 0;
        while i < path.len() {
            let mut next = module.clone();
            next.push(path[i].clone());
            if !self.modules.contains(&next) {
                break;
            }
            module = next;
            i += 1;
        }
        let (Some(name), Some(source)) = (path.get(i), self.sources.get(&module)) else {
            return module;
        };
        if depth < 8 {
            if let Some(target) = source.reexports.get(name) {
                let full: Module = target.iter().chain(&path[i + 1..]).cloned().collect();
                let found = self.resolve(&full, depth + 1);
                if found != module {
                    return found;
                }
            }
            for glob in &source.globs {
                if self
                    .sources
                    .get(glob)
                    .is_some_and(|s| s.defines.contains(name))
                {
                    let full: Module = glob.iter().chain(&path[i..]).cloned().collect();
                    return self.resolve(&full, depth + 1);
                }
            }
        }
        module
    }

    /// File → the files it uses (its own ancestors included: a child using what its parent file
    /// defines depends on that file like on any other).
    fn edges(&self) -> BTreeMap<Module, BTreeSet<Module>> {
        let mut edges = BTreeMap::new();
        for (module, source) in &self.sources {
            let targets: BTreeSet<Module> = source
                .uses
                .iter()
                .map(|p| self.resolve(p, 0))
                .filter(|t| t != module && self.sources.contains_key(t))
                .collect();
            edges.insert(module.clone(), targets);
        }
        edges
    }
}

/// `path` as seen from `module`, from the crate root; None for another crate's path.
fn absolute(modules: &BTreeSet<Module>, module: &[String], path: &str) -> Option<Module> {
    let mut segments: Vec<String> = path
        .split("::")
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect();
    let first = segments.first()?.clone();
    let mut base: Module = module.to_vec();
    match first.as_str() {
        "crate" => base.clear(),
        "self" => {}
        "super" => {
            while segments.first().is_some_and(|s| s == "super") {
                base.pop();
                segments.remove(0);
            }
            return Some(base.into_iter().chain(segments).collect());
        }
        _ => {
            let mut child = base.clone();
            child.push(first);
            if !modules.contains(&child) {
                return None;
            }
            return Some(base.into_iter().chain(segments).collect());
        }
    }
    segments.remove(0);
    Some(base.into_iter().chain(segments).collect())
}

fn name(m: &Module) -> String {
    if m.is_empty() {
        "lib".to_string()
    } else {
        m.join("/")
    }
}

/// The shortest circle through `start`, as the files from `start` to the one that leads back.
/// A file and one of its own ancestors using each other directly is the one pair allowed (the
/// parent owns the child); a longer way back between them is a circle.
fn circle_through(
    edges: &BTreeMap<Module, BTreeSet<Module>>,
    start: &Module,
) -> Option<Vec<Module>> {
    let lineage = |a: &Module, b: &Module| a.starts_with(b) || b.starts_with(a);
    // The shortest path from `start` to `to`, without the direct edge `start -> to` if `skip`.
    let path = |to: &Module, skip: bool| -> Option<Vec<Module>> {
        let mut came_from: BTreeMap<Module, Module> = BTreeMap::new();
        let mut queue = std::collections::VecDeque::from([start.clone()]);
        while let Some(at) = queue.pop_front() {
            for next in &edges[&at] {
                if (skip && at == *start && next == to)
                    || next == start
                    || came_from.contains_key(next)
                {
                    continue;
                }
                came_from.insert(next.clone(), at.clone());
                if next == to {
                    let mut chain = vec![to.clone()];
                    let mut back = to.clone();
                    while back != *start {
                        back = came_from[&back].clone();
                        chain.push(back.clone());
                    }
                    chain.reverse();
                    return Some(chain);
                }
                queue.push_back(next.clone());
            }
        }
        None
    };
    edges
        .iter()
        .filter(|(_, to)| to.contains(start))
        .filter_map(|(at, _)| path(at, lineage(at, start)))
        .min_by_key(Vec::len)
}

/// Each file that a circle runs through, with that circle as `a -> b -> … -> a`.
fn circles_by_file(edges: &BTreeMap<Module, BTreeSet<Module>>) -> BTreeMap<String, String> {
    edges
        .keys()
        .filter_map(|start| {
            let chain = circle_through(edges, start)?;
            let mut ordered: Vec<String> = chain.iter().map(name).collect();
            ordered.push(name(start));
            Some((name(start), ordered.join(" -> ")))
        })
        .collect()
}

/// One circle per group of files, as `a -> b -> … -> a` (a file on a circle already shown is
/// not shown again).
fn circles(edges: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<String> {
    let mut found = Vec::new();
    let mut done: BTreeSet<Module> = BTreeSet::new();
    for start in edges.keys() {
        if done.contains(start) {
            continue;
        }
        if let Some(chain) = circle_through(edges, start) {
            let mut ordered: Vec<String> = chain.iter().map(name).collect();
            ordered.push(name(start));
            found.push(ordered.join(" -> "));
            done.extend(chain);
        }
        done.insert(start.clone());
    }
    found
}

#[test]
fn no_circle_of_files_in_the_sources() {
    let graph = Graph::read(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    let edges = graph.edges();
    assert!(edges.len() > 100, "the scan found too few files");
    let total: usize = edges.values().map(BTreeSet::len).sum();
    assert!(total > 300, "the scan found too few imports: {total}");
    let on = circles_by_file(&edges);
    assert!(
        on.is_empty(),
        "circles of files: {:#?}",
        on.values().collect::<Vec<_>>()
    );
}

/// Phases sit strictly below requests: no file of `service/steps/` uses a request module
/// (`requests.rs`, `request.rs`: what a request carries over the wire). A phase reads the
/// operation's validated parameters and what earlier phases recorded, never the wire shape.
#[test]
fn no_phase_uses_a_request_module() {
    let graph = Graph::read(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    let edges = graph.edges();
    let phases: Vec<&Module> = edges
        .keys()
        .filter(|m| m.len() > 2 && m[0] == "service" && m[1] == "steps")
        .collect();
    assert!(
        phases.len() > 20,
        "the scan found too few phase files: {phases:?}"
    );
    let requests: Vec<&Module> = edges
        .keys()
        .filter(|m| {
            m.first().is_some_and(|s| s == "service")
                && m.last().is_some_and(|s| s == "requests" || s == "request")
        })
        .collect();
    assert!(requests.len() >= 3, "the request modules: {requests:?}");
    let mut offending = Vec::new();
    for phase in phases {
        for used in &edges[phase] {
            if requests.contains(&used) {
                offending.push(format!("{} uses {}", name(phase), name(used)));
            }
        }
    }
    assert!(
        offending.is_empty(),
        "phases using request modules: {offending:#?}"
    );
}

/// The ports' and the adapters' crates: no file of theirs is on a circle, none listed.
#[test]
fn no_circle_of_files_in_the_crates() {
    let dirs = super::layout::source_dirs();
    assert!(dirs.len() >= 5, "the server and four crates: {dirs:?}");
    for src in &dirs[1..] {
        let edges = Graph::read(src).edges();
        assert!(
            edges.len() > 5,
            "the scan found too few files in {}",
            src.display()
        );
        let on = circles_by_file(&edges);
        assert!(
            on.is_empty(),
            "circles of files in {}: {on:#?}",
            src.display()
        );
    }
}

/// The check itself: a constant and a type reached through a parent's re-export still close a
/// circle; a child using its parent does not.
#[test]
fn the_circle_check_finds_circles_through_re_exports_and_module_aliases() {
    let dir = tempfile::tempdir().unwrap();
    let write = |path: &str, text: &str| {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write("lib.rs", "pub mod a;\npub mod b;\n");
    write(
        "a/mod.rs",
        "mod x;\nmod y;\npub use x::*;\npub use y::Thing;\npub const TOP: u8 = 1;\n",
    );
    write("a/x.rs", "pub fn go() -> u8 { super::TOP }\n");
    write("a/y.rs", "pub struct Thing;\n");
    write(
        "b.rs",
        "use crate::a;\npub const B: u8 = 2;\npub fn f() { a::go(); }\n",
    );
    let edges = Graph::read(dir.path()).edges();
    assert_eq!(circles(&edges), Vec::<String>::new(), "{edges:?}");
    // y uses b, and b uses y's type through the parent's named re-export.
    write(
        "a/y.rs",
        "pub struct Thing;\npub fn h() -> u8 { crate::b::B }\n",
    );
    write(
        "b.rs",
        "use crate::a;\npub const B: u8 = 2;\npub fn f(_: a::Thing) {}\n",
    );
    let found = circles(&Graph::read(dir.path()).edges());
    assert_eq!(found, ["a/y -> b -> a/y"], "{found:?}");
    // The same through a glob re-export and a `use` tree.
    write("a/y.rs", "pub struct Thing;\n");
    write("a/x.rs", "pub fn go() -> u8 { crate::b::B }\n");
    write(
        "b.rs",
        "use crate::a::{go, Thing as _T};\npub const B: u8 = 2;\n",
    );
    let found = circles(&Graph::read(dir.path()).edges());
    assert_eq!(found, ["a/x -> b -> a/x"], "{found:?}");
    // Through a parent file: x uses its parent's constant, the parent uses b, b uses x. (A
    // child and its parent using each other alone is allowed, as in the first layout.)
    write(
        "a/x.rs",
        "pub fn go() -> u8 { super::TOP }
",
    );
    write(
        "a/mod.rs",
        "mod x;\nmod y;\npub use x::*;\npub use y::Thing;\npub const TOP: u8 = crate::b::B;\n",
    );
    write(
        "b.rs",
        "pub const B: u8 = 2;
pub fn f() -> u8 { crate::a::x::go() }
",
    );
    let found = circles(&Graph::read(dir.path()).edges());
    assert_eq!(found, ["a -> b -> a/x -> a"], "{found:?}");
}
