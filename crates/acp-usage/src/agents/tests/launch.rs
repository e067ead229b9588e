//! Recognising the agent from the command that launches it, before it starts: every launch form
//! users and editors use, for several agents, and commands that must not be recognised.

use super::super::Profile;

/// Symlinks the table's commands go through (what the relay reads from the file system).
#[rustfmt::skip]
const LINKS: &[(&str, &str)] = &[
    ("/home/u/bin/my-agent", "/usr/lib/node_modules/@agentclientprotocol/claude-agent-acp/dist/index.js"),
    ("/home/u/bin/agent", "/home/u/.local/share/uv/tools/mistral-vibe/bin/vibe-acp"),
    ("acp", "/home/u/.local/share/pipx/venvs/mistral-vibe/bin/vibe-acp"),
    ("/opt/bin/coder", "/opt/codex/bin/codex-acp"),
    // A link whose target names nothing: the link's own name is all there is.
    ("/home/u/bin/claude-acp", "/opt/agents/current/main.js"),
];

fn real_path(word: &str) -> Option<String> {
    LINKS.iter().find(|(link, _)| *link == word).map(|(_, target)| (*target).to_owned())
}

/// Launch form -> profile (`generic`: not recognised before the agent starts).
#[rustfmt::skip]
const TABLE: &[(&[&str], &str)] = &[
    // Claude Agent: the registry's npx form, and every launcher users put before it.
    (&["npx", "-y", "@agentclientprotocol/claude-agent-acp@0.101.0"], "claude"),
    (&["npx", "--yes", "@agentclientprotocol/claude-agent-acp"], "claude"),
    (&["npx", "--package=@agentclientprotocol/claude-agent-acp", "claude-agent-acp"], "claude"),
    (&["npx", "-p", "@agentclientprotocol/claude-agent-acp@0.101.0", "-y", "claude-agent-acp"], "claude"),
    (&["npx", "--registry", "https://r.example/", "-y", "@agentclientprotocol/claude-agent-acp"], "claude"),
    (&["npx", "-c", "claude-agent-acp --verbose"], "claude"),
    (&["npm", "exec", "--yes", "--", "@agentclientprotocol/claude-agent-acp@0.89.1"], "claude"),
    (&["/z/node/bin/node", "/z/node/lib/node_modules/npm/bin/npm-cli.js", "exec", "--yes", "--", "@agentclientprotocol/claude-agent-acp@0.89.1"], "claude"),
    (&["pnpm", "dlx", "@agentclientprotocol/claude-agent-acp"], "claude"),
    (&["pnpm", "--package=@agentclientprotocol/claude-agent-acp", "dlx", "claude-agent-acp"], "claude"),
    (&["bunx", "@agentclientprotocol/claude-agent-acp@0.101.0"], "claude"),
    (&["bun", "x", "--bun", "@agentclientprotocol/claude-agent-acp"], "claude"),
    (&["yarn", "dlx", "@zed-industries/claude-code-acp"], "claude"),
    (&["env", "-i", "HOME=/h", "PATH=/usr/bin", "ANTHROPIC_API_KEY=k", "claude-agent-acp"], "claude"),
    (&["env", "-u", "ANTHROPIC_BASE_URL", "--", "claude-agent-acp"], "claude"),
    (&["node", "--enable-source-maps", "/usr/lib/node_modules/@agentclientprotocol/claude-agent-acp/dist/index.js"], "claude"),
    (&["node", "-r", "/x/tracing.js", "/x/node_modules/@agentclientprotocol/claude-agent-acp/dist/index.js"], "claude"),
    (&["sh", "-c", "cd /work && exec npx -y @agentclientprotocol/claude-agent-acp@0.101.0"], "claude"),
    (&["bash", "-lc", "source ~/.nvm/nvm.sh; claude-agent-acp \"$@\"", "claude"], "claude"),
    (&["/home/u/bin/my-agent"], "claude"),
    (&["/home/u/bin/claude-acp"], "claude"),
    // Codex, both adapters: npx, Zed's extracted binary, env, node.
    (&["npx", "-y", "@agentclientprotocol/codex-acp@2.2.2"], "codex"),
    (&["npx", "@zed-industries/codex-acp"], "codex"),
    (&["/h/.local/share/zed/external_agents/registry/codex-acp/v_0.14.0_5f1a_0a1b/codex-acp"], "codex"),
    (&["env", "OPENAI_API_KEY=k", "codex-acp"], "codex"),
    (&["node", "/x/node_modules/@zed-industries/codex-acp/bin/codex-acp.js"], "codex"),
    (&["/opt/bin/coder"], "codex"),
    // Gemini CLI.
    (&["npx", "-y", "@google/gemini-cli@0.63.0", "--acp"], "gemini"),
    (&["npm", "x", "-y", "--", "@google/gemini-cli", "--acp"], "gemini"),
    (&["gemini", "--acp", "-m", "gemini-2.5-pro"], "gemini"),
    (&["/x/node_modules/.bin/gemini", "--acp"], "gemini"),
    (&["timeout", "--signal", "TERM", "1h", "nice", "-n", "5", "gemini", "--acp"], "gemini"),
    // The other npm agents, as the registry starts them.
    (&["npx", "-y", "@qwen-code/qwen-code@0.25.0", "--acp", "--experimental-skills"], "qwen"),
    (&["npx", "-y", "@github/copilot@1.0.95", "--acp"], "copilot"),
    (&["npx", "-y", "cline@3.0.70", "--acp"], "cline"),
    (&["npx", "-y", "@kilocode/cli@7.8.8", "acp"], "kilo"),
    (&["node", "/x/node_modules/@kilocode/cli/bin/kilo", "acp"], "kilo"),
    (&["/z/external_agents/registry/kilo/v_7.8.8_a_b/kilo", "acp"], "kilo"),
    (&["/z/external_agents/registry/opencode/v_1.18.35_a_b/opencode", "acp"], "opencode"),
    (&["npx", "-y", "opencode-ai@1.18.33", "acp"], "opencode"),
    // Factory Droid, Auggie and Qoder CLI: the registry's npx forms and Zed's extracted binaries.
    (&["npx", "-y", "droid@0.238.0", "exec", "--output-format", "acp-daemon"], "droid"),
    (&["npx", "-y", "@factory/cli", "exec", "--output-format", "acp-daemon"], "droid"),
    (&["/z/external_agents/registry/factory-droid/v_0.238.0/droid", "exec", "--output-format", "acp-daemon"], "droid"),
    (&["npx", "-y", "@augmentcode/auggie@0.36.0", "--acp"], "auggie"),
    (&["pnpm", "dlx", "@augmentcode/auggie", "--acp"], "auggie"),
    (&["npx", "-y", "@qoder-ai/qodercli@1.1.68", "--acp"], "qoder"),
    (&["env", "QODER_X=1", "qodercli", "--acp"], "qoder"),
    (&["npx", "-y", "pi-acp@0.0.34"], "pi"),
    (&["/x/pi/node_modules/pi-acp/dist/index.js"], "pi"),
    // Mistral Vibe, a Python agent: uvx, uv, pipx, an interpreter, Zed's binary, links.
    (&["uvx", "--from", "mistral-vibe", "vibe-acp"], "vibe"),
    (&["uvx", "--from", "mistral-vibe==3.0.3", "vibe-acp"], "vibe"),
    (&["uvx", "--from=mistral-vibe[extra]>=3", "vibe-acp"], "vibe"),
    (&["uvx", "mistral-vibe==2.9.3", "--acp"], "vibe"),
    (&["uvx", "--python", "3.13", "--with", "certifi", "vibe-acp@3.0.3"], "vibe"),
    (&["uv", "tool", "run", "--offline", "--from", "mistral-vibe", "vibe-acp"], "vibe"),
    (&["uv", "run", "--project", "/p", "vibe-acp"], "vibe"),
    (&["pipx", "run", "--spec", "mistral-vibe==3.0.3", "vibe-acp"], "vibe"),
    (&["pipx", "run", "--python", "python3.13", "--spec", "mistral-vibe", "vibe-acp"], "vibe"),
    (&["python3.13", "/c/venv-vibe/bin/vibe-acp"], "vibe"),
    (&["/h/.local/share/zed/external_agents/registry/mistral-vibe/v_2.26.1_a_b/vibe-acp"], "vibe"),
    (&["env", "-S", "uvx --from mistral-vibe vibe-acp"], "vibe"),
    (&["env", "--split-string=VIBE_HOME=/v uvx --from mistral-vibe vibe-acp"], "vibe"),
    (&["/home/u/bin/agent"], "vibe"),
    (&["acp"], "vibe"),
    (&["zsh", "-c", "if true; then exec pipx run --spec mistral-vibe vibe-acp; fi"], "vibe"),
    // Nothing names an agent: a path segment, an option's value, the agent's own arguments,
    // another command of a script, an interpreter's path, a registry agent without a profile.
    (&["/home/codex/bin/my-agent"], "generic"),
    (&["/home/pi/bin/some-agent"], "generic"),
    (&["my-agent", "--model", "claude-sonnet-4-5"], "generic"),
    (&["npx", "-y", "@example/agent", "--provider", "codex"], "generic"),
    (&["npx", "-y", "--cache", "/home/claude/.npm", "my-agent"], "generic"),
    (&["uvx", "--from", "some-tool", "run", "--model", "gemini-2.5-pro"], "generic"),
    (&["uvx", "--from", "/home/codex/src", "agent"], "generic"),
    (&["pipx", "run", "--spec", "git+https://x/qwen-agent", "agent"], "generic"),
    (&["sh", "-c", "echo claude >/tmp/log; my-agent"], "generic"),
    (&["node", "/home/claude/agent/index.js"], "generic"),
    (&["node", "-e", "require('codex-acp')"], "generic"),
    (&["env", "CLAUDE_CONFIG_DIR=/x", "my-agent"], "generic"),
    (&["python", "-m", "my_agent", "--codex"], "generic"),
    (&["/z/external_agents/registry/goose/v_1.54.0_a_b/goose", "acp"], "generic"),
    (&["npx", "-y", "@github/copilot-language-server@1.552.0", "--acp"], "generic"),
    (&["kilometre"], "generic"),
    (&[], "generic"),
];

#[test]
fn launch_forms_are_recognised_before_the_agent_starts() {
    let mut wrong = Vec::new();
    for (command, want) in TABLE {
        let command: Vec<String> = command.iter().map(|w| (*w).to_owned()).collect();
        let got = Profile::detect_launch(&command, &real_path);
        if got.name() != *want {
            wrong.push(format!("{command:?}: {} (want {want})", got.name()));
        }
    }
    assert!(wrong.is_empty(), "wrongly recognised:\n{}", wrong.join("\n"));
}

#[test]
fn every_profile_with_a_launch_is_recognised_from_its_program_and_package() {
    for profile in Profile::all().filter(|p| !p.is_generic()) {
        for launch in profile.launches() {
            let program: Vec<String> = [launch.program].iter().map(|w| (*w).to_owned()).collect();
            assert_eq!(Profile::detect_before_start(&program), profile, "{launch:?}");
            let launcher = match launch.package {
                super::Package::Npm(name) => vec!["npx", "-y", name],
                super::Package::PyPi(name) => vec!["uvx", "--from", name, launch.program],
            };
            let launcher: Vec<String> = launcher.into_iter().map(str::to_owned).collect();
            assert_eq!(Profile::detect_before_start(&launcher), profile, "{launch:?}");
        }
    }
}

#[test]
fn without_links_a_link_is_known_by_its_own_name_only() {
    let link = ["/home/u/bin/my-agent".to_owned()];
    assert!(Profile::detect_before_start(&link).is_generic());
    assert_eq!(Profile::detect_launch(&link, &real_path).name(), "claude");
}

#[test]
fn agent_info_names_win_over_the_command() {
    let npx: Vec<String> =
        ["npx", "-y", "@agentclientprotocol/codex-acp"].iter().map(|w| (*w).to_owned()).collect();
    assert_eq!(
        Profile::detect(Some("@agentclientprotocol/claude-agent-acp"), &npx).name(),
        "claude"
    );
    assert_eq!(Profile::detect(Some("my-agent"), &npx).name(), "codex");
    assert_eq!(Profile::by_name("Mistral Vibe").map(|p| p.name()), Some("vibe"));
    assert_eq!(Profile::by_name("fake-acp-agent"), None);
}

#[test]
fn tap_on_points_an_unprofiled_agents_well_known_variables() {
    // What `--tap on` points for the generic profile: the variables the Anthropic, OpenAI and
    // Google Gen AI SDKs read, a value the user set being where the calls go on to.
    let env = |name: &str| {
        (name == "OPENAI_BASE_URL").then(|| "http://127.0.0.1:9/users-openai/v1".to_owned())
    };
    let p = crate::agents::point(Profile::generic(), &env, &|_| None);
    let vars: Vec<&str> = p.env.iter().map(|(var, _, _)| var.as_str()).collect();
    assert_eq!(vars, ["ANTHROPIC_BASE_URL", "OPENAI_BASE_URL", "GOOGLE_GEMINI_BASE_URL"]);
    let upstreams: Vec<(&str, &str)> =
        p.routes.iter().map(|r| (r.name.as_str(), r.upstream.as_str())).collect();
    assert_eq!(
        upstreams,
        [
            ("anthropic", "https://api.anthropic.com"),
            ("openai", "http://127.0.0.1:9/users-openai/v1"),
            ("gemini", "https://generativelanguage.googleapis.com"),
        ]
    );
}
