//! Factory Droid (`droid exec --output-format acp-daemon`, npm `droid`; `agentInfo.name`
//! `@factory/cli`).
//!
//! Droid 0.215 sends no usage over ACP: no `usage_update`, nothing but `stopReason` in a prompt
//! result. Factory's own models go through Factory's API after a Factory login; a custom
//! ("bring your own key") model calls its provider directly, at the `baseUrl` of its entry:
//! `customModels` in `~/.factory/settings.json` (`model`, `provider` `anthropic` / `openai` /
//! `generic-chat-completion-api`, `baseUrl`, `apiKey`, `displayName`, optional `id`), or
//! `custom_models` in `~/.factory/config.json` (the same in snake case: `base_url`, `api_key`,
//! `model_display_name`, `max_tokens`, …); `~` is `$FACTORY_HOME_OVERRIDE` when set. Its model
//! option value is then `custom:<display name, blanks as dashes>-<n>` (the n-th entry of that
//! name), which [`Droid::resolve_model`] maps back to the entry's `model`. With
//! `FACTORY_AIRGAP_ENABLED=true` Droid starts sessions without a Factory login and offers only
//! the custom models.
//!
//! Its session files (`~/.factory/sessions/<cwd>/<id>.jsonl` and `<id>.settings.json`) keep the
//! messages and only session-cumulative counters (`tokenUsage`), so they are not read. The tap
//! sees every call of a custom model: Droid reads no base-URL variable, but a runtime settings
//! file (`FACTORY_RUNTIME_SETTINGS_PATH`, the layer above every other) whose custom models are
//! copies of the user's with only `baseUrl` changed, under the same ids, replaces them (see
//! [`point_droid`]). Without the tap, every figure is an estimate.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::acp::split_bracket;
use super::{Agent, Launch, Package, Untapped};
use crate::sources::tap::point::{Env, Pointing, sanitize};

pub struct Droid;

impl Agent for Droid {
    fn name(&self) -> &'static str {
        "droid"
    }

    fn about(&self) -> &'static str {
        "Factory Droid (droid exec --output-format acp-daemon)"
    }

    fn recognises(&self, word: &str) -> bool {
        // agentInfo.name is "@factory/cli" (title "Factory Droid (Daemon)"); the command is
        // `droid` (npm `droid` or `@factory/cli`, whose platform package's binary is `droid`).
        word == "droid"
            || word.starts_with("droid@")
            || word.starts_with("droid ")
            || word.starts_with("@factory/cli")
            || word.contains("factory droid")
    }

    fn resolve_model(&self, value: &str) -> (Option<String>, Option<u64>) {
        let value = split_bracket(value).0;
        if value.starts_with("custom:") {
            let env = |name: &str| std::env::var(name).ok();
            let read = |path: &Path| std::fs::read_to_string(path).ok();
            let models = custom_models(&Env { var: &env, read_file: &read });
            if let Some(model) = models.iter().find(|m| m.id == value) {
                return (Some(model.model.clone()), None);
            }
        }
        (Some(value.to_string()), None)
    }

    fn unrecorded_side_calls(&self, _: Option<&str>) -> &'static [&'static str] {
        &["session title"]
    }

    fn point(&self, p: &mut Pointing, env: &Env) {
        point_droid(p, env);
    }

    fn untapped(&self, _: &Env) -> Vec<Untapped> {
        vec![Untapped {
            why: "Factory's own models are called through Factory's API after a Factory login; \
                  only custom models (customModels / custom_models with a baseUrl) are tapped"
                .into(),
            recorded: false,
        }]
    }

    fn launches(&self) -> &'static [Launch] {
        &[Launch {
            title: "Factory Droid",
            program: "droid",
            args: &["exec", "--output-format", "acp-daemon"],
            package: Package::Npm("droid"),
            registry_id: Some("factory-droid"),
        }]
    }
}

/// A custom model as Droid reads it, in its settings' (camel-case) shape.
#[derive(Debug, Clone, PartialEq)]
struct CustomModel {
    /// The id Droid gives it (its model option value).
    id: String,
    /// The provider's model id.
    model: String,
    /// The entry, camel-case, with `id` set.
    entry: Map<String, Value>,
}

/// Droid's directory: `$FACTORY_HOME_OVERRIDE/.factory`, else `~/.factory`.
fn factory_dir(env: &Env) -> Option<PathBuf> {
    env.set("FACTORY_HOME_OVERRIDE")
        .or_else(|| env.set("HOME"))
        .map(|h| Path::new(&h).join(".factory"))
}

/// A JSON object from a file, comments and trailing commas allowed (Droid's reader allows them).
fn object_in(env: &Env, path: &Path) -> Option<Map<String, Value>> {
    match super::settings_json(&(env.read_file)(path)?)? {
        Value::Object(map) => Some(map),
        _ => None,
    }
}

/// Droid's id for the n-th entry named `name`: `custom:<name, blanks as dashes>-<n>`.
fn custom_id(name: &str, n: usize) -> String {
    let name: Vec<&str> = name.split_whitespace().collect();
    format!("custom:{}-{n}", name.join("-"))
}

/// Entries of a `customModels` list (settings files, camel case) as Droid keeps them: a `model`
/// and `provider`, a `baseUrl` or `bedrock`, and no placeholder key; ids as Droid gives them.
fn settings_entries(list: &[Value]) -> Vec<CustomModel> {
    let kept: Vec<&Map<String, Value>> = list
        .iter()
        .filter_map(Value::as_object)
        .filter(|e| e.get("model").is_some_and(Value::is_string))
        .filter(|e| e.get("provider").is_some_and(Value::is_string))
        .filter(|e| {
            e.get("baseUrl").is_some_and(Value::is_string)
                || e.get("bedrock").is_some_and(Value::is_object)
        })
        .filter(|e| !placeholder_key(e.get("apiKey")))
        .collect();
    let names: Vec<String> = kept
        .iter()
        .map(|e| {
            e.get("displayName")
                .and_then(Value::as_str)
                .or(e["model"].as_str())
                .unwrap_or_default()
                .to_owned()
        })
        .collect();
    kept.into_iter()
        .enumerate()
        .map(|(k, e)| {
            let n = names[..k].iter().filter(|other| same_name(other, &names[k])).count();
            let id = match e.get("id").and_then(Value::as_str) {
                Some(id) => id.to_owned(),
                None => custom_id(&names[k], n),
            };
            let mut entry = e.clone();
            entry.insert("id".into(), Value::String(id.clone()));
            CustomModel { id, model: e["model"].as_str().unwrap_or_default().to_owned(), entry }
        })
        .collect()
}

/// Whether two display names give the same id stem.
fn same_name(a: &str, b: &str) -> bool {
    a.split_whitespace().eq(b.split_whitespace())
}

/// The placeholder keys of Droid's examples, which it skips.
fn placeholder_key(key: Option<&Value>) -> bool {
    matches!(key.and_then(Value::as_str), Some("YOUR_OPENAI_API_KEY" | "YOUR_API_KEY"))
}

/// `custom_models` of `config.json` (snake case) in the settings' shape.
fn config_entries(list: &[Value]) -> Vec<CustomModel> {
    const RENAMED: &[(&str, &str)] = &[
        ("model_display_name", "displayName"),
        ("base_url", "baseUrl"),
        ("api_key", "apiKey"),
        ("max_context_limit", "maxContextLimit"),
        ("enable_thinking", "enableThinking"),
        ("thinking_max_tokens", "thinkingMaxTokens"),
        ("max_tokens", "maxOutputTokens"),
        ("reasoning_effort", "reasoningEffort"),
        ("extra_headers", "extraHeaders"),
        ("extra_args", "extraArgs"),
    ];
    let camel: Vec<Value> = list
        .iter()
        .filter_map(Value::as_object)
        .map(|e| {
            let mut out = Map::new();
            for (key, value) in e {
                match key.as_str() {
                    "supports_images" => {
                        if value == &Value::Bool(false) {
                            out.insert("noImageSupport".into(), Value::Bool(true));
                        }
                    }
                    // Config entries carry no id of their own.
                    "id" => {}
                    _ => {
                        let name =
                            RENAMED.iter().find(|(k, _)| k == key).map_or(key.as_str(), |(_, v)| v);
                        out.insert(name.to_owned(), value.clone());
                    }
                }
            }
            Value::Object(out)
        })
        .collect();
    settings_entries(&camel)
}

/// The custom models Droid's settings give it, as the layers it reads merge them (the first of
/// an id wins): the runtime settings file (`$FACTORY_RUNTIME_SETTINGS_PATH`), then the user's
/// `settings.json`, then `config.json` (whose entries also yield to a `settings.json` entry of
/// the same model). A project's `.factory/settings.json` is not read.
fn custom_models(env: &Env) -> Vec<CustomModel> {
    let list = |map: &Option<Map<String, Value>>, key: &str| {
        map.as_ref().and_then(|m| m.get(key)).and_then(Value::as_array).cloned().unwrap_or_default()
    };
    let runtime =
        env.set("FACTORY_RUNTIME_SETTINGS_PATH").and_then(|p| object_in(env, Path::new(p.trim())));
    let dir = factory_dir(env);
    let settings = dir.as_ref().and_then(|d| object_in(env, &d.join("settings.json")));
    let config = dir.as_ref().and_then(|d| object_in(env, &d.join("config.json")));
    let user = settings_entries(&list(&settings, "customModels"));
    let legacy: Vec<CustomModel> = config_entries(&list(&config, "custom_models"))
        .into_iter()
        .filter(|c| !user.iter().any(|u| u.model == c.model || u.id == c.id))
        .collect();
    let mut all: Vec<CustomModel> = Vec::new();
    for model in
        settings_entries(&list(&runtime, "customModels")).into_iter().chain(user).chain(legacy)
    {
        if !all.iter().any(|known| known.id == model.id) {
            all.push(model);
        }
    }
    all
}

/// Droid reads custom models' base URLs from its settings files only. The runtime settings file
/// is the layer above all others, and its custom models win over any lower one's of the same
/// id: acp-usage writes one (in its temporary directory, readable by the user only: it names
/// the tap's URL) holding the user's runtime settings, if any, and a copy of each custom model
/// with an HTTP `baseUrl`, with only `baseUrl` changed, to a route (`droid-<n>-<model>`) whose
/// upstream is the original, and sets `FACTORY_RUNTIME_SETTINGS_PATH` to it. The SDKs append
/// their paths (`/v1/messages`, `/chat/completions`) to the base URL, which the tap forwards.
/// A `--settings` option on Droid's command line replaces the variable (not tapped then).
fn point_droid(p: &mut Pointing, env: &Env) {
    let mut routed = Vec::new();
    for (k, model) in custom_models(env).into_iter().enumerate() {
        let Some(base) = model.entry.get("baseUrl").and_then(Value::as_str) else { continue };
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            continue;
        }
        let route = p.route(&format!("droid-{k}-{}", sanitize(&model.model)), base);
        routed.push((model.entry, route));
    }
    if routed.is_empty() {
        return;
    }
    let runtime = env
        .set("FACTORY_RUNTIME_SETTINGS_PATH")
        .and_then(|path| object_in(env, Path::new(path.trim())))
        .unwrap_or_default();
    // The user's own runtime entries that were not pointed stay, after the pointed ones, with
    // the ids Droid gives them.
    let own = runtime.get("customModels").and_then(Value::as_array).cloned().unwrap_or_default();
    let own: Vec<Value> = settings_entries(&own)
        .into_iter()
        .filter(|m| !routed.iter().any(|(entry, _)| entry["id"] == m.entry["id"]))
        .map(|m| Value::Object(m.entry))
        .collect();
    p.finish.push(Arc::new(move |base_url, out| {
        let mut models: Vec<Value> = routed
            .iter()
            .map(|(entry, route)| {
                let mut entry = entry.clone();
                entry.insert("baseUrl".into(), Value::String(base_url(route)));
                Value::Object(entry)
            })
            .collect();
        models.extend(own.iter().cloned());
        let mut settings = runtime.clone();
        settings.insert("customModels".into(), Value::Array(models));
        match write_runtime_settings(&Value::Object(settings)) {
            Ok(path) => {
                let path = path.display().to_string();
                out.env.push(("FACTORY_RUNTIME_SETTINGS_PATH".into(), path));
            }
            Err(e) => tracing::warn!(
                "tap: could not write Droid's runtime settings ({e}): its custom models run \
                 untapped"
            ),
        }
    }));
}

/// Writes the runtime settings file for this process's agent, readable by the user only.
fn write_runtime_settings(settings: &Value) -> std::io::Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("acp-usage-{}", whoami()));
    std::fs::create_dir_all(&dir)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))?;
    }
    forget_dead(&dir);
    static WRITTEN: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = WRITTEN.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let path = dir.join(format!("droid-settings-{}-{n}.json", std::process::id()));
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options.open(&path)?;
    std::io::Write::write_all(&mut file, json!(settings).to_string().as_bytes())?;
    Ok(path)
}

/// Removes the files written by processes that are gone (where `/proc` tells).
fn forget_dead(dir: &Path) {
    if !Path::new("/proc/self").exists() {
        return;
    }
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let pid = name.strip_prefix("droid-settings-").and_then(|rest| rest.split('-').next());
        if let Some(pid) = pid.filter(|pid| pid.parse::<u32>().is_ok())
            && !Path::new("/proc").join(pid).exists()
        {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// A name for the user's own temporary directory.
fn whoami() -> String {
    let user = std::env::var("USER").or_else(|_| std::env::var("USERNAME")).unwrap_or_default();
    sanitize(if user.is_empty() { "user" } else { &user })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agents::Profile;

    fn env_with<'a>(
        vars: &'a [(&'a str, &'a str)],
        files: &'a [(&'a str, &'a str)],
    ) -> (impl Fn(&str) -> Option<String> + 'a, impl Fn(&Path) -> Option<String> + 'a) {
        let var =
            move |name: &str| vars.iter().find(|(k, _)| *k == name).map(|(_, v)| (*v).to_owned());
        let read = move |path: &Path| {
            files.iter().find(|(p, _)| Path::new(p) == path).map(|(_, text)| (*text).to_owned())
        };
        (var, read)
    }

    const SETTINGS: &str = r#"{
        // Droid allows comments.
        "customModels": [
            {"model": "claude-sonnet-4-5", "displayName": "Mock  Sonnet", "provider": "anthropic",
             "baseUrl": "http://127.0.0.1:9999", "apiKey": "sk"},
            {"model": "gpt-5.2", "displayName": "Mock Sonnet", "provider": "openai",
             "baseUrl": "https://api.example.com/v1", "apiKey": "${MY_KEY}"},
            {"model": "x", "provider": "openai", "baseUrl": "http://h", "apiKey": "YOUR_API_KEY"},
            {"model": "br", "provider": "anthropic", "bedrock": {"awsRegion": "us-east-1"}},
        ],
    }"#;
    const CONFIG: &str = r#"{"custom_models": [
        {"model": "gpt-5.2", "model_display_name": "Dup", "base_url": "http://dup", "api_key": "k",
         "provider": "openai"},
        {"model": "glm-5", "model_display_name": "GLM 5", "base_url": "http://glm/v1",
         "api_key": "k", "provider": "generic-chat-completion-api", "max_tokens": 4096, "supports_images": false}
    ]}"#;

    #[test]
    fn custom_models_as_droid_merges_them() {
        let (var, read) = env_with(
            &[("HOME", "/h")],
            &[("/h/.factory/settings.json", SETTINGS), ("/h/.factory/config.json", CONFIG)],
        );
        let models = custom_models(&Env { var: &var, read_file: &read });
        let ids: Vec<&str> = models.iter().map(|m| m.id.as_str()).collect();
        assert_eq!(
            ids,
            ["custom:Mock-Sonnet-0", "custom:Mock-Sonnet-1", "custom:br-0", "custom:GLM-5-0"]
        );
        assert_eq!(models[0].model, "claude-sonnet-4-5");
        let glm = &models[3].entry;
        assert_eq!(glm["baseUrl"], "http://glm/v1");
        assert_eq!(glm["maxOutputTokens"], 4096);
        assert_eq!(glm["noImageSupport"], true);
        assert_eq!(glm["displayName"], "GLM 5");
    }

    #[test]
    fn pointed_through_a_runtime_settings_file() {
        let (var, read) = env_with(
            &[("HOME", "/h")],
            &[("/h/.factory/settings.json", SETTINGS), ("/h/.factory/config.json", CONFIG)],
        );
        let env = Env { var: &var, read_file: &read };
        let mut p = Pointing::default();
        point_droid(&mut p, &env);
        let upstreams: Vec<(&str, &str)> =
            p.routes.iter().map(|r| (r.name.as_str(), r.upstream.as_str())).collect();
        assert_eq!(
            upstreams,
            [
                ("droid-0-claude-sonnet-4-5", "http://127.0.0.1:9999"),
                ("droid-1-gpt-5_2", "https://api.example.com/v1"),
                ("droid-3-glm-5", "http://glm/v1"),
            ]
        );
        let resolved = p.resolve(|route| format!("http://tap/s/{route}"));
        let (name, path) = &resolved.env[0];
        assert_eq!(name, "FACTORY_RUNTIME_SETTINGS_PATH");
        let written: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let models = written["customModels"].as_array().unwrap();
        assert_eq!(models.len(), 3);
        assert_eq!(models[0]["id"], "custom:Mock-Sonnet-0");
        assert_eq!(models[0]["baseUrl"], "http://tap/s/droid-0-claude-sonnet-4-5");
        assert_eq!(models[1]["apiKey"], "${MY_KEY}");
        assert_eq!(models[2]["id"], "custom:GLM-5-0");
        // Nothing to point: no file, no variable.
        let (var, read) = env_with(&[("HOME", "/h")], &[]);
        let mut p = Pointing::default();
        point_droid(&mut p, &Env { var: &var, read_file: &read });
        assert!(p.routes.is_empty() && p.finish.is_empty());
    }

    #[test]
    fn the_users_runtime_settings_are_kept() {
        const RUNTIME: &str = r#"{"autonomyLevel": "auto-low", "customModels": [
            {"model": "m", "displayName": "Own", "provider": "anthropic", "bedrock": {}}]}"#;
        let (var, read) = env_with(
            &[("HOME", "/h"), ("FACTORY_RUNTIME_SETTINGS_PATH", "/r.json")],
            &[("/h/.factory/settings.json", SETTINGS), ("/r.json", RUNTIME)],
        );
        let mut p = Pointing::default();
        point_droid(&mut p, &Env { var: &var, read_file: &read });
        let resolved = p.resolve(|route| format!("http://tap/{route}"));
        let text = std::fs::read_to_string(&resolved.env[0].1).unwrap();
        let written: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(written["autonomyLevel"], "auto-low");
        // The pointed copies, then the user's own unpointed entry, each with its id.
        let ids: Vec<&str> = written["customModels"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|m| m["id"].as_str())
            .collect();
        assert_eq!(ids, ["custom:Mock-Sonnet-0", "custom:Mock-Sonnet-1", "custom:Own-0"]);
    }

    #[test]
    fn recognised() {
        assert_eq!(Profile::detect(Some("@factory/cli"), &[]).name(), "droid");
        let cmd = |s: &str| s.split(' ').map(String::from).collect::<Vec<_>>();
        assert_eq!(
            Profile::detect(None, &cmd("/x/.bin/droid exec --output-format acp-daemon")).name(),
            "droid"
        );
        assert_eq!(
            Profile::detect_before_start(&cmd(
                "/x/node_modules/@factory/cli-linux-x64/bin/droid exec"
            ))
            .name(),
            "droid"
        );
        assert!(Profile::detect(Some("android"), &[]).is_generic());
        assert_eq!(custom_id("Mock  Sonnet", 2), "custom:Mock-Sonnet-2");
    }
}
