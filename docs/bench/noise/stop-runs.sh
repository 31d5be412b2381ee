#!/bin/bash
# The runs of docs/benchmarks.md §10 (issue 23: the sweep's cost with the window stop rules).
# Usage: cd an empty directory; OLD=/path/to/main/pqtls NEW=/path/to/new/pqtls \
#          docs/bench/noise/stop-runs.sh WHAT…
#   WHAT: pki    (the in-situ file's 11 server chains into empty PKI directories, OLD then NEW,
#                 twice: pki-old1 pki-new1 pki-old2 pki-new2)
#         shard  (experiments/in-situ.toml --shard 7/121 with OLD's default (together), NEW's
#                 default (thin) and NEW --stop each, back to back, one PKI: shard-old,
#                 shard-thin, shard-each)
#         repeat (docs/bench/noise/stop-repeat.toml four times with each of --stop thin,
#                 together and each, rotated: thin-1 together-1 each-1 thin-2 …)
# Every run appends "<dir>: <wall> s wall, <user> s user, <sys> s sys, load <min>-<max>" to runs.txt.
set -u
REPO=$(cd "$(dirname "$0")/../../.." && pwd)
CHAINS=rsa2048:rsa2048,rsa2048:rsa4096,p256:p256,p256:p521,p521:p521,mldsa44:mldsa44,mldsa44:mldsa65,mldsa65:mldsa65,mldsa44:mldsa87,mldsa65:mldsa87,mldsa87:mldsa87
watch_load() { while :; do echo "$(date -u +%T) $(cut -d' ' -f1,2 /proc/loadavg)"; sleep 10; done >"$1.load"; }
one() {  # one DIR command…
  local dir=$1; shift
  watch_load "$dir" & local w=$!
  /usr/bin/time -f "%e %U %S" -o "$dir.time" "$@" >"$dir.out" 2>&1; local rc=$?
  kill $w; wait $w 2>/dev/null
  read -r wall user sys <"$dir.time"
  echo "$dir: $wall s wall, $user s user, $sys s sys, rc $rc, load $(awk '{print $2}' "$dir.load" | sort -n | sed -n '1p;$p' | paste -sd-)" | tee -a runs.txt
}
for what in "$@"; do
  case $what in
    pki) for rep in 1 2; do
           one pki-old$rep $OLD pki --chain $CHAINS --out pki-old$rep
           one pki-new$rep $NEW pki --chain $CHAINS --out pki-new$rep
         done ;;
    shard)
      [ -d pki ] || $NEW pki --chain $CHAINS --out pki >/dev/null
      export PQTLS_PKI_DIR=$PWD/pki
      one shard-old $OLD run "$REPO/experiments/in-situ.toml" --shard 7/121 --results shard-old --no-progress --seed 7
      one shard-thin $NEW run "$REPO/experiments/in-situ.toml" --shard 7/121 --results shard-thin --no-progress --seed 7
      one shard-each $NEW run "$REPO/experiments/in-situ.toml" --shard 7/121 --results shard-each --no-progress --seed 7 --stop each ;;
    repeat)
      [ -d pki ] || $NEW pki --chain $CHAINS --out pki >/dev/null
      export PQTLS_PKI_DIR=$PWD/pki
      for rep in 1 2 3 4; do for stop in thin together each; do
        one $stop-$rep $NEW run "$REPO/docs/bench/noise/stop-repeat.toml" --results $stop-$rep --no-progress --seed $rep --stop $stop
      done; done ;;
  esac
done
