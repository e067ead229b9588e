//! acp-usage-core's integration tests, one binary (linking the library once instead of once per
//! file): one module per topic, named as the former `tests/<name>.rs` file was.

mod account;
mod accounted;
mod common;
mod transcript_claude;
mod transcript_cline;
mod transcript_codex;
mod transcript_copilot;
mod transcript_gemini;
mod transcript_pi;
mod transcript_qwen;
