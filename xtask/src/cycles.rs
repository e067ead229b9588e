//! The module-cycle check: no module of the workspace's crates reaches a sibling that reaches it
//! back, directly or around a longer loop. Run by `cargo test --workspace` (the test at the end)
//! and by `cargo xtask cycles`.
//!
//! A cycle between siblings means neither can be read, changed or moved without the other; the
//! check keeps the layering the modules were untangled into. It is a scan of the source text,
//! not of the compiler's view, because that compiles in no time and needs no tool installed:
//! every `crate::a::b` and `super::x` path (in `use` lines, braces included, and in code) is
//! resolved against the modules the files declare, and a path from module `p::a…` to `p::b…`
//! is an edge `a -> b` among the children of `p`, the granularity at which files and
//! directories are arranged. A path to an item defined in `p`'s own file (not a child module)
//! is no edge: a child may use what its parent defines. Re-exports are not followed, and test
//! code (`#[cfg(test)]`) is left out. Only the crates' libraries are read (`src/lib.rs` and the
//! files it declares); `cargo modules` would give the compiler's view but must be installed.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module's path inside its crate (`["sources", "tap", "proxy"]`; the crate root is empty).
type ModPath = Vec<String>;
/// A path named in code: the module it was written in, and the absolute path it names.
type Ref = (ModPath, ModPath);
/// A child module a file declares by file (`mod x;`), with its `#[path]` when it has one.
type Declared = (String, Option<String>);

/// One crate's modules: every file's module path, and the paths each module's code names.
#[derive(Debug, Default)]
pub struct Crate {
    /// The crate, for messages (`acp-usage`).
    pub name: String,
    /// Modules that are files or directories.
    modules: BTreeSet<ModPath>,
    /// The module a path was written in (inline modules included) and the absolute path.
    refs: Vec<Ref>,
}

impl Crate {
    /// Reads the library of the crate in `dir` (`dir/src/lib.rs` and what it declares by file).
    pub fn read(dir: &Path) -> anyhow::Result<Crate> {
        let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let mut krate = Crate { name, ..Crate::default() };
        let root = dir.join("src");
        let lib = root.join("lib.rs");
        if lib.exists() {
            krate.read_file(&lib, Vec::new(), &root)?;
        }
        Ok(krate)
    }

    /// Adds one file's source as module `module`; returns the child modules it declares by file.
    pub fn add_source(&mut self, module: ModPath, source: &str) -> Vec<Declared> {
        self.modules.insert(module.clone());
        let tokens = tokenize(source);
        let (refs, declared) = scan(&tokens, &module);
        self.refs.extend(refs);
        declared
    }

    fn read_file(&mut self, file: &Path, module: ModPath, children: &Path) -> anyhow::Result<()> {
        let source = std::fs::read_to_string(file)
            .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", file.display()))?;
        for (name, path_attr) in self.add_source(module.clone(), &source) {
            let mut child = module.clone();
            child.push(name.clone());
            let (file, dir) = match path_attr {
                // `#[path]` is relative to the directory of the declaring file.
                Some(p) => {
                    let at = file.parent().unwrap_or(Path::new(".")).join(p);
                    let dir = at.with_extension("");
                    (at, dir)
                }
                None => {
                    let flat = children.join(format!("{name}.rs"));
                    if flat.exists() {
                        (flat, children.join(&name))
                    } else {
                        (children.join(&name).join("mod.rs"), children.join(&name))
                    }
                }
            };
            if file.exists() {
                self.read_file(&file, child, &dir)?;
            }
        }
        Ok(())
    }

    /// The edges between siblings: parent, from child, to child.
    fn edges(&self) -> BTreeSet<(ModPath, String, String)> {
        let mut edges = BTreeSet::new();
        for (from, to) in &self.refs {
            let k = from.iter().zip(to).take_while(|(a, b)| a == b).count();
            if k >= from.len() || k >= to.len() {
                continue; // a module naming its own subtree, or an ancestor's item
            }
            let (a, b) = (&from[..=k], &to[..=k]);
            if self.modules.contains(a) && self.modules.contains(b) {
                edges.insert((from[..k].to_vec(), from[k].clone(), to[k].clone()));
            }
        }
        edges
    }

    /// Every cycle among siblings, each as `parent: a -> b -> a`.
    pub fn cycles(&self) -> Vec<String> {
        let mut by_parent: BTreeMap<ModPath, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
        for (parent, a, b) in self.edges() {
            by_parent.entry(parent).or_default().entry(a).or_default().insert(b);
        }
        let mut out = Vec::new();
        for (parent, graph) in by_parent {
            for component in strongly_connected(&graph) {
                let place = if parent.is_empty() {
                    format!("{} crate root", self.name)
                } else {
                    format!("{}::{}", self.name, parent.join("::"))
                };
                let members: Vec<String> = component
                    .iter()
                    .map(|m| {
                        let to: Vec<&str> = graph[m]
                            .iter()
                            .filter(|t| component.contains(*t))
                            .map(String::as_str)
                            .collect();
                        format!("{m} -> {}", to.join(", "))
                    })
                    .collect();
                out.push(format!("{place}: {}", members.join("; ")));
            }
        }
        out
    }
}

/// The strongly connected components of more than one module.
fn strongly_connected(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<BTreeSet<String>> {
    // Reachability by search from every node: the graphs have tens of nodes.
    let reach = |start: &String| {
        let mut seen = BTreeSet::new();
        let mut stack = vec![start.clone()];
        while let Some(n) = stack.pop() {
            for m in graph.get(&n).into_iter().flatten() {
                if seen.insert(m.clone()) {
                    stack.push(m.clone());
                }
            }
        }
        seen
    };
    let reaches: BTreeMap<&String, BTreeSet<String>> =
        graph.keys().map(|n| (n, reach(n))).collect();
    let mut done = BTreeSet::new();
    let mut out = Vec::new();
    for (n, from_n) in &reaches {
        if done.contains(*n) || !from_n.contains(*n) {
            continue;
        }
        let component: BTreeSet<String> = from_n
            .iter()
            .filter(|m| reaches.get(m).is_some_and(|r| r.contains(*n)))
            .cloned()
            .collect();
        done.extend(component.iter().cloned());
        out.push(component);
    }
    out
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    Ident(String),
    Punct(char),
    /// `::`
    Path,
    /// A string literal's content (for `#[path = "..."]`).
    Str(String),
}

/// Identifiers, punctuation and strings, without comments; lifetimes and chars are dropped.
fn tokenize(src: &str) -> Vec<Tok> {
    let chars: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if c == '"' || ((c == 'r' || c == 'b') && matches!(next, Some('"' | '#' | 'r'))) {
            // Strings: plain, byte, raw (`r#"…"#`), byte raw.
            let mut j = i;
            if chars[j] == 'b' {
                j += 1;
            }
            let raw = chars.get(j) == Some(&'r');
            if raw {
                j += 1;
            }
            let mut hashes = 0;
            while chars.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if chars.get(j) != Some(&'"') {
                // `r#ident` or an identifier starting with r/b.
                let start = i;
                i += 1;
                while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                    i += 1;
                }
                out.push(Tok::Ident(chars[start..i].iter().collect()));
                continue;
            }
            j += 1;
            let mut text = String::new();
            while j < chars.len() {
                if !raw && chars[j] == '\\' {
                    j += 2;
                    continue;
                }
                if chars[j] == '"' && (0..hashes).all(|h| chars.get(j + 1 + h) == Some(&'#')) {
                    j += 1 + hashes;
                    break;
                }
                text.push(chars[j]);
                j += 1;
            }
            out.push(Tok::Str(text));
            i = j;
        } else if c == '\'' {
            // A char literal ('x', '\n', '\u{..}') or a lifetime ('a).
            if next == Some('\\') {
                i += 2;
                while i < chars.len() && chars[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if chars.get(i + 2) == Some(&'\'') {
                i += 3;
            } else {
                i += 1;
            }
        } else if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            out.push(Tok::Ident(chars[start..i].iter().collect()));
        } else if c.is_numeric() {
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
        } else if c == ':' && next == Some(':') {
            out.push(Tok::Path);
            i += 2;
        } else {
            if !c.is_whitespace() {
                out.push(Tok::Punct(c));
            }
            i += 1;
        }
    }
    out
}

fn ident(t: Option<&Tok>) -> Option<&str> {
    match t {
        Some(Tok::Ident(s)) => Some(s),
        _ => None,
    }
}

/// The absolute paths named in a file that is module `module`, each with the (inline) module it
/// was written in, and the child modules it declares by file (`mod x;`, with its `#[path]`).
/// Test code (`#[cfg(test)]` items, modules included) is skipped: tests reach into whatever they
/// check and are reached by nothing, so they close no loop of the product's layering.
fn scan(toks: &[Tok], module: &ModPath) -> (Vec<Ref>, Vec<Declared>) {
    let mut refs = Vec::new();
    let mut declared = Vec::new();
    // Inline modules open at this point: their name and the brace depth inside them.
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let mut path_attr: Option<String> = None;
    // `#[cfg(test)]` seen and its item not ended yet; the depth of a test item's body.
    let mut test_pending = false;
    let mut test_body: Option<usize> = None;
    let mut i = 0;
    while i < toks.len() {
        let in_test = test_pending || test_body.is_some();
        match &toks[i] {
            Tok::Punct('{') => {
                depth += 1;
                if test_pending {
                    test_pending = false;
                    test_body = Some(depth);
                }
            }
            Tok::Punct('}') => {
                if test_body == Some(depth) {
                    test_body = None;
                }
                depth = depth.saturating_sub(1);
                if inline.last().is_some_and(|(_, d)| *d > depth) {
                    inline.pop();
                }
            }
            Tok::Punct('#') if ident(toks.get(i + 2)) == Some("path") => {
                if let Some(Tok::Str(p)) = toks.get(i + 4) {
                    path_attr = Some(p.clone());
                }
            }
            Tok::Punct('#')
                if ident(toks.get(i + 2)) == Some("cfg")
                    && ident(toks.get(i + 4)) == Some("test")
                    && toks.get(i + 5) == Some(&Tok::Punct(')')) =>
            {
                test_pending = test_body.is_none();
            }
            Tok::Ident(kw) if kw == "mod" => {
                if let Some(name) = ident(toks.get(i + 1)) {
                    match toks.get(i + 2) {
                        Some(Tok::Punct(';')) if inline.is_empty() && !in_test => {
                            declared.push((name.to_owned(), path_attr.take()));
                        }
                        Some(Tok::Punct('{')) => {
                            inline.push((name.to_owned(), depth + 1));
                        }
                        _ => {}
                    }
                }
            }
            Tok::Ident(kw)
                if (kw == "crate" || kw == "super")
                    && toks.get(i + 1) == Some(&Tok::Path)
                    && toks.get(i.wrapping_sub(1)) != Some(&Tok::Path) =>
            {
                let mut from = module.clone();
                from.extend(inline.iter().map(|(n, _)| n.clone()));
                let mut base = if kw == "crate" { Vec::new() } else { parent(&from) };
                let mut j = i + 2;
                while ident(toks.get(j)) == Some("super") && toks.get(j + 1) == Some(&Tok::Path) {
                    base = parent(&base);
                    j += 2;
                }
                let mut paths = Vec::new();
                tree(toks, &mut j, base, &mut paths);
                if !in_test {
                    refs.extend(paths.into_iter().map(|p| (from.clone(), p)));
                }
                i = j;
                continue;
            }
            Tok::Punct(';') => {
                path_attr = None;
                test_pending = false;
            }
            _ => {}
        }
        i += 1;
    }
    (refs, declared)
}

fn parent(m: &ModPath) -> ModPath {
    m[..m.len().saturating_sub(1)].to_vec()
}

/// Reads a path's rest from `toks[*j]` (after a `::`): segments, `{…}` groups, `*`, `self`.
fn tree(toks: &[Tok], j: &mut usize, mut prefix: ModPath, out: &mut Vec<ModPath>) {
    loop {
        match toks.get(*j) {
            Some(Tok::Punct('{')) => {
                *j += 1;
                while let Some(t) = toks.get(*j) {
                    if *t == Tok::Punct('}') {
                        *j += 1;
                        break;
                    }
                    if *t == Tok::Punct(',') {
                        *j += 1;
                        continue;
                    }
                    let before = *j;
                    tree(toks, j, prefix.clone(), out);
                    // Whatever follows an item (`as x`): skipped to the next `,` or `}`.
                    while !matches!(toks.get(*j), None | Some(Tok::Punct(',' | '}'))) {
                        *j += 1;
                    }
                    if *j == before {
                        *j += 1;
                    }
                }
                return;
            }
            Some(Tok::Ident(seg)) => {
                if seg != "self" {
                    prefix.push(seg.clone());
                }
                *j += 1;
                if toks.get(*j) == Some(&Tok::Path)
                    && matches!(toks.get(*j + 1), Some(Tok::Ident(_) | Tok::Punct('{')))
                {
                    *j += 1;
                    continue;
                }
                out.push(prefix);
                return;
            }
            _ => {
                // `*`, `<`: the path so far.
                out.push(prefix);
                return;
            }
        }
    }
}

/// The libraries of `crates/*` under `root`.
pub fn workspace(root: &Path) -> anyhow::Result<Vec<Crate>> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(root.join("crates"))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("src").is_dir())
        .collect();
    dirs.sort();
    dirs.iter().map(|d| Crate::read(d)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(files: &[(&str, &str)]) -> Crate {
        let mut krate = Crate { name: "fixture".into(), ..Crate::default() };
        for (path, source) in files {
            let module: ModPath =
                path.split("::").filter(|s| !s.is_empty()).map(str::to_owned).collect();
            krate.add_source(module, source);
        }
        krate
    }

    #[test]
    fn a_cycle_between_siblings_is_found() {
        let krate = fixture(&[
            ("", "mod tap;"),
            ("tap", "mod proxy; mod call; mod http;"),
            ("tap::http", "pub struct State;"),
            ("tap::call", "use super::http::State; fn f() { super::proxy::g() }"),
            ("tap::proxy", "use super::{call, http::State};"),
        ]);
        assert_eq!(krate.cycles(), ["fixture::tap: call -> proxy; proxy -> call"]);
    }

    #[test]
    fn a_longer_loop_across_directories_is_found() {
        let krate = fixture(&[
            ("a", ""),
            ("a::x", "use crate::b::y::Thing;"),
            ("b", ""),
            ("b::y", "fn f() -> crate::c::Z { todo!() }"),
            ("c", "pub struct Z; fn g() { let _ = crate::a::x::h; }"),
        ]);
        assert_eq!(krate.cycles(), ["fixture crate root: a -> b; b -> c; c -> a"]);
    }

    #[test]
    fn parents_items_tests_comments_and_strings_are_no_edges() {
        let krate = fixture(&[
            ("tap", "pub struct Route; pub fn now_ms() {}"),
            ("tap::call", "use super::{Route, now_ms}; use super::watch;"),
            // A child naming its parent's item, an inline test module's `super`, text.
            (
                "tap::watch",
                "use super::now_ms; // super::call::x\n/* crate::tap::call */\n\
                 const S: &str = \"super::call\";\n\
                 mod inner { use super::*; fn t() { super::Pending; } }",
            ),
        ]);
        assert!(krate.cycles().is_empty(), "{:?}", krate.cycles());
        assert!(krate.edges().contains(&(vec!["tap".into()], "call".into(), "watch".into())));
    }

    #[test]
    fn an_inline_modules_super_super_reaches_the_files_siblings() {
        let krate = fixture(&[
            ("a", "fn f() { crate::b::g() }"),
            ("b", "mod inner { use super::super::a; }"),
        ]);
        assert_eq!(krate.cycles(), ["fixture crate root: a -> b; b -> a"]);
    }

    #[test]
    fn test_code_closes_no_loop() {
        let krate = fixture(&[
            ("a", "fn f() { crate::b::g() }"),
            (
                "b",
                "#[cfg(test)] mod tests { use crate::a; }\n\
                 #[cfg(test)] use crate::a::x;\n\
                 #[cfg(test)] fn helper() { crate::a::y(); }\n\
                 #[cfg(test)]\nmod more;",
            ),
        ]);
        assert!(krate.cycles().is_empty(), "{:?}", krate.cycles());
    }

    /// The check itself: the workspace's crates have no module cycle.
    #[test]
    fn the_workspace_has_no_module_cycle() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        let crates = workspace(root).unwrap();
        assert!(crates.len() >= 3, "crates not found under {}", root.display());
        let cycles: Vec<String> = crates.iter().flat_map(Crate::cycles).collect();
        assert!(
            cycles.is_empty(),
            "module cycles (a module that names a sibling which names it back, directly or \
             through others; move what both need into a module of its own):\n{}",
            cycles.join("\n")
        );
    }
}
