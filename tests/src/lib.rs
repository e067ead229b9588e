//! Test support for acp-usage's end-to-end tests: mock LLM servers, ACP clients, agent launchers.
//!
//! - [`mock_llm`]: a scripted Anthropic/OpenAI/Gemini mock on 127.0.0.1 that records the usage
//!   it served, so tests know exactly what an agent was billed for.
//! - [`client`]: a line-exact ACP client that answers the agent's requests.
//! - [`sdk_client`]: the client on the official Rust ACP SDK (`tests/sdk-client`, a workspace of
//!   its own), built on first use and run as a process.
//! - [`agents`]: commands and scratch configuration for the real agents, pointed at the mock.
//! - [`relay`]: locating (and building) the `acp-usage` binary under test.
//! - [`npm`]: the npm packages, packed by `cargo xtask dist npm` and installed with Node 22;
//!   [`process_tree`]: a process's descendants from `/proc`, to check none outlives it.
//! - [`otlp`]: an OTLP/HTTP receiver that decodes what it gets, and the rotel collector in front
//!   of it, for the OTLP export's tests.
//! - [`raw_http`], [`tls_front`]: byte-exact HTTP/1.1 clients and upstreams, and a TLS front with
//!   a test CA, for the LLM-API tap's tests.
//! - [`zed_meter`]: Zed's reading of `_meta["_claude/rateLimit"]` (its plan-usage meter).

pub mod agents;
pub mod client;
pub mod lab;
pub mod mock_llm;
pub mod npm;
pub mod otlp;
pub mod process_tree;
pub mod raw_http;
pub mod relay;
pub mod scratch;
pub mod sdk_client;
pub mod tls_front;
pub mod zed_meter;
