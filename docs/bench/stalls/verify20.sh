#!/bin/sh
# 20 verifications in a row with the unmodified binary (main f34c118), as root:
#   sh docs/bench/stalls/verify20.sh /tmp/pqtls-before > /tmp/verify-before.log 2>&1
# then: python3 docs/bench/stalls/verify_table.py /tmp/verify-before-*.json
P=${1:-/tmp/pqtls-before}
for n in $(seq 1 20); do
  echo "== try $n $(date -u +%T) $(uptime | sed 's/.*load/load/')"
  grep '^cpu ' /proc/stat > /tmp/verify-before-$n.stat0
  $P netlab verify --rtt 50ms --bandwidth 100mbit --json /tmp/verify-before-$n.json > /tmp/verify-before-$n.out 2>&1
  echo "rc=$?"
  grep '^cpu ' /proc/stat > /tmp/verify-before-$n.stat1
done
