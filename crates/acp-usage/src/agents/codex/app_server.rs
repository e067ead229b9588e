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
//! program with `-c openai_base_url=<tap>` right after `app-server`, `CODEX_PATH` as the user
//! had it. Codex itself then runs as it would, pointed like the zed adapter's Codex; nothing is
//! written.
//!
//! The program is the user's `CODEX_PATH`, else the Codex the adapter would have run, found
//! when the adapter starts it ([`adapter`]): whatever launched the adapter (`npx`, `npm exec`,
//! a shell wrapper, Zed's registry), its script is on disk by then. Where there is no `/proc`
//! to read the adapter from, it is looked for before the agent starts, from the command's
//! first word (the adapter's script or its `bin` link), and when it is not there nothing is
//! set. When no process above acp-usage runs a script, one WARN says so through the tap.

mod adapter;

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::{OPENAI, Settings, openai_route};
use crate::agents::{command, found};
use crate::sources::tap::point::{Env, NOTICE_ROUTE, Notice, Pointing, Resolved};

/// The variable that makes acp-usage the adapter's Codex: what to run, as [`Exec`]'s JSON.
pub const VAR: &str = "ACP_USAGE_CODEX_APP_SERVER";

/// The TypeScript adapter's package, its program, and the zed adapter's package (another
/// program of the same name, a Rust one that runs no Codex of its own and reads no
/// `CODEX_PATH`).
const SCOPE: &str = "@agentclientprotocol";
const PACKAGE: &str = "codex-acp";
const TYPESCRIPT: &str = "@agentclientprotocol/codex-acp";
const ZED: &str = "@zed-industries/codex-acp";

/// The notice asked for when the adapter's Codex cannot be found as it starts it.
const NOT_FOUND: &str = "codex-app-server";

/// What acp-usage runs in the adapter's Codex's place.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Exec {
    /// The program and its first arguments: the user's `CODEX_PATH`, or Node and Codex's
    /// `bin/codex.js` found before the agent started; `None`: found from the adapter when it
    /// starts its Codex.
    program: Option<Vec<String>>,
    /// The user's own `CODEX_PATH`, put back for Codex and what it runs.
    codex_path: Option<String>,
    /// Overrides for the app server (`openai_base_url="…"`), each after a `-c`.
    config: Vec<String>,
    /// The tap's URL that logs the WARN when the adapter's Codex cannot be found.
    #[serde(default)]
    notice: Option<String>,
}

/// Points the TypeScript adapter's app server at the tap, when Codex's built-in provider is in
/// use and the command starts that adapter (see the module's documentation).
pub(super) fn point(p: &mut Pointing, settings: &Settings, command: &[String], env: &Env) {
    if !cfg!(unix) || !settings.builtin() {
        return;
    }
    let path = (env.var)("PATH");
    let path = path.as_deref().map(OsStr::new);
    if !starts_typescript_adapter(command, path) {
        return;
    }
    let user_path = env.set("CODEX_PATH");
    let program = match &user_path {
        Some(user) => Some(vec![user.clone()]),
        // Deno runs the adapter from its own cache, with no Node script above acp-usage to
        // resolve Codex from: left as without acp-usage rather than an app server that cannot
        // start.
        None if runs_on_deno(command) => {
            p.warnings.push(
                "codex-acp runs on Deno, whose Codex acp-usage cannot find: its title thread                  goes where config.toml says, past the tap (set CODEX_PATH to tap it)"
                    .to_owned(),
            );
            return;
        }
        // Found as the adapter starts it.
        None if cfg!(target_os = "linux") => None,
        None => match bundled(command, path) {
            Some(bundled) => Some(bundled),
            None => {
                p.warnings.push(
                    "codex-acp's own Codex was not found before it started (no /proc here to \
                     find it from the adapter's process): its title thread goes where \
                     config.toml says, past the tap"
                        .to_owned(),
                );
                return;
            }
        },
    };
    let Ok(me) = std::env::current_exe() else { return };
    // The app server's own `openai_base_url` is `config.toml`'s (the adapter passes the one
    // in `CODEX_CONFIG` to its threads only): where the title thread's calls would have gone.
    let base = settings.file("openai_base_url");
    let upstream = base.as_deref().unwrap_or(OPENAI.default).trim_end_matches('/');
    let same = p.routes.iter().any(|r| r.name == "codex-openai" && r.upstream == upstream);
    let route =
        openai_route(p, if same { "codex-openai" } else { "codex-openai-server" }, base.as_deref());
    let found_later = program.is_none();
    if found_later {
        p.notices.push(Notice {
            name: NOT_FOUND.to_owned(),
            text: "codex-acp started its Codex app server from a process that runs no Node \
                   script acp-usage can read, so the Codex it would run is not known and the \
                   app server was not started; set CODEX_PATH to the Codex to run \
                   (`…/node_modules/@openai/codex/bin/codex.js`), or use `--tap off`"
                .to_owned(),
        });
    }
    let me = me.display().to_string();
    p.finish.push(Arc::new(move |base_url, out: &mut Resolved| {
        let exec = Exec {
            program: program.clone(),
            codex_path: user_path.clone(),
            config: vec![format!("openai_base_url=\"{}\"", base_url(&route))],
            notice: found_later.then(|| format!("{}/{NOT_FOUND}", base_url(NOTICE_ROUTE))),
        };
        let Ok(json) = serde_json::to_string(&exec) else { return };
        out.env.push(("CODEX_PATH".into(), me.clone()));
        out.env.push((VAR.into(), json));
    }));
}

/// Whether `command` runs the adapter on Deno (`deno run npm:@agentclientprotocol/codex-acp`,
/// through a wrapper too).
fn runs_on_deno(command: &[String]) -> bool {
    command
        .iter()
        .flat_map(|w| w.split_whitespace())
        .any(|word| Path::new(word).file_name().is_some_and(|n| n == "deno" || n == "deno.exe"))
}

/// Whether `command` starts the TypeScript adapter, read as its launchers read it
/// ([`command::names`]; a word found on `PATH` is followed through its symlinks): its package
/// named anywhere (`npx @agentclientprotocol/codex-acp`, a script in it), or a program
/// `codex-acp` that is not the zed adapter's (`npm exec -- codex-acp`, `sh -c "codex-acp"`).
fn starts_typescript_adapter(command: &[String], path: Option<&OsStr>) -> bool {
    let real_path = |word: &str| -> Option<String> {
        let named = Path::new(word);
        let file = if named.components().count() > 1 {
            named.to_path_buf()
        } else {
            found::on_path(path?, word, |_| true)?
        };
        std::fs::canonicalize(file).ok().map(|p| p.display().to_string())
    };
    let names = command::names(command, &real_path);
    let package = |name: &str| names.iter().any(|n| n.packages.iter().any(|p| p == name));
    let program = names.iter().any(|n| n.programs.iter().any(|p| p == PACKAGE));
    package(TYPESCRIPT) || (program && !package(ZED))
}

/// The Codex the TypeScript adapter runs when `CODEX_PATH` is not set, from its command before
/// it starts (where the adapter's process cannot be read once it runs): Node with
/// `@openai/codex/bin/codex.js`, resolved from the adapter's script when the command's first
/// word is that script (or its `bin` link) or Node running it.
fn bundled(command: &[String], path: Option<&OsStr>) -> Option<Vec<String>> {
    let found = |name: &str| -> Option<PathBuf> {
        if name.contains('/') {
            Some(PathBuf::from(name)).filter(|p| p.is_file())
        } else {
            found::on_path(path?, name, |_| true)
        }
    };
    let first = found(command.first()?)?;
    // `node …/dist/index.js`, or the script itself (npm's `bin` link, `#!/usr/bin/env node`).
    let by_node = first.file_name().is_some_and(|n| n == "node");
    let script = if by_node { PathBuf::from(command.get(1)?) } else { first.clone() };
    let script = std::fs::canonicalize(script).ok()?;
    script.ancestors().find(|d| {
        d.file_name().is_some_and(|n| n == PACKAGE)
            && d.parent().and_then(Path::file_name).is_some_and(|n| n == SCOPE)
    })?;
    let node = if by_node { first } else { found("node")? };
    let var = |name: &str| std::env::var_os(name);
    let codex = adapter::resolve(script.parent()?, &node, &var)?;
    Some(vec![node.display().to_string(), codex.display().to_string()])
}

/// Runs `@openai/codex/bin/codex.js` as the adapter would, resolved by Node itself from the
/// script (the first argument after `--`), the rest of the arguments Codex's. CommonJS, so
/// that any Node (and Bun) runs it; `import()` runs the ES module launcher.
const NODE_RESOLVES: &str = "const m=require('node:module'),u=require('node:url');\
const s=process.argv.splice(1,1)[0];\
const c=m.createRequire(s).resolve('@openai/codex/bin/codex.js');\
process.argv.splice(1,0,c);import(u.pathToFileURL(c).href);";

/// acp-usage started as the adapter's Codex (`spec` is [`VAR`]'s value): runs the Codex it
/// names, or the one the adapter above would have run, with the app server's overrides, and
/// never returns unless that cannot start.
pub fn run(spec: &OsStr) -> std::process::ExitCode {
    let exec: Exec = match spec.to_str().and_then(|s| serde_json::from_str(s).ok()) {
        Some(exec) => exec,
        None => {
            eprintln!("acp-usage: {VAR} is not what acp-usage sets; Codex cannot be started");
            return std::process::ExitCode::from(127);
        }
    };
    let program = match exec.program.clone() {
        Some(program) => program,
        None => {
            let var = |name: &str| std::env::var_os(name);
            match adapter::find(parent_id(), &adapter::proc, &var) {
                adapter::Found::Codex { node, codex } => {
                    vec![node.display().to_string(), codex.display().to_string()]
                }
                adapter::Found::Script { node, script } => vec![
                    node.display().to_string(),
                    "-e".to_owned(),
                    NODE_RESOLVES.to_owned(),
                    "--".to_owned(),
                    script.display().to_string(),
                ],
                adapter::Found::Nothing => {
                    if let Some(url) = &exec.notice {
                        ask_notice(url);
                    }
                    eprintln!(
                        "acp-usage: no process above runs codex-acp's script; set CODEX_PATH"
                    );
                    return std::process::ExitCode::from(127);
                }
            }
        }
    };
    exec_codex(&exec, &program)
}

#[cfg(unix)]
fn parent_id() -> u32 {
    std::os::unix::process::parent_id()
}

#[cfg(not(unix))]
fn parent_id() -> u32 {
    0
}

/// Replaces this process with `program` (and its first arguments), the subcommand codex-acp
/// gave, `exec.config` after `app-server`, and the rest.
fn exec_codex(exec: &Exec, program: &[String]) -> std::process::ExitCode {
    let Some((program, first)) = program.split_first() else {
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

/// Asks the tap at `url` (`http://127.0.0.1:PORT/<path>`) for its notice, and waits for the
/// answer, so that it is logged before the adapter reports its app server gone. A tap that
/// does not answer within a second is let be.
fn ask_notice(url: &str) {
    use std::io::{Read as _, Write as _};
    let Some((addr, path)) = url.strip_prefix("http://").and_then(|u| u.split_once('/')) else {
        return;
    };
    let Ok(addr) = addr.parse::<std::net::SocketAddr>() else { return };
    let timeout = std::time::Duration::from_secs(1);
    let Ok(mut stream) = std::net::TcpStream::connect_timeout(&addr, timeout) else { return };
    let _ = stream.set_read_timeout(Some(timeout));
    let request = format!(
        "POST /{path} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    );
    if stream.write_all(request.as_bytes()).is_ok() {
        let _ = stream.read_to_end(&mut Vec::new());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{executable, scratch};

    /// npm's layout: the adapter's package, its `bin` link, Codex hoisted beside it, and Node;
    /// the zed adapter's `bin` link, of the same name, in another directory.
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
        let zed = modules.join("@zed-industries/codex-acp/bin/codex-acp");
        executable(&zed);
        let zed_bin = root.join("zed-bin");
        std::fs::create_dir_all(&zed_bin).unwrap();
        #[cfg(unix)]
        std::os::unix::fs::symlink(&zed, zed_bin.join("codex-acp")).unwrap();
        (bin, script, codex)
    }

    #[cfg(unix)]
    #[test]
    fn the_typescript_adapter_is_recognised_however_it_is_launched() {
        let root = scratch("codex-app-server", "recognised");
        let (bin, script, _) = installed(&root);
        let path = bin.as_os_str();
        let script = script.display().to_string();
        let node = bin.join("node").display().to_string();
        let words = |w: &[&str]| w.iter().map(|w| (*w).to_owned()).collect::<Vec<_>>();
        let typescript = [
            words(&["codex-acp"]),
            words(&[&node, &script]),
            words(&["npx", "-y", "@agentclientprotocol/codex-acp@2.6.0"]),
            words(&["sh", "-c", &format!("{node} {script} | tee /tmp/log")]),
            words(&["npm", "exec", "--prefix", "/p", "--", "codex-acp"]),
            words(&[&node, "/n/lib/npm-cli.js", "exec", "--yes", "--", TYPESCRIPT]),
        ];
        for command in typescript {
            assert!(starts_typescript_adapter(&command, Some(path)), "{command:?}");
        }
        let zed_path = root.join("zed-bin");
        let others = [
            (words(&["npx", "@zed-industries/codex-acp"]), path),
            (words(&["codex-acp"]), zed_path.as_os_str()),
            (words(&["sh", "-c", "exec codex-acp"]), zed_path.as_os_str()),
            (words(&["other-acp"]), path),
        ];
        for (command, path) in others {
            assert!(!starts_typescript_adapter(&command, Some(path)), "{command:?}");
        }
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn deno_is_told_apart_from_node_however_wrapped() {
        let words = |w: &[&str]| w.iter().map(|w| (*w).to_owned()).collect::<Vec<_>>();
        assert!(runs_on_deno(&words(&["deno", "run", "-A", "npm:@agentclientprotocol/codex-acp"])));
        assert!(runs_on_deno(&words(&["sh", "-c", "/opt/deno/bin/deno run -A npm:x | tee l"])));
        assert!(!runs_on_deno(&words(&["npx", "-y", TYPESCRIPT])));
        assert!(!runs_on_deno(&words(&["node", "/p/denote/dist/index.js"])));
    }

    #[cfg(unix)]
    #[test]
    fn before_the_start_the_codex_is_found_from_the_first_word() {
        let root = scratch("codex-app-server", "bundled");
        let (bin, script, codex) = installed(&root);
        let path = bin.as_os_str();
        let node = bin.join("node").display().to_string();
        let want = Some(vec![node.clone(), codex.display().to_string()]);
        assert_eq!(bundled(&["codex-acp".into()], Some(path)), want);
        let by_node = [node.clone(), script.display().to_string()];
        assert_eq!(bundled(&by_node, Some(path)), want);
        // npx: no file to find Codex from before it starts.
        let npx = ["npx".to_owned(), "-y".to_owned(), TYPESCRIPT.to_owned()];
        assert_eq!(bundled(&npx, Some(path)), None);
        let _ = std::fs::remove_dir_all(&root);
    }

    #[cfg(unix)]
    #[test]
    fn the_app_server_goes_through_the_tap_to_where_config_toml_sends_it() {
        let root = scratch("codex-app-server", "points");
        let (bin, _, codex) = installed(&root);
        let path = bin.display().to_string();
        let profile = crate::agents::Profile::named("codex").unwrap();
        let config = |text: &'static str| {
            move |p: &Path| (p == Path::new("/h/config.toml")).then(|| text.to_owned())
        };
        let point_with = |command: &[&str],
                          vars: Vec<(&'static str, String)>,
                          read: &dyn Fn(&Path) -> Option<String>| {
            let command: Vec<String> = command.iter().map(|w| (*w).to_owned()).collect();
            let var = move |k: &str| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.clone());
            let p = crate::agents::point_command(profile, &command, &var, read);
            let resolved = p.resolve(|route| format!("http://tap/{route}"));
            let env =
                |name: &str| resolved.env.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
            let exec = env(VAR).map(|j| serde_json::from_str::<Exec>(&j).unwrap());
            (p, env("CODEX_PATH"), exec)
        };
        let point =
            |vars, read: &dyn Fn(&Path) -> Option<String>| point_with(&["codex-acp"], vars, read);
        let home = ("CODEX_HOME", "/h".to_owned());

        // config.toml's `openai_base_url`, which the app server (and so the title thread) reads,
        // is the route's upstream; the same route as the threads' when CODEX_CONFIG says nothing.
        let read = config("openai_base_url = \"http://127.0.0.1:8/v1\"\n");
        let (p, codex_path, exec) = point(vec![home.clone(), ("PATH", path.clone())], &read);
        assert_eq!(codex_path, Some(std::env::current_exe().unwrap().display().to_string()));
        let exec = exec.unwrap();
        // On Linux the adapter's Codex is found when it starts it; elsewhere before.
        if cfg!(target_os = "linux") {
            assert_eq!(exec.program, None);
            assert_eq!(exec.notice.as_deref(), Some("http://tap/.notice/codex-app-server"));
            assert_eq!(p.notices.len(), 1);
        } else {
            let node = bin.join("node").display().to_string();
            assert_eq!(exec.program, Some(vec![node, codex.display().to_string()]));
            assert_eq!(exec.notice, None);
        }
        assert_eq!(exec.codex_path, None);
        assert_eq!(exec.config, vec!["openai_base_url=\"http://tap/codex-openai\""]);
        let upstreams: Vec<(&str, &str)> =
            p.routes.iter().map(|r| (r.name.as_str(), r.upstream.as_str())).collect();
        assert_eq!(upstreams, [("codex-openai", "http://127.0.0.1:8/v1")]);

        // An npx launch is pointed too (on Linux; elsewhere its Codex is not on disk yet).
        let npx = ["npx", "-y", TYPESCRIPT];
        let (p, _, exec) = point_with(&npx, vec![home.clone(), ("PATH", path.clone())], &read);
        assert_eq!(exec.is_some(), cfg!(target_os = "linux"), "{p:?}");
        assert_eq!(p.warnings.is_empty(), cfg!(target_os = "linux"), "{p:?}");
        // The zed adapter runs no app server: nothing of this.
        let zed = ["npx", ZED];
        let (p, _, exec) = point_with(&zed, vec![home.clone(), ("PATH", path.clone())], &read);
        assert_eq!((exec, p.notices.len()), (None, 0));

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

        // The user's CODEX_PATH is what runs, and is put back for it; nothing to find.
        let vars = vec![home.clone(), ("PATH", path.clone()), ("CODEX_PATH", "/my/codex".into())];
        let exec = point(vars, &no_file).2.unwrap();
        assert_eq!(
            (exec.program, exec.codex_path, exec.notice),
            (Some(vec!["/my/codex".to_owned()]), Some("/my/codex".to_owned()), None)
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
            program: None,
            codex_path: None,
            config: vec!["openai_base_url=\"http://127.0.0.1:1/s/codex-openai\"".into()],
            notice: Some("http://127.0.0.1:1/s/.notice/codex-app-server".into()),
        };
        let json = serde_json::to_string(&exec).unwrap();
        assert!(json.contains("\"codexPath\":null"), "{json}");
        assert_eq!(serde_json::from_str::<Exec>(&json).unwrap(), exec);
    }
}
