//! Subscription windows the tap reads: the rate-limit headers of every response (Anthropic's
//! `anthropic-ratelimit-unified-*`, Codex's `x-codex-*`), Codex's `codex.rate_limits` stream
//! events (HTTP and WebSocket), and Gemini Code Assist's `retrieveUserQuota` answers. Each
//! observation goes to the relay on a channel of its own; nothing here changes a byte.

use acp_usage_core::limits::credits::{self, Credits};
use acp_usage_core::limits::{self, Limit};
use hyper::HeaderMap;

use super::now_ms;
use super::watched::Reader;

/// What the relay receives: the session header of the request, when the agent sends one, the
/// windows, and the credits and plan the response states beside them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Observed {
    pub session: Option<String>,
    pub limits: Vec<Limit>,
    pub credits: Option<Credits>,
    /// The account the response itself names (Anthropic's organisation), which wins over the
    /// request's.
    pub named: Option<String>,
    /// The request's credential fingerprint and the account the response named for it, for
    /// the ledger's `account_aliases`.
    pub alias: Option<(String, String)>,
}

/// The largest quota answer read (they are a few hundred bytes).
const QUOTA_MAX: usize = 1 << 20;

/// The tap's side of the channel to the relay: each window sent is labelled with the account
/// of the latest request the agent made (one agent process signs in as one account at a time;
/// a response's windows are of the request that asked).
#[derive(Debug, Clone)]
pub struct Sender {
    tx: tokio::sync::mpsc::UnboundedSender<Observed>,
    whose: std::sync::Arc<Whose>,
}

#[derive(Debug)]
struct Whose {
    /// Loaded at the first request (the key file is read, or made, only by a tap in use).
    fingerprints: std::sync::OnceLock<crate::accounts::Fingerprints>,
    latest: std::sync::Mutex<Option<String>>,
}

impl Sender {
    /// A sender to `tx` that fingerprints credentials with the key beside the ledger.
    pub fn new(tx: tokio::sync::mpsc::UnboundedSender<Observed>) -> Sender {
        let whose =
            Whose { fingerprints: std::sync::OnceLock::new(), latest: std::sync::Mutex::new(None) };
        Sender { tx, whose: std::sync::Arc::new(whose) }
    }

    /// A request of the agent's is going out: the windows read after it are its account's.
    pub fn request(&self, headers: &HeaderMap) {
        let fingerprints = self.whose.fingerprints.get_or_init(|| {
            crate::accounts::Fingerprints::load(crate::sinks::ledger::path().as_deref())
        });
        if let Some(account) = fingerprints.of_request(headers)
            && let Ok(mut latest) = self.whose.latest.lock()
        {
            *latest = Some(account);
        }
    }

    fn send(&self, mut observed: Observed) -> bool {
        let request = self.whose.latest.lock().ok().and_then(|l| l.clone());
        if let (Some(named), Some(key)) = (&observed.named, &request)
            && key.starts_with("key:")
        {
            observed.alias = Some((key.clone(), named.clone()));
        }
        let account = observed.named.clone().or(request);
        for l in &mut observed.limits {
            l.account = account.clone();
        }
        if let Some(c) = &mut observed.credits {
            c.account = account;
        }
        self.tx.send(observed).is_ok()
    }
}

// The tap's state is not named here: it holds this module's channel, and the functions below
// take the channel and the relay's wake-up instead (`state.limits`, `state.notify`).

/// The windows a response's headers state.
pub(super) fn observe_headers(
    limits_tx: &Sender,
    notify: &tokio::sync::Notify,
    session: Option<String>,
    headers: &HeaderMap,
) {
    let pairs: Vec<(&str, &str)> =
        headers.iter().filter_map(|(k, v)| Some((k.as_str(), v.to_str().ok()?))).collect();
    let now = now_ms();
    let unreadable = limits::unreadable_headers(pairs.iter().copied());
    if !unreadable.is_empty() {
        // Names only: what a provider sent that is not a number is left out.
        tracing::debug!(headers = ?unreadable, "tap: rate-limit headers with unreadable values ignored");
    }
    let observed = Observed {
        session,
        limits: limits::from_headers(pairs.iter().copied(), now),
        credits: credits::from_headers(pairs.iter().copied(), now),
        named: crate::accounts::Fingerprints::of_response(headers),
        alias: None,
    };
    send(limits_tx, notify, observed);
}

/// The windows of one `codex.rate_limits` event (a WebSocket text message).
pub(super) fn observe_event(
    limits_tx: &Sender,
    notify: &tokio::sync::Notify,
    session: Option<String>,
    json: &[u8],
) {
    let Ok(event) = serde_json::from_slice::<serde_json::Value>(json) else { return };
    let now = now_ms();
    let observed = Observed {
        session,
        limits: limits::from_codex_event_value(&event, now),
        credits: credits::from_codex_value(&event, now),
        ..Observed::default()
    };
    send(limits_tx, notify, observed);
}

/// Windows read out of a body (a model call's by its usage reader, a quota answer).
pub(super) fn observe_read(
    limits_tx: &Sender,
    notify: &tokio::sync::Notify,
    session: Option<String>,
    found: Vec<Limit>,
) {
    send(limits_tx, notify, Observed { session, limits: found, ..Observed::default() });
}

fn send(limits_tx: &Sender, notify: &tokio::sync::Notify, observed: Observed) {
    let said =
        !observed.limits.is_empty() || observed.credits.is_some() || observed.named.is_some();
    // The relay may have ended: nobody is counting any more.
    if said && limits_tx.send(observed) {
        notify.notify_one();
    }
}

/// Whether a request is Code Assist's quota question.
pub(super) fn is_quota(path: &str) -> bool {
    path.ends_with(":retrieveUserQuota")
}

/// A quota answer, copied whole as it passes and read at its end.
pub(super) struct QuotaRead {
    copy: Option<Vec<u8>>,
    session: Option<String>,
    limits: Sender,
    notify: std::sync::Arc<tokio::sync::Notify>,
}

impl QuotaRead {
    pub fn new(
        limits: &Sender,
        notify: &std::sync::Arc<tokio::sync::Notify>,
        session: Option<String>,
    ) -> QuotaRead {
        QuotaRead {
            copy: Some(Vec::new()),
            session,
            limits: limits.clone(),
            notify: notify.clone(),
        }
    }
}

impl Reader for QuotaRead {
    fn chunk(&mut self, chunk: &[u8]) {
        if let Some(copy) = &mut self.copy {
            if copy.len() + chunk.len() > QUOTA_MAX {
                self.copy = None;
            } else {
                copy.extend_from_slice(chunk);
            }
        }
    }

    /// A body cut short says nothing; a whole one (or one of known length the server stopped
    /// polling once sent) is read, once.
    fn end(&mut self, broken: bool) {
        let Some(copy) = self.copy.take() else { return };
        if !broken {
            let found = limits::from_code_assist_quota(&copy, now_ms());
            observe_read(&self.limits, &self.notify, self.session.take(), found);
        }
    }
}
