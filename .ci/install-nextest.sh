#!/usr/bin/env bash
# Makes sure cargo-nextest, which runs the tests (.ci/test.sh), is there at a version that knows
# test priorities (.config/nextest.toml): the machine's own when it is new enough, else the pinned
# one built from crates.io once into ${XDG_CACHE_HOME:-$HOME/.cache}/acp-usage/nextest/bin, which
# test.sh puts on PATH. A first build takes a few minutes; later runs find it there.
set -euo pipefail

pinned="0.9.143"
# Test priorities came in 0.9.91.
oldest="0.9.91"
root="${XDG_CACHE_HOME:-$HOME/.cache}/acp-usage/nextest"

# Whether version $1 is at least $2 (both x.y.z).
at_least() {
  [[ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n1)" == "$2" ]]
}

found=""
if version=$(cargo nextest --version 2>/dev/null | sed -n 's/^cargo-nextest \([0-9.]*\).*/\1/p'); then
  found=$version
fi
if [[ -n "$found" ]] && at_least "$found" "$oldest"; then
  echo "install-nextest: cargo-nextest $found ($(command -v cargo-nextest))"
  exit 0
fi
echo "install-nextest: cargo-nextest ${found:-missing}; building $pinned into $root" >&2
cargo install --locked --root "$root" "cargo-nextest@$pinned"
"$root/bin/cargo-nextest" nextest --version
