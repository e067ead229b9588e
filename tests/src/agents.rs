//! Launchers for the real agents, configured to talk only to a mock LLM on 127.0.0.1.
//!
//! Each agent gets a scratch HOME with its own config directory (CLAUDE_CONFIG_DIR, CODEX_HOME,
//! GEMINI_CLI_HOME, opencode's XDG directories, COPILOT_HOME, CLINE_DATA_DIR, pi's
//! `~/.pi/agent`) and an environment built from scratch, not inherited: no key or base URL
//! of the developer's can leak in, and nothing points anywhere but the mock. Proxy variables
//! point at a dead loopback port so that a stray telemetry or update request fails fast instead
//! of leaving the machine.
//!
//! The agents are npm packages installed by `.ci/install-agents.sh` into
//! `$ACP_USAGE_AGENTS_DIR` (default `$HOME/.cache/acp-usage/agents/node_modules/.bin`). A missing
//! agent is an error naming that script: its tests fail, they never pass silently.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use serde_json::json;

use crate::client::CommandSpec;
use crate::scratch::Scratch;

/// The agents the end-to-end tests run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Agent {
    /// `@agentclientprotocol/claude-agent-acp` (Claude Code underneath), Anthropic Messages API.
    Claude,
    /// `@zed-industries/codex-acp` (codex-rs underneath), OpenAI Responses API.
    Codex,
    /// `@agentclientprotocol/codex-acp` (TypeScript, the Codex app server from `@openai/codex`
    /// underneath), OpenAI Responses API: the adapter new users get.
    CodexTs,
    /// `@google/gemini-cli --acp`, Gemini API.
    Gemini,
    /// `opencode-ai` (`opencode acp`), its Anthropic provider on the Messages API.
    Opencode,
    /// `@qwen-code/qwen-code` (`qwen --acp`), an OpenAI-compatible provider (Chat Completions).
    Qwen,
    /// `@github/copilot` (`copilot --acp`, GitHub Copilot CLI), bring-your-own-key on its
    /// Anthropic provider (Messages API) in offline mode: no GitHub login.
    Copilot,
    /// `cline` (`cline --acp`), its Anthropic provider (Messages API) with a custom base URL.
    Cline,
    /// `@kilocode/cli` (`kilo acp`, an opencode fork), its Anthropic provider on the Messages API.
    Kilo,
    /// Mistral Vibe (PyPI `mistral-vibe`, `vibe-acp`, in a venv of its own), its Mistral
    /// provider against the mock's Mistral flavour of Chat Completions.
    Vibe,
    /// `pi-acp` (pi's ACP adapter, running `pi` of `@earendil-works/pi-coding-agent`), pi's
    /// Anthropic provider (Messages API) with the mock's base URL in its `models.json`.
    Pi,
    /// Factory Droid (npm `droid`, `droid exec --output-format acp-daemon`): a custom model on
    /// the Anthropic provider with the mock's base URL (`~/.factory/settings.json`), in air-gap
    /// mode (`FACTORY_AIRGAP_ENABLED`): no Factory login.
    Droid,
    /// Auggie (`@augmentcode/auggie`, `auggie --acp`): only its `initialize` and `session/new`
    /// (which needs an Augment login) run here.
    Auggie,
    /// Qoder CLI (`@qoder-ai/qodercli`, `qodercli --acp`): only its `initialize` and
    /// `session/new` (which needs a Qoder login) run here.
    Qoder,
}

impl Agent {
    pub const ALL: [Agent; 14] = [
        Agent::Claude,
        Agent::Codex,
        Agent::CodexTs,
        Agent::Gemini,
        Agent::Opencode,
        Agent::Qwen,
        Agent::Copilot,
        Agent::Cline,
        Agent::Kilo,
        Agent::Vibe,
        Agent::Pi,
        Agent::Droid,
        Agent::Auggie,
        Agent::Qoder,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Agent::Claude => "claude",
            Agent::Codex => "codex",
            Agent::CodexTs => "codex-ts",
            Agent::Gemini => "gemini",
            Agent::Opencode => "opencode",
            Agent::Qwen => "qwen",
            Agent::Copilot => "copilot",
            Agent::Cline => "cline",
            Agent::Kilo => "kilo",
            Agent::Vibe => "vibe",
            Agent::Pi => "pi",
            Agent::Droid => "droid",
            Agent::Auggie => "auggie",
            Agent::Qoder => "qoder",
        }
    }

    /// The npm package (PyPI for Vibe) and the version `.ci/install-agents.sh` pins.
    pub fn package(self) -> (&'static str, &'static str) {
        match self {
            Agent::Claude => ("@agentclientprotocol/claude-agent-acp", "0.101.0"),
            Agent::Codex => ("@zed-industries/codex-acp", "0.16.0"),
            Agent::CodexTs => ("@agentclientprotocol/codex-acp", "2.6.0"),
            Agent::Gemini => ("@google/gemini-cli", "0.61.0"),
            Agent::Opencode => ("opencode-ai", "1.18.33"),
            Agent::Qwen => ("@qwen-code/qwen-code", "0.24.4"),
            Agent::Copilot => ("@github/copilot", "1.0.102"),
            Agent::Cline => ("cline", "3.0.65"),
            // 7.8.1, the newest, has no linux-x64 platform package on the registry.
            Agent::Kilo => ("@kilocode/cli", "7.7.7"),
            Agent::Vibe => ("mistral-vibe", "3.0.3"),
            Agent::Pi => ("pi-acp", "0.0.34"),
            // The newest `@factory/cli` (0.225.1) names a platform package the registry lacks.
            Agent::Droid => ("droid", "0.215.0"),
            Agent::Auggie => ("@augmentcode/auggie", "0.36.0"),
            Agent::Qoder => ("@qoder-ai/qodercli", "1.1.52"),
        }
    }

    /// The executable's name in `node_modules/.bin`.
    pub fn bin_name(self) -> &'static str {
        match self {
            Agent::Claude => "claude-agent-acp",
            Agent::Codex | Agent::CodexTs => "codex-acp",
            Agent::Gemini => "gemini",
            Agent::Opencode => "opencode",
            Agent::Qwen => "qwen",
            Agent::Copilot => "copilot",
            Agent::Cline => "cline",
            Agent::Kilo => "kilo",
            Agent::Vibe => "vibe-acp",
            Agent::Pi => "pi-acp",
            Agent::Droid => "droid",
            Agent::Auggie => "auggie",
            Agent::Qoder => "qodercli",
        }
    }

    /// The npm prefix `.ci/install-agents.sh` installs the agent into (its `node_modules/`).
    pub fn npm_prefix(self) -> PathBuf {
        match self {
            // A prefix of its own (pi-acp and the `pi` it runs from PATH, [`PI_AGENT`]).
            Agent::Pi => agents_cache().join("pi"),
            _ => agents_cache(),
        }
    }

    /// Whether the agent sends its command list (`available_commands_update`) after answering
    /// `session/new`, as all but cline do: what a test waits for before it reads what the
    /// agent sent between the answer and the first prompt.
    pub fn announces_commands(self) -> bool {
        !matches!(self, Agent::Cline)
    }

    /// Whether the agent sends a `usage_update` of its own after answering `session/new`, as
    /// pi-acp does (the others send none then, which their tests check).
    pub fn reports_usage_on_open(self) -> bool {
        matches!(self, Agent::Pi)
    }

    pub fn args(self) -> Vec<String> {
        match self {
            // A fixed model: the default `auto` router makes classifier calls and may switch models.
            Agent::Gemini => vec!["--acp".into(), "-m".into(), GEMINI_MODEL.into()],
            Agent::Opencode | Agent::Kilo => vec!["acp".into()],
            Agent::Qwen | Agent::Cline | Agent::Auggie | Agent::Qoder => vec!["--acp".into()],
            Agent::Droid => vec!["exec".into(), "--output-format".into(), "acp-daemon".into()],
            Agent::Copilot => vec!["--acp".into(), "--disable-client-telemetry".into()],
            Agent::Claude | Agent::Codex | Agent::CodexTs | Agent::Vibe | Agent::Pi => Vec::new(),
        }
    }
}

/// A Codex model with a catalog window (272,000, of which Codex uses 95%: 258,400).
pub const CODEX_MODEL: &str = "gpt-5.2-codex";
pub const GEMINI_MODEL: &str = "gemini-2.5-pro";
/// qwen-code's model on its OpenAI-compatible provider (a catalog window of 272,000).
pub const QWEN_MODEL: &str = "gpt-5.2";
/// opencode's model option value (`providerID/modelID`): Anthropic's provider, pointed at the mock.
pub const OPENCODE_MODEL: &str = "anthropic/claude-sonnet-4-5";
/// Copilot's id of Claude Sonnet 4.5 (dotted; its catalog's `maxPromptTokens` is 168,000).
pub const COPILOT_MODEL: &str = "claude-sonnet-4.5";
/// cline's model on its Anthropic provider (a catalog window of 200,000).
pub const CLINE_MODEL: &str = "claude-sonnet-4-5";
/// Vibe's default model: its alias (the model option's value) and the API id its requests carry
/// (the catalog's `mistral/mistral-vibe-cli-latest`, a window of 262,144).
pub const VIBE_MODEL_ALIAS: &str = "mistral-medium-3.5";
pub const VIBE_MODEL: &str = "mistral-vibe-cli-latest";
/// Droid's model option value: its custom model (`custom:<display name>-<n>`), the mock's
/// claude-sonnet-4-5 on the Anthropic provider.
pub const DROID_MODEL: &str = "custom:Mock-Sonnet-0";
/// The `pi` that pi-acp runs: npm package and the version `.ci/install-agents.sh` pins beside
/// pi-acp in the same prefix.
pub const PI_AGENT: (&str, &str) = ("@earendil-works/pi-coding-agent", "1.6.0");
/// pi's model option value (`provider/model`): its Anthropic provider, pointed at the mock.
pub const PI_MODEL: &str = "anthropic/claude-sonnet-4-5";

/// The cache `.ci/install-agents.sh` installs into: `node_modules/` (npm agents and acpx) and
/// `node/bin/node` (Node 22).
pub fn agents_cache() -> PathBuf {
    std::env::var_os("ACP_USAGE_AGENTS_CACHE").map(PathBuf::from).unwrap_or_else(|| {
        let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(|| "/root".into());
        home.join(".cache/acp-usage/agents")
    })
}

/// Where the agents' executables are linked (`node_modules/.bin`), unless
/// `$ACP_USAGE_AGENTS_DIR` says otherwise.
pub fn agents_bin_dir() -> PathBuf {
    match std::env::var_os("ACP_USAGE_AGENTS_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => agents_cache().join("node_modules/.bin"),
    }
}

/// Where Copilot CLI keeps its unpacked package (`<dir>/pkg/linux-x64/<version>`).
pub fn copilot_pkg_cache() -> PathBuf {
    agents_cache().join("copilot")
}

/// The directory of the Node 22 the agents run on, put first on their PATH (and on acpx's).
pub fn node_bin_dir() -> PathBuf {
    agents_cache().join("node/bin")
}

/// The PATH every child gets: Node 22 first, then the test process's PATH.
pub fn child_path() -> anyhow::Result<String> {
    let path = std::env::var("PATH").context("PATH is not set")?;
    let node = node_bin_dir();
    if !node.join("node").exists() {
        bail!(
            "Node 22 is not installed: {} does not exist. Run .ci/install-agents.sh",
            node.join("node").display()
        );
    }
    Ok(format!("{}:{path}", node.display()))
}

/// The script a package's `bin` entry names, from its `package.json`: two packages may link
/// the same name in `.bin` (both codex-acp adapters), so the tests never go through the link.
pub fn package_bin(package: &str, bin: &str) -> anyhow::Result<PathBuf> {
    package_bin_in(&agents_cache(), package, bin)
}

/// [`package_bin`] in the npm prefix `prefix` (an agent installed in a prefix of its own).
pub fn package_bin_in(prefix: &Path, package: &str, bin: &str) -> anyhow::Result<PathBuf> {
    let dir = prefix.join("node_modules").join(package);
    let text = std::fs::read_to_string(dir.join("package.json"))
        .with_context(|| format!("{package} is not installed in {}", dir.display()))?;
    let manifest: serde_json::Value = serde_json::from_str(&text)?;
    let entry = match &manifest["bin"] {
        serde_json::Value::String(path) => Some(path.as_str()),
        bins => bins[bin].as_str(),
    };
    let entry = entry.with_context(|| format!("{package}'s package.json has no bin {bin}"))?;
    Ok(dir.join(entry))
}

/// Mistral Vibe's venv (`.ci/install-vibe.sh`): `bin/vibe-acp`, `bin/python`.
pub fn vibe_venv() -> PathBuf {
    agents_cache().join("venv-vibe")
}

/// The agent's executable, or an error that says how to install it.
pub fn agent_program(agent: Agent) -> anyhow::Result<PathBuf> {
    let (package, version) = agent.package();
    if agent == Agent::Vibe {
        let program = vibe_venv().join("bin").join(agent.bin_name());
        if !program.is_file() {
            bail!(
                "vibe-acp is not installed: {} does not exist. Run .ci/install-agents.sh (or \
                 .ci/install-vibe.sh) to install {package}=={version}",
                program.display()
            );
        }
        match installed_version(agent) {
            Some(installed) if installed != version => eprintln!(
                "warning: {package} {installed} is installed, the tests are written for {version} (.ci/install-vibe.sh)"
            ),
            _ => {}
        }
        return Ok(program);
    }
    let program = match std::env::var_os("ACP_USAGE_AGENTS_DIR") {
        Some(dir) => PathBuf::from(dir).join(agent.bin_name()),
        None => package_bin_in(&agent.npm_prefix(), package, agent.bin_name()).unwrap_or_default(),
    };
    if !program.is_file() {
        bail!(
            "{} is not installed: {} does not exist. Run .ci/install-agents.sh to install \
             {package}@{version} (or point ACP_USAGE_AGENTS_DIR at a node_modules/.bin that has it)",
            agent.bin_name(),
            program.display()
        );
    }
    match installed_version(agent) {
        Some(installed) if installed != version => eprintln!(
            "warning: {package} {installed} is installed, the tests are written for {version} (.ci/install-agents.sh)"
        ),
        _ => {}
    }
    if agent == Agent::Pi {
        let (pi, want) = PI_AGENT;
        let manifest = agent.npm_prefix().join("node_modules").join(pi).join("package.json");
        let text = std::fs::read_to_string(manifest).unwrap_or_default();
        let installed = serde_json::from_str::<serde_json::Value>(&text).ok();
        match installed.as_ref().and_then(|m| m["version"].as_str()) {
            Some(installed) if installed != want => eprintln!(
                "warning: {pi} {installed} is installed, the tests are written for {want} (.ci/install-agents.sh)"
            ),
            _ => {}
        }
    }
    Ok(program)
}

/// The installed version of the agent's package, from its `package.json` (Vibe: the name of
/// its `mistral_vibe-<version>.dist-info` in the venv).
pub fn installed_version(agent: Agent) -> Option<String> {
    let (package, _) = agent.package();
    if agent == Agent::Vibe {
        for lib in std::fs::read_dir(vibe_venv().join("lib")).ok()?.flatten() {
            let site = lib.path().join("site-packages");
            for entry in std::fs::read_dir(site).into_iter().flatten().flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                if let Some(version) = name
                    .strip_prefix("mistral_vibe-")
                    .and_then(|rest| rest.strip_suffix(".dist-info"))
                {
                    return Some(version.to_owned());
                }
            }
        }
        return None;
    }
    let manifest = agent.npm_prefix().join("node_modules").join(package).join("package.json");
    let text = std::fs::read_to_string(manifest).ok()?;
    let manifest: serde_json::Value = serde_json::from_str(&text).ok()?;
    manifest["version"].as_str().map(str::to_owned)
}

/// The command that runs `agent` against the mock at `mock_url`, with its HOME and config in
/// `scratch` and `scratch.work()` as the working directory. Writes the config files.
pub fn agent_command(
    agent: Agent,
    scratch: &Scratch,
    mock_url: &str,
) -> anyhow::Result<CommandSpec> {
    let program = agent_program(agent)?;
    let home = scratch.home();
    let mut env = base_env(scratch)?;
    let mut set = |key: &str, value: String| env.push((key.to_owned(), value));
    match agent {
        Agent::Claude => {
            set("ANTHROPIC_BASE_URL", mock_url.to_owned());
            set("ANTHROPIC_API_KEY", "sk-ant-mock-key".into());
            set("CLAUDE_CONFIG_DIR", home.join(".claude").display().to_string());
            // Claude Code refuses to run its permission-bypass machinery as root otherwise, and
            // `session/new` dies with "Query closed before response received".
            set("IS_SANDBOX", "1".into());
            set("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".into());
            set("DISABLE_AUTOUPDATER", "1".into());
            set("DISABLE_TELEMETRY", "1".into());
            set("DISABLE_ERROR_REPORTING", "1".into());
            // Claude Code 2.1 predicts the next prompt after a turn with a side call that lands
            // between turns, in no test's turn window; off, so the checks stay per turn (the
            // ledger's unit tests cover how such calls count).
            set("CLAUDE_CODE_ENABLE_PROMPT_SUGGESTION", "false".into());
        }
        Agent::Codex | Agent::CodexTs => {
            let codex_home = home.join(".codex");
            std::fs::create_dir_all(&codex_home)?;
            std::fs::write(codex_home.join("config.toml"), codex_config(mock_url))?;
            set("CODEX_HOME", codex_home.display().to_string());
            set("MOCK_API_KEY", "mock-key".into());
            // The TypeScript adapter opens a browser for ChatGPT login otherwise.
            set("NO_BROWSER", "1".into());
        }
        Agent::Qwen => {
            set("OPENAI_API_KEY", "sk-mock-key".into());
            set("OPENAI_BASE_URL", format!("{mock_url}/v1"));
            set("OPENAI_MODEL", QWEN_MODEL.into());
        }
        Agent::Gemini => {
            let gemini_dir = home.join(".gemini");
            std::fs::create_dir_all(&gemini_dir)?;
            std::fs::write(gemini_dir.join("settings.json"), gemini_settings())?;
            set("GEMINI_CLI_HOME", home.display().to_string());
            set("GEMINI_API_KEY", "mock-key".into());
            set("GOOGLE_GEMINI_BASE_URL", mock_url.to_owned());
            set("GEMINI_TELEMETRY_ENABLED", "false".into());
        }
        Agent::Opencode | Agent::Kilo => {
            // Its SQLite store lands in $XDG_DATA_HOME/opencode/opencode.db (kilo's in
            // $XDG_DATA_HOME/kilo/kilo.db).
            for (var, dir) in [
                ("XDG_DATA_HOME", ".local/share"),
                ("XDG_CONFIG_HOME", ".config"),
                ("XDG_CACHE_HOME", ".cache"),
                ("XDG_STATE_HOME", ".local/state"),
            ] {
                let dir = home.join(dir);
                std::fs::create_dir_all(&dir)?;
                set(var, dir.display().to_string());
            }
            // The same switches under each one's prefix; kilo's also stop its session
            // uploads and its presence client (any telemetry level but `all` is off).
            let (prefix, extra): (&str, &[&str]) = match agent {
                Agent::Kilo => ("KILO", &["DISABLE_SESSION_INGEST", "DISABLE_PRESENCE"]),
                _ => ("OPENCODE", &[]),
            };
            set(&format!("{prefix}_CONFIG_CONTENT"), opencode_config(mock_url));
            let quiet = [
                "DISABLE_MODELS_FETCH",
                "DISABLE_AUTOUPDATE",
                "DISABLE_SHARE",
                "DISABLE_LSP_DOWNLOAD",
                "DISABLE_DEFAULT_PLUGINS",
            ];
            for name in quiet.iter().chain(extra) {
                set(&format!("{prefix}_{name}"), "1".into());
            }
            if agent == Agent::Kilo {
                set("KILO_TELEMETRY_LEVEL", "off".into());
            }
        }
        Agent::Copilot => {
            // BYOK in offline mode (`copilot help environment`): no GitHub login, no telemetry,
            // no update check, no web tools. The Anthropic provider's base URL has no `/v1`
            // (the SDK appends `/v1/messages`).
            set("COPILOT_HOME", home.join(".copilot").display().to_string());
            // The native binary unpacks its 235 MB JavaScript package on first run; once, into
            // the agents' cache (`.ci/install-agents.sh` does it), not into every scratch HOME.
            set("COPILOT_PKG_CACHE_HOME", copilot_pkg_cache().display().to_string());
            set("COPILOT_OFFLINE", "true".into());
            set("COPILOT_AUTO_UPDATE", "false".into());
            set("COPILOT_PROVIDER_TYPE", "anthropic".into());
            set("COPILOT_PROVIDER_BASE_URL", mock_url.to_owned());
            set("COPILOT_PROVIDER_API_KEY", "sk-ant-mock-key".into());
            set("COPILOT_MODEL", COPILOT_MODEL.into());
        }
        Agent::Cline => {
            // The provider comes from `providers.json` (its base URL, which `cline auth` refuses
            // to set for Anthropic); the ACP mode starts a session only with CLINE_API_KEY set
            // (otherwise "Authentication required"), and that key is the one sent.
            let data = home.join(".cline").join("data");
            let settings = data.join("settings");
            std::fs::create_dir_all(&settings)?;
            std::fs::write(settings.join("providers.json"), cline_providers(mock_url))?;
            // Without the opt-out, cline exports OpenTelemetry to otel.cline.bot (a DNS lookup
            // the proxy variables do not stop); DISABLE_TELEMETRY is not cline's switch.
            std::fs::write(
                settings.join("global-settings.json"),
                r#"{"telemetryOptOut": true, "autoUpdateEnabled": false}"#,
            )?;
            set("CLINE_DATA_DIR", data.display().to_string());
            set("CLINE_API_KEY", "sk-ant-mock-key".into());
            set("CLINE_PROVIDER", "anthropic".into());
            set("CLINE_MODEL", CLINE_MODEL.into());
            // Sessions in this process: the default (`auto`) spawns a detached hub daemon on
            // 127.0.0.1:25463 that outlives the agent and is shared by every cline on the machine.
            set("CLINE_SESSION_BACKEND_MODE", "local".into());
            // Its PostHog feature-flag client is off only under these test switches (they change
            // nothing else in 3.0.65).
            set("E2E_TEST", "true".into());
            for quiet in ["CLINE_NO_AUTO_UPDATE", "DISABLE_TELEMETRY", "DISABLE_ERROR_REPORTING"] {
                set(quiet, "1".into());
            }
        }
        Agent::Vibe => {
            // Its config, logs and session store live in $VIBE_HOME (else ~/.vibe); the
            // provider's api_base is the mock's Mistral flavour (usage always sent, tool calls
            // whole), which the mistralai SDK needs.
            let vibe_home = home.join(".vibe");
            std::fs::create_dir_all(&vibe_home)?;
            std::fs::write(vibe_home.join("config.toml"), vibe_config(mock_url))?;
            set("VIBE_HOME", vibe_home.display().to_string());
            set("MISTRAL_API_KEY", "mock-key".into());
        }
        Agent::Pi => {
            // pi-acp runs `pi` from PATH (it also asks `pi --version` for its startup text).
            let bin = agent.npm_prefix().join("node_modules/.bin");
            let path = env.iter().find(|(key, _)| key == "PATH").map(|(_, v)| v.clone());
            env.retain(|(key, _)| key != "PATH");
            env.push(("PATH".into(), format!("{}:{}", bin.display(), path.unwrap_or_default())));
            let dir = home.join(".pi").join("agent");
            std::fs::create_dir_all(&dir)?;
            std::fs::write(dir.join("settings.json"), pi_settings(false))?;
            std::fs::write(dir.join("models.json"), pi_models(mock_url, None))?;
            env.push(("ANTHROPIC_API_KEY".into(), "sk-ant-mock-key".into()));
            // No catalog refresh from pi.dev, no version check, no telemetry.
            for quiet in ["PI_OFFLINE", "PI_SKIP_VERSION_CHECK"] {
                env.push((quiet.into(), "1".into()));
            }
            env.push(("PI_TELEMETRY".into(), "0".into()));
        }
        Agent::Droid => {
            // Air-gap mode starts sessions without a Factory login and offers the custom
            // models only; no update checks.
            let dir = home.join(".factory");
            std::fs::create_dir_all(&dir)?;
            std::fs::write(dir.join("settings.json"), droid_settings(mock_url))?;
            set("FACTORY_AIRGAP_ENABLED", "true".into());
            set("FACTORY_DROID_AUTO_UPDATE_ENABLED", "false".into());
        }
        Agent::Auggie => {
            // No login: nothing points it anywhere (its calls go to Augment's API only).
            set("AUGMENT_DISABLE_AUTO_UPDATE", "1".into());
        }
        Agent::Qoder => {}
    }
    if agent == Agent::Vibe {
        // The venv's bin first, as an activated venv has it.
        for (_, value) in env.iter_mut().filter(|(key, _)| key == "PATH") {
            *value = format!("{}:{value}", vibe_venv().join("bin").display());
        }
    }
    Ok(CommandSpec {
        program,
        args: agent.args(),
        env,
        cwd: scratch.work(),
        stderr_file: scratch.path(&format!("{}.stderr", agent.name())),
    })
}

/// What every child gets: PATH (Node 22 first), a scratch HOME and TMPDIR, and dead proxies.
fn base_env(scratch: &Scratch) -> anyhow::Result<Vec<(String, String)>> {
    let tmp = scratch.path("tmp");
    std::fs::create_dir_all(&tmp)?;
    let path = child_path()?;
    let mut env = vec![
        ("PATH".to_owned(), path),
        ("HOME".to_owned(), scratch.home().display().to_string()),
        ("TMPDIR".to_owned(), tmp.display().to_string()),
        ("LANG".to_owned(), "C.UTF-8".to_owned()),
        ("TERM".to_owned(), "dumb".to_owned()),
        ("NO_COLOR".to_owned(), "1".to_owned()),
        ("CI".to_owned(), "1".to_owned()),
    ];
    // Port 9 (discard) on loopback refuses connections: anything that honours proxy variables
    // and tries to leave the machine fails at once. The mock itself is exempt.
    for proxy in
        ["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"]
    {
        env.push((proxy.to_owned(), "http://127.0.0.1:9".to_owned()));
    }
    for no_proxy in ["NO_PROXY", "no_proxy"] {
        env.push((no_proxy.to_owned(), "127.0.0.1,localhost".to_owned()));
    }
    Ok(env)
}

/// `$CODEX_HOME/config.toml`: a `mock` provider on the Responses wire API. Retries are off so a
/// broken response fails the turn instead of silently consuming script steps.
pub fn codex_config(mock_url: &str) -> String {
    format!(
        r#"model = "{CODEX_MODEL}"
model_provider = "mock"

[model_providers.mock]
name = "Mock"
base_url = "{mock_url}/v1"
env_key = "MOCK_API_KEY"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0
"#
    )
}

/// Switches a Codex lab to Codex's built-in `openai` provider, logged in with an API key
/// (`auth.json`, as `codex login --with-api-key` writes it), with `openai_base_url` at the mock.
/// Unlike a custom provider, the built-in one talks over the Responses WebSocket when the server
/// accepts the upgrade (`MockLlm::enable_websocket`).
///
/// The base URL goes in `CODEX_CONFIG` (the TypeScript adapter's per-thread overrides), not
/// `config.toml`: the adapter starts its title thread without those overrides, so that thread
/// goes where `config.toml` says (through the tap, which points the app server itself). With no
/// base URL there, that is OpenAI's public endpoint, which the offline tests cannot reach: the
/// title call bills nothing.
pub fn use_codex_builtin_openai(
    scratch: &Scratch,
    spec: &mut CommandSpec,
    mock_url: &str,
) -> anyhow::Result<()> {
    let codex_home = scratch.home().join(".codex");
    std::fs::write(codex_home.join("config.toml"), format!("model = \"{CODEX_MODEL}\"\n"))?;
    let auth = json!({"auth_mode": "apikey", "OPENAI_API_KEY": "sk-mock-key"});
    std::fs::write(codex_home.join("auth.json"), auth.to_string())?;
    spec.set_env("CODEX_CONFIG", json!({"openai_base_url": format!("{mock_url}/v1")}).to_string());
    Ok(())
}

/// `$VIBE_HOME/config.toml`: the default model on the `mistral` provider (Mistral backend),
/// pointed at the mock's Mistral flavour; telemetry, update checks and notifications off.
pub fn vibe_config(mock_url: &str) -> String {
    format!(
        r#"active_model = "{VIBE_MODEL_ALIAS}"
enable_telemetry = false
enable_update_checks = false
enable_auto_update = false
enable_notifications = false

[[providers]]
name = "mistral"
api_base = "{mock_url}/mistral/v1"
api_key_env_var = "MISTRAL_API_KEY"
backend = "mistral"
"#
    )
}

/// `OPENCODE_CONFIG_CONTENT`: the default model on the Anthropic provider, whose base URL is the
/// mock's (opencode appends `/messages`).
pub fn opencode_config(mock_url: &str) -> String {
    let config = json!({
        "model": OPENCODE_MODEL,
        "provider": {"anthropic": {"options": {"baseURL": format!("{mock_url}/v1"), "apiKey": "x"}}},
    });
    config.to_string()
}

/// cline's `<data>/settings/providers.json`: the Anthropic provider, pointed at the mock (with
/// `/v1`: cline appends `/messages`). A provider entry without `updatedAt` is ignored (and the
/// real API's URL used).
pub fn cline_providers(mock_url: &str) -> String {
    let providers = json!({
        "version": 1,
        "lastUsedProvider": "anthropic",
        "providers": {"anthropic": {
            "settings": {
                "provider": "anthropic",
                "apiKey": "sk-ant-mock-key",
                "model": CLINE_MODEL,
                "baseUrl": format!("{mock_url}/v1"),
            },
            "tokenSource": "manual",
            "updatedAt": "2026-01-01T00:00:00.000Z",
        }},
    });
    serde_json::to_string_pretty(&providers).unwrap_or_default()
}

/// `~/.pi/agent/settings.json`: Sonnet 4.5 on the Anthropic provider, no startup text. Cache
/// warming (a side call with the last request, `max_tokens: 1`, while idle) is off unless
/// `warming`, which also turns thinking off (pi warms only requests it can replay).
pub fn pi_settings(warming: bool) -> String {
    let (provider, model) = PI_MODEL.split_once('/').unwrap_or(("anthropic", PI_MODEL));
    let mut settings = json!({
        "defaultProvider": provider,
        "defaultModel": model,
        "enableInstallTelemetry": false,
        "quietStartup": true,
        "cacheWarming": "off",
    });
    if warming {
        settings["cacheWarming"] = json!("idle");
        settings["defaultThinkingLevel"] = json!("off");
    }
    serde_json::to_string_pretty(&settings).unwrap_or_default()
}

/// `~/.pi/agent/models.json`: the Anthropic provider's base URL is the mock's (no `/v1`: the
/// SDK appends `/v1/messages`); `overrides` for the model, when given (`modelOverrides`).
pub fn pi_models(mock_url: &str, overrides: Option<serde_json::Value>) -> String {
    let model = PI_MODEL.split_once('/').map_or(PI_MODEL, |(_, model)| model);
    let mut provider = json!({"baseUrl": mock_url});
    if let Some(overrides) = overrides {
        provider["modelOverrides"] = json!({ model: overrides });
    }
    serde_json::to_string_pretty(&json!({"providers": {"anthropic": provider}})).unwrap_or_default()
}

/// `~/.factory/settings.json`: one custom model, Anthropic's provider at the mock (no `/v1`: the
/// SDK appends `/v1/messages`), as the session's default model.
pub fn droid_settings(mock_url: &str) -> String {
    let settings = json!({
        "customModels": [{
            "model": "claude-sonnet-4-5",
            "displayName": "Mock Sonnet",
            "provider": "anthropic",
            "baseUrl": mock_url,
            "apiKey": "sk-ant-mock-key",
        }],
        "sessionDefaultSettings": {"model": DROID_MODEL},
    });
    serde_json::to_string_pretty(&settings).unwrap_or_default()
}

/// `$GEMINI_CLI_HOME/.gemini/settings.json`: API-key auth (0.61 asks to authenticate without a
/// selected type), no telemetry, no update checks.
pub fn gemini_settings() -> String {
    let settings = json!({
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "privacy": {"usageStatisticsEnabled": false},
        "telemetry": {"enabled": false},
        "general": {"disableAutoUpdate": true, "disableUpdateNag": true},
    });
    serde_json::to_string_pretty(&settings).unwrap_or_default()
}

/// A file the tool-use prompts can point at.
pub fn write_project_files(work: &Path) -> anyhow::Result<()> {
    std::fs::write(
        work.join("README.md"),
        "# Mock project\n\nA file for the agents to look at.\n",
    )?;
    std::fs::write(work.join("hello.txt"), "hello from the test project\n")?;
    Ok(())
}
