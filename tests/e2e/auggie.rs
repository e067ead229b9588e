//! Auggie 0.36.0 (`auggie --acp`, npm `@augmentcode/auggie`) without an Augment login.
//!
//! Every model call of Auggie goes to Augment's own API (its `chat-stream` protocol), never to a
//! provider's, so no mock LLM can stand in for it, and `session/new` needs an Augment login,
//! which it cannot do over ACP. What runs here: `initialize` (`agentInfo.name` `auggie`, no auth
//! methods) and the `session/new` refusal, the same bytes directly and through acp-usage.

use acp_usage_tests::agents::Agent;

use crate::flows;

#[test]
fn auggie_login_refusal_passes_unchanged() {
    let (init, error) = flows::relay_passes_login_refusal(Agent::Auggie);
    assert_eq!(init["agentInfo"]["name"], "auggie", "{init}");
    assert!(
        init["agentInfo"]["version"].as_str().is_some_and(|v| v.starts_with("0.36.0")),
        "{init}"
    );
    assert_eq!(init["authMethods"], serde_json::json!([]), "{init}");
    assert_eq!(error["code"], -32000, "{error}");
    let message = error["message"].as_str().unwrap_or_default();
    assert!(message.contains("auggie login"), "{error}");
}
