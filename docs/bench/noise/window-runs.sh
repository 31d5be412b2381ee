#!/bin/bash
# The runs of docs/benchmarks-history.md §5.6, §5.7 and §6.1 with the window stop rule (issue 12).
# Usage: cd an empty directory; P=/path/to/release/pqtls docs/bench/noise/window-runs.sh WHAT…
#   WHAT: repeat  (openssl-repeat.toml twice: s1, s2)
#         default (experiments/default.toml twice, unpinned: r1, r2)
#         hog     (default.toml pinned to CPU 0, quiet and with a busy loop on CPU 0, interleaved
#                  and sequential: q-int, h-int, q-seq, h-seq)
# Every run logs the 1-minute load average every 10 s to <dir>.load (time, load1, load5).
set -u
P=${P:-/work/target-noise4/release/pqtls}
REPO=$(cd "$(dirname "$0")/../../.." && pwd)
watch_load() { while :; do echo "$(date -u +%T) $(cut -d' ' -f1,2 /proc/loadavg)"; sleep 10; done >"$1.load"; }
one() {  # one DIR [taskset…] -- run args
  local dir=$1; shift
  watch_load "$dir" & local w=$!
  local t0=$(date +%s)
  "$@" --results "$dir" --no-progress >"$dir.out" 2>&1; local rc=$?
  echo "$dir: $(( $(date +%s) - t0 )) s, rc $rc, load $(awk '{print $2}' "$dir.load" | sort -n | sed -n '1p;$p' | paste -sd-)" | tee -a runs.txt
  kill $w; wait $w 2>/dev/null
}
hog_on() { taskset -c 0 sh -c 'while :; do :; done' & HOG=$!; sleep 0.5; }
hog_off() { kill $HOG; wait $HOG 2>/dev/null; }
for what in "$@"; do
  case $what in
    repeat) for d in s1 s2; do one $d $P run "$REPO/docs/bench/noise/openssl-repeat.toml"; done ;;
    default) for d in r1 r2; do one $d $P run "$REPO/experiments/default.toml"; done ;;
    hog)
      for s in interleaved sequential; do
        one q-${s:0:3} taskset -c 0 $P run "$REPO/experiments/default.toml" --schedule $s
        hog_on; one h-${s:0:3} taskset -c 0 $P run "$REPO/experiments/default.toml" --schedule $s; hog_off
      done ;;
  esac
done
