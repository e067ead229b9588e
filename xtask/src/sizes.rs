//! The function-size check: no function of the product's code (`crates/acp-usage/src` and
//! `crates/acp-usage-core/src`) over 100 lines, and no constructor over 5 parameters. Run by
//! `cargo test --workspace` (the test at the end) and by `cargo xtask sizes`.
//!
//! A function that does not fit on two screens, or a constructor whose call is a row of
//! positional arguments, is where a newcomer stops reading; the check keeps the relay of short
//! functions the code was split into. Like the cycle check it reads the source text, not the
//! compiler's view: comments, strings (raw ones too) and character literals are blanked first,
//! newlines kept, so a brace inside them does not count (a lifetime `'a` is no literal). A
//! function is measured from the line of its `fn` to the line of its closing brace (its doc
//! comment and attributes are not counted). A constructor is a function named `new`, `with_*`
//! or `from_*`, or one returning `Self` or the type of its `impl` (bare, or in a `Result` or
//! `Option`); `self` is not counted among its parameters. Test code is left out: files named
//! `tests.rs`, directories named `tests`, the files of modules declared under `#[cfg(test)]`,
//! and items under `#[cfg(test)]`.

use std::fmt;
use std::path::{Path, PathBuf};

/// The most lines a function may have, from its `fn` line to its closing brace.
pub const MAX_LINES: usize = 100;
/// The most parameters a constructor may take, `self` not counted.
pub const MAX_PARAMS: usize = 5;
/// The source trees checked, under the workspace root.
pub const ROOTS: [&str; 2] = ["crates/acp-usage/src", "crates/acp-usage-core/src"];

/// A function with a body, as the scan measured it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Function {
    pub name: String,
    /// The line of its `fn`, from 1.
    pub line: usize,
    /// From the `fn` line to the closing brace's, both counted.
    pub lines: usize,
    /// Its parameters, `self` not counted.
    pub params: usize,
    pub constructor: bool,
}

impl Function {
    /// What the function breaks, if anything.
    fn problems(&self) -> Vec<Problem> {
        let mut out = Vec::new();
        if self.lines > MAX_LINES {
            out.push(Problem::Long(self.lines));
        }
        if self.constructor && self.params > MAX_PARAMS {
            out.push(Problem::Params(self.params));
        }
        out
    }
}

/// A rule a function breaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Problem {
    /// Its length in lines.
    Long(usize),
    /// A constructor's parameters.
    Params(usize),
}

/// One function that breaks a rule, where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub file: String,
    pub line: usize,
    pub name: String,
    pub problem: Problem,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Finding { file, line, name, .. } = self;
        match self.problem {
            Problem::Long(n) => write!(
                f,
                "{file}:{line}: fn {name} is {n} lines (at most {MAX_LINES}): split it into \
                 its steps"
            ),
            Problem::Params(n) => write!(
                f,
                "{file}:{line}: constructor fn {name} takes {n} parameters (at most \
                 {MAX_PARAMS}): pass a struct"
            ),
        }
    }
}

/// What the workspace's scan found: how many functions it measured (a scan that found none
/// would pass for the wrong reason) and the ones that break a rule.
#[derive(Debug, Default)]
pub struct Scan {
    pub functions: usize,
    pub findings: Vec<Finding>,
}

/// Scans [`ROOTS`] under the workspace at `root`.
pub fn workspace(root: &Path) -> anyhow::Result<Scan> {
    let mut scan = Scan::default();
    for dir in ROOTS {
        let mut files = Vec::new();
        collect(&root.join(dir), &mut files)?;
        files.sort();
        let mut sources = Vec::new();
        let mut test_modules = Vec::new();
        for file in files {
            let source = std::fs::read_to_string(&file)
                .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", file.display()))?;
            test_modules.extend(test_module_paths(&file, &blank(&source)));
            sources.push((file, source));
        }
        for (file, source) in sources {
            if test_modules.iter().any(|m| file.starts_with(m) || file == m.with_extension("rs")) {
                continue;
            }
            let name = file.strip_prefix(root).unwrap_or(&file).display().to_string();
            let functions = functions(&source);
            scan.functions += functions.len();
            scan.findings.extend(findings(&name, &functions));
        }
    }
    Ok(scan)
}

/// The rules `functions` of file `file` break.
pub fn findings(file: &str, functions: &[Function]) -> Vec<Finding> {
    let mut out = Vec::new();
    for f in functions {
        for problem in f.problems() {
            out.push(Finding {
                file: file.to_owned(),
                line: f.line,
                name: f.name.clone(),
                problem,
            });
        }
    }
    out
}

/// The `.rs` files under `dir`, test files and directories left out.
fn collect(dir: &Path, out: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    let entries = std::fs::read_dir(dir)
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", dir.display()))?;
    for entry in entries {
        let path = entry?.path();
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        if path.is_dir() {
            if name != "tests" {
                collect(&path, out)?;
            }
        } else if name.ends_with(".rs") && name != "tests.rs" {
            out.push(path);
        }
    }
    Ok(())
}

/// Where the modules `file` declares by file under `#[cfg(test)]` live (`x`, for `x.rs` and
/// the directory `x/`), so that their files are left out (`test_support.rs`).
fn test_module_paths(file: &Path, blanked: &str) -> Vec<PathBuf> {
    let dir = file.parent().unwrap_or(Path::new("."));
    let stem = file.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    // A `mod.rs`, `lib.rs` or `main.rs` declares its children beside it; `a.rs` under `a/`.
    let children = if matches!(stem.as_str(), "mod" | "lib" | "main") {
        dir.to_owned()
    } else {
        dir.join(stem)
    };
    let b = blanked.as_bytes();
    let mut out = Vec::new();
    for at in attribute_starts(b, "#[cfg(test)]") {
        let (start, end) = item_after(b, at + "#[cfg(test)]".len());
        let item = &blanked[start..end];
        let mut words = item.split_whitespace().filter(|w| !w.starts_with("pub"));
        if words.next() == Some("mod")
            && let Some(name) = words.next().and_then(|n| n.strip_suffix(';'))
        {
            out.push(children.join(name));
        }
    }
    out
}

/// The functions with a body in `source`, test code left out.
pub fn functions(source: &str) -> Vec<Function> {
    let text = without_test_items(&blank(source));
    let b = text.as_bytes();
    let impls = impls(b);
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(at) = find_word(b, "fn", i) {
        i = at + 2;
        let Some(head) = signature(b, at) else { continue };
        let Some(close) = matching(b, head.body) else { continue };
        let impl_type = impls
            .iter()
            .filter(|(_, open, close)| *open < at && at < *close)
            .max_by_key(|(_, open, _)| *open)
            .map(|(name, _, _)| name.as_str());
        let line = line_of(b, at);
        out.push(Function {
            constructor: is_constructor(&head.name, &head.returns, impl_type),
            name: head.name,
            line,
            lines: line_of(b, close) - line + 1,
            params: head.params,
        });
    }
    out
}

/// What a function's signature says: its name, how many parameters, its return type, and
/// where its body's opening brace is.
struct Signature {
    name: String,
    params: usize,
    returns: String,
    body: usize,
}

/// Reads the signature of the `fn` at `at`; `None` for a `fn` type (`fn(u8) -> u8`), a
/// declaration without a body, or what the scan cannot read.
fn signature(b: &[u8], at: usize) -> Option<Signature> {
    let start = skip_space(b, at + 2);
    let end = start + b[start..].iter().take_while(|c| is_ident(**c)).count();
    if end == start || b[start].is_ascii_digit() {
        return None;
    }
    let name = String::from_utf8_lossy(&b[start..end]).into_owned();
    let mut i = skip_space(b, end);
    if b.get(i) == Some(&b'<') {
        i = skip_space(b, after_angles(b, i)?);
    }
    if b.get(i) != Some(&b'(') {
        return None;
    }
    let close = matching(b, i)?;
    let params = split_top_level(&b[i + 1..close]).iter().filter(|p| !is_self(p)).count();
    // The body is the first `{` outside brackets (`-> [u8; 4]` holds a `;`); a `;` first ends
    // a declaration.
    let mut depth = 0usize;
    let mut j = close + 1;
    while j < b.len() {
        match b[j] {
            b'(' | b'[' => depth += 1,
            b')' | b']' => depth = depth.saturating_sub(1),
            b'{' if depth == 0 => break,
            b';' if depth == 0 => return None,
            _ => {}
        }
        j += 1;
    }
    if j >= b.len() {
        return None;
    }
    let tail = String::from_utf8_lossy(&b[close + 1..j]).into_owned();
    let tail = tail.split(" where").next().unwrap_or_default().split("\nwhere").next();
    let returns = tail.unwrap_or_default().trim().trim_start_matches("->").trim().to_owned();
    Some(Signature { name, params, returns, body: j })
}

/// Whether a function is a constructor: by name, or by returning its own type.
fn is_constructor(name: &str, returns: &str, impl_type: Option<&str>) -> bool {
    if name == "new" || name.starts_with("with_") || name.starts_with("from_") {
        return true;
    }
    // A fallible constructor returns itself in a `Result` or an `Option`.
    let mut ty = returns.trim();
    while let Some(open) = ty.find('<') {
        if !matches!(last_segment(&ty[..open]), "Result" | "Option") {
            break;
        }
        ty = first_argument(&ty[open + 1..]);
    }
    let ty = last_segment(ty.split('<').next().unwrap_or_default());
    !ty.is_empty() && (ty == "Self" || Some(ty) == impl_type)
}

/// `a::b::C` → `C`.
fn last_segment(path: &str) -> &str {
    path.trim().rsplit("::").next().unwrap_or_default().trim()
}

/// The first generic argument of `A, B>` (what follows a `<`).
fn first_argument(s: &str) -> &str {
    let mut depth = 0usize;
    for (k, c) in s.char_indices() {
        match c {
            '<' | '(' | '[' => depth += 1,
            '>' | ')' | ']' if depth > 0 => depth -= 1,
            ',' | '>' if depth == 0 => return s[..k].trim(),
            _ => {}
        }
    }
    s.trim()
}

/// Whether a parameter is the receiver (`self`, `&self`, `&'a mut self`, `self: Box<Self>`).
fn is_self(param: &str) -> bool {
    let pattern = param.split(':').next().unwrap_or_default().replace('&', " ");
    let mut words = pattern.split_whitespace().filter(|w| !w.starts_with('\'') && *w != "mut");
    words.next() == Some("self") && words.next().is_none()
}

/// The `impl` blocks of `b`: the type each implements for, and its braces.
fn impls(b: &[u8]) -> Vec<(String, usize, usize)> {
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(at) = find_word(b, "impl", i) {
        i = at + 4;
        // An `impl` block starts an item; `impl Trait` in a type follows `->`, `:`, `(`, ...
        let before = b[..at].iter().rposition(|c| !c.is_ascii_whitespace());
        let item_start = match before {
            None => true,
            Some(k) => matches!(b[k], b'}' | b';' | b'{' | b']') || b[..=k].ends_with(b"unsafe"),
        };
        if !item_start {
            continue;
        }
        let mut j = skip_space(b, i);
        if b.get(j) == Some(&b'<') {
            let Some(after) = after_angles(b, j) else { continue };
            j = after;
        }
        let Some(open) = b[j..].iter().position(|c| *c == b'{').map(|k| j + k) else { continue };
        let Some(close) = matching(b, open) else { continue };
        let header = String::from_utf8_lossy(&b[j..open]).into_owned();
        let header = header.split(" where").next().unwrap_or_default();
        // `impl Trait for Type`: the type is after `for`.
        let ty = header.split(" for ").nth(1).unwrap_or(header);
        let ty = ty.split('<').next().unwrap_or_default();
        let name = ty.rsplit(|c: char| !is_ident(c as u8) || !c.is_ascii()).find(|s| !s.is_empty());
        out.push((name.unwrap_or_default().to_owned(), open, close));
    }
    out
}

/// `source` with comments, strings and character literals blanked (newlines kept, every other
/// byte a space), so that braces and `fn`s inside them are not read as code.
pub fn blank(source: &str) -> String {
    let b = source.as_bytes();
    let mut out = b.to_vec();
    let mut i = 0;
    while i < b.len() {
        let literal = if b[i..].starts_with(b"//") {
            Some(b[i..].iter().position(|c| *c == b'\n').map_or(b.len(), |k| i + k))
        } else if b[i..].starts_with(b"/*") {
            Some(block_comment_end(b, i))
        } else if let Some(end) = raw_string_end(b, i) {
            Some(end)
        } else if b[i] == b'"' {
            Some(string_end(b, i))
        } else if b[i] == b'\'' {
            char_literal_end(source, i)
        } else {
            None
        };
        let Some(end) = literal else {
            i += 1;
            continue;
        };
        let end = end.min(b.len());
        for c in &mut out[i..end] {
            if *c != b'\n' {
                *c = b' ';
            }
        }
        i = end;
    }
    String::from_utf8(out).expect("only whole characters are blanked")
}

/// The end of the block comment opening at `i`; they nest.
fn block_comment_end(b: &[u8], mut i: usize) -> usize {
    let mut depth = 0usize;
    while i < b.len() {
        if b[i..].starts_with(b"/*") {
            depth += 1;
            i += 2;
        } else if b[i..].starts_with(b"*/") {
            depth -= 1;
            i += 2;
            if depth == 0 {
                return i;
            }
        } else {
            i += 1;
        }
    }
    b.len()
}

/// The end of a raw string (`r"…"`, `r#"…"#`, `br#"…"#`) starting at `i`, if one does.
fn raw_string_end(b: &[u8], i: usize) -> Option<usize> {
    if b[i] != b'r' {
        return None;
    }
    // Not the `r` ending an identifier (`for"` cannot be, but `bar#` could be read as one);
    // a `b` or `c` prefix is part of the literal.
    let prefix_ok = |k: usize| k == 0 || !is_ident(b[k - 1]);
    if !(prefix_ok(i) || (matches!(b[i - 1], b'b' | b'c') && prefix_ok(i - 1))) {
        return None;
    }
    let hashes = b[i + 1..].iter().take_while(|c| **c == b'#').count();
    let quote = i + 1 + hashes;
    if b.get(quote) != Some(&b'"') {
        return None;
    }
    let mut closing = vec![b'"'];
    closing.extend(std::iter::repeat_n(b'#', hashes));
    let from = quote + 1;
    Some(
        b[from..]
            .windows(closing.len())
            .position(|w| w == closing)
            .map_or(b.len(), |k| from + k + closing.len()),
    )
}

/// The end of the string whose opening quote is at `i`.
fn string_end(b: &[u8], i: usize) -> usize {
    let mut j = i + 1;
    while j < b.len() {
        match b[j] {
            b'\\' => j += 2,
            b'"' => return j + 1,
            _ => j += 1,
        }
    }
    b.len()
}

/// The end of the character literal whose quote is at `i`; `None` for a lifetime or label
/// (`'a`, `'outer:`), which has no closing quote after its one character.
fn char_literal_end(source: &str, i: usize) -> Option<usize> {
    let b = source.as_bytes();
    if b.get(i + 1) == Some(&b'\\') {
        // `'\n'`, `'\''`, `'\u{1F600}'`: the escaped character, then up to the quote.
        let from = i + 3;
        return b.get(from..)?.iter().position(|c| *c == b'\'').map(|k| from + k + 1);
    }
    let c = source.get(i + 1..)?.chars().next()?;
    let after = i + 1 + c.len_utf8();
    (c != '\'' && b.get(after) == Some(&b'\'')).then_some(after + 1)
}

/// `text` with every item under `#[cfg(test)]` blanked (a test module, helper or `use`).
fn without_test_items(text: &str) -> String {
    let mut b = text.as_bytes().to_vec();
    for at in attribute_starts(text.as_bytes(), "#[cfg(test)]") {
        let (_, end) = item_after(text.as_bytes(), at + "#[cfg(test)]".len());
        for c in &mut b[at..end] {
            if *c != b'\n' {
                *c = b' ';
            }
        }
    }
    String::from_utf8(b).expect("only ASCII code is blanked")
}

/// Where `attribute` occurs in `b`.
fn attribute_starts(b: &[u8], attribute: &str) -> Vec<usize> {
    let a = attribute.as_bytes();
    b.windows(a.len()).enumerate().filter(|(_, w)| *w == a).map(|(k, _)| k).collect()
}

/// The item that starts after an attribute ending at `from` (other attributes skipped): its
/// start, and the end of its `;` or of its braces.
fn item_after(b: &[u8], from: usize) -> (usize, usize) {
    let mut i = skip_space(b, from);
    while b.get(i) == Some(&b'#') {
        let Some(open) = b[i..].iter().position(|c| *c == b'[').map(|k| i + k) else { break };
        i = skip_space(b, matching(b, open).map_or(b.len(), |k| k + 1));
    }
    let start = i;
    let mut depth = 0usize;
    while i < b.len() {
        match b[i] {
            b'(' | b'[' => depth += 1,
            b')' | b']' => depth = depth.saturating_sub(1),
            b';' if depth == 0 => return (start, i + 1),
            b'{' if depth == 0 => return (start, matching(b, i).map_or(b.len(), |k| k + 1)),
            _ => {}
        }
        i += 1;
    }
    (start, b.len())
}

/// The next occurrence of `word` at or after `from` that is a whole word.
fn find_word(b: &[u8], word: &str, from: usize) -> Option<usize> {
    let w = word.as_bytes();
    let mut i = from;
    while i + w.len() <= b.len() {
        let at = i + b[i..].windows(w.len()).position(|x| x == w)?;
        let before = at == 0 || !is_ident(b[at - 1]);
        let after = b.get(at + w.len()).is_none_or(|c| !is_ident(*c));
        if before && after {
            return Some(at);
        }
        i = at + 1;
    }
    None
}

/// The index of the bracket closing the one at `open` (`(`, `[` or `{`, any nested within).
fn matching(b: &[u8], open: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (k, c) in b.iter().enumerate().skip(open) {
        match c {
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(k);
                }
            }
            _ => {}
        }
    }
    None
}

/// The index after the `>` closing the `<` at `open` (the `>` of a `->` closes nothing).
fn after_angles(b: &[u8], open: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (k, c) in b.iter().enumerate().skip(open) {
        match c {
            b'<' => depth += 1,
            b'>' if k > 0 && b[k - 1] == b'-' => {}
            b'>' => {
                depth -= 1;
                if depth == 0 {
                    return Some(k + 1);
                }
            }
            _ => {}
        }
    }
    None
}

/// A parameter list split at its top-level commas, empty parts (a trailing comma) left out.
fn split_top_level(params: &[u8]) -> Vec<String> {
    let mut parts = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (k, c) in params.iter().enumerate() {
        match c {
            b'(' | b'[' | b'{' | b'<' => depth += 1,
            b'>' if k > 0 && params[k - 1] == b'-' => {}
            b')' | b']' | b'}' | b'>' => depth = depth.saturating_sub(1),
            b',' if depth == 0 => {
                parts.push(String::from_utf8_lossy(&params[start..k]).into_owned());
                start = k + 1;
            }
            _ => {}
        }
    }
    parts.push(String::from_utf8_lossy(&params[start..]).into_owned());
    parts.retain(|p| !p.trim().is_empty());
    parts
}

fn skip_space(b: &[u8], mut i: usize) -> usize {
    while b.get(i).is_some_and(u8::is_ascii_whitespace) {
        i += 1;
    }
    i
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// The line (from 1) of byte `at`.
fn line_of(b: &[u8], at: usize) -> usize {
    b[..at].iter().filter(|c| **c == b'\n').count() + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A function `name` of exactly `lines` lines.
    fn long(name: &str, lines: usize) -> String {
        let mut s = format!("fn {name}() {{\n");
        for _ in 0..lines - 2 {
            s.push_str("    let _x = 1;\n");
        }
        s.push_str("}\n");
        s
    }

    fn problems(source: &str) -> Vec<String> {
        findings("f.rs", &functions(source)).iter().map(ToString::to_string).collect()
    }

    #[test]
    fn a_function_of_101_lines_fails_and_of_100_passes() {
        let source = format!("{}\n{}", long("fits", 100), long("too_long", 101));
        let fns = functions(&source);
        assert_eq!(
            fns.iter().map(|f| (f.name.as_str(), f.lines)).collect::<Vec<_>>(),
            [("fits", 100), ("too_long", 101)]
        );
        assert_eq!(
            problems(&source),
            ["f.rs:102: fn too_long is 101 lines (at most 100): split it into its steps"]
        );
    }

    #[test]
    fn a_constructor_of_6_parameters_fails_and_of_5_passes() {
        let source = "struct S;\n\
            impl S {\n\
                pub fn new(a: u8, b: u8, c: u8, d: u8, e: u8, f: u8) -> S { S }\n\
                fn with_five(&self, a: u8, b: u8, c: u8, d: u8, e: u8) -> S { S }\n\
                fn make(a: u8, b: u8, c: u8, d: u8, e: u8, f: u8) -> anyhow::Result<Self> {}\n\
                fn made<'a>(a: &'a u8, b: HashMap<u8, u8>, c: impl Fn(u8, u8) -> u8, d: (u8, u8),\n\
                    e: [u8; 2], f: u8) -> Option<S> where S: Sized {}\n\
                fn helper(&mut self, a: u8, b: u8, c: u8, d: u8, e: u8, f: u8) -> u8 { 0 }\n\
            }\n\
            fn from_parts(a: u8, b: u8, c: u8, d: u8, e: u8, f: u8,) -> u8 { 0 }\n\
            trait T { fn new(a: u8, b: u8, c: u8, d: u8, e: u8, f: u8) -> Self; }";
        let fns = functions(source);
        let read: Vec<_> = fns.iter().map(|f| (f.name.as_str(), f.params, f.constructor)).collect();
        assert_eq!(
            read,
            [
                ("new", 6, true),
                ("with_five", 5, true),
                ("make", 6, true),
                ("made", 6, true),
                ("helper", 6, false),
                ("from_parts", 6, true),
            ]
        );
        assert_eq!(
            problems(source),
            [
                "f.rs:3: constructor fn new takes 6 parameters (at most 5): pass a struct",
                "f.rs:5: constructor fn make takes 6 parameters (at most 5): pass a struct",
                "f.rs:6: constructor fn made takes 6 parameters (at most 5): pass a struct",
                "f.rs:10: constructor fn from_parts takes 6 parameters (at most 5): pass a struct",
            ]
        );
    }

    #[test]
    fn braces_in_strings_comments_and_char_literals_do_not_count() {
        let source = r####"fn tricky<'a>(x: &'a str) -> char {
    // a } in a comment, and fn hidden() { in one
    /* a block } with /* a nested { */ comment } */
    let s = "a } and \" and {";
    let r = r#"a raw } with " inside {"#;
    let b = br##"{"#}"##;
    let c = '}';
    let d = '{';
    let e = '\'';
    let f = b'}';
    let g = '\u{7D}';
    let h: &'static str = "{";
    'outer: loop { break 'outer; }
    '●'
}
fn after() {}
"####;
        let fns = functions(source);
        let read: Vec<_> = fns.iter().map(|f| (f.name.as_str(), f.line, f.lines)).collect();
        assert_eq!(read, [("tricky", 1, 15), ("after", 16, 1)]);
        assert_eq!(blank(source).len(), source.len());
    }

    #[test]
    fn test_code_is_not_measured() {
        let source = format!(
            "fn kept() {{}}\n#[cfg(test)]\nmod tests {{\n{}}}\n#[cfg(test)]\n#[allow(unused)]\n{}",
            long("in_tests", 120),
            long("helper", 120)
        );
        let names: Vec<String> = functions(&source).into_iter().map(|f| f.name).collect();
        assert_eq!(names, ["kept"]);
        let declared = test_module_paths(
            Path::new("src/a/b.rs"),
            &blank("#[cfg(test)]\nmod tests;\n#[cfg(test)] pub(crate) mod support;\nmod kept;"),
        );
        assert_eq!(declared, [Path::new("src/a/b/tests"), Path::new("src/a/b/support")]);
    }

    #[test]
    fn the_workspace_has_no_long_function() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        let scan = workspace(root).unwrap();
        let found = scan.functions;
        assert!(found > 500, "only {found} functions found under {}", root.display());
        let findings: Vec<String> = scan.findings.iter().map(ToString::to_string).collect();
        assert!(
            findings.is_empty(),
            "functions over {MAX_LINES} lines or constructors over {MAX_PARAMS} parameters \
             (split a function into its steps; give a constructor a struct):\n{}",
            findings.join("\n")
        );
    }
}
