#!/usr/bin/env bash
# Makes sure a headless Chromium is available for the HTML report test; prints its path.
# Installs the Debian package when missing. Fails loudly (exit 1) when it cannot: the test
# that calls this must not pass silently without a browser.
set -euo pipefail
find_browser() {
  for b in chromium chromium-browser google-chrome chrome; do
    if command -v "$b" >/dev/null 2>&1; then command -v "$b"; return 0; fi
  done
  return 1
}
if path=$(find_browser); then echo "$path"; exit 0; fi
if [ "$(id -u)" != 0 ]; then
  echo "chromium is not installed and this user cannot install it (not root); install it with: apt-get install -y chromium" >&2
  exit 1
fi
echo "chromium not found: installing it with apt-get (Debian package 'chromium')" >&2
export DEBIAN_FRONTEND=noninteractive
if ! apt-get update >&2; then
  echo "apt-get update failed: the Debian package registry cannot be reached, so chromium cannot be installed" >&2
  exit 1
fi
if ! apt-get install -y --no-install-recommends chromium >&2; then
  echo "apt-get install chromium failed; install it by hand: apt-get install -y chromium" >&2
  exit 1
fi
if path=$(find_browser); then echo "$path"; exit 0; fi
echo "chromium was installed but no chromium binary is on PATH" >&2
exit 1
