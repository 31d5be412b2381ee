#!/usr/bin/env python3
"""From `--ndjson` raw samples: per record id and step, min and median over all sides vs over
undisturbed sides (unscheduled > 2 µs + 2 % of wall) — before/after the rule."""
import json, sys, collections, statistics
steps = sys.argv[2:] or ["certificate_verify", "server_hello", "client_hello"]
by = collections.defaultdict(lambda: collections.defaultdict(lambda: ([], [])))
for line in open(sys.argv[1]):
    s = json.loads(line)
    for side in ("client", "server"):
        x = s[side]; dist = x.get("unlocated_ns", x["unscheduled_ns"]) > 2000 + x["total_wall_ns"] // 50
        for k, v in x["steps"].items():
            if any(k.endswith(t) for t in steps):
                a, u = by[(s["id"].split("|")[1] + " " + s["id"].split("|")[2], side)][k]
                a.append(v)
                if not dist: u.append(v)
for (cfg, side), d in sorted(by.items()):
    for k, (a, u) in d.items():
        print(f"{cfg:<32} {side:<6} {k:<30} all: n {len(a):4} min {min(a)/1e3:7.2f} p50 {statistics.median(a)/1e3:7.2f} | undisturbed: n {len(u):4} min {min(u)/1e3 if u else float('nan'):7.2f} p50 {statistics.median(u)/1e3 if u else float('nan'):7.2f}")
