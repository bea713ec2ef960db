/* pingpong.c: the minimal two-process shared-memory ping-pong, the floor under hw_bridge's shm
   backend. No contract, no runtime library: the parent writes a 64-byte payload and then a
   sequence word into a shared page, the child (another process, pinned to another core) spins on
   that word, copies the payload into a second page and writes the sequence word there; the parent
   spins on it. Same data movement as a classic 64-byte exchange, none of its rules.

   Usage: pingpong ROUNDS PAYLOAD_BYTES PARENT_CPU CHILD_CPU   (CPU -1: no pinning)
   Prints one line per round trip percentile in ns (p50 p90 p99) and writes every round's ns to
   stdout after the line "rounds:" when the environment variable PINGPONG_DUMP is set. */
#define _GNU_SOURCE
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000ll + t.tv_nsec;
}

static void pin(int cpu)
{
    if (cpu < 0)
        return;
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    sched_setaffinity(0, sizeof s, &s);
}

static int cmp(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 100000, len = argc > 2 ? atol(argv[2]) : 64;
    int pcpu = argc > 3 ? atoi(argv[3]) : -1, ccpu = argc > 4 ? atoi(argv[4]) : -1;
    if (len < 0 || len > 4000 || n < 1)
        return 2;
    uint8_t *m = mmap(0, 8192, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return 1;
    memset(m, 0, 8192);
    uint32_t *req_seq = (uint32_t *)m, *rep_seq = (uint32_t *)(m + 4096);
    uint8_t *req = m + 16, *rep = m + 4096 + 16;
    pid_t child = fork();
    if (child == 0) {
        pin(ccpu);
        for (uint32_t s = 1; s <= (uint32_t)n; ++s) {
            while (__atomic_load_n(req_seq, __ATOMIC_ACQUIRE) != s)
                ;
            memcpy(rep, req, (size_t)len);
            __atomic_store_n(rep_seq, s, __ATOMIC_RELEASE);
        }
        _exit(0);
    }
    pin(pcpu);
    int64_t *rtt = malloc(sizeof(int64_t) * (size_t)n);
    uint8_t *payload = malloc((size_t)len + 1);
    int bad = 0;
    for (uint32_t s = 1; s <= (uint32_t)n; ++s) {
        for (long j = 0; j < len; ++j)
            payload[j] = (uint8_t)(s * 131 + j);
        int64_t t0 = now_ns();
        memcpy(req, payload, (size_t)len);
        __atomic_store_n(req_seq, s, __ATOMIC_RELEASE);
        while (__atomic_load_n(rep_seq, __ATOMIC_ACQUIRE) != s)
            ;
        int64_t t1 = now_ns();
        bad |= memcmp(rep, payload, (size_t)len) != 0;
        rtt[s - 1] = t1 - t0;
    }
    waitpid(child, 0, 0);
    if (getenv("PINGPONG_DUMP")) {
        printf("rounds:\n");
        for (long i = 0; i < n; ++i)
            printf("%lld\n", (long long)rtt[i]);
    }
    qsort(rtt, (size_t)n, sizeof *rtt, cmp);
    fprintf(stderr, "pingpong: %ld rounds, %ld B, p50 %lld p90 %lld p99 %lld ns%s\n", n, len,
            (long long)rtt[n / 2], (long long)rtt[n * 9 / 10], (long long)rtt[n * 99 / 100], bad ? ", WRONG REPLIES" : "");
    return bad;
}
