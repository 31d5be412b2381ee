#!/usr/bin/env bash
# HTTP/3 vs HTTPS/1.1 through pqtls serve (docs/quic-load.md): rounds of closed-loop loads, the two
# transports of each configuration back to back and the order of the configurations alternating,
# one JSON file of load records per run. Usage: docs/bench/quic-load.sh PQTLS OUT_DIR [ROUNDS]
set -euo pipefail
pqtls=$1 out=$2 rounds=${3:-3}
mkdir -p "$out"
configs=("x25519 p256:p256" "X25519MLKEM768 mldsa65:mldsa65")
for r in $(seq 1 "$rounds"); do
  order=(0 1); [ $((r % 2)) -eq 0 ] && order=(1 0)
  for i in "${order[@]}"; do
    read -r group chain <<<"${configs[$i]}"
    "$pqtls" load --stack rustls --group "$group" --chain "$chain" --http 1.1,3 \
      --connections 4 --response-size 1KiB --warmup-time 1s --duration 5s --quiet \
      --json "$out/round$r-$group.json"
  done
done
python3 "$(dirname "$0")/quic_load_table.py" "$out"/round*.json
