#!/usr/bin/env bash
# Per-step medians and minima of pqtls' crypto steps next to the primitive's cost from
# `openssl speed` of the same OpenSSL build (docs/benchmarks.md §4).
#
#   scripts/openssl-steps.sh [PQTLS] [OPENSSL] [LOOPS] [CLOCK]
#     PQTLS    pqtls binary (default target/release/pqtls, or $CARGO_TARGET_DIR/release/pqtls)
#     OPENSSL  the `openssl` binary of the build PQTLS links (default: scripts/openssl.sh's)
#     LOOPS    measured handshakes per configuration (default 300; warm-up 50)
#     CLOCK    pqtls --clock: split (default) or cpu (every event on the thread CPU clock)
#
# Step ↔ primitive (docs/attribution.md's canonical steps):
#   client.client_hello       key-share generation   KEM keygen (openssl speed <KEM>)
#   server.server_hello       encapsulation          KEM encaps (for ECDHE: keygen + derive)
#   client.server_hello       decapsulation          KEM decaps (for ECDHE: derive)
#   server.certificate_verify signing                ecdsap*/rsa*/ML-DSA-* sign
#   client.certificate_verify verification           ecdsap*/rsa*/ML-DSA-* verify
# Prints two markdown tables (µs): step median / minimum, then the primitive.
set -euo pipefail
cd "$(dirname "$0")/.."
pqtls=${1:-${CARGO_TARGET_DIR:-target}/release/pqtls}
openssl=${2:-$(scripts/openssl.sh --print)/bin/openssl}
loops=${3:-300}
clock=${4:-split}
command -v jq >/dev/null 2>&1 || { echo "openssl-steps: jq is required (apt-get install jq)" >&2; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

echo "pqtls: $("$pqtls" --version | grep '^openssl:')" >&2
echo "openssl speed: $("$openssl" version -v) ($("$openssl" version -f))" >&2

# openssl speed, machine-readable (on stderr): "+DTP:<name>:<op>:..." then "+R<n>:<count>:<name or bits>:<seconds>".
"$openssl" speed -seconds 1 -mr ecdsap256 ecdsap384 ecdsap521 \
  ECP-256 ECP-384 ECP-521 X25519 ML-KEM-512 ML-KEM-768 ML-KEM-1024 X25519MLKEM768 \
  rsa2048 rsa3072 rsa4096 ML-DSA-44 ML-DSA-65 ML-DSA-87 2>&1 \
  | awk -F: '/^\+R(7|8|15|16|17|19|20):/ {
      if ($1 == "+R7" || $1 == "+R19") op = "sign"; else if ($1 == "+R8" || $1 == "+R20") op = "verify"
      else if ($1 == "+R15") op = "keygen"; else if ($1 == "+R16") op = "encaps"; else op = "decaps"
      if ($1 == "+R7" || $1 == "+R8") name = "p" $3; else name = $3
      if ($2 > 0) printf "%s %s %.1f\n", name, op, $4 / $2 * 1e6 }' >"$out/speed.txt"
speed() { awk -v n="$1" -v o="$2" '$1 == n && $2 == o { print $3; exit }' "$out/speed.txt"; }

"$pqtls" insitu --quiet --warmup 50 --loops "$loops" --clock "$clock" --group x25519 \
  --chain p256:p256,p384:p384,p521:p521,rsa2048:rsa2048,rsa3072:rsa3072,rsa4096:rsa4096,mldsa44:mldsa44,mldsa65:mldsa65,mldsa87:mldsa87 \
  --json "$out/sig.json" >/dev/null
"$pqtls" insitu --quiet --warmup 50 --loops "$loops" --clock "$clock" --chain p256:p256 \
  --group x25519,secp256r1,secp384r1,secp521r1,MLKEM512,MLKEM768,MLKEM1024,X25519MLKEM768 \
  --json "$out/kex.json" >/dev/null

step() { # file key side step → "median / min" in µs
  jq -r --arg k "$2" --arg side "$3" --arg s "$4" \
    '.[] | select(.scenario.chain == $k or .scenario.group == $k) | .result[$side].steps[$s]
     | "\(.median / 1000 * 10 | round / 10) / \(.min / 1000 * 10 | round / 10)"' "$1" | head -n1
}

echo
echo "| chain (x25519) | server.certificate_verify median / min | sign (speed) | client.certificate_verify median / min | verify (speed) |"
echo "|---|---|---|---|---|"
for c in p256 p384 p521 rsa2048 rsa3072 rsa4096 mldsa44 mldsa65 mldsa87; do
  case $c in mldsa*) n="ML-DSA-${c#mldsa}" ;; *) n=$c ;; esac
  echo "| $c | $(step "$out/sig.json" "$c:$c" server certificate_verify) | $(speed "$n" sign) | $(step "$out/sig.json" "$c:$c" client certificate_verify) | $(speed "$n" verify) |"
done
echo
echo "| group (p256:p256) | client.client_hello median / min | keygen (speed) | server.server_hello median / min | encaps (speed) | client.server_hello median / min | decaps (speed) |"
echo "|---|---|---|---|---|---|---|"
for g in x25519 secp256r1 secp384r1 secp521r1 MLKEM512 MLKEM768 MLKEM1024 X25519MLKEM768; do
  case $g in
    x25519) n=X25519 ;; secp*) n="ECP-${g:4:3}" ;; MLKEM*) n="ML-KEM-${g#MLKEM}" ;; *) n=$g ;;
  esac
  echo "| $g | $(step "$out/kex.json" "$g" client client_hello) | $(speed "$n" keygen) | $(step "$out/kex.json" "$g" server server_hello) | $(speed "$n" encaps) | $(step "$out/kex.json" "$g" client server_hello) | $(speed "$n" decaps) |"
done
