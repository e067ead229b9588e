//! Unit tests of doctor: machines made of a scratch directory, an environment and the agents
//! said to be found.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde_json::Value;

use super::*;
use crate::agents::installed::Place;

/// A scratch machine: `home/`, `config/`, `data/` under one directory, removed on drop.
struct Machine {
    root: PathBuf,
    vars: Vec<(String, String)>,
    found: Vec<Found>,
    notes: Vec<Note>,
    tap: Option<bool>,
    now: SystemTime,
}

impl Machine {
    fn new(name: &str) -> Machine {
        let root =
            std::env::temp_dir().join(format!("acp-usage-doctor-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("home")).unwrap();
        let vars = vec![
            ("HOME".to_owned(), root.join("home").display().to_string()),
            ("XDG_CONFIG_HOME".to_owned(), root.join("config").display().to_string()),
            ("XDG_DATA_HOME".to_owned(), root.join("data").display().to_string()),
        ];
        let (found, notes) = (Vec::new(), Vec::new());
        Machine { root, vars, found, notes, tap: None, now: SystemTime::now() }
    }

    fn home(&self) -> PathBuf {
        self.root.join("home")
    }

    fn set(&mut self, name: &str, value: impl Into<String>) -> &mut Machine {
        self.vars.retain(|(n, _)| n != name);
        self.vars.push((name.to_owned(), value.into()));
        self
    }

    fn write(&self, relative: &str, text: &str) -> PathBuf {
        let path = self.root.join(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        path
    }

    /// Says the agent of profile `name` was found on PATH.
    fn with_agent(&mut self, name: &str) -> &mut Machine {
        let profile = Profile::named(name).unwrap();
        let launch = &profile.launches()[0];
        let path = self.root.join("bin").join(launch.program);
        self.found.push(Found {
            profile,
            launch,
            path,
            place: Place::Path,
            registry: None,
            editor_env: Default::default(),
        });
        self
    }

    fn report(&self) -> Report {
        let vars = self.vars.clone();
        let env = move |name: &str| vars.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone());
        // Only the scratch machine's files: the test's working directory must not count.
        let root = self.root.clone();
        let read_file = move |path: &Path| {
            path.starts_with(&root).then(|| std::fs::read_to_string(path).ok())?
        };
        gather(&Inputs {
            env: &env,
            read_file: &read_file,
            found: self.found.clone(),
            notes: self.notes.clone(),
            search: Search {
                path: Some(self.root.join("bin").into()),
                home: Some(self.home()),
                npm_prefix: None,
                editor_dirs: vec![("Zed".into(), self.root.join("zed"))],
                zed: None,
            },
            config: None,
            catalog: None,
            tap: self.tap,
            now: self.now,
            connect_timeout: Duration::from_secs(1),
        })
    }
}

impl Drop for Machine {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

fn only<'a>(report: &'a Report, agent: Option<&str>, check: &str) -> Vec<&'a Finding> {
    report.findings.iter().filter(|f| f.agent == agent && f.check == check).collect()
}

fn one<'a>(report: &'a Report, agent: Option<&str>, check: &str) -> &'a Finding {
    let found = only(report, agent, check);
    assert_eq!(found.len(), 1, "{agent:?} {check}: {found:#?}");
    found[0]
}

#[test]
fn a_claude_settings_base_url_fails_and_names_the_file() {
    let mut m = Machine::new("claude-override");
    m.with_agent("claude");
    let settings = m.write(
        "home/.claude/settings.json",
        r#"{"env":{"ANTHROPIC_BASE_URL":"http://127.0.0.1:9"}}"#,
    );
    let report = m.report();
    let fails: Vec<_> = only(&report, Some("claude"), "tap")
        .into_iter()
        .filter(|f| f.status == Status::Fail)
        .collect();
    assert_eq!(fails.len(), 1, "{:#?}", report.findings);
    assert_eq!(fails[0].path.as_deref(), Some(settings.as_path()));
    assert!(
        fails[0].message.starts_with(&format!("{} sets ANTHROPIC_BASE_URL", settings.display()))
    );
    assert_eq!(report.exit_code(), 1);
    let text = render::text(&report);
    let line = text.lines().find(|l| l.starts_with("FAIL")).unwrap();
    assert!(line.starts_with("FAIL  claude     tap: "), "{line}");
    assert!(
        text.trim_end()
            .ends_with("1 problem (claude tap), 0 warnings: exit 1, something will not work."),
        "{text}"
    );

    // Without the override the same machine is fine, and says the tap can point Claude Code.
    std::fs::write(&settings, r#"{"env":{"DISABLE_TELEMETRY":"1"}}"#).unwrap();
    let report = m.report();
    assert_eq!(report.exit_code(), 0, "{:#?}", report.findings);
    let tap = one(&report, Some("claude"), "tap");
    assert_eq!(tap.status, Status::Ok);
    assert!(
        tap.message.starts_with("can point it (anthropic → https://api.anthropic.com); on here"),
        "{}",
        tap.message
    );
}

#[test]
fn the_tap_being_on_or_off_is_said() {
    let mut m = Machine::new("tap-on");
    m.with_agent("claude");
    // On by default, and with `--tap`.
    assert!(one(&m.report(), Some("claude"), "tap").message.ends_with("; on here"));
    m.tap = Some(true);
    assert!(one(&m.report(), Some("claude"), "tap").message.ends_with("; on here"));
    // `--tap off`, and `tap = false` in the config, turn it off.
    m.tap = Some(false);
    assert!(one(&m.report(), Some("claude"), "tap").message.contains("; off here"));
    m.tap = None;
    m.write("config/acp-usage/config.toml", "tap = false\n");
    let report = m.report();
    assert!(one(&report, Some("claude"), "tap").message.contains("; off here"));
    assert_eq!(one(&report, None, "config").status, Status::Ok);
    // The command line wins over the file.
    m.tap = Some(true);
    assert!(one(&m.report(), Some("claude"), "tap").message.ends_with("; on here"));
}

#[test]
fn qwen_model_providers_with_a_base_url_fail_and_its_oauth_login_warns() {
    let mut m = Machine::new("qwen");
    m.with_agent("qwen");
    let settings = m.write(
        "home/.qwen/settings.json",
        r#"{"modelProviders":{"openai":[{"id":"gpt-5.2","baseUrl":"https://gw.example/v1"}]}}"#,
    );
    let report = m.report();
    let fail = only(&report, Some("qwen"), "tap").into_iter().find(|f| f.status == Status::Fail);
    let fail = fail.unwrap_or_else(|| panic!("{:#?}", report.findings));
    assert_eq!(fail.path.as_deref(), Some(settings.as_path()));
    assert!(fail.message.contains("modelProviders"), "{}", fail.message);
    assert_eq!(report.exit_code(), 1);

    // A provider without a base URL of its own takes the variables: nothing defeats the tap.
    std::fs::write(&settings, r#"{"modelProviders":{"openai":[{"id":"gpt-5.2"}]}}"#).unwrap();
    assert_eq!(m.report().exit_code(), 0);

    // The Qwen OAuth login: calls the tap cannot see, and some no record of qwen's shows.
    std::fs::write(&settings, r#"{"security":{"auth":{"selectedType":"qwen-oauth"}}}"#).unwrap();
    let report = m.report();
    let warn = only(&report, Some("qwen"), "tap").into_iter().find(|f| f.status == Status::Warn);
    assert!(warn.unwrap().message.contains("Qwen OAuth"));
    assert_eq!(report.exit_code(), 0);
}

#[test]
fn a_login_the_tap_cannot_point_is_info_when_records_count_every_call() {
    let mut m = Machine::new("copilot");
    m.with_agent("copilot");
    let report = m.report();
    let tap = one(&report, Some("copilot"), "tap");
    assert_eq!(tap.status, Status::Info);
    assert!(tap.message.contains("GitHub login"), "{}", tap.message);
    // With a BYOK provider, that is what the tap points.
    m.set("COPILOT_PROVIDER_BASE_URL", "https://byok.example/v1");
    let tap = one(&m.report(), Some("copilot"), "tap").clone();
    assert_eq!(tap.status, Status::Ok);
    assert!(tap.message.contains("copilot-provider → https://byok.example/v1"), "{}", tap.message);
}

#[test]
fn transcripts_found_or_not() {
    let mut m = Machine::new("transcripts");
    m.with_agent("codex").with_agent("opencode").with_agent("vibe");
    let report = m.report();
    let codex = one(&report, Some("codex"), "transcripts");
    assert_eq!(codex.status, Status::Warn);
    assert_eq!(codex.path.as_deref(), Some(m.home().join(".codex").as_path()));
    assert!(codex.message.contains("not found"), "{}", codex.message);
    // Vibe's ACP counters are exact: no transcript is read, and nothing is missing.
    assert_eq!(one(&report, Some("vibe"), "transcripts").status, Status::Info);
    // Missing transcripts degrade figures; they do not fail.
    assert_eq!(report.exit_code(), 0);

    std::fs::create_dir_all(m.home().join(".codex/sessions")).unwrap();
    m.write("data/opencode/opencode.db", "x");
    let report = m.report();
    let codex = one(&report, Some("codex"), "transcripts");
    assert_eq!((codex.status, codex.message.ends_with("(found)")), (Status::Ok, true));
    // opencode's is a database file, where its variables say.
    let opencode = one(&report, Some("opencode"), "transcripts");
    assert_eq!(opencode.status, Status::Ok);
    assert_eq!(opencode.path.as_deref(), Some(m.root.join("data/opencode/opencode.db").as_path()));
}

#[test]
fn no_agent_found_says_where_it_looked() {
    let m = Machine::new("none");
    let report = m.report();
    assert!(report.agents.is_empty());
    let none = one(&report, None, "agents");
    assert_eq!(none.status, Status::Warn);
    assert!(none.message.contains("claude-agent-acp"), "{}", none.message);
    assert!(none.message.contains("PATH (1 directories)"), "{}", none.message);
    assert!(none.message.contains(&format!("Zed's agents in {}", m.root.join("zed").display())));
    assert!(render::summary(&report).starts_with("no agent found; no problem, 1 warning"));
}

#[test]
fn a_ledger_that_cannot_be_created_fails_and_doctor_creates_none() {
    let mut m = Machine::new("ledger");
    // Not there yet, in a directory that can be made: fine, and left uncreated.
    let report = m.report();
    let ledger = one(&report, None, "ledger");
    assert_eq!(ledger.status, Status::Ok, "{}", ledger.message);
    assert!(ledger.message.contains("not created yet"));
    assert!(!m.root.join("data").exists(), "doctor made the ledger's directory");

    // Under a file: nobody can create it, root included.
    let blocker = m.write("blocker", "");
    m.set("ACP_USAGE_LEDGER", blocker.join("ledger.db").display().to_string());
    let report = m.report();
    let ledger = one(&report, None, "ledger");
    assert_eq!(ledger.status, Status::Fail, "{}", ledger.message);
    assert!(ledger.message.contains("is not a directory"), "{}", ledger.message);
    assert_eq!(report.exit_code(), 1);

    // Turned off: said, not an error; OTLP then has nothing to send.
    m.set("ACP_USAGE_LEDGER", "off");
    m.set("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9");
    let report = m.report();
    assert_eq!(one(&report, None, "ledger").status, Status::Info);
    assert_eq!(one(&report, None, "otlp").status, Status::Warn);
}

#[cfg(unix)]
#[test]
fn a_read_only_ledger_fails_unless_run_as_root() {
    use std::os::unix::fs::PermissionsExt;
    let mut m = Machine::new("ledger-ro");
    let path = m.root.join("ro/ledger.db");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    drop(crate::sinks::ledger::Store::open(&path).unwrap());
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o444)).unwrap();
    m.set("ACP_USAGE_LEDGER", path.display().to_string());
    let status = one(&m.report(), None, "ledger").status;
    // SAFETY: geteuid only reads the process's credentials.
    let root = unsafe { libc::geteuid() } == 0;
    // Root may write anything, so the ledger is writable then.
    assert_eq!(status, if root { Status::Ok } else { Status::Fail });
}

#[test]
fn an_existing_ledger_is_read_without_a_trace() {
    let mut m = Machine::new("ledger-read");
    let path = m.root.join("ledger.db");
    drop(crate::sinks::ledger::Store::open(&path).unwrap());
    let before = listing(&m.root);
    m.set("ACP_USAGE_LEDGER", path.display().to_string());
    let report = m.report();
    let ledger = one(&report, None, "ledger");
    assert_eq!(ledger.status, Status::Ok, "{}", ledger.message);
    assert!(ledger.message.contains("0 calls; writable"), "{}", ledger.message);
    // A read-only SQLite connection would have left a -wal and a -shm beside it.
    assert_eq!(listing(&m.root), before);
}

fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn otlp_reachable_or_not_and_never_its_header_values() {
    let mut m = Machine::new("otlp");
    assert_eq!(one(&m.report(), None, "otlp").status, Status::Info);

    // A port nobody listens on: bound, then let go.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    m.set("OTEL_EXPORTER_OTLP_ENDPOINT", format!("http://user:pw@{closed}"));
    m.set("OTEL_EXPORTER_OTLP_HEADERS", "x-api-key=sekret-value");
    let report = m.report();
    let otlp = one(&report, None, "otlp");
    assert_eq!(otlp.status, Status::Fail, "{}", otlp.message);
    assert!(
        otlp.message.starts_with(&format!("http://{closed}/v1/metrics not reachable")),
        "{}",
        otlp.message
    );
    assert_eq!(report.exit_code(), 1);

    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let open = listener.local_addr().unwrap();
    m.set("OTEL_EXPORTER_OTLP_ENDPOINT", format!("http://{open}"));
    let report = m.report();
    let otlp = one(&report, None, "otlp");
    assert_eq!(otlp.status, Status::Ok, "{}", otlp.message);
    assert!(
        otlp.message.ends_with("reachable; 1 header set (values not shown)"),
        "{}",
        otlp.message
    );
    for out in [render::text(&report), render::json(&report)] {
        assert!(!out.contains("sekret") && !out.contains("pw@"), "{out}");
    }

    // An endpoint that is not a URL: the export cannot start.
    m.set("OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4318");
    assert_eq!(one(&m.report(), None, "otlp").status, Status::Fail);
}

#[test]
fn the_catalog_is_old_after_ninety_days() {
    let mut m = Machine::new("catalog");
    let taken = own::embedded_taken();
    m.now = taken + Duration::from_secs(10 * 86_400);
    let catalog = one(&m.report(), None, "catalog").clone();
    assert_eq!(catalog.status, Status::Ok);
    assert!(
        catalog.message.contains("embedded: LiteLLM 1.109.1 of 2026-11-22 (10 days old)"),
        "{}",
        catalog.message
    );
    m.now = taken + Duration::from_secs(91 * 86_400);
    let catalog = one(&m.report(), None, "catalog").clone();
    assert_eq!(catalog.status, Status::Warn);
    assert!(catalog.message.contains("91 days old"), "{}", catalog.message);

    // A newer LiteLLM file layered over it is what counts, and is listed.
    let file = m.write(
        "config/acp-usage/litellm.json",
        r#"{"new-model": {"max_input_tokens": 1000, "input_cost_per_token": 1e-6,
            "output_cost_per_token": 2e-6, "litellm_provider": "openai", "mode": "chat"}}"#,
    );
    m.write("config/acp-usage/config.toml", "catalog = \"litellm.json\"\n");
    m.now = SystemTime::now() + Duration::from_secs(86_400);
    let report = m.report();
    let lines = only(&report, None, "catalog");
    assert_eq!(lines.len(), 2, "{lines:#?}");
    assert_eq!(lines[0].status, Status::Ok, "{}", lines[0].message);
    assert!(lines[0].message.contains("newest LiteLLM file 1 days old"), "{}", lines[0].message);
    assert_eq!(lines[1].path.as_deref(), Some(file.as_path()));
    assert!(lines[1].message.contains("LiteLLM catalog, 1 models"), "{}", lines[1].message);
}

#[test]
fn a_config_that_does_not_load_fails() {
    let mut m = Machine::new("config");
    let path = m.write("config/acp-usage/config.toml", "default_window = \"big\"\n");
    let report = m.report();
    let config = one(&report, None, "config");
    assert_eq!(config.status, Status::Fail);
    assert!(config.message.contains(&path.display().to_string()), "{}", config.message);
    // Named but missing: acp-usage would not start either.
    m.set("ACP_USAGE_CONFIG", m.root.join("nope.toml").display().to_string());
    assert_eq!(one(&m.report(), None, "config").status, Status::Fail);
}

#[test]
fn a_config_key_nothing_reads_is_named() {
    let m = Machine::new("config-typo");
    m.write("config/acp-usage/config.toml", "tap = true\n[budget]\nsesion = 5.0\n[oltp]\n");
    let config = one(&m.report(), None, "config").clone();
    assert_eq!(config.status, Status::Warn, "{}", config.message);
    assert!(config.message.contains("`budget.sesion`, `oltp`"), "{}", config.message);
    m.write("config/acp-usage/config.toml", "tap = true\n[budget]\nsession = 5.0\n");
    assert_eq!(one(&m.report(), None, "config").status, Status::Ok);
}

#[test]
fn json_has_stable_fields() {
    let mut m = Machine::new("json");
    m.with_agent("claude");
    m.write("home/.claude/settings.json", r#"{"env":{"ANTHROPIC_BASE_URL":"http://127.0.0.1:9"}}"#);
    let report = m.report();
    let doc: Value = serde_json::from_str(&render::json(&report)).unwrap();
    assert_eq!(doc["agents"], serde_json::json!(["claude"]));
    assert_eq!(doc["exit"], 1);
    assert_eq!(doc["summary"]["fail"], 1);
    let findings = doc["findings"].as_array().unwrap();
    assert_eq!(findings.len(), report.findings.len());
    for f in findings {
        let keys: Vec<&str> = f.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(keys, ["agent", "check", "status", "message", "path"], "{f}");
        assert!(["ok", "info", "warn", "fail"].contains(&f["status"].as_str().unwrap()), "{f}");
    }
    let fail = findings.iter().find(|f| f["status"] == "fail").unwrap();
    assert_eq!((fail["agent"].as_str(), fail["check"].as_str()), (Some("claude"), Some("tap")));
    assert!(fail["path"].as_str().unwrap().ends_with("home/.claude/settings.json"));
    let ledger = findings.iter().find(|f| f["check"] == "ledger").unwrap();
    assert!(ledger["agent"].is_null());
}

#[test]
fn urls_are_shown_without_secrets() {
    assert_eq!(show::url("https://u:p@gw.example:8443/v1?key=k#x"), "https://gw.example:8443/v1");
    assert_eq!(show::url("nonsense"), "(not a URL)");
    assert_eq!(show::size(512), "512 B");
    assert_eq!(show::size(3 * 1024 * 1024 / 2), "1.5 MiB");
}

#[test]
fn a_zed_registry_agent_is_found_by_its_command_and_a_note_is_info() {
    let mut m = Machine::new("registry");
    let settings = m.write("config/zed/settings.json", "{}");
    m.found.push(crate::test_support::claude_from_zed_registry(
        settings.clone(),
        &[("ANTHROPIC_API_KEY", "sk-ant-secret")],
    ));
    let codex = Profile::named("codex").unwrap();
    m.notes.push(Note {
        profile: Some(codex),
        id: Some("codex-acp".into()),
        message: "codex-acp, added in Zed from the ACP registry: not downloaded yet".into(),
        path: Some(m.root.join("registry.json")),
    });
    let report = m.report();
    assert_eq!(report.agents, ["claude"]);
    let found = one(&report, Some("claude"), "found");
    assert_eq!(found.status, Status::Ok);
    assert_eq!(
        found.message,
        "claude-acp added in Zed from the ACP registry (npx), run as \
         `npx -y @agentclientprotocol/claude-agent-acp@0.33.1`: profile claude"
    );
    assert_eq!(found.path.as_deref(), Some(settings.as_path()));
    let note = one(&report, Some("codex"), "registry");
    assert_eq!(note.status, Status::Info);
    assert_eq!(note.path, Some(m.root.join("registry.json")));
    // The variables Zed gives the agent may hold keys: never shown.
    assert!(!render::text(&report).contains("sk-ant-secret"));
    assert!(!render::json(&report).contains("sk-ant-secret"));
}

#[test]
fn zeds_meter_is_said_when_off_with_the_fix() {
    let m = Machine::new("zed-meter");
    // No Zed settings: nothing to say.
    assert!(only(&m.report(), None, "zed").is_empty());
    let settings = m.write("config/zed/settings.json", "// mine\n{\"vim_mode\": true}\n");
    let off = m.report();
    let finding = one(&off, None, "zed");
    assert_eq!((finding.status, finding.path.as_deref()), (Status::Info, Some(settings.as_path())));
    assert!(finding.message.starts_with("Zed's plan-usage meter is off"), "{}", finding.message);
    let fix = format!(
        "`acp-usage setup zed` turns it on (or add \"agent\": {{\"show_usage_status\": true}} to {})",
        settings.display()
    );
    assert!(finding.message.ends_with(&fix), "{}", finding.message);
    m.write("config/zed/settings.json", "{\"agent\": {\"show_usage_status\": false}}");
    let chosen = m.report();
    assert!(one(&chosen, None, "zed").message.contains("sets agent.show_usage_status to false"));
    m.write("config/zed/settings.json", "{\"agent\": {\n  \"show_usage_status\": true,\n}}");
    assert_eq!(one(&m.report(), None, "zed").status, Status::Ok);
}
