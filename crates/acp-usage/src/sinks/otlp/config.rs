//! Where and how to export, the OpenTelemetry way: the standard `OTEL_*` variables, else the
//! config file's `[otlp]` table (a variable wins over the file, as OpenTelemetry SDKs do). Off
//! unless an endpoint is given.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use serde::Deserialize;

/// The `[otlp]` table of the config file.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct OtlpTable {
    /// Base URL; `/v1/metrics` and `/v1/logs` are appended.
    pub endpoint: Option<String>,
    /// Full URL for metrics.
    pub metrics_endpoint: Option<String>,
    /// Full URL for logs.
    pub logs_endpoint: Option<String>,
    /// Headers sent with every export (an API key, a tenant).
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// `http/protobuf` (the default and the only one supported).
    pub protocol: Option<String>,
    /// `service.name`.
    pub service_name: Option<String>,
    /// More resource attributes.
    #[serde(default)]
    pub resource_attributes: BTreeMap<String, String>,
    /// How often to export, in milliseconds.
    pub export_interval_ms: Option<u64>,
    /// A CA certificate file (PEM) trusted besides the system's roots.
    pub ca_file: Option<PathBuf>,
}

/// A resolved exporter configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct OtlpConfig {
    /// Where metrics go.
    pub metrics_url: String,
    /// Where logs go.
    pub logs_url: String,
    /// Headers of every request.
    pub headers: Vec<(String, String)>,
    /// Resource attributes: `service.name` and the user's; the exporter adds the rest.
    pub resource: Vec<(String, String)>,
    /// How often the running relay exports.
    pub interval: Duration,
    /// Extra CA certificate.
    pub ca_file: Option<PathBuf>,
}

/// The default export interval (OpenTelemetry's metric reader default).
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(60);

/// The configuration from the environment (`env` reads a variable) and the config file's table;
/// `None` when no endpoint is set anywhere.
pub fn resolve(
    env: impl Fn(&str) -> Option<String>,
    table: Option<&OtlpTable>,
) -> anyhow::Result<Option<OtlpConfig>> {
    let empty = OtlpTable::default();
    let t = table.unwrap_or(&empty);
    let var = |name: &str| env(name).filter(|v| !v.trim().is_empty());
    let base = var("OTEL_EXPORTER_OTLP_ENDPOINT").or_else(|| t.endpoint.clone());
    let metrics = var("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT").or_else(|| t.metrics_endpoint.clone());
    let logs = var("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT").or_else(|| t.logs_endpoint.clone());
    if base.is_none() && metrics.is_none() && logs.is_none() {
        return Ok(None);
    }
    let join = |base: &str, path: &str| format!("{}/{path}", base.trim_end_matches('/'));
    let url = |own: Option<String>, path: &str| -> anyhow::Result<String> {
        let url = match (own, &base) {
            (Some(u), _) => u,
            (None, Some(b)) => join(b, path),
            (None, None) => bail!(
                "OTLP: an endpoint for {path} is missing (set OTEL_EXPORTER_OTLP_ENDPOINT or both signal endpoints)"
            ),
        };
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            bail!("OTLP: endpoint `{url}` is not an http:// or https:// URL");
        }
        Ok(url)
    };
    let metrics_url = url(metrics, "v1/metrics")?;
    let logs_url = url(logs, "v1/logs")?;
    let protocol = var("OTEL_EXPORTER_OTLP_PROTOCOL").or_else(|| t.protocol.clone());
    match protocol.as_deref() {
        None | Some("http/protobuf") => {}
        Some(other) => bail!(
            "OTLP: protocol `{other}` is not supported; use http/protobuf (OTEL_EXPORTER_OTLP_PROTOCOL)"
        ),
    }
    let mut headers: Vec<(String, String)> =
        t.headers.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    if let Some(h) = var("OTEL_EXPORTER_OTLP_HEADERS") {
        headers = parse_pairs(&h).context("OTEL_EXPORTER_OTLP_HEADERS")?;
    }
    let service =
        var("OTEL_SERVICE_NAME").or_else(|| t.service_name.clone()).unwrap_or("acp-usage".into());
    let mut resource: Vec<(String, String)> =
        t.resource_attributes.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    if let Some(r) = var("OTEL_RESOURCE_ATTRIBUTES") {
        for (k, v) in parse_pairs(&r).context("OTEL_RESOURCE_ATTRIBUTES")? {
            resource.retain(|(key, _)| *key != k);
            resource.push((k, v));
        }
    }
    resource.retain(|(k, _)| k != "service.name");
    resource.insert(0, ("service.name".into(), service));
    let interval = match var("OTEL_METRIC_EXPORT_INTERVAL") {
        Some(ms) => Duration::from_millis(
            ms.trim().parse().with_context(|| format!("OTEL_METRIC_EXPORT_INTERVAL `{ms}`"))?,
        ),
        None => t.export_interval_ms.map_or(DEFAULT_INTERVAL, Duration::from_millis),
    }
    .max(Duration::from_millis(100));
    let ca_file = var("OTEL_EXPORTER_OTLP_CERTIFICATE").map(PathBuf::from).or(t.ca_file.clone());
    Ok(Some(OtlpConfig { metrics_url, logs_url, headers, resource, interval, ca_file }))
}

/// `k1=v1,k2=v2`, values percent-decoded (the OpenTelemetry format of headers and resource
/// attributes).
fn parse_pairs(s: &str) -> anyhow::Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let Some((k, v)) = part.split_once('=') else {
            bail!("`{part}` is not key=value");
        };
        out.push((percent_decode(k.trim()), percent_decode(v.trim())));
    }
    Ok(out)
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        match (b[i], b.get(i + 1).copied().and_then(hex), b.get(i + 2).copied().and_then(hex)) {
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (c, _, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| vars.iter().find(|(k, _)| *k == name).map(|(_, v)| v.to_string())
    }

    #[test]
    fn off_without_an_endpoint_and_signal_urls_from_the_base() {
        assert_eq!(resolve(env(&[]), None).unwrap(), None);
        let c = resolve(env(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318/")]), None)
            .unwrap()
            .unwrap();
        assert_eq!(c.metrics_url, "http://127.0.0.1:4318/v1/metrics");
        assert_eq!(c.logs_url, "http://127.0.0.1:4318/v1/logs");
        assert_eq!(c.interval, DEFAULT_INTERVAL);
        assert_eq!(c.resource, vec![("service.name".to_string(), "acp-usage".to_string())]);
    }

    #[test]
    fn variables_win_over_the_file_and_pairs_are_decoded() {
        let table = OtlpTable {
            endpoint: Some("https://collector.example:4318".into()),
            service_name: Some("from-file".into()),
            export_interval_ms: Some(5000),
            resource_attributes: [("team".to_string(), "a".to_string())].into(),
            ..OtlpTable::default()
        };
        let vars = [
            ("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT", "http://127.0.0.1:9/logs"),
            ("OTEL_EXPORTER_OTLP_HEADERS", "x-api-key=s%3Dcret, tenant=t1"),
            ("OTEL_RESOURCE_ATTRIBUTES", "team=b,deployment.environment=dev"),
            ("OTEL_SERVICE_NAME", "agents"),
            ("OTEL_METRIC_EXPORT_INTERVAL", "250"),
        ];
        let c = resolve(env(&vars), Some(&table)).unwrap().unwrap();
        assert_eq!(c.metrics_url, "https://collector.example:4318/v1/metrics");
        assert_eq!(c.logs_url, "http://127.0.0.1:9/logs");
        assert_eq!(
            c.headers,
            vec![("x-api-key".into(), "s=cret".into()), ("tenant".into(), "t1".into())]
        );
        assert_eq!(
            c.resource,
            vec![
                ("service.name".into(), "agents".into()),
                ("team".into(), "b".into()),
                ("deployment.environment".into(), "dev".into()),
            ]
        );
        assert_eq!(c.interval, Duration::from_millis(250));
    }

    #[test]
    fn unsupported_protocols_and_bad_urls_are_clear_errors() {
        let vars = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4317"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
        ];
        let err = resolve(env(&vars), None).unwrap_err().to_string();
        assert!(err.contains("grpc") && err.contains("http/protobuf"), "{err}");
        let err = resolve(env(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "127.0.0.1:4318")]), None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("not an http"), "{err}");
    }
}
