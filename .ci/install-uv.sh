#!/usr/bin/env bash
# Installs uv (PyPI `uv`, which brings `uvx`) for the end-to-end test that launches Mistral Vibe
# the way users of Python agents do, `uvx --from mistral-vibe==<pin> vibe-acp`
# (tests/e2e/launchers.rs), into ${ACP_USAGE_AGENTS_CACHE:-$HOME/.cache/acp-usage/agents}:
#
#   venv-uv/bin/uvx            uv at a pinned version, in a venv of its own
#   uv-cache/                  uv's cache, holding mistral-vibe and its dependencies, so that the
#                              test runs uvx offline (UV_OFFLINE=1, UV_CACHE_DIR)
#   uv-vibe-overrides.txt      mistral-vibe pins certifi==2026.10.19, which PyPI only has as
#                              2026.10.19.post1 (see install-vibe.sh): this override (UV_OVERRIDE)
#                              lets uv resolve it
#
# uv runs Vibe on the Python of venv-vibe/ (install-vibe.sh runs first): UV_PYTHON, with no
# download of a Python of uv's own.
#
# Idempotent: uv at the pinned version whose offline `uvx … vibe-acp --version` answers the pinned
# Vibe is left alone.
set -euo pipefail

uv_version="0.13.9"
vibe_version="3.0.3"
dest="${ACP_USAGE_AGENTS_CACHE:-$HOME/.cache/acp-usage/agents}"
venv="$dest/venv-uv"
overrides="$dest/uv-vibe-overrides.txt"
python="$dest/venv-vibe/bin/python3"

if [[ ! -x "$python" ]]; then
  echo "install-uv: $python is missing: run .ci/install-vibe.sh first" >&2
  exit 1
fi

if [[ "$("$venv/bin/uv" --version 2>/dev/null || true)" != "uv $uv_version"* ]]; then
  echo "install-uv: installing uv $uv_version into $venv"
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check "uv==$uv_version"
fi

echo 'certifi>=2026.10.19' >"$overrides.new"
if cmp -s "$overrides.new" "$overrides"; then rm "$overrides.new"; else mv "$overrides.new" "$overrides"; fi

scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
vibe_version_via_uvx() {
  # A HOME of its own: Vibe writes ~/.vibe when it starts.
  HOME="$scratch" VIBE_HOME="$scratch/.vibe" UV_CACHE_DIR="$dest/uv-cache" UV_PYTHON="$python" \
    UV_PYTHON_DOWNLOADS=never UV_OVERRIDE="$overrides" UV_NO_CONFIG=1 "$@" \
    "$venv/bin/uvx" --from "mistral-vibe==$vibe_version" vibe-acp --version 2>/dev/null || true
}
if [[ "$(vibe_version_via_uvx env UV_OFFLINE=1)" == "vibe-acp $vibe_version" ]]; then
  echo "install-uv: uv $uv_version and mistral-vibe $vibe_version already in $dest/uv-cache"
  exit 0
fi
echo "install-uv: filling $dest/uv-cache with mistral-vibe $vibe_version (from PyPI)"
got="$(vibe_version_via_uvx env)"
if [[ "$got" != "vibe-acp $vibe_version" ]] ||
  [[ "$(vibe_version_via_uvx env UV_OFFLINE=1)" != "vibe-acp $vibe_version" ]]; then
  echo "install-uv: uvx could not run mistral-vibe $vibe_version (got: ${got:-nothing})" >&2
  exit 1
fi
echo "install-uv: uv $uv_version and mistral-vibe $vibe_version in $dest/uv-cache"
