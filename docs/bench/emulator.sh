#!/bin/sh
# The delay emulator's accuracy, lateness and CPU use (docs/benchmarks-netlab.md), as root:
# asked vs measured RTT at 10/50/150 ms on a 200 Mbit/s link, idle and with a 100 Mbit/s bulk
# flow server → client during the RTT probes; then the highest rate that verifies at 50 ms.
# Usage: sh docs/bench/emulator.sh [path/to/pqtls] > emulator.txt 2>&1
P=${1:-target/release/pqtls}
uptime
for rtt in 10ms 50ms 150ms; do
  for flow in "" "--flow 100mbit"; do
    echo "== --rtt $rtt --bandwidth 200mbit $flow"
    $P netlab verify --rtt $rtt --bandwidth 200mbit $flow
  done
done
for bw in 100mbit 200mbit 300mbit 500mbit 1gbit; do
  echo "== --rtt 50ms --bandwidth $bw"
  $P netlab verify --rtt 50ms --bandwidth $bw
done
uptime
