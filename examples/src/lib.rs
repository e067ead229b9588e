//! Examples crate for acp-usage (see `demo_agent.rs` and `demo_client.rs`).
