#!/bin/sh
# A Debian trixie root with OpenSSL 3.5 and nginx, for interop tests with software nobody
# here wrote. Idempotent: the root is cached (default /var/cache/pqtls/trixie, or
# $PQTLS_TRIXIE_ROOT) and only made when missing. Prints the root's path on success.
# Needs root and the Debian package registry; exits non-zero with a message otherwise.
set -eu
ROOT=${PQTLS_TRIXIE_ROOT:-/var/cache/pqtls/trixie}
MIRROR=${PQTLS_DEBIAN_MIRROR:-http://deb.debian.org/debian}

fail() { echo "trixie-root: $*" >&2; exit 1; }

if [ -x "$ROOT/usr/bin/openssl" ] && [ -x "$ROOT/usr/sbin/nginx" ]; then
  echo "$ROOT"
  exit 0
fi
[ "$(id -u)" = 0 ] || fail "must run as root (debootstrap, chroot)"
if ! command -v debootstrap >/dev/null 2>&1; then
  { apt-get update -qq && apt-get install -y -qq --no-install-recommends debootstrap >/dev/null; } \
    || fail "could not install debootstrap with apt-get (is the Debian package registry reachable?)"
fi
mkdir -p "$(dirname "$ROOT")"
if [ ! -x "$ROOT/usr/bin/apt-get" ]; then
  rm -rf "$ROOT.partial"
  debootstrap --variant=minbase trixie "$ROOT.partial" "$MIRROR" >/dev/null \
    || fail "debootstrap trixie from $MIRROR failed (is the Debian package registry reachable?)"
  rm -rf "$ROOT"
  mv "$ROOT.partial" "$ROOT"
fi
# Never start services inside the root.
printf '#!/bin/sh\nexit 101\n' > "$ROOT/usr/sbin/policy-rc.d"
chmod 755 "$ROOT/usr/sbin/policy-rc.d"
chroot "$ROOT" sh -c 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends openssl nginx >/dev/null' \
  || fail "apt-get install openssl nginx inside $ROOT failed (is the Debian package registry reachable?)"
[ -x "$ROOT/usr/bin/openssl" ] || fail "openssl missing in $ROOT after installation"
echo "$ROOT"
