//! Unit tests of the agent profiles: detection, model ids and windows, and what each reads.
use super::*;
use crate::agents::acp::{AcpUsage, acp_usage_record};

// More of them, by topic: recognising launch commands, pointing at the tap, and where the
// transcripts are.
mod launch;
mod point;
mod transcripts;

fn profile(name: &str) -> Profile {
    Profile::named(name).unwrap()
}

#[test]
fn detection() {
    let cmd = |s: &str| s.split(' ').map(String::from).collect::<Vec<_>>();
    assert_eq!(
        Profile::detect(Some("@agentclientprotocol/claude-agent-acp"), &[]),
        profile("claude")
    );
    assert_eq!(Profile::detect(Some("codex-acp"), &[]), profile("codex"));
    assert_eq!(Profile::detect(Some("gemini-cli"), &[]), profile("gemini"));
    assert_eq!(Profile::detect(None, &cmd("/x/node_modules/.bin/gemini --acp")), profile("gemini"));
    assert_eq!(Profile::detect(Some("my-agent"), &cmd("npx my-agent")), profile("generic"));
    assert_eq!(Profile::detect(Some("OpenCode"), &[]), profile("opencode"));
    assert_eq!(
        Profile::detect(None, &cmd("/x/.bin/opencode acp -m anthropic/claude-sonnet-4-5")),
        profile("opencode")
    );
    assert_eq!(Profile::detect(Some("Kilo"), &[]), profile("kilo"));
    assert_eq!(Profile::detect(None, &cmd("/x/.bin/kilo acp")), profile("kilo"));
    assert_eq!(
        Profile::detect_before_start(&cmd("node /x/node_modules/@kilocode/cli/bin/kilo acp")),
        profile("kilo")
    );
    assert_eq!(Profile::detect(Some("kilometre"), &[]), profile("generic"));
}

#[test]
fn qwen_reports() {
    assert_eq!(Profile::detect(Some("qwen-code"), &[]), profile("qwen"));
    for value in ["$runtime|openai|gpt-5.2(openai)", "gpt-5.2(openai)", "gpt-5.2"] {
        assert_eq!(profile("qwen").resolve_model(value), (Some("gpt-5.2".into()), None));
    }
    // qwen-code 0.24.4's session/new result: the current model's contextLimit.
    let new = serde_json::json!({"models": {"currentModelId": "$runtime|openai|gpt-5.2(openai)",
        "availableModels": [{"modelId": "other", "_meta": {"contextLimit": 100_000}},
            {"modelId": "$runtime|openai|gpt-5.2(openai)", "_meta": {"contextLimit": 272_000}}]}});
    assert_eq!(
        profile("qwen").reported_windows(&new),
        vec![
            ("other".to_string(), 100_000),
            ("$runtime|openai|gpt-5.2(openai)".to_string(), 272_000)
        ]
    );
    assert!(profile("claude").reported_windows(&new).is_empty());
    // A main call and a subagent's, as qwen reports them.
    let chunk = |extra: &str| {
        format!(
            r#"{{"sessionId":"s","update":{{"sessionUpdate":"agent_message_chunk","content":{{"type":"text","text":""}},"_meta":{{"usage":{{"inputTokens":5100,"outputTokens":41,"totalTokens":5141,"thoughtTokens":11,"cachedReadTokens":4001}},"durationMs":641{extra}}}}}}}"#
        )
    };
    let (rec, role) = profile("qwen").call_in_chunk(&chunk("")).unwrap();
    assert_eq!((rec.input, rec.cache_read, rec.output, rec.thought), (5100, 4001, 41, 11));
    assert_eq!(role, Role::Main);
    let (_, role) =
        profile("qwen").call_in_chunk(&chunk(r#","parentToolCallId":"call_1""#)).unwrap();
    assert_eq!(role, Role::Subagent);
    assert!(profile("generic").call_in_chunk(&chunk("")).is_none());
    let text = r#"{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"usage"}}}"#;
    assert!(profile("qwen").call_in_chunk(text).is_none());
}

#[test]
fn claude_options() {
    // claude-agent-acp 0.101.0's model option after session/new.
    let option = serde_json::json!({"id": "model", "category": "model", "currentValue": "default",
        "options": [
            {"value": "default", "name": "Default (recommended)", "description": "Opus"},
            {"value": "opus", "name": "Opus 5.5", "description": "Opus 5.5 · Best for everyday, complex tasks"},
            {"value": "sonnet", "name": "Sonnet 5.5", "description": "Sonnet 5.5 · Efficient"},
            {"value": "opus[1m]", "name": "Opus 4.7 (1M context)", "description": ""},
            {"value": "haiku", "name": "Haiku 4.5", "description": "Haiku 4.5 · Fastest"}]});
    let r = |v: &str| profile("claude").resolve_option(v, &option);
    assert_eq!(r("default"), (Some("claude-opus-5-5".into()), None));
    assert_eq!(r("sonnet"), (Some("claude-sonnet-5-5".into()), None));
    assert_eq!(r("opus[1m]"), (Some("claude-opus-4-7".into()), Some(1_000_000)));
    assert_eq!(r("haiku"), (Some("claude-haiku-4-5".into()), Some(200_000)));
    // A value the list does not have falls back to the alias rules.
    assert_eq!(r("claude-opus-4-8"), (Some("claude-opus-4-8".into()), Some(200_000)));
    let resolved = serde_json::json!({"options": [
        {"value": "default", "name": "Default", "description": "claude-sonnet-4-6[1m]"}]});
    assert_eq!(
        profile("claude").resolve_option("default", &resolved),
        (Some("claude-sonnet-4-6".into()), Some(1_000_000))
    );
}

#[test]
fn model_aliases() {
    assert_eq!(profile("claude").resolve_model("default"), (None, None));
    assert_eq!(
        profile("claude").resolve_model("opus[1m]"),
        (Some("claude-opus-4-8".into()), Some(1_000_000))
    );
    assert_eq!(
        profile("claude").resolve_model("sonnet"),
        (Some("claude-sonnet-4-6".into()), Some(200_000))
    );
    assert_eq!(
        profile("codex").resolve_model("gpt-5.2-codex/medium"),
        (Some("gpt-5.2-codex".into()), None)
    );
    assert_eq!(
        profile("codex").resolve_model("gpt-5.2-codex[medium]"),
        (Some("gpt-5.2-codex".into()), None)
    );
    assert_eq!(
        profile("gemini").resolve_model("gemini-2.5-pro"),
        (Some("gemini-2.5-pro".into()), Some(1_048_576))
    );
    assert_eq!(
        profile("generic").resolve_model("anthropic/claude-sonnet-4-5"),
        (Some("claude-sonnet-4-5".into()), None)
    );
    for (value, id) in [
        ("anthropic/claude-sonnet-4-5", "claude-sonnet-4-5"),
        ("anthropic/claude-opus-4-8/max", "claude-opus-4-8"),
        ("openrouter/anthropic/claude-sonnet-4.5", "anthropic/claude-sonnet-4.5"),
        ("openai/gpt-5.2-codex/high", "gpt-5.2-codex"),
        ("claude-sonnet-4-5", "claude-sonnet-4-5"),
    ] {
        assert_eq!(profile("opencode").resolve_model(value), (Some(id.into()), None), "{value}");
    }
}

fn opencode_turn(tool: bool) -> (Account, acp_usage_core::Snapshot) {
    let catalog = acp_usage_core::Catalog::embedded();
    let cx = acp_usage_core::account::Context {
        catalog,
        default_window: 1,
        window_percent: 100,
        remembered_size: None,
    };
    let mut account = Account::new();
    account.select_model(profile("opencode").resolve_model("anthropic/claude-sonnet-4-5").0, None);
    account.begin_turn();
    account.prompt_tokens(10);
    account.output_tokens(20, false);
    if tool {
        account.tool_call(5);
        account.tool_output(30);
        account.output_tokens(8, false);
    }
    // opencode 1.18.33 against the mock: the update before the result, then the result.
    let update: AgentUpdate = serde_json::from_value(serde_json::json!({
        "used": 12520, "size": 1_000_000, "cost": {"amount": 0.009615, "currency": "USD"}
    }))
    .unwrap();
    profile("opencode").on_usage_update(&mut account, &update);
    let result = serde_json::json!({"stopReason": "end_turn", "usage": {
        "inputTokens": 20, "outputTokens": 42, "totalTokens": 12562,
        "cachedReadTokens": 11000, "cachedWriteTokens": 1500}, "_meta": {}});
    profile("opencode").on_prompt_result(&mut account, &result);
    let turn = account.end_turn(&cx).unwrap();
    assert_eq!(turn.calls, Some(if tool { 2 } else { 1 }));
    (account.clone(), account.snapshot(&cx))
}

#[test]
fn opencode_numbers() {
    let (_, snap) = opencode_turn(false);
    // One call: `used` gets the output opencode leaves out; the window is the catalog's.
    assert_eq!((snap.used, snap.used_exact), (12_562, true));
    assert_eq!(snap.size, 200_000);
    assert_eq!(snap.cost, Some(0.009615));
    assert_eq!(snap.totals.input, 12_520);
    assert!(snap.totals_exact);
    // Two calls: the last call's counts are not the turn's; the turn stays estimated.
    let (_, snap) = opencode_turn(true);
    assert!(!snap.totals_exact);
    assert_eq!(snap.size, 200_000);
    assert_eq!(snap.cost, Some(0.009615));
}

#[test]
fn acp_usage_conventions() {
    // claude-agent-acp: total = all four.
    let claude = AcpUsage {
        total_tokens: Some(12019),
        input_tokens: Some(12),
        output_tokens: Some(7),
        cached_read_tokens: Some(9000),
        cached_write_tokens: Some(3000),
        ..AcpUsage::default()
    };
    let r = acp_usage_record(&claude).unwrap();
    assert_eq!((r.input, r.cache_read, r.cache_write_5m, r.output), (12012, 9000, 3000, 7));
    // OpenAI style: total = input + output, cache inside input.
    let openai = AcpUsage {
        total_tokens: Some(5040),
        input_tokens: Some(5000),
        output_tokens: Some(40),
        cached_read_tokens: Some(4096),
        thought_tokens: Some(16),
        ..AcpUsage::default()
    };
    let r = acp_usage_record(&openai).unwrap();
    assert_eq!((r.input, r.cache_read, r.output, r.thought), (5000, 4096, 40, 16));
}

#[test]
fn side_calls_that_declare_the_main_tools_are_known_by_their_text() {
    let suggestion = br#"{"tools":[{"name":"Bash"}],"messages":[{"role":"user","content":"Reply with ONLY the suggestion"}]}"#;
    assert!(profile("claude").is_side_call(suggestion));
    assert!(!profile("claude").is_side_call(br#"{"tools":[{"name":"Bash"}],"messages":[]}"#));
    assert!(profile("qwen").is_side_call(
        br#"{"messages":[{"role":"system","content":"You are the memory extraction subagent"}]}"#
    ));
    assert!(
        profile("qwen").is_side_call(
            br#"{"messages":[{"role":"user","content":"[SUGGESTION MODE: predict"}]}"#
        )
    );
    // Another agent's marker means nothing.
    assert!(!profile("codex").is_side_call(suggestion));
}

/// A Mistral Vibe 3.0.3 `usage_update` (against the mock): `used`, its compaction threshold as
/// `size`, its cost and its session counters.
fn vibe_update(used: u64, cost: f64, prompt: u64, completion: u64, cached: u64) -> AgentUpdate {
    let mut update = serde_json::json!({"used": used, "size": 202_144, "_meta": {"steps": 2,
        "promptTokens": prompt, "completionTokens": completion, "cachedTokens": cached,
        "totalTokens": prompt + completion, "tokensPerSecond": 0.0}});
    if cost > 0.0 {
        update["cost"] = serde_json::json!({"amount": cost, "currency": "USD"});
    }
    serde_json::from_value(update).unwrap()
}

/// A Vibe turn: the updates it repeats as the turn starts, one per call, then the result's
/// cumulative `usage`; the turn's usage.
fn vibe_turn(
    account: &mut Account,
    before: AgentUpdate,
    calls: &[AgentUpdate],
    result: serde_json::Value,
) -> acp_usage_core::account::TurnUsage {
    let vibe = profile("vibe");
    let cx = acp_usage_core::account::Context {
        catalog: acp_usage_core::Catalog::embedded(),
        default_window: 1,
        window_percent: 100,
        remembered_size: None,
    };
    account.begin_turn();
    account.prompt_tokens(10);
    vibe.on_usage_update(account, &before);
    vibe.on_usage_update(account, &before);
    for call in calls {
        vibe.on_usage_update(account, call);
    }
    vibe.on_prompt_result(account, &serde_json::json!({"stopReason": "end_turn", "usage": result}));
    account.end_turn(&cx).unwrap()
}

#[test]
fn vibe_reports() {
    let vibe = profile("vibe");
    assert_eq!(Profile::detect(Some("@mistralai/mistral-vibe"), &[]), vibe);
    let cmd = ["/c/venv-vibe/bin/vibe-acp".to_owned()];
    assert_eq!(Profile::detect(None, &cmd), vibe);
    assert_eq!(Profile::detect_before_start(&cmd), vibe);
    assert!(vibe.recognises("mistral vibe"));
    assert!(!vibe.recognises("vibe-coder"));
    // Vibe 3.0.3's model option after session/new: the value an alias, the API id described.
    let option = serde_json::json!({"id": "model", "category": "model", "type": "select",
        "currentValue": "mistral-medium-3.5", "options": [{"value": "mistral-medium-3.5",
        "name": "Mistral Medium 3.5", "description": "mistral-vibe-cli-latest"}]});
    let id = |v: &str| vibe.resolve_option(v, &option).0.unwrap();
    assert_eq!(id("mistral-medium-3.5"), "mistral-vibe-cli-latest");
    assert_eq!(id("mistral-small"), "mistral-vibe-cli-fast");
    assert_eq!(id("mistral-large-4"), "mistral-large-4");
    let catalog = acp_usage_core::Catalog::embedded();
    for model in ["mistral-vibe-cli-latest", "mistral-vibe-cli-fast", "mistral-large-4"] {
        assert!(catalog.lookup(model).is_some(), "{model}");
    }
}

#[test]
fn vibe_numbers_new_then_reload() {
    let vibe = profile("vibe");
    let cx = acp_usage_core::account::Context {
        catalog: acp_usage_core::Catalog::embedded(),
        default_window: 1,
        window_percent: 100,
        remembered_size: None,
    };
    let option = serde_json::json!({"options": [{"value": "mistral-medium-3.5",
        "description": "mistral-vibe-cli-latest"}]});
    // The figures of a run against the mock (docs of tests/e2e/vibe.rs).
    let mut account = Account::new();
    let (model, window) = vibe.resolve_option("mistral-medium-3.5", &option);
    account.select_model(model, window);
    vibe.on_usage_update(&mut account, &vibe_update(0, 0.0, 0, 0, 0));
    assert_eq!(account.snapshot(&cx).size, 262_144);
    let turn = vibe_turn(
        &mut account,
        vibe_update(0, 0.0, 0, 0, 0),
        &[vibe_update(5040, 0.0078, 5000, 40, 0)],
        serde_json::json!({"totalTokens": 5040, "inputTokens": 5000, "outputTokens": 40}),
    );
    assert_eq!((turn.totals.input, turn.totals.output, turn.totals.cache_read), (5000, 40, 0));
    let turn = vibe_turn(
        &mut account,
        vibe_update(5040, 0.0078, 5000, 40, 0),
        &[
            vibe_update(6030, 0.0114954, 11000, 70, 4096),
            vibe_update(7025, 0.0152709, 18000, 95, 9216),
        ],
        serde_json::json!({"totalTokens": 18095, "inputTokens": 18000, "outputTokens": 95,
            "cachedReadTokens": 9216}),
    );
    assert_eq!((turn.totals.input, turn.totals.output, turn.totals.cache_read), (13000, 55, 9216));
    let snap = account.snapshot(&cx);
    // Never Vibe's 202,144 (its compaction threshold): the catalog's window of the model.
    assert_eq!((snap.used, snap.used_exact, snap.size), (7025, true, 262_144));
    assert!((snap.cost.unwrap() - 0.0152709).abs() < 1e-9, "{snap:?}");

    // Reloaded in a new process: the restored counters come before the load response (which
    // resets the base), then again as the turn starts; the turn is only its own call.
    let mut account = Account::restored();
    account.select_model(Some("mistral-vibe-cli-latest".into()), None);
    vibe.on_usage_update(&mut account, &vibe_update(8050, 0.0193515, 26000, 145, 15360));
    account.reset_agent_cumulative();
    let turn = vibe_turn(
        &mut account,
        vibe_update(8050, 0.0193515, 26000, 145, 15360),
        &[vibe_update(9010, 0.0329265, 35000, 155, 15360)],
        serde_json::json!({"totalTokens": 35155, "inputTokens": 35000, "outputTokens": 155,
            "cachedReadTokens": 15360}),
    );
    assert_eq!((turn.totals.input, turn.totals.output, turn.totals.cache_read), (9000, 10, 0));
    // Resumed: the response resets the base, the restored counters follow it.
    let mut account = Account::restored();
    account.reset_agent_cumulative();
    vibe.on_usage_update(&mut account, &vibe_update(9010, 0.0329265, 35000, 155, 15360));
    let turn = vibe_turn(
        &mut account,
        vibe_update(9010, 0.0329265, 35000, 155, 15360),
        &[vibe_update(9010, 0.0465015, 44000, 165, 15360)],
        serde_json::json!({"totalTokens": 44165, "inputTokens": 44000, "outputTokens": 165,
            "cachedReadTokens": 15360}),
    );
    assert_eq!((turn.totals.input, turn.totals.output, turn.totals.cache_read), (9000, 10, 0));
    let snap = account.snapshot(&cx);
    assert!((snap.cost.unwrap() - 0.0465015).abs() < 1e-9, "{snap:?}");
}

#[test]
fn plans_say_whose_windows_a_provider_states() {
    let word = |provider| Plan::of_provider(provider).map(|p| p.word);
    assert_eq!(word("anthropic"), Some("Claude"));
    assert_eq!(word("openai"), Some("Codex"));
    assert_eq!(word("google"), Some("Gemini"));
    assert_eq!(word("mistral"), None);
    let provider = |agent| Profile::named(agent).and_then(|p| p.plan()).map(|p| p.provider);
    assert_eq!(provider("claude"), Some("anthropic"));
    assert_eq!(provider("qwen"), None);
    assert!(Plan::is_own_family("codex"));
    assert!(!Plan::is_own_family("codex_bengalfox"));
}
