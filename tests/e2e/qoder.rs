//! Qoder CLI 1.1.52 (`qodercli --acp`, npm `@qoder-ai/qodercli`) without a Qoder login.
//!
//! Qoder calls models through Qoder's own service, and its own-key models need the account's
//! permission from that service; `session/new` needs a Qoder login. What runs here:
//! `initialize` (`agentInfo.name` `qoder-cli`, one auth method, `qodercli-login`) and the
//! `session/new` refusal, the same bytes directly and through acp-usage.

use acp_usage_tests::agents::Agent;

use crate::flows;

#[test]
fn qoder_login_refusal_passes_unchanged() {
    let (init, error) = flows::relay_passes_login_refusal(Agent::Qoder);
    assert_eq!(init["agentInfo"]["name"], "qoder-cli", "{init}");
    assert_eq!(init["agentInfo"]["version"], "1.1.52", "{init}");
    assert_eq!(init["authMethods"][0]["id"], "qodercli-login", "{init}");
    assert_eq!(error["code"], -32000, "{error}");
    assert_eq!(error["message"], "Authentication required: Authentication is required.", "{error}");
}
