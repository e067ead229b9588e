//! The OTLP messages of an export, built with the official protobuf definitions
//! (`opentelemetry-proto`): one log record per call, and the cumulative metrics of the whole
//! ledger (so an export that is retried, or sent by another process too, counts nothing twice).
//! Names follow the OpenTelemetry GenAI semantic conventions where they have one; the rest are
//! `acp_usage.*`. Never a prompt or a response.

use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, InstrumentationScope, KeyValue, any_value};
use opentelemetry_proto::tonic::logs::v1::{LogRecord, ResourceLogs, ScopeLogs, SeverityNumber};
use opentelemetry_proto::tonic::metrics::v1::{
    AggregationTemporality, Gauge, Histogram, HistogramDataPoint, Metric, NumberDataPoint,
    ResourceMetrics, ScopeMetrics, Sum, metric, number_data_point,
};
use opentelemetry_proto::tonic::resource::v1::Resource;

use super::outbox::{CallRow, ContextRow, SeriesKey, Sums, TOKEN_BOUNDS, TurnSeries};

fn kv(key: &str, value: any_value::Value) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue { value: Some(value) }),
        ..KeyValue::default()
    }
}

fn s(key: &str, v: &str) -> KeyValue {
    kv(key, any_value::Value::StringValue(v.into()))
}

fn i(key: &str, v: i64) -> KeyValue {
    kv(key, any_value::Value::IntValue(v))
}

fn opt(out: &mut Vec<KeyValue>, key: &str, v: Option<&str>) {
    if let Some(v) = v {
        out.push(s(key, v));
    }
}

fn nanos(ms: i64) -> u64 {
    (ms.max(0) as u64) * 1_000_000
}

/// The resource every export carries: the configured attributes, then `service.version`,
/// `host.name` and `user.name` unless the user set them.
pub fn resource(configured: &[(String, String)]) -> Resource {
    let mut attrs: Vec<KeyValue> = configured.iter().map(|(k, v)| s(k, v)).collect();
    let has = |attrs: &[KeyValue], k: &str| attrs.iter().any(|a| a.key == k);
    let mut add = |k: &str, v: Option<String>| {
        if let Some(v) = v.filter(|_| !has(&attrs, k)) {
            attrs.push(s(k, &v));
        }
    };
    add("service.version", Some(env!("CARGO_PKG_VERSION").to_string()));
    add("host.name", host_name());
    add("user.name", user_name());
    Resource { attributes: attrs, ..Resource::default() }
}

#[cfg(unix)]
fn user_name() -> Option<String> {
    std::env::var("USER").ok().or_else(|| std::env::var("LOGNAME").ok())
}

#[cfg(not(unix))]
fn user_name() -> Option<String> {
    std::env::var("USERNAME").ok()
}

#[cfg(unix)]
fn host_name() -> Option<String> {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer outlives the call and its length is passed; gethostname writes at
    // most that many bytes.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return None;
    }
    let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
    std::str::from_utf8(&buf[..end]).ok().map(str::to_string).filter(|h| !h.is_empty())
}

/// Windows keeps the computer's name in the environment of every process.
#[cfg(not(unix))]
fn host_name() -> Option<String> {
    std::env::var("COMPUTERNAME").ok().filter(|h| !h.is_empty())
}

fn scope() -> InstrumentationScope {
    InstrumentationScope {
        name: "acp-usage".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        ..InstrumentationScope::default()
    }
}

fn call_attrs(agent: &str, version: Option<&str>, project: Option<&str>) -> Vec<KeyValue> {
    let mut a = vec![s("acp_usage.agent.name", agent)];
    opt(&mut a, "acp_usage.agent.version", version);
    opt(&mut a, "acp_usage.project", project);
    a
}

/// One log record per call.
pub fn logs(resource: &Resource, calls: &[CallRow], now_ms: i64) -> ExportLogsServiceRequest {
    let records = calls
        .iter()
        .map(|c| {
            let agent = c.agent_name.as_deref().unwrap_or(&c.agent);
            let mut a = call_attrs(agent, c.agent_version.as_deref(), c.project.as_deref());
            a.push(i("acp_usage.call.id", c.id));
            opt(&mut a, "acp_usage.call.key", c.key.as_deref());
            a.push(s("gen_ai.conversation.id", &c.session_id));
            opt(&mut a, "gen_ai.provider.name", c.provider.as_deref());
            opt(&mut a, "gen_ai.request.model", c.model.as_deref());
            opt(&mut a, "gen_ai.response.model", c.model.as_deref());
            a.push(s("acp_usage.role", &c.role));
            a.push(kv("acp_usage.exact", any_value::Value::BoolValue(c.exact)));
            a.push(i("acp_usage.calls", c.calls));
            a.push(i("gen_ai.usage.input_tokens", c.input));
            a.push(i("gen_ai.usage.output_tokens", c.output));
            a.push(i("gen_ai.usage.cache_read.input_tokens", c.cache_read));
            a.push(i("gen_ai.usage.cache_creation.input_tokens", c.cache_write));
            a.push(i("acp_usage.usage.reasoning_tokens", c.thought));
            if let Some(cost) = c.cost {
                a.push(kv("acp_usage.cost", any_value::Value::DoubleValue(cost)));
                a.push(s(
                    "acp_usage.cost.source",
                    if c.cost_stated { "stated" } else { "catalog" },
                ));
            }
            LogRecord {
                time_unix_nano: nanos(c.at),
                observed_time_unix_nano: nanos(now_ms),
                severity_number: SeverityNumber::Info as i32,
                severity_text: "INFO".into(),
                event_name: "acp_usage.call".into(),
                attributes: a,
                ..LogRecord::default()
            }
        })
        .collect();
    ExportLogsServiceRequest {
        resource_logs: vec![ResourceLogs {
            resource: Some(resource.clone()),
            scope_logs: vec![ScopeLogs {
                scope: Some(scope()),
                log_records: records,
                ..ScopeLogs::default()
            }],
            ..ResourceLogs::default()
        }],
    }
}

fn series_attrs(k: &SeriesKey) -> Vec<KeyValue> {
    let mut a = call_attrs(&k.agent, k.agent_version.as_deref(), k.project.as_deref());
    opt(&mut a, "gen_ai.provider.name", k.provider.as_deref());
    opt(&mut a, "gen_ai.request.model", k.model.as_deref());
    opt(&mut a, "gen_ai.response.model", k.model.as_deref());
    a.push(s("acp_usage.role", &k.role));
    a.push(kv("acp_usage.exact", any_value::Value::BoolValue(k.exact)));
    a
}

fn point(
    attrs: Vec<KeyValue>,
    start: i64,
    now: i64,
    v: number_data_point::Value,
) -> NumberDataPoint {
    NumberDataPoint {
        attributes: attrs,
        start_time_unix_nano: nanos(start),
        time_unix_nano: nanos(now),
        value: Some(v),
        ..NumberDataPoint::default()
    }
}

fn sum(name: &str, unit: &str, description: &str, points: Vec<NumberDataPoint>) -> Metric {
    Metric {
        name: name.into(),
        unit: unit.into(),
        description: description.into(),
        data: Some(metric::Data::Sum(Sum {
            data_points: points,
            aggregation_temporality: AggregationTemporality::Cumulative as i32,
            is_monotonic: true,
        })),
        ..Metric::default()
    }
}

fn gauge(name: &str, description: &str, points: Vec<NumberDataPoint>) -> Metric {
    Metric {
        name: name.into(),
        unit: "{token}".into(),
        description: description.into(),
        data: Some(metric::Data::Gauge(Gauge { data_points: points })),
        ..Metric::default()
    }
}

/// What the ledger's turns and running sessions add to the call-based sums.
#[derive(Debug, Clone, Default)]
pub struct Extra {
    /// Turns per (agent, version, project): count and first start.
    pub turns: Vec<TurnSeries>,
    /// Running sessions' context.
    pub running: Vec<ContextRow>,
}

/// The cumulative metrics of the whole ledger, as of `now_ms`.
pub fn metrics(
    resource: &Resource,
    series: &[(SeriesKey, Sums)],
    extra: &Extra,
    now_ms: i64,
) -> ExportMetricsServiceRequest {
    use number_data_point::Value::{AsDouble, AsInt};
    let mut histogram = Vec::new();
    let mut tokens = Vec::new();
    let mut cost = Vec::new();
    let mut calls = Vec::new();
    for (k, v) in series {
        let attrs = series_attrs(k);
        let with = |extra: KeyValue| {
            let mut a = attrs.clone();
            a.push(extra);
            a
        };
        for (kind, total, buckets) in
            [("input", v.input, &v.input_buckets), ("output", v.output, &v.output_buckets)]
        {
            histogram.push(HistogramDataPoint {
                attributes: with(s("gen_ai.token.type", kind)),
                start_time_unix_nano: nanos(v.first),
                time_unix_nano: nanos(now_ms),
                count: buckets.iter().sum(),
                sum: Some(total as f64),
                bucket_counts: buckets.clone(),
                explicit_bounds: TOKEN_BOUNDS.to_vec(),
                ..HistogramDataPoint::default()
            });
        }
        for (kind, n) in [
            ("input", v.input),
            ("output", v.output),
            ("cache_read", v.cache_read),
            ("cache_write", v.cache_write),
            ("reasoning", v.reasoning),
        ] {
            tokens.push(point(with(s("gen_ai.token.type", kind)), v.first, now_ms, AsInt(n)));
        }
        cost.push(point(attrs.clone(), v.first, now_ms, AsDouble(v.cost)));
        calls.push(point(attrs, v.first, now_ms, AsInt(v.calls)));
    }
    let turns = extra
        .turns
        .iter()
        .map(|t| {
            let attrs = call_attrs(&t.agent, t.agent_version.as_deref(), t.project.as_deref());
            point(attrs, t.first, now_ms, AsInt(t.turns))
        })
        .collect();
    let (mut used, mut size) = (Vec::new(), Vec::new());
    for r in &extra.running {
        let mut a = call_attrs(&r.agent, None, r.project.as_deref());
        a.push(s("gen_ai.conversation.id", &r.session_id));
        opt(&mut a, "gen_ai.request.model", r.model.as_deref());
        used.push(point(a.clone(), now_ms, now_ms, AsInt(r.used)));
        size.push(point(a, now_ms, now_ms, AsInt(r.size)));
    }
    let mut list = vec![
        Metric {
            name: "gen_ai.client.token.usage".into(),
            unit: "{token}".into(),
            description: "Tokens per model call, by token type (input includes cached tokens)"
                .into(),
            data: Some(metric::Data::Histogram(Histogram {
                data_points: histogram,
                aggregation_temporality: AggregationTemporality::Cumulative as i32,
            })),
            ..Metric::default()
        },
        sum(
            "acp_usage.tokens",
            "{token}",
            "Tokens by kind (input includes cache reads and writes, output includes reasoning)",
            tokens,
        ),
        sum("acp_usage.cost", "USD", "Cost of the priced model calls", cost),
        sum("acp_usage.calls", "{call}", "Model calls", calls),
        sum("acp_usage.turns", "{turn}", "Prompt turns", turns),
    ];
    if !used.is_empty() {
        list.push(gauge("acp_usage.context.used", "Tokens in context, per running session", used));
        list.push(gauge("acp_usage.context.size", "Context window, per running session", size));
    }
    ExportMetricsServiceRequest {
        resource_metrics: vec![ResourceMetrics {
            resource: Some(resource.clone()),
            scope_metrics: vec![ScopeMetrics {
                scope: Some(scope()),
                metrics: list,
                ..ScopeMetrics::default()
            }],
            ..ResourceMetrics::default()
        }],
    }
}
