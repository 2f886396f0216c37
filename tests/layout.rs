//! The structure ARCHITECTURE.md promises, checked on the source tree: no
//! import cycle between the modules of the runtime (`host/src`) or the SDK
//! (`sdk/src`), no source file of any crate longer than 700 lines before its
//! inline tests, at most 8 files directly in the runtime's `src/`, and a
//! runtime library that carries none of the CLI's dependencies and no
//! server's client.
//!
//! A module's dependencies are the `crate::` and `super::` paths it names
//! (in `use` items and inline). A child may use its parent and the parent its
//! children (that is how a Rust module tree works); what must be acyclic is,
//! at every level of the tree, the graph between sibling subtrees: between the
//! top-level folders, between the modules of one folder, and so on.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The longest a runtime source file may be before its `#[cfg(test)]` module.
const MAX_LINES: usize = 700;
/// The most `.rs` files directly in the runtime's `src/`.
const MAX_ROOT_FILES: usize = 8;

/// The repository root (this file is a test of `cli/`, beside `host/`).
fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// Every `.rs` file under `dir`, sorted.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// The module path of a file below `src`: `lib.rs` is `[]`, `a/mod.rs` and
/// `a.rs` are `["a"]`, `a/b.rs` is `["a", "b"]`. `None` for binaries.
fn module_of(src: &Path, file: &Path) -> Option<Vec<String>> {
    let rel = file.strip_prefix(src).unwrap();
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().unwrap();
    if parts.first().is_some_and(|p| p == "bin") || last == "main.rs" {
        return None;
    }
    match last.as_str() {
        "lib.rs" | "mod.rs" => {}
        name => parts.push(name.trim_end_matches(".rs").to_owned()),
    }
    Some(parts)
}

/// The source without comments and string literals (so that paths in docs
/// or messages do not count), and without its `#[cfg(test)]` tail.
fn code(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '/' if chars.peek() == Some(&'/') => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        out.push('\n');
                        break;
                    }
                }
            }
            '"' => {
                let mut escaped = false;
                for c in chars.by_ref() {
                    if c == '"' && !escaped {
                        break;
                    }
                    escaped = c == '\\' && !escaped;
                }
                out.push_str("\"\"");
            }
            '\'' => {
                // A char literal ('x', '\n', '"') or a lifetime ('a).
                let rest: String = chars.clone().take(10).collect();
                let from = if rest.starts_with('\\') { 2 } else { 1 };
                let end = rest
                    .get(from..)
                    .and_then(|r| r.find('\''))
                    .map(|i| i + from);
                if let Some(end) = end.filter(|&i| rest.starts_with('\\') || i == 1) {
                    for _ in 0..=end {
                        chars.next();
                    }
                    out.push_str("' '");
                } else {
                    out.push('\'');
                }
            }
            c => out.push(c),
        }
    }
    out
}

/// The paths a module names: `crate::a::b` and `super::x` (resolved against
/// `module`), including each path inside `use crate::{a, b::{c, d}}` groups.
fn referenced(module: &[String], code: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let bytes = code.as_bytes();
    for (start, prefix) in [("crate::", None), ("super::", Some(()))] {
        let mut from = 0;
        while let Some(i) = code[from..].find(start) {
            let at = from + i;
            from = at + start.len();
            if at > 0 && (bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'_') {
                continue;
            }
            let mut base: Vec<String> = match prefix {
                None => Vec::new(),
                Some(()) => {
                    let mut b = module.to_vec();
                    b.pop();
                    b
                }
            };
            let mut rest = &code[from..];
            while let Some(r) = rest.strip_prefix("super::") {
                base.pop();
                rest = r;
            }
            expand(&base, rest, &mut out);
        }
    }
    out
}

/// Expands one path (or brace group) starting at `rest` onto `base`.
fn expand(base: &[String], rest: &str, out: &mut Vec<Vec<String>>) {
    let mut path = base.to_vec();
    let mut s = rest;
    loop {
        let end = s
            .find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .unwrap_or(s.len());
        if end == 0 {
            if let Some(group) = s.strip_prefix('{') {
                for item in split_group(group) {
                    expand(&path, item.trim(), out);
                }
                return;
            }
            break;
        }
        path.push(s[..end].to_owned());
        s = &s[end..];
        match s.strip_prefix("::") {
            Some(r) => s = r,
            None => break,
        }
    }
    out.push(path);
}

/// The comma-separated items of a brace group, up to its closing brace.
fn split_group(group: &str) -> Vec<&str> {
    let (mut depth, mut start, mut items) = (0usize, 0, Vec::new());
    for (i, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => {
                items.push(&group[start..i]);
                return items;
            }
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&group[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items
}

/// The crate's module graph: each module and the modules it names, by
/// their longest existing prefix; root re-exports (`crate::Batch`) are
/// followed to the module they come from.
fn graph(src: &Path) -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
    let mut sources = BTreeMap::new();
    for file in rust_files(src) {
        if let Some(m) = module_of(src, &file) {
            let text = std::fs::read_to_string(&file).unwrap();
            let text = match text.find("#[cfg(test)]") {
                Some(i) => text[..i].to_owned(),
                None => text,
            };
            sources.insert(m, code(&text));
        }
    }
    let modules: BTreeSet<Vec<String>> = sources.keys().cloned().collect();
    let resolve = |path: &[String]| -> Vec<String> {
        (0..=path.len())
            .rev()
            .map(|n| path[..n].to_vec())
            .find(|p| modules.contains(p))
            .unwrap_or_default()
    };
    // Root re-exports: `pub use a::b::{X, Y}` in lib.rs names X and Y at the root.
    let mut reexports: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for path in referenced(
        &[],
        &sources[&Vec::new()].replace("pub use ", "pub use crate::"),
    ) {
        if let Some(name) = path.last() {
            reexports.insert(name.clone(), resolve(&path));
        }
    }
    let mut graph = BTreeMap::new();
    for (m, text) in &sources {
        let mut deps = BTreeSet::new();
        for path in referenced(m, text) {
            let target = match path.as_slice() {
                [one] => reexports.get(one).cloned().unwrap_or_default(),
                _ => resolve(&path),
            };
            deps.insert(target);
        }
        graph.insert(m.clone(), deps);
    }
    graph
}

/// Every cycle between sibling subtrees, as a list of module names.
fn sibling_cycles(graph: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>) -> Vec<String> {
    // Edges between children of the lowest common ancestor.
    let mut edges: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
    for (from, deps) in graph {
        for to in deps {
            let common = from.iter().zip(to).take_while(|(a, b)| a == b).count();
            if common == from.len() || common == to.len() {
                continue; // ancestor and descendant
            }
            let a = from[..=common].to_vec();
            let b = to[..=common].to_vec();
            edges.entry(a).or_default().insert(b);
        }
    }
    let mut cycles = Vec::new();
    let nodes: Vec<_> = edges.keys().cloned().collect();
    for start in &nodes {
        // Depth-first search for a path back to `start`.
        let mut stack = vec![(start.clone(), vec![start.clone()])];
        let mut seen = BTreeSet::new();
        while let Some((node, path)) = stack.pop() {
            for next in edges.get(&node).into_iter().flatten() {
                if next == start {
                    let names: Vec<String> = path.iter().map(|p| p.join("::")).collect();
                    cycles.push(format!("{} -> {}", names.join(" -> "), start.join("::")));
                } else if next > start && seen.insert(next.clone()) {
                    let mut p = path.clone();
                    p.push(next.clone());
                    stack.push((next.clone(), p));
                }
            }
        }
    }
    cycles
}

/// Asserts that the crate whose sources are in `src` (relative to the
/// repository) has no import cycle.
fn assert_acyclic(src: &str) {
    let cycles = sibling_cycles(&graph(&repo().join(src)));
    assert!(
        cycles.is_empty(),
        "import cycles in {src}:\n{}",
        cycles.join("\n")
    );
}

#[test]
fn the_runtime_has_no_import_cycle() {
    assert_acyclic("host/src");
}

#[test]
fn the_sdk_has_no_import_cycle() {
    assert_acyclic("sdk/src");
}

#[test]
fn the_cycle_check_finds_a_cycle() {
    let m = |s: &str| s.split("::").map(str::to_owned).collect::<Vec<_>>();
    let mut g = BTreeMap::new();
    g.insert(m("a::x"), BTreeSet::from([m("b")]));
    g.insert(m("b"), BTreeSet::from([m("a::y")]));
    g.insert(m("a"), BTreeSet::from([m("a::x")]));
    assert_eq!(sibling_cycles(&g), vec!["a -> b -> a".to_owned()]);
    // Parent and child may name each other.
    g.remove(&m("b"));
    g.insert(m("a::x"), BTreeSet::from([m("a")]));
    assert!(sibling_cycles(&g).is_empty());
    let code =
        code("use crate::a::{b, c::{D, E}};\nuse super::f; // crate::zz\nlet s = \"crate::q\";");
    let found = referenced(&m("p::r"), &code);
    assert_eq!(
        found,
        vec![m("a::b"), m("a::c::D"), m("a::c::E"), m("p::f")]
    );
}

/// The source folders of the workspace's crates, each held to
/// [`MAX_LINES`].
const SOURCES: [&str; 8] = [
    "host/src",
    "connectors/src",
    "sdk/src",
    "flat/src",
    "cli/src",
    "bench/src",
    "tests/support",
    "tests/guests",
];

#[test]
fn no_source_file_is_too_long_before_its_tests() {
    let long: Vec<String> = SOURCES
        .iter()
        .flat_map(|src| rust_files(&repo().join(src)))
        // A `tests.rs` is a module's inline tests moved to a file of their own.
        .filter(|f| f.file_name().is_some_and(|n| n != "tests.rs"))
        .filter_map(|f| {
            let text = std::fs::read_to_string(&f).unwrap();
            let before = text.split("#[cfg(test)]").next().unwrap();
            let n = before.lines().count();
            (n > MAX_LINES).then(|| format!("{} ({n} lines)", f.display()))
        })
        .collect();
    assert!(
        long.is_empty(),
        "over {MAX_LINES} lines before the tests: {long:?}"
    );
}

#[test]
fn the_runtime_src_folder_holds_few_files() {
    let src = repo().join("host/src");
    let files: Vec<_> = std::fs::read_dir(&src)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "rs"))
        .collect();
    assert!(files.len() <= MAX_ROOT_FILES, "{files:?}");
}

#[test]
fn the_runtime_library_carries_no_cli_dependency() {
    let manifest = std::fs::read_to_string(repo().join("host/Cargo.toml")).unwrap();
    let deps = manifest
        .split("[dependencies]")
        .nth(1)
        .unwrap()
        .split("\n[")
        .next()
        .unwrap();
    for cli_only in [
        "clap",
        "indicatif",
        "tracing-subscriber",
        "signal-hook",
        "anyhow",
    ] {
        assert!(
            !deps.lines().any(|l| l.trim_start().starts_with(cli_only)),
            "host/Cargo.toml depends on {cli_only}, which belongs to cli/"
        );
    }
    for client in ["rdkafka", "async-nats", "postgres", "tokio-postgres"] {
        assert!(
            !deps.lines().any(|l| l.trim_start().starts_with(client)),
            "host/Cargo.toml depends on {client}, a server's client, which belongs to connectors/"
        );
    }
}
