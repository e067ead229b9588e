#!/usr/bin/env bash
# Builds the fuzz target with libFuzzer on the stable toolchain and runs it.
#
#   fuzz/run.sh build                 # build only
#   fuzz/run.sh [TARGET] [LIBFUZZER ARGS...]
#       e.g. fuzz/run.sh relay_lines -max_total_time=60
#
# Runs on the corpus in fuzz/corpus/TARGET (new inputs are added there; copy back only the ones
# worth keeping) and writes crashes to fuzz/artifacts/TARGET/. `cargo fuzz` on nightly uses the
# same layout; this script passes by hand the coverage flags it would pass, which stable accepts.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"

host=$(rustc -vV | sed -n 's/^host: //p')
# libFuzzer's coverage: inline 8-bit counters, a PC table and comparison tracing, as cargo-fuzz
# sets them. `--target` keeps these flags off build scripts and proc macros.
export RUSTFLAGS="${RUSTFLAGS:-} --cfg fuzzing -Cpasses=sancov-module \
-Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters \
-Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares \
-Cdebug-assertions -Coverflow-checks"
# A target directory of its own (fuzz/target unless ACP_USAGE_FUZZ_TARGET_DIR says where): the
# flags differ from the workspace's, and sharing its directory would mean waiting on its lock.
export CARGO_TARGET_DIR="${ACP_USAGE_FUZZ_TARGET_DIR:-$PWD/target}"

build() {
  cargo build --release --target "$host" --bins
}

if [[ "${1:-}" == build ]]; then
  build
  exit 0
fi

target=relay_lines
if [[ $# -gt 0 && "$1" != -* ]]; then
  target=$1
  shift
fi
build
mkdir -p "corpus/$target" "artifacts/$target"
exec "$CARGO_TARGET_DIR/$host/release/$target" -artifact_prefix="artifacts/$target/" "$@" "corpus/$target"
