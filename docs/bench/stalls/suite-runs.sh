#!/bin/bash
# Runs the whole suite (scripts/test.sh, what CI runs) RUNS times in a row, with a CPU hog at
# nice 19 on one core during the runs listed in HOG (e.g. "2 4"), and prints a table row per
# run: duration, passed, failed, hypervisor steal (ticks of /proc/stat and share of the CPU),
# the load average sampled every 10 s (mean, max). Logs in OUT_DIR/run-N.log. (issue 32)
# Usage (root, from the repository): docs/bench/stalls/suite-runs.sh RUNS "HOG RUNS" OUT_DIR
set -u
runs=$1 hog_runs=$2 out=$3
mkdir -p "$out"
cpu() { awk '/^cpu /{t=0; for(i=2;i<=9;i++) t+=$i; print t, $9}' /proc/stat; }
printf '| run | hog | duration | passed | failed | ignored | steal (ticks, share) | load avg mean / max | exit |\n|---|---|---|---|---|---|---|---|---|\n'
for n in $(seq 1 "$runs"); do
  hog=""
  if [[ " $hog_runs " == *" $n "* ]]; then
    nice -n 19 bash -c 'while :; do :; done' & hog=$!
  fi
  read -r t0 s0 < <(cpu)
  start=$(date +%s)
  ( while :; do cut -d' ' -f1 /proc/loadavg; sleep 10; done ) > "$out/load-$n.txt" & sampler=$!
  CI=true bash scripts/test.sh < /dev/null > "$out/run-$n.log" 2>&1
  rc=$?
  end=$(date +%s)
  kill "$sampler" 2>/dev/null
  [ -n "$hog" ] && kill "$hog" 2>/dev/null
  read -r t1 s1 < <(cpu)
  passed=$(grep -E '^test result:' "$out/run-$n.log" | awk '{p+=$4} END{print p+0}')
  failed=$(grep -E '^test result:' "$out/run-$n.log" | awk '{f+=$6} END{print f+0}')
  ignored=$(grep -E '^test result:' "$out/run-$n.log" | awk '{i+=$8} END{print i+0}')
  load=$(awk '{s+=$1; if($1>m)m=$1} END{printf "%.2f / %.2f", s/NR, m}' "$out/load-$n.txt")
  share=$(awk -v s=$((s1 - s0)) -v t=$((t1 - t0)) 'BEGIN{printf "%.2f %%", t ? 100*s/t : 0}')
  printf '| %d | %s | %d min %02d s | %d | %d | %d | %d, %s | %s | %d |\n' "$n" "${hog:+nice 19 busy loop}" \
    $(((end - start) / 60)) $(((end - start) % 60)) "$passed" "$failed" "$ignored" $((s1 - s0)) "$share" "$load" "$rc"
done
