//! Where opencode (and its fork kilo) read each provider's `options.baseURL`: its config files,
//! merged in its order, and a config in a variable; and the override that points them at the tap.
//!
//! opencode 1.18 merges (deep, later wins): its global directory's `config.json`,
//! `opencode.json`, `opencode.jsonc`; `$OPENCODE_CONFIG`; unless
//! `$OPENCODE_DISABLE_PROJECT_CONFIG`, `opencode.json(c)` from the git root down to the project
//! directory; `opencode.json(c)` in `.opencode` directories (the project's up to the git root,
//! `~/.opencode`) and `$OPENCODE_CONFIG_DIR`; then `$OPENCODE_CONFIG_CONTENT`. Only an
//! organisation's remote config and a system-managed one come after. kilo 7.7 does the same with
//! its names, and reads opencode's names as well. So a config in the variable that repeats the
//! user's own (if any) with each configured provider's `baseURL` at the tap wins over every file,
//! and the user's files stay as they are.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Value, json};

use crate::sources::tap::point::{Env, Pointing, sanitize};

/// The names one agent reads its config under.
#[derive(Debug)]
pub(in crate::agents) struct Layout {
    /// The variable holding a config (merged after every file).
    pub content_var: &'static str,
    /// The variable naming one more config file.
    pub file_var: &'static str,
    /// The variable naming one more config directory.
    pub dir_var: &'static str,
    /// The variable that turns project configs off.
    pub no_project_var: &'static str,
    /// The agent's directory under `$XDG_CONFIG_HOME` (else `~/.config`).
    pub app: &'static str,
    /// The files of that directory, in merge order.
    pub global_files: &'static [&'static str],
    /// The stems of project files (`<stem>.json`, `<stem>.jsonc`), in merge order.
    pub project_stems: &'static [&'static str],
    /// The names of config directories in the project and the home.
    pub dir_names: &'static [&'static str],
    /// The files read in those directories, in merge order.
    pub dir_files: &'static [&'static str],
    /// The prefix of the tap's routes (`<prefix>-<provider>`).
    pub route_prefix: &'static str,
}

/// opencode 1.18's names.
pub(in crate::agents) static OPENCODE: Layout = Layout {
    content_var: "OPENCODE_CONFIG_CONTENT",
    file_var: "OPENCODE_CONFIG",
    dir_var: "OPENCODE_CONFIG_DIR",
    no_project_var: "OPENCODE_DISABLE_PROJECT_CONFIG",
    app: "opencode",
    global_files: &["config.json", "opencode.json", "opencode.jsonc"],
    project_stems: &["opencode"],
    dir_names: &[".opencode"],
    dir_files: &["opencode.json", "opencode.jsonc"],
    route_prefix: "opencode",
};

/// kilo 7.7's names (it reads opencode's files too).
pub(in crate::agents) static KILO: Layout = Layout {
    content_var: "KILO_CONFIG_CONTENT",
    file_var: "KILO_CONFIG",
    dir_var: "KILO_CONFIG_DIR",
    no_project_var: "KILO_DISABLE_PROJECT_CONFIG",
    app: "kilo",
    global_files: &["config.json", "kilo.json", "kilo.jsonc", "opencode.json", "opencode.jsonc"],
    project_stems: &["kilo", "opencode"],
    dir_names: &[".kilocode", ".kilo"],
    dir_files: &["kilo.jsonc", "kilo.json", "opencode.jsonc", "opencode.json"],
    route_prefix: "kilo",
};

/// Whether a flag variable is on, as opencode reads one (`true` or `1`).
fn flag(env: &Env, name: &str) -> bool {
    env.set(name).is_some_and(|v| v.eq_ignore_ascii_case("true") || v == "1")
}

/// The directories from `cwd` up to its git root (or to `/` outside a repository), nearest
/// first.
fn up_to_root(cwd: &Path, exists: &dyn Fn(&Path) -> bool) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    for dir in cwd.ancestors() {
        dirs.push(dir.to_path_buf());
        if exists(&dir.join(".git")) {
            return dirs;
        }
    }
    dirs
}

/// The config files the agent reads for a project in `cwd`, lowest precedence first (whether
/// they exist or not; the variable's config comes after them all).
pub(in crate::agents) fn files(
    layout: &Layout,
    env: &Env,
    cwd: &Path,
    exists: &dyn Fn(&Path) -> bool,
) -> Vec<PathBuf> {
    let home = env.set("HOME").map(PathBuf::from);
    let config_home = env
        .set("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| home.as_ref().map(|h| h.join(".config")));
    let mut files = Vec::new();
    if let Some(global) = config_home.map(|c| c.join(layout.app)) {
        files.extend(layout.global_files.iter().map(|f| global.join(f)));
    }
    files.extend(env.set(layout.file_var).map(PathBuf::from));
    let project = !flag(env, layout.no_project_var);
    let ups = up_to_root(cwd, exists);
    if project {
        // Found nearest first, merged farthest first; in one directory `.json` before `.jsonc`.
        for stem in layout.project_stems {
            for dir in ups.iter().rev() {
                files.push(dir.join(format!("{stem}.json")));
                files.push(dir.join(format!("{stem}.jsonc")));
            }
        }
    }
    let mut dirs: Vec<PathBuf> = Vec::new();
    if project {
        for dir in &ups {
            dirs.extend(layout.dir_names.iter().map(|name| dir.join(name)));
        }
    }
    if let Some(home) = &home {
        dirs.extend(layout.dir_names.iter().map(|name| home.join(name)));
    }
    dirs.extend(env.set(layout.dir_var).map(PathBuf::from));
    for dir in dirs {
        files.extend(layout.dir_files.iter().map(|f| dir.join(f)));
    }
    files
}

/// A config's text with `{env:NAME}` replaced by the variable's value (empty when unset), as
/// the agent substitutes before parsing.
fn substitute(text: &str, env: &Env) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("{env:") {
        let Some(len) = rest[start..].find('}') else { break };
        out.push_str(&rest[..start]);
        let name = &rest[start + "{env:".len()..start + len];
        out.push_str(&(env.var)(name).unwrap_or_default());
        rest = &rest[start + len + 1..];
    }
    out.push_str(rest);
    out
}

/// Each provider's `options.baseURL` in `config`, over what `urls` had.
fn collect(config: &Value, urls: &mut BTreeMap<String, String>) {
    let Some(providers) = config.get("provider").and_then(Value::as_object) else { return };
    for (name, provider) in providers {
        if let Some(url) = provider.pointer("/options/baseURL").and_then(Value::as_str) {
            urls.insert(name.clone(), url.trim().to_owned());
        }
    }
}

/// A base URL split into the origin (the route's upstream) and its path (kept after the tap's
/// URL, so that an agent that inspects the path, as kilo does for its gateway, sees it unchanged).
fn split_origin(url: &str) -> Option<(&str, &str)> {
    let scheme = url.find("://")? + 3;
    let (http, https) = (url.starts_with("http://"), url.starts_with("https://"));
    if !(http || https) {
        return None;
    }
    let path = url[scheme..].find('/').map_or(url.len(), |i| scheme + i);
    Some((&url[..path], url[path..].trim_end_matches('/')))
}

/// Points every provider whose `options.baseURL` a config the agent reads sets: the agent's
/// config variable gets the user's own config (if any) with each such provider's `baseURL` at a
/// route (`<prefix>-<provider>`) to the effective value, path kept. A user's variable that does
/// not parse is left alone (the agent would refuse it too).
pub(in crate::agents) fn point(
    p: &mut Pointing,
    env: &Env,
    layout: &'static Layout,
    cwd: &Path,
    exists: &dyn Fn(&Path) -> bool,
) {
    let mut urls = BTreeMap::new();
    for file in files(layout, env, cwd, exists) {
        let text = (env.read_file)(&file).map(|t| substitute(&t, env));
        if let Some(config) = text.and_then(|t| super::super::settings_json(&t)) {
            collect(&config, &mut urls);
        }
    }
    let mut content = json!({});
    if let Some(text) = env.set(layout.content_var) {
        match super::super::settings_json(&text) {
            Some(config @ Value::Object(_)) => {
                if let Some(resolved) = super::super::settings_json(&substitute(&text, env)) {
                    collect(&resolved, &mut urls);
                }
                content = config;
            }
            _ => return,
        }
    }
    let mut routed = Vec::new();
    for (name, url) in &urls {
        let Some((origin, path)) = split_origin(url) else { continue };
        let route = p.route(&format!("{}-{}", layout.route_prefix, sanitize(name)), origin);
        routed.push((name.clone(), route, path.to_owned()));
    }
    if routed.is_empty() {
        return;
    }
    p.finish.push(Arc::new(move |base_url, out| {
        let mut config = content.clone();
        for (name, route, path) in &routed {
            set_base_url(&mut config, name, format!("{}{path}", base_url(route)));
        }
        out.env.push((layout.content_var.to_owned(), config.to_string()));
    }));
}

/// Sets `provider.<name>.options.baseURL` in `config`, making the objects on the way.
fn set_base_url(config: &mut Value, name: &str, url: String) {
    let mut at = config;
    for key in ["provider", name, "options"] {
        if !at.get(key).is_some_and(Value::is_object) {
            at[key] = json!({});
        }
        at = &mut at[key];
    }
    at["baseURL"] = Value::String(url);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A home `/h` (config home `/h/.config`), a git repository `/h/repo` with the project in
    /// `/h/repo/app`, the files given, and the variables given.
    fn pointed(
        layout: &'static Layout,
        vars: &[(&str, &str)],
        files: &[(&str, &str)],
    ) -> (Pointing, Value) {
        let mut vars: Vec<(String, String)> =
            vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        vars.push(("HOME".into(), "/h".into()));
        let files: Vec<(PathBuf, String)> =
            files.iter().map(|(k, v)| (PathBuf::from(k), v.to_string())).collect();
        let var = |name: &str| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
        let read = |path: &Path| files.iter().find(|(k, _)| k == path).map(|(_, v)| v.clone());
        let env = Env { var: &var, read_file: &read };
        let mut p = Pointing::default();
        point(&mut p, &env, layout, Path::new("/h/repo/app"), &|path| {
            path == Path::new("/h/repo/.git")
        });
        let resolved = p.resolve(|route| format!("http://tap/{route}"));
        let content = resolved.env.iter().find(|(k, _)| k == layout.content_var);
        let content = content.map(|(_, v)| serde_json::from_str(v).unwrap()).unwrap_or_default();
        (p, content)
    }

    fn url<'a>(config: &'a Value, provider: &str) -> &'a Value {
        &config["provider"][provider]["options"]["baseURL"]
    }

    #[test]
    fn files_in_the_agents_order() {
        let var = |name: &str| match name {
            "HOME" => Some("/h".to_owned()),
            "OPENCODE_CONFIG" => Some("/c/extra.json".to_owned()),
            _ => None,
        };
        let env = Env { var: &var, read_file: &|_| None };
        let files =
            files(&OPENCODE, &env, Path::new("/h/repo/app"), &|p| p == Path::new("/h/repo/.git"));
        let names: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
        assert_eq!(
            names,
            [
                "/h/.config/opencode/config.json",
                "/h/.config/opencode/opencode.json",
                "/h/.config/opencode/opencode.jsonc",
                "/c/extra.json",
                "/h/repo/opencode.json",
                "/h/repo/opencode.jsonc",
                "/h/repo/app/opencode.json",
                "/h/repo/app/opencode.jsonc",
                "/h/repo/app/.opencode/opencode.json",
                "/h/repo/app/.opencode/opencode.jsonc",
                "/h/repo/.opencode/opencode.json",
                "/h/repo/.opencode/opencode.jsonc",
                "/h/.opencode/opencode.json",
                "/h/.opencode/opencode.jsonc",
            ]
        );
        // Project configs off: the global ones, the home's directory and the variables' only.
        let var = |name: &str| match name {
            "HOME" => Some("/h".to_owned()),
            "KILO_DISABLE_PROJECT_CONFIG" => Some("true".to_owned()),
            "KILO_CONFIG_DIR" => Some("/d".to_owned()),
            _ => None,
        };
        let env = Env { var: &var, read_file: &|_| None };
        let kilo = super::files(&KILO, &env, Path::new("/h/repo/app"), &|_| false);
        assert!(kilo.iter().all(|f| !f.starts_with("/h/repo")), "{kilo:?}");
        assert!(kilo.contains(&PathBuf::from("/h/.config/kilo/opencode.jsonc")));
        assert!(kilo.contains(&PathBuf::from("/h/.kilocode/kilo.jsonc")));
        assert_eq!(kilo.last(), Some(&PathBuf::from("/d/opencode.json")));
    }

    #[test]
    fn a_base_url_in_a_file_is_pointed_and_the_last_wins() {
        let global = r#"{"provider": {
            "anthropic": {"options": {"baseURL": "https://proxy.example/anthropic/v1", "apiKey": "k"}},
            "openai": {"options": {"baseURL": "http://127.0.0.1:5/v1"}},
        }}"#;
        // JSONC in the project, with a variable substituted as opencode does.
        let project = r#"{
            // mine
            "provider": {"openai": {"options": {"baseURL": "{env:MY_OPENAI}"}}},
        }"#;
        let (p, content) = pointed(
            &OPENCODE,
            &[("MY_OPENAI", "http://127.0.0.1:6/v1")],
            &[
                ("/h/.config/opencode/opencode.json", global),
                ("/h/repo/app/opencode.jsonc", project),
            ],
        );
        assert_eq!(url(&content, "anthropic"), "http://tap/opencode-anthropic/anthropic/v1");
        assert_eq!(url(&content, "openai"), "http://tap/opencode-openai/v1");
        // Only the base URLs: the files' other settings stay theirs (opencode merges deeply).
        assert_eq!(content["provider"]["anthropic"]["options"].as_object().unwrap().len(), 1);
        let upstream =
            |name: &str| p.routes.iter().find(|r| r.name == name).unwrap().upstream.clone();
        assert_eq!(upstream("opencode-anthropic"), "https://proxy.example");
        assert_eq!(upstream("opencode-openai"), "http://127.0.0.1:6");
    }

    #[test]
    fn the_variable_is_kept_whole_and_wins_over_files() {
        let global =
            r#"{"provider": {"anthropic": {"options": {"baseURL": "http://127.0.0.1:5"}}}}"#;
        let own = r#"{"model": "anthropic/claude-sonnet-4-5", "provider": {"anthropic": {"options": {"baseURL": "http://127.0.0.1:7/v1", "apiKey": "x"}}}}"#;
        let (p, content) = pointed(
            &KILO,
            &[("KILO_CONFIG_CONTENT", own)],
            &[("/h/.config/kilo/kilo.json", global)],
        );
        assert_eq!(content["model"], "anthropic/claude-sonnet-4-5");
        assert_eq!(content["provider"]["anthropic"]["options"]["apiKey"], "x");
        assert_eq!(url(&content, "anthropic"), "http://tap/kilo-anthropic/v1");
        assert_eq!(p.routes[0].upstream, "http://127.0.0.1:7");
        // A variable the agent could not parse is left alone; so is a config with no base URL.
        let (p, content) = pointed(&KILO, &[("KILO_CONFIG_CONTENT", "{nope")], &[]);
        assert!(p.routes.is_empty() && content.is_null());
        let (p, content) = pointed(&OPENCODE, &[], &[("/h/repo/opencode.json", "{}")]);
        assert!(p.routes.is_empty() && content.is_null());
    }

    #[test]
    fn kilo_gateway_base_url_keeps_its_path() {
        // kilo appends `/api/openrouter` to a gateway base URL without `/openrouter`: the path
        // must survive the tap's URL so that it does not append it twice.
        let project = r#"{"provider": {"kilo": {"options": {"baseURL": "https://gw.example/api/openrouter"}}}}"#;
        let (p, content) = pointed(&KILO, &[], &[("/h/repo/app/kilo.json", project)]);
        assert_eq!(url(&content, "kilo"), "http://tap/kilo-kilo/api/openrouter");
        assert_eq!(p.routes[0].upstream, "https://gw.example");
    }

    #[test]
    fn env_substitution() {
        let var = |name: &str| (name == "A").then(|| "x".to_owned());
        let env = Env { var: &var, read_file: &|_| None };
        assert_eq!(substitute("{env:A}/{env:B}/{env:A", &env), "x//{env:A");
    }
}
