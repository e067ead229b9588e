//! What a later import reads of what changed since the last one: nothing when nothing did, an
//! appended call, a grown call updated, a rewritten document, a truncated file, an opencode
//! session whose message changed; the same ledger from any number of reading threads; and the
//! import `report` runs first.

use super::*;

/// The Claude Code session's main file under `home`.
fn claude_main(home: &Path) -> PathBuf {
    home.join(format!(".claude/projects/-tmp-work/{CLAUDE_SESSION}.jsonl"))
}

/// The session's last assistant line (message `…0006`: 13 input, 400 cache write, 12,900 cache
/// read, 17 output), with `edit` applied.
fn last_assistant_line(edit: impl Fn(String) -> String) -> String {
    let text = std::fs::read_to_string(
        core_fixture("claude/session").join(format!("{CLAUDE_SESSION}.jsonl")),
    )
    .unwrap();
    let line = text.lines().rfind(|l| l.contains("msg_mock_177e9c6ca_0006")).unwrap();
    edit(line.to_owned()) + "\n"
}

fn append(path: &Path, text: &str) {
    use std::io::Write as _;
    let mut f = std::fs::OpenOptions::new().append(true).open(path).unwrap();
    f.write_all(text.as_bytes()).unwrap();
}

fn claude_only() -> ImportOptions {
    ImportOptions { agents: vec![profile("claude")], ..ImportOptions::default() }
}

#[test]
fn an_appended_claude_line_adds_exactly_its_call() {
    let home = Home::new("append");
    lay_out(&home.home());
    let mut store = home.ledger();
    let locs = home.locations();
    let first = run(&mut store, &locs, &claude_only());
    assert_eq!(first.total().calls_added, 10);

    // A new message in the live session: only its session is read again, and only its call
    // is added.
    append(
        &claude_main(&home.home()),
        &last_assistant_line(|l| {
            l.replace("msg_mock_177e9c6ca_0006", "msg_mock_177e9c6ca_0007")
                .replace(
                    "1aaefbf2-bce1-4031-a85e-bc784b92d741",
                    "1aaefbf2-0000-4031-a85e-000000000007",
                )
                .replace("04:32:08.413Z", "04:33:00.000Z")
                .replace("\"output_tokens\":17", "\"output_tokens\":33")
        }),
    );
    let second = run(&mut store, &locs, &claude_only());
    let t = second.total();
    // The session's main file and its subagent's; the fork group is untouched.
    assert_eq!((second.files_read, second.files_unchanged), (2, 2));
    assert_eq!((t.sessions, t.calls_added, t.calls_present, t.calls_updated), (1, 1, 6, 0));
    assert_eq!(ledger_session(&store, CLAUDE_SESSION), (7, 66_125 + 13 + 400 + 12_900, 202 + 33));
    // The file's state moved on with it: a third import reads nothing.
    assert_eq!(run(&mut store, &locs, &claude_only()).files_read, 0);
}

#[test]
fn a_claude_message_whose_output_grew_is_updated_and_repriced() {
    let home = Home::new("grown");
    lay_out(&home.home());
    let main = claude_main(&home.home());
    // The session as a live read found it: message `…0006`'s first block line, with the
    // streamed partial output count (5), and nothing after it.
    let text = std::fs::read_to_string(&main).unwrap();
    let cut = text.find("msg_mock_177e9c6ca_0006").unwrap();
    let start = text[..cut].rfind('\n').map_or(0, |i| i + 1);
    let partial = last_assistant_line(|l| l.replace("\"output_tokens\":17", "\"output_tokens\":5"));
    std::fs::write(&main, format!("{}{partial}", &text[..start])).unwrap();
    let mut store = home.ledger();
    let locs = home.locations();
    run(&mut store, &locs, &claude_only());
    let row = |store: &Store| -> (i64, f64, String) {
        store
            .conn()
            .query_row(
                "SELECT output, cost, origin FROM calls WHERE key = 'msg_mock_177e9c6ca_0006'",
                [],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .unwrap()
    };
    let (output, partial_cost, _) = row(&store);
    assert_eq!(output, 5);

    // The rest of the message arrives: its final line says 17.
    append(&main, &last_assistant_line(|l| l));
    let s = run(&mut store, &locs, &claude_only());
    assert_eq!((s.total().calls_added, s.total().calls_updated), (0, 1));
    let (output, cost, origin) = row(&store);
    assert_eq!((output, origin.as_str()), (17, "import"));
    // Re-priced with the relay's rule: as a fresh import of the whole file prices it.
    let fresh = Home::new("grown-fresh");
    lay_out(&fresh.home());
    let mut fresh_store = fresh.ledger();
    run(&mut fresh_store, &fresh.locations(), &claude_only());
    let (_, want, _) = row(&fresh_store);
    assert!(cost > partial_cost && (cost - want).abs() < 1e-12, "{cost} vs {want}");
    assert_eq!(ledger_session(&store, CLAUDE_SESSION), (6, 66_125, 202));
}

#[test]
fn a_relay_row_of_a_grown_call_is_never_touched() {
    let home = Home::new("grown-relay");
    lay_out(&home.home());
    let mut store = home.ledger();
    let claude = SessionRef { id: CLAUDE_SESSION.into(), agent: "claude".into() };
    // The relay recorded message `…0006` with the partial count it saw.
    let partial =
        TokenRecord { input: 13_313, cache_read: 12_900, output: 5, ..Default::default() };
    store
        .calls(
            &claude,
            Settled {
                calls: &[relay_call(partial, Some("msg_mock_177e9c6ca_0006"))],
                ..Default::default()
            },
            Origin::Relay,
            1,
        )
        .unwrap();
    let s = run(&mut store, &home.locations(), &claude_only());
    assert_eq!(s.total().calls_updated, 0);
    let (output, origin): (i64, String) = store
        .conn()
        .query_row(
            "SELECT output, origin FROM calls WHERE key = 'msg_mock_177e9c6ca_0006'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!((output, origin.as_str()), (5, "relay"));
}

#[test]
fn a_cline_document_rewritten_in_place_is_read_again_by_its_head() {
    let home = Home::new("cline-rewrite");
    lay_out(&home.home());
    let mut store = home.ledger();
    let locs = home.locations();
    let opts = ImportOptions { agents: vec![profile("cline")], ..ImportOptions::default() };
    run(&mut store, &locs, &opts);
    let doc = home
        .home()
        .join(format!(".cline/data/sessions/{CLINE_SESSION}/{CLINE_SESSION}.messages.json"));
    let mtime = std::fs::metadata(&doc).unwrap().modified().unwrap();
    // cline rewrote its document: the first call's output went from 14 to 19 tokens. Same
    // size, and the same modification time (a coarse clock): only the head tells.
    let text = std::fs::read_to_string(&doc).unwrap();
    let edited = text.replacen("\"outputTokens\": 14", "\"outputTokens\": 19", 1);
    assert_eq!((edited.len(), edited != text), (text.len(), true));
    std::fs::write(&doc, edited).unwrap();
    std::fs::File::options().write(true).open(&doc).unwrap().set_modified(mtime).unwrap();
    let s = run(&mut store, &locs, &opts);
    assert_eq!(s.files_read, 1);
    assert_eq!((s.total().calls_added, s.total().calls_updated), (0, 1));
    assert_eq!(ledger_session(&store, CLINE_SESSION), (3, 60_612, 72 + 5));
    assert_eq!(run(&mut store, &locs, &opts).files_read, 0);
}

#[test]
fn a_truncated_file_is_read_again_from_its_start() {
    let home = Home::new("truncated");
    lay_out(&home.home());
    let mut store = home.ledger();
    let locs = home.locations();
    run(&mut store, &locs, &claude_only());
    // The file is cut after its first call's lines, then a new call is written: shorter than
    // what the last import read.
    let main = claude_main(&home.home());
    let text = std::fs::read_to_string(&main).unwrap();
    let cut = text.find("msg_mock_177e9c6ca_0002").unwrap();
    let start = text[..cut].rfind('\n').map_or(0, |i| i + 1);
    let new_call = last_assistant_line(|l| {
        l.replace("msg_mock_177e9c6ca_0006", "msg_mock_177e9c6ca_0008")
            .replace("1aaefbf2-bce1-4031-a85e-bc784b92d741", "1aaefbf2-0000-4031-a85e-000000000008")
    });
    std::fs::write(&main, format!("{}{new_call}", &text[..start])).unwrap();
    assert!((start + new_call.len()) < text.len());
    let s = run(&mut store, &locs, &claude_only());
    let t = s.total();
    // Read from the start: the first call is found again (present), the new one added, and the
    // subagent's call is present too.
    assert_eq!((s.files_read, t.calls_added, t.calls_present), (2, 1, 2));
    assert_eq!(ledger_session(&store, CLAUDE_SESSION).0, 7, "nothing the ledger had is removed");
}

/// A call of the ledger: session, key, role, input, output, cost, time.
type CallRow = (String, String, String, i64, i64, Option<f64>, i64);

/// Every call of the ledger.
fn ledger_calls(store: &Store) -> Vec<CallRow> {
    let mut stmt = store
        .conn()
        .prepare(
            "SELECT s.session_id, c.key, c.role, c.input, c.output, c.cost, c.at
             FROM calls c JOIN sessions s ON s.id = c.session ORDER BY s.session_id, c.key",
        )
        .unwrap();
    stmt.query_map([], |r| {
        Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?, r.get(6)?))
    })
    .unwrap()
    .map(Result::unwrap)
    .collect()
}

#[test]
fn reading_in_parallel_gives_the_ledger_one_thread_gives() {
    let home = Home::new("parallel");
    lay_out(&home.home());
    // More Claude sessions than threads: copies of the session under fresh ids.
    let text = std::fs::read_to_string(claude_main(&home.home())).unwrap();
    for n in 0..12 {
        let id = format!("bc7341c5-8dda-4e7a-b1a8-{n:012}");
        let copy = text.replace(CLAUDE_SESSION, &id).replace("msg_mock_", &format!("msg_{n}_"));
        let dir = home.home().join(".claude/projects/-tmp-copies");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("{id}.jsonl")), copy).unwrap();
    }
    let one = Store::open(&home.0.join("one.db")).unwrap();
    let many = Store::open(&home.0.join("many.db")).unwrap();
    let mut ledgers = [one, many];
    for (store, threads) in ledgers.iter_mut().zip([1, 4]) {
        let opts = ImportOptions { threads: Some(threads), ..ImportOptions::default() };
        let s = run(store, &home.locations(), &opts);
        assert!(s.unreadable.is_empty(), "{:?}", s.unreadable);
    }
    let [one, many] = &ledgers;
    let calls = ledger_calls(one);
    assert_eq!(calls.len(), 38 + 12 * 5);
    assert_eq!(calls, ledger_calls(many));
    // Written in the same order: the same ids.
    let ids = |s: &Store| -> Vec<(i64, String)> {
        let mut stmt = s.conn().prepare("SELECT id, key FROM calls ORDER BY id").unwrap();
        stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).unwrap().map(Result::unwrap).collect()
    };
    assert_eq!(ids(one), ids(many));
    for store in [one, many] {
        assert_eq!(ledger_session(store, CLAUDE_PARENT).0, 2, "the parent owns its copied calls");
        assert_eq!(ledger_session(store, CLAUDE_FORK).0, 2);
    }
}

#[test]
fn the_import_before_a_report_creates_no_ledger_for_nothing_and_fails_softly() {
    let catalog = || Ok(Catalog::embedded().clone());
    // Nothing on disk, no ledger yet: none is made.
    let home = Home::new("refresh-empty");
    let path = home.0.join("report.db");
    let res = super::refresh(&path, &home.locations(), catalog, &mut |_| {}).unwrap();
    assert!(res.is_none() && !path.exists());

    // Transcripts on disk: the report's ledger gets them, and the next report reads no file.
    let home = Home::new("refresh");
    lay_out(&home.home());
    let path = home.0.join("report.db");
    let first = super::refresh(&path, &home.locations(), catalog, &mut |_| {}).unwrap().unwrap();
    assert_eq!(first.total().calls_added, 38);
    let again = super::refresh(&path, &home.locations(), catalog, &mut |_| {}).unwrap().unwrap();
    assert_eq!((again.files_read, again.total().calls_added), (0, 0));
    assert_eq!(output::warnings_line(&again), None);

    // A ledger that is not one: an error for the one warning line, never a panic.
    let broken = home.0.join("broken.db");
    std::fs::write(&broken, "not a database, but long enough to be read as a header ....").unwrap();
    let err = super::refresh(&broken, &home.locations(), catalog, &mut |_| {}).unwrap_err();
    assert!(format!("{err:#}").contains("broken.db"), "{err:#}");
}

#[test]
fn an_opencode_session_is_read_again_when_a_message_of_it_changed() {
    let home = Home::new("opencode-update");
    lay_out(&home.home());
    let mut store = home.ledger();
    let locs = home.locations();
    let opts = ImportOptions { agents: vec![profile("opencode")], ..ImportOptions::default() };
    let first = run(&mut store, &locs, &opts);
    assert_eq!((first.files_read, first.total().calls_added), (1, 7));
    assert_eq!(run(&mut store, &locs, &opts).files_read, 0, "unchanged: not read");
    // A subagent's message finished (its child session's row untouched).
    let db =
        rusqlite::Connection::open(home.home().join(".local/share/opencode/opencode.db")).unwrap();
    let changed = db
        .execute(
            "UPDATE message SET time_updated = time_updated + 60000
             WHERE id = (SELECT m.id FROM message m JOIN session s ON s.id = m.session_id
                         WHERE s.parent_id IS NOT NULL ORDER BY m.time_created DESC LIMIT 1)",
            [],
        )
        .unwrap();
    assert_eq!(changed, 1);
    drop(db);
    let again = run(&mut store, &locs, &opts);
    assert_eq!((again.files_read, again.total().calls_added), (1, 0));
    assert_eq!(again.total().calls_present, 7);
}

#[test]
fn a_new_subagent_file_reads_its_session_again() {
    let home = Home::new("new-subagent");
    lay_out(&home.home());
    let mut store = home.ledger();
    let locs = home.locations();
    run(&mut store, &locs, &claude_only());
    // A second subagent of the session: a copy of the first's file under new message ids.
    let subagents =
        home.home().join(format!(".claude/projects/-tmp-work/{CLAUDE_SESSION}/subagents"));
    let text = std::fs::read_to_string(subagents.join("agent-a455660011ddec475.jsonl")).unwrap();
    std::fs::write(
        subagents.join("agent-b000000000000000b.jsonl"),
        text.replace("msg_mock_177e9c6ca_0005", "msg_mock_177e9c6ca_0105"),
    )
    .unwrap();
    let s = run(&mut store, &locs, &claude_only());
    assert_eq!((s.files_read, s.total().calls_added), (3, 1));
    assert_eq!(run(&mut store, &locs, &claude_only()).files_read, 0);
}
