#!/usr/bin/env python3
"""What a run cost, from its records: handshakes measured per record, where its own rule was met,
what stopped it, and the run's handshakes in all (measured + re-warm + warm-up) — the machine-load
independent price of a schedule — and their CPU (client + server, the unmeasured ones at the record's mean) (docs/benchmarks.md §10).
Usage: sweep-cost.py LABEL results/<name>/records.ndjson [--rows]"""
import json, statistics, sys

label, path = sys.argv[1], sys.argv[2]
recs = [json.loads(l) for l in open(path) if l.strip()]
rows, measured, rewarm, warmup, by, cpu_s = [], 0, 0, 0, {}, 0.0
for r in recs:
    res = r["result"]; lo = res["loops"]; sch = (res.get("noise") or {}).get("schedule") or {}
    measured += lo["measured"]; rewarm += sch.get("rewarm_handshakes", 0); warmup += lo["warmup"]
    by[lo.get("stopped_by") or "?"] = by.get(lo.get("stopped_by") or "?", 0) + 1
    # Handshake CPU (client + server) of the measured handshakes, and of the unmeasured ones
    # (re-warm, warm-up) at the record's mean.
    cpu = (res.get("noise") or {}).get("cpu_ns", 0) / 1e9
    cpu_s += cpu * (1 + (sch.get("rewarm_handshakes", 0) + lo["warmup"]) / max(lo["measured"], 1))
    rows.append((r["label"], lo["measured"], lo.get("rule_met_at"), lo.get("stopped_by", ""), sch.get("stop", ""),
                 sch.get("blocks", 0), res["total_cpu_ns"]["median"] / 1e3))
if "--rows" in sys.argv:
    print("| configuration | measured | own rule met at | stopped by | median µs |")
    print("|---|---:|---:|---|---:|")
    for l, m, met, b, stop, blocks, med in rows:
        print(f"| {l} | {m} | {met if met is not None else '—'} | {b} | {med:.0f} |")
loops = [m for _, m, *_ in rows]
if not loops:
    sys.exit(f"{label}: no records in {path}")
print(f"{label}: {len(recs)} records, {measured} handshakes measured (per record: median {statistics.median(loops):.0f}, "
      f"min {min(loops)}, max {max(loops)}), {rewarm} re-warm, {warmup} warm-up = {measured + rewarm + warmup} in all; "
      f"stopped by {', '.join(f'{k} {n}' for k, n in sorted(by.items()))}; handshake CPU {cpu_s:.0f} s")
