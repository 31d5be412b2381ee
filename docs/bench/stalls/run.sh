#!/bin/sh
# Interleaved rounds of stalls.c (docs/bench/stalls/README.md). As root:
#   gcc -O2 -o /tmp/stalls docs/bench/stalls/stalls.c -lpthread
#   sh docs/bench/stalls/run.sh CPU FIRST_ROUND LAST_ROUND [SECONDS] >> /tmp/stalls-data/log.txt
# Per mode: uptime, the busiest processes, and /proc/softirqs + /proc/interrupts snapshots
# before/after (deltas: python3 docs/bench/stalls/irqdelta.py DIR).
CPU=$1; R0=$2; R1=$3; S=${4:-20}
D=/tmp/stalls-data; mkdir -p $D
MODES="spin sleep sleep-rand ppoll ppoll-rand hybrid100 hybrid300 hybrid300-rand"
r=$R0
while [ $r -le $R1 ]; do
  for m in $MODES; do
    tag=c$CPU-r$r-$m; mkdir -p $D/$tag
    echo "== round $r cpu $CPU mode $m $(date -u +%T) $(uptime | sed 's/.*load/load/')"
    top -bn1 -w 200 | sed -n '8,11p' | awk '{print "   top:", $9"%", $12}'
    grep ^cpu /proc/stat > $D/$tag/stat.0; cat /proc/softirqs > $D/$tag/softirqs.0; cat /proc/interrupts > $D/$tag/interrupts.0
    STALLS_DUMP=$D/$tag/dump.txt /tmp/stalls $m $S $CPU
    grep ^cpu /proc/stat > $D/$tag/stat.1; cat /proc/softirqs > $D/$tag/softirqs.1; cat /proc/interrupts > $D/$tag/interrupts.1
  done
  r=$((r+1))
done
