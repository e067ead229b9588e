//! Checks JSON-RPC lines against the embedded `schema/schema.json`.
//!
//! A message alone does not say which definition it must match, so [`MessageValidator`] keeps
//! what the relay keeps: which requests each side has sent and not yet seen answered. Requests
//! and notifications are checked by method and direction (`x-acp-methods`), a response against
//! the result definition of the request with the same id that went the other way, an error
//! response against `JsonRpcError`. Methods starting with `_` are extensions: only their
//! envelope is checked. Methods ACP v1 does not define are reported as unknown, not invalid.
//!
//! The definitions are compiled from [`crate::SCHEMA_JSON`], the committed file, so what is
//! checked is exactly what the repository ships. Each definition is compiled the first time a
//! message needs it and then shared by every validator of the process.
//!
//! Strictness: the official Rust crate reads some optional fields tolerantly (marked
//! `x-deserialize-default-on-error` in the schema: a bad value becomes "absent"). A validator
//! is for people who want to know whether traffic follows the protocol, so a value that breaks
//! such a field's schema is still reported.

use std::collections::HashMap;
use std::sync::OnceLock;

use jsonschema::error::ValidationErrorKind;
use jsonschema::{Draft, Registry, ValidationError, Validator};
use serde_json::{Map, Value};

use crate::SCHEMA_JSON;
use crate::generate::JSON_RPC_ERROR_DEF;

/// At most this many violations are reported per message; the rest are usually consequences.
pub const MAX_VIOLATIONS: usize = 20;

/// The URI the embedded document is registered under; definitions are `$ref`s into it.
const DOCUMENT_URI: &str = "urn:acp-usage:schema";

/// Which way a message travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    /// From the client (editor) to the agent.
    ClientToAgent,
    /// From the agent to the client (editor).
    AgentToClient,
}

impl Direction {
    fn index(self) -> usize {
        match self {
            Direction::ClientToAgent => 0,
            Direction::AgentToClient => 1,
        }
    }

    fn other(self) -> Direction {
        match self {
            Direction::ClientToAgent => Direction::AgentToClient,
            Direction::AgentToClient => Direction::ClientToAgent,
        }
    }

    fn sender(self) -> &'static str {
        match self {
            Direction::ClientToAgent => "the client",
            Direction::AgentToClient => "the agent",
        }
    }
}

/// One way a message breaks the schema.
#[derive(Debug, Clone, PartialEq)]
pub struct Violation {
    /// JSON pointer of the offending value in the whole message, e.g. `/params/update/used`
    /// (`""` is the message itself, e.g. for a missing member).
    pub pointer: String,
    /// What is wrong, in the schema validator's words.
    pub message: String,
}

/// The outcome of checking one message.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Follows the schema.
    Valid,
    /// Breaks the schema (at most [`MAX_VIOLATIONS`] of the ways it does).
    Invalid(Vec<Violation>),
    /// A method ACP v1 does not define (and not an `_` extension): reported as unknown, not invalid.
    UnknownMethod,
    /// An `_`-prefixed extension with a valid envelope.
    Extension,
    /// A response whose id matches no request seen in the other direction.
    UnmatchedResponse,
    /// Not a JSON-RPC message at all (malformed JSON, an array/batch, a non-object, a bad envelope); the string says what.
    Malformed(String),
}

/// What a message is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Has a `method` and an `id`.
    Request,
    /// Has a `method` and no `id`.
    Notification,
    /// Has a `result`.
    Response,
    /// Has an `error`.
    Error,
    /// None of the above (see [`Verdict::Malformed`]).
    Other,
}

/// A checked message.
#[derive(Debug, Clone, PartialEq)]
pub struct Checked {
    /// The method; for responses, the method of their request (`None` when unmatched).
    pub method: Option<String>,
    /// What the message is.
    pub kind: Kind,
    /// Whether it follows the schema.
    pub verdict: Verdict,
}

/// A request id compared by value, as JSON-RPC peers compare them: `1` and `"1"` differ,
/// `"\u0041"` and `"A"` are the same id.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum RequestKey {
    Null,
    Number(i64),
    Text(String),
}

impl RequestKey {
    /// The key of a valid ACP request id (`null`, an integer in the i64 range, a string).
    fn of(id: &Value) -> Option<RequestKey> {
        match id {
            Value::Null => Some(RequestKey::Null),
            Value::Number(n) => n.as_i64().map(RequestKey::Number),
            Value::String(s) => Some(RequestKey::Text(s.clone())),
            _ => None,
        }
    }
}

/// Checks a conversation's messages in order, pairing responses with their requests.
#[derive(Debug, Default)]
pub struct MessageValidator {
    /// Requests sent and not yet answered, per direction they were sent in: id → method.
    pending: [HashMap<RequestKey, String>; 2],
}

impl MessageValidator {
    /// A validator that has seen no message yet.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Checks one line (one JSON-RPC message; a trailing line terminator is fine) sent in `dir`.
    pub fn check(&mut self, dir: Direction, line: &[u8]) -> Checked {
        if line.iter().all(u8::is_ascii_whitespace) {
            return malformed("an empty line".into());
        }
        let message: Value = match serde_json::from_slice(line) {
            Ok(v) => v,
            Err(e) => return malformed(format!("not JSON: {e}")),
        };
        let msg = match &message {
            Value::Object(msg) => msg,
            Value::Array(_) => {
                return malformed(
                    "a JSON array (a batch): ACP does not use JSON-RPC batches".into(),
                );
            }
            other => return malformed(format!("a JSON {}, not an object", type_name(other))),
        };
        let mut violations = Vec::new();
        match msg.get("jsonrpc") {
            Some(Value::String(v)) if v == "2.0" => {}
            Some(_) => violations.push(violation("/jsonrpc", "`jsonrpc` must be \"2.0\"")),
            None => violations.push(violation("", "\"jsonrpc\" is a required property")),
        }
        match msg.get("method") {
            Some(Value::String(method)) => self.check_call(dir, msg, method, violations),
            Some(other) => malformed(format!("`method` is a {}, not a string", type_name(other))),
            None => self.check_response(dir, msg, violations),
        }
    }

    fn check_call(
        &mut self,
        dir: Direction,
        msg: &Map<String, Value>,
        method: &str,
        mut violations: Vec<Violation>,
    ) -> Checked {
        let id = msg.get("id");
        let kind = if id.is_some() { Kind::Request } else { Kind::Notification };
        if let Some(id) = id {
            match RequestKey::of(id) {
                Some(key) => {
                    // Remembered whatever else is wrong: the answer is still paired with it.
                    self.pending[dir.index()].insert(key, method.to_owned());
                }
                None => violations.push(violation(
                    "/id",
                    &format!(
                        "{} is not a valid request id (null, an integer or a string)",
                        short(id)
                    ),
                )),
            }
        }
        let checked = |verdict| Checked { method: Some(method.to_owned()), kind, verdict };
        let info = if method.starts_with('_') {
            None
        } else {
            match compiled().methods.get(method) {
                Some(info) => Some(info),
                None if violations.is_empty() => return checked(Verdict::UnknownMethod),
                None => None,
            }
        };
        if let Some(info) = info {
            if !info.sent_by(dir) {
                violations.push(violation(
                    "/method",
                    &format!("`{method}` is not sent by {}", dir.sender()),
                ));
            }
            match (info.result.is_some(), kind) {
                (true, Kind::Notification) => violations
                    .push(violation("", &format!("`{method}` is a request: it needs an `id`"))),
                (false, Kind::Request) => violations.push(violation(
                    "/id",
                    &format!("`{method}` is a notification: it has no `id`"),
                )),
                _ => {}
            }
            match msg.get("params") {
                None if info.params_may_be_null => {}
                None => violations.push(violation("", "\"params\" is a required property")),
                Some(Value::Null) if info.params_may_be_null => {}
                Some(params) => {
                    check_definition_into(&info.params, params, "/params", &mut violations)
                }
            }
        }
        match (violations.is_empty(), info) {
            (false, _) => checked(invalid(violations)),
            (true, None) => checked(Verdict::Extension),
            (true, Some(_)) => checked(Verdict::Valid),
        }
    }

    fn check_response(
        &mut self,
        dir: Direction,
        msg: &Map<String, Value>,
        mut violations: Vec<Violation>,
    ) -> Checked {
        let (result, error) = (msg.get("result"), msg.get("error"));
        let kind = match (result, error) {
            (_, Some(_)) => Kind::Error,
            (Some(_), None) => Kind::Response,
            (None, None) => {
                return malformed(
                    "no `method`, `result` or `error`: not a request, a notification or a response"
                        .into(),
                );
            }
        };
        if result.is_some() && error.is_some() {
            violations.push(violation("", "a response has `result` or `error`, not both"));
        }
        let Some(id) = msg.get("id") else {
            return malformed("a response without an `id`".into());
        };
        let method =
            RequestKey::of(id).and_then(|key| self.pending[dir.other().index()].remove(&key));
        let done = |method, verdict| Checked { method, kind, verdict };

        if let Some(error) = error {
            // An error answers any request the same way. JSON-RPC answers a request whose id
            // could not be read (a parse error) with `id: null`, so such an error is checked
            // even when no request had that id.
            if method.is_none() && !id.is_null() {
                return done(None, Verdict::UnmatchedResponse);
            }
            check_definition_into(JSON_RPC_ERROR_DEF, error, "/error", &mut violations);
            let verdict = if violations.is_empty() { Verdict::Valid } else { invalid(violations) };
            return done(method, verdict);
        }

        let Some(method) = method else {
            return done(None, Verdict::UnmatchedResponse);
        };
        let result = result.unwrap_or(&Value::Null);
        let verdict = if method.starts_with('_') {
            Verdict::Extension
        } else {
            match compiled().methods.get(method.as_str()) {
                None => Verdict::UnknownMethod,
                Some(info) => {
                    if let Some(def) = &info.result
                        && !(result.is_null() && info.result_may_be_null)
                    {
                        check_definition_into(def, result, "/result", &mut violations);
                    }
                    Verdict::Valid
                }
            }
        };
        let verdict = if violations.is_empty() { verdict } else { invalid(violations) };
        done(Some(method), verdict)
    }
}

/// Checks `instance` against one definition of the embedded schema (e.g. `AcpUsageUpdateMeta`
/// for the `_meta.acpUsage` acp-usage writes). Pointers are relative to `instance`. `None` when
/// the schema has no such definition.
#[must_use]
pub fn check_definition(def: &str, instance: &Value) -> Option<Vec<Violation>> {
    compiled().validators.get(def)?;
    let mut violations = Vec::new();
    check_definition_into(def, instance, "", &mut violations);
    violations.truncate(MAX_VIOLATIONS);
    Some(violations)
}

/// The methods of the embedded `x-acp-methods` table, sorted.
#[must_use]
pub fn methods() -> Vec<&'static str> {
    let mut names: Vec<&str> = compiled().methods.keys().map(String::as_str).collect();
    names.sort_unstable();
    names
}

fn check_definition_into(def: &str, instance: &Value, prefix: &str, out: &mut Vec<Violation>) {
    match compiled().validator(def) {
        Ok(validator) => {
            for error in validator.iter_errors(instance) {
                explain(&error, prefix, out);
                if out.len() >= MAX_VIOLATIONS {
                    break;
                }
            }
        }
        Err(e) => out.push(violation(prefix, &e)),
    }
}

/// Turns one validator error into violations. A failed `oneOf`/`anyOf` (tagged unions such as
/// `SessionUpdate`, optional values such as `Cost | null`) says only "matches no alternative"
/// at the union's location; the useful report is what is wrong inside the alternative the
/// message meant, so the alternatives a discriminator or the value's type rules out are
/// dropped and the errors of the closest remaining one are reported instead.
fn explain(error: &ValidationError<'_>, prefix: &str, out: &mut Vec<Violation>) {
    let context = match error.kind() {
        ValidationErrorKind::OneOfNotValid { context } | ValidationErrorKind::AnyOf { context } => {
            context
        }
        _ => return out.push(to_violation(error, prefix, None)),
    };
    let here = error.instance_path().as_str();
    if let Some(first) = context.first() {
        // What every alternative objects to (e.g. a missing discriminator) is the problem.
        let common: Vec<&ValidationError<'_>> = first
            .iter()
            .filter(|e| context[1..].iter().all(|branch| branch.iter().any(|o| same(e, o))))
            .collect();
        if !common.is_empty() {
            for e in common {
                explain(e, prefix, out);
            }
            return;
        }
    }
    let meant = context
        .iter()
        .filter(|branch| !branch.is_empty() && !branch.iter().any(|e| rules_out(e, here)))
        .min_by_key(|branch| branch.len());
    if let Some(branch) = meant {
        for e in branch {
            explain(e, prefix, out);
        }
        return;
    }
    // Every alternative is ruled out. When each was ruled out by a constant at one and the same
    // place (a closed enum such as `StopReason`, the tag of a union such as `sessionUpdate`),
    // that place is the problem: name the values allowed there.
    let mut allowed = Vec::new();
    let mut place: Option<&ValidationError<'_>> = None;
    for branch in context {
        let constants: Vec<_> = branch
            .iter()
            .filter_map(|e| match e.kind() {
                ValidationErrorKind::Constant { expected_value } => Some((e, expected_value)),
                _ => None,
            })
            .collect();
        let [(c, expected)] = constants.as_slice() else {
            return out.push(to_violation(error, prefix, None));
        };
        if place.is_some_and(|p| p.instance_path() != c.instance_path()) {
            return out.push(to_violation(error, prefix, None));
        }
        place.get_or_insert(c);
        allowed.push(expected.to_string());
    }
    match place {
        Some(c) => {
            let message = format!("{} is not one of {}", short(c.instance()), allowed.join(", "));
            out.push(to_violation(c, prefix, Some(message)));
        }
        None => out.push(to_violation(error, prefix, None)),
    }
}

/// Whether an error shows an alternative is not the one the message meant: a discriminator
/// (a constant) that differs, or a value of another type altogether.
fn rules_out(e: &ValidationError<'_>, union_path: &str) -> bool {
    let path = e.instance_path().as_str();
    // A tag is a member of the union's object: one segment below it.
    let at_union_or_member = path == union_path
        || path
            .strip_prefix(union_path)
            .and_then(|rest| rest.strip_prefix('/'))
            .is_some_and(|member| !member.contains('/'));
    match e.kind() {
        ValidationErrorKind::Constant { .. } | ValidationErrorKind::Enum { .. } => {
            at_union_or_member
        }
        ValidationErrorKind::Type { .. } | ValidationErrorKind::FalseSchema => path == union_path,
        _ => false,
    }
}

fn same(a: &ValidationError<'_>, b: &ValidationError<'_>) -> bool {
    a.instance_path() == b.instance_path() && a.to_string() == b.to_string()
}

fn to_violation(e: &ValidationError<'_>, prefix: &str, message: Option<String>) -> Violation {
    let message = message.unwrap_or_else(|| {
        // The validator quotes the offending value; a whole object would drown the message.
        let value = e.instance().to_string();
        if value.len() <= SHORT {
            e.to_string()
        } else {
            e.masked_with(short(e.instance())).to_string()
        }
    });
    Violation { pointer: format!("{prefix}{}", e.instance_path().as_str()), message }
}

/// Values longer than this are cut in messages.
const SHORT: usize = 60;

fn short(v: &Value) -> String {
    let text = v.to_string();
    if text.len() <= SHORT {
        return text;
    }
    let mut cut = SHORT;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}…", &text[..cut])
}

fn violation(pointer: &str, message: &str) -> Violation {
    Violation { pointer: pointer.to_owned(), message: message.to_owned() }
}

fn invalid(mut violations: Vec<Violation>) -> Verdict {
    violations.truncate(MAX_VIOLATIONS);
    Verdict::Invalid(violations)
}

fn malformed(what: String) -> Checked {
    Checked { method: None, kind: Kind::Other, verdict: Verdict::Malformed(what) }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// A row of `x-acp-methods`.
#[derive(Debug)]
struct MethodInfo {
    /// `client_to_agent`, `agent_to_client` or `both`.
    direction: String,
    params: String,
    params_may_be_null: bool,
    /// Requests only.
    result: Option<String>,
    result_may_be_null: bool,
}

impl MethodInfo {
    fn sent_by(&self, dir: Direction) -> bool {
        match self.direction.as_str() {
            "both" => true,
            "client_to_agent" => dir == Direction::ClientToAgent,
            _ => dir == Direction::AgentToClient,
        }
    }
}

/// The embedded schema, read once per process.
struct Compiled {
    registry: Registry<'static>,
    methods: HashMap<String, MethodInfo>,
    /// One slot per definition, compiled on first use.
    validators: HashMap<String, OnceLock<Result<Validator, String>>>,
}

impl Compiled {
    fn validator(&self, def: &str) -> Result<&Validator, String> {
        let slot = self
            .validators
            .get(def)
            .ok_or_else(|| format!("no definition `{def}` in the schema"))?;
        slot.get_or_init(|| {
            let reference = serde_json::json!({ "$ref": format!("{DOCUMENT_URI}#/$defs/{def}") });
            jsonschema::options()
                .with_draft(Draft::Draft202012)
                .with_registry(&self.registry)
                .build(&reference)
                .map_err(|e| format!("cannot compile definition `{def}`: {e}"))
        })
        .as_ref()
        .map_err(Clone::clone)
    }
}

fn compiled() -> &'static Compiled {
    static COMPILED: OnceLock<Compiled> = OnceLock::new();
    COMPILED.get_or_init(|| {
        // The file is generated and checked by this crate's tests, so a broken copy is a build
        // of an uncommitted, hand-edited file: failing loudly is right.
        let document: Value = serde_json::from_str(SCHEMA_JSON).expect(
            "the embedded schema/schema.json is JSON (regenerate it with `cargo xtask codegen`)",
        );
        let methods = document
            .get("x-acp-methods")
            .and_then(Value::as_object)
            .map(|table| {
                table
                    .iter()
                    .map(|(name, row)| {
                        let text = |k: &str| row.get(k).and_then(Value::as_str).map(str::to_owned);
                        let flag = |k: &str| row.get(k).and_then(Value::as_bool).unwrap_or(false);
                        let info = MethodInfo {
                            direction: text("direction").unwrap_or_default(),
                            params: text("params").unwrap_or_default(),
                            params_may_be_null: flag("paramsMayBeNull"),
                            result: text("result"),
                            result_may_be_null: flag("resultMayBeNull"),
                        };
                        (name.clone(), info)
                    })
                    .collect()
            })
            .unwrap_or_default();
        let validators = document
            .get("$defs")
            .and_then(Value::as_object)
            .map(|defs| defs.keys().map(|k| (k.clone(), OnceLock::new())).collect())
            .unwrap_or_default();
        let registry = Registry::new()
            .draft(Draft::Draft202012)
            .add(DOCUMENT_URI, document)
            .and_then(|r| r.prepare())
            .expect("the embedded schema/schema.json is a valid schema document");
        Compiled { registry, methods, validators }
    })
}
