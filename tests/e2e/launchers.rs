//! Agents as users launch them: through launchers and wrappers, recognised (or not) before they
//! start, since the tap must be pointed at an agent before its first call.
//!
//! - Mistral Vibe, a Python agent, launched by `uvx --from mistral-vibe==3.0.3 vibe-acp` (uv from
//!   `.ci/install-uv.sh`, offline from the cache it filled): recognised from the command, pointed
//!   at the tap before it starts, and every figure equals what the mock served, from the tap.
//! - The fake agent behind a wrapper script no profile knows, calling itself Claude's adapter in
//!   `agentInfo`: recognised only from `initialize`, too late for the tap, which one warning at
//!   the default log level says, with `--profile claude` as the fix; none with `--profile
//!   claude` or with the tap turned off.
//! - The same wrapper with `--tap on`: an agent without a profile gets the well-known base-URL
//!   variables pointed at the tap, which a warning names; its call (Anthropic's Messages, to the
//!   user's `ANTHROPIC_BASE_URL`) is counted from the tap.
//! - codex-acp started so that acp-usage, as its `CODEX_PATH`, finds no Node script above it to
//!   resolve the adapter's Codex from: no Codex is started, and one warning says so. (The
//!   launches where it is found, `npx` and `npm exec` among them, are in `codex_ts.rs`.)
//! - acp-usage as the `CODEX_PATH` of a Node script standing in for the adapter: it runs the
//!   Codex Node resolves from that script, found in a `node_modules` above it, or by Node itself
//!   when only Node knows where (a relative `NODE_PATH`).

use std::path::{Path, PathBuf};

use acp_usage::sinks::ledger::Store;
use acp_usage_tests::agents::{Agent, agents_cache, vibe_venv};
use acp_usage_tests::client::{AcpClient, ClientOptions, CommandSpec};
use acp_usage_tests::lab::Lab;
use acp_usage_tests::mock_llm::{CallKind, MockLlm, Script};
use acp_usage_tests::relay::relay_binary;
use acp_usage_tests::scratch::Scratch;

use crate::flows::{self, Expect};
use crate::support::{self, Known};

/// Mistral Vibe behind the tap (as `vibe.rs` expects it tapped).
const VIBE_TAPPED: Expect = Expect {
    agent: Agent::Vibe,
    size: 262_144,
    size_on_new: Some(262_144),
    known: Known::Everything,
    turn_exact: true,
    resume: true,
    unrecorded_auxiliary: false,
    auxiliary_in_part: false,
    tap: true,
};

/// Where `.ci/install-uv.sh` put uv (`uvx`), and the overrides and cache it runs Vibe with.
fn uv_dir() -> PathBuf {
    agents_cache().join("venv-uv/bin")
}

#[test]
fn vibe_launched_by_uvx_is_recognised_and_tapped() {
    let uvx = uv_dir().join("uvx");
    assert!(
        uvx.is_file(),
        "{} is missing: run .ci/install-agents.sh (install-uv.sh)",
        uvx.display()
    );
    let mut lab = Lab::new(Agent::Vibe, support::script(Agent::Vibe)).expect("lab");
    // `uvx` from PATH, as a user's editor entry has it.
    lab.spec.program = "uvx".into();
    lab.spec.args = ["--from", "mistral-vibe==3.0.3", "vibe-acp"].map(String::from).to_vec();
    let path = lab.spec.env_var("PATH").unwrap_or_default().to_owned();
    lab.spec.set_env("PATH", format!("{}:{path}", uv_dir().display()));
    let cache = agents_cache();
    lab.spec.set_env("UV_OFFLINE", "1");
    lab.spec.set_env("UV_NO_CONFIG", "1");
    lab.spec.set_env("UV_CACHE_DIR", cache.join("uv-cache").display().to_string());
    lab.spec.set_env("UV_OVERRIDE", cache.join("uv-vibe-overrides.txt").display().to_string());
    lab.spec.set_env("UV_PYTHON", vibe_venv().join("bin/python3").display().to_string());
    lab.spec.set_env("UV_PYTHON_DOWNLOADS", "never");
    flows::relay_turns_then(VIBE_TAPPED, &lab, &[], 0);
    let billed: Vec<_> = lab.mock.calls().into_iter().filter(|c| c.kind.is_billed()).collect();
    assert!(
        billed.iter().any(|c| c.kind == CallKind::Auxiliary),
        "Vibe's title call, which only the tap sees: {billed:#?}"
    );
    let log = relay_logs(lab.scratch.root());
    assert!(log.contains("tap: listening"), "the tap was not started:\n{log}");
    assert!(!log.contains("--profile"), "Vibe was recognised only from initialize:\n{log}");
}

/// Every relay's stderr the lab kept, one after the other.
fn relay_logs(root: &Path) -> String {
    let mut files: Vec<PathBuf> = std::fs::read_dir(root)
        .expect("the scratch directory")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().contains("-relay-"))
        .collect();
    files.sort();
    files.iter().map(|f| std::fs::read_to_string(f).unwrap_or_default()).collect()
}

/// The wrapper script of [`wrapped_fake`]: its file name, and shell lines it runs before it
/// execs the fake agent.
struct Wrapper<'a> {
    name: &'a str,
    before: &'a str,
}

/// A wrapper whose name no profile knows.
const UNKNOWN: Wrapper = Wrapper { name: "unknown-acp-agent", before: "" };

/// `acp-usage <relay_args> -- <wrapper>`: the fake agent behind a wrapper script, with `env`
/// added, at the default log level; the ledger in `scratch`.
fn wrapped_fake(
    scratch: &Scratch,
    wrapper: &Wrapper,
    relay_args: &[&str],
    env: &[(&str, String)],
) -> AcpClient {
    let Wrapper { name, before } = wrapper;
    let wrapper = scratch.path(name);
    let fake = env!("CARGO_BIN_EXE_fake-acp-agent");
    std::fs::write(&wrapper, format!("#!/bin/sh\n{before}exec '{fake}' \"$@\"\n"))
        .expect("the wrapper");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let mut vars = vec![
        ("PATH".to_owned(), std::env::var("PATH").unwrap_or_default()),
        ("HOME".to_owned(), scratch.home().display().to_string()),
        ("ACP_USAGE_LEDGER".to_owned(), scratch.path("ledger.sqlite").display().to_string()),
    ];
    vars.extend(env.iter().map(|(k, v)| ((*k).to_owned(), v.clone())));
    // Numbered by the stderr files there so far (never removed), not by every entry: the
    // ledger's -wal and -shm files come and go, and a number used twice would hide a run's log.
    let n = stderr_files(scratch).len();
    let spec = CommandSpec {
        program: wrapper,
        args: Vec::new(),
        env: vars,
        cwd: scratch.work(),
        stderr_file: scratch.path(&format!("relay-{n}.stderr")),
    };
    let relayed = spec.wrapped(&relay_binary().expect("acp-usage"), relay_args);
    AcpClient::spawn(&relayed, ClientOptions::default()).expect("the relay")
}

/// Runs the fake agent behind a wrapper no profile knows through `initialize` (twice: the
/// warning is said once) and `session/new`; the relay's stderr.
fn run_wrapped(scratch: &Scratch, relay_args: &[&str], env: &[(&str, String)]) -> String {
    run_wrapper(scratch, &UNKNOWN, relay_args, env)
}

/// [`run_wrapped`] behind `wrapper`.
fn run_wrapper(
    scratch: &Scratch,
    wrapper: &Wrapper,
    relay_args: &[&str],
    env: &[(&str, String)],
) -> String {
    let before: Vec<PathBuf> = stderr_files(scratch);
    let mut client = wrapped_fake(scratch, wrapper, relay_args, env);
    for _ in 0..2 {
        client.initialize().expect("initialize");
    }
    client.new_session(&scratch.work()).expect("session/new");
    let status = client.shutdown().expect("the relay exits");
    assert!(status.success(), "the relay exited with {status}");
    let file = stderr_files(scratch).into_iter().find(|f| !before.contains(f)).expect("stderr");
    std::fs::read_to_string(file).unwrap_or_default()
}

fn stderr_files(scratch: &Scratch) -> Vec<PathBuf> {
    let entries = std::fs::read_dir(scratch.root()).expect("scratch").flatten();
    entries.map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "stderr")).collect()
}

#[test]
fn an_agent_recognised_only_from_initialize_is_told_to_name_its_profile() {
    let scratch = Scratch::new("launch-late").expect("scratch");
    let mock = MockLlm::start(Script::new(Vec::new())).expect("the mock");
    let env = [
        ("FAKE_AGENT_NAME", "@agentclientprotocol/claude-agent-acp".to_owned()),
        ("ANTHROPIC_BASE_URL", mock.url()),
    ];
    let warned = |log: &str| {
        log.lines().filter(|l| l.contains("WARN") && l.contains("--profile claude")).count()
    };
    let log = run_wrapped(&scratch, &[], &env);
    assert_eq!(warned(&log), 1, "one warning naming `--profile claude`:\n{log}");
    assert!(log.contains("was not started"), "{log}");
    // Named, the profile points the tap from the start: nothing to say. Nor with the tap off.
    for args in [&["--profile", "claude"][..], &["--tap", "off"][..]] {
        let log = run_wrapped(&scratch, args, &env);
        assert_eq!(warned(&log), 0, "{args:?}:\n{log}");
    }
    // An agent whose name names no profile is not told anything.
    let log = run_wrapped(&scratch, &[], &[("ANTHROPIC_BASE_URL", mock.url())]);
    assert!(!log.contains("--profile"), "{log}");
}

#[test]
fn tap_on_taps_an_agent_without_a_profile() {
    let scratch = Scratch::new("launch-tap-on").expect("scratch");
    let mock = MockLlm::start(Script::new(Vec::new())).expect("the mock");
    let env = [("ANTHROPIC_BASE_URL", mock.url()), ("FAKE_AGENT_CALL_AT_EXIT", "1".to_owned())];
    let log = run_wrapped(&scratch, &["--tap", "on"], &env);
    let notice: Vec<&str> = log.lines().filter(|l| l.contains("WARN")).collect();
    assert!(
        notice.len() == 1
            && ["ANTHROPIC_BASE_URL", "OPENAI_BASE_URL", "GOOGLE_GEMINI_BASE_URL"]
                .iter()
                .all(|var| notice[0].contains(var)),
        "one warning naming the variables pointed:\n{log}"
    );
    let served = mock.calls();
    assert_eq!(served.len(), 1, "the agent's call reached the user's upstream: {served:#?}");
    let want = support::sum(&[&served[0]]);
    let store = Store::open_read(&scratch.path("ledger.sqlite")).expect("the ledger");
    let rows: Vec<(i64, i64, i64, String)> = store
        .conn()
        .prepare("SELECT input, cache_read, output, source FROM calls")
        .and_then(|mut q| {
            q.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?.collect()
        })
        .expect("the calls");
    assert_eq!(
        rows,
        [(want.input as i64, want.cache_read as i64, want.output as i64, "tap".to_owned())],
        "the call, counted from the tap:\n{log}"
    );
    // Without `--tap on`, the same agent runs untapped (the default for the generic profile).
    let scratch = Scratch::new("launch-tap-default").expect("scratch");
    let log = run_wrapped(&scratch, &[], &env);
    assert!(!log.contains("WARN"), "{log}");
    let store = Store::open_read(&scratch.path("ledger.sqlite")).expect("the ledger");
    let tapped: i64 = store
        .conn()
        .query_row("SELECT COUNT(*) FROM calls WHERE source = 'tap'", [], |r| r.get(0))
        .expect("count");
    assert_eq!(tapped, 0, "{log}");
}

/// codex-acp (TypeScript) started so that no process above the Codex it starts runs a Node
/// script (here a shell script named `codex-acp`, as a compiled adapter would be): acp-usage,
/// its `CODEX_PATH`, cannot tell which Codex the adapter would run. It starts none (exit 127),
/// and the relay says so once, at the default log level, however often the adapter tries.
#[test]
fn codex_acp_whose_codex_cannot_be_found_is_told_once() {
    let scratch = Scratch::new("launch-codex-unfound").expect("scratch");
    let codex_home = scratch.home().join(".codex");
    std::fs::create_dir_all(&codex_home).expect("CODEX_HOME");
    // Codex's built-in provider (no `model_provider`): its app server is pointed.
    std::fs::write(codex_home.join("config.toml"), "model = \"gpt-5.2-codex\"\n").expect("config");
    let status = scratch.path("app-server-status");
    let before = format!(
        "for n in 1 2; do \"$CODEX_PATH\" app-server </dev/null; echo $? >>'{}'; done\n",
        status.display()
    );
    let wrapper = Wrapper { name: "codex-acp", before: &before };
    let env = [("CODEX_HOME", codex_home.display().to_string())];
    let log = run_wrapper(&scratch, &wrapper, &[], &env);
    let statuses = std::fs::read_to_string(&status).unwrap_or_default();
    assert_eq!(statuses, "127\n127\n", "the app server should not have started:\n{log}");
    let warned: Vec<&str> = log.lines().filter(|l| l.contains("WARN")).collect();
    assert!(
        warned.len() == 1 && warned[0].contains("set CODEX_PATH"),
        "one warning saying the adapter's Codex was not found:\n{log}"
    );
}

/// acp-usage run as the `CODEX_PATH` of `script` (a stand-in for codex-acp: Node running it
/// runs `$CODEX_PATH --version`), with `env` and `cwd`: the stand-in's exit status and output.
fn as_codex_path_of(script: &Path, cwd: &Path, env: &[(&str, &str)]) -> (i32, String) {
    let node = acp_usage_tests::agents::node_bin_dir().join("node");
    let spec = r#"{"program":null,"codexPath":null,"config":[],"notice":null}"#;
    let out = std::process::Command::new(node)
        .arg(script)
        .arg("--version")
        .current_dir(cwd)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("CODEX_PATH", relay_binary().expect("acp-usage"))
        .env("ACP_USAGE_CODEX_APP_SERVER", spec)
        .envs(env.iter().copied())
        .output()
        .expect("node runs");
    let text = String::from_utf8_lossy(&out.stdout) + String::from_utf8_lossy(&out.stderr);
    (out.status.code().unwrap_or(-1), text.into_owned())
}

#[test]
fn codex_path_runs_the_codex_node_resolves_from_the_adapters_script() {
    let scratch = Scratch::new("launch-codex-resolved").expect("scratch");
    let stand_in = "const r = require('node:child_process').spawnSync(process.env.CODEX_PATH, \
                    process.argv.slice(2), { stdio: 'inherit' });\nprocess.exit(r.status ?? 1);\n";
    let modules = agents_cache().join("node_modules");
    assert!(modules.join("@openai/codex/bin/codex.js").is_file(), "run .ci/install-agents.sh");
    // In a project whose node_modules holds Codex (a link to the installed package).
    let project = scratch.path("project/node_modules");
    let script = project.join("@agentclientprotocol/codex-acp/dist/index.cjs");
    std::fs::create_dir_all(script.parent().unwrap()).expect("dirs");
    std::fs::write(&script, stand_in).expect("the stand-in");
    std::fs::create_dir_all(project.join("@openai")).expect("dirs");
    std::os::unix::fs::symlink(modules.join("@openai/codex"), project.join("@openai/codex"))
        .expect("link");
    let (status, out) = as_codex_path_of(&script, scratch.root(), &[]);
    assert_eq!((status, out.trim()), (0, "codex-cli 0.166.0"), "found beside the script");
    // Loose, where only a relative NODE_PATH (from the working directory) leads to Codex, which
    // acp-usage does not read: Node resolves it. Without it, Node finds none, as the adapter
    // would not.
    let loose = scratch.path("loose/adapter.cjs");
    std::fs::create_dir_all(loose.parent().unwrap()).expect("dirs");
    std::fs::write(&loose, stand_in).expect("the stand-in");
    let (status, out) = as_codex_path_of(&loose, &agents_cache(), &[("NODE_PATH", "node_modules")]);
    assert_eq!((status, out.trim()), (0, "codex-cli 0.166.0"), "resolved by Node");
    let (status, out) = as_codex_path_of(&loose, &agents_cache(), &[]);
    assert!(
        status != 0 && out.contains("Cannot find module '@openai/codex/bin/codex.js'"),
        "{out}"
    );
}
