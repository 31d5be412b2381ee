#!/usr/bin/env python3
"""Run-to-run spread of location statistics from raw samples (raw_samples = true), per OpenSSL
configuration of the default experiment: median, 10 %-trimmed mean and mean of the handshake
total and of the server's certificate_verify step, each with its bootstrap SD (200 resamples,
% of the estimate), and where the step's median sits relative to its peaks (histogram, 25 µs).
Usage: bootstrap.py RESULTS_ROOT [RESULTS_ROOT …]   (e.g. r1 r2: results roots of `pqtls run`)"""
import collections, hashlib, json, random, statistics as st, sys, glob, os

def configs(root):
    rec = glob.glob(os.path.join(root, "*", "records.ndjson"))[0]
    d = os.path.dirname(rec)
    for line in open(rec):
        r = json.loads(line)
        yield r, d

def samples(d, rid):
    h = hashlib.sha256(rid.encode()).hexdigest()[:16]
    tot, sign = [], []
    for line in open(os.path.join(d, "samples", h + ".ndjson")):
        s = json.loads(line)
        tot.append(s["client"]["total_cpu_ns"] + s["server"]["total_cpu_ns"])
        sign.append(s["server"]["steps"].get("certificate_verify", 0))
    return tot, sign

def tmean(v, g=0.1):
    v = sorted(v); k = int(len(v) * g); v = v[k:len(v) - k]
    return sum(v) / len(v)

random.seed(1)
for root in sys.argv[1:]:
    for r, d in sorted(configs(root), key=lambda x: x[0]["label"]):
        if r["scenario"]["stack"] != "openssl": continue
        tot, sign = samples(d, r["id"])
        n = len(tot)
        def bs(f, v): return st.pstdev([f(random.choices(v, k=n)) for _ in range(200)]) / f(v) * 100
        line = f"{root} {r['label']}: n {n}"
        for name, v in (("total", tot), ("sign", sign)):
            line += f" | {name} median {st.median(v)/1e3:.0f} µs (±{bs(st.median, v):.2f} %) trimmed {tmean(v)/1e3:.0f} (±{bs(tmean, v):.2f} %) mean {st.mean(v)/1e3:.0f} (±{bs(st.mean, v):.2f} %)"
        print(line)
        if "mldsa" in r["label"]:
            h = collections.Counter(int(x / 1e3) // 25 * 25 for x in sign if x < 1.3e6)
            print("   sign histogram (µs bin: count):", " ".join(f"{k}:{c}" for k, c in sorted(h.items())))
