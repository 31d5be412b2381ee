#!/usr/bin/env bash
# HTTP/3 vs HTTPS/1.1 through pqtls serve (docs/quic-load.md): rounds of closed-loop loads, the two
# transports of each configuration back to back and the order of the configurations alternating,
# one JSON file of load records per run. Usage: docs/bench/quic-load.sh PQTLS OUT_DIR [ROUNDS]
#
# PQTLS may also be two builds to compare, NAME=PATH,NAME=PATH (e.g. before and after a change):
# each configuration then runs under both builds back to back, the first build first in odd
# rounds and second in even ones; the files are OUT_DIR/roundR-NAME-GROUP.json
# (docs/bench/before_after_table.py reads them).
set -euo pipefail
pqtls=$1 out=$2 rounds=${3:-3}
mkdir -p "$out"
configs=("x25519 p256:p256" "X25519MLKEM768 mldsa65:mldsa65")
names=() paths=()
if [[ $pqtls == *=* ]]; then
  IFS=, read -r -a builds <<<"$pqtls"
  for b in "${builds[@]}"; do
    names+=("${b%%=*}") paths+=("${b#*=}")
    [ -x "${b#*=}" ] || { echo "quic-load.sh: ${b%%=*}'s pqtls ${b#*=} is not an executable file" >&2; exit 2; }
  done
  [ ${#names[@]} -eq 2 ] || { echo "quic-load.sh: give one PQTLS or two as NAME=PATH,NAME=PATH" >&2; exit 2; }
else
  names=("") paths=("$pqtls")
fi
for r in $(seq 1 "$rounds"); do
  order=(0 1); [ $((r % 2)) -eq 0 ] && order=(1 0)
  border=(0); [ ${#names[@]} -eq 2 ] && border=("${order[@]}")
  for i in "${order[@]}"; do
    read -r group chain <<<"${configs[$i]}"
    for j in "${border[@]}"; do
      name=${names[$j]}
      "${paths[$j]}" load --stack rustls --group "$group" --chain "$chain" --http 1.1,3 \
        --connections 4 --response-size 1KiB --warmup-time 1s --duration 5s --quiet \
        --json "$out/round$r${name:+-$name}-$group.json"
    done
  done
done
if [ ${#names[@]} -eq 1 ]; then
  python3 "$(dirname "$0")/quic_load_table.py" "$out"/round*.json
fi
