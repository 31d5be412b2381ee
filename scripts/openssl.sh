#!/usr/bin/env bash
# Builds the OpenSSL that pqtls measures: OpenSSL 3.5 from the sources bundled in the
# openssl-src crate (the version Cargo.lock pins, fetched from crates.io like any crate),
# configured the way production builds are (assembly on, enable-ec_nistp_64_gcc_128, as
# Debian's packages and the reference in-situ study do), installed into .cache/openssl/<id>
# of this checkout with its `openssl` binary (for `openssl speed` of the very same build).
# .cargo/config.toml points openssl-sys there (OPENSSL_DIR; only static libraries are built).
#
# Idempotent: a finished build whose configure line is unchanged is kept.
#   scripts/openssl.sh          build if missing, print the install directory
#   scripts/openssl.sh --print  print the install directory only (built or not)
#
# To measure another OpenSSL 3.5+ instead (a distribution's, or your own build), skip this
# and point cargo at it: OPENSSL_DIR=/opt/openssl-3.5 cargo build --release (docs/stacks.md).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

# The one configure line (besides --prefix): keep in sync with docs/stacks.md.
# enable-ec_nistp_64_gcc_128: the 64-bit P-224/P-256/P-384/P-521 implementations (P-384
# and P-521 otherwise use the generic, ~7x slower code); assembly is on (no no-asm);
# static libraries without loadable modules, as openssl-src builds them, so the binary
# carries the OpenSSL it was measured with.
# enable-{zlib,brotli,zstd}-dynamic: certificate compression (RFC 8879, the `cert_compression`
# factor). The -dynamic variants load libz.so / libbrotlienc.so + libbrotlidec.so / libzstd.so
# at run time (scripts/setup.sh installs zlib1g-dev, libbrotli-dev, libzstd-dev): a static
# libcrypto.a that referenced them would need every Rust binary linking openssl-sys to add -lz
# -lbrotlienc … after -lcrypto, which openssl-sys cannot be told in order. A library that fails
# to load leaves that algorithm unavailable, which the factor reports as an error.
options=(enable-ec_nistp_64_gcc_128 no-shared no-module no-tests
  enable-zlib-dynamic enable-brotli-dynamic enable-zstd-dynamic
  no-ssl3 no-md2 no-rc5 no-weak-ssl-ciphers --libdir=lib --openssldir=/usr/local/ssl)

case "$(uname -m)" in
  x86_64) target=linux-x86_64 ;;
  aarch64) target=linux-aarch64 ;;
  *) target="" ;; # ./Configure guesses
esac

# The install directory is named by the configure line: .cargo/config.toml names it too.
dir="$root/.cache/openssl/3.5-production"
if [ "${1:-}" = "--print" ]; then echo "$dir"; exit 0; fi

# Locate the openssl-src crate Cargo.lock pins (fetching it if needed: crates.io only).
src=""
find_src() {
  cargo metadata --format-version 1 --locked 2>/dev/null \
    | grep -o '"manifest_path":"[^"]*/openssl-src-[^"/]*/Cargo.toml"' \
    | head -n1 | sed 's/^"manifest_path":"//; s/"$//'
}
manifest=$(find_src || true)
if [ -z "$manifest" ] || [ ! -d "$(dirname "$manifest")/openssl" ]; then
  cargo fetch --locked >/dev/null
  manifest=$(find_src || true)
fi
if [ -z "$manifest" ] || [ ! -d "$(dirname "$manifest")/openssl" ]; then
  echo "pqtls openssl: the openssl-src crate's sources were not found (cargo fetch --locked failed?)" >&2
  exit 1
fi
src="$(dirname "$manifest")/openssl"
version=$(basename "$(dirname "$manifest")")  # openssl-src-300.5.5+3.5.5

configure_line="./Configure $target ${options[*]}"
stamp="$dir/pqtls-build.txt"
if [ -f "$stamp" ] && grep -qxF "source: $version" "$stamp" && grep -qxF "configure: $configure_line" "$stamp" \
  && [ -f "$dir/lib/libcrypto.a" ] && [ -x "$dir/bin/openssl" ]; then
  echo "$dir"
  exit 0
fi

for cmd in perl make gcc; do
  command -v "$cmd" >/dev/null 2>&1 || { echo "pqtls openssl: $cmd is required (scripts/setup.sh installs it)" >&2; exit 1; }
done

echo "pqtls openssl: building OpenSSL from $version with: $configure_line (a few minutes)" >&2
build="$root/.cache/openssl/build"
rm -rf "$build" "$dir"
mkdir -p "$build"
cp -a "$src/." "$build/"
log="$root/.cache/openssl/build.log"
(
  cd "$build"
  # shellcheck disable=SC2086
  perl ./Configure $target --prefix="$dir" "${options[@]}"
  make -j"$(nproc)"
  make install_sw
) >"$log" 2>&1 || { echo "pqtls openssl: the build failed; see $log" >&2; tail -n 20 "$log" >&2; exit 1; }
{
  echo "source: $version"
  echo "configure: $configure_line"
  echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -srm)"
} >"$stamp"
rm -rf "$build"
echo "pqtls openssl: installed in $dir ($("$dir/bin/openssl" version))" >&2
echo "$dir"
