#!/usr/bin/env bash
# A Debian 13 (trixie) root with third-party TLS peers on OpenSSL 3.5: the `openssl` CLI and
# nginx. Used by the interop tests; made once and cached. Prints the root's path.
#   PQTLS_TRIXIE_ROOT   where to keep it (default /var/cache/pqtls/trixie)
#   PQTLS_DEBIAN_MIRROR the mirror (default: the host's first Debian URI, else deb.debian.org)
set -euo pipefail
root="${PQTLS_TRIXIE_ROOT:-/var/cache/pqtls/trixie}"
if [ -x "$root/usr/bin/openssl" ] && [ -x "$root/usr/sbin/nginx" ] && [ -f "$root/.pqtls-ready" ]; then
  echo "$root"
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "trixie-root: making the interop root needs root (debootstrap, chroot)" >&2
  exit 1
fi
say() { echo "trixie-root: $*" >&2; }
if ! command -v debootstrap >/dev/null 2>&1; then
  say "installing debootstrap"
  apt-get update -qq >&2 && apt-get install -y -qq debootstrap >/dev/null 2>&1 || {
    say "could not install debootstrap with apt-get: is the package registry reachable?"
    exit 1
  }
fi
mirror="${PQTLS_DEBIAN_MIRROR:-}"
if [ -z "$mirror" ]; then
  mirror=$(grep -hoE '^URIs: *http[^ ]*/debian$' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -1 | sed 's/^URIs: *//' || true)
  [ -n "$mirror" ] || mirror="http://deb.debian.org/debian"
fi
tmp="$root.tmp.$$"
cleanup() { rm -rf "$tmp"; }
trap cleanup EXIT
mkdir -p "$(dirname "$root")"
say "debootstrap trixie from $mirror into $tmp (about a minute)"
if ! debootstrap --variant=minbase trixie "$tmp" "$mirror" >"$tmp.log" 2>&1; then
  say "debootstrap failed (is $mirror reachable?); last lines:"
  tail -5 "$tmp.log" >&2
  rm -f "$tmp.log"
  exit 1
fi
rm -f "$tmp.log"
say "installing openssl and nginx in the root"
if ! chroot "$tmp" /bin/sh -c 'DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends openssl nginx >/dev/null'; then
  say "apt-get inside the trixie root failed (is $mirror reachable?)"
  exit 1
fi
# nginx must not start by itself; the tests run it in the foreground.
chroot "$tmp" openssl version >&2
touch "$tmp/.pqtls-ready"
rm -rf "$root"
mv "$tmp" "$root"
trap - EXIT
echo "$root"
