#!/bin/bash
# Before/after acceptance of a 50 ms / 100 Mbit/s link, interleaved (issue 32):
#   before: `pqtls netlab verify` of the binary BEFORE (main f34c118: p99 lateness refuses);
#   after:  `pqtls transfer` of the binary AFTER over the same link (the link verified with the
#           p50 rule, then 50 transfers of 50 KiB screened for host stalls), and its
#           `netlab verify` alone.
# Usage (root): docs/bench/stalls/acceptance.sh BEFORE AFTER TRIES OUT_DIR
# Prints one line per try; the JSON of each is kept in OUT_DIR.
set -u
before=$1 after=$2 tries=$3 out=$4
mkdir -p "$out"
steal() { awk '/^cpu /{print $9}' /proc/stat; }
printf 'try\twhat\texit\taccepted\tp50_us\tp99_us\tmax_us\tsteal_ticks\tload1\tmeasured_again/screened\tworst_again_ms\n'
for i in $(seq 1 "$tries"); do
  for what in before transfer-after; do
    s0=$(steal); load=$(cut -d' ' -f1 /proc/loadavg)
    case $what in
      before) "$before" netlab verify --rtt 50ms --bandwidth 100mbit --json "$out/$what-$i.json" >/dev/null 2>&1 ;;
      verify-after) "$after" netlab verify --rtt 50ms --bandwidth 100mbit --json "$out/$what-$i.json" >/dev/null 2>&1 ;;
      transfer-after) "$after" transfer --rtt 50ms --bandwidth 100mbit --group x25519 --chain p256:p256 \
          --size 50KiB --repeat 20 --warmup-time 0s --quiet --json "$out/$what-$i.json" >/dev/null 2>"$out/$what-$i.err" ;;
    esac
    rc=$?
    s1=$(steal)
    f="$out/$what-$i.json"
    if [ "$what" = transfer-after ]; then
      python3 - "$f" "$rc" "$i" "$what" "$((s1 - s0))" "$load" <<'PY'
import json, sys
f, rc, i, what, steal, load = sys.argv[1:]
try:
    r = json.load(open(f))[0]["result"]
    l, e, s = r["link"], r["link"]["emulator"]["lateness"], r["load"].get("stalls") or {}
    print(f"{i}\t{what}\t{rc}\t{l['accepted']}\t{e['p50_ns']//1000}\t{e['p99_ns']//1000}\t{e['max_ns']//1000}\t{steal}\t{load}\t"
          f"{s.get('measured_again')}/{s.get('screened')}\t{s.get('worst_again_ns', 0)/1e6:.2f}")
except Exception as x:
    print(f"{i}\t{what}\t{rc}\tno record ({x})\t\t\t\t{steal}\t{load}")
PY
    else
      python3 - "$f" "$rc" "$i" "$what" "$((s1 - s0))" "$load" <<'PY'
import json, sys
f, rc, i, what, steal, load = sys.argv[1:]
try:
    r = json.load(open(f)); e = r["emulator"]["lateness"]
    failed = ",".join(c["what"] for c in r["checks"] if not c["ok"])
    print(f"{i}\t{what}\t{rc}\t{r['accepted']}{' (' + failed + ')' if failed else ''}\t{e['p50_ns']//1000}\t{e['p99_ns']//1000}\t{e['max_ns']//1000}\t{steal}\t{load}")
except Exception as x:
    print(f"{i}\t{what}\t{rc}\tno report ({x})\t\t\t\t{steal}\t{load}")
PY
    fi
  done
done
