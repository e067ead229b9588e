//! Qoder CLI (`qodercli --acp`, npm `@qoder-ai/qodercli`; `agentInfo.name` `qoder-cli`).
//!
//! Qoder 1.1.52 calls models through Qoder's own service after a Qoder login (its browser login,
//! or `QODER_PERSONAL_ACCESS_TOKEN`, which it exchanges with that service). Its "bring your own
//! key" models are gated by the account: a user model is checked and stored through Qoder's
//! service (`/algo/api/v2/byok/check`), and custom providers with a base URL of the user's are
//! used only when the logged-in account's `allow_byok` switch allows them. `session/new` answers
//! "Authentication required" without a login (a dummy `QODER_PERSONAL_ACCESS_TOKEN` does not
//! change that), so no session runs on this project's machines; its hidden `--fake-responses`
//! test option replays canned responses and calls no model. The profile names it, so its
//! sessions are labelled as Qoder's; its figures are read as ACP defines them (the generic
//! reading), and nothing is pointed at the tap.

use super::{Agent, Launch, Package, Untapped};
use crate::sources::tap::point::Env;

pub struct Qoder;

impl Agent for Qoder {
    fn name(&self) -> &'static str {
        "qoder"
    }

    fn about(&self) -> &'static str {
        "Qoder CLI (qodercli --acp)"
    }

    fn recognises(&self, word: &str) -> bool {
        // agentInfo.name is "qoder-cli" (title "Qoder CLI"); the command is `qodercli --acp`
        // (npm `@qoder-ai/qodercli`, whose `qoder` bin dispatches to it), or
        // `node …/bundle/qodercli.js`.
        word == "qoder"
            || word == "qoder-cli"
            || word.starts_with("qodercli")
            || word.contains("@qoder-ai")
    }

    fn untapped(&self, _: &Env) -> Vec<Untapped> {
        vec![Untapped {
            why: "Qoder calls models through Qoder's own service after a Qoder login; its \
                  own-key models need the account's permission"
                .into(),
            recorded: false,
        }]
    }

    fn launches(&self) -> &'static [Launch] {
        &[Launch {
            title: "Qoder CLI",
            program: "qodercli",
            args: &["--acp"],
            package: Package::Npm("@qoder-ai/qodercli"),
            registry_id: Some("qoder"),
        }]
    }
}
