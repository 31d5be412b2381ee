#!/bin/sh
# Like verify20.sh, but each try starts only when no other pqtls process (another engineer's lab
# tests: their emulator thread is also SCHED_FIFO 50 on CPU 1) runs, and a sampler (every 0.2 s)
# marks the try "contended" if one appeared during it. Output /tmp/verify-clean-N.{json,out,ctx}.
#   sh docs/bench/stalls/verify20_guarded.sh /tmp/pqtls-before > /tmp/verify-clean.log 2>&1
P=${1:-/tmp/pqtls-before}
foreign() { pgrep -x pqtls >/dev/null || pgrep -f 'target/(debug|release)/pqtls' >/dev/null; }
for n in $(seq 1 20); do
  w=0; while foreign && [ $w -lt 300 ]; do sleep 2; w=$((w+2)); done
  echo "== try $n $(date -u +%T) waited ${w}s $(uptime | sed 's/.*load/load/')"
  grep '^cpu ' /proc/stat > /tmp/verify-clean-$n.stat0
  ( while :; do foreign && echo contended; sleep 0.2; done ) > /tmp/verify-clean-$n.ctx & S=$!
  $P netlab verify --rtt 50ms --bandwidth 100mbit --json /tmp/verify-clean-$n.json > /tmp/verify-clean-$n.out 2>&1
  echo "rc=$? contended_samples=$(grep -c contended /tmp/verify-clean-$n.ctx)"
  kill $S; grep '^cpu ' /proc/stat > /tmp/verify-clean-$n.stat1
done
