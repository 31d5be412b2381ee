#!/usr/bin/env python3
"""Per-CPU deltas of /proc/softirqs and /proc/interrupts snapshots taken by run.sh, per second.
Usage: python3 irqdelta.py /tmp/stalls-data/c1-r1-spin [SECONDS]"""
import sys

def parse(path):
    rows = {}
    with open(path) as f:
        lines = f.read().splitlines()
    ncpu = len(lines[0].split())
    for line in lines[1:]:
        name, _, rest = line.partition(':')
        vals = rest.split()[:ncpu]
        try:
            nums = [int(v) for v in vals]
        except ValueError:
            continue
        desc = ' '.join(rest.split()[ncpu:])[:28]
        rows[name.strip() + ('' if not desc else ' ' + desc)] = nums
    return rows

d = sys.argv[1]
secs = float(sys.argv[2]) if len(sys.argv) > 2 else 20.0
for kind in ('softirqs', 'interrupts'):
    a, b = parse(f'{d}/{kind}.0'), parse(f'{d}/{kind}.1')
    for k in b:
        if k in a:
            delta = [y - x for x, y in zip(a[k], b[k])]
            if any(delta):
                print(f'{kind:10s} {k:40s} ' + ' '.join(f'cpu{i}={v / secs:8.1f}/s' for i, v in enumerate(delta)))
