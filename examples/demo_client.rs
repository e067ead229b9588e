//! A scripted ACP client that drives the relay wrapping the scripted agent through a full
//! session and prints the annotated traffic, the same as `acp-usage demo`:
//! `cargo run -p acp-usage-examples --example demo_client [-- --raw]`.

fn main() -> std::process::ExitCode {
    acp_usage_examples::demo_client_main()
}
