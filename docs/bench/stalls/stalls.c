/*
 * stalls.c — does this (virtual) CPU stop running, and how late do timed waits wake?
 *
 * Build:  gcc -O2 -o /tmp/stalls docs/bench/stalls/stalls.c -lpthread
 * Run:    /tmp/stalls MODE SECONDS CPU        (as root: SCHED_FIFO 50 + timer slack 1 ns)
 *
 * MODE (one line of statistics each; what is measured is the thread's own view of
 * CLOCK_MONOTONIC, pinned to CPU with sched_setaffinity):
 *   spin         busy loop reading CLOCK_MONOTONIC; every gap between two consecutive reads
 *                above 20 us is a time the thread did not run (vCPU descheduled by the host, or
 *                an interrupt / softirq on this CPU). To stay clear of RT throttling
 *                (sched_rt_runtime_us = 950 ms per s) it spins in 200 ms stretches separated
 *                by 30 ms sleeps; those sleeps are not counted as gaps.
 *   spinboth     spin on CPU 0 and CPU 1 at the same time (CPU argument ignored) and count the
 *                gaps > 200 us of CPU 1 that overlap a gap of CPU 0 (whole-VM stall) or not.
 *   sleep        clock_nanosleep(TIMER_ABSTIME) to due times 1 ms apart (next due = wake + 1 ms);
 *                lateness = wake - due.
 *   ppoll        the same with ppoll() on an idle UDP socket, timeout = due - now (what the
 *                pqtls emulator does); an early return is waited again.
 *   hybridX      ppoll until due - X us, then spin to the due time (X = any number, e.g.
 *                hybrid100, hybrid300); lateness = first clock read >= due.
 *   Append "-rand" to sleep/ppoll/hybridX for spacings drawn uniformly from 0.1-2 ms.
 *   hog-user     a load, not a measurement: SCHED_OTHER nice 19, pure user-space loop (no
 *                syscalls) on CPU, to run beside a measurement on the same CPU.
 *   hog-mem      a load: SCHED_OTHER nice 19, repeatedly mmap 256 MiB, touch every page,
 *                munmap (page faults, page zeroing and freeing: kernel work) on CPU.
 * Every line also gives the thread's CPU use (CLOCK_THREAD_CPUTIME_ID / wall) and the steal
 * ticks (/proc/stat, 8th field, USER_HZ) consumed during the run, total and per CPU.
 * STALLS_DUMP=file writes every gap (spin) or every lateness > 200 us (others) as
 * "t_since_start_ns value_ns" lines (spin: "cpu t_since_start_ns gap_ns"), after a first line
 * "# start_monotonic_ns N" (to match an ftrace taken with trace_clock mono).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <time.h>
#include <unistd.h>

static inline uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}
static inline uint64_t cpu_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}
static struct timespec ts_of(uint64_t ns) {
    struct timespec t = { (time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull) };
    return t;
}

#define MAXCPU 16
static int read_steal(unsigned long long *total, unsigned long long *per, int *ncpu) {
    FILE *f = fopen("/proc/stat", "r");
    char line[512];
    *ncpu = 0;
    if (!f) return -1;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "cpu", 3) != 0) break;
        unsigned long long v[8] = {0};
        char name[16];
        if (sscanf(line, "%15s %llu %llu %llu %llu %llu %llu %llu %llu", name, &v[0], &v[1], &v[2],
                   &v[3], &v[4], &v[5], &v[6], &v[7]) < 9) continue;
        if (strcmp(name, "cpu") == 0) *total = v[7];
        else if (*ncpu < MAXCPU) per[(*ncpu)++] = v[7];
    }
    fclose(f);
    return 0;
}

/* Pins, SCHED_FIFO 50, slack 1 ns; returns a short description of what it got. */
static char sched_desc[64];
static void realtime(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0) { perror("sched_setaffinity"); exit(2); }
    struct sched_param p = { .sched_priority = 50 };
    int fifo = sched_setscheduler(0, SCHED_FIFO, &p) == 0;
    int slack = prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0) == 0;
    snprintf(sched_desc, sizeof sched_desc, "%s,slack=%s", fifo ? "FIFO50" : "OTHER",
             slack ? "1ns" : "default");
}

static uint64_t rng = 88172645463325252ull;
static uint64_t xs(void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return rng; }

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}
static uint64_t pct(uint64_t *v, size_t n, double q) {
    if (!n) return 0;
    size_t i = (size_t)(q * (double)(n - 1) + 0.5);
    return v[i];
}

/* ---- spin ---- */
typedef struct { uint64_t t, gap; } gap_t;
typedef struct {
    int cpu; double secs; uint64_t start;
    gap_t *gaps; size_t ngaps, cap;
    uint64_t cpu_used, wall;
} spin_arg;

static void *spin_thread(void *a_) {
    spin_arg *a = a_;
    realtime(a->cpu);
    uint64_t c0 = cpu_ns(), t0 = now_ns(), end = a->start + (uint64_t)(a->secs * 1e9);
    uint64_t spun = 0;
    while (now_ns() < end) {
        uint64_t s = now_ns(), stop = s + 200000000ull, prev = s, t;
        if (stop > end) stop = end;
        do {
            t = now_ns();
            uint64_t g = t - prev;
            if (g > 20000 && a->ngaps < a->cap) a->gaps[a->ngaps++] = (gap_t){ prev - a->start, g };
            prev = t;
        } while (t < stop);
        spun += t - s;
        if (t < end) { struct timespec d = ts_of(30000000ull); nanosleep(&d, NULL); }
    }
    a->cpu_used = cpu_ns() - c0;
    a->wall = spun; /* time spent in the spin stretches */
    (void)t0;
    return NULL;
}

static void spin_report(const char *mode, spin_arg *a) {
    size_t n50 = 0, n200 = 0, n1m = 0, n5m = 0;
    uint64_t max = 0, lost = 0;
    for (size_t i = 0; i < a->ngaps; i++) {
        uint64_t g = a->gaps[i].gap;
        if (g > 50000) n50++;
        if (g > 200000) n200++;
        if (g > 1000000) n1m++;
        if (g > 5000000) n5m++;
        if (g > max) max = g;
        lost += g;
    }
    printf("%s cpu=%d %s spun=%.1fs gaps>20us=%zu >50us=%zu >200us=%zu >1ms=%zu >5ms=%zu "
           "max=%.3fms lost=%.2fms (%.4f%%)",
           mode, a->cpu, sched_desc, a->wall / 1e9, a->ngaps, n50, n200, n1m, n5m, max / 1e6,
           lost / 1e6, a->wall ? 100.0 * lost / a->wall : 0);
}

/* ---- timed waits ---- */
enum wait_kind { W_SLEEP, W_PPOLL, W_HYBRID };

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s spin|spinboth|sleep|ppoll|hybridX[-rand] SECONDS CPU\n", argv[0]);
        return 2;
    }
    const char *mode = argv[1];
    double secs = atof(argv[2]);
    int cpu = atoi(argv[3]);
    const char *dump = getenv("STALLS_DUMP");
    unsigned long long st0 = 0, st1 = 0, p0[MAXCPU], p1[MAXCPU];
    int n0, n1;
    rng ^= (uint64_t)getpid() * 0x9E3779B97F4A7C15ull;
    read_steal(&st0, p0, &n0);

    if (strcmp(mode, "spin") == 0 || strcmp(mode, "spinboth") == 0) {
        int both = mode[4] == 'b';
        spin_arg a[2];
        pthread_t th[2];
        uint64_t start = now_ns();
        int n = both ? 2 : 1;
        for (int i = 0; i < n; i++) {
            a[i] = (spin_arg){ .cpu = both ? i : cpu, .secs = secs, .start = start, .cap = 1 << 22 };
            a[i].gaps = malloc(sizeof(gap_t) * a[i].cap);
            pthread_create(&th[i], NULL, spin_thread, &a[i]);
        }
        for (int i = 0; i < n; i++) pthread_join(th[i], NULL);
        read_steal(&st1, p1, &n1);
        for (int i = 0; i < n; i++) {
            spin_report(mode, &a[i]);
            printf(" cpu_use=%.1f%%", 100.0 * a[i].cpu_used / (secs * 1e9));
            printf(" steal_ticks=%llu per_cpu=", st1 - st0);
            for (int c = 0; c < n1; c++) printf("%s%llu", c ? "," : "", p1[c] - p0[c]);
            printf("\n");
        }
        if (both) { /* gaps > 200 us of CPU 1 overlapping a gap (> 20 us) of CPU 0 */
            size_t big = 0, overl = 0;
            for (size_t i = 0; i < a[1].ngaps; i++) {
                gap_t g = a[1].gaps[i];
                if (g.gap <= 200000) continue;
                big++;
                for (size_t j = 0; j < a[0].ngaps; j++) {
                    gap_t h = a[0].gaps[j];
                    if (h.t < g.t + g.gap && g.t < h.t + h.gap) { overl++; break; }
                }
            }
            printf("spinboth overlap: cpu1 gaps>200us=%zu of which overlapping a cpu0 gap=%zu\n", big, overl);
        }
        if (dump) {
            FILE *f = fopen(dump, "w");
            if (f) fprintf(f, "# start_monotonic_ns %llu\n", (unsigned long long)start);
            for (int i = 0; i < n && f; i++)
                for (size_t j = 0; j < a[i].ngaps; j++)
                    fprintf(f, "%d %llu %llu\n", a[i].cpu, (unsigned long long)a[i].gaps[j].t,
                            (unsigned long long)a[i].gaps[j].gap);
            if (f) fclose(f);
        }
        return 0;
    }

    if (strncmp(mode, "hog-", 4) == 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        sched_setaffinity(0, sizeof set, &set);
        if (nice(19) == -1 && errno) perror("nice");
        uint64_t end = now_ns() + (uint64_t)(secs * 1e9);
        volatile uint64_t x = 0;
        size_t rounds = 0, len = 256u << 20;
        while (now_ns() < end) {
            if (mode[4] == 'u') { for (int i = 0; i < 1000000; i++) x += i; }
            else {
                char *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
                if (m == MAP_FAILED) { perror("mmap"); return 2; }
                for (size_t o = 0; o < len; o += 4096) m[o] = 1;
                munmap(m, len);
            }
            rounds++;
        }
        printf("%s cpu=%d rounds=%zu\n", mode, cpu, rounds);
        return 0;
    }

    enum wait_kind kind;
    uint64_t early_ns = 0;
    if (strncmp(mode, "sleep", 5) == 0) kind = W_SLEEP;
    else if (strncmp(mode, "ppoll", 5) == 0) kind = W_PPOLL;
    else if (strncmp(mode, "hybrid", 6) == 0) { kind = W_HYBRID; early_ns = strtoull(mode + 6, NULL, 10) * 1000ull; }
    else { fprintf(stderr, "unknown mode %s\n", mode); return 2; }
    int rnd = strstr(mode, "-rand") != NULL;

    realtime(cpu);
    int sock = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    if (sock < 0 || bind(sock, (struct sockaddr *)&sa, sizeof sa) != 0) { perror("socket"); return 2; }
    struct pollfd pfd = { .fd = sock, .events = POLLIN };

    size_t cap = (size_t)(secs * 1e4) + 16, n = 0, early_wakes = 0;
    uint64_t *late = malloc(cap * sizeof *late);
    FILE *df = dump ? fopen(dump, "w") : NULL;
    uint64_t start = now_ns(), end = start + (uint64_t)(secs * 1e9), c0 = cpu_ns();
    if (df) fprintf(df, "# start_monotonic_ns %llu\n", (unsigned long long)start);
    uint64_t t = start;
    while (t < end && n < cap) {
        uint64_t spacing = rnd ? 100000 + xs() % 1900001 : 1000000;
        uint64_t due = t + spacing;
        if (kind == W_SLEEP) {
            struct timespec d = ts_of(due);
            while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &d, NULL) == EINTR) {}
            t = now_ns();
        } else {
            uint64_t target = kind == W_HYBRID ? due - early_ns : due;
            for (;;) {
                t = now_ns();
                if (t >= target) break;
                struct timespec d = ts_of(target - t);
                ppoll(&pfd, 1, &d, NULL);
                if (now_ns() < target) early_wakes++;
            }
            if (kind == W_HYBRID) while ((t = now_ns()) < due) {}
        }
        uint64_t l = t >= due ? t - due : 0;
        late[n++] = l;
        if (df && l > 200000) fprintf(df, "%llu %llu\n", (unsigned long long)(t - start), (unsigned long long)l);
    }
    uint64_t wall = now_ns() - start, used = cpu_ns() - c0;
    read_steal(&st1, p1, &n1);
    if (df) fclose(df);
    size_t n1m = 0, n5m = 0;
    for (size_t i = 0; i < n; i++) { n1m += late[i] > 1000000; n5m += late[i] > 5000000; }
    qsort(late, n, sizeof *late, cmp_u64);
    printf("%s cpu=%d %s waits=%zu late_us p50=%.1f p99=%.1f p999=%.1f max=%.1f >1ms=%zu >5ms=%zu "
           "early_wakes=%zu cpu_use=%.1f%% steal_ticks=%llu per_cpu=",
           mode, cpu, sched_desc, n, pct(late, n, .5) / 1e3, pct(late, n, .99) / 1e3,
           pct(late, n, .999) / 1e3, n ? late[n - 1] / 1e3 : 0, n1m, n5m, early_wakes,
           100.0 * used / wall, st1 - st0);
    for (int c = 0; c < n1; c++) printf("%s%llu", c ? "," : "", p1[c] - p0[c]);
    printf("\n");
    return 0;
}
