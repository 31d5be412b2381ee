#!/usr/bin/env python3
"""Two runs of one experiment side by side: every step's 10 %-trimmed mean and every
configuration's ratio to its stack's baseline (the first configuration of the stack), with the
run-to-run difference. Usage: instructions_compare.py RESULTS_A RESULTS_B [--limit 0.5]
(prints a Markdown table and a tally of what is within ±limit %)."""
import json, sys, pathlib

def records(d):
    out = {}
    for line in (pathlib.Path(d) / "records.ndjson").read_text().splitlines():
        r = json.loads(line)
        out[r["id"]] = r
    return out

def main():
    a, b = records(sys.argv[1]), records(sys.argv[2])
    limit = float(sys.argv[sys.argv.index("--limit") + 1]) if "--limit" in sys.argv else 0.5
    rows, within, total, worst = [], 0, 0, []
    ratios_within, ratios = 0, []
    base = {}
    for id_, ra in a.items():
        rb = b.get(id_)
        if rb is None:
            continue
        stack = ra["scenario"]["stack"]
        base.setdefault(stack, id_)
        resa, resb = ra["result"], rb["result"]
        for side in ("client", "server"):
            for step, sa in list(resa[side]["steps"].items()) + [("TOTAL", resa[side]["total_cpu_ns"])]:
                sb = resb[side]["steps"].get(step) if step != "TOTAL" else resb[side]["total_cpu_ns"]
                if sb is None or sa["trimmed_mean"] == 0:
                    continue
                d = 100.0 * (sb["trimmed_mean"] / sa["trimmed_mean"] - 1.0)
                total += 1
                within += abs(d) <= limit
                worst.append((abs(d), ra["label"], stack, side, step, d))
        ta, tb = resa["total_cpu_ns"]["trimmed_mean"], resb["total_cpu_ns"]["trimmed_mean"]
        rows.append((stack, ra["label"], ta, tb, 100.0 * (tb / ta - 1.0), resa["loops"]["measured"], resb["loops"]["measured"]))
    for stack, bid in base.items():
        ba = a[bid]["result"]["total_cpu_ns"]["trimmed_mean"]
        bb = b[bid]["result"]["total_cpu_ns"]["trimmed_mean"]
        for id_, ra in a.items():
            if ra["scenario"]["stack"] != stack or id_ == bid or id_ not in b:
                continue
            qa = ra["result"]["total_cpu_ns"]["trimmed_mean"] / ba
            qb = b[id_]["result"]["total_cpu_ns"]["trimmed_mean"] / bb
            d = 100.0 * (qb / qa - 1.0)
            ratios.append((stack, ra["label"], qa, qb, d))
            ratios_within += abs(d) <= limit
    print("| stack | configuration | run A total (M instr) | run B | Δ % | n A | n B |\n|---|---|---:|---:|---:|---:|---:|")
    for s, l, ta, tb, d, na, nb in rows:
        print(f"| {s} | {l} | {ta/1e6:.4f} | {tb/1e6:.4f} | {d:+.3f} | {na} | {nb} |")
    print("\n| stack | configuration | ratio to the stack's first, A | B | Δ % |\n|---|---|---:|---:|---:|")
    for s, l, qa, qb, d in ratios:
        print(f"| {s} | {l} | {qa:.4f} | {qb:.4f} | {d:+.3f} |")
    worst.sort(reverse=True)
    print(f"\nsteps and totals within ±{limit} %: {within} of {total}; ratios within ±{limit} %: {ratios_within} of {len(ratios)}")
    print("largest step differences:")
    for w in worst[:8]:
        print(f"  {w[1]} ({w[2]}) {w[3]} {w[4]}: {w[5]:+.3f} %")

main()
