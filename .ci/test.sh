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
# cargo-nextest runs the tests: the machine's, or one built once into this cache.
export PATH="${XDG_CACHE_HOME:-$HOME/.cache}/acp-usage/nextest/bin:$PATH"
step ./.ci/install-nextest.sh

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
# The doc tests, which nextest does not run (a few seconds: cargo's lock would make the tests'
# own build wait on them beside the tests).
step cargo test --workspace --doc
# The binary the tests drive, built above (with the integration tests of its crate): each test
# runs in a process of its own, which would otherwise ask cargo for it again.
case $target_dir in
  /*) export ACP_USAGE_BIN=$target_dir/debug/acp-usage ;;
  *) export ACP_USAGE_BIN=$PWD/$target_dir/debug/acp-usage ;;
esac
# The tests' scratch space starts empty: each test process leaves a directory or two there (kept
# for a look after a failure), which in the cache outside the clone would pile up run after run
# (70 MB a run). The end-to-end figures' report, which each test process adds to, goes with it.
mkdir -p "$target_dir/tmp"
find "$target_dir/tmp" -mindepth 1 -maxdepth 1 -exec rm -rf {} +

# While the tests run, the two other builds go on beside them at the lowest CPU priority, in
# target directories of their own (a build in the tests' one would wait on its lock, and so
# would the tests' own cargo runs): the type-check of the macOS and Windows builds (nothing here
# runs them: cargo-zigbuild) and the fuzz target's build; then the fuzz target runs for 20
# seconds. The tests spend part of their time waiting on agents, so this takes idle CPU rather
# than adding its own minutes at the end. Its output goes to a file, printed whole when it fails.
side_log=$(mktemp)
setsid bash -c 'nice -n 19 ./.ci/check-targets.sh && nice -n 19 ./.ci/build-fuzz.sh build &&
  ./.ci/build-fuzz.sh run' >"$side_log" 2>&1 &
side=$!
# The ten slowest tests of the run, from nextest's JUnit report; changes no exit status.
slowest_tests() {
  local junit=target/nextest/ci/junit.xml
  [[ -f $junit ]] || return 0
  echo "test.sh: the slowest tests:" >&2
  python3 - "$junit" <<'PY' >&2 || true
import sys, xml.etree.ElementTree as ET
cases = [(float(c.get("time", 0)), c.get("classname", ""), c.get("name", ""))
         for c in ET.parse(sys.argv[1]).iter("testcase")]
for t, binary, name in sorted(cases, reverse=True)[:10]:
    print(f"  {t:7.3f} s  {binary} {name}")
PY
}
trap 'status=$?; kill -- -"$side" 2>/dev/null || true; rm -f "$side_log"; slowest_tests
  exit "$status"' EXIT

# Every test of every binary in one pool of cargo-nextest, the slowest started first
# (.config/nextest.toml says which, and how many run at once).
rm -f target/nextest/ci/junit.xml
step cargo nextest run --workspace --profile ci

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
  echo "test.sh: $what, beside the tests, then $((SECONDS - started)) s more" >&2
}
await_beside "the macOS/Windows type-check, the fuzz build and the fuzz run" "$side" "$side_log" \
  '^\+ |Finished|Done [0-9]+ runs'

echo "test.sh: all steps passed in $((SECONDS - run_started)) s" >&2
