#!/usr/bin/env bash
# Builds the fuzz target (fuzz/, libFuzzer on the stable toolchain) and runs it for about 20 s
# on a copy of its seed corpus: a crash, a failed check or a build error fails CI.
#
#   .ci/build-fuzz.sh          build, then run
#   .ci/build-fuzz.sh build    build only (.ci/test.sh builds it beside the tests)
#   .ci/build-fuzz.sh run      run (builds first if anything changed)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
mode=${1:-all}

# libfuzzer-sys compiles libFuzzer (C++) from its own sources.
if ! command -v c++ >/dev/null; then
  apt-get update -qq && apt-get install -y -qq g++
fi

if [[ "$mode" != run ]]; then
  fuzz/run.sh build
fi
if [[ "$mode" == build ]]; then
  exit 0
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# New inputs go to the first directory (the scratch copy), the seeds are only read.
fuzz/run.sh relay_lines -max_total_time=20 -print_final_stats=1 "$work" 2>&1 | tail -n 15
