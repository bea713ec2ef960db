/* hb_host_runtime.c: a dispatcher-queue-worker real-time decoding host, timed live per request.
 *
 * Three threads over the runtime's queues (twin/runtime/c/qrt.h), one process:
 *   producer   posts request i (a random syndrome) into the request ring (qrt_post), waits for its
 *              reply in the reply ring (qrt_peek, yielding between looks), checks nothing (the
 *              Python side checks every reply against the lookup table), waits the gap, repeats:
 *              a closed loop, one request in flight;
 *   dispatcher polls the request ring (qrt_next, spinning), enqueues the claimed descriptor to the
 *              worker queue (qrt_dq_push) and, in mode block, wakes the worker (FUTEX_WAKE on the
 *              queue's tail word); polls the hand-back queue (qrt_dq_pop) and publishes the reply
 *              (qrt_complete);
 *   worker     waits for a descriptor: spin (qrt_dq_pop in a pause loop) or block (FUTEX_WAIT on
 *              the queue's tail word while it is empty); reads the payload (qrt_read), decodes it
 *              (qrt_fn_decode_rep3 / qrt_fn_decode_steane7, twin/runtime/c/qrt_functions.c), appends
 *              the reply bytes (qrt_append: not visible yet) and hands the descriptor back (qrt_dq_push).
 *
 * CLOCK_MONOTONIC stamps (ns) per request, at each stage boundary:
 *   t0 producer: before the post          t4 worker: decoded, reply appended, before the hand-back push
 *   t1 dispatcher: qrt_next claimed it    t5 dispatcher: popped the hand-back
 *   t2 dispatcher: pushed to the worker   t6 dispatcher: qrt_complete returned (reply published)
 *      queue, before the wake call        t7 producer: saw the reply
 *   t3 worker: has the descriptor (its wait returned)
 * Stages: ring t1-t0, enqueue t2-t1, wake t3-t2 (the wake call included), decode t4-t3, hand-back
 * t5-t4, publish t6-t5, reply t7-t6. Each stage holds one clock read (timer_ns on stdout).
 *
 * usage: hb_host_runtime WAKE FUNC N WARMUP GAP_NS SEED OUT [PCORE DCORE WCORE]
 *   WAKE spin|block, FUNC rep3|steane7, N timed requests after WARMUP untimed ones, GAP_NS after
 *   each reply (< 20000: spun; else clock_nanosleep to the instant), SEED of the syndromes,
 *   OUT: N records of 10 little-endian int64 (t0..t7, syndrome, reply byte or -1 - status);
 *   cores: pin producer, dispatcher, worker (-1: not pinned).
 * Prints "ok N timer_ns T" and exits 0; a bad argument or a failed call: a line on stderr, exit 2.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "qrt.h"

int32_t qrt_fn_decode_rep3(const uint8_t *in, uint32_t n, uint8_t *out, uint32_t cap);
int32_t qrt_fn_decode_steane7(const uint8_t *in, uint32_t n, uint8_t *out, uint32_t cap);

#define SLOTS 16u
#define SLOT_BYTES 32u
#define REC 10
#define SPIN_GAP_NS 20000

static inline int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static inline void relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield");
#endif
}

static long futex(uint32_t *word, int op, uint32_t val) {
    /* a wait gives up after 50 ms (and looks again): the stop at the end cannot be missed */
    static const struct timespec limit = {0, 50000000L};
    return syscall(SYS_futex, word, op, val, op == FUTEX_WAIT_PRIVATE ? &limit : NULL, NULL, 0);
}

typedef struct {
    qrt_endpoint ep;                 /* the dispatcher's (request ring, reply ring) */
    qrt_queue preq, prep;            /* the producer's views of the same rings */
    qrt_dq work, done;               /* dispatcher -> worker, worker -> dispatcher */
    qrt_msg work_items[SLOTS], done_items[SLOTS];
    qrt_fn fn;
    int block;
    uint32_t total;                  /* warm-up + timed requests */
    int64_t *stamp;                  /* total * REC */
    int cores[3];
    volatile int stop;
} harness;

static void pin(int core) {
    if (core < 0) return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(core, &set);
    if (pthread_setaffinity_np(pthread_self(), sizeof set, &set) != 0)
        fprintf(stderr, "hb_host_runtime: cannot pin to core %d (not pinned)\n", core);
}

static void *dispatcher(void *arg) {
    harness *h = arg;
    pin(h->cores[1]);
    qrt_msg m;
    while (!h->stop) {
        if (qrt_next(&h->ep, &m) == 1) {
            int64_t *s = h->stamp + (size_t)(m.seq - 1u) * REC;
            s[1] = now_ns();
            while (qrt_dq_push(&h->work, &m) != 1) relax();
            s[2] = now_ns();
            if (h->block) futex(&h->work.tail, FUTEX_WAKE_PRIVATE, 1);
        }
        if (qrt_dq_pop(&h->done, &m) == 1) {
            int64_t *s = h->stamp + (size_t)(m.seq - 1u) * REC;
            s[5] = now_ns();
            qrt_complete(&h->ep, &m, m.status);
            s[6] = now_ns();
        }
        relax();
    }
    return NULL;
}

static int take(harness *h, qrt_msg *m) {
    for (;;) {
        if (qrt_dq_pop(&h->work, m) == 1) return 1;
        if (h->stop) return 0;
        if (h->block) {
            uint32_t seen = __atomic_load_n(&h->work.tail, __ATOMIC_ACQUIRE);
            if (seen == __atomic_load_n(&h->work.head, __ATOMIC_ACQUIRE))
                futex(&h->work.tail, FUTEX_WAIT_PRIVATE, seen);  /* returns at once if tail moved */
        } else {
            relax();
        }
    }
}

static void *worker(void *arg) {
    harness *h = arg;
    pin(h->cores[2]);
    qrt_msg m;
    uint8_t in[SLOT_BYTES], out[4];
    while (take(h, &m)) {
        int64_t *s = h->stamp + (size_t)(m.seq - 1u) * REC;
        s[3] = now_ns();
        uint32_t n = qrt_read(&h->ep, &m, in, sizeof in);
        int32_t r = h->fn(in, n, out, sizeof out);
        m.status = r < 0 ? QRT_STATUS_FUNCTION_FAILED : QRT_STATUS_OK;
        if (r > 0) qrt_append(&h->ep, &m, out, (uint32_t)r);
        s[4] = now_ns();
        while (qrt_dq_push(&h->done, &m) != 1) relax();
    }
    return NULL;
}

static uint64_t next_rand(uint64_t *x) {  /* splitmix64 */
    uint64_t z = (*x += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static void wait_gap(int64_t from, int64_t gap) {
    if (gap <= 0) return;
    int64_t until = from + gap;
    if (gap >= SPIN_GAP_NS) {
        struct timespec ts = {(time_t)(until / 1000000000LL), (long)(until % 1000000000LL)};
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {}
    }
    while (now_ns() < until) relax();
}

static void produce(harness *h, uint64_t seed, int64_t gap, uint32_t bits) {
    pin(h->cores[0]);
    uint64_t x = seed;
    qrt_msg m = {0}, r = {0};
    for (uint32_t i = 0; i < h->total; i++) {
        uint8_t syn[4] = {0};
        uint32_t s = (uint32_t)(next_rand(&x) & ((1u << bits) - 1u));
        syn[0] = (uint8_t)s;
        int64_t *st = h->stamp + (size_t)i * REC;
        st[8] = s;
        st[0] = now_ns();
        qrt_post(&h->preq, &m, 1u, 0u, syn, 1u);
        while (qrt_peek(&h->prep, m.slot, m.seq, &r) != 1) sched_yield();
        st[7] = now_ns();
        uint8_t b = 0;
        qrt_queue_read(&h->prep, &r, &b, 1u);
        st[9] = r.flags == QRT_STATUS_OK && r.length == 1u ? (int64_t)b : -1 - (int64_t)r.flags;
        wait_gap(st[7], gap);
    }
}

static int64_t timer_cost(void) {
    int64_t a = now_ns(), b = a;
    for (int i = 0; i < 100000; i++) b = now_ns();
    return (b - a) / 100000;
}

static int fail(const char *what) {
    fprintf(stderr, "hb_host_runtime: %s\n", what);
    return 2;
}

int main(int argc, char **argv) {
    if (argc != 8 && argc != 11)
        return fail("usage: hb_host_runtime WAKE FUNC N WARMUP GAP_NS SEED OUT [PCORE DCORE WCORE]");
    static harness h;
    memset(&h, 0, sizeof h);
    if (strcmp(argv[1], "spin") != 0 && strcmp(argv[1], "block") != 0) return fail("WAKE must be spin or block");
    h.block = strcmp(argv[1], "block") == 0;
    uint32_t bits;
    if (strcmp(argv[2], "rep3") == 0) { h.fn = qrt_fn_decode_rep3; bits = 4; }
    else if (strcmp(argv[2], "steane7") == 0) { h.fn = qrt_fn_decode_steane7; bits = 6; }
    else return fail("FUNC must be rep3 or steane7");
    long n = atol(argv[3]), warm = atol(argv[4]);
    int64_t gap = atoll(argv[5]);
    if (n < 1 || warm < 0 || n + warm > 100000000L || gap < 0) return fail("N >= 1, WARMUP >= 0, GAP_NS >= 0");
    h.total = (uint32_t)(n + warm);
    for (int i = 0; i < 3; i++) h.cores[i] = argc == 11 ? atoi(argv[8 + i]) : -1;
    h.stamp = calloc((size_t)h.total * REC, sizeof(int64_t));
    uint8_t *req = aligned_alloc(64, SLOTS * SLOT_BYTES), *rep = aligned_alloc(64, SLOTS * SLOT_BYTES);
    if (!h.stamp || !req || !rep) return fail("out of memory");
    memset(req, 0, SLOTS * SLOT_BYTES);
    memset(rep, 0, SLOTS * SLOT_BYTES);
    qrt_queue q1, q2;
    if (qrt_queue_init(&q1, req, SLOT_BYTES, SLOTS, QRT_ENCODING_CLASSIC) || qrt_queue_init(&q2, rep, SLOT_BYTES, SLOTS,
        QRT_ENCODING_CLASSIC) || qrt_endpoint_init(&h.ep, &q1, &q2, NULL)) return fail("queue set-up failed");
    h.preq = q1;
    h.prep = q2;
    qrt_dq_init(&h.work, h.work_items, SLOTS);
    qrt_dq_init(&h.done, h.done_items, SLOTS);
    int64_t tc = timer_cost();
    pthread_t td, tw;
    if (pthread_create(&td, NULL, dispatcher, &h) || pthread_create(&tw, NULL, worker, &h))
        return fail("cannot start the threads");
    produce(&h, strtoull(argv[6], NULL, 10), gap, bits);
    h.stop = 1;
    futex(&h.work.tail, FUTEX_WAKE_PRIVATE, 1);
    pthread_join(td, NULL);
    pthread_join(tw, NULL);
    FILE *f = fopen(argv[7], "wb");
    if (!f) return fail("cannot write OUT");
    size_t rows = (size_t)n * REC;
    if (fwrite(h.stamp + (size_t)warm * REC, sizeof(int64_t), rows, f) != rows) return fail("short write to OUT");
    fclose(f);
    printf("ok %ld timer_ns %lld\n", n, (long long)tc);
    return 0;
}
