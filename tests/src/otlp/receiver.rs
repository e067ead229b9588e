//! The tests' OTLP/HTTP receiver: decodes each request with `opentelemetry-proto`, records it,
//! and answers 200 with an empty export response, or the error status a test set.

use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

use flate2::read::GzDecoder;
use opentelemetry_proto::tonic::collector::logs::v1::{
    ExportLogsServiceRequest, ExportLogsServiceResponse,
};
use opentelemetry_proto::tonic::collector::metrics::v1::{
    ExportMetricsServiceRequest, ExportMetricsServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::{InstrumentationScope, KeyValue};
use opentelemetry_proto::tonic::logs::v1::LogRecord;
use opentelemetry_proto::tonic::metrics::v1::{
    AggregationTemporality, NumberDataPoint, metric, number_data_point,
};
use opentelemetry_proto::tonic::resource::v1::Resource;
use prost::Message as _;
use serde_json::Value;

use super::{Attrs, any_value_json, attrs};
use crate::mock_llm::http::{self, Request, lock, read_request};

/// A decoded export request.
#[derive(Debug, Clone, PartialEq)]
pub enum Export {
    Metrics(ExportMetricsServiceRequest),
    Logs(ExportLogsServiceRequest),
}

/// One request the receiver got, whatever it answered.
#[derive(Debug, Clone)]
pub struct Received {
    /// Its position among every request this receiver got.
    pub seq: usize,
    /// When it arrived.
    pub at: Instant,
    pub method: String,
    pub path: String,
    /// Header names lowercased.
    pub headers: Vec<(String, String)>,
    /// The status the receiver answered.
    pub status: u16,
    /// The request, when it decoded.
    pub export: Option<Export>,
    /// Why it did not decode (bad path, content type or encoding, not protobuf).
    pub error: Option<String>,
}

impl Received {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(key, _)| key == name).map(|(_, value)| value.as_str())
    }

    /// Decoded and answered with a 2xx: what a backend would have stored.
    pub fn accepted(&self) -> bool {
        self.export.is_some() && (200..300).contains(&self.status)
    }
}

/// One log record with where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct LogEntry {
    /// The [`Received::seq`] of the request it came in.
    pub seq: usize,
    pub resource: Attrs,
    /// The instrumentation scope's name.
    pub scope: String,
    pub event_name: String,
    pub attributes: Attrs,
    pub body: Value,
    /// The record as decoded (times, severity, trace context, ...).
    pub record: LogRecord,
}

/// What kind of metric a point belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricKind {
    Gauge,
    Sum {
        monotonic: bool,
        temporality: AggregationTemporality,
    },
    Histogram {
        temporality: AggregationTemporality,
    },
    ExponentialHistogram {
        temporality: AggregationTemporality,
    },
    Summary,
    /// A metric without data.
    Empty,
}

/// A data point's value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PointValue {
    Int(i64),
    Double(f64),
    /// Histograms, exponential histograms and summaries: how many and their sum.
    Distribution {
        count: u64,
        sum: Option<f64>,
    },
    /// A number point without a value.
    Missing,
}

impl PointValue {
    /// An integer or double as `f64`; a distribution's sum.
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            PointValue::Int(n) => Some(n as f64),
            PointValue::Double(x) => Some(x),
            PointValue::Distribution { sum, .. } => sum,
            PointValue::Missing => None,
        }
    }

    /// An integer value (a double that is a whole number counts).
    pub fn as_i64(&self) -> Option<i64> {
        match *self {
            PointValue::Int(n) => Some(n),
            PointValue::Double(x) if x.fract() == 0.0 => Some(x as i64),
            _ => None,
        }
    }
}

/// One data point with its metric and resource.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricPoint {
    /// The [`Received::seq`] of the request it came in.
    pub seq: usize,
    pub resource: Attrs,
    /// The instrumentation scope's name.
    pub scope: String,
    pub name: String,
    pub unit: String,
    pub kind: MetricKind,
    pub attributes: Attrs,
    pub start_time_unix_nano: u64,
    pub time_unix_nano: u64,
    pub value: PointValue,
}

impl MetricPoint {
    /// The series this point belongs to: metric name, resource, scope and point attributes.
    fn series(&self) -> (String, String, String, String) {
        let json = |attrs: &Attrs| serde_json::to_string(attrs).unwrap_or_default();
        (self.name.clone(), json(&self.resource), self.scope.clone(), json(&self.attributes))
    }
}

/// A running OTLP/HTTP receiver on 127.0.0.1; stops when dropped.
#[derive(Debug)]
pub struct OtlpReceiver {
    addr: SocketAddr,
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    state: Mutex<State>,
    stopping: AtomicBool,
}

#[derive(Debug)]
struct State {
    received: Vec<Received>,
    /// What to answer a request that decodes (200 unless a test says otherwise).
    status: u16,
}

impl OtlpReceiver {
    /// Binds an ephemeral port on 127.0.0.1.
    pub fn start() -> anyhow::Result<OtlpReceiver> {
        OtlpReceiver::start_on(0)
    }

    /// Binds `port` on 127.0.0.1 (0 = ephemeral).
    pub fn start_on(port: u16) -> anyhow::Result<OtlpReceiver> {
        let listener = TcpListener::bind(("127.0.0.1", port))?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            state: Mutex::new(State { received: Vec::new(), status: 200 }),
            stopping: AtomicBool::new(false),
        });
        let accept_shared = Arc::clone(&shared);
        thread::Builder::new().name(format!("otlp-receiver-{}", addr.port())).spawn(move || {
            http::accept_each(
                listener,
                accept_shared,
                "otlp-receiver",
                |s| &s.stopping,
                serve_connection,
            )
        })?;
        Ok(OtlpReceiver { addr, shared })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// `http://127.0.0.1:PORT`, no trailing slash: the base endpoint (what
    /// `OTEL_EXPORTER_OTLP_ENDPOINT` takes; `/v1/metrics` and `/v1/logs` are appended).
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Answer every request that decodes with `status` from now on (e.g. 400, 429, 503; 200 to
    /// accept again). An error status comes with a `google.rpc.Status` body, as OTLP says.
    pub fn respond_with(&self, status: u16) {
        self.state().status = status;
    }

    /// Every request so far, in arrival order.
    pub fn requests(&self) -> Vec<Received> {
        self.state().received.clone()
    }

    /// A position in the request log, for [`OtlpReceiver::requests_since`].
    pub fn mark(&self) -> usize {
        self.state().received.len()
    }

    pub fn requests_since(&self, mark: usize) -> Vec<Received> {
        self.state().received.get(mark..).unwrap_or_default().to_vec()
    }

    /// Why requests did not decode, with their paths; empty when all did.
    pub fn errors(&self) -> Vec<String> {
        self.state()
            .received
            .iter()
            .filter_map(|req| {
                req.error.as_ref().map(|err| format!("{} {}: {err}", req.method, req.path))
            })
            .collect()
    }

    /// The accepted metrics requests, in arrival order.
    pub fn metrics_requests(&self) -> Vec<ExportMetricsServiceRequest> {
        self.accepted()
            .into_iter()
            .filter_map(|req| match req.export {
                Some(Export::Metrics(request)) => Some(request),
                _ => None,
            })
            .collect()
    }

    /// The accepted logs requests, in arrival order.
    pub fn logs_requests(&self) -> Vec<ExportLogsServiceRequest> {
        self.accepted()
            .into_iter()
            .filter_map(|req| match req.export {
                Some(Export::Logs(request)) => Some(request),
                _ => None,
            })
            .collect()
    }

    /// Every log record of the accepted requests, in arrival order, with its resource.
    pub fn log_records(&self) -> Vec<LogEntry> {
        let mut entries = Vec::new();
        for req in self.accepted() {
            let Some(Export::Logs(request)) = req.export else { continue };
            for resource_logs in request.resource_logs {
                let resource = resource_attrs(resource_logs.resource.as_ref());
                for scope_logs in resource_logs.scope_logs {
                    let scope = scope_name(scope_logs.scope.as_ref());
                    for record in scope_logs.log_records {
                        entries.push(LogEntry {
                            seq: req.seq,
                            resource: resource.clone(),
                            scope: scope.clone(),
                            event_name: record.event_name.clone(),
                            attributes: attrs(&record.attributes),
                            body: record.body.as_ref().map(any_value_json).unwrap_or(Value::Null),
                            record,
                        });
                    }
                }
            }
        }
        entries
    }

    /// Every data point of the accepted requests, in arrival order.
    pub fn metric_points(&self) -> Vec<MetricPoint> {
        let mut points = Vec::new();
        for req in self.accepted() {
            let Some(Export::Metrics(request)) = req.export else { continue };
            for resource_metrics in request.resource_metrics {
                let resource = resource_attrs(resource_metrics.resource.as_ref());
                for scope_metrics in resource_metrics.scope_metrics {
                    let scope = scope_name(scope_metrics.scope.as_ref());
                    for metric in scope_metrics.metrics {
                        let base = MetricPoint {
                            seq: req.seq,
                            resource: resource.clone(),
                            scope: scope.clone(),
                            name: metric.name.clone(),
                            unit: metric.unit.clone(),
                            kind: MetricKind::Empty,
                            attributes: Attrs::new(),
                            start_time_unix_nano: 0,
                            time_unix_nano: 0,
                            value: PointValue::Missing,
                        };
                        flatten_metric(&base, metric.data.as_ref(), &mut points);
                    }
                }
            }
        }
        points
    }

    /// The latest point of each series (metric name, resource, scope, point attributes): the one
    /// with the greatest time, the later arrival on a tie. Sorted by series.
    pub fn latest_points(&self) -> Vec<MetricPoint> {
        let mut latest: BTreeMap<_, MetricPoint> = BTreeMap::new();
        for point in self.metric_points() {
            let series = point.series();
            match latest.get(&series) {
                Some(known) if known.time_unix_nano > point.time_unix_nano => {}
                _ => {
                    latest.insert(series, point);
                }
            }
        }
        latest.into_values().collect()
    }

    /// The latest point of each series of metric `name`.
    pub fn latest(&self, name: &str) -> Vec<MetricPoint> {
        self.latest_points().into_iter().filter(|point| point.name == name).collect()
    }

    fn accepted(&self) -> Vec<Received> {
        self.state().received.iter().filter(|req| req.accepted()).cloned().collect()
    }

    fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.shared.state)
    }
}

impl Drop for OtlpReceiver {
    fn drop(&mut self) {
        http::stop(&self.addr, &self.shared.stopping);
    }
}

fn resource_attrs(resource: Option<&Resource>) -> Attrs {
    resource.map(|resource| attrs(&resource.attributes)).unwrap_or_default()
}

fn scope_name(scope: Option<&InstrumentationScope>) -> String {
    scope.map(|scope| scope.name.clone()).unwrap_or_default()
}

fn temporality(value: i32) -> AggregationTemporality {
    AggregationTemporality::try_from(value).unwrap_or(AggregationTemporality::Unspecified)
}

fn flatten_metric(base: &MetricPoint, data: Option<&metric::Data>, out: &mut Vec<MetricPoint>) {
    let number = |kind: MetricKind, point: &NumberDataPoint| MetricPoint {
        kind,
        attributes: attrs(&point.attributes),
        start_time_unix_nano: point.start_time_unix_nano,
        time_unix_nano: point.time_unix_nano,
        value: match point.value {
            Some(number_data_point::Value::AsInt(n)) => PointValue::Int(n),
            Some(number_data_point::Value::AsDouble(x)) => PointValue::Double(x),
            None => PointValue::Missing,
        },
        ..base.clone()
    };
    let distribution = |kind, attributes: &[KeyValue], start, time, count, sum| MetricPoint {
        kind,
        attributes: attrs(attributes),
        start_time_unix_nano: start,
        time_unix_nano: time,
        value: PointValue::Distribution { count, sum },
        ..base.clone()
    };
    match data {
        None => out.push(base.clone()),
        Some(metric::Data::Gauge(gauge)) => {
            out.extend(gauge.data_points.iter().map(|point| number(MetricKind::Gauge, point)));
        }
        Some(metric::Data::Sum(sum)) => {
            let kind = MetricKind::Sum {
                monotonic: sum.is_monotonic,
                temporality: temporality(sum.aggregation_temporality),
            };
            out.extend(sum.data_points.iter().map(|point| number(kind, point)));
        }
        Some(metric::Data::Histogram(histogram)) => {
            let kind = MetricKind::Histogram {
                temporality: temporality(histogram.aggregation_temporality),
            };
            out.extend(histogram.data_points.iter().map(|point| {
                distribution(
                    kind,
                    &point.attributes,
                    point.start_time_unix_nano,
                    point.time_unix_nano,
                    point.count,
                    point.sum,
                )
            }));
        }
        Some(metric::Data::ExponentialHistogram(histogram)) => {
            let kind = MetricKind::ExponentialHistogram {
                temporality: temporality(histogram.aggregation_temporality),
            };
            out.extend(histogram.data_points.iter().map(|point| {
                distribution(
                    kind,
                    &point.attributes,
                    point.start_time_unix_nano,
                    point.time_unix_nano,
                    point.count,
                    point.sum,
                )
            }));
        }
        Some(metric::Data::Summary(summary)) => {
            out.extend(summary.data_points.iter().map(|point| {
                distribution(
                    MetricKind::Summary,
                    &point.attributes,
                    point.start_time_unix_nano,
                    point.time_unix_nano,
                    point.count,
                    Some(point.sum),
                )
            }));
        }
    }
}

/// `google.rpc.Status`, the body OTLP/HTTP puts in an error response (not in opentelemetry-proto).
#[derive(Clone, PartialEq, prost::Message)]
pub struct RpcStatus {
    #[prost(int32, tag = "1")]
    pub code: i32,
    #[prost(string, tag = "2")]
    pub message: String,
}

/// Serves one request and closes (`connection: close`): exporters reconnect, and a test never
/// sees a kept-alive connection outlive the status it set.
fn serve_connection(stream: &TcpStream, shared: &Shared) -> io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    let Some(request) = read_request(stream)? else { return Ok(()) };
    let decoded = decode(&request);
    let (status, body) = match &decoded {
        Err((status, message)) => (*status, error_body(*status, message)),
        Ok(export) => {
            let status = lock(&shared.state).status;
            if (200..300).contains(&status) {
                // An empty Export*ServiceResponse: everything accepted (no partial success).
                let body = match export {
                    Export::Metrics(_) => ExportMetricsServiceResponse::default().encode_to_vec(),
                    Export::Logs(_) => ExportLogsServiceResponse::default().encode_to_vec(),
                };
                (status, body)
            } else {
                (status, error_body(status, &format!("the test receiver answers {status}")))
            }
        }
    };

    // Record before answering: once the sender has its answer, a test may look for the request.
    {
        let mut state = lock(&shared.state);
        let seq = state.received.len();
        let (export, error) = match decoded {
            Ok(export) => (Some(export), None),
            Err((_, message)) => (None, Some(message)),
        };
        state.received.push(Received {
            seq,
            at: Instant::now(),
            method: request.method.clone(),
            path: request.path().to_owned(),
            headers: request.headers.clone(),
            status,
            export,
            error,
        });
    }

    let head = format!(
        "HTTP/1.1 {status} {}\r\ncontent-type: application/x-protobuf\r\ncontent-length: {}\r\n\
         connection: close\r\n\r\n",
        reason(status),
        body.len()
    );
    let mut writer = stream;
    writer.write_all(head.as_bytes())?;
    writer.write_all(&body)?;
    writer.flush()
}

fn decode(request: &Request) -> Result<Export, (u16, String)> {
    let method = request.method.as_str();
    if method != "POST" {
        return Err((405, format!("method {method} not allowed")));
    }
    let content_type = request.header("content-type").unwrap_or("");
    if !content_type.starts_with("application/x-protobuf") {
        return Err((415, format!("content-type {content_type:?} is not application/x-protobuf")));
    }
    let body = match request.header("content-encoding").map(str::to_ascii_lowercase).as_deref() {
        None | Some("identity") => request.body.clone(),
        Some("gzip") => {
            let mut body = Vec::new();
            GzDecoder::new(request.body.as_slice())
                .read_to_end(&mut body)
                .map_err(|err| (400, format!("bad gzip body: {err}")))?;
            body
        }
        Some(other) => return Err((415, format!("content-encoding {other:?} not supported"))),
    };
    match request.path() {
        "/v1/metrics" => ExportMetricsServiceRequest::decode(body.as_slice())
            .map(Export::Metrics)
            .map_err(|err| (400, format!("not an ExportMetricsServiceRequest: {err}"))),
        "/v1/logs" => ExportLogsServiceRequest::decode(body.as_slice())
            .map(Export::Logs)
            .map_err(|err| (400, format!("not an ExportLogsServiceRequest: {err}"))),
        other => Err((404, format!("no OTLP signal at {other}"))),
    }
}

fn error_body(status: u16, message: &str) -> Vec<u8> {
    // The gRPC code closest to the HTTP status, as the OTLP spec maps them.
    let code = match status {
        400 => 3,  // INVALID_ARGUMENT
        404 => 12, // UNIMPLEMENTED
        429 => 8,  // RESOURCE_EXHAUSTED
        503 => 14, // UNAVAILABLE
        _ => 2,    // UNKNOWN
    };
    RpcStatus { code, message: message.to_owned() }.encode_to_vec()
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        413 => "Payload Too Large",
        415 => "Unsupported Media Type",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Status",
    }
}
