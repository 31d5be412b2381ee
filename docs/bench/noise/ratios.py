#!/usr/bin/env python3
import json, glob, statistics as st
rows = {}
for f in sorted(glob.glob("[qh]-*-[0-9].json")):
    cond, sched, rep = f[:-5].split("-")
    recs = json.load(open(f))
    tot = {r["label"]: r["result"]["total_cpu_ns"]["median"] for r in recs}
    base = tot["x25519 p256:p256"]
    dist = sum((r["result"]["noise"]["disturbed_client"] + r["result"]["noise"]["disturbed_server"]) for r in recs) / (2 * sum(r["result"]["loops"]["measured"] for r in recs))
    rows.setdefault((cond, sched), []).append((tot, {k: v / base for k, v in tot.items()}, dist))
labels = ["x25519 p256:p256", "x25519 mldsa65:mldsa65", "X25519MLKEM768 p256:p256", "X25519MLKEM768 mldsa65:mldsa65"]
print("| condition | schedule | " + " | ".join(f"{l} µs (ratio)" for l in labels) + " | disturbed sides |")
print("|---|---|" + "---:|" * (len(labels) + 1))
for (cond, sched), runs in sorted(rows.items()):
    cells = []
    for l in labels:
        meds = [r[0][l] / 1e3 for r in runs]; rats = [r[1][l] for r in runs]
        cells.append(f"{st.median(meds):.0f} ({min(rats):.3f}–{max(rats):.3f})")
    print(f"| {'quiet' if cond=='q' else 'hog'} | {sched} | " + " | ".join(cells) + f" | {st.median([r[2] for r in runs])*100:.1f} % |")
