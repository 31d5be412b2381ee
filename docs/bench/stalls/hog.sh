#!/bin/sh
# ppoll lateness on CPU 1 alone, beside a user-space hog, beside a memory (kernel-work) hog, also on CPU 1.
#   sh docs/bench/stalls/hog.sh ROUNDS >> /tmp/stalls-data/hog.txt
for r in $(seq 1 ${1:-2}); do
  for h in none hog-user hog-mem; do
    echo "== hog round $r $h $(date -u +%T) $(uptime | sed 's/.*load/load/')"
    top -bn1 -w 200 | sed -n '8,10p' | awk '{print "   top:", $9"%", $12}'
    [ $h != none ] && { /tmp/stalls $h 21 1 & HP=$!; sleep 0.5; }
    /tmp/stalls ppoll 20 1
    [ $h != none ] && wait $HP
  done
done
