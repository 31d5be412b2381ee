#!/usr/bin/env bash
# A Debian 13 (trixie) root with third-party TLS peers on OpenSSL 3.5: the `openssl` CLI,
# nginx, HAProxy, curl and h2load (nghttp2-client). Used by the interop tests and by
# `pqtls load --via nginx|haproxy` (crates/pqtls-peers); made once and cached. Prints the
# root's path.
#
# The marker file `.pqtls-ready` lists the packages the root has. When this script asks for
# more than a cached root has (an older root made before curl/h2load were added), it installs
# the missing ones with apt inside the root instead of rebuilding it. Concurrent runs (test
# binaries in parallel) wait for each other (flock on <root>.lock).
#   PQTLS_TRIXIE_ROOT   where to keep it (default /var/cache/pqtls/trixie)
#   PQTLS_DEBIAN_MIRROR the mirror (default: the host's first Debian URI, else deb.debian.org)
set -euo pipefail
root="${PQTLS_TRIXIE_ROOT:-/var/cache/pqtls/trixie}"
# What the root must have (Debian package names; one line in the marker).
packages="openssl nginx haproxy curl nghttp2-client"
ready() {
  [ -x "$root/usr/bin/openssl" ] && [ -x "$root/usr/sbin/nginx" ] && [ -f "$root/.pqtls-ready" ] \
    && [ "$(cat "$root/.pqtls-ready")" = "$packages" ]
}
if ready; then
  echo "$root"
  exit 0
fi
say() { echo "trixie-root: $*" >&2; }
if [ "$(id -u)" != 0 ]; then
  if [ -f "$root/.pqtls-ready" ]; then
    say "the root at $root lacks some of: $packages; adding them needs root (chroot, apt-get): run scripts/trixie-root.sh as root once"
  else
    say "making the interop root needs root (debootstrap, chroot)"
  fi
  exit 1
fi
mkdir -p "$(dirname "$root")"
exec 9>"$root.lock"
flock 9
if ready; then
  echo "$root"
  exit 0
fi

# apt-get install inside a root; on failure, refresh the package lists once and retry.
install_in() {
  local dir="$1"
  shift
  local cmd="DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $* >/dev/null"
  chroot "$dir" /bin/sh -c "$cmd" 2>/dev/null && return 0
  chroot "$dir" /bin/sh -c 'apt-get update -qq' >&2 || true
  chroot "$dir" /bin/sh -c "$cmd" >&2
}

if [ -x "$root/usr/bin/openssl" ] && [ -f "$root/.pqtls-ready" ]; then
  # An existing root: add what it lacks, keep the rest (oqs-provider included).
  say "adding to the cached root $root: $packages (apt-get inside the root)"
  if ! install_in "$root" $packages; then
    say "apt-get inside the trixie root failed (is the Debian mirror in $root/etc/apt reachable?)"
    exit 1
  fi
  echo "$packages" >"$root/.pqtls-ready"
  echo "$root"
  exit 0
fi

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
say "debootstrap trixie from $mirror into $tmp (about a minute)"
if ! debootstrap --variant=minbase trixie "$tmp" "$mirror" >"$tmp.log" 2>&1; then
  say "debootstrap failed (is $mirror reachable?); last lines:"
  tail -5 "$tmp.log" >&2
  rm -f "$tmp.log"
  exit 1
fi
rm -f "$tmp.log"
say "installing $packages in the root"
if ! install_in "$tmp" $packages; then
  say "apt-get inside the trixie root failed (is $mirror reachable?)"
  exit 1
fi
# Nothing starts by itself in a chroot (no init); the peers run in the foreground.
chroot "$tmp" openssl version >&2
echo "$packages" >"$tmp/.pqtls-ready"
rm -rf "$root"
mv "$tmp" "$root"
trap - EXIT
echo "$root"
