#!/usr/bin/env bash
# Builds the fuzz target (fuzz/, libFuzzer on the stable toolchain) and runs it for about 20 s
# on a copy of its seed corpus: a crash, a failed check or a build error fails CI.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# libfuzzer-sys compiles libFuzzer (C++) from its own sources.
if ! command -v c++ >/dev/null; then
  apt-get update -qq && apt-get install -y -qq g++
fi

fuzz/run.sh build

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# New inputs go to the first directory (the scratch copy), the seeds are only read.
fuzz/run.sh relay_lines -max_total_time=20 -print_final_stats=1 "$work" 2>&1 | tail -n 15
