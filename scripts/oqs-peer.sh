#!/usr/bin/env bash
# A real OQS-enabled peer: liboqs 0.13.0 and oqs-provider 0.9.0 built against the OpenSSL 3.5
# of the Debian trixie root (scripts/trixie-root.sh), the provider module installed in that
# root's OpenSSL module directory, plus HAProxy 3.0 (nginx is already there). Cached and
# idempotent: a second run only checks the marker and prints the root's path.
#
# The root's global openssl.cnf is never changed. The provider is loaded per command
# (`-provider oqsprovider -provider default`) or through the lab-only configuration this
# script writes, /etc/pqtls/openssl-oqs.cnf inside the root (OPENSSL_CONF=... for nginx).
#
#   PQTLS_TRIXIE_ROOT        the root (default /var/cache/pqtls/trixie; made if missing)
#   PQTLS_LIBOQS_SRC         liboqs 0.13.0 source (default: the copy vendored by the oqs-sys
#                            crate in the cargo registry)
#   PQTLS_OQS_PROVIDER_TAR   oqs-provider 0.9.0 tarball (default: ../shared/peers/ of the repo;
#                            if absent, with PQTLS_OQS_PROVIDER_GIT=1, the 0.9.0 tag is cloned
#                            from the project's public repository)
#
# Builds in a copy inside the root (nothing is bind-mounted, nothing keeps running). About
# two minutes the first time on 2 cores (only the algorithms the lab uses are built).
set -euo pipefail
say() { echo "oqs-peer: $*" >&2; }
here="$(cd "$(dirname "$0")" && pwd)"
LIBOQS_VERSION=0.13.0
PROVIDER_VERSION=0.9.0
stamp="liboqs ${LIBOQS_VERSION} oqs-provider ${PROVIDER_VERSION} build 1"

root="$(bash "$here/trixie-root.sh")"
marker="$root/.pqtls-oqs-ready"
if [ -f "$marker" ] && [ "$(cat "$marker")" = "$stamp" ] && [ -x "$root/usr/sbin/haproxy" ] \
  && [ -f "$root/etc/pqtls/openssl-oqs.cnf" ]; then
  echo "$root"
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  say "building the OQS peer needs root (chroot into $root)"
  exit 1
fi

# Sources.
liboqs="${PQTLS_LIBOQS_SRC:-}"
if [ -z "$liboqs" ]; then
  for d in "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/oqs-sys-*+liboqs-${LIBOQS_VERSION}/liboqs; do
    [ -f "$d/CMakeLists.txt" ] && liboqs="$d" && break
  done
fi
if [ -z "$liboqs" ] || [ ! -f "$liboqs/CMakeLists.txt" ]; then
  say "liboqs ${LIBOQS_VERSION} source not found: build pqtls once (cargo fetches oqs-sys, which vendors it) or set PQTLS_LIBOQS_SRC"
  exit 1
fi
tarball="${PQTLS_OQS_PROVIDER_TAR:-$here/../../shared/peers/oqs-provider-${PROVIDER_VERSION}.tar.gz}"
[ -f "$tarball" ] || tarball="$here/../shared/peers/oqs-provider-${PROVIDER_VERSION}.tar.gz"

build_inside="/tmp/pqtls-oqs-build"
build="$root$build_inside"
cleanup() { rm -rf "$build"; }
trap cleanup EXIT
rm -rf "$build"
mkdir -p "$build"
say "copying liboqs ${LIBOQS_VERSION} from $liboqs"
cp -a "$liboqs" "$build/liboqs"
if [ -f "$tarball" ]; then
  say "unpacking $(basename "$tarball")"
  tar xzf "$tarball" -C "$build"
  mv "$build/oqs-provider-${PROVIDER_VERSION}" "$build/oqs-provider"
elif [ "${PQTLS_OQS_PROVIDER_GIT:-0}" = 1 ]; then
  say "cloning oqs-provider tag ${PROVIDER_VERSION}"
  git clone -q --depth 1 --branch "${PROVIDER_VERSION}" https://github.com/open-quantum-safe/oqs-provider "$build/oqs-provider"
else
  say "oqs-provider ${PROVIDER_VERSION} tarball not found (looked for $tarball); set PQTLS_OQS_PROVIDER_TAR, or PQTLS_OQS_PROVIDER_GIT=1 to clone the tag"
  exit 1
fi

say "installing the build tools and haproxy in the root (apt-get)"
if ! chroot "$root" /bin/sh -c 'DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends libssl-dev cmake gcc libc6-dev ninja-build haproxy >/dev/null'; then
  chroot "$root" /bin/sh -c 'apt-get update -qq' >&2 || true
  chroot "$root" /bin/sh -c 'DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends libssl-dev cmake gcc libc6-dev ninja-build haproxy >/dev/null' || {
    say "apt-get inside the trixie root failed (is the Debian mirror reachable?)"
    exit 1
  }
fi

jobs="$(nproc 2>/dev/null || echo 2)"
# Only what the lab talks about: FrodoKEM-640-AES, ML-KEM (the OQS hybrids), Falcon-512.
algs="KEM_frodokem_640_aes;KEM_ml_kem_512;KEM_ml_kem_768;KEM_ml_kem_1024;SIG_falcon_512"
say "building liboqs ${LIBOQS_VERSION} (${algs})"
chroot "$root" /bin/sh -ec "
  cd $build_inside/liboqs
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=$build_inside/prefix \
    -DBUILD_SHARED_LIBS=OFF -DCMAKE_POSITION_INDEPENDENT_CODE=ON -DOQS_BUILD_ONLY_LIB=ON \
    -DOQS_USE_OPENSSL=OFF -DOQS_DIST_BUILD=ON -DOQS_MINIMAL_BUILD='${algs}' >/dev/null
  ninja -C build -j $jobs install >/dev/null
" >&2
say "building oqs-provider ${PROVIDER_VERSION}"
chroot "$root" /bin/sh -ec "
  cd $build_inside/oqs-provider
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -Dliboqs_DIR=$build_inside/prefix/lib/cmake/liboqs >/dev/null
  ninja -C build -j $jobs >/dev/null
" >&2
modules="$(chroot "$root" openssl version -m | sed -n 's/^MODULESDIR: "\(.*\)"$/\1/p')"
[ -n "$modules" ] || { say "could not read the root's OpenSSL MODULESDIR"; exit 1; }
install -D -m 0644 "$build/oqs-provider/build/lib/oqsprovider.so" "$root$modules/oqsprovider.so"

# The lab's OpenSSL configuration: default + oqsprovider. Only used where a command is
# given OPENSSL_CONF=/etc/pqtls/openssl-oqs.cnf.
mkdir -p "$root/etc/pqtls"
cat >"$root/etc/pqtls/openssl-oqs.cnf" <<EOF
# pqtls lab only (scripts/oqs-peer.sh): OpenSSL's default provider plus oqs-provider ${PROVIDER_VERSION}.
openssl_conf = pqtls_init

[pqtls_init]
providers = pqtls_providers

[pqtls_providers]
default = pqtls_default
oqsprovider = pqtls_oqs

[pqtls_default]
activate = 1

[pqtls_oqs]
activate = 1
module = $modules/oqsprovider.so
EOF

if ! chroot "$root" openssl list -kem-algorithms -provider oqsprovider -provider default 2>&1 | grep -q frodo640aes; then
  say "the provider does not load in the root:"
  chroot "$root" openssl list -providers -provider oqsprovider >&2 || true
  exit 1
fi
chroot "$root" openssl list -providers -provider oqsprovider -provider default | grep -A2 oqsprovider | sed 's/^/oqs-peer: /' >&2
echo "$stamp" >"$marker"
echo "$root"
