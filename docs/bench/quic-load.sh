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
python3 - "$out" <<'PY'
import glob, json, statistics, sys
rows = {}
for f in sorted(glob.glob(sys.argv[1] + "/round*.json")):
    for rec in json.load(open(f)):
        res = rec["result"]; http = "3" if rec["id"].endswith("http=3") else "1.1"
        key = (res["negotiated"]["group"], http)
        rows.setdefault(key, []).append((res["handshakes_per_s"], res["latency"]["p50_ns"] / 1e6, res["latency"]["p99_ns"] / 1e6))
print("| group | HTTP | conns/s (median of rounds) | p50 ms | p99 ms | HTTP/3 ÷ HTTPS/1.1: conns/s, p50, p99 |")
print("|---|---|---|---|---|---|")
for group in sorted({g for g, _ in rows}):
    med = {h: [statistics.median(x[i] for x in rows[(group, h)]) for i in range(3)] for h in ("1.1", "3")}
    for h in ("1.1", "3"):
        ratio = "" if h == "1.1" else " / ".join(f"{med['3'][i] / med['1.1'][i]:.2f}" for i in range(3))
        print(f"| {group} | {h} | {med[h][0]:.0f} | {med[h][1]:.2f} | {med[h][2]:.2f} | {ratio} |")
PY
