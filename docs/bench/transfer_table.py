#!/usr/bin/env python3
"""The mTLS TTLB study's table from a results directory (docs/benchmarks-netlab.md).

usage: python3 docs/bench/transfer_table.py results/mtls-ttlb

One row per link × initcwnd × size: TTLB p50 (and p95) of the PQ configuration (ML-KEM group,
ML-DSA chains) and of the classical one (x25519, P-256), PQ − classical, and the round trips
(connect → last byte) measured / predicted of each. Points not measured (failures.ndjson: refused
links …) are listed after the table with their reason.
"""
import json
import pathlib
import sys


def main(d):
    d = pathlib.Path(d)
    recs = [json.loads(l) for l in (d / "records.ndjson").read_text().splitlines() if l.strip()]
    rows = {}
    for r in recs:
        if r.get("kind") != "transfer":
            continue
        s, x = r["scenario"], r["result"]
        pq = "MLKEM" in s["group"].upper()
        key = (s["rtt"], s["bandwidth"], s["initcwnd"], s["response_size"])
        total = next((k for k in x["rounds"] if k["layer"] == "total"), None)
        tls = next((k for k in x["rounds"] if k["layer"] == "tls"), None)
        rows.setdefault(key, {})["pq" if pq else "cl"] = (x, total, tls, s)
    ms = lambda ns: f"{ns / 1e6:.1f}"
    order = lambda k: (int(k[0].rstrip("ms")), k[1], int(k[2]) if k[2].isdigit() else 0, k[3])
    print("| RTT | rate | initcwnd | size | n PQ/cl | TTLB p50 PQ | TTLB p50 classical | PQ − classical (p50) | p95 PQ / classical | rounds tls PQ / cl (measured/predicted) | rounds total PQ / cl |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for key in sorted(rows, key=order):
        v = rows[key]
        if "pq" not in v or "cl" not in v:
            continue
        (p, pt, ptls, _), (c, ct, ctls, _) = v["pq"], v["cl"]
        d50 = p["ttlb"]["p50_ns"] - c["ttlb"]["p50_ns"]
        rr = lambda k: f"{k['measured']:.2f}/{k['predicted']}" if k else "-"
        print(
            f"| {key[0]} | {key[1]} | {key[2]} | {key[3]} | {p['ttlb']['count']}/{c['ttlb']['count']} "
            f"| {ms(p['ttlb']['p50_ns'])} | {ms(c['ttlb']['p50_ns'])} | {d50 / 1e6:+.1f} "
            f"| {ms(p['ttlb']['p95_ns'])} / {ms(c['ttlb']['p95_ns'])} | {rr(ptls)} / {rr(ctls)} | {rr(pt)} / {rr(ct)} |"
        )
    links = {}
    for r in recs:
        if r.get("kind") == "transfer":
            l = r["result"]["link"]
            links[(r["scenario"]["rtt"], r["scenario"]["bandwidth"])] = l
    print()
    print("| link | verified RTT median | rate on the wire | emulator lateness p99 (verification) |")
    print("|---|---|---|---|")
    for (rtt, bw), l in sorted(links.items(), key=lambda kv: int(kv[0][0].rstrip("ms"))):
        rate = l.get("rate") or {}
        print(f"| {rtt}, {bw} | {l['rtt']['median_ns'] / 1e6:.3f} ms | {rate.get('wire_bits_per_s', 0) / 1e6:.2f} Mbit/s "
              f"| {l['emulator']['lateness']['p99_ns'] / 1e3:.0f} µs |")
    f = d / "failures.ndjson"
    if f.exists():
        fails = [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
        reasons = {}
        for e in fails:
            parts = dict(p.split("=", 1) for p in e["id"].split("|") if "=" in p)
            link = f"{parts.get('rtt', '?')}, {parts.get('bw', '?')}"
            reasons.setdefault(link, (0, e["error"]))
            reasons[link] = (reasons[link][0] + 1, e["error"])
        print()
        print(f"Not measured: {len(fails)} points.")
        for link, (n, why) in sorted(reasons.items()):
            print(f"- {link}: {n} points — {why[:400]}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "results/mtls-ttlb")
