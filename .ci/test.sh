#!/usr/bin/env bash
# The test command (README.md's "The two commands"; .ci/run calls it in CI): every step must pass,
# in this order, and the first failure stops the run.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# The end-to-end tests run the real agents: Node 22, the pinned npm agents and the acpx client,
# and Mistral Vibe from PyPI, into ~/.cache/acp-usage/agents; Chromium (apt) renders `report --html`.
./.ci/install-agents.sh

# Formatting of the workspace, then of tests/sdk-client, a workspace of its own (the official
# ACP SDK pins an older schema crate than one lockfile can hold beside ours).
cargo fmt --all --check
cargo fmt --manifest-path tests/sdk-client/Cargo.toml --check

# Lints, warnings as errors, of every target of the workspace, then of tests/sdk-client (built
# into the same target directory, from its own lockfile, unchanged).
cargo clippy --workspace --all-targets -- -D warnings
cargo clippy --locked --manifest-path tests/sdk-client/Cargo.toml --target-dir target --all-targets -- -D warnings

# Unit, integration and end-to-end tests: the agents run offline against the project's mock LLM
# servers on 127.0.0.1.
cargo test --workspace

# Nothing here runs the macOS and Windows builds, so type-check them (cargo-zigbuild) to keep
# the code behind their cfgs compiling.
./.ci/check-targets.sh

# Last, the fuzz target builds and runs for 20 seconds.
./.ci/build-fuzz.sh
