#!/usr/bin/env python3
"""Table of verify JSONs: accepted, emulator lateness p50/p99/max (us), cpu_steal, failed checks,
and (if verify20*.sh left X-N.stat0/.stat1 beside X-N.json) the machine's non-idle CPU % during the try
(both CPUs together, 200 % = both busy; includes the lab itself)."""
import json, os, re, sys

def busy(f):
    try:
        a = [int(x) for x in open(f[:-5] + '.stat0').read().split()[1:]]
        b = [int(x) for x in open(f[:-5] + '.stat1').read().split()[1:]]
    except OSError:
        return ''
    d = [y - x for x, y in zip(a, b)]
    tot = sum(d[:8]); idle = d[3] + d[4]
    return f'{200.0 * (tot - idle) / tot:.0f}' if tot else ''

files = sorted(sys.argv[1:], key=lambda f: int(re.findall(r'(\d+)\.json', f)[0]))
acc = 0
print('| try | accepted | lateness p50 / p99 / max (µs) | cpu_steal | machine busy % | failed checks |')
print('|---|---|---|---|---|---|')
for f in files:
    n = re.findall(r'(\d+)\.json', f)[0]
    d = json.load(open(f))
    l = d['emulator']['lateness']
    failed = [c['what'] + f" ({c['measured'] / 1e3:.0f} µs)" if 'lateness' in c['what'] else c['what']
              for c in d['checks'] if not c['ok']]
    acc += bool(d['accepted'])
    print(f"| {n} | {'yes' if d['accepted'] else 'no'} | {l['p50_ns']/1e3:.0f} / {l['p99_ns']/1e3:.0f} / {l['max_ns']/1e3:.0f} "
          f"| {d['cpu_steal']:.4f} | {busy(f)} | {', '.join(failed) or '—'} |")
print(f'\naccepted {acc} of {len(files)}')
