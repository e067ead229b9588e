//! Examples crate for acp-usage: `demo_agent` (the scripted ACP agent) and `demo_client` (the
//! scripted client that runs it through the real relay), thin wrappers around the code behind
//! `acp-usage demo-agent` and `acp-usage demo`.

use std::process::ExitCode;

use clap::Parser;

/// `demo_client`'s entry point. The demo starts its own executable twice more, as the relay
/// (`<exe> -- <exe> demo-agent`) and as the agent (`<exe> demo-agent`), so this binary answers
/// those command lines like `acp-usage` itself does; any other command line runs the demo, e.g.
/// `cargo run -p acp-usage-examples --example demo_client -- --raw`.
pub fn demo_client_main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let as_relay_or_agent =
        args.iter().any(|a| a == "--") || args.get(1).is_some_and(|a| a == "demo-agent");
    if as_relay_or_agent {
        return acp_usage::main();
    }
    let argv =
        ["acp-usage".to_string(), "demo".to_string()].into_iter().chain(args.into_iter().skip(1));
    let parsed = acp_usage::cli::Args::parse_from(argv);
    let Some(acp_usage::cli::Command::Demo(demo)) = parsed.command else {
        unreachable!("parsed as `acp-usage demo ...`")
    };
    match acp_usage::commands::demo::run(&parsed.relay.into(), demo.raw) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("demo_client: {err:#}");
            ExitCode::FAILURE
        }
    }
}

/// `demo_agent`'s entry point: the scripted agent on stdin/stdout, e.g.
/// `acp-usage -- cargo run -q -p acp-usage-examples --example demo_agent`.
pub fn demo_agent_main() -> ExitCode {
    match acp_usage::commands::demo::agent::run() {
        Ok(code) => code,
        Err(err) => {
            eprintln!("demo_agent: {err:#}");
            ExitCode::FAILURE
        }
    }
}
