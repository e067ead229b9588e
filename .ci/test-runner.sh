#!/usr/bin/env bash
# Cargo's runner for the test binaries (.ci/test.sh sets CARGO_TARGET_<host>_RUNNER to it): runs
# the binary with libtest's per-test times (`--report-time`; RUSTC_BOOTSTRAP lets the stable
# libtest take the unstable option, for the test binary only, not for rustc) and appends what it
# prints to $ACP_USAGE_TEST_TIMES, from which test.sh prints the slowest tests. Output and exit
# status are the binary's. A program that is no test binary (a `cargo run` from inside a test:
# its binary is not under `deps/`) runs as it is.
set -uo pipefail
if [[ -z "${ACP_USAGE_TEST_TIMES:-}" || "$1" != */deps/* ]]; then
  exec "$@"
fi
RUSTC_BOOTSTRAP=1 "$@" -Z unstable-options --report-time | tee -a "$ACP_USAGE_TEST_TIMES"
exit "${PIPESTATUS[0]}"
