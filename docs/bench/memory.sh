#!/bin/sh
# Heap per handshake and per step (docs/benchmarks-memory.md): the three reference
# configurations on both stacks, full and resumed handshakes, then what counting costs.
# Usage: sh docs/bench/memory.sh [path/to/pqtls] [outdir] > memory.txt 2>&1
P=${1:-target/release/pqtls}
OUT=${2:-.}
uptime
for pair in x25519:p256:p256 X25519MLKEM768:mldsa65:mldsa65 MLKEM1024:mldsa87:mldsa87; do
  group=${pair%%:*}
  chain=${pair#*:}
  echo "== insitu --memory --group $group --chain $chain"
  $P insitu --memory --stack openssl,rustls --group "$group" --chain "$chain" --resumption false,true \
    --warmup 100 --loops 1000 --json "$OUT/memory-$group.json"
done
echo "== overhead --memory"
$P overhead --memory --stack openssl,rustls --group x25519,X25519MLKEM768 --chain p256:p256,mldsa65:mldsa65 \
  --blocks 20 --block 50 --json "$OUT/memory-overhead.json"
uptime
