//! The OTLP test infrastructure on its own (no acp-usage): requests built with the official
//! protobuf types go through a real collector (rotel) to the tests' receiver and come out with the
//! same values; a collector stopped refuses, and started again on its port delivers; the receiver
//! decodes gzip bodies and answers the error status a test asks for; rotel stopped sends what it
//! holds, and retries what the receiver refuses with a 503.
//!
//! rotel comes from `.ci/install-rotel.sh`; without it these tests fail.

use std::time::{Instant, SystemTime, UNIX_EPOCH};

use acp_usage_tests::otlp::{
    Export, MetricKind, OtlpReceiver, PointValue, Rotel, gzip, kv, post_logs, post_metrics,
    post_protobuf, wait_until,
};
use acp_usage_tests::raw_http::PATIENCE;
use acp_usage_tests::scratch::Scratch;
use opentelemetry_proto::tonic::collector::logs::v1::{
    ExportLogsServiceRequest, ExportLogsServiceResponse,
};
use opentelemetry_proto::tonic::collector::metrics::v1::{
    ExportMetricsServiceRequest, ExportMetricsServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::{AnyValue, InstrumentationScope, any_value};
use opentelemetry_proto::tonic::logs::v1::{LogRecord, ResourceLogs, ScopeLogs, SeverityNumber};
use opentelemetry_proto::tonic::metrics::v1::{
    AggregationTemporality, Gauge, Metric, NumberDataPoint, ResourceMetrics, ScopeMetrics, Sum,
    metric, number_data_point,
};
use opentelemetry_proto::tonic::resource::v1::Resource;
use prost::Message as _;
use serde_json::json;

const SCOPE: &str = "acp-usage-tests";

fn now_nanos() -> u64 {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_nanos();
    u64::try_from(nanos).unwrap_or(u64::MAX)
}

fn resource() -> Resource {
    Resource {
        attributes: vec![
            kv("service.name", "acp-usage"),
            kv("service.version", "0.1.0-test"),
            kv("host.name", "otlp-infra-host"),
            kv("user.name", "tester"),
        ],
        ..Default::default()
    }
}

fn scope() -> Option<InstrumentationScope> {
    Some(InstrumentationScope { name: SCOPE.into(), version: "1".into(), ..Default::default() })
}

/// A cumulative token counter (input and output series) and a double gauge, as the exporter
/// will send them: `input` and `output` are the running totals at `time`.
fn metrics_request(input: i64, output: i64, cost: f64, time: u64) -> ExportMetricsServiceRequest {
    let start = time - 60_000_000_000;
    let token_point = |kind: &str, value: i64| NumberDataPoint {
        attributes: vec![
            kv("gen_ai.token.type", kind),
            kv("gen_ai.request.model", "claude-sonnet-4-5"),
        ],
        start_time_unix_nano: start,
        time_unix_nano: time,
        value: Some(number_data_point::Value::AsInt(value)),
        ..Default::default()
    };
    ExportMetricsServiceRequest {
        resource_metrics: vec![ResourceMetrics {
            resource: Some(resource()),
            scope_metrics: vec![ScopeMetrics {
                scope: scope(),
                metrics: vec![
                    Metric {
                        name: "gen_ai.client.token.usage".into(),
                        unit: "{token}".into(),
                        data: Some(metric::Data::Sum(Sum {
                            data_points: vec![
                                token_point("input", input),
                                token_point("output", output),
                            ],
                            aggregation_temporality: AggregationTemporality::Cumulative as i32,
                            is_monotonic: true,
                        })),
                        ..Default::default()
                    },
                    Metric {
                        name: "acp_usage.session.cost".into(),
                        unit: "USD".into(),
                        data: Some(metric::Data::Gauge(Gauge {
                            data_points: vec![NumberDataPoint {
                                attributes: vec![kv("gen_ai.conversation.id", "sess-1")],
                                time_unix_nano: time,
                                value: Some(number_data_point::Value::AsDouble(cost)),
                                ..Default::default()
                            }],
                        })),
                        ..Default::default()
                    },
                ],
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}

/// One log event per model call, with integer, double, boolean and string attributes.
fn logs_request(call_id: &str, input: i64, cost: f64, time: u64) -> ExportLogsServiceRequest {
    ExportLogsServiceRequest {
        resource_logs: vec![ResourceLogs {
            resource: Some(resource()),
            scope_logs: vec![ScopeLogs {
                scope: scope(),
                log_records: vec![LogRecord {
                    time_unix_nano: time,
                    observed_time_unix_nano: time,
                    severity_number: SeverityNumber::Info as i32,
                    severity_text: "INFO".into(),
                    event_name: "acp_usage.model_call".into(),
                    body: Some(AnyValue {
                        value: Some(any_value::Value::StringValue(format!("call {call_id}"))),
                    }),
                    attributes: vec![
                        kv("acp_usage.call.id", call_id),
                        kv("gen_ai.conversation.id", "sess-1"),
                        kv("gen_ai.usage.input_tokens", input),
                        kv("acp_usage.cost.usd", cost),
                        kv("acp_usage.exact", true),
                    ],
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}

fn expected_resource() -> serde_json::Value {
    json!({
        "host.name": "otlp-infra-host",
        "service.name": "acp-usage",
        "service.version": "0.1.0-test",
        "user.name": "tester",
    })
}

/// The token series' latest values by token type, with the series' resource checked.
fn latest_tokens(receiver: &OtlpReceiver) -> Vec<(String, Option<i64>)> {
    receiver
        .latest("gen_ai.client.token.usage")
        .into_iter()
        .map(|point| {
            assert_eq!(json!(point.resource), expected_resource(), "resource of {point:?}");
            let kind = point.attributes["gen_ai.token.type"].as_str().unwrap_or("?").to_owned();
            (kind, point.value.as_i64())
        })
        .collect()
}

#[test]
fn rotel_forwards_metrics_and_logs_and_comes_back_on_its_port() {
    let scratch = Scratch::new("otlp-infra").expect("scratch dir");
    let receiver = OtlpReceiver::start().expect("receiver");
    let mut rotel = Rotel::start(scratch.root(), &receiver.url()).expect("rotel starts");
    eprintln!("rotel listening on {} after {:?}", rotel.url(), rotel.started_in());

    // Through the collector: the same values, types and resource come out.
    let t1 = now_nanos();
    let sent = Instant::now();
    let answer = post_metrics(&rotel.url(), &metrics_request(1200, 345, 0.0123, t1)).unwrap();
    assert_eq!(answer.status, 200, "rotel accepts metrics");
    ExportMetricsServiceResponse::decode(answer.body.as_slice()).expect("an export response");
    let answer = post_logs(&rotel.url(), &logs_request("call-1", 1200, 0.0123, t1)).unwrap();
    assert_eq!(answer.status, 200, "rotel accepts logs");
    ExportLogsServiceResponse::decode(answer.body.as_slice()).expect("an export response");

    let took = wait_until("metrics and logs through rotel", PATIENCE, || {
        receiver.metric_points().len() == 3 && receiver.log_records().len() == 1
    })
    .unwrap_or_else(|err| {
        panic!("{err}; receiver errors {:?}\n{}", receiver.errors(), rotel.log())
    });
    eprintln!("delivered through rotel in {:?} ({:?} after the posts)", sent.elapsed(), took);
    assert_eq!(receiver.errors(), Vec::<String>::new());
    assert_eq!(
        latest_tokens(&receiver),
        vec![("input".into(), Some(1200)), ("output".into(), Some(345))]
    );
    let tokens = receiver.latest("gen_ai.client.token.usage");
    assert_eq!(
        tokens[0].kind,
        MetricKind::Sum { monotonic: true, temporality: AggregationTemporality::Cumulative }
    );
    assert_eq!(tokens[0].unit, "{token}");
    assert_eq!(tokens[0].scope, SCOPE);
    assert_eq!(tokens[0].time_unix_nano, t1);
    assert_eq!(tokens[0].attributes["gen_ai.request.model"], "claude-sonnet-4-5");
    let cost = receiver.latest("acp_usage.session.cost");
    assert_eq!(cost.len(), 1);
    assert_eq!(cost[0].kind, MetricKind::Gauge);
    assert_eq!(cost[0].value, PointValue::Double(0.0123));

    let logs = receiver.log_records();
    assert_eq!(json!(logs[0].resource), expected_resource());
    assert_eq!(logs[0].scope, SCOPE);
    assert_eq!(logs[0].event_name, "acp_usage.model_call");
    assert_eq!(logs[0].body, json!("call call-1"));
    assert_eq!(
        json!(logs[0].attributes),
        json!({
            "acp_usage.call.id": "call-1",
            "acp_usage.cost.usd": 0.0123,
            "acp_usage.exact": true,
            "gen_ai.conversation.id": "sess-1",
            "gen_ai.usage.input_tokens": 1200,
        })
    );
    assert_eq!(logs[0].record.time_unix_nano, t1);
    assert_eq!(logs[0].record.severity_number, SeverityNumber::Info as i32);
    // rotel compresses what it forwards (its default), so this also exercises the gzip path.
    let encodings: Vec<_> = receiver
        .requests()
        .iter()
        .map(|req| req.header("content-encoding").unwrap_or("identity").to_owned())
        .collect();
    eprintln!("rotel forwarded with content-encoding {encodings:?}");

    // Down: nothing listens on its port.
    let stopping = Instant::now();
    rotel.stop().expect("rotel stops");
    eprintln!("rotel stopped in {:?}", stopping.elapsed());
    let refused = post_logs(&rotel.url(), &logs_request("call-2", 10, 0.001, now_nanos()));
    assert!(
        refused.as_ref().is_err_and(|err| err.kind() == std::io::ErrorKind::ConnectionRefused),
        "a stopped collector refuses connections, got {refused:?}"
    );

    // Up again on the same port: new data arrives, and nothing of the first run comes twice.
    let port = rotel.port();
    rotel.start_again().expect("rotel starts again");
    assert_eq!(rotel.port(), port);
    eprintln!("rotel listening again after {:?}", rotel.started_in());
    let t2 = now_nanos();
    assert_eq!(
        post_metrics(&rotel.url(), &metrics_request(2400, 700, 0.03, t2)).unwrap().status,
        200
    );
    assert_eq!(
        post_logs(&rotel.url(), &logs_request("call-2", 1200, 0.0177, t2)).unwrap().status,
        200
    );
    wait_until("the second run's data", PATIENCE, || {
        receiver.log_records().len() >= 2 && receiver.metric_points().len() >= 6
    })
    .unwrap_or_else(|err| panic!("{err}\n{}", rotel.log()));
    assert_eq!(
        latest_tokens(&receiver),
        vec![("input".into(), Some(2400)), ("output".into(), Some(700))]
    );
    let ids: Vec<_> = receiver
        .log_records()
        .iter()
        .map(|entry| entry.attributes["acp_usage.call.id"].clone())
        .collect();
    assert_eq!(ids, vec![json!("call-1"), json!("call-2")]);
    assert_eq!(receiver.metric_points().len(), 6, "each point once");
    assert!(rotel.log().contains("rotel start #2"), "both starts logged in {:?}", rotel.log_path());
}

#[test]
fn receiver_decodes_gzip_and_answers_the_status_it_is_told() {
    let receiver = OtlpReceiver::start().expect("receiver");
    let time = now_nanos();

    // gzip, as most exporters send it.
    let body = metrics_request(10, 20, 0.5, time).encode_to_vec();
    let answer = post_protobuf(&receiver.url(), "/v1/metrics", &body, true).unwrap();
    assert_eq!(answer.status, 200);
    assert_eq!(answer.header("content-type"), Some("application/x-protobuf"));
    assert!(answer.body.is_empty(), "an empty ExportMetricsServiceResponse encodes to nothing");
    let requests = receiver.requests();
    assert_eq!(requests[0].header("content-encoding"), Some("gzip"));
    assert_eq!(requests[0].export, Some(Export::Metrics(metrics_request(10, 20, 0.5, time))));
    assert_eq!(
        latest_tokens(&receiver),
        vec![("input".into(), Some(10)), ("output".into(), Some(20))]
    );

    // A later cumulative point of the same series replaces it in `latest`; an earlier one not.
    post_metrics(&receiver.url(), &metrics_request(30, 40, 0.6, time + 1)).unwrap();
    post_metrics(&receiver.url(), &metrics_request(5, 5, 0.1, time - 1)).unwrap();
    assert_eq!(
        latest_tokens(&receiver),
        vec![("input".into(), Some(30)), ("output".into(), Some(40))]
    );
    assert_eq!(receiver.metric_points().len(), 9);

    // The switch: a 4xx or 5xx with a google.rpc.Status body; such requests are recorded but not
    // counted as delivered.
    for status in [400, 503] {
        receiver.respond_with(status);
        let answer = post_logs(&receiver.url(), &logs_request("refused", 1, 0.1, time)).unwrap();
        assert_eq!(answer.status, status);
        let rpc = answer.rpc_status().expect("a google.rpc.Status body");
        assert!(rpc.message.contains(&status.to_string()), "{rpc:?}");
        let last = receiver.requests().pop().unwrap();
        assert_eq!(last.status, status);
        assert!(!last.accepted());
        assert!(matches!(last.export, Some(Export::Logs(_))), "decoded all the same");
    }
    assert!(receiver.log_records().is_empty(), "refused requests deliver nothing");

    receiver.respond_with(200);
    let gz = gzip(&logs_request("call-9", 7, 0.25, time).encode_to_vec());
    let mark = receiver.mark();
    let raw = post_protobuf(&receiver.url(), "/v1/logs", &gz, false).unwrap();
    assert_eq!(raw.status, 400, "gzip bytes without content-encoding are not protobuf");
    assert_eq!(receiver.errors().len(), 1, "{:?}", receiver.errors());
    let answer = post_protobuf(&receiver.url(), "/v1/logs", &gz[..0], false).unwrap();
    assert_eq!(answer.status, 200, "an empty body is an empty request");
    let answer = post_logs(&receiver.url(), &logs_request("call-9", 7, 0.25, time)).unwrap();
    assert_eq!(answer.status, 200);
    assert_eq!(receiver.requests_since(mark).len(), 3);
    let logs = receiver.log_records();
    assert_eq!(logs.len(), 1);
    assert_eq!(logs[0].attributes["acp_usage.call.id"], "call-9");
    assert_eq!(logs[0].attributes["gen_ai.usage.input_tokens"], 7);
    assert_eq!(json!(logs[0].resource), expected_resource());

    // Paths it does not serve.
    let answer = post_protobuf(&receiver.url(), "/v1/traces", b"", false).unwrap();
    assert_eq!(answer.status, 404);
}

/// `Rotel::stop` is SIGTERM: rotel sends its pending batch before exiting, so a test that stops
/// the collector mid-session loses nothing the collector had accepted (`Rotel::kill` would).
#[test]
fn rotel_stopped_exports_what_it_accepted() {
    let scratch = Scratch::new("otlp-infra-flush").expect("scratch dir");
    let receiver = OtlpReceiver::start().expect("receiver");
    // A batch timeout that never fires within the test: only the shutdown can send the batch.
    let mut rotel =
        Rotel::start_with(scratch.root(), &receiver.url(), 0, &["--batch-timeout", "60s"])
            .expect("rotel starts");
    let time = now_nanos();
    assert_eq!(post_logs(&rotel.url(), &logs_request("call-1", 5, 0.1, time)).unwrap().status, 200);
    assert_eq!(post_metrics(&rotel.url(), &metrics_request(5, 6, 0.1, time)).unwrap().status, 200);
    assert!(receiver.requests().is_empty(), "held in rotel's batch");
    let stopping = Instant::now();
    rotel.stop().expect("rotel stops");
    eprintln!("rotel flushed and stopped in {:?}", stopping.elapsed());
    assert_eq!(receiver.log_records().len(), 1, "{}", rotel.log());
    assert_eq!(receiver.metric_points().len(), 3, "{}", rotel.log());
}

/// A backend that is down behind the collector: rotel keeps what it accepted and retries (every
/// 100 ms to 1 s here), so an outage past the collector loses nothing either.
#[test]
fn rotel_retries_what_the_receiver_refuses_with_503() {
    let scratch = Scratch::new("otlp-infra-retry").expect("scratch dir");
    let receiver = OtlpReceiver::start().expect("receiver");
    let rotel = Rotel::start(scratch.root(), &receiver.url()).expect("rotel starts");
    receiver.respond_with(503);
    let time = now_nanos();
    assert_eq!(post_logs(&rotel.url(), &logs_request("call-1", 5, 0.1, time)).unwrap().status, 200);
    wait_until("rotel's first attempt", PATIENCE, || !receiver.requests().is_empty()).unwrap();
    receiver.respond_with(200);
    let took = wait_until("rotel's retry", PATIENCE, || receiver.log_records().len() == 1)
        .unwrap_or_else(|err| panic!("{err}\n{}", rotel.log()));
    let statuses: Vec<_> = receiver.requests().iter().map(|req| req.status).collect();
    eprintln!("rotel delivered {took:?} after the receiver recovered; answers {statuses:?}");
    assert_eq!(statuses.first(), Some(&503));
    assert_eq!(statuses.last(), Some(&200));
}
