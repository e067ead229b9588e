//! Every login the tap points keeps working through it and is counted from it: the real agent
//! through `acp-usage --tap` against the mock, signed in the way a subscriber is, not with an
//! API key.
//!
//! - Claude Code with `CLAUDE_CODE_OAUTH_TOKEN` (no `ANTHROPIC_API_KEY`): `Authorization: Bearer`
//!   and the `oauth-2025-04-20` beta on `/v1/messages`. Its OAuth side calls (profile, roles,
//!   usage) go to `api.anthropic.com` itself, not to `ANTHROPIC_BASE_URL`: the tap never sees
//!   them, and offline they fail without harm.
//! - Codex (codex-acp 2.6.0) signed in with ChatGPT (`auth.json` in `chatgpt` mode, unsigned
//!   JWTs that expire in 2100 and a fresh `last_refresh`, so no refresh is due) and
//!   `openai_base_url` set to the mock: every call carries the bearer token and
//!   `chatgpt-account-id`, and reaches the mock through the tap. Its ChatGPT-backend calls
//!   (plugins, apps MCP, analytics, remote control) go to `chatgpt.com` itself and fail offline.
//! - Gemini CLI signed in with Google (`oauth-personal`, Code Assist at `CODE_ASSIST_ENDPOINT`).
//!   A cached `oauth_creds.json` cannot be used offline: 0.61 checks the token at
//!   `oauth2.googleapis.com/tokeninfo` on every start and falls back to an interactive login.
//!   The test signs in with an access token instead (`GOOGLE_GENAI_USE_GCA` +
//!   `GOOGLE_CLOUD_ACCESS_TOKEN`), the same Code Assist client after authentication.
//! - An agent acp-usage does not know (the generic profile) runs untapped: none of the tap's
//!   variables reach it.
//!
//! Credentials are compared with what the mock received, never printed.

use std::path::Path;

use acp_usage_tests::agents::{Agent, CODEX_MODEL};
use acp_usage_tests::client::{AcpClient, ClientOptions, CommandSpec};
use acp_usage_tests::lab::Lab;
use acp_usage_tests::mock_llm::{CallKind, Provider, Received};
use acp_usage_tests::relay;
use acp_usage_tests::scratch::Scratch;
use serde_json::json;

use crate::flows::{self, Expect};
use crate::support::{self, Known};

/// No flag: the tap is on by default for every agent with a profile.
const TAP: &[&str] = &[];

/// Checks that every request the mock received carried `header` with the value `want`. Failures
/// name the requests and the header, never a value.
fn every_request_carried(received: &[Received], header: &str, want: &str) {
    assert!(!received.is_empty(), "the mock received no request");
    let wrong: Vec<&Received> =
        received.iter().filter(|r| r.credential(header) != Some(want)).collect();
    assert!(wrong.is_empty(), "{header} missing or not the login's on: {wrong:#?}");
}

/// What the mock saw, for the run's log (no credential values).
fn print_received(what: &str, received: &[Received]) {
    eprintln!("{what}: the mock received {} request(s):", received.len());
    for r in received {
        let names: Vec<&str> = r.credentials.iter().map(|(n, _)| n.as_str()).collect();
        let upgrade = if r.upgrade { " (upgrade)" } else { "" };
        eprintln!("  {} {}{upgrade} credentials: {names:?}", r.method, r.target);
    }
}

// --- Claude Code with an OAuth token -------------------------------------------------------

const CLAUDE_OAUTH_TOKEN: &str = "sk-ant-oat01-mock-login-token-5d1c";

#[test]
fn claude_oauth_token_through_the_tap() {
    let mut lab = Lab::new(Agent::Claude, support::script(Agent::Claude)).expect("lab");
    // As a subscriber runs it: no API key, and Claude Code's non-essential traffic on (its OAuth
    // profile, usage and settings calls go to api.anthropic.com, which is unreachable here).
    lab.spec.env.retain(|(name, _)| {
        !matches!(name.as_str(), "ANTHROPIC_API_KEY" | "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC")
    });
    lab.spec.set_env("CLAUDE_CODE_OAUTH_TOKEN", CLAUDE_OAUTH_TOKEN);
    // Signed in, Claude Code's default model is Sonnet 5.5 rather than Opus 5.5: the same
    // 1,000,000 window.
    flows::relay_turns_in(crate::claude::EXPECT.tapped(), &lab, TAP);

    let received = lab.mock.received();
    print_received("claude (OAuth token)", &received);
    every_request_carried(&received, "authorization", &format!("Bearer {CLAUDE_OAUTH_TOKEN}"));
    assert!(
        received.iter().all(|r| r.credential("x-api-key").is_none()),
        "an x-api-key went out with an OAuth login: {received:#?}"
    );
    let calls = lab.mock.calls();
    let billed: Vec<_> = calls.iter().filter(|c| c.kind.is_billed()).collect();
    assert!(!billed.is_empty());
    for call in &billed {
        let beta = call.headers.iter().find(|(n, _)| n == "anthropic-beta").map(|(_, v)| v);
        assert!(
            beta.is_some_and(|b| b.split(',').any(|b| b.trim().starts_with("oauth-"))),
            "call #{} lacks the OAuth beta: {beta:?}",
            call.seq
        );
    }
}

// --- Codex signed in with ChatGPT ----------------------------------------------------------

const CHATGPT_ACCOUNT: &str = "mock-chatgpt-account-7f3e";
/// gpt-5.2-codex: 272,000 × 95%.
const CODEX_WINDOW: u64 = 258_400;

const CODEX_EXPECT: Expect = Expect {
    agent: Agent::CodexTs,
    size: CODEX_WINDOW,
    size_on_new: Some(CODEX_WINDOW),
    known: Known::Everything,
    turn_exact: true,
    resume: true,
    unrecorded_auxiliary: true,
    auxiliary_in_part: false,
    tap: false,
};

/// Base64url without padding, as JWTs are written.
fn base64url(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..=chunk.len() {
            out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
        }
    }
    out
}

/// An unsigned JWT (Codex reads the claims without checking a signature) that expires in 2100,
/// with the ChatGPT claims Codex reads for the plan and the account.
fn chatgpt_jwt(extra: serde_json::Value) -> String {
    let mut claims = json!({
        "iss": "https://auth.openai.com",
        "sub": "mock-user",
        "iat": 1_795_000_000,
        "exp": 4_102_444_800u64,
        "https://api.openai.com/auth": {
            "chatgpt_plan_type": "pro",
            "chatgpt_user_id": "mock-user",
            "chatgpt_account_id": CHATGPT_ACCOUNT,
            "user_id": "mock-user",
        },
    });
    if let (Some(claims), Some(extra)) = (claims.as_object_mut(), extra.as_object()) {
        claims.extend(extra.clone());
    }
    let header = base64url(br#"{"alg":"none","typ":"JWT"}"#);
    format!("{header}.{}.c2ln", base64url(claims.to_string().as_bytes()))
}

/// `$CODEX_HOME/auth.json` signed in with ChatGPT, refreshed just now: Codex refreshes when
/// `last_refresh` is old or the access token near its expiry, neither of which holds.
fn chatgpt_auth_json(access_token: &str) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs();
    let auth = json!({
        "auth_mode": "chatgpt",
        "OPENAI_API_KEY": null,
        "tokens": {
            "id_token": chatgpt_jwt(json!({"email": "mock@example.com", "email_verified": true})),
            "access_token": access_token,
            "refresh_token": "mock-refresh-token",
            "account_id": CHATGPT_ACCOUNT,
        },
        "last_refresh": rfc3339(now),
    });
    serde_json::to_string_pretty(&auth).unwrap_or_default()
}

/// Unix seconds as `YYYY-MM-DDTHH:MM:SSZ` (UTC).
fn rfc3339(secs: u64) -> String {
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Howard Hinnant's days-to-civil.
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[test]
fn codex_chatgpt_login_through_the_tap() {
    let mut lab = Lab::new(Agent::CodexTs, support::script(Agent::CodexTs)).expect("lab");
    let codex_home = lab.scratch.home().join(".codex");
    let access_token = chatgpt_jwt(json!({"scp": ["openid", "profile", "email"]}));
    std::fs::write(codex_home.join("auth.json"), chatgpt_auth_json(&access_token))
        .expect("auth.json");
    // The built-in `openai` provider, pointed at the mock as a user with a gateway would. Signed
    // in with ChatGPT, Codex takes its model catalogue from `<base>/models` (the mock's is
    // empty), so the window is stated.
    let config = format!(
        "model = \"{CODEX_MODEL}\"\nopenai_base_url = \"{}/v1\"\nmodel_context_window = 272000\n",
        lab.mock.url()
    );
    std::fs::write(codex_home.join("config.toml"), config).expect("config.toml");
    lab.spec.env.retain(|(name, _)| name != "MOCK_API_KEY");
    // codex-acp 2.6 gives `CODEX_CONFIG` (where the tap's `openai_base_url` is) to the
    // session's threads only; its app server runs on `config.toml`, so the session title (an
    // ephemeral thread on another model) and the model listing go to `config.toml`'s
    // `openai_base_url` (here the mock): through the tap too, which points the app server
    // itself. Every call the mock bills is expected, the title call included.
    flows::relay_turns_in(CODEX_EXPECT.tapped(), &lab, TAP);

    let received = lab.mock.received();
    print_received("codex (ChatGPT login)", &received);
    // Every request reached the mock through the user's base URL, the WebSocket upgrade (if the
    // tap passes it on) included: none was diverted to chatgpt.com.
    every_request_carried(&received, "authorization", &format!("Bearer {access_token}"));
    every_request_carried(&received, "chatgpt-account-id", CHATGPT_ACCOUNT);
    // Over HTTP (the tap declines the WebSocket with 426) or a WebSocket, whichever the tap
    // passes on: not asserted.
    assert!(
        received.iter().any(|r| r.target.starts_with("/v1/responses")),
        "no Responses call reached the mock: {received:#?}"
    );
}

// --- Gemini CLI signed in with Google (Code Assist) ----------------------------------------

const GOOGLE_ACCESS_TOKEN: &str = "ya29.mock-google-login-token-2b9a";
/// gemini-2.5-pro.
const GEMINI_WINDOW: u64 = 1_048_576;

const GEMINI_EXPECT: Expect = Expect {
    agent: Agent::Gemini,
    size: GEMINI_WINDOW,
    size_on_new: Some(GEMINI_WINDOW),
    known: Known::Everything,
    turn_exact: true,
    resume: false,
    unrecorded_auxiliary: false,
    auxiliary_in_part: false,
    tap: false,
};

#[test]
fn gemini_google_login_through_the_tap() {
    let mut lab = Lab::new(Agent::Gemini, support::script(Agent::Gemini)).expect("lab");
    let settings_path = lab.scratch.home().join(".gemini/settings.json");
    let mut settings: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&settings_path).expect("settings"))
            .expect("settings JSON");
    settings["security"]["auth"]["selectedType"] = json!("oauth-personal");
    std::fs::write(&settings_path, settings.to_string()).expect("settings");
    lab.spec
        .env
        .retain(|(name, _)| !matches!(name.as_str(), "GEMINI_API_KEY" | "GOOGLE_GEMINI_BASE_URL"));
    lab.spec.set_env("CODE_ASSIST_ENDPOINT", lab.mock.url());
    lab.spec.set_env("GOOGLE_GENAI_USE_GCA", "true");
    lab.spec.set_env("GOOGLE_CLOUD_ACCESS_TOKEN", GOOGLE_ACCESS_TOKEN);
    let ledger = lab.scratch.path("ledger.db");
    lab.spec.set_env("ACP_USAGE_LEDGER", ledger.display().to_string());
    flows::relay_turns_in(GEMINI_EXPECT.tapped(), &lab, TAP);

    // The quota Gemini CLI asked for after its calls, as the tap read it: 0.75 remaining.
    let out = std::process::Command::new(relay::relay_binary().expect("binary"))
        .args(["report", "limits", "--json", "--utc", "--ledger"])
        .arg(&ledger)
        .output()
        .expect("report limits");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let google = report["rows"]
        .as_array()
        .and_then(|rows| rows.iter().find(|r| r["provider"] == "google"))
        .unwrap_or_else(|| panic!("no Code Assist quota in the ledger: {report:#}"));
    assert_eq!(google["lastUsedPercent"].as_f64(), Some(25.0), "{google}");
    assert_eq!(google["resetsAt"], "2099-01-01T00:00:00Z", "{google}");

    let received = lab.mock.received();
    print_received("gemini (Google login)", &received);
    every_request_carried(&received, "authorization", &format!("Bearer {GOOGLE_ACCESS_TOKEN}"));
    let calls = lab.mock.calls();
    let billed: Vec<_> = calls.iter().filter(|c| c.kind.is_billed()).collect();
    assert!(
        billed.iter().all(|c| c.provider == Provider::CodeAssist),
        "a billed call went elsewhere than Code Assist: {billed:#?}"
    );
    for method in ["loadCodeAssist", "streamGenerateContent"] {
        assert!(
            calls.iter().any(|c| c.target.contains(&format!("v1internal:{method}"))),
            "no {method} call: {calls:#?}"
        );
    }
    let unhandled: Vec<_> = calls.iter().filter(|c| c.kind == CallKind::Unhandled).collect();
    assert!(unhandled.is_empty(), "Code Assist calls the mock does not serve: {unhandled:#?}");
}

// --- An agent the tap cannot point runs untapped ---------------------------------------------

/// Runs `acp-usage` (no `--tap`: the default) in front of the fake agent behind a wrapper
/// script with a name no profile knows, which writes its environment to a file first; returns
/// the dumped environment.
fn generic_agent_env(scratch: &Scratch, base_urls: &[(&str, &str)]) -> Vec<(String, String)> {
    let fake = env!("CARGO_BIN_EXE_fake-acp-agent");
    let dump = scratch.path("agent-env.txt");
    let wrapper = scratch.path("unknown-acp-agent");
    std::fs::write(
        &wrapper,
        format!("#!/bin/sh\nenv > '{}'\nexec '{fake}' \"$@\"\n", dump.display()),
    )
    .expect("the wrapper");
    set_executable(&wrapper);
    let mut env = vec![
        ("PATH".to_owned(), std::env::var("PATH").unwrap_or_default()),
        ("HOME".to_owned(), scratch.home().display().to_string()),
        ("ACP_USAGE_LOG".to_owned(), "debug".to_owned()),
    ];
    env.extend(base_urls.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    let spec = CommandSpec {
        program: wrapper,
        args: Vec::new(),
        env,
        cwd: scratch.work(),
        stderr_file: scratch.path("relay.stderr"),
    };
    let relayed = spec.wrapped(&relay::relay_binary().expect("acp-usage"), &[]);
    let client = AcpClient::spawn(&relayed, ClientOptions::default()).expect("start the relay");
    let init = client.initialize().expect("initialize through the relay");
    assert_eq!(init["agentInfo"]["name"], "fake-acp-agent", "{init}");
    client.new_session(&scratch.work()).expect("session/new");
    drop(client);
    let text = std::fs::read_to_string(&dump).expect("the agent's environment");
    text.lines()
        .filter_map(|line| line.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

fn set_executable(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

/// Passes on this branch already (the tap is off unless asked for); what it guards is the
/// default-on tap: it must stay off for the generic profile, whose base URLs would be a guess.
#[test]
fn generic_agent_runs_untapped() {
    let scratch = Scratch::new("logins-generic").expect("scratch");
    let mine = [
        ("ANTHROPIC_BASE_URL", "http://127.0.0.1:9/users-anthropic"),
        ("OPENAI_BASE_URL", "http://127.0.0.1:9/users-openai/v1"),
    ];
    let env = generic_agent_env(&scratch, &mine);
    let get = |name: &str| env.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str());
    for (name, value) in mine {
        assert_eq!(get(name), Some(value), "{name} changed for the generic profile");
    }
    // The tap's URLs are http://127.0.0.1:PORT/<48 hex digits>/<route>.
    let tapped: Vec<&String> = env
        .iter()
        .filter(|(_, v)| {
            v.split("127.0.0.1:").skip(1).any(|rest| {
                rest.split('/').nth(1).is_some_and(|secret| {
                    secret.len() == 48 && secret.bytes().all(|b| b.is_ascii_hexdigit())
                })
            })
        })
        .map(|(k, _)| k)
        .collect();
    assert!(tapped.is_empty(), "the tap's URL reached the generic agent in {tapped:?}");
    for var in ["GOOGLE_GEMINI_BASE_URL", "CODE_ASSIST_ENDPOINT", "CODEX_CONFIG"] {
        assert!(get(var).is_none(), "{var} was set for the generic profile");
    }
}
