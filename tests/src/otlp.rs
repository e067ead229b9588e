//! OTLP for the export tests: a receiver of the tests' own, a real collector (rotel) in front of
//! it, and a small OTLP/HTTP client.
//!
//! - [`OtlpReceiver`]: OTLP/HTTP on 127.0.0.1 (`POST /v1/metrics`, `/v1/logs`, protobuf, plain or
//!   gzip), decoded with the official OpenTelemetry protobuf definitions (`opentelemetry-proto`),
//!   every request recorded; it can be told to answer with an error status.
//! - [`Rotel`]: the rotel collector (`.ci/install-rotel.sh`) receiving OTLP/HTTP on a loopback port
//!   and forwarding everything over OTLP/HTTP to a receiver; it can be stopped and started again on
//!   the same port, as a collector that goes down and comes back.
//! - [`post_metrics`], [`post_logs`], [`post_protobuf`]: one blocking OTLP/HTTP request.
//! - [`wait_until`], [`wait_for`]: poll a condition until a deadline; nothing here sleeps a fixed
//!   time to let something happen.
//! - [`kv`], [`attrs`]: OTLP attributes from Rust values and back to JSON, to build requests and
//!   compare what arrived.
//!
//! ```no_run
//! use acp_usage_tests::otlp::{OtlpReceiver, Rotel, wait_until};
//! use acp_usage_tests::raw_http::PATIENCE;
//! # let dir = std::path::Path::new("/tmp");
//! let receiver = OtlpReceiver::start().unwrap();
//! let mut rotel = Rotel::start(dir, &receiver.url()).unwrap();
//! // ... point OTEL_EXPORTER_OTLP_ENDPOINT at rotel.url() and run acp-usage ...
//! wait_until("one log record", PATIENCE, || receiver.log_records().len() == 1).unwrap();
//! rotel.stop().unwrap(); // the collector is down
//! rotel.start_again().unwrap(); // and back, on the same port
//! ```

mod client;
mod receiver;
mod rotel;

use std::collections::BTreeMap;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::bail;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use serde_json::Value;

pub use self::client::{Posted, gzip, post_logs, post_metrics, post_protobuf};
pub use self::receiver::{
    Export, LogEntry, MetricKind, MetricPoint, OtlpReceiver, PointValue, Received, RpcStatus,
};
pub use self::rotel::{Rotel, rotel_binary};

/// How often [`wait_until`] looks again: short enough that a test never waits much past the
/// moment its condition holds.
pub const POLL: Duration = Duration::from_millis(20);

/// Polls `condition` every [`POLL`] until it holds; an error naming `what` after `timeout`.
/// Returns how long it took.
pub fn wait_until(
    what: &str,
    timeout: Duration,
    mut condition: impl FnMut() -> bool,
) -> anyhow::Result<Duration> {
    wait_for(what, timeout, || condition().then_some(())).map(|((), took)| took)
}

/// Polls `probe` every [`POLL`] until it returns `Some`; an error naming `what` after `timeout`.
/// Returns the value and how long it took.
pub fn wait_for<T>(
    what: &str,
    timeout: Duration,
    mut probe: impl FnMut() -> Option<T>,
) -> anyhow::Result<(T, Duration)> {
    let start = Instant::now();
    loop {
        if let Some(value) = probe() {
            return Ok((value, start.elapsed()));
        }
        let elapsed = start.elapsed();
        if elapsed >= timeout {
            bail!("timed out after {timeout:?} waiting for {what}");
        }
        thread::sleep(POLL.min(timeout - elapsed));
    }
}

/// Attributes as JSON values by key: strings, booleans, integers and doubles as themselves,
/// arrays and key-value lists as arrays and objects, bytes as lowercase hex.
pub type Attrs = BTreeMap<String, Value>;

/// Converts OTLP attributes; a key given twice keeps its last value.
pub fn attrs(key_values: &[KeyValue]) -> Attrs {
    key_values
        .iter()
        .map(|kv| (kv.key.clone(), kv.value.as_ref().map(any_value_json).unwrap_or(Value::Null)))
        .collect()
}

/// One OTLP value as JSON (see [`Attrs`]); an empty value is `null`.
pub fn any_value_json(value: &AnyValue) -> Value {
    match &value.value {
        None => Value::Null,
        Some(any_value::Value::StringValue(text)) => Value::from(text.as_str()),
        Some(any_value::Value::BoolValue(flag)) => Value::from(*flag),
        Some(any_value::Value::IntValue(n)) => Value::from(*n),
        // NaN and infinities have no JSON form: null.
        Some(any_value::Value::DoubleValue(x)) => Value::from(*x),
        Some(any_value::Value::ArrayValue(array)) => {
            Value::Array(array.values.iter().map(any_value_json).collect())
        }
        Some(any_value::Value::KvlistValue(list)) => {
            Value::Object(attrs(&list.values).into_iter().collect())
        }
        Some(any_value::Value::BytesValue(bytes)) => {
            Value::from(bytes.iter().map(|byte| format!("{byte:02x}")).collect::<String>())
        }
        Some(any_value::Value::StringValueStrindex(index)) => {
            Value::from(format!("<string table #{index}>"))
        }
    }
}

/// An OTLP key-value pair, for building requests: `kv("gen_ai.token.type", "input")`,
/// `kv("tokens", 1200_i64)`, `kv("cost", 0.25)`, `kv("exact", true)`.
pub fn kv(key: &str, value: impl Into<OtlpValue>) -> KeyValue {
    KeyValue { key: key.to_owned(), value: Some(value.into().0), ..Default::default() }
}

/// A value [`kv`] accepts (`&str`, `String`, `i64`, `u64`, `f64`, `bool`).
#[derive(Debug, Clone)]
pub struct OtlpValue(pub AnyValue);

impl From<any_value::Value> for OtlpValue {
    fn from(value: any_value::Value) -> OtlpValue {
        OtlpValue(AnyValue { value: Some(value) })
    }
}
impl From<&str> for OtlpValue {
    fn from(value: &str) -> OtlpValue {
        any_value::Value::StringValue(value.to_owned()).into()
    }
}
impl From<String> for OtlpValue {
    fn from(value: String) -> OtlpValue {
        any_value::Value::StringValue(value).into()
    }
}
impl From<i64> for OtlpValue {
    fn from(value: i64) -> OtlpValue {
        any_value::Value::IntValue(value).into()
    }
}
impl From<u64> for OtlpValue {
    fn from(value: u64) -> OtlpValue {
        // Token counts are far below i64::MAX; saturate rather than wrap if one is not.
        any_value::Value::IntValue(i64::try_from(value).unwrap_or(i64::MAX)).into()
    }
}
impl From<f64> for OtlpValue {
    fn from(value: f64) -> OtlpValue {
        any_value::Value::DoubleValue(value).into()
    }
}
impl From<bool> for OtlpValue {
    fn from(value: bool) -> OtlpValue {
        any_value::Value::BoolValue(value).into()
    }
}
