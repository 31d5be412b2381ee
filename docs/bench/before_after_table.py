#!/usr/bin/env python3
"""Before/after tables of two pqtls builds (docs/benchmarks-load.md §6) from
docs/bench/before-after.sh's output directory:

  OUT/generator.jsonl   load.py --compare NAME=…,NAME=… --only generator (one JSON line per run)
  OUT/quic/roundR-NAME-GROUP.json   quic-load.sh NAME=…,NAME=… (load records, HTTP/1.1 and /3)

Prints markdown: per round and configuration, each build's figure and the second ÷ first ratio;
then per configuration the ratios' median and range over the rounds. Several OUT directories
(runs) are numbered on: the second run's rounds follow the first's.
Usage: before_after_table.py FIRST SECOND OUT [OUT…]   (the build names, e.g. before after)"""
import glob, json, os, re, statistics, sys


def spread(xs):
    return f"{statistics.median(xs):.3f} ({min(xs):.3f}–{max(xs):.3f})"


def generator(outs, a, b):
    rows, offset = [], 0
    for out in outs:
        run = [json.loads(l) for l in open(os.path.join(out, "generator.jsonl")) if l.startswith("{")]
        for r in run:
            r["round"] += offset
        offset = max(r["round"] for r in run) + 1
        rows += run
    by = {}
    for r in rows:
        by[(r["group"], r["round"], r["tool"])] = r
    groups = list(dict.fromkeys(r["group"] for r in rows))
    rounds = sorted({r["round"] for r in rows})
    print(f"| group | round | h2load conn/s | h2load CPU µs/conn | {a} conn/s | {a} CPU µs/conn (× h2load) "
          f"| {b} conn/s | {b} CPU µs/conn (× h2load) | {b} ÷ {a} CPU/conn | {b} ÷ {a} handshake CPU |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    summary = {}
    for g in groups:
        for n in rounds:
            h, x, y = by[(g, n, "h2load")], by[(g, n, f"pqtls@{a}")], by[(g, n, f"pqtls@{b}")]
            hc, xc, yc = h["gen_cpu_us_per_conn"], x["gen_cpu_us_per_conn"], y["gen_cpu_us_per_conn"]
            ratio, hs = yc / xc, y["handshake_cpu_us"] / x["handshake_cpu_us"]
            s = summary.setdefault(g, {"ratio": [], "hs": [], "xh": [], "yh": []})
            s["ratio"].append(ratio), s["hs"].append(hs), s["xh"].append(xc / hc), s["yh"].append(yc / hc)
            print(f"| {g} | {n + 1} | {h['conns_per_s']:,.0f} | {hc:,.0f} | {x['conns_per_s']:,.0f} | {xc:,.0f} "
                  f"({xc / hc:.2f}×) | {y['conns_per_s']:,.0f} | {yc:,.0f} ({yc / hc:.2f}×) | {ratio:.3f} | {hs:.3f} |")
    print()
    print(f"| group | {b} ÷ {a} CPU/conn: median (range) | {b} ÷ {a} handshake CPU | {a} × h2load | {b} × h2load |")
    print("|---|---|---|---|---|")
    for g, s in summary.items():
        print(f"| {g} | {spread(s['ratio'])} | {spread(s['hs'])} | {spread(s['xh'])} | {spread(s['yh'])} |")


def quic(outs, a, b):
    recs, offset = {}, 0
    for out in outs:
        files = glob.glob(os.path.join(out, "quic", "round*.json"))
        run = [(f, re.match(r"round(\d+)-(.+)-([^-]+)\.json$", os.path.basename(f))) for f in files]
        for f, m in run:
            quic_file(recs, f, offset + int(m.group(1)), m.group(2))
        offset += max(int(m.group(1)) for _, m in run)
    table(recs, a, b)


def quic_file(recs, f, rnd, name):
    """One quic-load.sh file's records into `recs`, keyed (group, HTTP version, round, build)."""
    for rec in json.load(open(f)):
        res = rec["result"]
        # Before issue 33 the id says `http=3`, after it `transport=quic`.
        http = "3" if ("|transport=quic" in rec["id"] or rec["id"].endswith("http=3")) else "1.1"
        recs[(res["negotiated"]["group"], http, rnd, name)] = res


def table(recs, a, b):
    groups = sorted({k[0] for k in recs})
    rounds = sorted({k[2] for k in recs})
    print(f"| group | HTTP | round | {a} conn/s | {b} conn/s | {b} ÷ {a} "
          f"| {a} load threads' CPU µs/req | {b} load threads' CPU µs/req | {b} ÷ {a} |")
    print("|---|---|---|---|---|---|---|---|---|")
    summary = {}
    for g in groups:
        for http in ("3", "1.1"):
            for n in rounds:
                x, y = recs[(g, http, n, a)], recs[(g, http, n, b)]
                ratio = y["handshakes_per_s"] / x["handshakes_per_s"]
                xc, yc = (r["client_process_cpu_ns_per_request"] / 1e3 for r in (x, y))
                s = summary.setdefault((g, http), {"rate": [], "cpu": []})
                s["rate"].append(ratio), s["cpu"].append(yc / xc)
                print(f"| {g} | {http} | {n} | {x['handshakes_per_s']:,.0f} | {y['handshakes_per_s']:,.0f} | {ratio:.3f} "
                      f"| {xc:,.0f} | {yc:,.0f} | {yc / xc:.3f} |")
    print()
    print(f"| group | HTTP | {b} ÷ {a} conn/s: median (range) | {b} ÷ {a} load threads' CPU/req |")
    print("|---|---|---|---|")
    for (g, http), s in summary.items():
        print(f"| {g} | {http} | {spread(s['rate'])} | {spread(s['cpu'])} |")


if __name__ == "__main__":
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    a, b, outs = sys.argv[1], sys.argv[2], sys.argv[3:]
    if all(os.path.exists(os.path.join(out, "generator.jsonl")) for out in outs):
        generator(outs, a, b)
        print()
    if all(glob.glob(os.path.join(out, "quic", "round*.json")) for out in outs):
        quic(outs, a, b)
