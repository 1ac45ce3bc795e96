//! The layout rules of docs/architecture.md that the compiler does not enforce, checked
//! by `cargo xtask lint` (and so by `test`):
//! - no import circle among a crate's modules, nor among its top-level folders (rooms):
//!   a module's `use crate::…`/`super::…`/`self::…` paths are its edges (comments and
//!   `tests` modules left out: a test may read any room);
//! - no source file of the binary crate outside a folder, except `lib.rs` and `main.rs`;
//! - no eBPF or common source file over 600 lines.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use crate::util::root;

/// Crates whose module graph must have no circle.
const CRATES: &[&str] = &[
    "tracer-analysis",
    "tracer-user",
    "tracer-common",
    "tracer-ebpf",
];
/// Crates whose files must stay short (they are read next to the verifier's log).
const SHORT_FILE_CRATES: &[&str] = &["tracer-common", "tracer-ebpf"];
const MAX_LINES: usize = 600;
/// The binary crate: every source in a folder but its roots.
const FOLDERED_CRATE: &str = "tracer-user";
const ROOT_FILES: &[&str] = &["lib.rs", "main.rs"];

/// One module: its path from the crate root (`graph::cpm`) and its text.
struct Module {
    path: Vec<String>,
    text: String,
}

/// Every problem found, one line each; an error if there is any.
pub(crate) fn check() -> Result<()> {
    let mut problems = Vec::new();
    for krate in CRATES {
        let src = root().join(krate).join("src");
        let modules = modules(&src)?;
        problems.extend(circles(krate, &modules));
        if SHORT_FILE_CRATES.contains(krate) {
            for m in &modules {
                let lines = m.text.lines().count();
                if lines > MAX_LINES {
                    problems.push(format!(
                        "{krate}: module {} has {lines} lines (at most {MAX_LINES})",
                        name(&m.path)
                    ));
                }
            }
        }
    }
    let src = root().join(FOLDERED_CRATE).join("src");
    for entry in fs::read_dir(&src).with_context(|| format!("reading {}", src.display()))? {
        let entry = entry?;
        let file = entry.file_name().to_string_lossy().into_owned();
        if entry.path().is_file() && !ROOT_FILES.contains(&file.as_str()) {
            problems.push(format!(
                "{FOLDERED_CRATE}/src/{file} is outside a folder (docs/architecture.md says where it goes)"
            ));
        }
    }
    for p in &problems {
        eprintln!("xtask: layout: {p}");
    }
    if !problems.is_empty() {
        bail!(
            "the layout breaks {} rule(s) of docs/architecture.md (above)",
            problems.len()
        );
    }
    Ok(())
}

fn name(path: &[String]) -> String {
    if path.is_empty() {
        "crate".into()
    } else {
        path.join("::")
    }
}

/// The crate's modules, one per source file (`a/mod.rs` and `a.rs` are module `a`).
fn modules(src: &Path) -> Result<Vec<Module>> {
    let mut files = Vec::new();
    collect(src, &mut files)?;
    let mut out = Vec::new();
    for file in files {
        let rel = file.strip_prefix(src).expect("under src");
        let mut path: Vec<String> = rel
            .iter()
            .map(|c| c.to_string_lossy().into_owned())
            .collect();
        let last = path.pop().expect("a file name");
        let stem = last.trim_end_matches(".rs");
        if !matches!(stem, "mod" | "lib" | "main") || !path.is_empty() && stem != "mod" {
            path.push(stem.to_string());
        }
        let text =
            fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
        out.push(Module { path, text });
    }
    Ok(out)
}

fn collect(dir: &Path, files: &mut Vec<PathBuf>) -> Result<()> {
    for entry in fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = entry?.path();
        if path.is_dir() {
            collect(&path, files)?;
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
    Ok(())
}

/// The circles among modules and among rooms, as problem lines.
fn circles(krate: &str, modules: &[Module]) -> Vec<String> {
    let known: BTreeSet<Vec<String>> = modules.iter().map(|m| m.path.clone()).collect();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut room_edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for m in modules
        .iter()
        .filter(|m| m.path.last().is_none_or(|l| l != "tests"))
    {
        for target in imports(&m.path, &without_comments(&m.text), &known) {
            let related = target.starts_with(&m.path) || m.path.starts_with(&target);
            if related || target.is_empty() {
                continue;
            }
            edges
                .entry(name(&m.path))
                .or_default()
                .insert(name(&target));
            if let (Some(from), Some(to)) = (m.path.first(), target.first()) {
                if from != to {
                    room_edges
                        .entry(from.clone())
                        .or_default()
                        .insert(to.clone());
                }
            }
        }
    }
    let mut problems = Vec::new();
    for (what, graph) in [("modules", &edges), ("folders", &room_edges)] {
        for circle in strongly_connected(graph) {
            problems.push(format!(
                "{krate}: import circle among {what}: {}",
                circle.join(" <-> ")
            ));
        }
    }
    problems
}

/// The text without comments and without an inline `tests` module at its end.
fn without_comments(text: &str) -> String {
    let code = text
        .find("#[cfg(test)]\nmod tests {")
        .map_or(text, |i| &text[..i]);
    code.lines()
        .map(|l| l.find("//").map_or(l, |i| &l[..i]))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The modules a module's text names through `crate::`, `super::` and `self::` paths:
/// the longest prefix of each path that is a module.
fn imports(at: &[String], text: &str, known: &BTreeSet<Vec<String>>) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let bytes = text.as_bytes();
    for start in ["crate::", "super::", "self::"] {
        let mut from = 0;
        while let Some(i) = text[from..].find(start) {
            let i = from + i;
            from = i + start.len();
            let preceded_by_word = i > 0
                && (bytes[i - 1].is_ascii_alphanumeric()
                    || bytes[i - 1] == b'_'
                    || bytes[i - 1] == b':');
            if preceded_by_word {
                continue;
            }
            let end = text[i..]
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
                .map_or(text.len(), |e| i + e);
            // `use crate::a::{b, c::{d, e}}`: every path of the group, each from the prefix.
            let written = match text[i..end].strip_suffix("::") {
                Some(prefix) if text[end..].starts_with('{') => {
                    let group = braced(&text[end..]);
                    from = end + group.len();
                    expand_group(prefix, group)
                }
                _ => vec![text[i..end].to_string()],
            };
            for written in written {
                out.push(module_of(at, &written, known));
            }
        }
    }
    out
}

/// The module a path written in module `at` names: the longest prefix of it that is a
/// module (the crate root if none).
fn module_of(at: &[String], written: &str, known: &BTreeSet<Vec<String>>) -> Vec<String> {
    let segments: Vec<&str> = written.split("::").filter(|s| !s.is_empty()).collect();
    let mut path: Vec<String> = Vec::new();
    let mut rest = &segments[..];
    match rest.first() {
        Some(&"crate") => rest = &rest[1..],
        Some(&"self") => {
            path = at.to_vec();
            rest = &rest[1..];
        }
        _ => {
            path = at.to_vec();
            while rest.first() == Some(&"super") {
                path.pop();
                rest = &rest[1..];
            }
        }
    }
    path.extend(rest.iter().map(|s| s.to_string()));
    while !path.is_empty() && !known.contains(&path) {
        path.pop();
    }
    path
}

/// The brace group `text` starts with, braces included (to the end of `text` if it is
/// not closed).
fn braced(text: &str) -> &str {
    let mut depth = 0usize;
    for (i, c) in text.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return &text[..=i];
                }
            }
            _ => {}
        }
    }
    text
}

/// The paths a use group stands for, each written from `prefix`: `{b, c::{d, e as f},
/// self, *}` after `a` gives `a::b`, `a::c::d`, `a::c::e`, `a`, `a`.
fn expand_group(prefix: &str, group: &str) -> Vec<String> {
    let inner = &group[1..group.len() - usize::from(group.ends_with('}'))];
    let mut items = Vec::new();
    let (mut depth, mut start) = (0usize, 0);
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                items.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(&inner[start..]);
    let mut out = Vec::new();
    for item in items.iter().map(|i| i.trim()).filter(|i| !i.is_empty()) {
        let item = item.split(" as ").next().unwrap_or(item).trim();
        if let Some(open) = item.find('{') {
            let head = item[..open].trim().trim_end_matches("::");
            out.extend(expand_group(&format!("{prefix}::{head}"), &item[open..]));
        } else if item == "self" || item == "*" {
            out.push(prefix.to_string());
        } else {
            out.push(format!("{prefix}::{item}"));
        }
    }
    out
}

/// The strongly connected components of more than one node (Tarjan), each sorted.
fn strongly_connected(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct Search<'g> {
        graph: &'g BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        on_stack: BTreeSet<&'g str>,
        found: Vec<Vec<String>>,
    }
    impl<'g> Search<'g> {
        fn visit(&mut self, v: &'g str) {
            let i = self.index.len();
            self.index.insert(v, i);
            self.low.insert(v, i);
            self.stack.push(v);
            self.on_stack.insert(v);
            for w in self.graph.get(v).into_iter().flatten() {
                let w = w.as_str();
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let lw = self.low[w];
                    let lv = self.low.get_mut(v).expect("visited");
                    *lv = (*lv).min(lw);
                } else if self.on_stack.contains(w) {
                    let iw = self.index[w];
                    let lv = self.low.get_mut(v).expect("visited");
                    *lv = (*lv).min(iw);
                }
            }
            if self.low[v] == self.index[v] {
                let mut component = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack.remove(w);
                    component.push(w.to_string());
                    if w == v {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort();
                    self.found.push(component);
                }
            }
        }
    }
    let mut search = Search {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for v in graph.keys() {
        if !search.index.contains_key(v.as_str()) {
            search.visit(v);
        }
    }
    search.found
}

#[cfg(test)]
mod tests {
    use super::{circles, expand_group, Module};

    fn module(path: &str, text: &str) -> Module {
        Module {
            path: path
                .split("::")
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect(),
            text: text.to_string(),
        }
    }

    #[test]
    fn a_use_group_stands_for_each_of_its_paths() {
        assert_eq!(
            expand_group("crate::a", "{b, c::{d, e as f}, self, *}"),
            [
                "crate::a::b",
                "crate::a::c::d",
                "crate::a::c::e",
                "crate::a",
                "crate::a"
            ]
        );
    }

    #[test]
    fn a_circle_through_braced_imports_is_found() {
        // maps names a probe inside a group; the probe names maps plainly.
        let tree = [
            module("", "mod maps; mod probes;"),
            module(
                "maps",
                "use crate::{probes::arrays::Scratch, x};\nuse super::{y};",
            ),
            module("probes", "mod arrays; mod futex;"),
            module("probes::arrays", "use crate::maps::EVENTS;"),
            module("probes::futex", "use crate::maps;"),
        ];
        assert_eq!(
            circles("k", &tree),
            [
                "k: import circle among modules: maps <-> probes::arrays",
                "k: import circle among folders: maps <-> probes",
            ]
        );
        // Without the group, no circle.
        let mut tree = tree;
        tree[1] = module("maps", "use crate::x;");
        assert!(circles("k", &tree).is_empty());
    }
}
