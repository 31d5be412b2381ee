#!/usr/bin/env bash
# Two pqtls builds' load figures side by side, in alternating rounds (docs/benchmarks-load.md §6):
# 1. the generator's CPU per connection, `pqtls load` of each build vs h2load against the same
#    nginx (docs/bench/load.py --compare, as root: nginx and h2load run in the trixie root);
# 2. HTTP/3 (and HTTPS/1.1) connections/s through each build's own pqtls serve
#    (docs/bench/quic-load.sh with two builds).
# Usage: docs/bench/before-after.sh BEFORE_PQTLS AFTER_PQTLS OUT_DIR [ROUNDS] [SECONDS]
set -euo pipefail
[ $# -ge 3 ] || { sed -n 2,7p "$0" >&2; exit 2; }
before=$1 after=$2 out=$3 rounds=${4:-3} seconds=${5:-5}
here=$(dirname "$0")
mkdir -p "$out/quic"
python3 "$here/load.py" --compare "before=$before,after=$after" --only generator \
  --rounds "$rounds" --seconds "$seconds" | tee "$out/generator.jsonl"
"$here/quic-load.sh" "before=$before,after=$after" "$out/quic" "$rounds"
python3 "$here/before_after_table.py" before after "$out" | tee "$out/tables.md"
