#!/bin/sh
# One traced run (ppoll by default, or MODE) on CPU 1: sched_switch/sched_wakeup, timer interrupts, hrtimer expiry,
# softirqs and irqs on CPU 1 only, to see where a late wake-up's time went. As root:
#   [EXTRA="raw_syscalls exceptions"] sh docs/bench/stalls/trace.sh [SECONDS [MODE [OUT]]]
# (mounts tracefs if needed; turns the events off again afterwards; raw trace in /tmp/stalls-data/trace.txt)
S=${1:-20}; M=${2:-ppoll}; O=${3:-/tmp/stalls-data/trace.txt}; T=/sys/kernel/tracing
mountpoint -q $T || mount -t tracefs nodev $T
echo 0 > $T/tracing_on; echo > $T/trace; echo 2 > $T/tracing_cpumask; echo 32768 > $T/buffer_size_kb; echo mono > $T/trace_clock
for e in sched/sched_switch sched/sched_wakeup sched/sched_waking irq_vectors/local_timer_entry \
         irq_vectors/local_timer_exit timer/hrtimer_expire_entry irq/softirq_entry irq/softirq_exit \
         irq/irq_handler_entry irq/irq_handler_exit irq_vectors $EXTRA; do echo 1 > $T/events/$e/enable; done
echo 1 > $T/tracing_on
case $M in
  /*) sh -c "$M" ;;   # a command, e.g. "/tmp/pqtls-before netlab verify ..." (SECONDS unused)
  *) STALLS_DUMP=$O.dump /tmp/stalls $M $S 1 ;;
esac
echo 0 > $T/tracing_on
echo 0 > $T/events/enable; echo 3 > $T/tracing_cpumask
cat $T/trace > $O; echo > $T/trace; echo local > $T/trace_clock; echo 1408 > $T/buffer_size_kb 2>/dev/null
