#!/usr/bin/env bash
# Installs Mistral Vibe (PyPI mistral-vibe, its ACP server `vibe-acp`) for the end-to-end tests,
# at a pinned version, into a venv: ${ACP_USAGE_AGENTS_CACHE:-$HOME/.cache/acp-usage/agents}/venv-vibe/
# (the tests run venv-vibe/bin/vibe-acp; tests/src/agents.rs, Agent::Vibe, names the same pin).
#
# mistral-vibe needs Python >= 3.12: the first of python3.13, python3.12, pyenv's 3.13.x/3.12.x
# (~/.pyenv/versions, or $PYENV_ROOT/versions) and python3 that is new enough makes the venv; none
# is an error that says so.
#
# mistral-vibe 3.0.3 pins every dependency with `==`, certifi==2026.10.19 among them, which PyPI
# only has as 2026.10.19.post1, and a constraints file cannot loosen an `==` pin. So the package
# goes in without its dependencies, then its own Requires-Dist list with that one pin dropped
# (pip then warns that certifi 2026.10.19.post1 does not match, and everything runs).
#
# Idempotent: a venv with the pinned version and its vibe-acp is left alone (checked through
# importlib.metadata: running vibe-acp would create ~/.vibe).
set -euo pipefail

version="3.0.3"
dest="${ACP_USAGE_AGENTS_CACHE:-$HOME/.cache/acp-usage/agents}"
venv="$dest/venv-vibe"

installed() {
  "$venv/bin/python" -c 'import importlib.metadata as m, sys; sys.exit(m.version("mistral-vibe") != sys.argv[1])' \
    "$version" 2>/dev/null && [[ -x "$venv/bin/vibe-acp" ]]
}
if installed; then
  echo "install-vibe: mistral-vibe $version already in $venv"
  exit 0
fi

python=""
pyenv_root="${PYENV_ROOT:-$HOME/.pyenv}"
for candidate in python3.13 python3.12 "$pyenv_root"/versions/3.13*/bin/python3 \
  "$pyenv_root"/versions/3.12*/bin/python3 python3; do
  if command -v "$candidate" >/dev/null 2>&1 &&
    "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then
    python="$(command -v "$candidate")"
    break
  fi
done
if [[ -z "$python" ]]; then
  echo "install-vibe: mistral-vibe $version needs Python >= 3.12, and none was found" \
    "(python3.13, python3.12, $pyenv_root/versions/3.1[23]*, python3)" >&2
  exit 1
fi

echo "install-vibe: installing mistral-vibe $version into $venv ($("$python" -V))"
rm -rf "$venv"
"$python" -m venv "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check --no-deps "mistral-vibe==$version"
requirements="$(mktemp)"
trap 'rm -f "$requirements"' EXIT
"$venv/bin/python" - >"$requirements" <<'PY'
import importlib.metadata as m, re
for r in m.requires("mistral-vibe") or []:
    if "extra ==" in r:
        continue
    if re.match(r"certifi\b", r):
        r = re.sub(r"==[^;]*", "", r)  # the one pin PyPI cannot satisfy
    print(r)
PY
"$venv/bin/pip" install -q --disable-pip-version-check -r "$requirements"
if ! installed; then
  echo "install-vibe: mistral-vibe $version is not in $venv after the install" >&2
  exit 1
fi
echo "install-vibe: mistral-vibe $version in $venv"
