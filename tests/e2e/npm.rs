//! The npm packages as a user installs them (`cargo xtask dist npm` on the debug binary, then
//! `npm install` of both tarballs with Node 22, offline, no Rust toolchain on PATH; see
//! `acp_usage_tests::npm`).
//!
//! Guarantees checked:
//! - `npx acp-usage --version` and `npx acp-usage demo` run the packaged binary;
//! - an ACP session through `npx acp-usage -- <agent>` gets acp-usage's figures;
//! - the launcher exits with the binary's exit code, and dies of the signal that killed the
//!   binary (SIGKILL is never a success);
//! - SIGTERM to the launcher in a session leaves no process of its tree (binary, agent, the
//!   agent's own child) behind;
//! - without the platform package, or on a platform without one, the launcher says so in one
//!   line and exits 1; `ACP_USAGE_BINARY` runs a binary of the user's choice instead.

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};

use acp_usage_tests::client::{AcpClient, ClientOptions, CommandSpec};
use acp_usage_tests::npm::{self, Installed, NpmEnv, VERSION, installed, packed};
use acp_usage_tests::process_tree;
use acp_usage_tests::relay::relay_binary;
use acp_usage_tests::scratch::Scratch;
use serde_json::Value;

use crate::support;

const FAKE_AGENT: &str = env!("CARGO_BIN_EXE_fake-acp-agent");
/// The fake agent's own per-turn usage (a copy of its constant).
const AGENT_USAGE: &str = r#"{"totalTokens":1300,"inputTokens":1200,"outputTokens":100}"#;

fn install() -> &'static Installed {
    installed().unwrap_or_else(|err| panic!("installing the npm packages: {err:#}"))
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The launcher (or npx) in front of `agent`, as an ACP peer for [`AcpClient`].
fn acp_spec(
    installed: &Installed,
    scratch: &Scratch,
    program: PathBuf,
    args: &[&str],
) -> CommandSpec {
    CommandSpec {
        program,
        args: args.iter().map(|arg| (*arg).to_owned()).collect(),
        env: installed.env.vars(),
        cwd: installed.project.clone(),
        stderr_file: scratch.path("launcher.stderr"),
    }
}

#[test]
fn npm_package_runs_version_demo_and_a_session_through_npx() {
    let installed = install();
    let env = &installed.env;
    let node = env.command("node", &installed.project).arg("--version").output().expect("node");
    assert!(text(&node.stdout).starts_with("v22."), "npm's node is not Node 22: {node:?}");
    assert!(installed.platform_binary().is_file(), "npm did not unpack the platform package");
    let npx = env.bin().join("npx");

    let version = env.command(&npx, &installed.project).args(["acp-usage", "--version"]).output();
    let version = version.expect("npx acp-usage --version");
    assert!(version.status.success(), "npx acp-usage --version: {version:?}");
    assert_eq!(text(&version.stdout).trim(), format!("acp-usage {VERSION}"));

    let demo = env.command(&npx, &installed.project).args(["acp-usage", "demo"]).output();
    let demo = demo.expect("npx acp-usage demo");
    let out = text(&demo.stdout);
    assert!(demo.status.success(), "npx acp-usage demo: {demo:?}");
    // The demo's closing figures (its script is fixed).
    assert!(
        out.contains("4 turns, 80,964 tokens") && out.contains("session cost $0.1007"),
        "the demo's summary is missing:\n{out}"
    );

    let scratch = Scratch::new("npm-session").expect("scratch");
    let spec = acp_spec(installed, &scratch, npx, &["acp-usage", "--", FAKE_AGENT]);
    let mut client = AcpClient::spawn(&spec, ClientOptions::default()).expect("npx acp-usage");
    client.timeout = Duration::from_secs(30);
    let init = client.initialize().expect("initialize through npx");
    assert!(init["protocolVersion"].is_number(), "initialize result: {init}");
    client.new_session(&scratch.work()).expect("session/new");
    let result = client.prompt("fake-session-1", "Hello").expect("session/prompt");
    let usage = &result["usage"];
    assert_eq!(usage["totalTokens"], 1300, "per-turn usage: {result}");
    let agent_usage: Value = serde_json::from_str(AGENT_USAGE).expect("agent usage");
    assert_eq!(usage["_meta"]["acpUsage"]["agent"], agent_usage, "acp-usage's usage: {result}");
    let update = support::usage_update_before_result(&client).expect("a usage_update before it");
    assert!(update["size"].as_u64().is_some_and(|size| size > 0), "usage_update: {update}");
    let status = client.close_stdin_and_wait(Duration::from_secs(10));
    assert!(status.is_some_and(|s| s.success()), "npx after the editor closed: {status:?}");
}

fn wait_status(child: &mut std::process::Child, timeout: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn npm_launcher_exits_with_the_binarys_status() {
    let installed = install();
    let env = &installed.env;
    let agent = ["--", "sh", "-c", "exit 7"];
    let run = |program: PathBuf, args: &[&str]| {
        let output = env.command(&program, &installed.project).args(args).output();
        output.unwrap_or_else(|err| panic!("running {}: {err}", program.display())).status
    };
    let direct = run(installed.platform_binary(), &agent);
    assert_eq!(direct.code(), Some(7), "acp-usage passes its agent's exit code on");
    assert_eq!(run(installed.launcher(), &agent).code(), direct.code(), "the launcher");
    let npx_args: Vec<&str> = ["acp-usage"].into_iter().chain(agent).collect();
    assert_eq!(run(env.bin().join("npx"), &npx_args).code(), direct.code(), "through npx");

    // The binary killed outright: its agent (`cat`) waits on stdin, which stays open.
    let mut launcher = env
        .command(installed.launcher(), &installed.project)
        .args(["--", "cat"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("the launcher");
    let pid = launcher.id() as i32;
    let tree = process_tree::wait_for_tree(pid, Duration::from_secs(10), |procs| {
        procs.iter().any(|proc| proc.comm == "cat")
    });
    let tree = tree.unwrap_or_else(|procs| panic!("the agent never started: {procs:#?}"));
    let _cleanup = process_tree::KillOnDrop(tree.clone());
    let binary = tree
        .iter()
        .find(|proc| proc.ppid == pid && proc.comm == "acp-usage")
        .unwrap_or_else(|| panic!("no acp-usage below the launcher: {tree:#?}"));
    // SAFETY: kill(2) has no memory-safety preconditions.
    unsafe { libc::kill(binary.pid, libc::SIGKILL) };
    let status = wait_status(&mut launcher, Duration::from_secs(10)).expect("the launcher ends");
    assert_eq!(status.signal(), Some(libc::SIGKILL), "the launcher must die of SIGKILL: {status}");
    let left = process_tree::wait_all_gone(&tree, Duration::from_secs(5));
    assert!(left.is_empty(), "left running: {left:#?}");
}

#[test]
fn npm_launcher_sigterm_leaves_no_process_behind() {
    let installed = install();
    let scratch = Scratch::new("npm-sigterm").expect("scratch");
    // An agent with a child of its own: `sleep` forked by sh, which then becomes the fake agent.
    let agent = format!("sleep 600 & exec {FAKE_AGENT}");
    let spec =
        acp_spec(installed, &scratch, installed.launcher(), &["--", "sh", "-c", agent.as_str()]);
    let mut client = AcpClient::spawn(&spec, ClientOptions::default()).expect("the launcher");
    client.timeout = Duration::from_secs(30);
    client.initialize().expect("initialize");
    client.new_session(&scratch.work()).expect("session/new");
    let pid = client.pid() as i32;
    let tree = process_tree::wait_for_tree(pid, Duration::from_secs(10), |procs| {
        procs.iter().any(|proc| proc.comm == "sleep")
    });
    let tree = tree.unwrap_or_else(|procs| panic!("the agent's child never started: {procs:#?}"));
    let _cleanup = process_tree::KillOnDrop(tree.clone());
    let comms: Vec<&str> = tree.iter().map(|proc| proc.comm.as_str()).collect();
    assert_eq!(comms.len(), 5, "launcher, acp-usage, its guard, agent, its child: {tree:#?}");
    // The binary reads and writes the very pipes the client gave the launcher: no byte of the
    // session passes through Node.
    let binary = tree.iter().find(|proc| proc.ppid == pid).expect("the binary");
    for fd in [0, 1] {
        let link = |pid: i32| std::fs::read_link(format!("/proc/{pid}/fd/{fd}")).expect("fd");
        assert_eq!(link(binary.pid), link(pid), "fd {fd} of the binary and of the launcher");
        assert!(link(pid).to_string_lossy().starts_with("pipe:"), "fd {fd}: {:?}", link(pid));
    }
    // The launcher runs on Node 22: `#!/usr/bin/env node` found it first on PATH.
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).expect("the launcher's exe");
    let node22 = acp_usage_tests::agents::node_bin_dir().join("node").canonicalize().expect("node");
    assert_eq!(exe, node22, "the launcher's node");

    let signalled = Instant::now();
    // SAFETY: kill(2) has no memory-safety preconditions.
    unsafe { libc::kill(pid, libc::SIGTERM) };
    let status = client.wait_exit(Duration::from_secs(5));
    let left = process_tree::wait_all_gone(&tree, Duration::from_secs(5));
    assert!(left.is_empty(), "alive {:?} after SIGTERM: {left:#?}", signalled.elapsed());
    // acp-usage ends its agent (SIGTERM to its group) and exits 128 + 15, its agent's fate.
    let status = status.expect("the launcher exited");
    assert_eq!(status.code(), Some(128 + libc::SIGTERM), "the launcher's status: {status}");
}

/// Runs the launcher at `launcher` with `node_args` before it, returns (status, stderr).
fn run_launcher(
    env: &NpmEnv,
    project: &Path,
    node_args: &[&str],
    launcher: &Path,
) -> (ExitStatus, String) {
    let output = env
        .command(env.bin().join("node"), project)
        .args(node_args)
        .arg(launcher)
        .arg("--version")
        .output()
        .expect("node");
    (output.status, text(&output.stderr))
}

#[test]
fn npm_launcher_without_its_platform_package_says_so_in_one_line() {
    let tarballs = packed().unwrap_or_else(|err| panic!("packing: {err:#}"));
    let scratch = Scratch::new("npm-missing").expect("scratch");
    let env = NpmEnv::new(&scratch.path("env")).expect("npm environment");
    let project = scratch.path("project");
    // Only the main package, offline: npm skips every platform package, as it does when the
    // registry lacks one.
    env.install(&project, &[&tarballs.main]).expect("npm install of the main package alone");
    assert!(!project.join("node_modules").join(npm::platform_package()).exists());
    let launcher = project.join("node_modules/acp-usage/bin/acp-usage.js");

    let (status, stderr) = run_launcher(&env, &project, &[], &launcher);
    assert_eq!(status.code(), Some(1), "stderr: {stderr}");
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    let package = format!("{}@{VERSION}", npm::platform_package());
    assert!(stderr.starts_with("acp-usage: "), "{stderr}");
    assert!(stderr.contains(&format!("the package {package}")), "{stderr}");
    assert!(stderr.contains(&format!("`npm install {package}`")), "{stderr}");
    assert!(stderr.contains("ACP_USAGE_BINARY"), "{stderr}");
    let npx =
        env.command(env.bin().join("npx"), &project).args(["acp-usage", "--version"]).output();
    let npx = npx.expect("npx");
    assert_eq!(npx.status.code(), Some(1), "npx: {npx:?}");
    assert_eq!(text(&npx.stderr), stderr, "npx adds nothing");

    // A platform with no package at all: Node told it runs on another CPU.
    let preload = scratch.path("other-cpu.js");
    std::fs::write(&preload, "Object.defineProperty(process, 'arch', { value: 'riscv64' });\n")
        .expect("preload");
    let preload = preload.display().to_string();
    let (status, stderr) = run_launcher(&env, &project, &["--require", &preload], &launcher);
    assert_eq!(status.code(), Some(1), "stderr: {stderr}");
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    assert!(stderr.contains("there is no prebuilt binary for linux-riscv64"), "{stderr}");
    assert!(stderr.contains("linux-x64, linux-arm64, darwin-x64"), "{stderr}");

    // ACP_USAGE_BINARY: the user's own binary.
    let binary = relay_binary().expect("the debug binary");
    let output = env
        .command(&launcher, &project)
        .arg("--version")
        .env("ACP_USAGE_BINARY", &binary)
        .output()
        .expect("launcher");
    assert!(output.status.success(), "{output:?}");
    assert_eq!(text(&output.stdout).trim(), format!("acp-usage {VERSION}"));
}
