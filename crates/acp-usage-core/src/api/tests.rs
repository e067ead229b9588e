//! Tests of the tap's reading: classification, requests, and each API's responses as the
//! project's mock LLM serves them and as the real providers do, fed in every kind of piece.

mod anthropic;
mod gemini;
mod openai;

use serde_json::{Value, json};

use super::*;

/// An event stream as `tests/src/mock_llm/http.rs` writes it (`event:` when named, one `data:`
/// line, a blank line), with `eol` line endings; a string `data` is written verbatim.
fn sse(events: &[(Option<String>, Value)], eol: &str) -> Vec<u8> {
    let mut out = String::new();
    for (name, data) in events {
        if let Some(name) = name {
            out.push_str(&format!("event: {name}{eol}"));
        }
        match data {
            Value::String(raw) => out.push_str(&format!("data: {raw}{eol}{eol}")),
            data => out.push_str(&format!("data: {data}{eol}{eol}")),
        }
    }
    out.into_bytes()
}

/// Events named by their `type`, as Anthropic and the Responses API send them.
fn typed(events: &[Value]) -> Vec<(Option<String>, Value)> {
    events.iter().map(|event| (event["type"].as_str().map(str::to_owned), event.clone())).collect()
}

/// Events without names, as Chat Completions and Gemini send them.
fn unnamed(events: &[Value]) -> Vec<(Option<String>, Value)> {
    events.iter().map(|event| (None, event.clone())).collect()
}

/// Deterministic pseudo-random numbers (xorshift64*), so no test depends on a seedless run.
struct Rng(u64);

impl Rng {
    fn below(&mut self, bound: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 33) as usize % bound
    }
}

/// Feeds `pieces` in order; returns the index of the first piece after which `feed` said
/// final, and what `finish` then made of the whole body.
fn run(
    api: Api,
    content_type: Option<&str>,
    request: &RequestInfo,
    pieces: &[&[u8]],
    status: u16,
) -> (Option<usize>, Option<Observed>) {
    let mut reader = UsageReader::new(api, content_type, request);
    let mut first_final = None;
    for (index, piece) in pieces.iter().enumerate() {
        let fin = reader.feed(piece);
        assert!(first_final.is_none() || fin, "feed went back to not final at piece {index}");
        if fin && first_final.is_none() {
            first_final = Some(index);
        }
    }
    (first_final, reader.finish(status))
}

/// Reads `body` whole, byte by byte and in pseudo-random pieces, checks every way agrees (the
/// same result, final at the piece holding the same byte, and the same result when finished
/// right there), and returns the offset of the byte that made the usage final, with the result.
fn read_all_ways(
    api: Api,
    content_type: Option<&str>,
    request: &RequestInfo,
    body: &[u8],
    status: u16,
) -> (Option<usize>, Option<Observed>) {
    let (whole_final, whole) = run(api, content_type, request, &[body], status);
    let bytes: Vec<&[u8]> = body.chunks(1).collect();
    let (offset, bytewise) = run(api, content_type, request, &bytes, status);
    assert_eq!(bytewise, whole, "byte by byte");
    assert_eq!(whole_final.is_some(), offset.is_some(), "final whole and byte by byte");
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for round in 0..24 {
        let largest = [2, 5, 17, 64, 300, 4096][round % 6];
        let mut pieces = Vec::new();
        let mut rest = body;
        while !rest.is_empty() {
            let (piece, tail) = rest.split_at((1 + rng.below(largest)).min(rest.len()));
            pieces.push(piece);
            rest = tail;
        }
        let (first_final, observed) = run(api, content_type, request, &pieces, status);
        assert_eq!(observed, whole, "round {round}");
        let final_byte = first_final.map(|index| {
            let start: usize = pieces[..index].iter().map(|piece| piece.len()).sum();
            (start, start + pieces[index].len())
        });
        match (final_byte, offset) {
            (Some((start, end)), Some(offset)) => {
                assert!((start..end).contains(&offset), "round {round}: final at {start}..{end}")
            }
            (None, None) => (),
            other => panic!("round {round}: final {other:?}"),
        }
    }
    if let Some(offset) = offset {
        let (_, early) = run(api, content_type, request, &[&body[..=offset]], status);
        assert_eq!(early, whole, "finished as soon as final");
    }
    (offset, whole)
}

/// The offset of the byte that ends the event holding `marker`: the blank line's `\n`, or its
/// `\r` when lines end with `\r\n` (a lone `\r` already ends a line).
fn end_of_event(body: &[u8], marker: &str) -> usize {
    let text = String::from_utf8_lossy(body);
    let at = text.find(marker).expect("marker in body");
    let rest = &text[at..];
    let lf = rest.find("\n\n").map(|end| at + end + 1);
    let crlf = rest.find("\r\n\r\n").map(|end| at + end + 2);
    [lf, crlf].into_iter().flatten().min().expect("event end")
}

/// The record an observation should carry: `record` with `model`.
fn with_model(mut record: TokenRecord, model: &str) -> TokenRecord {
    record.model = Some(model.to_owned());
    record
}

use crate::tokens::TokenRecord;

#[test]
fn classify_model_calls() {
    let calls = [
        ("/v1/messages", Api::AnthropicMessages),
        ("/v1/messages?beta=true", Api::AnthropicMessages),
        ("/anthropic/v1/messages/", Api::AnthropicMessages),
        ("/v1/responses", Api::OpenAiResponses),
        ("/backend-api/codex/responses", Api::OpenAiResponses),
        ("/v1/responses/compact", Api::OpenAiResponses),
        ("/v1/chat/completions", Api::OpenAiChat),
        ("/api/v1/chat/completions?x=1", Api::OpenAiChat),
        ("/openai/deployments/d/chat/completions?api-version=2024", Api::OpenAiChat),
        ("/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse", Api::Gemini),
        ("/v1beta/models/gemini-2.5-flash:generateContent", Api::Gemini),
        ("/v1beta/models/gemini-2.5-flash%3AgenerateContent", Api::Gemini),
        (
            "/v1/projects/p/locations/us-central1/publishers/google/models/gemini-2.5-pro:streamGenerateContent",
            Api::Gemini,
        ),
        ("/v1internal:streamGenerateContent?alt=sse", Api::GeminiCodeAssist),
        ("/v1internal:generateContent", Api::GeminiCodeAssist),
    ];
    for (path, api) in calls {
        assert_eq!(classify("POST", path), Some(api), "{path}");
    }
    let others = [
        ("POST", "/v1/messages/count_tokens"),
        ("POST", "/v1/messages/batches"),
        ("POST", "/v1/messages/batches/msgbatch_1/cancel"),
        ("GET", "/v1/messages"),
        ("POST", "/v1/threads/thread_1/messages"),
        ("POST", "/v1/responses/input_tokens"),
        ("POST", "/v1/responses/resp_1/cancel"),
        ("GET", "/v1/responses/resp_1"),
        ("GET", "/v1/models"),
        ("POST", "/v1/embeddings"),
        ("POST", "/v1/completions"),
        ("POST", "/v1beta/models/gemini-2.5-pro:countTokens"),
        ("POST", "/v1beta/models/text-embedding-004:embedContent"),
        ("GET", "/v1beta/models"),
        ("GET", "/v1beta/models/gemini-2.5-pro:generateContent"),
        ("POST", "/v1internal:countTokens"),
        ("POST", "/v1internal:loadCodeAssist"),
        ("POST", "/v1beta/cachedContents/x:generateContent"),
        ("POST", "/"),
        ("POST", ""),
    ];
    for (method, path) in others {
        assert_eq!(classify(method, path), None, "{method} {path}");
    }
}

#[test]
fn requests_of_each_api() {
    let anthropic = json!({
        "model": "claude-opus-4-8", "max_tokens": 64000, "stream": true,
        "messages": [{"role": "user", "content": "hi"}],
        "system": [
            {"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1.185.c8e; cch=fa690;"},
            {"type": "text", "text": "You are Claude Code."},
        ],
        "tools": [{"name": "Read", "input_schema": {"type": "object"}}],
    });
    let body = anthropic.to_string();
    let info = RequestInfo::read(Api::AnthropicMessages, "/v1/messages?beta=true", body.as_bytes());
    assert_eq!(info.model.as_deref(), Some("claude-opus-4-8"));
    assert!(info.stream && info.include_usage && info.has_tools);
    assert_eq!(info.prompt_bytes, body.len());
    // The billing header changes on every request; the fingerprint does not.
    let mut other = anthropic.clone();
    other["system"][0]["text"] =
        json!("x-anthropic-billing-header: cc_version=2.1.185.76b; cch=00000;");
    let other =
        RequestInfo::read(Api::AnthropicMessages, "/v1/messages", other.to_string().as_bytes());
    assert_eq!(other.system_fingerprint, info.system_fingerprint);
    assert!(info.system_fingerprint.is_some());
    let string = json!({"model": "m", "system": "You are Claude Code.", "tools": []});
    let string =
        RequestInfo::read(Api::AnthropicMessages, "/v1/messages", string.to_string().as_bytes());
    assert_eq!(string.system_fingerprint, info.system_fingerprint);
    assert!(!string.stream && !string.has_tools);

    let responses = json!({"model": "gpt-5.2-codex", "instructions": "You are Codex.",
        "input": [], "tools": [{"type": "function", "name": "shell"}], "stream": true});
    let info =
        RequestInfo::read(Api::OpenAiResponses, "/v1/responses", responses.to_string().as_bytes());
    assert_eq!(info.model.as_deref(), Some("gpt-5.2-codex"));
    assert!(info.stream && info.include_usage && info.has_tools);
    assert!(info.system_fingerprint.is_some());

    let gemini = json!({"contents": [], "systemInstruction": {"parts": [{"text": "You are Gemini CLI."}]},
        "tools": [{"functionDeclarations": [{"name": "glob"}]}], "model": "ignored"});
    let path = "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse";
    let info = RequestInfo::read(Api::Gemini, path, gemini.to_string().as_bytes());
    assert_eq!(info.model.as_deref(), Some("gemini-2.5-pro"));
    assert!(info.stream && info.include_usage && info.has_tools);
    let check =
        RequestInfo::read(Api::Gemini, "/v1beta/models/gemini-2.5-flash:generateContent", b"{}");
    assert_eq!(check.model.as_deref(), Some("gemini-2.5-flash"));
    assert!(!check.stream && !check.has_tools && check.system_fingerprint.is_none());

    let code_assist = json!({"model": "gemini-2.5-pro", "project": "p", "user_prompt_id": "u",
        "request": {"contents": [], "systemInstruction": {"role": "user", "parts": [{"text": "You are Gemini CLI."}]},
                    "tools": [{"functionDeclarations": [{"name": "glob"}]}]}});
    let ca = RequestInfo::read(
        Api::GeminiCodeAssist,
        "/v1internal:streamGenerateContent?alt=sse",
        code_assist.to_string().as_bytes(),
    );
    assert_eq!(ca.model.as_deref(), Some("gemini-2.5-pro"));
    assert!(ca.stream && ca.has_tools);
    assert_eq!(ca.system_fingerprint, info.system_fingerprint);
}

#[test]
fn chat_requests_and_their_usage() {
    let base = json!({"model": "qwen3-coder", "messages": [
        {"role": "user", "content": "first"},
        {"role": "system", "content": [{"type": "text", "text": "You are Qwen Code."}]},
    ], "tools": [{"type": "function", "function": {"name": "glob"}}]});
    let read = |body: &Value| {
        RequestInfo::read(Api::OpenAiChat, "/v1/chat/completions", body.to_string().as_bytes())
    };
    let plain = read(&base);
    assert!(!plain.stream && plain.include_usage && plain.has_tools);
    let mut streamed = base.clone();
    streamed["stream"] = json!(true);
    let streamed_info = read(&streamed);
    assert!(streamed_info.stream && !streamed_info.include_usage);
    streamed["stream_options"] = json!({"include_usage": true});
    assert!(read(&streamed).include_usage);
    streamed["stream_options"] = json!({"include_usage": false});
    assert!(!read(&streamed).include_usage);
    let developer = json!({"model": "gpt-5", "messages": [{"role": "developer", "content": "You are Qwen Code."}]});
    assert_eq!(read(&developer).system_fingerprint, plain.system_fingerprint);
    assert!(plain.system_fingerprint.is_some());
    assert_eq!(
        read(&json!({"messages": [{"role": "user", "content": "x"}]})).system_fingerprint,
        None
    );
}

#[test]
fn requests_cut_short_or_unreadable() {
    let body = json!({"model": "claude-sonnet-4-5", "stream": true,
        "messages": [{"role": "user", "content": "a long conversation"}], "system": "S", "tools": [{}]})
    .to_string();
    for cut in 0..body.len() {
        // Never panics; reads what arrived whole.
        let info =
            RequestInfo::read(Api::AnthropicMessages, "/v1/messages", &body.as_bytes()[..cut]);
        assert_eq!(info.prompt_bytes, cut);
        let model_whole = cut >= r#"{"model":"claude-sonnet-4-5""#.len();
        assert_eq!(info.model.is_some(), model_whole, "cut {cut}");
        if cut < body.find("\"messages\"").unwrap_or(0) {
            assert!(!info.has_tools && info.system_fingerprint.is_none());
        }
    }
    for junk in [&b""[..], b"\x1f\x8b\x08\x00", b"[1,2]", b"null", b"{\"model\": 5}", b"{{{{"] {
        for api in [Api::AnthropicMessages, Api::OpenAiChat, Api::Gemini, Api::GeminiCodeAssist] {
            let info = RequestInfo::read(api, "/v1/x", junk);
            assert_eq!((info.model, info.has_tools, info.system_fingerprint), (None, false, None));
        }
    }
}

#[test]
fn unreadable_bodies_say_nothing() {
    let request = RequestInfo { model: Some("m".into()), ..RequestInfo::default() };
    // A compressed body the proxy did not decode, and an empty one.
    let gzip = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03\xab\x56\x2a\xa9";
    for api in [Api::AnthropicMessages, Api::OpenAiResponses, Api::OpenAiChat, Api::Gemini] {
        let (offset, observed) = read_all_ways(api, Some("application/json"), &request, gzip, 200);
        assert_eq!((offset, observed), (None, None));
        let (offset, observed) = read_all_ways(api, None, &request, b"", 200);
        assert_eq!((offset, observed), (None, None));
    }
}

#[test]
fn oversized_events_are_skipped() {
    let big = "x".repeat(4000);
    let events = typed(&[
        json!({"type": "message_start", "message": {"id": "msg_1", "model": "claude-x", "usage": {"input_tokens": 10, "output_tokens": 1}}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": big}}),
        json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 5}}),
    ]);
    let body = sse(&events, "\n");
    let request = RequestInfo::default();
    let mut reader = UsageReader::with_limit(Api::AnthropicMessages, None, &request, 1000);
    assert!(reader.feed(&body));
    let observed = reader.finish(200).expect("usage");
    assert_eq!(
        observed.record,
        with_model(TokenRecord::from_anthropic(10, 0, 0, 0, 5), "claude-x")
    );
    // A JSON body beyond the limit is given up on.
    let body = json!({"id": "msg_1", "type": "message", "content": [{"type": "text", "text": big}],
        "usage": {"input_tokens": 10, "output_tokens": 5}})
    .to_string();
    let mut reader = UsageReader::with_limit(Api::AnthropicMessages, None, &request, 1000);
    assert!(!reader.feed(body.as_bytes()));
    assert_eq!(reader.finish(200), None);
}
