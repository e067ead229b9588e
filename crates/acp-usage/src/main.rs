//! The `acp-usage` command: parse the command line and hand over to the library.

fn main() -> std::process::ExitCode {
    acp_usage::main()
}
