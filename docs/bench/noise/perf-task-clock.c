/* Can the thread CPU clock be read without a system call here? (issue 12, docs/benchmarks.md §6)
 *
 * Opens perf_event's software task clock for the calling thread, maps its metadata page and
 * prints what the kernel offers: cap_user_time (time_running + a TSC delta computable in user
 * space), the cost of a read of each clock, and whether the page's time_running follows the
 * thread CPU clock between context switches. Then counts the page's seqlock changes against
 * the thread's context switches (getrusage) for 2 s: a cheap "was I descheduled?" test.
 *
 *   cc -O2 -o perf-task-clock docs/bench/noise/perf-task-clock.c && ./perf-task-clock
 *   taskset -c 0 sh -c 'while :; do :; done' & taskset -c 0 ./perf-task-clock; kill %1
 */
#define _GNU_SOURCE
#include <linux/perf_event.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

static uint64_t ns(clockid_t c) {
    struct timespec t;
    clock_gettime(c, &t);
    return t.tv_sec * 1000000000ull + t.tv_nsec;
}

static volatile struct perf_event_mmap_page *pg;

/* The documented user-space read (include/uapi/linux/perf_event.h): time_running plus the
 * time since the page was last updated, from the TSC, when cap_user_time says it may. */
static uint64_t page_running(void) {
    uint32_t seq;
    uint64_t running, cyc, offset;
    uint32_t mult;
    uint16_t shift;
    do {
        seq = pg->lock;
        __asm__ volatile("" ::: "memory");
        running = pg->time_running;
        offset = pg->time_offset;
        mult = pg->time_mult;
        shift = pg->time_shift;
        cyc = __rdtsc();
        __asm__ volatile("" ::: "memory");
    } while (pg->lock != seq);
    if (!pg->cap_user_time) return running;
    uint64_t quot = cyc >> shift, rem = cyc & (((uint64_t)1 << shift) - 1);
    return running + offset + quot * mult + ((rem * mult) >> shift);
}

int main(void) {
    printf("perf_event_paranoid: ");
    fflush(stdout);
    system("cat /proc/sys/kernel/perf_event_paranoid");
    struct perf_event_attr a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.type = PERF_TYPE_SOFTWARE;
    a.config = PERF_COUNT_SW_TASK_CLOCK;
    a.read_format = PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING;
    int fd = syscall(SYS_perf_event_open, &a, 0, -1, -1, 0);
    if (fd < 0) { perror("perf_event_open"); return 1; }
    pg = mmap(0, sysconf(_SC_PAGESIZE), PROT_READ, MAP_SHARED, fd, 0);
    if (pg == MAP_FAILED) { perror("mmap"); return 1; }
    usleep(2000); /* let the page be updated at least once */
    printf("page: version %u cap_user_time %u cap_user_time_zero %u cap_user_rdpmc %u time_mult %u\n",
           pg->version, pg->cap_user_time, pg->cap_user_time_zero, pg->cap_user_rdpmc, pg->time_mult);

    const int N = 1000000;
    uint64_t acc = 0, v[3];
    uint64_t t0 = ns(CLOCK_MONOTONIC);
    for (int i = 0; i < N; i++) acc += ns(CLOCK_THREAD_CPUTIME_ID);
    uint64_t t1 = ns(CLOCK_MONOTONIC);
    for (int i = 0; i < N; i++) acc += page_running();
    uint64_t t2 = ns(CLOCK_MONOTONIC);
    for (int i = 0; i < N; i++) { if (read(fd, v, sizeof v) == sizeof v) acc += v[0]; }
    uint64_t t3 = ns(CLOCK_MONOTONIC);
    for (int i = 0; i < N; i++) acc += ns(CLOCK_MONOTONIC);
    uint64_t t4 = ns(CLOCK_MONOTONIC);
    printf("ns per read: CLOCK_THREAD_CPUTIME_ID %.0f, perf page %.1f, perf read() %.0f, CLOCK_MONOTONIC %.1f (%d)\n",
           (t1 - t0) / (double)N, (t2 - t1) / (double)N, (t3 - t2) / (double)N, (t4 - t3) / (double)N, (int)(acc & 1));

    printf("agreement over busy intervals (µs): thread CPU clock / perf page / perf read()\n");
    uint64_t c0 = ns(CLOCK_THREAD_CPUTIME_ID), p0 = page_running(), r0 = 0;
    if (read(fd, v, sizeof v) == sizeof v) r0 = v[0];
    for (int r = 0; r < 6; r++) {
        volatile double x = 0;
        for (int i = 0; i < (r + 1) * 300000; i++) x += i * 0.5;
        uint64_t c1 = ns(CLOCK_THREAD_CPUTIME_ID), p1 = page_running(), r1 = r0;
        if (read(fd, v, sizeof v) == sizeof v) r1 = v[0];
        printf("  %8.1f  %8.1f  %8.1f\n", (c1 - c0) / 1e3, (p1 - p0) / 1e3, (r1 - r0) / 1e3);
        c0 = c1, p0 = p1, r0 = r1;
    }

    struct rusage u0, u1;
    getrusage(RUSAGE_THREAD, &u0);
    uint32_t last = pg->lock;
    long changes = 0, gaps = 0;
    uint64_t prev = ns(CLOCK_MONOTONIC), end = prev + 2000000000ull;
    for (;;) {
        uint64_t t = ns(CLOCK_MONOTONIC);
        if (t > end) break;
        uint32_t l = pg->lock;
        if (l != last) changes++, last = l;
        if (t - prev > 20000) gaps++;
        prev = t;
    }
    getrusage(RUSAGE_THREAD, &u1);
    printf("2 s busy: page seqlock changes %ld, involuntary context switches %ld, voluntary %ld, "
           "wall-clock gaps > 20 µs %ld\n",
           changes, u1.ru_nivcsw - u0.ru_nivcsw, u1.ru_nvcsw - u0.ru_nvcsw, gaps);
    return 0;
}
