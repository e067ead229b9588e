//! Builds `schema/schema.json`: the JSON Schema (draft 2020-12) of every ACP v1 message.
//!
//! Nothing ACP-shaped is written by hand here: every definition is what schemars derives from
//! the official `agent-client-protocol-schema` types (with the workspace's unstable features, so
//! `PromptResponse` carries the end-turn `usage`). What this module adds is the knowledge a
//! single JSON-RPC message lacks, as the `x-acp-methods` table: for each method its direction,
//! whether it is a request or a notification, and the definitions of its params and result. The
//! method names come from the official crate's name tables; the pairing of request and response
//! types follows the official routing enums (`ClientRequest`/`AgentResponse`, ...), and a test
//! checks each pairing against the `x-method`/`x-side` annotations the official types carry.
//!
//! acp-usage's own `_meta` payloads are added as `AcpUsage…` definitions. They describe what
//! acp-usage writes; the ACP definitions keep `_meta` free-form, as the protocol wants, so a
//! peer's `_meta` is never constrained by them.

use agent_client_protocol_schema::v1::{
    self as acp, AGENT_METHOD_NAMES, CLIENT_METHOD_NAMES, PROTOCOL_LEVEL_METHOD_NAMES,
};
use schemars::{JsonSchema, SchemaGenerator, generate::SchemaSettings};
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

use crate::{META_KEY, META_VERSION, TurnUsageMeta, UsageBreakdown, UsageUpdateMeta};

/// The exact version of the official schema crate the definitions come from (pinned with `=` in
/// the workspace manifest; a test checks the two agree).
pub const ACP_SCHEMA_CRATE_VERSION: &str = "1.20.0";

/// The official crate's unstable features the workspace enables, i.e. the unstable parts of ACP
/// the definitions include.
pub const ACP_FEATURES: &[&str] = &["unstable_end_turn_token_usage", "unstable_session_fork"];

/// The name of the definition for JSON-RPC error objects (`{code, message, data?}`).
pub const JSON_RPC_ERROR_DEF: &str = "JsonRpcError";

/// Who sends a method.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sender {
    Client,
    Agent,
    /// Protocol-level methods (`$/…`) go both ways.
    Either,
}

impl Sender {
    fn wire(self) -> &'static str {
        match self {
            Sender::Client => "client_to_agent",
            Sender::Agent => "agent_to_client",
            Sender::Either => "both",
        }
    }
}

/// One row of `x-acp-methods`, its definitions already registered with the generator.
struct Method {
    name: &'static str,
    sender: Sender,
    params: String,
    params_may_be_null: bool,
    /// `(definition, may be null)` for requests, `None` for notifications.
    result: Option<(String, bool)>,
}

impl Method {
    fn to_json(&self) -> Value {
        let mut row = Map::new();
        row.insert("direction".into(), self.sender.wire().into());
        let kind = if self.result.is_some() { "request" } else { "notification" };
        row.insert("kind".into(), kind.into());
        row.insert("params".into(), self.params.clone().into());
        if self.params_may_be_null {
            row.insert("paramsMayBeNull".into(), true.into());
        }
        if let Some((result, may_be_null)) = &self.result {
            row.insert("result".into(), result.clone().into());
            if *may_be_null {
                row.insert("resultMayBeNull".into(), true.into());
            }
        }
        Value::Object(row)
    }
}

/// The `$defs` name schemars gave `T` (registering it and everything it refers to).
fn def_name<T: JsonSchema>(g: &mut SchemaGenerator) -> String {
    let reference = g.subschema_for::<T>();
    let reference = reference.get("$ref").and_then(Value::as_str).unwrap_or_default();
    reference
        .strip_prefix("#/$defs/")
        .unwrap_or_else(|| panic!("{} is not a named definition", T::schema_name()))
        .to_owned()
}

/// Whether the official crate reads `null` (or absent params) as this type's default. Several
/// payloads are wrapped so (`session/load` answered with `"result": null` is the documented
/// example); the validator must accept what the official crate accepts, and the schema
/// definitions themselves say `"type": "object"`, so the table records it.
fn accepts_null<T: DeserializeOwned>() -> bool {
    serde_json::from_value::<T>(Value::Null).is_ok()
}

fn request<P, R>(g: &mut SchemaGenerator, name: &'static str, sender: Sender) -> Method
where
    P: JsonSchema + DeserializeOwned,
    R: JsonSchema + DeserializeOwned,
{
    Method {
        name,
        sender,
        params: def_name::<P>(g),
        params_may_be_null: accepts_null::<P>(),
        result: Some((def_name::<R>(g), accepts_null::<R>())),
    }
}

fn notification<P>(g: &mut SchemaGenerator, name: &'static str, sender: Sender) -> Method
where
    P: JsonSchema + DeserializeOwned,
{
    Method {
        name,
        sender,
        params: def_name::<P>(g),
        params_may_be_null: accepts_null::<P>(),
        result: None,
    }
}

/// Every ACP v1 method in the enabled feature set, in the order of the official routing enums.
/// Listed explicitly rather than read from the name tables: another crate in the workspace may
/// switch on more of the official crate's features (the Rust SDK enables proxy chains), and
/// the file must not depend on which crates happen to be built together. The test
/// `method_table_covers_the_official_name_tables` notices a method missing here.
fn methods(g: &mut SchemaGenerator) -> Vec<Method> {
    use Sender::{Agent, Client, Either};
    let a = &AGENT_METHOD_NAMES;
    let c = &CLIENT_METHOD_NAMES;
    vec![
        // Client to agent (`ClientRequest` → `AgentResponse`, `ClientNotification`).
        request::<acp::InitializeRequest, acp::InitializeResponse>(g, a.initialize, Client),
        request::<acp::AuthenticateRequest, acp::AuthenticateResponse>(g, a.authenticate, Client),
        request::<acp::LogoutRequest, acp::LogoutResponse>(g, a.logout, Client),
        request::<acp::NewSessionRequest, acp::NewSessionResponse>(g, a.session_new, Client),
        request::<acp::LoadSessionRequest, acp::LoadSessionResponse>(g, a.session_load, Client),
        request::<acp::ListSessionsRequest, acp::ListSessionsResponse>(g, a.session_list, Client),
        request::<acp::DeleteSessionRequest, acp::DeleteSessionResponse>(
            g,
            a.session_delete,
            Client,
        ),
        request::<acp::ForkSessionRequest, acp::ForkSessionResponse>(g, a.session_fork, Client),
        request::<acp::ResumeSessionRequest, acp::ResumeSessionResponse>(
            g,
            a.session_resume,
            Client,
        ),
        request::<acp::CloseSessionRequest, acp::CloseSessionResponse>(g, a.session_close, Client),
        request::<acp::SetSessionModeRequest, acp::SetSessionModeResponse>(
            g,
            a.session_set_mode,
            Client,
        ),
        request::<acp::SetSessionConfigOptionRequest, acp::SetSessionConfigOptionResponse>(
            g,
            a.session_set_config_option,
            Client,
        ),
        request::<acp::PromptRequest, acp::PromptResponse>(g, a.session_prompt, Client),
        notification::<acp::CancelNotification>(g, a.session_cancel, Client),
        // Agent to client (`AgentRequest` → `ClientResponse`, `AgentNotification`).
        request::<acp::WriteTextFileRequest, acp::WriteTextFileResponse>(
            g,
            c.fs_write_text_file,
            Agent,
        ),
        request::<acp::ReadTextFileRequest, acp::ReadTextFileResponse>(
            g,
            c.fs_read_text_file,
            Agent,
        ),
        request::<acp::RequestPermissionRequest, acp::RequestPermissionResponse>(
            g,
            c.session_request_permission,
            Agent,
        ),
        request::<acp::CreateTerminalRequest, acp::CreateTerminalResponse>(
            g,
            c.terminal_create,
            Agent,
        ),
        request::<acp::TerminalOutputRequest, acp::TerminalOutputResponse>(
            g,
            c.terminal_output,
            Agent,
        ),
        request::<acp::ReleaseTerminalRequest, acp::ReleaseTerminalResponse>(
            g,
            c.terminal_release,
            Agent,
        ),
        request::<acp::WaitForTerminalExitRequest, acp::WaitForTerminalExitResponse>(
            g,
            c.terminal_wait_for_exit,
            Agent,
        ),
        request::<acp::KillTerminalRequest, acp::KillTerminalResponse>(g, c.terminal_kill, Agent),
        request::<acp::CreateElicitationRequest, acp::CreateElicitationResponse>(
            g,
            c.elicitation_create,
            Agent,
        ),
        notification::<acp::SessionNotification>(g, c.session_update, Agent),
        notification::<acp::CompleteElicitationNotification>(g, c.elicitation_complete, Agent),
        // Both ways (`ProtocolLevelNotification`).
        notification::<acp::CancelRequestNotification>(
            g,
            PROTOCOL_LEVEL_METHOD_NAMES.cancel_request,
            Either,
        ),
    ]
}

/// The schema document as a value. Deterministic: the same crates give the same document.
#[must_use]
pub fn schema() -> Value {
    let mut g = SchemaSettings::draft2020_12().into_generator();
    let methods = methods(&mut g);

    // The JSON-RPC envelope pieces: ids and the error object, both official types.
    def_name::<acp::RequestId>(&mut g);
    let error_def = def_name::<acp::Error>(&mut g);

    // acp-usage's own payloads, and where they go.
    let update_meta = def_name::<UsageUpdateMeta>(&mut g);
    let breakdown = def_name::<UsageBreakdown>(&mut g);
    let turn_meta = def_name::<TurnUsageMeta>(&mut g);
    let placement = json!({
        "metaKey": META_KEY,
        "metaVersion": META_VERSION,
        "written": [
            {"method": "session/update", "sessionUpdate": "usage_update",
             "pointer": format!("/params/update/_meta/{META_KEY}"), "definition": update_meta},
            {"method": "session/update", "sessionUpdate": "usage_update",
             "pointer": "/params/update/_meta/usage", "definition": breakdown},
            {"method": "session/prompt", "pointer": "/result/usage", "definition": breakdown},
            {"method": "session/prompt", "pointer": format!("/result/usage/_meta/{META_KEY}"),
             "definition": turn_meta},
        ],
    });

    let mut defs: Vec<(String, Value)> = g.take_definitions(true).into_iter().collect();
    defs.push((
        JSON_RPC_ERROR_DEF.to_owned(),
        json!({
            "description": "The `error` member of a JSON-RPC error response (the official `Error` type).",
            "$ref": format!("#/$defs/{error_def}"),
        }),
    ));
    // Sorted, so a reader finds a definition and a diff shows what changed, not what moved.
    defs.sort_by(|a, b| a.0.cmp(&b.0));

    let table: Map<String, Value> =
        methods.iter().map(|m| (m.name.to_owned(), m.to_json())).collect();

    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "ACP v1 messages, as acp-usage reads and writes them",
        "description": "Generated by `cargo xtask codegen` from the Rust types of the official \
            `agent-client-protocol-schema` crate and acp-usage's own `_meta` payloads; do not edit. \
            A JSON-RPC message alone does not say which definition it must match: look the method \
            up in `x-acp-methods` (params by method and direction; a response by the method of the \
            request with the same id, sent the other way; an error response against `JsonRpcError`). \
            Methods starting with `_` are extensions and have no definition. Fields marked \
            `x-deserialize-default-on-error` are read tolerantly by the official Rust crate, but a \
            value that breaks their schema is still a violation.",
        "x-acp-schema-crate": format!("agent-client-protocol-schema {ACP_SCHEMA_CRATE_VERSION}"),
        "x-acp-features": ACP_FEATURES,
        "x-acp-methods": table,
        "x-acp-usage-meta": placement,
        "$defs": Map::from_iter(defs),
    })
}

/// [`schema`] as the text of `schema/schema.json`: pretty-printed, with a trailing newline.
#[must_use]
pub fn schema_text() -> String {
    let mut text = serde_json::to_string_pretty(&schema()).expect("a JSON value serialises");
    text.push('\n');
    text
}
