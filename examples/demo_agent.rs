//! A scripted ACP agent (the one `acp-usage demo` wraps), runnable on its own:
//! `cargo run --example demo_agent`.

fn main() -> anyhow::Result<()> {
    acp_usage::demo::agent::run().map(|_| ())
}
