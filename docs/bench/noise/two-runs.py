#!/usr/bin/env python3
"""Two results directories of the same experiment side by side: handshake CPU (client + server)
per configuration — median and 10 %-trimmed mean — and its ratio to the stack's x25519 + P-256,
with the run-to-run differences. A configuration whose median lies next to a gap between modes
(`median_near_gap`, ML-DSA signing) is marked *.
Usage: two-runs.py r1/default/records.ndjson r2/default/records.ndjson"""
import json, sys

def load(p):
    out = {}
    for line in open(p):
        r = json.loads(line); res = r["result"]; t = res["total_cpu_ns"]
        gaps = t.get("median_near_gap", False) or any(
            s.get("median_near_gap", False) for side in ("client", "server")
            for s in [res[side]["total_cpu_ns"], *res[side]["steps"].values()])
        out[(r["scenario"]["stack"], r["label"])] = {
            "median": t["median"], "tmean": t.get("trimmed_mean", float("nan")),
            "loops": res["loops"]["measured"], "gap": gaps,
            "by": res["loops"].get("stopped_by", ""), "met": res["loops"].get("rule_met_at")}
    return out

a, b = load(sys.argv[1]), load(sys.argv[2])
for stat, name in (("median", "median"), ("tmean", "trimmed mean")):
    print(f"\n{name}:\n")
    print("| stack | configuration | run 1 µs | run 2 µs | Δ | run 1 ratio | run 2 ratio | Δ ratio | loops 1 / 2 |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    dm, dr = [], []
    for k in sorted(a):
        if k not in b: continue
        base = next(l for (s, l) in a if s == k[0] and l.startswith("x25519 p256"))
        ra, rb = a[k][stat] / a[(k[0], base)][stat], b[k][stat] / b[(k[0], base)][stat]
        d = b[k][stat] / a[k][stat] - 1; dm.append(abs(d))
        if k[1] != base: dr.append(abs(rb / ra - 1))
        mark = " *" if a[k]["gap"] or b[k]["gap"] else ""
        print(f"| {k[0]} | {k[1]}{mark} | {a[k][stat]/1e3:.0f} | {b[k][stat]/1e3:.0f} | {d*100:+.1f} % | {ra:.3f} | {rb:.3f} | {(rb/ra-1)*100:+.1f} % | {a[k]['loops']} / {b[k]['loops']} |")
    print(f"\n{name}: {sum(x <= 0.02 for x in dm)} of {len(dm)} within ±2 % (largest |Δ| {max(dm)*100:.1f} %, median {sorted(dm)[len(dm)//2]*100:.1f} %); "
          f"ratios: {sum(x <= 0.02 for x in dr)} of {len(dr)} within ±2 % (largest {max(dr)*100:.1f} %, median {sorted(dr)[len(dr)//2]*100:.1f} %)")

# Which rule stopped each record (loops.stopped_by, issue 12) and what the window rule cost:
# handshakes measured past the record's own rule (loops.rule_met_at), weighted by its CPU.
for name, run in (("run 1", a), ("run 2", b)):
    by = {}
    for v in run.values():
        by[v["by"] or "?"] = by.get(v["by"] or "?", 0) + 1
    extra = sum((v["loops"] - v["met"]) * v["median"] for v in run.values() if v["met"] is not None)
    total = sum(v["loops"] * v["median"] for v in run.values())
    met = ", ".join(f"{k[1]} {v['met']}" for k, v in sorted(run.items()) if v["by"] == "window")
    print(f"\n{name}: stopped by {', '.join(f'{k} {n}' for k, n in sorted(by.items()))}; "
          f"CPU past their own rule {extra/total*100:.1f} % of the run's handshake CPU"
          + (f" (own rule met at: {met})" if met else ""))
