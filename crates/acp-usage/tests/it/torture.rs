//! The torture suite: the built `acp-usage` binary between a test editor and synthetic agents
//! (python3 and sh scripts) that misbehave. What these tests guarantee:
//!
//! - An agent killed with SIGKILL, mid-line, after a burst or mid-stream: every byte it wrote
//!   reaches the editor, even an editor that was not reading when it died; each pending editor
//!   request gets a JSON-RPC error on its own line naming "signal 9"; acp-usage exits with 137.
//! - The editor closing stdin mid-turn: the agent's whole process group goes, a grandchild that
//!   ignores SIGTERM and an `npx`-like wrapper chain (sh → sh → sleep) included, with an agent
//!   that ignores the EOF (ended after `--grace-ms`) and with one that exits on it but leaves
//!   grandchildren behind; no process of the group is left (checked in /proc).
//! - SIGTERM and SIGINT to acp-usage reach the agent's whole group (a grandchild dies of it too);
//!   acp-usage forwards what the agent still writes, answers pending requests with an error and
//!   exits with the agent's status, whether the agent handles the signal or dies of it.
//! - An editor reading at 1 MB/s while the agent streams 30 MB: no line lost or changed, and
//!   acp-usage's peak RSS (VmHWM) stays under 64 MiB, with 330-byte lines and with 1 MiB lines.
//! - A line of exactly `--max-line-mib` (64 MiB) passes both ways intact; one byte more is
//!   dropped in either direction with a warning on stderr naming its size, and the session goes
//!   on.
//! - Invalid UTF-8, CRLF, a lone CR, NULs, empty and blank lines, JSON arrays, garbage between
//!   messages, unbalanced JSON and a last line without terminator: forwarded byte for byte in
//!   both directions, whatever the chunking.
//! - 10,000,000 messages (ACP_USAGE_TORTURE_MESSAGES to change) with sequence numbers, checked at
//!   the editor: none lost, reordered or altered.

use std::io::{Read, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::support::assert_same_bytes;
use crate::support::torture::*;

// ---------------------------------------------------------------------------------------------
// Numbered lines, written by the python agents and checked at the editor.

/// An `agent_message_chunk` whose text starts with its sequence number: the full observer path
/// (session lookup, token estimation) runs for each.
const CHUNK_PRE: &str = r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"n="#;
const CHUNK_SUF: &str = r#""}}}}"#;

/// `CHUNK_PRE N PAD CHUNK_SUF`, as the agents write it.
fn chunk_line(n: u64, pad: &[u8]) -> Vec<u8> {
    let mut line = CHUNK_PRE.as_bytes().to_vec();
    line.extend_from_slice(n.to_string().as_bytes());
    line.push(b' ');
    line.extend_from_slice(pad);
    line.extend_from_slice(CHUNK_SUF.as_bytes());
    line
}

/// Python: `line(i)` gives line `i` (with `\n`), `write_all(bytes)` writes to fd 1 unbuffered,
/// `pids(dir, *pids)` records pids. Arguments after the script: PRE SUF PAD_LEN.
const PY_LIB: &str = r#"
import os, sys
PRE, SUF, PAD = sys.argv[1].encode(), sys.argv[2].encode(), b"x" * int(sys.argv[3])
def line(i):
    return b"%s%d %s%s\n" % (PRE, i, PAD, SUF)
def lines(i, j):
    return b"".join([line(k) for k in range(i, j)])
def write_all(data):
    view = memoryview(data)
    while view:
        view = view[os.write(1, view):]
def pids(d, *ps):
    with open(os.path.join(d, "pids"), "a") as f:
        f.write(" ".join(str(p) for p in ps) + "\n")
ARGS = sys.argv[4:]
"#;

/// A python agent: the library, then `body`; its command line with PAD_LEN and `args`.
fn py_agent(
    dir: &std::path::Path,
    name: &str,
    body: &str,
    pad: usize,
    args: &[&str],
) -> Vec<String> {
    let path = write_script(dir, name, &format!("{PY_LIB}\n{body}"));
    let mut argv = vec![
        "python3".to_string(),
        "-u".to_string(),
        path,
        CHUNK_PRE.to_string(),
        CHUNK_SUF.to_string(),
        pad.to_string(),
    ];
    argv.extend(args.iter().map(|a| a.to_string()));
    argv
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// A prompt request and an extension request: both tracked as pending by acp-usage.
const PROMPT_1: &str = r#"{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s","prompt":[{"type":"text","text":"go"}]}}"#;
const EXT_2: &str = r#"{"jsonrpc":"2.0","id":"x-2","method":"_vendor.example/work","params":{}}"#;
const PENDING: &[&str] = &["1", r#""x-2""#];

fn send_pending(relay: &mut Relay) {
    relay.send(format!("{PROMPT_1}\n{EXT_2}\n").as_bytes());
}

// ---------------------------------------------------------------------------------------------
// SIGKILL.

/// The agent reads the two requests (so they are pending at acp-usage), writes `N` numbered
/// lines and the start of one more, and SIGKILLs itself. Its stdout pipe holds 1 MiB, so it can
/// write that much and die whatever acp-usage and the editor do.
const KILLS_ITSELF: &str = r#"
import fcntl
d, n = ARGS[0], int(ARGS[1])
fcntl.fcntl(1, 1031, 1 << 20)  # F_SETPIPE_SZ
pids(d, os.getpid())
sys.stdin.buffer.readline(); sys.stdin.buffer.readline()
for i in range(0, n, 5000):
    write_all(lines(i, min(n, i + 5000)))
write_all(line(n)[:50])
os.kill(os.getpid(), 9)
"#;

/// Checks output of an agent that wrote `n` lines and 50 bytes of one more, then died of SIGKILL
/// with the two requests pending.
fn check_killed_output(out: &[u8], n: u64, pad: &[u8]) {
    let lines = split_lines(out);
    let whole = lines.iter().zip(0..n).take_while(|(got, i)| **got == chunk_line(*i, pad)).count();
    if whole < n as usize {
        let got = lines.get(whole).map_or("end of stream".into(), |l| l.escape_ascii().to_string());
        panic!(
            "the agent wrote {n} numbered lines and 50 bytes of one more before it died; the \
             editor got lines 0..{whole} and then, in place of line {whole}: {got}"
        );
    }
    // The piece of a line the agent wrote before it died, as it came, and ended so the error
    // responses that follow are lines of their own.
    let partial = &chunk_line(n, pad)[..50];
    assert_same_bytes(lines[n as usize], partial, "the agent's unfinished last line");
    assert_error_responses(&lines[n as usize + 1..], PENDING, "signal 9");
}

#[test]
fn sigkill_after_a_burst_loses_nothing_and_answers_pending_requests() {
    const N: u64 = 100_000;
    let dir = scratch("sigkill-burst");
    let pad = [b'x'; 100];
    let agent = py_agent(
        &dir,
        "agent.py",
        KILLS_ITSELF,
        pad.len(),
        &[&dir.display().to_string(), &N.to_string()],
    );
    let mut relay = start(&dir, &[], &strs(&agent), "warn");
    relay.reap_on_failure(dir.join("pids"));
    let reader = relay.read_all_in_background();
    send_pending(&mut relay);
    assert_eq!(relay.exit_code(HUNG), 137, "acp-usage must exit as the agent did (128 + 9)");
    check_killed_output(&reader.join().unwrap(), N, &pad);
}

/// The editor is not reading when the agent dies with its last lines still in the pipes and in
/// acp-usage's queues; it reads them later.
#[test]
fn sigkill_while_the_editor_is_not_reading_loses_nothing() {
    // 800 lines of 1 KiB: they fit in the agent's pipe, so it finishes them and dies with
    // most of them unread, far more than acp-usage holds and the editor's pipe (64 KiB) takes.
    const N: u64 = 800;
    let dir = scratch("sigkill-unread");
    let pad = [b'x'; 1000];
    let agent = py_agent(
        &dir,
        "agent.py",
        KILLS_ITSELF,
        pad.len(),
        &[&dir.display().to_string(), &N.to_string()],
    );
    let mut relay = start(&dir, &[], &strs(&agent), "warn");
    relay.reap_on_failure(dir.join("pids"));
    send_pending(&mut relay);
    let agent_pid = wait_pids(&dir.join("pids"), 1)[0];
    let end = Instant::now() + HUNG;
    while !gone(agent_pid) {
        assert!(
            Instant::now() < end,
            "the agent could not write {N} lines of 1 KiB into its 1 MiB pipe"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // The editor is busy for a while after the agent died.
    std::thread::sleep(Duration::from_secs(2));
    let _watchdog = watchdog(relay.pid(), HUNG);
    let mut out = Vec::new();
    relay.stdout.take().unwrap().read_to_end(&mut out).unwrap();
    assert_eq!(relay.exit_code(HUNG), 137);
    check_killed_output(&out, N, &pad);
}

#[test]
fn sigkill_from_outside_mid_stream_keeps_every_line_whole_and_in_order() {
    let dir = scratch("sigkill-outside");
    let pad = [b'x'; 60];
    // Streams until killed, in writes that do not end at line boundaries.
    let body = r#"
d = ARGS[0]
pids(d, os.getpid())
sys.stdin.buffer.readline(); sys.stdin.buffer.readline()
i, rest = 0, b""
while True:
    data = rest + lines(i, i + 997)
    i += 997
    cut = len(data) - 7919
    write_all(data[:cut])
    rest = data[cut:]
"#;
    let agent = py_agent(&dir, "agent.py", body, pad.len(), &[&dir.display().to_string()]);
    let mut relay = start(&dir, &[], &strs(&agent), "warn");
    relay.reap_on_failure(dir.join("pids"));
    let stdout = relay.stdout.take().unwrap();
    send_pending(&mut relay);
    let agent_pid = wait_pids(&dir.join("pids"), 1)[0];
    let _watchdog = watchdog(relay.pid(), HUNG);

    let mut next = 0u64;
    let mut partial: Option<Vec<u8>> = None;
    let mut tail: Vec<Vec<u8>> = Vec::new();
    let mut killed = false;
    let last = for_each_line(stdout, |line| {
        if tail.is_empty() && partial.is_none() {
            let want = chunk_line(next, &pad);
            if line == want.as_slice() {
                next += 1;
                if next == 50_000 && !killed {
                    kill(agent_pid, libc::SIGKILL);
                    killed = true;
                }
                return;
            }
            if killed && !line.is_empty() && want.starts_with(line) {
                partial = Some(line.to_vec());
                return;
            }
        }
        tail.push(line.to_vec());
    });
    assert!(killed, "the stream ended after {next} lines, before the agent was killed");
    assert!(last.is_empty(), "a last line without newline: {}", last.escape_ascii());
    let tail: Vec<&[u8]> = tail.iter().map(Vec::as_slice).collect();
    // Anything after the numbered lines (and the piece of one the agent was writing) must be
    // the error responses: a line out of sequence or altered fails here.
    assert_error_responses(&tail, PENDING, "signal 9");
    assert_eq!(relay.exit_code(HUNG), 137);
    eprintln!("killed after {next} whole lines (partial line: {})", partial.is_some());
}

// ---------------------------------------------------------------------------------------------
// The editor goes away mid-turn.

/// Shell scripts for an agent with grandchildren: `wrapper.sh` → `leaf.sh` → `sleep` (an
/// `npx`-like chain of wrappers) and `stubborn.sh`, which ignores SIGTERM. Each records its pid.
fn write_family(dir: &std::path::Path) {
    write_script(
        dir,
        "wrapper.sh",
        r#"echo $$ >> "$1/pids"; sh "$1/leaf.sh" "$1"; echo wrapper-done >&2"#,
    );
    write_script(
        dir,
        "leaf.sh",
        r#"echo $$ >> "$1/pids"; sleep 1000 & echo $! >> "$1/pids"; wait"#,
    );
    write_script(
        dir,
        "stubborn.sh",
        r#"trap '' TERM; echo $$ >> "$1/pids"; while :; do sleep 1; done"#,
    );
}

/// The agent (`sh agent.sh DIR`) starts its family, says it is ready, reads the prompt, streams a
/// chunk (the turn is under way), then runs `then`.
fn family_agent(dir: &std::path::Path, then: &str) -> Vec<String> {
    write_family(dir);
    let script = format!(
        r#"d=$1
echo $$ >> "$d/pids"
sh "$d/wrapper.sh" "$d" &
sh "$d/stubborn.sh" "$d" &
echo '{{"jsonrpc":"2.0","method":"_test/ready","params":{{}}}}'
read -r prompt
echo '{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":"s","update":{{"sessionUpdate":"agent_message_chunk","content":{{"type":"text","text":"working"}}}}}}}}'
{then}
"#
    );
    let path = write_script(dir, "agent.sh", &script);
    vec!["sh".into(), path, dir.display().to_string()]
}

/// The agent's processes: the agent, wrapper, leaf, sleep, stubborn.
const FAMILY: usize = 5;

/// Starts the family agent, waits until the turn is under way and all its processes run;
/// returns the reader of the editor's lines and the pids (the agent's first).
fn start_turn(
    relay: &mut Relay,
    dir: &std::path::Path,
) -> (std::sync::mpsc::Receiver<Vec<u8>>, Vec<i32>) {
    relay.reap_on_failure(dir.join("pids"));
    let stdout = relay.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rest = for_each_line(stdout, |l| {
            let _ = tx.send(l.to_vec());
        });
        if !rest.is_empty() {
            let _ = tx.send(rest);
        }
    });
    let next = |rx: &std::sync::mpsc::Receiver<Vec<u8>>| {
        rx.recv_timeout(HUNG).expect("no line from acp-usage")
    };
    assert!(next(&rx).ends_with(br#""_test/ready","params":{}}"#));
    relay.send(format!("{PROMPT_1}\n").as_bytes());
    assert!(next(&rx).ends_with(br#""text":"working"}}}}"#));
    let pids = wait_pids(&dir.join("pids"), FAMILY);
    (rx, pids)
}

#[test]
fn editor_eof_mid_turn_ends_an_agent_that_ignores_it_with_its_whole_group() {
    let dir = scratch("eof-ignored");
    // The agent ignores SIGTERM and never reads stdin again.
    let agent = family_agent(&dir, "trap '' TERM\nwhile :; do sleep 1; done");
    let grace_ms = 500;
    let mut relay = start(&dir, &["--grace-ms", &grace_ms.to_string()], &strs(&agent), "warn");
    let (rx, pids) = start_turn(&mut relay, &dir);
    let pgid = group_of(pids[0]);
    let members = group_members(pgid);
    assert!(members.len() >= FAMILY, "the agent's group: {members:?}");

    let closed = Instant::now();
    relay.close();
    let code = relay.exit_code(HUNG);
    let left = wait_all_gone(&pids, pgid, Duration::from_secs(30));
    let took = closed.elapsed();
    assert!(left.is_empty(), "left behind: {left:?} (of {pids:?}, group {pgid})");
    // SIGTERM was ignored: the group was killed.
    assert_eq!(code, 137, "acp-usage must exit as the agent did");
    let rest: Vec<Vec<u8>> = rx.iter().collect();
    let rest: Vec<&[u8]> = rest.iter().map(Vec::as_slice).collect();
    assert_error_responses(&rest, &["1"], "signal 9");
    eprintln!("grace {grace_ms} ms: the agent's group was gone {took:?} after the editor left");
}

#[test]
fn editor_eof_mid_turn_an_agent_that_exits_leaves_no_grandchild() {
    let dir = scratch("eof-exits");
    // The agent reads to the end of its stdin and exits, leaving its family running.
    let agent = family_agent(&dir, "cat > /dev/null\nexit 3");
    let mut relay = start(&dir, &["--grace-ms", "60000"], &strs(&agent), "warn");
    let (rx, pids) = start_turn(&mut relay, &dir);
    let pgid = group_of(pids[0]);
    relay.close();
    // The agent's own status, long before the grace period.
    assert_eq!(relay.exit_code(HUNG), 3);
    let left = wait_all_gone(&pids, pgid, Duration::from_secs(30));
    assert!(left.is_empty(), "left behind: {left:?} (of {pids:?}, group {pgid})");
    let rest: Vec<Vec<u8>> = rx.iter().collect();
    let rest: Vec<&[u8]> = rest.iter().map(Vec::as_slice).collect();
    assert_error_responses(&rest, &["1"], "exit status 3");
}

// ---------------------------------------------------------------------------------------------
// SIGTERM and SIGINT to acp-usage.

/// A python agent with a child `sleep` in its group. `handle`: on the signal it waits for the
/// child (which only dies if the signal reached it too), writes a line naming both, and exits
/// with 40 + the signal; `default`: it dies of the signal.
const SIGNALLED: &str = r#"
import signal, subprocess, time
d, mode = ARGS[0], ARGS[1]
child = subprocess.Popen(["sleep", "1000"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
pids(d, os.getpid(), child.pid)
def on_signal(sig, frame):
    child.wait()
    write_all(b'{"jsonrpc":"2.0","method":"_test/bye","params":{"signal":%d,"child":%d}}\n' % (sig, child.returncode))
    os._exit(40 + sig)
for s in (signal.SIGTERM, signal.SIGINT):
    signal.signal(s, on_signal if mode == "handle" else signal.SIG_DFL)
sys.stdin.buffer.readline(); sys.stdin.buffer.readline()
write_all(b'{"jsonrpc":"2.0","method":"_test/ready","params":{}}\n')
while True:
    time.sleep(1000)
"#;

fn signal_relay(sig: i32, mode: &str) {
    let dir = scratch(&format!("signal-{sig}-{mode}"));
    let agent = py_agent(&dir, "agent.py", SIGNALLED, 0, &[&dir.display().to_string(), mode]);
    let mut relay = start(&dir, &[], &strs(&agent), "warn");
    relay.reap_on_failure(dir.join("pids"));
    let stdout = relay.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut lines = Vec::new();
        let rest = for_each_line(stdout, |l| {
            let _ = tx.send(l.to_vec());
            lines.push(l.to_vec());
        });
        assert!(rest.is_empty(), "a line without newline: {}", rest.escape_ascii());
        lines
    });
    send_pending(&mut relay);
    let ready = rx.recv_timeout(HUNG).expect("the agent never got ready");
    assert_eq!(ready, br#"{"jsonrpc":"2.0","method":"_test/ready","params":{}}"#);
    let pids = wait_pids(&dir.join("pids"), 2);
    // acp-usage's handlers are in place: the agent's line went through its loop.
    relay.signal(sig);
    let code = relay.exit_code(HUNG);
    let lines = reader.join().unwrap();
    let lines: Vec<&[u8]> = lines.iter().map(Vec::as_slice).collect();
    assert_eq!(lines[0], ready.as_slice());
    if mode == "handle" {
        let bye = format!(
            r#"{{"jsonrpc":"2.0","method":"_test/bye","params":{{"signal":{sig},"child":{}}}}}"#,
            -sig
        );
        assert_same_bytes(lines[1], bye.as_bytes(), "the agent's last line");
        assert_eq!(code, 40 + sig, "acp-usage must exit with the agent's code");
        assert_error_responses(&lines[2..], PENDING, &format!("exit status {}", 40 + sig));
    } else {
        assert_eq!(code, 128 + sig, "acp-usage must exit as the agent did (128 + {sig})");
        assert_error_responses(&lines[1..], PENDING, &format!("signal {sig}"));
    }
    let left = wait_all_gone(&pids, pids[0], Duration::from_secs(30));
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[test]
fn sigterm_reaches_the_agents_group_which_handles_it() {
    signal_relay(libc::SIGTERM, "handle");
}

#[test]
fn sigterm_reaches_the_agents_group_which_dies_of_it() {
    signal_relay(libc::SIGTERM, "default");
}

#[test]
fn sigint_reaches_the_agents_group_which_handles_it() {
    signal_relay(libc::SIGINT, "handle");
}

#[test]
fn sigint_reaches_the_agents_group_which_dies_of_it() {
    signal_relay(libc::SIGINT, "default");
}

// ---------------------------------------------------------------------------------------------
// A slow editor.

/// Streams `total` bytes of numbered lines with `pad` bytes of padding to an editor that reads
/// the first `slow` bytes at 1 MB/s and the rest as fast as it can; checks every line and
/// returns acp-usage's peak RSS in KiB.
fn slow_editor(name: &str, total: usize, slow: usize, pad_len: usize) -> u64 {
    let dir = scratch(name);
    let pad = vec![b'x'; pad_len];
    let line_len = chunk_line(0, &pad).len() + 8;
    let n = (total / line_len) as u64;
    // Writes everything in 1 MiB writes, then waits for the editor to leave.
    let body = r#"
n = int(ARGS[0])
step = max(1, (1 << 20) // len(line(n)))
for i in range(0, n, step):
    write_all(lines(i, min(n, i + step)))
sys.stdin.buffer.read()
"#;
    let agent = py_agent(&dir, "agent.py", body, pad_len, &[&n.to_string()]);
    let mut relay = start(&dir, &[], &strs(&agent), "warn");
    let pid = relay.pid();
    let mut stdout = relay.stdout.take().unwrap();
    let _watchdog = watchdog(pid, Duration::from_secs(900));

    const RATE: f64 = 1_000_000.0;
    let start = Instant::now();
    let mut buf = vec![0u8; 16 * 1024];
    let mut pending: Vec<u8> = Vec::new();
    let mut received = 0usize;
    let mut next = 0u64;
    let mut peak = 0u64;
    while next < n {
        let got = stdout.read(&mut buf).expect("reading acp-usage's stdout");
        assert!(got > 0, "acp-usage closed stdout after {next} of {n} lines");
        received += got;
        pending.extend_from_slice(&buf[..got]);
        let mut at = 0;
        while let Some(i) = pending[at..].iter().position(|&b| b == b'\n') {
            assert_same_bytes(
                &pending[at..at + i],
                &chunk_line(next, &pad),
                &format!("line {next}"),
            );
            next += 1;
            at += i + 1;
        }
        pending.drain(..at);
        peak = peak.max(vm_hwm_kib(pid).unwrap_or(0));
        // Read no faster than RATE.
        let due = Duration::from_secs_f64(received.min(slow) as f64 / RATE);
        if let Some(wait) = due.checked_sub(start.elapsed()) {
            std::thread::sleep(wait);
        }
    }
    assert!(pending.is_empty(), "bytes after the last line: {}", pending.escape_ascii());
    peak = peak.max(vm_hwm_kib(pid).unwrap_or(0));
    relay.close();
    let mut rest = Vec::new();
    stdout.read_to_end(&mut rest).unwrap();
    assert_eq!(rest, b"", "more after the last line");
    assert_eq!(relay.exit_code(HUNG), 0);
    eprintln!(
        "{name}: {n} lines, {received} bytes in {:?}; acp-usage peak RSS {} KiB",
        start.elapsed(),
        peak
    );
    peak
}

#[test]
fn a_slow_editor_gets_every_small_line_and_memory_stays_bounded() {
    let peak = slow_editor("slow-small", 30_000_000, 30_000_000, 200);
    assert!(peak > 0, "VmHWM was never read");
    assert!(peak < 64 * 1024, "acp-usage's peak RSS was {peak} KiB");
}

#[test]
fn a_slow_editor_gets_every_1_mib_line_and_memory_stays_bounded() {
    // 300 MiB, far more than acp-usage may hold, of which the first 30 MB are read slowly: by
    // then the agent is far ahead and everything between it and the editor is full.
    let peak = slow_editor("slow-large", 300 << 20, 30_000_000, 1 << 20);
    assert!(peak > 0, "VmHWM was never read");
    assert!(peak < 64 * 1024, "acp-usage's peak RSS was {peak} KiB");
}

// ---------------------------------------------------------------------------------------------
// Line sizes.

#[test]
fn a_line_at_the_limit_passes_and_one_byte_more_is_dropped_both_ways() {
    const LIMIT: usize = 64 << 20;
    let dir = scratch("line-limit");
    let hello = br#"{"jsonrpc":"2.0","method":"_test/hello","params":{}}"#;
    let agent_after = br#"{"jsonrpc":"2.0","method":"_test/agent-after","params":{}}"#;
    let editor_after = br#"{"jsonrpc":"2.0","method":"_test/editor-after","params":{}}"#;
    // The agent writes a line one byte over the limit between two short ones, then echoes.
    let script = format!(
        "printf '%s\\n' '{}'; head -c {} /dev/zero | tr '\\0' a; echo; printf '%s\\n' '{}'; exec cat",
        String::from_utf8_lossy(hello),
        LIMIT + 1,
        String::from_utf8_lossy(agent_after),
    );
    // The grace period is long: the editor leaves while its lines are still being relayed.
    let args = ["--max-line-mib", "64", "--grace-ms", "600000"];
    let mut relay = start(&dir, &args, &["sh", "-c", &script], "warn");
    let reader = relay.read_all_in_background();

    // A JSON line of exactly the limit, with varied content, and a line one byte over it.
    let mut exact = br#"{"jsonrpc":"2.0","method":"_test/big","params":{"blob":""#.to_vec();
    let tail = br#""}}"#;
    let body = LIMIT - exact.len() - tail.len();
    exact.extend((0..body).map(|i| b'a' + (i % 23) as u8));
    exact.extend_from_slice(tail);
    assert_eq!(exact.len(), LIMIT);
    let over = vec![b'b'; LIMIT + 1];
    let mut stdin = relay.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        for part in [&exact[..], b"\n", &over, b"\n", editor_after, b"\n"] {
            stdin.write_all(part).expect("writing to acp-usage");
        }
        exact
    });
    let exact = writer.join().unwrap();
    let code = relay.exit_code(HUNG);
    let out = reader.join().unwrap();
    let mut want = Vec::new();
    for line in [&hello[..], agent_after, &exact, editor_after] {
        want.extend_from_slice(line);
        want.push(b'\n');
    }
    assert_same_bytes(&out, &want, "what the editor got");
    assert_eq!(code, 0);
    let log = relay.stderr();
    for side in ["agent", "editor"] {
        let line = log
            .lines()
            .find(|l| l.contains(&(LIMIT + 1).to_string()) && l.contains(side))
            .unwrap_or_else(|| panic!("no log line for the {side}'s over-long line in:\n{log}"));
        assert!(line.contains("WARN"), "not a warning: {line}");
    }
}

// ---------------------------------------------------------------------------------------------
// Odd bytes.

/// Everything a relay might be tempted to fix, repeated with varying numbers.
fn odd_stream() -> Vec<u8> {
    let mut out = Vec::new();
    for i in 0..300u32 {
        out.extend_from_slice(format!(r#"{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":"s{}","update":{{"sessionUpdate":"agent_message_chunk","content":{{"type":"text","text":"caf\u00e9 {i} \ud83d\ude00"}}}}}}}}"#, i % 3).as_bytes());
        out.extend_from_slice(b"\n");
        out.extend_from_slice(b"\xff\xfe\x80 not utf-8 \xc3\x28 \xed\xa0\x80\n");
        out.extend_from_slice(
            format!("{{\"jsonrpc\":\"2.0\",\"method\":\"_x/crlf\",\"params\":{{\"i\":{i}}}}}\r\n")
                .as_bytes(),
        );
        out.extend_from_slice(b"\n\n");
        out.extend_from_slice(b"   \t \n");
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(b"\r\n\r");
        out.extend_from_slice(b"\n");
        out.extend_from_slice(
            format!("[{i},{{\"jsonrpc\":\"2.0\",\"method\":\"_x/batch\"}},\"two\"]\n").as_bytes(),
        );
        out.extend_from_slice(b"garbage }{ between messages\x00\x01\x1b[0m\n");
        out.extend_from_slice(b"{\"jsonrpc\":\"2.0\", \"method\":\n");
        out.extend_from_slice(format!("  {{ \"params\" : {{ \"n\" : {i}e400 }} , \"method\" : \"_zed.dev/x\" , \"jsonrpc\":\"2.0\" }}  \n").as_bytes());
        out.extend_from_slice(
            format!(r#"{{"jsonrpc":"2.0","id":"agent-{i}","result":{{"ok":true}}}}"#).as_bytes(),
        );
        out.extend_from_slice(b"\n");
        if i % 50 == 0 {
            out.extend(std::iter::repeat_n(b'\xc3', 70_001));
            out.push(b'\n');
        }
    }
    out.extend_from_slice(br#"{"jsonrpc":"2.0","method":"_x/last","params":{}}"#);
    out
}

#[test]
fn odd_bytes_are_forwarded_byte_for_byte_both_ways() {
    let dir = scratch("odd-bytes");
    let seen = dir.join("agent-received");
    // Copies stdin to a file and to stdout, in reads and writes of varying sizes.
    let body = r#"
import random
rnd = random.Random(7)
with open(ARGS[0], "wb") as f:
    while True:
        data = os.read(0, rnd.choice([1, 2, 3, 7, 100, 4096, 65536]))
        if not data:
            break
        f.write(data)
        i = 0
        while i < len(data):
            j = i + rnd.choice([1, 2, 5, 333, 65536])
            write_all(data[i:j])
            i = j
"#;
    let agent = py_agent(&dir, "agent.py", body, 0, &[&seen.display().to_string()]);
    // The grace period is long: the editor leaves while its lines are still being relayed.
    let mut relay = start(&dir, &["--grace-ms", "600000"], &strs(&agent), "warn");
    let reader = relay.read_all_in_background();
    let input = odd_stream();
    let mut stdin = relay.stdin.take().unwrap();
    let sent = input.clone();
    std::thread::spawn(move || {
        // Writes that cut lines, CRLFs and UTF-8 sequences anywhere.
        let sizes = [1usize, 2, 3, 5, 8, 13, 21, 34, 55, 89, 4096];
        let mut at = 0;
        for k in 0.. {
            if at >= sent.len() {
                break;
            }
            let end = (at + sizes[k % sizes.len()]).min(sent.len());
            stdin.write_all(&sent[at..end]).expect("writing to acp-usage");
            stdin.flush().unwrap();
            at = end;
        }
    })
    .join()
    .unwrap();
    assert_eq!(relay.exit_code(HUNG), 0);
    let out = reader.join().unwrap();
    let received = std::fs::read(&seen).expect("the agent's copy");
    assert_same_bytes(&received, &input, "editor to agent");
    assert_same_bytes(&out, &input, "agent to editor");
}

// ---------------------------------------------------------------------------------------------
// Volume.

#[test]
fn ten_million_messages_arrive_none_lost_reordered_or_altered() {
    let n: u64 = std::env::var("ACP_USAGE_TORTURE_MESSAGES")
        .ok()
        .map(|v| v.parse().expect("ACP_USAGE_TORTURE_MESSAGES must be a number"))
        .unwrap_or(10_000_000);
    let dir = scratch("ten-million");
    // Small extension notifications, written in writes of about 1 MiB; the agent then waits
    // for the editor to leave.
    let body = r#"
n = int(ARGS[0])
PRE = b'{"jsonrpc":"2.0","method":"_t/seq","params":['
for i in range(0, n, 20000):
    write_all(b"".join([b"%s%d]}\n" % (PRE, k) for k in range(i, min(n, i + 20000))]))
sys.stdin.buffer.read()
"#;
    let agent = py_agent(&dir, "agent.py", body, 0, &[&n.to_string()]);
    let mut relay = start(&dir, &[], &strs(&agent), "warn");
    let stdout = relay.stdout.take().unwrap();
    let progress = Arc::new(AtomicU64::new(0));
    let seen = progress.clone();
    let started = Instant::now();
    let checker = std::thread::spawn(move || {
        const PRE: &[u8] = br#"{"jsonrpc":"2.0","method":"_t/seq","params":["#;
        const SUF: &[u8] = b"]}";
        // The expected number as ASCII digits, incremented in place.
        let mut digits = b"0".to_vec();
        let mut count = 0u64;
        let mut bad: Option<String> = None;
        let rest = for_each_line(stdout, |line| {
            if bad.is_some() {
                return;
            }
            let ok = line.len() == PRE.len() + digits.len() + SUF.len()
                && line.starts_with(PRE)
                && line[PRE.len()..PRE.len() + digits.len()] == digits[..]
                && line.ends_with(SUF);
            if !ok {
                bad = Some(format!(
                    "message {count}: expected number {}, got {}",
                    String::from_utf8_lossy(&digits),
                    line.escape_ascii()
                ));
                // Stops the wait below.
                seen.store(u64::MAX, Ordering::Relaxed);
                return;
            }
            count += 1;
            increment(&mut digits);
            if count.is_multiple_of(65536) || count == n {
                seen.store(count, Ordering::Relaxed);
            }
        });
        if bad.is_none() {
            seen.store(count, Ordering::Relaxed);
        }
        (count, bad, rest)
    });
    // Close the editor's side once everything arrived (or the stream stopped moving).
    let mut last = (0, Instant::now());
    loop {
        std::thread::sleep(Duration::from_millis(50));
        let now = progress.load(Ordering::Relaxed);
        if now >= n || checker.is_finished() {
            break;
        }
        if now != last.0 {
            last = (now, Instant::now());
        }
        assert!(last.1.elapsed() < HUNG, "no progress for {HUNG:?} after {now} messages");
    }
    relay.close();
    let (count, bad, rest) = checker.join().unwrap();
    assert_eq!(bad, None);
    assert!(rest.is_empty(), "a last line without newline: {}", rest.escape_ascii());
    assert_eq!(count, n, "messages lost");
    assert_eq!(relay.exit_code(HUNG), 0);
    eprintln!("{n} messages checked in {:?}", started.elapsed());
}

/// Adds one to a decimal number in ASCII.
fn increment(digits: &mut Vec<u8>) {
    for d in digits.iter_mut().rev() {
        if *d == b'9' {
            *d = b'0';
        } else {
            *d += 1;
            return;
        }
    }
    digits.insert(0, b'1');
}
