//! Edits of an editor's agent settings (Zed's JSON with comments, JetBrains' `acp.json`) that
//! keep every byte they do not change.
//!
//! The file is parsed with the position of every token, comments included, and changed by
//! splicing text in and out at those positions: nothing is re-serialised, so comments, spacing,
//! key order and the user's own entries stay exactly as written. Every insertion has one known
//! inverse, which [`remove`] applies to the file as it finds it later: entries go in right after
//! the object's `{` (and a comment on that line), each on a line of its own at the indentation of
//! the object's properties, with a comma after it when a property follows; taking one out takes
//! its line break, indentation, text and comma. The one change to bytes setup did not write: an
//! object written on one line (`{"a": 1}`) is opened as a person would open it, its first
//! property and its `}` on lines of their own, and it stays open after `--remove` (from there
//! on, setup and `--remove` give back each other's file byte for byte).

use std::collections::BTreeMap;
use std::ops::Range;

use jsonc_parser::ast::{Object, ObjectProp, Value};
use jsonc_parser::common::Ranged;
use jsonc_parser::tokens::Token;
use jsonc_parser::{CollectOptions, CommentCollectionStrategy, ParseOptions};

/// The key of the editor's map of agents.
const SERVERS: &str = "agent_servers";

/// How an editor's file is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dialect {
    /// The `"type"` an entry starts with (Zed's entries are tagged by it), if any.
    pub entry_type: Option<&'static str>,
    /// Whether the editor reads trailing commas. When it does, an entry added to an empty `{}`
    /// is followed by one: that comma is how [`remove`] knows to close the object up again, as
    /// the layout alone cannot tell `{}` from an empty object over two lines.
    pub trailing_commas: bool,
}

/// An entry setup wants in the editor's map of agents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wanted {
    /// The entry's name, e.g. `Codex (metered)`.
    pub key: String,
    /// What the editor runs: acp-usage, or `npx`.
    pub command: String,
    /// Its arguments: ending with `--` and the agent's command.
    pub args: Vec<String>,
    /// The variables the editor gives the agent besides its own environment (a registry
    /// entry's); written as `env` only when there are any.
    pub env: BTreeMap<String, String>,
    /// The agent's program name, to recognise an entry the user wrote that already runs it
    /// through acp-usage.
    pub program: String,
}

/// What setup does with one wanted entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Not there: added.
    Added,
    /// There with another command: its `command` and `args` replaced (and its `env`, when
    /// setup has one for it).
    Updated,
    /// There as wanted.
    Unchanged,
    /// Another entry (named here) already runs this agent through acp-usage.
    Covered(String),
    /// An entry of that name exists that does not run acp-usage: left alone.
    Taken,
}

/// A file that is not JSON with comments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyntaxError {
    /// 1-based line.
    pub line: usize,
    /// 1-based column.
    pub column: usize,
    /// What is wrong there.
    pub message: String,
}

/// Why a file cannot be edited.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EditError {
    /// It does not parse.
    Syntax(SyntaxError),
    /// The named value is not an object.
    NotAnObject(&'static str),
}

impl std::fmt::Display for EditError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EditError::Syntax(e) => write!(f, "{}:{}: {}", e.line, e.column, e.message),
            EditError::NotAnObject(what) => write!(f, "{what} is not a JSON object"),
        }
    }
}

impl std::error::Error for EditError {}

/// The file after setup, and what happened to each wanted entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setup {
    /// The new text (the old one when nothing changed).
    pub text: String,
    /// One per wanted entry, in order.
    pub outcomes: Vec<Outcome>,
}

/// The file after `--remove`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Removal {
    /// The new text (the old one when nothing was removed).
    pub text: String,
    /// The keys of the entries taken out.
    pub removed: Vec<String>,
}

/// Adds or updates the `wanted` entries in `text` (`None`: no file yet). An entry is setup's
/// own when its key is one of `own_keys` and it runs acp-usage; no other entry is touched.
pub fn setup(
    text: Option<&str>,
    dialect: Dialect,
    wanted: &[Wanted],
    own_keys: &[String],
) -> Result<Setup, EditError> {
    let (bom, body) = split_bom(text.unwrap_or(""));
    let doc = Doc::parse(body)?;
    let nl = doc.newline();
    let mut splices: Vec<(Range<usize>, String)> = Vec::new();
    let mut outcomes = Vec::with_capacity(wanted.len());
    match &doc.root {
        None => {
            // Empty, or comments only: the object goes after them.
            outcomes.extend(wanted.iter().map(|_| Outcome::Added));
            if !wanted.is_empty() {
                let unit = "  ";
                let mut s = String::new();
                if !body.is_empty() && !body.ends_with('\n') {
                    s.push_str(nl);
                }
                let servers = servers_text(wanted.iter(), dialect, unit, unit, nl);
                s.push_str(&format!("{{{nl}{unit}{servers}{nl}}}{nl}"));
                splices.push((body.len()..body.len(), s));
            }
        }
        Some(Value::Object(root)) => {
            let unit = doc.unit(root);
            match root.get(SERVERS).map(|p| &p.value) {
                None => {
                    outcomes.extend(wanted.iter().map(|_| Outcome::Added));
                    if !wanted.is_empty() {
                        let ind = doc.prop_indent(root, &unit);
                        let servers = servers_text(wanted.iter(), dialect, &ind, &unit, nl);
                        splices.extend(doc.insert_props(root, &[servers], &ind, dialect));
                    }
                }
                Some(Value::Object(servers)) => {
                    let ind = doc.prop_indent(servers, &unit);
                    let mut added = Vec::new();
                    for w in wanted {
                        let outcome = doc.place(servers, w, own_keys, &mut splices);
                        if outcome == Outcome::Added {
                            added.push(entry_text(w, dialect, &ind, &unit, nl));
                        }
                        outcomes.push(outcome);
                    }
                    if !added.is_empty() {
                        splices.extend(doc.insert_props(servers, &added, &ind, dialect));
                    }
                }
                Some(_) => return Err(EditError::NotAnObject("\"agent_servers\"")),
            }
        }
        Some(_) => return Err(EditError::NotAnObject("the file's top-level value")),
    }
    let text = format!("{bom}{}", splice(body, splices));
    Ok(Setup { text, outcomes })
}

/// Takes setup's own entries (a key of `own_keys`, running acp-usage) out of `text`, with the
/// separators and line breaks setup added; when that leaves the `agent_servers` object setup
/// added, that goes too, and so does a file's whole object that setup wrote. The result is empty
/// when nothing is left of a file setup created.
pub fn remove(text: &str, dialect: Dialect, own_keys: &[String]) -> Result<Removal, EditError> {
    let (bom, body) = split_bom(text);
    let doc = Doc::parse(body)?;
    let unchanged = || Removal { text: text.to_owned(), removed: Vec::new() };
    let root = match &doc.root {
        None => return Ok(unchanged()),
        Some(Value::Object(root)) => root,
        Some(_) => return Err(EditError::NotAnObject("the file's top-level value")),
    };
    let Some(at) = root.properties.iter().position(|p| p.name.as_str() == SERVERS) else {
        return Ok(unchanged());
    };
    let servers = match &root.properties[at].value {
        Value::Object(o) => o,
        _ => return Err(EditError::NotAnObject("\"agent_servers\"")),
    };
    let gone: Vec<usize> = (0..servers.properties.len())
        .filter(|&i| is_own(&servers.properties[i], own_keys))
        .collect();
    if gone.is_empty() {
        return Ok(unchanged());
    }
    let removed = gone.iter().map(|&i| servers.properties[i].name.as_str().to_owned()).collect();
    let mut cuts = doc.cuts(servers, &gone, dialect);
    let key_gone = gone.len() == servers.properties.len() && doc.added_servers(root, at, &cuts);
    if key_gone {
        cuts = doc.cuts(root, &[at], dialect);
    }
    let mut out = splice(body, cuts.into_iter().map(|r| (r, String::new())).collect());
    if key_gone && let Some(end) = written_object(&out) {
        out.truncate(end);
    }
    Ok(Removal { text: format!("{bom}{out}"), removed })
}

/// The program an entry runs through acp-usage (`acp-usage ... -- <program> ...`, or
/// `npx ... acp-usage@<version> -- <program> ...`), by its file name; `None` when the entry
/// does not run acp-usage.
fn wrapped_program(value: &Value) -> Option<String> {
    let Value::Object(entry) = value else { return None };
    let command = string(entry.get("command").map(|p| &p.value)?)?;
    let Value::Array(args) = &entry.get("args")?.value else { return None };
    let args: Vec<&str> = args.elements.iter().map(string).collect::<Option<_>>()?;
    let dashes = args.iter().position(|a| *a == "--")?;
    let runs_acp_usage = match file_name(command) {
        "acp-usage" => true,
        "npx" => args[..dashes].iter().any(|a| *a == "acp-usage" || a.starts_with("acp-usage@")),
        _ => false,
    };
    if !runs_acp_usage {
        return None;
    }
    args.get(dashes + 1).map(|a| file_name(a).to_owned())
}

/// Whether `prop` is one of setup's entries.
fn is_own(prop: &ObjectProp, own_keys: &[String]) -> bool {
    own_keys.iter().any(|k| k == prop.name.as_str()) && wrapped_program(&prop.value).is_some()
}

/// A path's last component without a Windows program suffix.
fn file_name(path: &str) -> &str {
    let name = path.rsplit(['/', '\\']).next().unwrap_or(path);
    [".exe", ".cmd", ".EXE", ".CMD"].iter().find_map(|s| name.strip_suffix(s)).unwrap_or(name)
}

fn string<'a>(value: &'a Value) -> Option<&'a str> {
    match value {
        Value::StringLit(s) => Some(&s.value),
        _ => None,
    }
}

/// The text with a UTF-8 byte order mark split off (positions are the parser's, after it).
fn split_bom(text: &str) -> (&str, &str) {
    match text.strip_prefix('\u{feff}') {
        Some(rest) => ("\u{feff}", rest),
        None => ("", text),
    }
}

/// `text` with each range replaced; the ranges do not overlap.
fn splice(text: &str, mut splices: Vec<(Range<usize>, String)>) -> String {
    splices.sort_by_key(|(r, _)| (r.start, r.end));
    let mut out = String::with_capacity(text.len() + 256);
    let mut at = 0;
    for (range, with) in splices {
        out.push_str(&text[at..range.start.max(at)]);
        out.push_str(&with);
        at = at.max(range.end);
    }
    out.push_str(&text[at..]);
    out
}

/// Where the object setup writes into a file without one (`{`, a line break, `}` and a line
/// break, alone at its end) starts, once its entries are gone; `None` for any other file.
fn written_object(text: &str) -> Option<usize> {
    let doc = Doc::parse(text).ok()?;
    let Some(Value::Object(root)) = &doc.root else { return None };
    let nl = doc.newline();
    let start = root.range.start;
    let alone = root.properties.is_empty()
        && !doc.has_comment(root.range.start..root.range.end)
        && text[root.range.start..root.range.end] == format!("{{{nl}}}")
        && text[root.range.end..] == *nl
        && (start == 0 || text[..start].ends_with('\n'));
    alone.then_some(start)
}

/// A token as the edits need it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tok {
    Comma,
    Comment,
    Other,
}

/// A parsed file: its text, its tokens with their positions, its value.
struct Doc<'t> {
    text: &'t str,
    tokens: Vec<(Range<usize>, Tok)>,
    root: Option<Value<'t>>,
}

impl<'t> Doc<'t> {
    fn parse(text: &'t str) -> Result<Doc<'t>, EditError> {
        // What Zed's reader takes (comments, trailing commas) and nothing looser: a file the
        // editor would reject is reported, not edited.
        let options = ParseOptions {
            allow_comments: true,
            allow_trailing_commas: true,
            allow_loose_object_property_names: false,
            allow_missing_commas: false,
            allow_single_quoted_strings: false,
            allow_hexadecimal_numbers: false,
            allow_unary_plus_numbers: false,
            allow_bare_decimal_point_numbers: false,
            allow_non_finite_numbers: false,
            allow_extended_string_escapes: false,
        };
        let collect =
            CollectOptions { comments: CommentCollectionStrategy::AsTokens, tokens: true };
        let parsed = jsonc_parser::parse_to_ast(text, &collect, &options).map_err(|e| {
            EditError::Syntax(SyntaxError {
                line: e.line_display(),
                column: e.column_display(),
                message: e.kind().to_string(),
            })
        })?;
        let tokens = parsed
            .tokens
            .unwrap_or_default()
            .into_iter()
            .map(|t| {
                let kind = match t.token {
                    Token::Comma => Tok::Comma,
                    Token::CommentLine(_) | Token::CommentBlock(_) => Tok::Comment,
                    _ => Tok::Other,
                };
                (t.range.start..t.range.end, kind)
            })
            .collect();
        Ok(Doc { text, tokens, root: parsed.value })
    }

    /// The file's line break: the first one's, else `\n`.
    fn newline(&self) -> &'static str {
        match self.text.find('\n') {
            Some(i) if self.text[..i].ends_with('\r') => "\r\n",
            _ => "\n",
        }
    }

    /// The spaces and tabs that start the line holding `pos`.
    fn line_indent(&self, pos: usize) -> &'t str {
        let start = self.text[..pos].rfind('\n').map_or(0, |i| i + 1);
        let line = &self.text[start..];
        &line[..line.len() - line.trim_start_matches([' ', '\t']).len()]
    }

    /// Whether only spaces and tabs stand between the start of its line and `pos`.
    fn starts_line(&self, pos: usize) -> bool {
        let start = self.text[..pos].rfind('\n').map_or(0, |i| i + 1);
        self.text[start..pos].chars().all(|c| c == ' ' || c == '\t')
    }

    /// One level of indentation: how far the first property sits in from the top-level `{`,
    /// else two spaces.
    fn unit(&self, root: &Object) -> String {
        let outer = self.line_indent(root.range.start);
        root.properties
            .first()
            .filter(|p| self.starts_line(p.range.start))
            .and_then(|p| self.line_indent(p.range.start).strip_prefix(outer))
            .filter(|unit| !unit.is_empty())
            .unwrap_or("  ")
            .to_owned()
    }

    /// The indentation of `obj`'s properties: its first one's, else one level in.
    fn prop_indent(&self, obj: &Object, unit: &str) -> String {
        match obj.properties.first() {
            Some(p) if self.starts_line(p.range.start) => self.line_indent(p.range.start).into(),
            _ => format!("{}{unit}", self.line_indent(obj.range.start)),
        }
    }

    /// The first token at or after `pos` that is not a comment.
    fn significant_after(&self, pos: usize) -> Option<&(Range<usize>, Tok)> {
        let i = self.tokens.partition_point(|(r, _)| r.start < pos);
        self.tokens[i..].iter().find(|(_, t)| *t != Tok::Comment)
    }

    fn has_comment(&self, within: Range<usize>) -> bool {
        self.tokens
            .iter()
            .any(|(r, t)| *t == Tok::Comment && r.start >= within.start && r.end <= within.end)
    }

    /// Where entries go in `obj`: after its `{` and the comments that start on that line.
    fn insertion_point(&self, obj: &Object) -> usize {
        let mut at = obj.range.start + 1;
        let i = self.tokens.partition_point(|(r, _)| r.start < at);
        for (r, t) in &self.tokens[i..] {
            if *t != Tok::Comment || self.text[at..r.start].contains(['\n', '\r']) {
                break;
            }
            at = r.end;
        }
        at
    }

    /// Where the line break before the property at `pos` starts (only spaces and tabs between),
    /// else where the spaces before it start.
    fn lead_start(&self, pos: usize) -> usize {
        let before = self.text[..pos].trim_end_matches([' ', '\t']);
        match before.strip_suffix('\n') {
            Some(rest) => rest.strip_suffix('\r').unwrap_or(rest).len(),
            None => before.len(),
        }
    }

    /// The splices that put `items` (each a `"key": value` text) first in `obj`, each on its own
    /// line at `ind`; see [`remove`] for how they come out again. An object written on one line
    /// is opened as a person would: its first property and its `}` get lines of their own too
    /// (only the spaces between are replaced), which `remove` leaves opened.
    fn insert_props(
        &self,
        obj: &Object,
        items: &[String],
        ind: &str,
        dialect: Dialect,
    ) -> Vec<(Range<usize>, String)> {
        let nl = self.newline();
        let at = self.insertion_point(obj);
        let outer = self.line_indent(obj.range.start);
        let mut s = items.iter().map(|it| format!("{nl}{ind}{it}")).collect::<Vec<_>>().join(",");
        let Some(first) = obj.properties.first() else {
            if dialect.trailing_commas && !self.text[at..obj.range.end].contains(['\n', '\r']) {
                // `{}` on one line: the closing brace gets a line of its own, and the comma says
                // so.
                s.push(',');
                s.push_str(nl);
                s.push_str(outer);
            }
            return vec![(at..at, s)];
        };
        s.push(',');
        if self.text[at..first.range.start].contains('\n') {
            return vec![(at..at, s)];
        }
        // Only spaces and tabs between (`insertion_point` took the comments on the `{` line).
        s.push_str(nl);
        s.push_str(ind);
        let mut splices = vec![(at..first.range.start, s)];
        let close = obj.range.end - 1;
        let before = self.text[..close].trim_end_matches([' ', '\t']);
        if !before.ends_with('\n') {
            splices.push((before.len()..close, format!("{nl}{outer}")));
        }
        splices
    }

    /// What to do about `w` in the existing `servers`; an update's splices go to `splices`.
    fn place(
        &self,
        servers: &Object,
        w: &Wanted,
        own_keys: &[String],
        splices: &mut Vec<(Range<usize>, String)>,
    ) -> Outcome {
        if let Some(prop) = servers.get(&w.key) {
            if !is_own(prop, own_keys) {
                return Outcome::Taken;
            }
            let Value::Object(entry) = &prop.value else { return Outcome::Taken };
            let command = entry.get("command").map(|p| &p.value);
            let args_prop = entry.get("args");
            let (Some(command), Some(args_prop)) = (command, args_prop) else {
                return Outcome::Taken;
            };
            let args = &args_prop.value;
            let same_args = match args {
                Value::Array(a) => {
                    a.elements.iter().map(string).eq(w.args.iter().map(|s| Some(s.as_str())))
                }
                _ => false,
            };
            // Setup has a say in `env` only when it has variables to give: an `env` the user
            // added to an entry of setup's for an agent with none stays.
            let env = entry.get("env");
            let same_env = w.env.is_empty() || env.is_some_and(|p| same_strings(&p.value, &w.env));
            if string(command) == Some(w.command.as_str()) && same_args && same_env {
                return Outcome::Unchanged;
            }
            splices.push((command.range().start..command.range().end, json_string(&w.command)));
            splices.push((args.range().start..args.range().end, json_array(&w.args)));
            if !same_env {
                match env {
                    Some(p) => splices
                        .push((p.value.range().start..p.value.range().end, json_object(&w.env))),
                    None => {
                        // Right after `args`, on a line of its own when `args` has one.
                        let at = args.range().end;
                        let start = args_prop.range.start;
                        let sep = if self.starts_line(start) {
                            format!(",{}{}", self.newline(), self.line_indent(start))
                        } else {
                            ", ".to_owned()
                        };
                        splices.push((at..at, format!("{sep}\"env\": {}", json_object(&w.env))));
                    }
                }
            }
            return Outcome::Updated;
        }
        let covering = servers.properties.iter().find(|p| {
            wrapped_program(&p.value).is_some_and(|program| program == file_name(&w.program))
        });
        match covering {
            Some(p) => Outcome::Covered(p.name.as_str().to_owned()),
            None => Outcome::Added,
        }
    }

    /// The ranges that take the properties `gone` (indices, ascending) out of `obj`: each one's
    /// line break, indentation and text, and the comma after it (when another property follows
    /// on the same line, the text, the comma and the spaces after it); for the last property,
    /// the comma before it instead when the property before it stays.
    fn cuts(&self, obj: &Object, gone: &[usize], dialect: Dialect) -> Vec<Range<usize>> {
        let props = &obj.properties;
        let all_gone = gone.len() == props.len();
        let mut cuts = Vec::new();
        for &i in gone {
            let p = &props[i];
            match self.significant_after(p.range.end) {
                Some((comma, Tok::Comma)) => {
                    let rest = &self.text[comma.end..];
                    let spaces = rest.len() - rest.trim_start_matches([' ', '\t']).len();
                    if rest[spaces..].starts_with('"') {
                        // The next property is on the same line (`{"a": 1, "b": 2}`): it
                        // takes this one's place, after the same line break and spaces, so
                        // no stray space is left (`{ "b": 2}`).
                        cuts.push(p.range.start..comma.end + spaces);
                        continue;
                    }
                    cuts.push(self.lead_start(p.range.start)..p.range.end);
                    cuts.push(comma.clone());
                    let last = i + 1 == props.len();
                    if last && all_gone && dialect.trailing_commas {
                        // Undoes the line setup gave the `}` of an object that was `{}`.
                        let closing =
                            format!("{}{}", self.newline(), self.line_indent(obj.range.start));
                        if self.text[comma.end..].starts_with(&closing) {
                            cuts.push(comma.end..comma.end + closing.len());
                        }
                    }
                }
                _ => {
                    cuts.push(self.lead_start(p.range.start)..p.range.end);
                    let kept = (0..i).rev().find(|j| !gone.contains(j));
                    if let Some(q) = kept
                        && let Some((comma, Tok::Comma)) =
                            self.significant_after(props[q].range.end)
                    {
                        cuts.push(comma.clone());
                    }
                }
            }
        }
        cuts.sort_by_key(|r| (r.start, r.end));
        let mut merged: Vec<Range<usize>> = Vec::new();
        for r in cuts {
            match merged.last_mut() {
                Some(last) if r.start <= last.end => last.end = last.end.max(r.end),
                _ => merged.push(r),
            }
        }
        merged
    }

    /// Whether the `agent_servers` property (index `at` of `root`) is the one setup added, once
    /// `cuts` took its entries out: the first property, on its own line right where setup puts
    /// it, with nothing left inside but the line break before its `}`.
    fn added_servers(&self, root: &Object, at: usize, cuts: &[Range<usize>]) -> bool {
        let prop = &root.properties[at];
        let Value::Object(servers) = &prop.value else { return false };
        let lead = self.lead_start(prop.range.start);
        let outside_entries = |r: &Range<usize>| {
            !servers.properties.iter().any(|p| p.range.start <= r.start && r.end <= p.range.end)
        };
        let comment_left = self.tokens.iter().any(|(r, t)| {
            *t == Tok::Comment
                && servers.range.start <= r.start
                && r.end <= servers.range.end
                && outside_entries(r)
        });
        let inner = servers.range.start + 1..servers.range.end - 1;
        let left: String = splice(
            &self.text[inner.clone()],
            cuts.iter()
                .map(|c| (c.start - inner.start..c.end - inner.start, String::new()))
                .collect(),
        );
        at == 0
            && lead == self.insertion_point(root)
            && self.text[lead..prop.range.start].matches('\n').count() == 1
            && !comment_left
            && left == format!("{}{}", self.newline(), self.line_indent(prop.range.start))
    }
}

/// `"agent_servers": {...}` with `entries`, the property at `ind`.
fn servers_text<'a>(
    entries: impl Iterator<Item = &'a Wanted>,
    dialect: Dialect,
    ind: &str,
    unit: &str,
    nl: &str,
) -> String {
    let inner = format!("{ind}{unit}");
    let body: Vec<String> = entries
        .map(|w| format!("{nl}{inner}{}", entry_text(w, dialect, &inner, unit, nl)))
        .collect();
    format!("{}: {{{}{nl}{ind}}}", json_string(SERVERS), body.join(","))
}

/// `"key": {...}` for `w`, the property at `ind`.
fn entry_text(w: &Wanted, dialect: Dialect, ind: &str, unit: &str, nl: &str) -> String {
    let mut members = Vec::new();
    if let Some(t) = dialect.entry_type {
        members.push(format!("\"type\": {}", json_string(t)));
    }
    members.push(format!("\"command\": {}", json_string(&w.command)));
    members.push(format!("\"args\": {}", json_array(&w.args)));
    if !w.env.is_empty() {
        members.push(format!("\"env\": {}", json_object(&w.env)));
    }
    let members: Vec<String> = members.into_iter().map(|m| format!("{ind}{unit}{m}")).collect();
    format!("{}: {{{nl}{}{nl}{ind}}}", json_string(&w.key), members.join(&format!(",{nl}")))
}

fn json_string(s: &str) -> String {
    serde_json::Value::from(s).to_string()
}

/// An object of strings on one line, `{"KEY": "value"}`.
fn json_object(items: &BTreeMap<String, String>) -> String {
    let items: Vec<String> =
        items.iter().map(|(k, v)| format!("{}: {}", json_string(k), json_string(v))).collect();
    format!("{{{}}}", items.join(", "))
}

/// Whether `value` is an object of exactly the strings `items`.
fn same_strings(value: &Value, items: &BTreeMap<String, String>) -> bool {
    let Value::Object(o) = value else { return false };
    let mut got = BTreeMap::new();
    for p in &o.properties {
        let Some(s) = string(&p.value) else { return false };
        got.insert(p.name.as_str().to_owned(), s.to_owned());
    }
    o.properties.len() == items.len() && got == *items
}

/// An array of strings on one line, `["--", "codex-acp"]`.
fn json_array(items: &[String]) -> String {
    let items: Vec<String> = items.iter().map(|s| json_string(s)).collect();
    format!("[{}]", items.join(", "))
}

// A child module: it splices with the same parsed document.
#[path = "meter.rs"]
pub mod meter;

#[cfg(test)]
mod tests;
