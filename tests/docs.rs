//! The documents are tested like code: every file that ARCHITECTURE.md, the README or a comment
//! in the code names must exist, and the source keeps the shape ARCHITECTURE.md promises (no
//! file over 1 000 lines, no dead code kept alive with `#[allow(dead_code)]`).

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// File endings that name a file of ours when they end a word in a document or a comment.
const ENDINGS: [&str; 8] = [".rs", ".md", ".toml", ".py", ".mjs", ".sh", ".png", ".svg"];

/// Every file below `dir` (relative to the repository), skipping build output and installs.
fn files_below(dir: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![Path::new(ROOT).join(dir)];
    while let Some(d) = todo.pop() {
        let Ok(entries) = fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            if p.is_dir() {
                if !["target", "node_modules", ".venv", ".git", "corpus"].contains(&name.as_str()) {
                    todo.push(p);
                }
            } else {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// The words of `text` that look like a file name or path of ours (`src/clock.rs`,
/// `writer.rs`, `docs/collector-flamegraph.svg`), without surrounding punctuation.
fn named_files(text: &str) -> BTreeSet<String> {
    text.split(|c: char| c.is_whitespace() || "`'\"()[]{}<>,;*|!".contains(c))
        .filter(|w| !w.contains("://"))
        // A name followed by `:42` names a line of its file; one followed by `:` ends a phrase.
        .map(|w| w.split(':').next().unwrap_or(w).trim_end_matches('.'))
        .filter(|w| ENDINGS.iter().any(|e| w.ends_with(e) && w.len() > e.len()))
        // URLs, globs and placeholders are not files of ours.
        .filter(|w| !w.contains('*') && !w.contains('<') && !w.contains('$'))
        .filter(|w| {
            w.chars()
                .all(|c| c.is_ascii_alphanumeric() || "_-./".contains(c))
        })
        .map(str::to_owned)
        .collect()
}

/// The project's shared documents, kept outside the repository (`../shared/`): the interface,
/// the API decisions and the design notes.
const SHARED: [&str; 4] = ["interface.md", "api.md", "architecture.md", "style.md"];

/// Whether `name` is a document or output that lives outside the repository's files: a shared
/// document, or a bare `.png` name, which is a screenshot the browser tests write into
/// `target/screenshots/` (`docs/collector-flamegraph.svg`, with its folder, is checked).
fn outside(name: &str) -> bool {
    name.starts_with("../shared/")
        || SHARED.contains(&name)
        || (name.ends_with(".png") && !name.contains('/'))
}

/// Whether `name`, found in `from`, names a file that exists: as a path from the repository
/// root, from `src/`, from `from`'s folder or one above it, or (a bare file name) anywhere.
fn exists(name: &str, from: &Path, all: &[PathBuf]) -> bool {
    let root = Path::new(ROOT);
    let mut bases = vec![root.to_path_buf(), root.join("src")];
    let mut dir = from.parent();
    while let Some(d) = dir {
        if !d.starts_with(root) {
            break;
        }
        bases.push(d.to_path_buf());
        dir = d.parent();
    }
    if bases.iter().any(|b| b.join(name).exists()) {
        return true;
    }
    // A bare name or a tail (`api/error.rs`) of a real path anywhere in the repository.
    let tail = format!("/{name}");
    all.iter().any(|p| p.to_string_lossy().ends_with(&tail))
}

/// The comment lines of a Rust file (`//`, `///`, `//!`), which is where a file is named.
fn comments(source: &str) -> String {
    source
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn every_file_the_documents_and_comments_name_exists() {
    let all: Vec<PathBuf> = files_below(".");
    let mut missing = Vec::new();
    let docs = ["ARCHITECTURE.md", "README.md", "BENCHMARKS.md"];
    let mut texts: Vec<(PathBuf, String)> = docs
        .iter()
        .map(|d| {
            let p = Path::new(ROOT).join(d);
            let text = fs::read_to_string(&p).unwrap();
            (p, text)
        })
        .collect();
    for dir in ["src", "tests", "benches", "examples"] {
        for p in files_below(dir) {
            if p.extension().is_some_and(|e| e == "rs") {
                let text = comments(&fs::read_to_string(&p).unwrap());
                texts.push((p, text));
            }
        }
    }
    for (path, text) in &texts {
        for name in named_files(text) {
            if !outside(&name) && !exists(&name, path, &all) {
                let at = path
                    .strip_prefix(ROOT)
                    .unwrap_or(path)
                    .display()
                    .to_string();
                missing.push(format!("{at} names {name}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "files named but not found:\n{}",
        missing.join("\n")
    );
}

#[test]
fn the_check_of_named_files_sees_a_missing_one() {
    let all = files_below(".");
    let here = Path::new(ROOT).join("src/collector/writer.rs");
    let names = named_files("see `dedupe.rs` and src/clock.rs, https://x.org/a.rs, part-*.rs.");
    assert_eq!(
        names.into_iter().collect::<Vec<_>>(),
        vec!["dedupe.rs".to_owned(), "src/clock.rs".to_owned()]
    );
    assert!(!exists("dedupe.rs", &here, &all), "dedupe is a folder now");
    assert!(exists("src/clock.rs", &here, &all));
    assert!(exists("dedupe/mod.rs", &here, &all));
}

#[test]
fn no_source_file_is_over_1000_lines() {
    let long: Vec<String> = files_below("src")
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .filter_map(|p| {
            let n = fs::read_to_string(&p).unwrap().lines().count();
            (n > 1000).then(|| format!("{} has {n} lines", p.display()))
        })
        .collect();
    assert!(
        long.is_empty(),
        "split these by concern:\n{}",
        long.join("\n")
    );
}

#[test]
fn no_dead_code_is_kept_alive() {
    let allowed: Vec<String> = files_below("src")
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .filter(|p| fs::read_to_string(p).unwrap().contains("allow(dead_code"))
        .map(|p| p.display().to_string())
        .collect();
    assert!(
        allowed.is_empty(),
        "delete the dead code instead:\n{}",
        allowed.join("\n")
    );
}

#[test]
fn the_shell_scripts_parse_and_refuse_an_unknown_option() {
    let mut scripts: Vec<PathBuf> = files_below("benches")
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "sh"))
        .collect();
    scripts.push(Path::new(ROOT).join("tests/run"));
    assert!(scripts.len() >= 3, "{scripts:?}");
    for script in &scripts {
        let parsed = std::process::Command::new("bash")
            .arg("-n")
            .arg(script)
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&parsed.stderr);
        assert!(parsed.status.success(), "{}: {said}", script.display());
    }
    // The benches read their options before building anything: a wrong one costs nothing.
    for script in ["benches/load.sh", "benches/pgo.sh", "benches/insn.sh"] {
        let run = std::process::Command::new(Path::new(ROOT).join(script))
            .arg("--no-such-option")
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&run.stderr);
        assert_eq!(run.status.code(), Some(2), "{script}: {said}");
        assert!(
            said.contains("unknown option --no-such-option"),
            "{script}: {said}"
        );
    }
}
