#!/usr/bin/env python3
"""N results directories of the same experiment: each difference of a ratio to the stack's
x25519 + P-256 (10 %-trimmed means of the handshake's CPU) between two runs, against the 95 %
half-width the records' own trimmed-mean intervals give it (the four combined in quadrature).
Without a bias between runs about 95 % are within it (docs/benchmarks.md §10.5).
Usage: ratio-intervals.py LABEL r1/<name>/records.ndjson r2/... [r3 ...]"""
import itertools, json, statistics, sys

def load(path):
    out = {}
    for line in open(path):
        r = json.loads(line); t = r["result"]["total_cpu_ns"]
        half = (t["trimmed_mean_ci"][1] - t["trimmed_mean_ci"][0]) / 2 / t["trimmed_mean"]
        out[(r["scenario"]["stack"], r["label"])] = (t["trimmed_mean"], half)
    return out

label, runs = sys.argv[1], [load(p) for p in sys.argv[2:]]
z = []
for a, b in itertools.combinations(runs, 2):
    for k in a:
        base = next(key for key in a if key[0] == k[0] and key[1].startswith("x25519 p256"))
        if k == base:
            continue
        ra, rb = a[k][0] / a[base][0], b[k][0] / b[base][0]
        half = (a[k][1] ** 2 + a[base][1] ** 2 + b[k][1] ** 2 + b[base][1] ** 2) ** 0.5
        z.append(abs(rb / ra - 1) / half)
print(f"{label}: {len(z)} ratio differences; within their 95 % interval: {sum(x <= 1 for x in z) / len(z) * 100:.0f} %; "
      f"median |Δ| / half-width {statistics.median(z):.2f}, largest {max(z):.2f}  [{len(runs)} runs]")
