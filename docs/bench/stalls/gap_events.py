#!/usr/bin/env python3
"""Which guest events (ftrace, trace_clock mono) fall inside the spin gaps > MIN_US of a dump?
Usage: python3 gap_events.py TRACE DUMP [MIN_US]"""
import re, sys, bisect
trace, dump = sys.argv[1], sys.argv[2]
mn = float(sys.argv[3]) * 1e3 if len(sys.argv) > 3 else 200e3
pat = re.compile(r'^\s*(.+?)-(\d+)\s+\[(\d+)\]\s+\S+\s+([\d.]+):\s+(\S+):\s*(.*)$')
ev = []
for line in open(trace):
    m = pat.match(line)
    if m: ev.append((int(round(float(m.group(4)) * 1e9)), m.group(5), m.group(6)[:60]))
ts = [e[0] for e in ev]
start = None; gaps = []
for line in open(dump):
    if line.startswith('#'): start = int(line.split()[-1]); continue
    f = line.split()
    t, g = (int(f[-2]), int(f[-1]))
    if g > mn: gaps.append((start + t, g))
empty = 0
for t, g in gaps:
    i, j = bisect.bisect_left(ts, t), bisect.bisect_right(ts, t + g)
    inside = ev[i:j]
    if not inside: empty += 1
    desc = '; '.join(f'+{(e[0]-t)/1e3:.0f}us {e[1]} {e[2]}' for e in inside[:6])
    print(f'gap {g/1e3:8.1f} us: {len(inside)} events: {desc}')
print(f'{len(gaps)} gaps > {mn/1e3:.0f} us, {empty} with no guest event inside')
