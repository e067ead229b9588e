//! acpx 0.19.1, a real ACP client, in front of acp-usage: `acpx --format quiet --agent
//! '<acp-usage> -- <agent>' exec "Say hi."`, its token line checked against what the mock served.
//!
//! What acpx shows (0.19.1, `QuietOutputFormatter`): the reply on stdout and, on stderr once the
//! `session/prompt` result arrives, `[acpx] tokens: input=N output=N cache_read=N cache_write=N
//! total=N` built from that result's per-turn `usage` (`inputTokens`, `outputTokens`,
//! `cachedReadTokens`, `cachedWriteTokens`, `totalTokens`; each label only when its field is a
//! number; thoughts are not shown), then `[acpx] cost: ...` when the result has a `cost`. With one
//! prompt the turn is the whole session, so the line must equal the sum of the mock's billed
//! calls: input with the cache, output with thoughts, total = input + output.
//!
//! Neither agent sends a per-turn `usage` by itself (gemini-cli: only `_meta.quota`; qwen-code:
//! per-call `_meta.usage` on message chunks), so acpx run on the agent directly prints no token
//! line at all. That "before" run is printed for the record, never asserted.
//!
//! `/usage` (claude-agent-acp behind acp-usage): acpx prints acp-usage's answer as the agent's
//! text, in a one-shot `exec` and after a turn of a persistent session; no model call for it.
//!
//! acpx runs with the lab's environment only (a scratch HOME: whatever acpx would keep under
//! `~/.acpx` lands there; `exec` leaves nothing), Node 22 first on PATH, and a 120 s limit.
//! It splits `--agent` like a POSIX shell, so every word is single-quoted.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use acp_usage_tests::agents::{self, Agent};
use acp_usage_tests::lab::Lab;
use acp_usage_tests::mock_llm::{Call, CallKind, Usage};
use acp_usage_tests::relay;

use crate::support::{self, Checks};

/// The acpx version this test is written for (`.ci/install-agents.sh`).
const ACPX_VERSION: &str = "0.19.1";
const PROMPT: &str = "Say hi.";
const TIMEOUT: Duration = Duration::from_secs(120);
const TOKENS_PREFIX: &str = "[acpx] tokens: ";

#[test]
fn acpx_gemini() {
    // gemini-cli's transcript has every call, side calls included: all billed calls count.
    check_acpx(Agent::Gemini, false);
}

#[test]
fn acpx_qwen() {
    // qwen-code's side calls at the end of a turn (memory extraction, a prompt suggestion) are in
    // no record acp-usage reads (qwen.rs, `unrecorded_auxiliary`), and whether one reaches the
    // mock before `exec` ends the agent is a race: left out of what the line must show, and
    // reported.
    check_acpx(Agent::Qwen, true);
}

fn check_acpx(agent: Agent, leave_out_auxiliary: bool) {
    let acpx = acpx_cli().unwrap_or_else(|err| panic!("{err:#}"));
    let name = agent.name();

    // Before: acpx straight on the agent, in a lab of its own (a fresh mock and HOME).
    let before = Lab::new(agent, support::script(agent)).expect("lab");
    let words = agent_words(&before, None);
    match run_acpx(&before, &acpx, &words, &[]) {
        Ok(run) => {
            let calls = before.mock.calls();
            let counted = billed(&calls, leave_out_auxiliary);
            eprintln!(
                "acpx -> {name} directly (before): {}, token line {:?}, stderr {:?}; mock served {}{}",
                run.status,
                token_line(&run.stderr),
                run.stderr.trim_end(),
                describe(&support::sum(&counted)),
                left_out_note(&calls, leave_out_auxiliary)
            );
        }
        Err(err) => eprintln!("acpx -> {name} directly (before) did not finish: {err:#}"),
    }
    drop(before);

    // After: acpx -> acp-usage -> agent.
    let lab = Lab::new(agent, support::script(agent)).expect("lab");
    let relay = relay::relay_binary().expect("acp-usage binary");
    let relay_log = lab.scratch.path("acpx-relay.log");
    let words = agent_words(&lab, Some((&relay, &relay_log)));
    let mut relay_env = vec![
        ("ACP_USAGE_LOG", "debug"),
        ("RUST_BACKTRACE", "1"),
        // As in `Lab::relayed`: a late transcript must not turn exact figures into estimates.
        ("ACP_USAGE_TRANSCRIPT_WAIT_MS", "10000"),
    ];
    if leave_out_auxiliary {
        // The tap (on by default) counts those side calls in the turn they end in, which is a
        // race against `exec`; what acpx shows of the relay's figures is checked without it
        // (`qwen_relay_turns_tapped` checks the tapped figures turn by turn).
        relay_env.push(("ACP_USAGE_TAP", "0"));
    }
    let run = run_acpx(&lab, &acpx, &words, &relay_env).unwrap_or_else(|err| {
        panic!("acpx -> acp-usage -> {name}: {err:#} (relay log: {})", relay_log.display())
    });
    let calls = lab.mock.calls();
    let counted = billed(&calls, leave_out_auxiliary);
    let served = support::sum(&counted);
    let line = token_line(&run.stderr);
    eprintln!(
        "acpx -> acp-usage -> {name} (after): {}, token line {line:?}, stderr {:?}; mock served {}{}",
        run.status,
        run.stderr.trim_end(),
        describe(&served),
        left_out_note(&calls, leave_out_auxiliary)
    );

    let mut checks = Checks::new(agent);
    let output = format!(
        "acpx {}, stdout {:?}, stderr {:?} (relay log: {})",
        run.status,
        run.stdout,
        run.stderr,
        relay_log.display()
    );
    checks.check(run.status.success(), || format!("acpx failed: {output}"));
    let reply = support::script(agent).steps.first().map(|step| step.text.clone());
    checks.check(reply.is_some_and(|reply| run.stdout.contains(&reply)), || {
        format!("acpx did not print the mock's reply: {output}")
    });
    checks.check(!counted.is_empty(), || format!("the mock served no billed call: {output}"));

    let Some(line) = line else {
        checks.fail(format!("acpx printed no `{}` line: {output}", TOKENS_PREFIX.trim_end()));
        checks.finish();
        return;
    };
    let shown = match parse_tokens(line) {
        Ok(shown) => shown,
        Err(err) => {
            checks.fail(format!("acpx's token line {line:?} does not parse: {err}"));
            checks.finish();
            return;
        }
    };
    // A zero cache figure may be left out of the usage (and so of the line); nothing else may.
    let expected = [
        ("input", served.input, false),
        ("output", served.output, false),
        ("cache_read", served.cache_read, true),
        ("cache_write", served.cache_write(), true),
        ("total", served.total(), false),
    ];
    for (label, want, optional_if_zero) in expected {
        let got = shown.get(label).copied();
        checks.row("acpx exec", label, got.map(|n| n as f64), want as f64, None);
        let ok = got == Some(want) || (got.is_none() && optional_if_zero && want == 0);
        checks.check(ok, || {
            format!(
                "acpx shows {label}={} but the mock served {want} ({}): acpx printed {line:?}",
                got.map_or("(absent)".to_owned(), |n| n.to_string()),
                describe(&served)
            )
        });
    }
    let unknown: Vec<&String> =
        shown.keys().filter(|key| !expected.iter().any(|(label, ..)| label == key)).collect();
    checks.check(unknown.is_empty(), || format!("acpx's token line has unknown labels: {line:?}"));
    checks.finish();
}

/// `acpx exec "/usage"` through acp-usage to claude-agent-acp: acp-usage's answer is what acpx
/// prints (the figures of the new session), and the mock serves no model call for it.
#[test]
fn acpx_usage_command() {
    let agent = Agent::Claude;
    let acpx = acpx_cli().unwrap_or_else(|err| panic!("{err:#}"));
    let lab = Lab::new(agent, support::script(agent)).expect("lab");
    let relay = relay::relay_binary().expect("acp-usage binary");
    let relay_log = lab.scratch.path("acpx-relay.log");
    let words = agent_words(&lab, Some((&relay, &relay_log)));
    let env = [("ACP_USAGE_LOG", "debug")];
    let run = run_acpx_cmd(&lab, &acpx, &words, &env, &["exec", "/usage"])
        .unwrap_or_else(|err| panic!("acpx -> acp-usage -> claude: {err:#}"));
    eprintln!("acpx printed, on stdout:\n{}\non stderr:\n{}", run.stdout, run.stderr);
    let output = format!("acpx {}, stdout {:?}, stderr {:?}", run.status, run.stdout, run.stderr);
    assert!(run.status.success(), "{output}");
    for want in ["**/usage**", "```text", "Context", "of 1,000,000 tokens", "Today", "This month"] {
        assert!(run.stdout.contains(want), "{want:?} not in {output}");
    }
    let main: Vec<Call> =
        lab.mock.calls().into_iter().filter(|c| c.kind == CallKind::Main).collect();
    assert!(main.is_empty(), "the mock served {main:?} for /usage");
}

/// acpx's persistent session through acp-usage to claude-agent-acp: a turn, then `/usage`,
/// whose text acpx prints with the turn's figures (one main call, a cost, today's spending),
/// and for which the mock serves no model call.
#[test]
fn acpx_usage_command_after_a_turn() {
    let agent = Agent::Claude;
    let acpx = acpx_cli().unwrap_or_else(|err| panic!("{err:#}"));
    let lab = Lab::new(agent, support::script(agent)).expect("lab");
    let relay = relay::relay_binary().expect("acp-usage binary");
    let relay_log = lab.scratch.path("acpx-session-relay.log");
    let words = agent_words(&lab, Some((&relay, &relay_log)));
    let env = [("ACP_USAGE_LOG", "debug"), ("ACP_USAGE_TRANSCRIPT_WAIT_MS", "10000")];
    // acpx's queue owner keeps the agent between prompts, so that `/usage` is answered by the
    // process that ran the turn (a reopened session's process counts only the calls it settled
    // itself by role: "Calls none yet"). 60 s: a loaded machine once took more than 5 s between
    // the turn's end and `/usage`, and acpx had started a new agent by then. `sessions close`
    // ends it below.
    let acpx_run = |command: &[&str]| {
        let mut all = vec!["--ttl", "60"];
        all.extend_from_slice(command);
        let run = run_acpx_cmd(&lab, &acpx, &words, &env, &all)
            .unwrap_or_else(|err| panic!("acpx {command:?}: {err:#}"));
        let output =
            format!("acpx {command:?}: {}, {:?}, {:?}", run.status, run.stdout, run.stderr);
        assert!(run.status.success(), "{output}");
        (run, output)
    };
    acpx_run(&["sessions", "new"]);
    let (hi, output) = acpx_run(&[PROMPT]);
    let reply = &support::script(agent).steps[0].text;
    assert!(hi.stdout.contains(reply.as_str()), "{output}");
    let served = lab.mock.calls().iter().filter(|c| c.kind == CallKind::Main).count();
    let (usage, output) = acpx_run(&["/usage"]);
    eprintln!("acpx printed, on stdout:\n{}\non stderr:\n{}", usage.stdout, usage.stderr);
    for want in
        ["**/usage**", "```text", "Context", "Calls       1 main", "Cost        $0.", "Today"]
    {
        assert!(usage.stdout.contains(want), "{want:?} not in {output}");
    }
    let after = lab.mock.calls().iter().filter(|c| c.kind == CallKind::Main).count();
    assert_eq!(after, served, "the mock served a model call for /usage");
    let _ = run_acpx_cmd(&lab, &acpx, &words, &env, &["sessions", "close"]);
    end_left_over(&relay_log);
}

/// Ends what acpx's detached queue owner left running of this test (the relay, by its log's
/// path on its command line, and the agent under it), should its idle timeout not have.
fn end_left_over(relay_log: &Path) {
    let needle = relay_log.display().to_string();
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let relays: Vec<u32> = std::fs::read_dir("/proc")
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
            .filter(|pid| {
                std::fs::read(format!("/proc/{pid}/cmdline"))
                    .is_ok_and(|c| String::from_utf8_lossy(&c).contains(&needle))
            })
            .collect();
        if relays.is_empty() {
            return;
        }
        if Instant::now() >= deadline {
            for pid in relays {
                for child in descendants(pid) {
                    signal(child, libc::SIGKILL);
                }
                signal(pid, libc::SIGKILL);
            }
            return;
        }
        thread::sleep(Duration::from_millis(200));
    }
}

/// `dist/cli.js` of the installed acpx (run with Node 22), with a warning on another version.
fn acpx_cli() -> anyhow::Result<PathBuf> {
    let cli = agents::package_bin("acpx", "acpx")?;
    anyhow::ensure!(
        cli.is_file(),
        "acpx is not installed: {} does not exist. Run .ci/install-agents.sh",
        cli.display()
    );
    let manifest = agents::agents_cache().join("node_modules/acpx/package.json");
    let version = std::fs::read_to_string(manifest)
        .ok()
        .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
        .and_then(|manifest| manifest["version"].as_str().map(str::to_owned));
    if version.as_deref() != Some(ACPX_VERSION) {
        eprintln!(
            "warning: acpx {version:?} is installed, this test is written for {ACPX_VERSION}"
        );
    }
    Ok(cli)
}

/// The agent's command line for `--agent`: the lab's agent, behind the relay when given (with
/// its log in a file: acpx does not pass the agent's stderr on).
fn agent_words(lab: &Lab, relay: Option<(&Path, &Path)>) -> Vec<String> {
    let mut words = Vec::new();
    if let Some((relay, log)) = relay {
        words.push(relay.display().to_string());
        words.push("--log-file".to_owned());
        words.push(log.display().to_string());
        words.push("--".to_owned());
    }
    words.push(lab.spec.program.display().to_string());
    words.extend(lab.spec.args.iter().cloned());
    words
}

/// One word for acpx's command-line splitter (POSIX-like: `'...'` is literal, `\'` outside
/// quotes is a quote).
fn quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', r"'\''"))
}

#[derive(Debug)]
struct Run {
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

/// Runs `acpx --agent <words> exec PROMPT` with the lab's environment (and `extra_env`), in the
/// lab's project; kills it and everything it started after [`TIMEOUT`].
fn run_acpx(
    lab: &Lab,
    cli: &Path,
    words: &[String],
    extra_env: &[(&str, &str)],
) -> anyhow::Result<Run> {
    run_acpx_cmd(lab, cli, words, extra_env, &["exec", PROMPT])
}

/// Runs `acpx --agent <words> <command...>` as [`run_acpx`] does.
fn run_acpx_cmd(
    lab: &Lab,
    cli: &Path,
    words: &[String],
    extra_env: &[(&str, &str)],
    command: &[&str],
) -> anyhow::Result<Run> {
    use std::os::unix::process::CommandExt;

    let mut spec = lab.spec.clone();
    spec.set_env("PATH", agents::child_path()?);
    for (key, value) in extra_env {
        spec.set_env(key, *value);
    }
    let agent = words.iter().map(|word| quote(word)).collect::<Vec<_>>().join(" ");
    let work = lab.scratch.work();
    let mut child = Command::new(agents::node_bin_dir().join("node"))
        .arg(cli)
        .args(["--format", "quiet", "--approve-all", "--cwd"])
        .arg(&work)
        .args(["--agent", &agent])
        .args(command)
        .env_clear()
        .envs(spec.env.iter().map(|(key, value)| (key, value)))
        .current_dir(&work)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()?;
    let pipe = |reader: Option<Box<dyn Read + Send>>| {
        thread::spawn(move || {
            let mut text = String::new();
            if let Some(mut reader) = reader {
                let _ = reader.read_to_string(&mut text);
            }
            text
        })
    };
    let stdout = pipe(child.stdout.take().map(|r| Box::new(r) as Box<dyn Read + Send>));
    let stderr = pipe(child.stderr.take().map(|r| Box::new(r) as Box<dyn Read + Send>));
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break Some(status);
        }
        if started.elapsed() >= TIMEOUT {
            break None;
        }
        thread::sleep(Duration::from_millis(100));
    };
    let Some(status) = status else {
        // acpx starts the agent in a process group of its own: end every descendant by pid.
        for pid in descendants(child.id()) {
            signal(pid, libc::SIGKILL);
        }
        signal(child.id(), libc::SIGKILL);
        let _ = child.wait();
        let (stdout, stderr) =
            (stdout.join().unwrap_or_default(), stderr.join().unwrap_or_default());
        anyhow::bail!(
            "acpx did not finish within {} s, killed; stdout {stdout:?}, stderr {stderr:?}",
            TIMEOUT.as_secs()
        );
    };
    Ok(Run {
        status,
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
    })
}

/// Every process below `root`, from `/proc/*/stat`.
fn descendants(root: u32) -> Vec<u32> {
    let mut parents = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|name| name.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
        // `pid (comm) state ppid ...`; comm may hold spaces and parentheses.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|ppid| ppid.parse::<u32>().ok());
        if let Some(ppid) = ppid {
            parents.push((pid, ppid));
        }
    }
    let mut found = vec![root];
    let mut next = 0;
    while next < found.len() {
        let parent = found[next];
        found.extend(parents.iter().filter(|(_, ppid)| *ppid == parent).map(|(pid, _)| *pid));
        next += 1;
    }
    found.split_off(1)
}

fn signal(pid: u32, signal: i32) {
    let Ok(pid) = i32::try_from(pid) else { return };
    // SAFETY: kill(2) has no memory-safety preconditions; a gone process only yields ESRCH.
    unsafe {
        libc::kill(pid, signal);
    }
}

/// The mock's billed calls, without the side calls when `leave_out_auxiliary`.
fn billed(calls: &[Call], leave_out_auxiliary: bool) -> Vec<&Call> {
    calls
        .iter()
        .filter(|call| call.kind.is_billed())
        .filter(|call| !(leave_out_auxiliary && call.kind == CallKind::Auxiliary))
        .collect()
}

/// The billed calls [`billed`] leaves out of `calls`, for the printed figures.
fn left_out_note(calls: &[Call], leave_out_auxiliary: bool) -> String {
    let left_out: Vec<&Call> = calls
        .iter()
        .filter(|call| leave_out_auxiliary && call.kind == CallKind::Auxiliary)
        .collect();
    match left_out.len() {
        0 => String::new(),
        n => format!("; {n} side call(s) left out: {}", describe(&support::sum(&left_out))),
    }
}

fn describe(usage: &Usage) -> String {
    format!(
        "input={} output={} cache_read={} cache_write={} total={} (thought={})",
        usage.input,
        usage.output,
        usage.cache_read,
        usage.cache_write(),
        usage.total(),
        usage.thought
    )
}

/// acpx's `[acpx] tokens: ...` line on stderr.
fn token_line(stderr: &str) -> Option<&str> {
    stderr.lines().find(|line| line.starts_with(TOKENS_PREFIX))
}

/// `label=N` pairs of the token line.
fn parse_tokens(line: &str) -> Result<BTreeMap<String, u64>, String> {
    let rest = line.strip_prefix(TOKENS_PREFIX).ok_or("no `[acpx] tokens:` prefix")?;
    let mut shown = BTreeMap::new();
    for pair in rest.split_whitespace() {
        let (label, value) =
            pair.split_once('=').ok_or_else(|| format!("{pair:?} is no label=N"))?;
        let value = value.parse::<u64>().map_err(|err| format!("{pair:?}: {err}"))?;
        if shown.insert(label.to_owned(), value).is_some() {
            return Err(format!("{label} appears twice"));
        }
    }
    Ok(shown)
}

/// The parsing and quoting the tests above rely on, without running anything.
#[test]
fn acpx_token_line_and_quoting() {
    let stderr = "noise\n[acpx] tokens: input=8000 output=33 cache_read=6000 cache_write=0 total=8033\n[acpx] cost: 0.01 USD\n";
    let line = token_line(stderr).expect("token line");
    let shown = parse_tokens(line).expect("parses");
    let want = [
        ("cache_read", 6000),
        ("cache_write", 0),
        ("input", 8000),
        ("output", 33),
        ("total", 8033),
    ];
    assert_eq!(shown, want.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect());
    assert!(parse_tokens("[acpx] tokens: input=1 input=2").is_err());
    assert!(parse_tokens("[acpx] tokens: input=x").is_err());
    assert_eq!(token_line("[acpx] cost: 1\n"), None);
    assert_eq!(quote("/tmp/a b/it's"), r"'/tmp/a b/it'\''s'");
}
