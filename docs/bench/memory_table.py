#!/usr/bin/env python3
"""The tables of docs/benchmarks-memory.md from the JSON records docs/bench/memory.sh wrote.
Usage: python3 docs/bench/memory_table.py memory-x25519.json memory-X25519MLKEM768.json memory-MLKEM1024.json"""
import json
import sys

records = [r for path in sys.argv[1:] for r in json.load(open(path))]
kib = lambda b: f"{b / 1024:.1f}"

print("## Per handshake\n")
print("| stack | configuration | client CPU µs (p50) | client allocations | client KiB allocated | client peak KiB "
      "| server CPU µs (p50) | server allocations | server KiB allocated | server peak KiB |")
print("|---|---|" + "---:|" * 8)
for r in records:
    res, m = r["result"], r["result"]["memory"]
    c, s = m["client"], m["server"]
    print(f"| {r['scenario']['stack']} | {r['label']} | {res['client']['total_cpu_ns']['median'] / 1000:.0f} "
          f"| {c['total']['allocations']:.0f} | {kib(c['total']['allocated_bytes'])} | {kib(c['peak_live_bytes_median'])} "
          f"| {res['server']['total_cpu_ns']['median'] / 1000:.0f} "
          f"| {s['total']['allocations']:.0f} | {kib(s['total']['allocated_bytes'])} | {kib(s['peak_live_bytes_median'])} |")

print("\n## Per step (full handshakes)\n")
for r in records:
    if r["scenario"]["resumption"] == "true":
        continue
    res, m = r["result"], r["result"]["memory"]
    print(f"\n### {r['scenario']['stack']} · {r['label']}\n")
    print("| side | step | CPU µs (p50) | allocations | KiB allocated | KiB freed |")
    print("|---|---|---:|---:|---:|---:|")
    for side in ("client", "server"):
        for step, s in m[side]["steps"].items():
            cpu = res[side]["steps"].get(step, {}).get("median")
            cpu = f"{cpu / 1000:.1f}" if cpu is not None else "–"
            print(f"| {side} | {step} | {cpu} | {s['allocations']:.1f} | {kib(s['allocated_bytes'])} | {kib(s['freed_bytes'])} |")
        t = m[side]["total"]
        print(f"| {side} | **total** | {res[side]['total_cpu_ns']['median'] / 1000:.1f} | {t['allocations']:.1f} "
              f"| {kib(t['allocated_bytes'])} | {kib(t['freed_bytes'])} |")
