#!/usr/bin/env python3
"""Where did a late wake-up's time go? Reads the ftrace text of trace.sh (CPU 1, ppoll mode with
waits of 1 ms). For every sleep of the 'stalls' thread longer than 1 ms + THRESH it splits the
excess into: timer late (hrtimer_wakeup fired > 1 ms after the thread slept: the timer interrupt
came late: vCPU not running, or interrupts off in the guest) and run delay (waking -> switched in:
the guest scheduler ran something else first), and names what ran in between.
Usage: python3 trace_analyze.py /tmp/stalls-data/trace.txt [THRESH_MS]
With a third argument COMM (e.g. the emulator thread's name) it instead lists every wake-up of
that thread whose run delay (sched_waking -> switched in) exceeds THRESH_MS, with what ran meanwhile."""
import re, sys, collections
thresh = float(sys.argv[2]) / 1e3 if len(sys.argv) > 2 else 0.5e-3
comm_arg = sys.argv[3] if len(sys.argv) > 3 else None
pat = re.compile(r'^\s*(.+?)-(\d+)\s+\[(\d+)\]\s+\S+\s+([\d.]+):\s+(\S+):\s*(.*)$')
ev = []
for line in open(sys.argv[1]):
    m = pat.match(line)
    if m:
        ev.append((float(m.group(4)), m.group(1).strip(), m.group(5), m.group(6)))
if comm_arg:
    # per thread (pid) of that name: sched_waking while it is not on the CPU -> switched in
    waking = {}; ran = {}; since = {}; cur = None; delays = []
    for t, comm, name, args in ev:
        if name == 'sched_waking' and f'comm={comm_arg} ' in args:
            pid = re.search(r' pid=(\d+)', args).group(1)
            if pid not in waking and cur != pid:
                waking[pid] = t; ran[pid] = collections.Counter(); since[pid] = t
        elif name == 'sched_switch':
            prv = re.search(r'prev_comm=(.+?) prev_pid=(\d+)', args)
            nxt = re.search(r'next_comm=(.+?) next_pid=(\d+)', args)
            cur = nxt.group(2)
            for pid in list(waking):
                ran[pid][f'{prv.group(1)}/{prv.group(2)}'] += t - since[pid]; since[pid] = t
                if pid == cur:
                    delays.append((waking[pid], t - waking[pid], dict(ran[pid]), pid)); del waking[pid]
    big = [d for d in delays if d[1] > thresh]
    print(f'{comm_arg}: {len(delays)} wake-ups, {len(big)} with run delay > {thresh*1e3:.2f} ms, '
          f'total {sum(d[1] for d in big)*1e3:.1f} ms')
    for w, d, ran_, pid in sorted(big, key=lambda x: -x[1])[:20]:
        top = ', '.join(f'{k} {v*1e3:.2f}ms' for k, v in sorted(ran_.items(), key=lambda x: -x[1])[:4])
        print(f't={w:.4f} pid={pid} run_delay={d*1e3:7.2f}ms ran_meanwhile: {top}')
    sys.exit(0)
out_t = None; expire_t = None; waking_t = None; between = collections.Counter(); lasting = []
rows = []
cur = None; cur_since = None
for t, comm, name, args in ev:
    if name == 'sched_switch':
        nxt = re.search(r'next_comm=(.+?) next_pid', args).group(1)
        prv = re.search(r'prev_comm=(.+?) prev_pid', args).group(1)
        if cur is not None and cur_since is not None and out_t is not None and prv != 'stalls':
            between[prv] += t - max(cur_since, out_t)
        cur, cur_since = nxt, t
        if prv == 'stalls':
            out_t = t; expire_t = waking_t = None; between = collections.Counter()
        if nxt == 'stalls' and out_t is not None:
            slept = t - out_t
            if slept > 1e-3 + thresh:
                rows.append((out_t, slept, (expire_t - out_t) if expire_t else None,
                             (t - waking_t) if waking_t else None, dict(between)))
            out_t = None
    elif name == 'hrtimer_expire_entry' and 'hrtimer_wakeup' in args and out_t is not None and expire_t is None:
        expire_t = t
    elif name == 'sched_waking' and 'comm=stalls' in args and out_t is not None and waking_t is None:
        waking_t = t
print(f'late wakes (> 1 ms + {thresh*1e3:.1f} ms asleep): {len(rows)}')
agg_timer = sum(max(0, (r[2] or 0) - 1e-3) for r in rows); agg_run = sum(r[3] or 0 for r in rows)
print(f'excess in timer-late: {agg_timer*1e3:.1f} ms; in run delay (waking->running): {agg_run*1e3:.1f} ms')
for r in sorted(rows, key=lambda r: -r[1])[:25]:
    tl = f'{(r[2]-1e-3)*1e3:7.2f}' if r[2] else '   n/a '
    rd = f'{r[3]*1e3:7.2f}' if r[3] else '   n/a '
    top = ', '.join(f'{k} {v*1e3:.1f}ms' for k, v in sorted(r[4].items(), key=lambda x: -x[1])[:4])
    print(f't={r[0]:.4f} asleep={r[1]*1e3:7.2f}ms timer_late={tl}ms run_delay={rd}ms ran_meanwhile: {top}')
