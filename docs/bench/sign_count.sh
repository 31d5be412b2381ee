#!/usr/bin/env bash
# Instructions of one signature (EVP_DigestSignInit_ex + EVP_DigestSign) with the OpenSSL
# pqtls links, under the same counter as `--clock instructions` (callgrind), one count per
# signature, sorted. Usage: docs/bench/sign_count.sh KEY.pem [N]   (e.g. a key from pki/)
set -euo pipefail
cd "$(dirname "$0")/../.."
ossl=.cache/openssl/3.5-production
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
gcc -O2 -I"$ossl/include" docs/bench/sign_count.c -o "$work/sign_count" "$ossl"/lib*/libcrypto.a -lpthread -ldl
valgrind --tool=callgrind --quiet --separate-threads=yes --dump-line=no --dump-instr=no \
  --callgrind-out-file="$work/cg" --log-file="$work/vg.log" "$work/sign_count" "$1" "${2:-30}"
for f in "$work"/cg.*; do
  if grep -q "^desc: Trigger: Client Request: sign" "$f"; then grep "^summary:" "$f" | cut -d' ' -f2; fi
done | sort -n | tr '\n' ' '
echo
