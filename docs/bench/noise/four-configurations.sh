#!/bin/bash
# Usage: cd an empty directory; run this (writes {q,h}-{seq,int}-{1,2,3}.json/.ndjson), then ratios.py.
# Four configurations, sequential vs interleaved, without and with a CPU hog on the same core.
P=/work/target-noise/release/pqtls
run() { taskset -c 0 $P insitu --group x25519,X25519MLKEM768 --chain p256:p256,mldsa65:mldsa65 \
          --warmup 50 --loops 300 --schedule $1 --seed $3 --json $2.json --ndjson $2.ndjson --quiet >/dev/null 2>&1; }
for rep in 1 2 3; do
  for sched in sequential interleaved; do
    run $sched q-${sched:0:3}-$rep $rep
    taskset -c 0 sh -c 'while :; do :; done' & hog=$!
    sleep 0.5
    run $sched h-${sched:0:3}-$rep $rep
    kill $hog; wait $hog 2>/dev/null
  done
done
