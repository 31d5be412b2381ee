#!/usr/bin/env python3
"""Two results directories of the same experiment side by side: median handshake CPU and its
ratio to the stack's x25519 + P-256, per configuration, and the run-to-run differences.
Usage: two-runs.py r1/default/records.ndjson r2/default/records.ndjson"""
import json, sys
def load(p):
    out = {}
    for line in open(p):
        r = json.loads(line); res = r["result"]
        out[(r["scenario"]["stack"], r["label"])] = (res["total_cpu_ns"]["median"], res["loops"]["measured"], res["loops"]["stopped"])
    return out
a, b = load(sys.argv[1]), load(sys.argv[2])
print("| stack | configuration | run 1 µs | run 2 µs | Δ median | run 1 ratio | run 2 ratio | Δ ratio | loops 1 / 2 |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
dm, dr = [], []
for k in sorted(a):
    if k not in b: continue
    base = next(l for (s, l) in a if s == k[0] and l.startswith("x25519 p256"))
    ra, rb = a[k][0] / a[(k[0], base)][0], b[k][0] / b[(k[0], base)][0]
    d = b[k][0] / a[k][0] - 1; dm.append(abs(d))
    if ra != 1.0: dr.append(abs(rb / ra - 1))
    print(f"| {k[0]} | {k[1]} | {a[k][0]/1e3:.0f} | {b[k][0]/1e3:.0f} | {d*100:+.1f} % | {ra:.3f} | {rb:.3f} | {(rb/ra-1)*100:+.1f} % | {a[k][1]} / {b[k][1]} |")
print(f"\nlargest |Δ median| {max(dm)*100:.1f} %, median {sorted(dm)[len(dm)//2]*100:.1f} %; largest |Δ ratio| {max(dr)*100:.1f} %, median {sorted(dr)[len(dr)//2]*100:.1f} %")
