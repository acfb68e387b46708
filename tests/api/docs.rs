//! The docs cannot drift from the product: every `sh` example in the README and the guides runs
//! against a sandbox server, the configuration reference is the CLI definition, and every
//! relative link points at a file.

use std::path::{Path, PathBuf};

use crate::helpers::*;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The README and every guide in `docs/`.
fn pages() -> Vec<PathBuf> {
    let mut pages = vec![root().join("README.md")];
    let mut guides: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    guides.sort();
    pages.extend(guides);
    pages
}

/// The bodies of a page's fenced blocks whose info string is exactly `sh`, in order. Other
/// fences (`text` for what needs an AWS account or is this suite's own command) are shown only.
fn sh_blocks(text: &str) -> Vec<String> {
    let (mut blocks, mut current): (Vec<String>, Option<String>) = (Vec::new(), None);
    for line in text.lines() {
        match (&mut current, line.trim_end()) {
            (None, "```sh") => current = Some(String::new()),
            (Some(body), "```") => {
                blocks.push(std::mem::take(body));
                current = None;
            }
            (Some(body), _) => {
                body.push_str(line);
                body.push('\n');
            }
            (None, _) => {}
        }
    }
    blocks
}

/// Runs one page's examples, in order, as one script against `base` (the page's address
/// `localhost:3099` becomes the server's).
async fn run_page(page: &Path, blocks: &[String], base: &str) -> Result<(), String> {
    let host = base.trim_start_matches("http://");
    let script = blocks
        .join("\n")
        .replace("localhost:3099", host)
        .replace("127.0.0.1:3099", host);
    let scratch = tempfile::tempdir().unwrap();
    let out = tokio::process::Command::new("bash")
        .args(["-euo", "pipefail", "-c", &script])
        .current_dir(scratch.path())
        .env("TMPDIR", scratch.path())
        .output()
        .await
        .expect("bash");
    let shown = format!(
        "{}: exit {:?}\n--- script\n{script}\n--- stdout\n{}\n--- stderr\n{}",
        page.display(),
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if out.status.success() && !out.stdout.is_empty() {
        Ok(())
    } else {
        Err(shown)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_shell_example_in_the_readme_and_the_guides_runs_against_a_sandbox_server() {
    let mut ran = Vec::new();
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        let blocks = sh_blocks(&text);
        if blocks.is_empty() {
            continue;
        }
        // A page of its own on a fresh server: the guides are read one at a time. The server
        // names the sandbox's Grafana workspace, as a deployment with one would.
        let app = spawn_app_with(Opts {
            grafana_workspace: Some(instantstart::cloud::sandbox::GRAFANA_WORKSPACE),
            ..Default::default()
        })
        .await;
        if let Err(failure) = run_page(&page, &blocks, &app.base).await {
            panic!("{failure}");
        }
        let name = page.file_name().unwrap().to_string_lossy().to_string();
        ran.push((name, blocks.len()));
    }
    let names: Vec<&str> = ran.iter().map(|(n, _)| n.as_str()).collect();
    for guide in [
        "README.md",
        "getting-started.md",
        "clusters.md",
        "training.md",
        "inference.md",
        "teams.md",
        "spaces.md",
        "agent.md",
        "operating.md",
        "security.md",
        "troubleshooting.md",
    ] {
        assert!(
            names.contains(&guide),
            "{guide} has no example run: {ran:?}"
        );
    }
}

/// The harness itself: a failing example fails the page.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_example_fails_its_page() {
    let app = spawn_app().await;
    let page = Path::new("example.md");
    let good = sh_blocks("```sh\ncurl -sf localhost:3099/healthz\n```\n");
    assert_eq!(good.len(), 1);
    assert!(run_page(page, &good, &app.base).await.is_ok());
    let bad = sh_blocks(
        "```sh\ncurl -sf localhost:3099/healthz\n```\n```text\nnot run\n```\n```sh\ncurl -sf localhost:3099/api/clusters/nope\n```\n",
    );
    assert_eq!(bad.len(), 2);
    let failure = run_page(page, &bad, &app.base).await.unwrap_err();
    assert!(failure.contains("exit Some(22)"), "{failure}");
}

/// `docs/configuration.md` is generated from the CLI definition; `INSTANTSTART_BLESS=1`
/// rewrites it after a flag changes.
#[test]
fn the_configuration_reference_is_the_cli_definition() {
    let path = root().join("docs/configuration.md");
    let generated = instantstart::config::reference::markdown();
    if std::env::var_os("INSTANTSTART_BLESS").is_some() {
        std::fs::write(&path, &generated).unwrap();
    }
    let written = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        written == generated,
        "docs/configuration.md differs from the CLI definition: run \
         `INSTANTSTART_BLESS=1 cargo test --test api docs::the_configuration_reference` and commit it"
    );
    for flag in [
        "--bind",
        "--cloud",
        "--token",
        "--shared-bucket",
        "--log-format",
    ] {
        assert!(generated.contains(&format!("### `{flag}`")), "{flag}");
    }
    assert!(generated.contains("variable `INSTANTSTART_BIND` · default `127.0.0.1:3099`"));
}

#[test]
fn the_readme_is_short_and_every_relative_link_resolves() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(
        lines <= 150,
        "README.md has {lines} lines: move detail into docs/"
    );
    let mut broken = Vec::new();
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        for (at, _) in text.match_indices("](") {
            let target = &text[at + 2..];
            let Some(end) = target.find(')') else {
                continue;
            };
            let target = target[..end].split('#').next().unwrap_or("");
            if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            if !page.parent().unwrap().join(target).exists() {
                broken.push(format!("{}: {target}", page.display()));
            }
        }
    }
    assert_eq!(broken, Vec::<String>::new());
}

/// The block of a page between `<!-- {name}:begin -->` and `<!-- {name}:end -->` is what
/// `generated` says; `INSTANTSTART_BLESS=1` rewrites it (then commit the page).
pub(crate) fn generated_block(page: &str, name: &str, generated: &str, test: &str) {
    let path = root().join(page);
    let text = std::fs::read_to_string(&path).unwrap();
    let (begin, end) = (
        format!("<!-- {name}:begin -->\n"),
        format!("<!-- {name}:end -->"),
    );
    let (Some(a), Some(b)) = (text.find(&begin), text.find(&end)) else {
        panic!("{page} has no {begin:?} … {end:?} block");
    };
    let written = &text[a + begin.len()..b];
    if written != generated && std::env::var_os("INSTANTSTART_BLESS").is_some() {
        let text = format!("{}{generated}{}", &text[..a + begin.len()], &text[b..]);
        std::fs::write(&path, text).unwrap();
        return;
    }
    assert!(
        written == generated,
        "{page}'s {name} block differs from what the sources say: run \
         `INSTANTSTART_BLESS=1 cargo test --test api {test}` and commit it"
    );
}

/// The architecture page lists every file of the REST layer with what it owns, generated from
/// each file's own `//!` line, so the list cannot drift from the tree.
#[test]
fn the_architecture_page_lists_every_api_file() {
    let mut files: Vec<std::path::PathBuf> = std::fs::read_dir(root().join("src/api"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .collect();
    files.sort();
    assert!(files.len() > 20, "{files:?}");
    let mut table = String::from("| file | what it owns |\n|---|---|\n");
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        let doc: Vec<&str> = text
            .lines()
            .map_while(|l| l.strip_prefix("//!"))
            .map(str::trim)
            .take_while(|l| !l.is_empty())
            .collect();
        let doc = doc.join(" ");
        // The first sentence: up to a full stop that ends one (not `e.g.` or a path's dot).
        let first = doc.find(". ").map_or(doc.as_str(), |at| &doc[..=at]);
        assert!(
            !first.is_empty(),
            "{} says what it owns in a //! line",
            f.display()
        );
        let name = f.file_name().unwrap().to_string_lossy();
        table.push_str(&format!("| `{name}` | {} |\n", first.replace('|', "\\|")));
    }
    generated_block(
        "docs/architecture.md",
        "api-files",
        &table,
        "docs::the_architecture_page_lists_every_api_file",
    );
}

/// Every problem type is documented: the troubleshooting page's table is generated from the
/// server's one list of them (`ProblemType::ALL`), no source names a problem by a loose
/// string, and every type in the list is one the sources answer with.
#[test]
fn every_problem_type_is_in_the_troubleshooting_table() {
    use instantstart::problem::ProblemType;
    let table = ProblemType::table();
    generated_block(
        "docs/troubleshooting.md",
        "problems",
        &table,
        "docs::every_problem_type",
    );
    assert!(table.lines().count() > 40, "{table}");
    let mut files = Vec::new();
    crate::layout::rust_files(&root().join("src"), &mut files);
    let mut everywhere = String::new();
    for f in &files {
        if f.ends_with("problem.rs") {
            continue;
        }
        let text = std::fs::read_to_string(f).unwrap();
        let production = text.split("#[cfg(test)]").next().unwrap_or_default();
        for loose in ["\"urn:instantstart:problem:", "slug: \""] {
            assert!(
                !production.contains(loose),
                "{} names a problem by a string (`{loose}`): name its `ProblemType`",
                f.display()
            );
        }
        everywhere.push_str(production);
    }
    let unused: Vec<String> = ProblemType::ALL
        .iter()
        .map(|t| format!("ProblemType::{t:?}"))
        .filter(|named| {
            // Named whole: `ProblemType::Conflict` is not `ProblemType::ConflictX`.
            !everywhere.match_indices(named.as_str()).any(|(at, _)| {
                !everywhere[at + named.len()..]
                    .starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
            })
        })
        .collect();
    assert!(
        unused.is_empty(),
        "problem types the server never answers with (take them out of src/problem.rs): {unused:?}"
    );
}
