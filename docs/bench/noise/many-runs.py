#!/usr/bin/env python3
"""N results directories of the same experiment: over every pair of runs, how many
configurations' handshake CPU (client + server) and how many ratios to the stack's x25519 + P-256
agree within ±2 % — for the median, the 10 %-trimmed mean and the 15th percentile — and, for the
trimmed means, how many ratio differences lie within the records' own intervals.
Usage: many-runs.py LABEL r1/default/records.ndjson r2/... [r3 ...]"""
import itertools, json, statistics, sys

def load(p):
    out = {}
    for line in open(p):
        r = json.loads(line); t = r["result"]["total_cpu_ns"]
        p15 = t["quantiles"].get("p15", float("nan"))
        half = (t["trimmed_mean_ci"][1] - t["trimmed_mean_ci"][0]) / 2 / t["trimmed_mean"]
        out[(r["scenario"]["stack"], r["label"])] = {"median": t["median"], "tmean": t["trimmed_mean"], "p15": p15,
                                                     "tmean_half": half}
    return out

label, runs = sys.argv[1], [load(p) for p in sys.argv[2:]]
for stat in ("median", "tmean", "p15"):
    dm, dr, z = [], [], []
    for a, b in itertools.combinations(runs, 2):
        for k in a:
            base = next(l for (s, l) in a if s == k[0] and l.startswith("x25519 p256"))
            dm.append(abs(b[k][stat] / a[k][stat] - 1))
            if k[1] != base:
                ra, rb = a[k][stat] / a[(k[0], base)][stat], b[k][stat] / b[(k[0], base)][stat]
                dr.append(abs(rb / ra - 1))
                # The difference against the 95 % half-width the four records' trimmed-mean
                # intervals give it (in quadrature): without a bias between runs ~95 % are ≤ 1.
                half = sum(x[j]["tmean_half"] ** 2 for x in (a, b) for j in (k, (k[0], base))) ** 0.5
                z.append(abs(rb / ra - 1) / half)
    within = lambda xs: sum(x <= 0.02 for x in xs) / len(xs) * 100
    print(f"{label} {stat:6}: values {within(dm):5.1f} % within ±2 % (median |Δ| {statistics.median(dm)*100:.1f} %, max {max(dm)*100:.1f} %); "
          f"ratios {within(dr):5.1f} % within ±2 % (median |Δ| {statistics.median(dr)*100:.1f} %, max {max(dr)*100:.1f} %)  "
          f"[{len(runs)} runs, {len(runs)*(len(runs)-1)//2} pairs]")
    if stat == "tmean":
        print(f"{label} tmean  : ratio differences within their own 95 % interval {sum(x <= 1 for x in z) / len(z) * 100:.0f} % "
              f"(median |Δ| / half-width {statistics.median(z):.2f}, largest {max(z):.2f}; docs/benchmarks.md §10.5)")
