//! The transcript worker against real files on disk: it finds a session's transcript and its
//! subagents' files, reads only what was appended (a half-written line waits for its end), and
//! gives up a transcript it cannot read with one `Failed` update, never more.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use acp_usage::sources::transcripts::{Command, Format, Locations, Update, UpdateKind, Worker};

/// Claude Code's transcript format, from its profile.
fn claude_format() -> &'static Format {
    acp_usage::agents::Profile::named("claude").unwrap().transcripts().unwrap()
}
use acp_usage_core::TokenRecord;
use acp_usage_core::transcript::claude::ClaudeParser;
use acp_usage_core::transcript::{Event, FileRole, Parser};
use tokio::sync::mpsc::UnboundedReceiver;

const SESSION: &str = "bc7341c5-8dda-4e7a-b1a8-d2ade5970368";

fn fixture_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../acp-usage-core/tests/fixtures/transcripts/claude/session")
}

fn scratch(name: &str) -> PathBuf {
    let dir = crate::support::scratch_dir().join(format!("transcripts-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn start(config: &Path) -> (Worker, UnboundedReceiver<Update>) {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let locs = Locations::default().with(claude_format(), config.to_path_buf());
    (Worker::start(locs, tx).unwrap(), rx)
}

/// Calls by key, the last word on each winning (as the relay reads them).
type Calls = BTreeMap<String, (TokenRecord, bool)>;

fn fold(calls: &mut Calls, events: &[Event]) {
    for e in events {
        if let Event::Call(c) = e {
            calls.insert(c.key.clone(), (c.record.clone(), c.main));
        }
    }
}

/// What the parser makes of the fixture files read whole, in one go.
fn expected(main: &str, subagents: &[String]) -> Calls {
    let mut parser = ClaudeParser::default();
    let mut events = Vec::new();
    for (role, text) in std::iter::once((FileRole::Main, main))
        .chain(subagents.iter().map(|s| (FileRole::Subagent, s.as_str())))
    {
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            parser.line(role, line.as_bytes(), &mut events).unwrap();
        }
    }
    let mut calls = Calls::new();
    fold(&mut calls, &events);
    calls
}

/// Reads updates into `calls` until `done` says so; fails the test after 20 s.
async fn read_until(
    rx: &mut UnboundedReceiver<Update>,
    calls: &mut Calls,
    failed: &mut Vec<String>,
    mut done: impl FnMut(&Calls, &Update) -> bool,
) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let u = tokio::time::timeout_at(deadline, rx.recv())
            .await
            .unwrap_or_else(|_| {
                panic!("no update came that ends the wait; calls so far {calls:#?}")
            })
            .expect("the worker is alive");
        match &u.kind {
            UpdateKind::Events { events, .. } => fold(calls, events),
            UpdateKind::Failed(why) => failed.push(why.clone()),
        }
        if done(calls, &u) {
            return;
        }
    }
}

#[tokio::test]
async fn follows_a_growing_claude_transcript_and_its_subagent() {
    let config = scratch("grow");
    let project = config.join("projects/-tmp-work");
    std::fs::create_dir_all(&project).unwrap();
    let main_text =
        std::fs::read_to_string(fixture_dir().join(format!("{SESSION}.jsonl"))).unwrap();
    let sub_src = fixture_dir().join(SESSION).join("subagents");
    let sub_files: Vec<PathBuf> = std::fs::read_dir(&sub_src)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    let sub_texts: Vec<String> =
        sub_files.iter().map(|p| std::fs::read_to_string(p).unwrap()).collect();
    let want = expected(&main_text, &sub_texts);
    assert!(want.values().any(|(_, main)| !main), "the fixture has a subagent call");

    let (worker, mut rx) = start(&config);
    worker.send(Command::Track { session: SESSION.into(), format: claude_format() });
    // The file shows up with its first part, cut inside a line.
    let cut = main_text[..main_text.len() / 2].rfind('\n').unwrap() + 20;
    let path = project.join(format!("{SESSION}.jsonl"));
    std::fs::write(&path, &main_text[..cut]).unwrap();
    worker.send(Command::Hold(SESSION.into()));
    let (mut calls, mut failed) = (Calls::new(), Vec::new());
    read_until(&mut rx, &mut calls, &mut failed, |_, u| {
        matches!(u.kind, UpdateKind::Events { found: true, at_end: true, .. })
    })
    .await;
    // Only the complete lines were read: the half line waits for its end.
    let complete = &main_text[..main_text[..cut].rfind('\n').unwrap()];
    assert_eq!(calls, expected(complete, &[]));
    assert!(calls.len() < want.len(), "only part of the session so far");

    // The rest of the main file, and the subagent's file.
    let mut f = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
    f.write_all(&main_text.as_bytes()[cut..]).unwrap();
    let sub_dst = project.join(SESSION).join("subagents");
    std::fs::create_dir_all(&sub_dst).unwrap();
    for p in &sub_files {
        std::fs::copy(p, sub_dst.join(p.file_name().unwrap())).unwrap();
    }
    worker.send(Command::Poll(SESSION.into()));
    let want_len = want.len();
    read_until(&mut rx, &mut calls, &mut failed, |c, _| c.len() == want_len).await;
    assert_eq!(calls, want, "read in pieces, the session's calls are those of the whole files");
    assert!(failed.is_empty(), "{failed:?}");
    worker.send(Command::Release(SESSION.into()));
}

#[tokio::test]
async fn a_followed_transcript_nobody_writes_is_read_about_once_a_second() {
    let config = scratch("idle");
    let project = config.join("projects/-tmp-work");
    std::fs::create_dir_all(&project).unwrap();
    let main_text =
        std::fs::read_to_string(fixture_dir().join(format!("{SESSION}.jsonl"))).unwrap();
    std::fs::write(project.join(format!("{SESSION}.jsonl")), &main_text).unwrap();
    let (worker, mut rx) = start(&config);
    worker.send(Command::Track { session: SESSION.into(), format: claude_format() });
    worker.send(Command::Hold(SESSION.into()));
    let (mut calls, mut failed) = (Calls::new(), Vec::new());
    read_until(&mut rx, &mut calls, &mut failed, |_, u| {
        matches!(u.kind, UpdateKind::Events { found: true, at_end: true, .. })
    })
    .await;
    worker.send(Command::Release(SESSION.into()));
    // The watched directory is quiet from here on but for the worker's own reads, which must
    // not wake it again (they did: inotify reports opens, and each read woke the next one).
    // Idle, it reads on its one-second tick: from one round on, three more take about three
    // seconds; reads that woke each other would make them in milliseconds.
    rounds_after(&worker, 1).await;
    let took = rounds_after(&worker, 3).await;
    assert!(took >= Duration::from_millis(1500), "3 read rounds in {took:?} with nothing written");
    assert!(failed.is_empty(), "{failed:?}");
}

/// Waits until the worker has made `n` more read rounds and returns how long that took; fails
/// the test when they do not come within 20 s.
async fn rounds_after(worker: &Worker, n: u64) -> Duration {
    let start = tokio::time::Instant::now();
    let want = worker.rounds() + n;
    // The worker counts its rounds and announces none: the count is looked at every 5 ms.
    let mut look = tokio::time::interval(Duration::from_millis(5));
    while worker.rounds() < want {
        assert!(start.elapsed() < Duration::from_secs(20), "{n} read rounds did not come in 20 s");
        look.tick().await;
    }
    start.elapsed()
}

#[tokio::test]
async fn an_unreadable_transcript_is_given_up_once() {
    let config = scratch("broken");
    let project = config.join("projects/-tmp-work");
    std::fs::create_dir_all(&project).unwrap();
    let garbage: String = (0..40).map(|n| format!("not json {n}\n")).collect();
    std::fs::write(project.join(format!("{SESSION}.jsonl")), garbage).unwrap();
    let (worker, mut rx) = start(&config);
    worker.send(Command::Track { session: SESSION.into(), format: claude_format() });
    worker.send(Command::Hold(SESSION.into()));
    let (mut calls, mut failed) = (Calls::new(), Vec::new());
    read_until(&mut rx, &mut calls, &mut failed, |_, u| matches!(u.kind, UpdateKind::Failed(_)))
        .await;
    assert_eq!(failed.len(), 1);
    assert!(failed[0].contains("unreadable lines"), "{failed:?}");
    // Asked again, the worker stays quiet about it: the relay already falls back. The worker
    // takes its commands in order, so once a session tracked after the poll is answered, the
    // poll was handled.
    worker.send(Command::Poll(SESSION.into()));
    let other = "00000000-0000-4000-8000-000000000000";
    worker.send(Command::Track { session: other.into(), format: claude_format() });
    worker.send(Command::Hold(other.into()));
    let mut seen = Vec::new();
    read_until(&mut rx, &mut calls, &mut failed, |_, u| {
        seen.push(u.session.clone());
        u.session == other && matches!(u.kind, UpdateKind::Events { at_end: true, .. })
    })
    .await;
    assert!(seen.iter().all(|s| s == other), "a given-up transcript is reported again: {seen:?}");
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert!(calls.is_empty());
}

#[tokio::test]
async fn a_transcript_not_written_yet_is_no_failure() {
    let config = scratch("missing");
    let (worker, mut rx) = start(&config);
    worker.send(Command::Track { session: SESSION.into(), format: claude_format() });
    worker.send(Command::Hold(SESSION.into()));
    let (mut calls, mut failed) = (Calls::new(), Vec::new());
    read_until(&mut rx, &mut calls, &mut failed, |_, u| {
        matches!(u.kind, UpdateKind::Events { found: false, at_end: true, .. })
    })
    .await;
    assert!(failed.is_empty() && calls.is_empty());
}
