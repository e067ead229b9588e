//! Subscription rate limits seen on the tap's traffic; another change fills these in (for now
//! the tap only calls them where the limits are on the wire).

use super::proxy::State;

/// The headers of a response (or of a WebSocket's 101) on `route`.
pub(super) fn observe_headers(state: &State, route: &str, headers: &hyper::HeaderMap) {
    let _ = (state, route, headers);
}

/// A provider's rate-limit event on `route` (Codex's `codex.rate_limits` WebSocket message).
pub(super) fn observe_event(state: &State, route: &str, json: &[u8]) {
    let _ = (state, route, json);
}
