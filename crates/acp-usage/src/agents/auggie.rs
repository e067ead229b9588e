//! Auggie (`auggie --acp`, npm `@augmentcode/auggie`; `agentInfo.name` `auggie`), Augment
//! Code's CLI.
//!
//! Every model call of Auggie 0.36 goes to Augment's own API (`chat-stream` at the tenant URL
//! its login gives, or `AUGMENT_API_URL` with `AUGMENT_API_TOKEN`), in Augment's protocol, not
//! a provider's: its "bring your own key" settings (`bringYourOwnKey`, `AUGMENT_ANTHROPIC_API_KEY`
//! and the like) send the user's provider keys to that API in `bring_your_own_key`, and its
//! `third_party_override` is a field of the same requests. No setting points it at a standard
//! LLM API, so the tap has nothing to point. `session/new` needs an Augment login ("Auggie does
//! not currently support authenticating over ACP"), which this project's machines cannot have;
//! what Auggie sends over ACP after a login is not known here. The profile names it, so its
//! sessions are labelled as Auggie's; its figures are read as ACP defines them (the generic
//! reading: its own `used`, `size` and `cost` if it sends them, else estimates).

use super::{Agent, Launch, Package, Untapped};
use crate::sources::tap::point::Env;

pub struct Auggie;

impl Agent for Auggie {
    fn name(&self) -> &'static str {
        "auggie"
    }

    fn about(&self) -> &'static str {
        "Auggie (Augment Code CLI, auggie --acp)"
    }

    fn recognises(&self, word: &str) -> bool {
        // agentInfo.name is "auggie" (title "Auggie Agent"); the command is `auggie --acp`, or
        // `node …/@augmentcode/auggie/augment.mjs`.
        word == "auggie" || word.starts_with("auggie@") || word.contains("@augmentcode")
    }

    fn untapped(&self, _: &Env) -> Vec<Untapped> {
        vec![Untapped {
            why: "Auggie calls only Augment's own API (its chat-stream protocol, after an \
                  Augment login), never a provider's"
                .into(),
            recorded: false,
        }]
    }

    fn launches(&self) -> &'static [Launch] {
        &[Launch {
            title: "Auggie",
            program: "auggie",
            args: &["--acp"],
            package: Package::Npm("@augmentcode/auggie"),
            registry_id: Some("auggie"),
        }]
    }
}
