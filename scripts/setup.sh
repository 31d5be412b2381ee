#!/usr/bin/env bash
# Installs the system packages pqtls needs when they are missing (Debian/Ubuntu, run as root
# or with sudo). Idempotent: does nothing when everything is there.
#   build:   gcc, make, perl (OpenSSL 3.5 is built from source), cmake + libclang (liboqs, bindgen),
#            g++ (BoringSSL, built by boring-sys for crates/pqtls-boring; Go is not needed)
#   OpenSSL: the production build pqtls links (scripts/openssl.sh; .cargo/config.toml points there),
#            with zlib1g-dev, libbrotli-dev, libzstd-dev for certificate compression
#   netlab:  iproute2 (ip, tc), iptables (statistic match, NFQUEUE), ethtool (offloads off)
#   capture: tcpdump (`pqtls load --capture`, the capture tests)
#   counts:  valgrind (`--clock instructions` on machines without hardware counters: callgrind)
#   tests:   chromium (the HTML report test), debootstrap (interop peers from Debian trixie),
#            tshark (the capture tests' Wireshark cross-check), slurm-wlm + munge (the local
#            Slurm cluster of tests/batch.rs, scripts/slurm-local.sh), and from PyPI
#            kubernetes-validate (tests/k8s.rs checks deploy/k8s/ against the API schema)
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
have_cmd() { command -v "$1" >/dev/null 2>&1; }
have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }

have_cmd gcc || need+=(gcc)
have_cmd g++ || need+=(g++)
have_cmd make || need+=(make)
have_cmd perl || need+=(perl)
have_cmd cmake || need+=(cmake)
have_cmd pkg-config || need+=(pkg-config)
have_pkg libclang-dev || need+=(libclang-dev)
# Certificate compression (the cert_compression factor): OpenSSL loads them at run time
# (scripts/openssl.sh: enable-{zlib,brotli,zstd}-dynamic, the unversioned .so of -dev packages).
have_pkg zlib1g-dev || need+=(zlib1g-dev)
have_pkg libbrotli-dev || need+=(libbrotli-dev)
have_pkg libzstd-dev || need+=(libzstd-dev)
have_cmd ip || need+=(iproute2)
have_cmd iptables || need+=(iptables)
have_cmd ethtool || need+=(ethtool)
have_cmd tcpdump || need+=(tcpdump)
have_cmd valgrind || need+=(valgrind)
if [ "${PQTLS_SETUP_TESTS:-0}" = 1 ]; then
  have_cmd chromium || need+=(chromium)
  have_cmd debootstrap || need+=(debootstrap)
  have_cmd tshark || need+=(tshark)
  have_cmd slurmctld || need+=(slurm-wlm)
  have_cmd munged || need+=(munge)
fi
if [ -f scripts/deps-extra.txt ]; then
  while read -r p; do
    case "$p" in ""|\#*) continue ;; esac
    have_pkg "$p" || need+=("$p")
  done < scripts/deps-extra.txt
fi

if [ ${#need[@]} -gt 0 ]; then
  echo "pqtls setup: installing ${need[*]}" >&2
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  if ! $SUDO apt-get update -qq || ! $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null; then
    echo "pqtls setup: could not install ${need[*]} with apt-get (is the package registry reachable?)" >&2
    exit 1
  fi
fi

if [ "${PQTLS_SETUP_TESTS:-0}" = 1 ] && ! have_cmd kubernetes-validate; then
  echo "pqtls setup: installing kubernetes-validate (pip)" >&2
  if ! python3 -m pip install -q kubernetes-validate >/dev/null; then
    echo "pqtls setup: could not install kubernetes-validate with pip (is PyPI reachable?)" >&2
    exit 1
  fi
fi

if ! command -v cargo >/dev/null 2>&1; then
  echo "pqtls setup: cargo (Rust ≥ 1.85) is required: https://rustup.rs" >&2
  exit 1
fi

# The OpenSSL 3.5 pqtls links, unless the caller points cargo at another one (OPENSSL_DIR).
if [ -z "${OPENSSL_DIR:-}" ]; then
  scripts/openssl.sh >/dev/null
fi
