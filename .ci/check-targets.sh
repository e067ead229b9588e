#!/usr/bin/env bash
# Type-checks acp-usage (its library and binaries: what a release build compiles) for macOS and
# Windows, whose builds the release workflow makes but
# nothing here can run: the code behind cfg(not(target_os = "linux")) and cfg(windows) must keep
# compiling. ring's build script compiles C for the target, so zig (through cargo-zigbuild, both
# from PyPI) is the cross C compiler. The tools go to a cache outside the repository.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

targets=(x86_64-apple-darwin x86_64-pc-windows-gnu)
if command -v rustup >/dev/null; then
  rustup target add "${targets[@]}" >/dev/null
fi

if ! command -v cargo-zigbuild >/dev/null; then
  tools="${XDG_CACHE_HOME:-$HOME/.cache}/acp-usage/zigbuild"
  if [ ! -x "$tools/bin/cargo-zigbuild" ]; then
    python3 -m venv "$tools"
    "$tools/bin/pip" install --quiet --disable-pip-version-check 'cargo-zigbuild==0.24.*' 'ziglang==0.17.*'
  fi
  # The venv's python3 carries ziglang, which cargo-zigbuild runs when no `zig` is on PATH.
  export PATH="$tools/bin:$PATH"
fi

# A target directory of its own: .ci/test.sh runs this beside the tests, whose own cargo runs
# (the SDK client's build, `cargo xtask dist npm`) would otherwise wait on this build's lock.
export CARGO_TARGET_DIR="${ACP_USAGE_CROSS_TARGET_DIR:-${CARGO_TARGET_DIR:-target}/cross}"

for target in "${targets[@]}"; do
  echo "+ cargo-zigbuild check -p acp-usage --lib --bins --target $target"
  cargo-zigbuild check --locked -p acp-usage --lib --bins --target "$target"
done
