#!/usr/bin/env bash
# Installs rotel (the Rust OpenTelemetry collector) for the OTLP end-to-end tests, at a pinned
# version from PyPI, into ${ACP_USAGE_AGENTS_CACHE:-$HOME/.cache/acp-usage/agents}/rotel/:
#
#   rotel-agent      what the tests run (tests/src/otlp.rs): a wrapper that execs bin/rotel-agent
#                    with lib/ on LD_LIBRARY_PATH (exec: the tests' child is rotel itself)
#   bin/rotel-agent  the binary, unzipped from the `rotel` wheel (rotel/rotel-agent inside it)
#   lib/             the libpython3.X.so.1.0 that binary is linked against
#   installed        the pin and the wheel it came from; a warm cache costs one `--version`
#
# Why the wrapper and lib/: rotel ships its binary on PyPI only inside per-Python wheels (cp310 to
# cp313), each linked against that Python's libpython for rotel's Python processors (unused here).
# A pyenv or python.org Python keeps its libpython outside the loader's path, so the bare binary
# fails with "libpython3.13.so.1.0: cannot open shared object file". We take the wheel of the
# newest Python found here whose shared libpython exists and copy that library next to the binary,
# so the cache keeps working if that Python goes away. No venv: pip only downloads the wheel.
#
# Pin: 0.0.1a15 is the newest release on PyPI (`pip index versions rotel --pre`); the binary in it
# reports itself as "rotel 0.0.1-alpha10" (rotel does not bump the binary's version per wheel).
set -euo pipefail

version="0.0.1a15"
dest="${ACP_USAGE_AGENTS_CACHE:-$HOME/.cache/acp-usage/agents}"
rotel_dir="$dest/rotel"
stamp="rotel==$version"

if [[ "$(head -n1 "$rotel_dir/installed" 2>/dev/null || true)" == "$stamp" ]] &&
  "$rotel_dir/rotel-agent" --version >/dev/null 2>&1; then
  echo "install-rotel: rotel $version already in $rotel_dir ($("$rotel_dir/rotel-agent" --version))"
  exit 0
fi

# Pythons to take the wheel's tag and libpython from, newest first; a pyenv shim of a version
# that is not active fails to run and is skipped.
pyenv_root="${PYENV_ROOT:-$HOME/.pyenv}"
candidates=()
for minor in 13 12 11 10; do
  for py in "$pyenv_root"/versions/3."$minor".*/bin/python "$(command -v "python3.$minor" || true)"; do
    [[ -x "$py" ]] && candidates+=("$py")
  done
done
if command -v python3 >/dev/null; then candidates+=("$(command -v python3)"); fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

tried=()
for py in "${candidates[@]}"; do
  # Prints "cp313 /path/to/libpython3.13.so.1.0" when this Python has a shared libpython.
  info="$("$py" -c '
import os, sys, sysconfig
lib = os.path.join(sysconfig.get_config_var("LIBDIR") or "", sysconfig.get_config_var("INSTSONAME") or "")
if os.path.isfile(lib): print("cp%d%d" % sys.version_info[:2], lib)' 2>/dev/null || true)"
  [[ -n "$info" ]] || continue
  tag="${info%% *}"
  libpython="${info#* }"
  # One attempt per tag: another Python of the same version would fetch the same wheel.
  [[ " ${tried[*]-} " == *" $tag "* ]] && continue
  tried+=("$tag")

  rm -rf "$work/wheel" "$work/unpacked"
  echo "install-rotel: fetching rotel $version for $tag with $py"
  if ! "$py" -m pip download --quiet --no-deps --only-binary=:all: --dest "$work/wheel" \
    "rotel==$version"; then
    echo "install-rotel: no $tag wheel of rotel $version, trying another Python" >&2
    continue
  fi
  wheel="$(ls "$work"/wheel/rotel-*.whl)"
  "$py" -m zipfile -e "$wheel" "$work/unpacked"

  rm -rf "$rotel_dir"
  mkdir -p "$rotel_dir/bin" "$rotel_dir/lib"
  cp "$work/unpacked/rotel/rotel-agent" "$rotel_dir/bin/rotel-agent"
  chmod 755 "$rotel_dir/bin/rotel-agent"
  cp -L "$libpython" "$rotel_dir/lib/"
  cat >"$rotel_dir/rotel-agent" <<'EOF'
#!/bin/sh
# Written by .ci/install-rotel.sh: rotel's binary with the libpython it is linked against.
here="$(dirname "$(readlink -f "$0")")"
LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export LD_LIBRARY_PATH
exec "$here/bin/rotel-agent" "$@"
EOF
  chmod 755 "$rotel_dir/rotel-agent"

  if ! agent_version="$("$rotel_dir/rotel-agent" --version 2>&1)"; then
    echo "install-rotel: the $tag binary does not run here: $agent_version" >&2
    continue
  fi
  printf '%s\n%s\n' "$stamp" "$(basename "$wheel")" >"$rotel_dir/installed"
  echo "install-rotel: installed rotel $version ($(basename "$wheel"), $agent_version) into $rotel_dir"
  exit 0
done

echo "install-rotel: could not install rotel $version: no Python 3.10-3.13 with a shared libpython" \
  "whose wheel runs here (tried: ${tried[*]-none})" >&2
rm -rf "$rotel_dir"
exit 1
