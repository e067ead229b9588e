//! Unit tests of pointing each agent at the tap: which settings, which upstreams.
use crate::agents::*;

fn profile(name: &str) -> Profile {
    Profile::named(name).unwrap()
}

fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + use<> {
    let pairs: Vec<(String, String)> =
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    move |k| pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
}

fn no_file(_: &std::path::Path) -> Option<String> {
    None
}

#[test]
fn the_users_base_url_is_the_upstream_else_the_public_endpoint() {
    let env = env_of(&[("ANTHROPIC_BASE_URL", "http://127.0.0.1:9/")]);
    let p = point(profile("claude"), &env, &no_file);
    let upstream =
        |name: &str| p.routes.iter().find(|r| r.name == name).map(|r| r.upstream.clone()).unwrap();
    assert_eq!(upstream("anthropic"), "http://127.0.0.1:9");
    // Claude Code reads no other base URL: no other variable is set.
    assert_eq!(p.routes.len(), 1);
    let resolved = p.resolve(|route| format!("http://127.0.0.1:1/s/{route}"));
    assert!(
        resolved.env.contains(&(
            "ANTHROPIC_BASE_URL".to_owned(),
            "http://127.0.0.1:1/s/anthropic".to_owned()
        ))
    );
    assert_eq!(p.session_headers, vec!["x-claude-code-session-id".to_owned()]);
    assert!(resolved.env.contains(&("NO_PROXY".to_owned(), "127.0.0.1,localhost".to_owned())));
}

#[test]
fn codex_builtin_provider_goes_through_openai_base_url_and_chatgpt_elsewhere() {
    let env = env_of(&[("CODEX_HOME", "/h"), ("no_proxy", "corp.example")]);
    let p = point(profile("codex"), &env, &no_file);
    let resolved = p.resolve(|route| format!("http://tap/{route}"));
    assert_eq!(resolved.args, vec!["-c", "openai_base_url=\"http://tap/codex-openai\""]);
    let (_, overrides) = resolved.env.iter().find(|(k, _)| k == "CODEX_CONFIG").unwrap();
    assert_eq!(overrides, r#"{"openai_base_url":"http://tap/codex-openai"}"#);
    assert_eq!(p.alternates[0].upstream, "https://chatgpt.com/backend-api/codex");
    assert!(
        resolved
            .env
            .contains(&("no_proxy".to_owned(), "corp.example,127.0.0.1,localhost".to_owned()))
    );
}

#[test]
fn codex_chatgpt_login_keeps_the_users_openai_base_url() {
    // A ChatGPT login with `openai_base_url` set (a gateway, a mock): Codex sends its calls,
    // `chatgpt-account-id` and all, there; the tap must not divert them to chatgpt.com.
    let env = env_of(&[("CODEX_HOME", "/h")]);
    let read = |path: &std::path::Path| {
        (path == std::path::Path::new("/h/config.toml"))
            .then(|| "openai_base_url = \"http://127.0.0.1:8/v1\"\n".to_owned())
    };
    let p = point(profile("codex"), &env, &read);
    let route = p.routes.iter().find(|r| r.name == "codex-openai").unwrap();
    assert_eq!(route.upstream, "http://127.0.0.1:8/v1");
    assert!(p.alternates.is_empty(), "{:?}", p.alternates);
}

#[test]
fn a_claude_settings_base_url_is_said_since_it_wins_over_the_tap() {
    let env = env_of(&[("CLAUDE_CONFIG_DIR", "/c")]);
    let settings = |path: &std::path::Path| {
        (path == std::path::Path::new("/c/settings.json"))
            .then(|| r#"{"env":{"ANTHROPIC_BASE_URL":"https://gw.example"}}"#.to_owned())
    };
    let p = point(profile("claude"), &env, &settings);
    assert_eq!(p.warnings.len(), 1);
    assert!(p.warnings[0].starts_with("/c/settings.json sets ANTHROPIC_BASE_URL"));
    assert!(point(profile("claude"), &env, &no_file).warnings.is_empty());
}

#[test]
fn gemini_api_key_route_only_when_an_auth_type_is_chosen() {
    let env = env_of(&[("GEMINI_CLI_HOME", "/g")]);
    let p = point(profile("gemini"), &env, &no_file);
    assert_eq!(p.routes.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(), ["codeassist"]);
    // Gemini CLI strips comments from its settings before parsing them.
    let chosen = |path: &std::path::Path| {
        (path == std::path::Path::new("/g/.gemini/settings.json")).then(|| {
            "// mine\n{\"security\":{\"auth\":{\"selectedType\":\"gemini-api-key\"}},}".to_owned()
        })
    };
    let p = point(profile("gemini"), &env, &chosen);
    assert_eq!(p.routes.len(), 2);
}

#[test]
fn opencode_providers_and_codex_providers_are_rewritten() {
    let config = r#"{"model":"anthropic/claude-sonnet-4-5","provider":{"anthropic":{"options":{"baseURL":"http://127.0.0.1:7/v1","apiKey":"x"}}}}"#;
    let env = env_of(&[("OPENCODE_CONFIG_CONTENT", config)]);
    let p = point(profile("opencode"), &env, &no_file);
    let resolved = p.resolve(|route| format!("http://tap/{route}"));
    let (_, content) = resolved.env.iter().find(|(k, _)| k == "OPENCODE_CONFIG_CONTENT").unwrap();
    let v: serde_json::Value = serde_json::from_str(content).unwrap();
    // The route's upstream is the origin; the path follows the tap's URL.
    let url = &v["provider"]["anthropic"]["options"]["baseURL"];
    assert_eq!(url, "http://tap/opencode-anthropic/v1");
    assert_eq!(v["provider"]["anthropic"]["options"]["apiKey"], "x");
    assert!(p.routes.iter().any(|r| r.upstream == "http://127.0.0.1:7"));

    let env = env_of(&[("CODEX_HOME", "/h")]);
    let read = |path: &std::path::Path| {
        (path == std::path::Path::new("/h/config.toml")).then(|| {
            "model_provider = \"mock\"\n[model_providers.mock]\nbase_url = \"http://127.0.0.1:8/v1\"\n".to_owned()
        })
    };
    let p = point(profile("codex"), &env, &read);
    let resolved = p.resolve(|route| format!("http://tap/{route}"));
    assert_eq!(
        resolved.args,
        vec!["-c", "model_providers.mock.base_url=\"http://tap/codex-mock\""]
    );
    let (_, overrides) = resolved.env.iter().find(|(k, _)| k == "CODEX_CONFIG").unwrap();
    assert_eq!(
        overrides,
        r#"{"model_provider":"mock","model_providers":{"mock":{"base_url":"http://tap/codex-mock"}}}"#
    );
}

#[test]
fn kilo_reads_its_own_config_variable() {
    let config = r#"{"provider":{"anthropic":{"options":{"baseURL":"http://127.0.0.1:7/v1"}}}}"#;
    let env = env_of(&[("KILO_CONFIG_CONTENT", config), ("OPENCODE_CONFIG_CONTENT", config)]);
    let p = point(profile("kilo"), &env, &no_file);
    let resolved = p.resolve(|route| format!("http://tap/{route}"));
    let (_, content) = resolved.env.iter().find(|(k, _)| k == "KILO_CONFIG_CONTENT").unwrap();
    let v: serde_json::Value = serde_json::from_str(content).unwrap();
    assert_eq!(v["provider"]["anthropic"]["options"]["baseURL"], "http://tap/kilo-anthropic/v1");
    // opencode's variable is not kilo's: left alone.
    assert!(!resolved.env.iter().any(|(k, _)| k == "OPENCODE_CONFIG_CONTENT"));
    assert!(
        resolved
            .env
            .contains(&("ANTHROPIC_BASE_URL".to_owned(), "http://tap/anthropic-v1".to_owned()))
    );
}

#[test]
fn vibe_providers_are_copied_whole_with_the_tap_as_api_base() {
    // No configuration: Vibe's default provider, to Mistral's API.
    let env = env_of(&[("HOME", "/h")]);
    let p = point(profile("vibe"), &env, &no_file);
    let upstream = |p: &Pointing, name: &str| {
        p.routes.iter().find(|r| r.name == name).unwrap().upstream.clone()
    };
    assert_eq!(upstream(&p, "vibe-mistral"), "https://api.mistral.ai");
    let resolved = p.resolve(|route| format!("http://127.0.0.1:1/s/{route}"));
    let (_, providers) = resolved.env.iter().find(|(k, _)| k == "VIBE_PROVIDERS").unwrap();
    let providers: serde_json::Value = serde_json::from_str(providers).unwrap();
    assert_eq!(
        providers[0],
        serde_json::json!({"name": "mistral", "api_base": "http://127.0.0.1:1/s/vibe-mistral/v1",
            "api_key_env_var": "MISTRAL_API_KEY", "backend": "mistral"})
    );

    // The user's config.toml entry, every field kept but api_base; VIBE_HOME wins over HOME.
    let env = env_of(&[("HOME", "/h"), ("VIBE_HOME", "/v")]);
    let read = |path: &std::path::Path| {
        (path == std::path::Path::new("/v/config.toml")).then(|| {
            "active_model = \"mistral-medium-3.5\"\n[[providers]]\nname = \"mistral\"\n\
             api_base = \"http://127.0.0.1:7/mistral/v1\"\napi_key_env_var = \"MY_KEY\"\n\
             backend = \"mistral\"\nextra_headers = { x-team = \"a\" }\n"
                .to_owned()
        })
    };
    let p = point(profile("vibe"), &env, &read);
    assert_eq!(upstream(&p, "vibe-mistral"), "http://127.0.0.1:7/mistral");
    let resolved = p.resolve(|route| format!("http://tap/{route}"));
    let (_, providers) = resolved.env.iter().find(|(k, _)| k == "VIBE_PROVIDERS").unwrap();
    let providers: serde_json::Value = serde_json::from_str(providers).unwrap();
    let mistral = providers.as_array().unwrap().iter().find(|p| p["name"] == "mistral").unwrap();
    assert_eq!(
        *mistral,
        serde_json::json!({"name": "mistral", "api_base": "http://tap/vibe-mistral/v1",
            "api_key_env_var": "MY_KEY", "backend": "mistral", "extra_headers": {"x-team": "a"}})
    );

    // A VIBE_PROVIDERS of the user's replaces the file's entry, and its base has no /v1.
    let users = r#"[{"name":"mistral","api_base":"https://eu.example/api","api_key_env_var":"K","backend":"mistral"}]"#;
    let env = env_of(&[("VIBE_HOME", "/v"), ("VIBE_PROVIDERS", users)]);
    let p = point(profile("vibe"), &env, &read);
    assert_eq!(upstream(&p, "vibe-mistral"), "https://eu.example/api");
    let resolved = p.resolve(|route| format!("http://tap/{route}"));
    let (_, providers) = resolved.env.iter().find(|(k, _)| k == "VIBE_PROVIDERS").unwrap();
    assert!(providers.contains(r#""api_base":"http://tap/vibe-mistral""#), "{providers}");
    assert!(providers.contains(r#""api_key_env_var":"K""#), "{providers}");
}

#[test]
fn qwen_model_providers_base_urls_are_said_since_they_win_over_the_tap() {
    let env = env_of(&[("QWEN_HOME", "/q")]);
    let settings = |text: &'static str| {
        move |path: &std::path::Path| {
            (path == std::path::Path::new("/q/settings.json")).then(|| text.to_owned())
        }
    };
    let with_url = settings(r#"{"modelProviders":{"openai":[{"id":"m","baseUrl":"https://gw"}]}}"#);
    let p = point(profile("qwen"), &env, &with_url);
    assert_eq!(p.warnings.len(), 1);
    assert!(p.warnings[0].starts_with("/q/settings.json sets a baseUrl in modelProviders"));
    let without = settings(r#"{"modelProviders":{"openai":[{"id":"m"}]}}"#);
    assert!(point(profile("qwen"), &env, &without).warnings.is_empty());
    // Settings files with comments and trailing commas, as qwen-code reads them.
    let commented = settings(
        "{\n  // my gateway\n  \"modelProviders\": {\"openai\": [{\"id\": \"m\", \"baseUrl\": \"https://gw\",},],},\n}\n",
    );
    assert_eq!(point(profile("qwen"), &env, &commented).warnings.len(), 1);
}

#[test]
fn calls_the_tap_cannot_see_are_said_per_agent() {
    let untapped = |name: &str, vars: &[(&str, &str)], file: Option<&'static str>| {
        let var = env_of(vars);
        let read = move |_: &std::path::Path| file.map(str::to_owned);
        profile(name).untapped(&Env { var: &var, read_file: &read })
    };
    assert!(untapped("claude", &[], None).is_empty());
    let bedrock = untapped("claude", &[("CLAUDE_CODE_USE_BEDROCK", "1")], None);
    assert_eq!(bedrock.len(), 1);
    assert!(bedrock[0].why.contains("Bedrock") && bedrock[0].recorded);
    assert!(untapped("claude", &[("CLAUDE_CODE_USE_BEDROCK", "0")], None).is_empty());
    // Copilot's GitHub login, unless a BYOK provider is set.
    assert_eq!(untapped("copilot", &[], None).len(), 1);
    assert!(untapped("copilot", &[("COPILOT_PROVIDER_BASE_URL", "https://b")], None).is_empty());
    // Qwen OAuth: its side calls are in no record, so they are lost.
    let oauth = r#"{"security":{"auth":{"selectedType":"qwen-oauth"}}}"#;
    let qwen = untapped("qwen", &[("QWEN_HOME", "/q")], Some(oauth));
    assert_eq!(qwen.len(), 1);
    assert!(!qwen[0].recorded);
    for always in ["cline", "pi"] {
        assert!(untapped(always, &[], None)[0].recorded, "{always}");
    }
    assert!(untapped("codex", &[], None).is_empty());
}

#[test]
fn the_login_an_agent_will_use_is_read_at_start() {
    use crate::accounts::Credential;
    let credentials =
        |name: &str, vars: &[(&str, &str)], files: &[(&'static str, &'static str)]| {
            let var = env_of(vars);
            let files = files.to_vec();
            let read = move |p: &std::path::Path| {
                files.iter().find(|(f, _)| p.ends_with(f)).map(|(_, t)| (*t).to_owned())
            };
            profile(name).credentials(&Env { var: &var, read_file: &read })
        };
    let secret = |s: &str| Credential::Secret(s.to_owned());
    let account = |s: &str| Credential::Account(s.to_owned());
    let home = [("HOME", "/h")];
    // Claude Code: its variables first, then the organisation it signed in to, then its token.
    let key = [("HOME", "/h"), ("ANTHROPIC_API_KEY", "sk-ant-1")];
    assert_eq!(credentials("claude", &key, &[]), [secret("sk-ant-1")]);
    let both = [("ANTHROPIC_API_KEY", "a"), ("CLAUDE_CODE_OAUTH_TOKEN", "b")];
    assert_eq!(credentials("claude", &both, &[]).len(), 2, "two: the start names none");
    let login = [
        (".claude.json", r#"{"oauthAccount":{"organizationUuid":"8d3f-org"}}"#),
        (".credentials.json", r#"{"claudeAiOauth":{"accessToken":"sk-ant-oat01-x"}}"#),
    ];
    assert_eq!(credentials("claude", &home, &login), [account("org:8d3f-org")]);
    assert_eq!(credentials("claude", &home, &login[1..]), [secret("sk-ant-oat01-x")]);
    assert!(credentials("claude", &home, &[(".claude.json", "not json")]).is_empty());
    // Codex: its key variables, else auth.json's ChatGPT account, else its stored key.
    let chatgpt =
        [(".codex/auth.json", r#"{"tokens":{"account_id":"user-9"},"OPENAI_API_KEY":null}"#)];
    assert_eq!(credentials("codex", &home, &chatgpt), [account("acct:user-9")]);
    let stored = [(".codex/auth.json", r#"{"OPENAI_API_KEY":"sk-proj-1"}"#)];
    assert_eq!(credentials("codex", &home, &stored), [secret("sk-proj-1")]);
    assert_eq!(credentials("codex", &[("OPENAI_API_KEY", "sk-2")], &chatgpt), [secret("sk-2")]);
    // Agents without a plan of their own say nothing.
    assert!(credentials("opencode", &key, &[]).is_empty());
}
