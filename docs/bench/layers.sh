#!/usr/bin/env bash
# Overhead of `pqtls load --layers` and `--capture` on connections/s (docs/benchmarks-layers.md).
# Closed loop, 1 load thread, 1 connection, a new TLS connection per request, pqtls serve in
# this process (rustls, x25519 + Ed25519, 1 KiB); the three variants run interleaved
# (plain, --layers, --capture) for REPS rounds so that the shared machine's noise falls on all
# of them alike. Prints one line per run and the ratios' median and spread.
# Usage: docs/bench/layers.sh [PQTLS] [REPS] [DURATION]
set -euo pipefail
PQTLS=${1:-target/release/pqtls}
REPS=${2:-5}
DUR=${3:-5s}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
common=(load --stack rustls --group x25519 --chain ed25519:ed25519 --response-size 1KiB --new-connection
        --threads 1 --connections 1 --duration "$DUR" --warmup-time 1s --quiet)
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq 1 "$REPS"); do
  for v in plain layers capture; do
    case $v in
      plain) extra=() ;;
      layers) extra=(--layers) ;;
      capture) extra=(--layers --capture "$work/c.pcap" --keylog "$work/c.keys") ;;
    esac
    rm -f "$work"/c.*
    "$PQTLS" "${common[@]}" "${extra[@]}" --json "$work/$v-$r.json" > /dev/null
    python3 -c "import json,sys; r=json.load(open(sys.argv[1]))[0]['result']; print(sys.argv[3], sys.argv[2], round(r['handshakes_per_s'],1))" \
      "$work/$v-$r.json" "$r" "$v"
  done
done | tee "$work/runs.txt"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$work/runs.txt" <<'PY'
import sys, statistics as st
rows = [l.split() for l in open(sys.argv[1])]
by = {}
for v, r, x in ((v, int(r), float(x)) for v, r, x in rows):
    by.setdefault(r, {})[v] = x
for v in ("layers", "capture"):
    q = [by[r][v] / by[r]["plain"] for r in sorted(by)]
    print(f"{v}/plain: median {st.median(q):.3f}, min {min(q):.3f}, max {max(q):.3f} over {len(q)} interleaved rounds")
for v in ("plain", "layers", "capture"):
    xs = [by[r][v] for r in sorted(by)]
    print(f"{v}: median {st.median(xs):.1f} connections/s (min {min(xs):.1f}, max {max(xs):.1f})")
PY
