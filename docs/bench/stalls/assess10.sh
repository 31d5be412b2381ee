#!/bin/bash
# `pqtls assess --network lab` N times (as root): are TTFB/TTLB measured (not predicted) each
# time, and how many transfers were measured again for host stalls? (issue 32)
# Usage: docs/bench/stalls/assess10.sh PQTLS N OUT_DIR [assess flags…]
set -u
pqtls=$1 n=$2 out=$3; shift 3
mkdir -p "$out"
printf 'run\texit\tseconds\ttransfer records\tmeasured again / screened\tworst again ms\tsteal ticks\n'
for i in $(seq 1 "$n"); do
  d="$out/$i"; mkdir -p "$d"
  s0=$(awk '/^cpu /{print $9}' /proc/stat); t0=$(date +%s)
  (cd "$d" && "$pqtls" assess --network lab --no-progress "$@" > out.txt 2>&1); rc=$?
  t1=$(date +%s); s1=$(awk '/^cpu /{print $9}' /proc/stat)
  python3 - "$d" "$i" "$rc" "$((t1 - t0))" "$((s1 - s0))" <<'PY'
import glob, json, sys
d, i, rc, secs, steal = sys.argv[1:]
recs = [json.loads(l) for f in glob.glob(f"{d}/results/assess-*/transfer/records.ndjson") for l in open(f) if l.strip()]
recs = [r for r in recs if r.get("kind") == "transfer"]
again = sum((r["result"]["load"].get("stalls") or {}).get("measured_again", 0) for r in recs)
screened = sum((r["result"]["load"].get("stalls") or {}).get("screened", 0) for r in recs)
worst = max([(r["result"]["load"].get("stalls") or {}).get("worst_again_ns", 0) for r in recs] or [0]) / 1e6
print(f"{i}\t{rc}\t{secs}\t{len(recs)}\t{again}/{screened}\t{worst:.2f}\t{steal}")
PY
done
