//! codex-acp 2.x's Codex app server, pointed at the tap as a whole.
//!
//! The TypeScript adapter runs Codex as an app server (`codex app-server`) and hands its
//! per-session settings (`CODEX_CONFIG`) to each thread it starts, but for the ephemeral thread
//! that titles a session (`gpt-5.6-luna`, with a WebSocket warm-up first): that one runs on the
//! app server's own configuration, `config.toml` and the `-c` overrides the adapter starts it
//! with (`model_provider`, `model_providers.<id>`, `hooks`; never `openai_base_url`). Codex reads
//! no base-URL variable, so with the built-in `openai` provider the title thread went past the
//! tap. What the adapter does let a user choose is the program it starts (`CODEX_PATH`):
//! acp-usage names itself there, with [`VAR`] saying what to run, and started so it execs that
//! program (the Codex the adapter would have run, or the user's `CODEX_PATH`) with
//! `-c openai_base_url=<tap>` right after `app-server`, `CODEX_PATH` as the user had it. Codex
//! itself then runs as it would, pointed like the zed adapter's Codex; nothing is written. When
//! the Codex the adapter would run cannot be found (an `npx` start), nothing is set, and the
//! title thread goes where it went.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::{OPENAI, Settings, openai_route};
use crate::agents::found;
use crate::sources::tap::point::{Env, Pointing, Resolved};

/// The variable that makes acp-usage the adapter's Codex: what to run, as [`Exec`]'s JSON.
pub const VAR: &str = "ACP_USAGE_CODEX_APP_SERVER";

/// The TypeScript adapter's package, as npm lays it out.
const SCOPE: &str = "@agentclientprotocol";
const PACKAGE: &str = "codex-acp";

/// What acp-usage runs in the adapter's Codex's place.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Exec {
    /// The program and its first arguments: Node and Codex's `bin/codex.js`, or the user's
    /// `CODEX_PATH`.
    program: Vec<String>,
    /// The user's own `CODEX_PATH`, put back for Codex and what it runs.
    codex_path: Option<String>,
    /// Overrides for the app server (`openai_base_url="…"`), each after a `-c`.
    config: Vec<String>,
}

/// The agent's command, as far as the TypeScript adapter goes.
#[derive(Debug, PartialEq, Eq)]
enum Adapter {
    /// Not the TypeScript adapter, as far as the command tells.
    Other,
    /// The TypeScript adapter, with the Codex it runs when `CODEX_PATH` is not set (Node and
    /// `bin/codex.js`), when that was found.
    TypeScript(Option<Vec<String>>),
}

/// Points the TypeScript adapter's app server at the tap, when Codex's built-in provider is in
/// use and the adapter's Codex is found (see the module's documentation).
pub(super) fn point(p: &mut Pointing, settings: &Settings, command: &[String], env: &Env) {
    if !cfg!(unix) || !settings.builtin() {
        return;
    }
    let path = (env.var)("PATH");
    let bundled = match adapter(command, path.as_deref().map(OsStr::new)) {
        Adapter::Other => return,
        Adapter::TypeScript(bundled) => bundled,
    };
    let user_path = env.set("CODEX_PATH");
    let program = match (&user_path, bundled) {
        (Some(user), _) => vec![user.clone()],
        (None, Some(bundled)) => bundled,
        (None, None) => {
            p.warnings.push(
                "codex-acp's own Codex was not found (an npx start?): its title thread goes where \
                 config.toml says, past the tap"
                    .to_owned(),
            );
            return;
        }
    };
    let Ok(me) = std::env::current_exe() else { return };
    // The app server's own `openai_base_url` is `config.toml`'s (the adapter passes the one
    // in `CODEX_CONFIG` to its threads only): where the title thread's calls would have gone.
    let base = settings.file("openai_base_url");
    let upstream = base.as_deref().unwrap_or(OPENAI.default).trim_end_matches('/');
    let same = p.routes.iter().any(|r| r.name == "codex-openai" && r.upstream == upstream);
    let route =
        openai_route(p, if same { "codex-openai" } else { "codex-openai-server" }, base.as_deref());
    let me = me.display().to_string();
    p.finish.push(Arc::new(move |base_url, out: &mut Resolved| {
        let exec = Exec {
            program: program.clone(),
            codex_path: user_path.clone(),
            config: vec![format!("openai_base_url=\"{}\"", base_url(&route))],
        };
        let Ok(json) = serde_json::to_string(&exec) else { return };
        out.env.push(("CODEX_PATH".into(), me.clone()));
        out.env.push((VAR.into(), json));
    }));
}

/// Whether `command` starts the TypeScript adapter, and the Codex it runs: Node with
/// `@openai/codex/bin/codex.js`, resolved from the adapter's script as Node resolves it.
fn adapter(command: &[String], path: Option<&OsStr>) -> Adapter {
    let mentioned = command.iter().any(|a| a.contains(&format!("{SCOPE}/{PACKAGE}")));
    let found = |name: &str| -> Option<PathBuf> {
        if name.contains('/') {
            Some(PathBuf::from(name)).filter(|p| p.is_file())
        } else {
            found::on_path(path?, name, |_| true)
        }
    };
    let Some(first) = command.first().and_then(|p| found(p)) else {
        return if mentioned { Adapter::TypeScript(None) } else { Adapter::Other };
    };
    // `node …/dist/index.js`, or the script itself (npm's `bin` link, `#!/usr/bin/env node`).
    let by_node = first.file_name().is_some_and(|n| n == "node");
    let script = if by_node { command.get(1).map(PathBuf::from) } else { Some(first.clone()) };
    let Some(package) = script.and_then(|s| std::fs::canonicalize(s).ok()).and_then(|s| {
        s.ancestors()
            .find(|d| {
                d.file_name().is_some_and(|n| n == PACKAGE)
                    && d.parent().and_then(Path::file_name).is_some_and(|n| n == SCOPE)
            })
            .map(Path::to_path_buf)
    }) else {
        return if mentioned { Adapter::TypeScript(None) } else { Adapter::Other };
    };
    let codex = package
        .ancestors()
        .filter(|d| d.file_name().is_none_or(|n| n != "node_modules"))
        .map(|d| d.join("node_modules/@openai/codex/bin/codex.js"))
        .find(|p| p.is_file());
    let node = if by_node { Some(first) } else { found("node") };
    Adapter::TypeScript(match (node, codex) {
        (Some(node), Some(codex)) => {
            Some(vec![node.display().to_string(), codex.display().to_string()])
        }
        _ => None,
    })
}

/// acp-usage started as the adapter's Codex (`spec` is [`VAR`]'s value): runs the Codex it
/// names with the app server's overrides, and never returns unless that cannot start.
pub fn run(spec: &OsStr) -> std::process::ExitCode {
    let exec: Exec = match spec.to_str().and_then(|s| serde_json::from_str(s).ok()) {
        Some(exec) => exec,
        None => {
            eprintln!("acp-usage: {VAR} is not what acp-usage sets; Codex cannot be started");
            return std::process::ExitCode::from(127);
        }
    };
    let Some((program, first)) = exec.program.split_first() else {
        return std::process::ExitCode::from(127);
    };
    let mut args: Vec<std::ffi::OsString> = first.iter().map(Into::into).collect();
    let mut given = std::env::args_os().skip(1);
    if let Some(subcommand) = given.next() {
        let app_server = subcommand == "app-server";
        args.push(subcommand);
        if app_server {
            for config in &exec.config {
                args.push("-c".into());
                args.push(config.into());
            }
        }
    }
    args.extend(given);
    let mut cmd = std::process::Command::new(program);
    cmd.args(&args).env_remove(VAR);
    match &exec.codex_path {
        Some(user) => cmd.env("CODEX_PATH", user),
        None => cmd.env_remove("CODEX_PATH"),
    };
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt as _;
        let err = cmd.exec();
        eprintln!("acp-usage: could not start Codex ({program}): {err}");
        std::process::ExitCode::from(127)
    }
    #[cfg(not(unix))]
    match cmd.status() {
        Ok(status) => std::process::ExitCode::from(status.code().unwrap_or(1) as u8),
        Err(err) => {
            eprintln!("acp-usage: could not start Codex ({program}): {err}");
            std::process::ExitCode::from(127)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{executable, scratch};

    /// npm's layout: the adapter's package, its `bin` link, Codex hoisted beside it, and Node.
    fn installed(root: &Path) -> (PathBuf, PathBuf, PathBuf) {
        let modules = root.join("lib/node_modules");
        let script = modules.join("@agentclientprotocol/codex-acp/dist/index.js");
        executable(&script);
        let codex = modules.join("@openai/codex/bin/codex.js");
        executable(&codex);
        let bin = root.join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        #[cfg(unix)]
        std::os::unix::fs::symlink(&script, bin.join("codex-acp")).unwrap();
        executable(&bin.join("node"));
        (bin, script, codex)
    }

    #[test]
    fn finds_the_codex_the_adapter_runs_through_its_bin_link_or_node() {
        let root = scratch("codex-app-server", "finds");
        let (bin, script, codex) = installed(&root);
        let path = bin.as_os_str();
        let node = bin.join("node").display().to_string();
        let want = Adapter::TypeScript(Some(vec![node.clone(), codex.display().to_string()]));
        assert_eq!(adapter(&["codex-acp".into()], Some(path)), want);
        let by_node = [bin.join("node").display().to_string(), script.display().to_string()];
        assert_eq!(adapter(&by_node, Some(path)), want);
        // A nested copy of Codex in the adapter's own node_modules wins, as Node resolves it.
        let nested = script.parent().unwrap().parent().unwrap();
        let nested = nested.join("node_modules/@openai/codex/bin/codex.js");
        executable(&nested);
        assert_eq!(
            adapter(&["codex-acp".into()], Some(path)),
            Adapter::TypeScript(Some(vec![node, nested.display().to_string()]))
        );
        // npx: the adapter, but no file to find Codex from; another program: not the adapter.
        let npx = ["npx".to_owned(), "-y".to_owned(), "@agentclientprotocol/codex-acp".to_owned()];
        assert_eq!(adapter(&npx, Some(path)), Adapter::TypeScript(None));
        executable(&bin.join("other-acp"));
        assert_eq!(adapter(&["other-acp".into()], Some(path)), Adapter::Other);
        let _ = std::fs::remove_dir_all(&root);
    }

    #[cfg(unix)]
    #[test]
    fn the_app_server_goes_through_the_tap_to_where_config_toml_sends_it() {
        let root = scratch("codex-app-server", "points");
        let (bin, _, codex) = installed(&root);
        let path = bin.display().to_string();
        let profile = crate::agents::Profile::named("codex").unwrap();
        let command = ["codex-acp".to_owned()];
        let config = |text: &'static str| {
            move |p: &Path| (p == Path::new("/h/config.toml")).then(|| text.to_owned())
        };
        let point = |vars: Vec<(&'static str, String)>, read: &dyn Fn(&Path) -> Option<String>| {
            let var = move |k: &str| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.clone());
            let p = crate::agents::point_command(profile, &command, &var, read);
            let resolved = p.resolve(|route| format!("http://tap/{route}"));
            let env =
                |name: &str| resolved.env.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
            let exec = env(VAR).map(|j| serde_json::from_str::<Exec>(&j).unwrap());
            (p, env("CODEX_PATH"), exec)
        };
        let home = ("CODEX_HOME", "/h".to_owned());

        // config.toml's `openai_base_url`, which the app server (and so the title thread) reads,
        // is the route's upstream; the same route as the threads' when CODEX_CONFIG says nothing.
        let read = config("openai_base_url = \"http://127.0.0.1:8/v1\"\n");
        let (p, codex_path, exec) = point(vec![home.clone(), ("PATH", path.clone())], &read);
        assert_eq!(codex_path, Some(std::env::current_exe().unwrap().display().to_string()));
        let exec = exec.unwrap();
        let node = bin.join("node").display().to_string();
        assert_eq!(exec.program, vec![node, codex.display().to_string()]);
        assert_eq!(exec.codex_path, None);
        assert_eq!(exec.config, vec!["openai_base_url=\"http://tap/codex-openai\""]);
        let upstreams: Vec<(&str, &str)> =
            p.routes.iter().map(|r| (r.name.as_str(), r.upstream.as_str())).collect();
        assert_eq!(upstreams, [("codex-openai", "http://127.0.0.1:8/v1")]);

        // A base URL in CODEX_CONFIG reaches the threads only: the app server keeps its own.
        let overrides = r#"{"openai_base_url":"http://127.0.0.1:9/v1"}"#.to_owned();
        let vars = vec![home.clone(), ("PATH", path.clone()), ("CODEX_CONFIG", overrides)];
        let (p, _, exec) = point(vars, &no_file);
        assert_eq!(
            exec.unwrap().config,
            vec!["openai_base_url=\"http://tap/codex-openai-server\""]
        );
        let server = p.routes.iter().find(|r| r.name == "codex-openai-server").unwrap();
        assert_eq!(server.upstream, "https://api.openai.com/v1");
        // With no base URL of its own, a ChatGPT login's calls go to ChatGPT's backend.
        assert!(p.alternates.iter().any(|a| a.route == "codex-openai-server"));

        // The user's CODEX_PATH is what runs, and is put back for it.
        let vars = vec![home.clone(), ("PATH", path.clone()), ("CODEX_PATH", "/my/codex".into())];
        let exec = point(vars, &no_file).2.unwrap();
        assert_eq!(
            (exec.program, exec.codex_path),
            (vec!["/my/codex".to_owned()], Some("/my/codex".to_owned()))
        );

        // Another provider in use: its definition reaches the app server already.
        let read =
            config("model_provider = \"m\"\n[model_providers.m]\nbase_url = \"http://x/v1\"\n");
        assert_eq!(point(vec![home, ("PATH", path)], &read).2, None);
        let _ = std::fs::remove_dir_all(&root);
    }

    fn no_file(_: &Path) -> Option<String> {
        None
    }

    #[test]
    fn the_spec_round_trips() {
        let exec = Exec {
            program: vec!["/n/node".into(), "/m/codex.js".into()],
            codex_path: None,
            config: vec!["openai_base_url=\"http://127.0.0.1:1/s/codex-openai\"".into()],
        };
        let json = serde_json::to_string(&exec).unwrap();
        assert!(json.contains("\"codexPath\":null"), "{json}");
        assert_eq!(serde_json::from_str::<Exec>(&json).unwrap(), exec);
    }
}
