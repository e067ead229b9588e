//! `schema/schema.json`: fresh, embedded, and saying what the official crate says.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use acp_usage_schema::acp::v1::{
    AGENT_METHOD_NAMES, CLIENT_METHOD_NAMES, PROTOCOL_LEVEL_METHOD_NAMES,
};
use acp_usage_schema::generate::{self, ACP_FEATURES, ACP_SCHEMA_CRATE_VERSION};
use acp_usage_schema::{SCHEMA_FILE, SCHEMA_JSON};
use serde_json::Value;

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The committed file is what the generator makes of the Rust types. When it is not, the test
/// rewrites it (so the fix is one `git add` away) and fails.
#[test]
fn schema_json_is_fresh() {
    let fresh = generate::schema_text();
    let path = workspace_root().join(SCHEMA_FILE);
    let current = std::fs::read_to_string(&path).unwrap_or_default();
    if current.replace("\r\n", "\n") != fresh {
        std::fs::write(&path, &fresh).unwrap();
        panic!("schema/schema.json was stale; regenerated, commit it");
    }
    // What the crate compiled in is that same text.
    assert_eq!(
        SCHEMA_JSON.replace("\r\n", "\n"),
        fresh,
        "rebuild: the embedded schema predates the file"
    );
}

#[test]
fn generation_is_deterministic() {
    assert_eq!(generate::schema_text(), generate::schema_text());
    assert!(generate::schema_text().ends_with("}\n"));
}

fn schema() -> Value {
    serde_json::from_str(SCHEMA_JSON).unwrap()
}

fn defs(schema: &Value) -> &serde_json::Map<String, Value> {
    schema["$defs"].as_object().unwrap()
}

/// The document is itself a valid draft 2020-12 schema.
#[test]
fn schema_is_a_valid_2020_12_schema() {
    let schema = schema();
    assert_eq!(schema["$schema"], "https://json-schema.org/draft/2020-12/schema");
    if let Err(e) = jsonschema::draft202012::meta::validate(&schema) {
        panic!("not a valid 2020-12 schema: {e} at {}", e.instance_path().as_str());
    }
}

/// Every method the brief and the relay care about is in the table, in the right direction.
#[test]
fn method_table_has_both_directions() {
    let schema = schema();
    let table = schema["x-acp-methods"].as_object().unwrap();
    let expect = |method: &str, direction: &str, kind: &str| {
        let row = &table.get(method).unwrap_or_else(|| panic!("{method} missing"));
        assert_eq!(
            (row["direction"].as_str(), row["kind"].as_str()),
            (Some(direction), Some(kind)),
            "{method}"
        );
    };
    for m in [
        "initialize",
        "authenticate",
        "logout",
        "session/new",
        "session/load",
        "session/resume",
        "session/fork",
        "session/list",
        "session/close",
        "session/delete",
        "session/set_mode",
        "session/set_config_option",
        "session/prompt",
    ] {
        expect(m, "client_to_agent", "request");
    }
    expect("session/cancel", "client_to_agent", "notification");
    for m in [
        "session/request_permission",
        "fs/read_text_file",
        "fs/write_text_file",
        "terminal/create",
        "terminal/output",
        "terminal/release",
        "terminal/wait_for_exit",
        "terminal/kill",
        "elicitation/create",
    ] {
        expect(m, "agent_to_client", "request");
    }
    expect("session/update", "agent_to_client", "notification");
    expect("elicitation/complete", "agent_to_client", "notification");
    expect("$/cancel_request", "both", "notification");
    assert_eq!(table["session/new"]["params"], "NewSessionRequest");
    assert_eq!(table["session/new"]["result"], "NewSessionResponse");
    assert_eq!(table["session/update"]["params"], "SessionNotification");
    assert_eq!(table["session/update"].get("result"), None);
    // What the official crate reads from `null`, the table says may be null.
    assert_eq!(table["session/load"]["resultMayBeNull"], true);
    assert_eq!(table["session/list"]["paramsMayBeNull"], true);
    assert_eq!(table["session/new"].get("resultMayBeNull"), None);
}

/// No method of the official name tables (in the features this build has) is left out.
#[test]
fn method_table_covers_the_official_name_tables() {
    let schema = schema();
    let table: BTreeSet<&str> =
        schema["x-acp-methods"].as_object().unwrap().keys().map(String::as_str).collect();
    let mut official = BTreeSet::new();
    for names in [
        serde_json::to_value(AGENT_METHOD_NAMES).unwrap(),
        serde_json::to_value(CLIENT_METHOD_NAMES).unwrap(),
        serde_json::to_value(PROTOCOL_LEVEL_METHOD_NAMES).unwrap(),
    ] {
        official
            .extend(names.as_object().unwrap().values().map(|v| v.as_str().unwrap().to_owned()));
    }
    let missing: Vec<&String> = official.iter().filter(|m| !table.contains(m.as_str())).collect();
    assert!(
        missing.is_empty(),
        "the official crate (with the features this build enables) has methods the table lacks: \
         {missing:?}; add them to generate::methods or leave the feature off"
    );
    assert_eq!(table.len(), official.len(), "the table has methods the official crate lacks");
}

/// The pairing of methods with definitions agrees with the `x-method`/`x-side` annotations the
/// official types carry, so a request is never paired with another method's response.
#[test]
fn method_table_agrees_with_the_official_annotations() {
    let schema = schema();
    let defs = defs(&schema);
    for (method, row) in schema["x-acp-methods"].as_object().unwrap() {
        let side = match row["direction"].as_str().unwrap() {
            "client_to_agent" => "agent",
            "agent_to_client" => "client",
            _ => "protocol",
        };
        for key in ["params", "result"] {
            let Some(name) = row.get(key).and_then(Value::as_str) else { continue };
            let def = defs.get(name).unwrap_or_else(|| panic!("{method}: no definition {name}"));
            assert_eq!(def["x-method"].as_str(), Some(method.as_str()), "{method} {key} {name}");
            assert_eq!(def["x-side"].as_str(), Some(side), "{method} {key} {name}");
        }
    }
}

#[test]
fn prompt_response_has_the_unstable_usage() {
    let schema = schema();
    let defs = defs(&schema);
    let usage = &defs["PromptResponse"]["properties"]["usage"];
    assert_eq!(usage["anyOf"][0]["$ref"], "#/$defs/Usage", "{usage}");
    let required = defs["Usage"]["required"].as_array().unwrap();
    assert_eq!(required, &["totalTokens", "inputTokens", "outputTokens"]);
    assert!(defs.contains_key("ForkSessionRequest"));
    assert_eq!(defs["JsonRpcError"]["$ref"], "#/$defs/Error");
    assert_eq!(defs["Error"]["required"], serde_json::json!(["code", "message"]));
}

/// acp-usage's own payloads are there under names that cannot clash with ACP's, and schemars
/// did not have to rename anything to avoid a clash.
#[test]
fn own_payloads_are_named_definitions() {
    let schema = schema();
    let defs = defs(&schema);
    for name in [
        "AcpUsageUpdateMeta",
        "AcpUsageTurnMeta",
        "AcpUsageBreakdown",
        "AcpUsageCostFigure",
        "AcpUsageFigure",
        "AcpUsageUsedSplit",
        "AcpUsageSource",
    ] {
        assert!(defs.contains_key(name), "{name} missing");
    }
    assert_eq!(defs["AcpUsageUpdateMeta"]["properties"]["used"]["$ref"], "#/$defs/AcpUsageFigure");
    for name in defs.keys() {
        let base = name.trim_end_matches(|c: char| c.is_ascii_digit());
        assert!(
            base == name || !defs.contains_key(base),
            "schemars renamed {name} to avoid a clash"
        );
    }
    let placement = &schema["x-acp-usage-meta"];
    assert_eq!(placement["metaKey"], "acpUsage");
    for row in placement["written"].as_array().unwrap() {
        assert!(defs.contains_key(row["definition"].as_str().unwrap()), "{row}");
    }
}

/// ACP leaves `_meta` to implementations: no ACP definition may constrain a peer's `_meta`
/// (acp-usage's definitions describe only what acp-usage writes).
#[test]
fn acp_meta_stays_free_form() {
    let schema = schema();
    let mut metas = 0;
    for (name, def) in defs(&schema) {
        if name.starts_with("AcpUsage") {
            continue;
        }
        let Some(meta) = def.pointer("/properties/_meta") else { continue };
        metas += 1;
        assert_eq!(meta["type"], serde_json::json!(["object", "null"]), "{name}");
        assert_eq!(meta["additionalProperties"], true, "{name}");
        assert_eq!(meta.get("properties"), None, "{name}");
    }
    assert!(metas > 50, "only {metas} definitions have a _meta");
}

/// The provenance the file states matches the workspace manifest's pin and features.
#[test]
fn provenance_matches_the_manifest() {
    let manifest = std::fs::read_to_string(workspace_root().join("Cargo.toml")).unwrap();
    let pin = manifest
        .lines()
        .find(|l| l.starts_with("agent-client-protocol-schema ="))
        .expect("the workspace pins agent-client-protocol-schema");
    assert!(pin.contains(&format!("\"={ACP_SCHEMA_CRATE_VERSION}\"")), "{pin}");
    let features: Vec<&str> = pin
        .split("features = [")
        .nth(1)
        .and_then(|rest| rest.split(']').next())
        .map(|list| {
            list.split(',').map(|f| f.trim().trim_matches('"')).filter(|f| !f.is_empty()).collect()
        })
        .unwrap_or_default();
    assert_eq!(features, ACP_FEATURES, "{pin}");
    assert_eq!(
        schema()["x-acp-schema-crate"],
        format!("agent-client-protocol-schema {ACP_SCHEMA_CRATE_VERSION}")
    );
}
