//! A scripted ACP agent (the one `acp-usage demo` wraps), runnable on its own behind the relay:
//! `acp-usage -- cargo run -q -p acp-usage-examples --example demo_agent`.

fn main() -> std::process::ExitCode {
    acp_usage_examples::demo_agent_main()
}
