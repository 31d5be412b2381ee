#!/usr/bin/env python3
"""The HTTP/3 ÷ HTTPS/1.1 table of docs/quic-load.md from load records (JSON arrays): per group and
HTTP version the median over the files (rounds) of connections/s and latency p50/p99, and the ratios.
Usage: quic_load_table.py FILE.json…"""
import json, statistics, sys

rows = {}
for f in sys.argv[1:]:
    for rec in json.load(open(f)):
        res = rec["result"]
        # HTTP/3 is `|transport=quic|` in the id since issue 33, `|http=3` before it.
        http = "3" if ("|transport=quic" in rec["id"] or rec["id"].endswith("http=3")) else "1.1"
        rows.setdefault((res["negotiated"]["group"], http), []).append(
            (res["handshakes_per_s"], res["latency"]["p50_ns"] / 1e6, res["latency"]["p99_ns"] / 1e6))
print("| group | HTTP | conns/s (median of rounds) | p50 ms | p99 ms | HTTP/3 ÷ HTTPS/1.1: conns/s, p50, p99 |")
print("|---|---|---|---|---|---|")
for group in sorted({g for g, _ in rows}):
    med = {h: [statistics.median(x[i] for x in rows[(group, h)]) for i in range(3)] for h in ("1.1", "3")}
    for h in ("1.1", "3"):
        ratio = "" if h == "1.1" else " / ".join(f"{med['3'][i] / med['1.1'][i]:.2f}" for i in range(3))
        print(f"| {group} | {h} | {med[h][0]:.0f} | {med[h][1]:.2f} | {med[h][2]:.2f} | {ratio} |")
