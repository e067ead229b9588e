#!/usr/bin/env bash
# Installs the ACP agents that the end-to-end tests run (tests/e2e), at pinned versions, into
# ${ACP_USAGE_AGENTS_CACHE:-$HOME/.cache/acp-usage/agents}; the tests find their executables in
# its node_modules/.bin (or in $ACP_USAGE_AGENTS_DIR). Packages already there at the pinned
# version are left alone, so a warm cache costs nothing.
#
# Pins: tests/src/agents.rs (Agent::package) must name the same versions.
# claude-agent-acp 0.49.0 is the newest release that runs on Node 20 (later ones need Node 22).
# Never install with --omit=optional: the agents' native binaries are optional dependencies
# (opencode-ai's is opencode-linux-x64; npm 11 skips its postinstall, the bin link still works).
set -euo pipefail

packages=(
  "@agentclientprotocol/claude-agent-acp@0.49.0"
  "@zed-industries/codex-acp@0.16.0"
  "@google/gemini-cli@0.61.0"
  "opencode-ai@1.18.33"
)
dest="${ACP_USAGE_AGENTS_CACHE:-$HOME/.cache/acp-usage/agents}"

for tool in node npm; do
  if ! command -v "$tool" >/dev/null; then
    echo "install-agents: $tool is required (Node 20 or newer)" >&2
    exit 1
  fi
done

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
  mkdir -p "$dest"
  [[ -f "$dest/package.json" ]] || echo '{"private": true}' >"$dest/package.json"
  echo "install-agents: installing ${missing[*]} into $dest (node $(node --version))"
  npm install --prefix "$dest" --save-exact --no-audit --no-fund --loglevel=error "${missing[@]}"
fi

for bin in claude-agent-acp codex-acp gemini opencode; do
  if [[ ! -x "$dest/node_modules/.bin/$bin" ]]; then
    echo "install-agents: $dest/node_modules/.bin/$bin is missing after the install" >&2
    exit 1
  fi
done
