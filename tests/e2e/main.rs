//! End-to-end tests of acp-usage: real agents against a mock LLM on 127.0.0.1, directly and
//! through the relay, plus a scripted fake agent for what real agents cannot show.
//!
//! - `*_direct`: what each agent sends by itself (pins the behaviour the relay's profiles rely
//!   on; `ACP_USAGE_UPDATE_FIXTURES=1` rewrites `tests/fixtures/<agent>-direct*.jsonl`).
//! - `*_relay_*`: the same sessions through `acp-usage`, every figure checked against the usage
//!   the mock served. A figure table goes to stderr and `target/tmp/e2e-figures.txt`.
//! - `relay_fake`: byte-exact forwarding and injection points, with a scripted agent.
//! - `tap_proxy`: the LLM-API tap in process against upstreams the tests control: its security
//!   (secret, no open proxy, loopback) and failure behaviour, streaming, compression, counting.
//! - `tap_ws`: the tap's WebSocket tunnel in process: bytes unchanged both ways, the usage read
//!   from a copy, the mock's Responses WebSocket through it, refused upgrades passed back.
//! - `tap_relay`: `acp-usage --tap` with a real agent: no credential or body in logs and
//!   recordings, a tap that cannot start, and an upstream over TLS trusted through a test CA.
//! - `logins`: each login the tap points (Claude Code's OAuth token, Codex signed in with
//!   ChatGPT, Gemini CLI signed in with Google) through `acp-usage --tap`: the credentials reach
//!   the mock as sent, every call counted from the tap; an unknown agent runs untapped.
//! - `launchers`: agents as users launch them: Mistral Vibe through `uvx` (recognised before it
//!   starts, every figure from the tap), an agent recognised only from `initialize` (one warning
//!   naming `--profile`), and `--tap on` for an agent without a profile (the well-known base-URL
//!   variables pointed and named, its call counted from the tap).
//! - `import`: sessions run directly, then `acp-usage import` of their transcripts: totals equal
//!   what the mock served, a second import adds nothing, nor does one after the relay.
//! - `otlp_infra`: the OTLP tests' own infrastructure, without acp-usage: requests through rotel
//!   (a real collector) decode at the tests' receiver unchanged; rotel stopped and started again
//!   on its port (a stop flushes, a 503 downstream is retried); the receiver's gzip decoding and
//!   error-status switch.
//! - `doctor`: `acp-usage doctor` on a scratch machine: a Claude Code settings override fails
//!   (exit 1, the file named), a clean machine passes, `--json` parses, nothing is written.
//! - `setup`: `acp-usage setup zed|jetbrains` on the fixture settings files with stand-in agents
//!   on PATH: entries added, every other byte kept, a second run a no-op, `--remove` restoring
//!   the file byte for byte.
//! - `npm`: the npm packages packed by `cargo xtask dist npm` and installed with Node 22 (no Rust
//!   toolchain on PATH): `npx acp-usage` runs, sessions pass, exit statuses and signals.
//! - `limits`: subscription windows from the providers' rate-limit headers (Claude Code,
//!   codex-acp): `_meta.acpUsage.limits` on every update, a notice per line crossed, `status`
//!   and `report limits`.
//! - `forecast`: ahead of the wall (Claude Code): a window that runs out before it resets gets
//!   one notice, `runsOutAt` and a `/usage limits` line; a second run on the same ledger shows
//!   the windows from its first update, a run with another key none of them.
//! - `wall`: a provider's refusal at a used-up window (Claude's 429 `rejected`, Codex's
//!   `usage_limit_reached`): one notice at once and Zed's meter `rejected`, the agent's answer as
//!   without acp-usage; Codex's weekly-only plan and its credits.
//! - `chat`: warnings in the chat for clients without notices (a window's and a day budget's
//!   crossings as one line of agent message text before the turn's result; none with
//!   `[notices] chat = false` or to a client that shows notices).
//! - `report_html`: `acp-usage report --html` loaded by headless Chromium (`/usr/bin/chromium`,
//!   from `.ci/install-browser.sh`): the DOM's figures equal `report --json`'s, a title's markup
//!   stays text, the page fetches nothing; a screenshot is kept in `target/test-artifacts/`.
//! - `usage_cmd`: acp-usage's own `/usage` with claude-agent-acp: answered without the agent,
//!   its figures those of the last `usage_update`, `report` and `status`; the command lists.
//! - `validation`: real sessions recorded with `--record` and checked with `acp-usage validate`
//!   and live `--validate` against schema/schema.json.
//!
//! The agents (and rotel, and Chromium) come from `.ci/install-agents.sh`; a missing agent fails
//! its tests.

mod acpx;
mod auggie;
mod chat;
mod claude;
mod cline;
mod codex;
mod codex_ts;
mod copilot;
mod doctor;
mod droid;
mod flows;
mod forecast;
mod gemini;
mod import;
mod kilo;
mod launchers;
mod ledger;
mod limits;
mod logins;
mod npm;
mod opencode;
mod otlp;
mod otlp_infra;
mod pi;
mod process_tree;
mod qoder;
mod qwen;
mod relay_fake;
mod report_html;
mod reports_truth;
mod sdk_client;
mod setup;
mod support;
mod tap_lifecycle;
mod tap_proxy;
mod tap_relay;
mod tap_ws;
mod usage_cmd;
mod validation;
mod vibe;
mod wall;
