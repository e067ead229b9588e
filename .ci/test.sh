#!/usr/bin/env bash
# The test command (README.md's "The two commands"; .ci/run calls it in CI): every step must pass,
# and the first failure stops the run. Each step prints how long it took, so a slow CI run says
# where its time went.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

run_started=$SECONDS
# Every test binary runs through .ci/test-runner.sh (cargo's runner for the host), which asks
# libtest for each test's time and keeps those lines in $times_log; the slowest ten are printed
# when the run ends, passed or failed. The runner changes nothing of what runs or how tests are
# grouped, and no build (cargo does not fingerprint it).
times_log=$(mktemp)
export ACP_USAGE_TEST_TIMES=$times_log
host_var=$(rustc -vV | sed -n 's/^host: //p' | tr 'a-z.-' 'A-Z__')
export "CARGO_TARGET_${host_var}_RUNNER=$PWD/.ci/test-runner.sh"
# Prints them; changes no exit status (sed reads its whole input, so nothing in the pipe dies of
# SIGPIPE, which under pipefail would have become the run's status).
slowest_tests() {
  echo "test.sh: the slowest tests:" >&2
  sed -nE 's/^test (.*) \.\.\. [a-zA-Z]+ <([0-9.]+)s>$/\2 s  \1/p' "$times_log" |
    sort -rn | sed -n '1,10s/^/  /p' >&2 || true
}
trap 'status=$?; slowest_tests; rm -f "$times_log"; exit "$status"' EXIT
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
# runs them: cargo-zigbuild) and the fuzz target's build; then the fuzz target runs for 20
# seconds. The end-to-end tests spend part of their time waiting on agents (they keep about 1.6
# of the 2 cores busy), so this takes idle CPU rather than adding its own minutes at the end.
side_log=$(mktemp)
setsid bash -c 'nice -n 19 ./.ci/check-targets.sh && nice -n 19 ./.ci/build-fuzz.sh build &&
  ./.ci/build-fuzz.sh run' >"$side_log" 2>&1 &
side=$!
# Every test binary but the end-to-end one (unit tests, each crate's `it` binary, doc tests) runs
# beside the end-to-end tests too: cargo runs a package's binaries one after another, and these
# took 100-120 s before the end-to-end tests could start. Their output goes to a file, printed
# whole when they fail.
rest_log=$(mktemp)
setsid bash -c 'cargo test --workspace --exclude acp-usage-tests' >"$rest_log" 2>&1 &
rest=$!
trap 'status=$?; kill -- -"$side" -"$rest" 2>/dev/null || true; rm -f "$side_log" "$rest_log"
  slowest_tests; rm -f "$times_log"; exit "$status"' EXIT

step cargo test -p acp-usage-tests

# Waits for a job started beside the tests: prints its whole log and fails when it failed,
# else only its lines that match `keep`.
await_beside() {
  local what=$1 pid=$2 log=$3 keep=$4 started=$SECONDS
  if ! wait "$pid"; then
    cat "$log" >&2
    echo "test.sh: $what failed (output above)" >&2
    exit 1
  fi
  grep -E "$keep" "$log" >&2 || true
  echo "test.sh: $what, beside the end-to-end tests, then $((SECONDS - started)) s more" >&2
}
await_beside "'cargo test --workspace --exclude acp-usage-tests'" "$rest" "$rest_log" \
  '^ *Running |^ *Doc-tests |^test result'
await_beside "the macOS/Windows type-check, the fuzz build and the fuzz run" "$side" "$side_log" \
  '^\+ |Finished|Done [0-9]+ runs'

echo "test.sh: all steps passed in $((SECONDS - run_started)) s" >&2
