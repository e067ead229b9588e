//! `bench-agent`: the synthetic ACP agent of the benchmark (see `acp_usage_bench::agent`).

fn main() -> std::process::ExitCode {
    match acp_usage_bench::agent::run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        // A closed stdout is how a client says it has seen enough.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bench-agent: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
