#!/usr/bin/env bash
# Installs Chromium (Debian's `chromium` package) for the end-to-end test of `report --html`
# (tests/e2e/report_html.rs), which renders the page headless and reads the DOM it built.
# Nothing happens when /usr/bin/chromium already runs. The package lists are refreshed only when
# the first install fails (a stale or empty list), so a warm machine touches no network.
set -euo pipefail

browser=/usr/bin/chromium
if "$browser" --version >/dev/null 2>&1; then
  echo "install-browser: $("$browser" --version 2>/dev/null) already installed"
  exit 0
fi

sudo=()
if [[ "$(id -u)" != 0 ]]; then
  if ! command -v sudo >/dev/null; then
    echo "install-browser: not root and no sudo: install Debian's chromium package by hand" >&2
    exit 1
  fi
  sudo=(sudo)
fi

install() {
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y --no-install-recommends chromium
}

echo "install-browser: installing chromium with apt-get"
if ! install; then
  echo "install-browser: the install failed; refreshing the package lists and trying again"
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update
  install
fi

if ! "$browser" --version; then
  echo "install-browser: $browser does not run after the install" >&2
  exit 1
fi
