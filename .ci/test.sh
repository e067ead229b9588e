#!/usr/bin/env bash
# The test command (README.md's "The two commands"; .ci/run calls it in CI): every step must pass,
# and the first failure stops the run. Each step prints how long it took, so a slow CI run says
# where its time went.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

run_started=$SECONDS
# Runs one step: prints it, runs it, prints its wall time (stderr, like cargo's own output).
step() {
  local started=$SECONDS
  echo "+ $*" >&2
  "$@"
  echo "test.sh: '$*' took $((SECONDS - started)) s" >&2
}

# The end-to-end tests run the real agents: Node 22, the pinned npm agents and the acpx client,
# and Mistral Vibe from PyPI, into ~/.cache/acp-usage/agents; Chromium (apt) renders `report --html`.
step ./.ci/install-agents.sh

# Formatting of the workspace, then of tests/sdk-client, a workspace of its own (the official
# ACP SDK pins an older schema crate than one lockfile can hold beside ours).
step cargo fmt --all --check
step cargo fmt --manifest-path tests/sdk-client/Cargo.toml --check

# Lints, warnings as errors, of every target of the workspace, then of tests/sdk-client (built
# into the same target directory, from its own lockfile, unchanged).
target_dir=${CARGO_TARGET_DIR:-target}
step cargo clippy --workspace --all-targets -- -D warnings
step cargo clippy --locked --manifest-path tests/sdk-client/Cargo.toml --target-dir "$target_dir" \
  --all-targets -- -D warnings

# Unit, integration and end-to-end tests, built first: the agents run offline against the
# project's mock LLM servers on 127.0.0.1.
step cargo test --workspace --no-run

# While the tests run, the two other builds go on beside them at the lowest CPU priority, in
# target directories of their own (a build in the tests' one would wait on its lock, and so
# would the tests' own cargo runs): the type-check of the macOS and Windows builds (nothing here
# runs them: cargo-zigbuild) and the fuzz target's build. The tests spend much of their time
# waiting on agents, so this takes the idle CPU rather than adding its own minutes at the end.
side_log=$(mktemp)
setsid bash -c 'nice -n 19 ./.ci/check-targets.sh && nice -n 19 ./.ci/build-fuzz.sh build' \
  >"$side_log" 2>&1 &
side=$!
trap 'kill -- -"$side" 2>/dev/null || true; rm -f "$side_log"' EXIT

step cargo test --workspace

side_started=$SECONDS
if ! wait "$side"; then
  cat "$side_log" >&2
  echo "test.sh: the macOS/Windows type-check or the fuzz build failed (output above)" >&2
  exit 1
fi
grep -E '^\+ |Finished' "$side_log" >&2 || true
echo "test.sh: the type-checks and the fuzz build, beside the tests, then $((SECONDS - side_started)) s more" >&2

# Last, the fuzz target (built above) runs for 20 seconds.
step ./.ci/build-fuzz.sh run

echo "test.sh: all steps passed in $((SECONDS - run_started)) s" >&2
