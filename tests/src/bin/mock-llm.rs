//! `mock-llm`: the tests' mock LLM server on its own, for manual runs.
//!
//! `mock-llm [--port N] [--script FILE] [--log FILE]` serves Anthropic Messages, OpenAI Responses,
//! OpenAI Chat Completions and Gemini on 127.0.0.1, prints `mock-llm listening on 127.0.0.1:PORT`
//! to stderr, then one line per request, until killed. Point an agent at it with e.g.
//! `ANTHROPIC_BASE_URL=http://127.0.0.1:PORT` or `OPENAI_BASE_URL=http://127.0.0.1:PORT/v1`.

use std::path::PathBuf;

use acp_usage_tests::mock_llm::{MockLlm, Script};
use anyhow::{Context, bail};

fn main() -> anyhow::Result<()> {
    let mut port = 0;
    let mut script = Script::default();
    let mut log = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().with_context(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--port" => port = value()?.parse().context("--port")?,
            "--script" => {
                let path = PathBuf::from(value()?);
                script = Script::from_file(&path)
                    .with_context(|| format!("reading {}", path.display()))?;
            }
            "--log" => log = Some(PathBuf::from(value()?)),
            "-h" | "--help" => {
                eprintln!("usage: mock-llm [--port N] [--script FILE] [--log FILE]");
                return Ok(());
            }
            other => bail!("unknown argument {other:?} (try --help)"),
        }
    }
    let mock = MockLlm::start_on(port, script)?;
    if let Some(log) = &log {
        mock.log_to(log)?;
    }
    mock.echo_to_stderr();
    eprintln!("mock-llm listening on 127.0.0.1:{}", mock.port());
    loop {
        std::thread::park();
    }
}
