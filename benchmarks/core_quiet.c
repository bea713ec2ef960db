/* core_quiet.c: how quiet one core is. Pins itself to CPU argv[1], spins for argv[2] ns reading
 * CLOCK_MONOTONIC back to back, and prints every interval between two reads longer than argv[3] ns
 * ("instant_ns length_ns", one a line; at most 1,000,000) -- the time the spinning thread lost to
 * something else on its core (a timer tick, an interrupt, a hypervisor exit, another thread).
 * Then a last line "reads N span_ns S" (the reads done and the span spun).
 * Built and read by benchmarks/core_quiet.py. Exit 2 on a bad argument or a failed pin. */
#define _GNU_SOURCE
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static inline int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(int argc, char **argv)
{
    if (argc != 4)
        return 2;
    int cpu = atoi(argv[1]);
    int64_t span = atoll(argv[2]), thr = atoll(argv[3]);
    cpu_set_t set;
    CPU_ZERO(&set);
    if (cpu < 0 || cpu >= CPU_SETSIZE || span <= 0 || thr <= 0)
        return 2;
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0)
        return 2;
    enum { MAX = 1000000 };
    int64_t *at = malloc(sizeof(int64_t) * 2 * MAX);
    if (!at)
        return 2;
    long n = 0;
    uint64_t reads = 0;
    int64_t t0 = now_ns(), prev = t0, end = t0 + span;
    while (prev < end) {
        int64_t t = now_ns();
        ++reads;
        if (t - prev > thr && n < MAX) {
            at[2 * n] = prev - t0;
            at[2 * n + 1] = t - prev;
            ++n;
        }
        prev = t;
    }
    for (long i = 0; i < n; ++i)
        printf("%lld %lld\n", (long long)at[2 * i], (long long)at[2 * i + 1]);
    printf("reads %llu span_ns %lld\n", (unsigned long long)reads, (long long)(prev - t0));
    free(at);
    return 0;
}
