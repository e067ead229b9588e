//! The credit balance and plan a provider states beside its windows (Codex's
//! `x-codex-credits-*` and `x-codex-plan-type` headers, the `credits` and `plan_type` of its
//! `codex.rate_limits` events). A balance is the provider's own unit, never a dollar cost: it
//! is shown as stated, as text.

use serde_json::Value;

/// What a response says of the account's credits and plan.
#[derive(Debug, Clone, PartialEq)]
pub struct Credits {
    /// `openai`.
    pub provider: String,
    /// Whether the account has credits.
    pub has_credits: Option<bool>,
    /// Whether they are unlimited.
    pub unlimited: Option<bool>,
    /// The balance, as the provider wrote it (`"12.5"`).
    pub balance: Option<String>,
    /// The plan (`plus`, `pro`, `team`, ...).
    pub plan_type: Option<String>,
    /// Whose (see [`super::Limit::account`]).
    pub account: Option<String>,
    /// When it was observed, Unix milliseconds.
    pub observed_ms: i64,
}

impl Credits {
    fn empty(observed_ms: i64) -> Credits {
        Credits {
            provider: "openai".into(),
            has_credits: None,
            unlimited: None,
            balance: None,
            plan_type: None,
            account: None,
            observed_ms,
        }
    }

    /// Whether nothing was stated.
    fn is_empty(&self) -> bool {
        self.has_credits.is_none()
            && self.unlimited.is_none()
            && self.balance.is_none()
            && self.plan_type.is_none()
    }

    /// `12.5 credits (plan plus)`, `unlimited credits`, `no credits`, `plan pro`.
    pub fn describe(&self) -> String {
        let credits = match (self.unlimited, self.has_credits, &self.balance) {
            (Some(true), _, _) => Some("unlimited credits".to_owned()),
            (_, _, Some(b)) => Some(format!("{b} credits")),
            (_, Some(false), None) => Some("no credits".to_owned()),
            (_, Some(true), None) => Some("credits (balance not stated)".to_owned()),
            _ => None,
        };
        let plan = self.plan_type.as_deref().map(|p| format!("plan {p}"));
        match (credits, plan) {
            (Some(c), Some(p)) => format!("{c} ({p})"),
            (Some(c), None) => c,
            (None, Some(p)) => p,
            (None, None) => "not stated".to_owned(),
        }
    }
}

/// A flag as Codex writes it (`true`/`false`, `1`/`0`); anything else is not stated.
fn flag(text: &str) -> Option<bool> {
    match text.trim().to_ascii_lowercase().as_str() {
        "true" | "1" => Some(true),
        "false" | "0" => Some(false),
        _ => None,
    }
}

/// A balance: a finite number, kept as written.
fn balance(text: &str) -> Option<String> {
    let t = text.trim();
    t.parse::<f64>().ok().filter(|n| n.is_finite()).map(|_| t.to_owned())
}

/// What a response's headers say of credits and plan; `None` when they say nothing. Garbage
/// values are left out (and logged by the caller at debug, as unread).
pub fn from_headers<'a>(
    headers: impl IntoIterator<Item = (&'a str, &'a str)>,
    observed_ms: i64,
) -> Option<Credits> {
    let mut c = Credits::empty(observed_ms);
    for (name, value) in headers {
        match name.to_ascii_lowercase().as_str() {
            "x-codex-credits-has-credits" => c.has_credits = flag(value),
            "x-codex-credits-unlimited" => c.unlimited = flag(value),
            "x-codex-credits-balance" => c.balance = balance(value),
            "x-codex-plan-type" => {
                c.plan_type = Some(value.trim().to_owned()).filter(|p| !p.is_empty())
            }
            _ => {}
        }
    }
    (!c.is_empty()).then_some(c)
}

/// What a `codex.rate_limits` event (or a rollout's `rate_limits`) says of credits and plan.
pub fn from_codex_value(v: &Value, observed_ms: i64) -> Option<Credits> {
    let mut c = Credits::empty(observed_ms);
    let credits = &v["credits"];
    c.has_credits = credits["has_credits"].as_bool();
    c.unlimited = credits["unlimited"].as_bool();
    c.balance = match &credits["balance"] {
        Value::String(s) => balance(s),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    };
    c.plan_type = v["plan_type"].as_str().filter(|p| !p.is_empty()).map(str::to_owned);
    (!c.is_empty()).then_some(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codex_headers_and_events() {
        let headers = [
            ("x-codex-credits-has-credits", "true"),
            ("x-codex-credits-unlimited", "false"),
            ("x-codex-credits-balance", "12.5"),
            ("X-Codex-Plan-Type", "plus"),
        ];
        let c = from_headers(headers, 7).expect("stated");
        assert_eq!((c.has_credits, c.unlimited), (Some(true), Some(false)));
        assert_eq!(c.balance.as_deref(), Some("12.5"));
        assert_eq!(c.describe(), "12.5 credits (plan plus)");
        assert_eq!(from_headers([("x-request-id", "1")], 7), None);
        // Garbage is not stated.
        let junk = from_headers(
            [("x-codex-credits-balance", "lots"), ("x-codex-credits-unlimited", "maybe")],
            7,
        );
        assert_eq!(junk, None);

        let event: Value = serde_json::from_str(
            r#"{"type":"codex.rate_limits","plan_type":"pro","credits":{"has_credits":true,"unlimited":true,"balance":null}}"#,
        )
        .unwrap();
        let c = from_codex_value(&event, 1).expect("stated");
        assert_eq!(c.describe(), "unlimited credits (plan pro)");
        let none: Value = serde_json::from_str(r#"{"credits":null}"#).unwrap();
        assert_eq!(from_codex_value(&none, 1), None);
    }
}
