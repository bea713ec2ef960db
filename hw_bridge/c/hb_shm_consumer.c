/* hb_shm_consumer.c: a live consumer over POSIX shared memory, running the device runtime
   library (qrt.h) exactly as a CPU core serves the exchange layer: a loop on qrt_dispatch_one
   over the request queue, replies into the reply queue, dispatch table filled with the C
   functions of twin/runtime/c/qrt_functions.c (invert 1, xor_fold 2, sum32 3, and the lookup
   decoders decode_rep3 16, decode_steane7 17 and the union-find decoder decode_uf_surface3 19, as the
   cuda kernel's).

   Usage: hb_shm_consumer SHM_NAME SLOT_BYTES SLOTS ENCODING(0|1) CPU(-1 = no pinning)
                          [FAULT KIND ROUND]
   Shared memory layout (hw_bridge/shm.py): a 4096-byte control block {magic u32, state u32,
   stop u32, error i32, served u64, pid u32, stamps u32}, then the request queue, then the reply
   queue (each SLOTS * SLOT_BYTES, starting on a 4096-byte boundary).

   Stamps (the consumer's own clock, for the paced loop's gap check: hb_paced in hb_producer.c):
   when the producer sets `stamps` to 1 before the consumer starts, the consumer reads its clock
   (CLOCK_MONOTONIC, ns) when it sees request seq wholly landed (qrt_peek) and again once its reply
   is published (qrt_dispatch_one returned), and writes {seq u32, pad u32, in_ns i64, out_ns i64}
   at byte 64 + (seq % 160) * 24 of the control block, the seq word last (release), before it
   looks at the next request. Without stamps the loop is the plain qrt_dispatch_one loop.

   FAULT (fault injection for tests of the twin's failure handling): `die N` exits at request N,
   `hang N` stops answering at request N, `wrong N` answers request N with its first payload byte
   flipped (the request is altered in place before the runtime serves it).

   Exit status: 0 after a stop request, 1 on a bad argument, a failed pin or a runtime error, 3 for `die`. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "qrt.h"

int32_t qrt_fn_invert(const uint8_t *in, uint32_t n, uint8_t *out, uint32_t cap);
int32_t qrt_fn_xor_fold(const uint8_t *in, uint32_t n, uint8_t *out, uint32_t cap);
int32_t qrt_fn_sum32(const uint8_t *in, uint32_t n, uint8_t *out, uint32_t cap);
int32_t qrt_fn_decode_rep3(const uint8_t *in, uint32_t n, uint8_t *out, uint32_t cap);
int32_t qrt_fn_decode_steane7(const uint8_t *in, uint32_t n, uint8_t *out, uint32_t cap);
int32_t qrt_fn_decode_uf_surface3(const uint8_t *in, uint32_t n, uint8_t *out, uint32_t cap);

#define HB_MAGIC 0x51425348u /* "HSBQ" */
#define HB_CONTROL_BYTES 4096u

typedef struct hb_control {
    uint32_t magic;
    uint32_t state; /* 0 starting, 1 serving, 2 stopped, 3 failed */
    uint32_t stop;
    int32_t error;
    uint64_t served;
    uint32_t pid;
    uint32_t stamps; /* set by the producer before the start: 1 = stamp every round */
} hb_control;

#define HB_STAMPS 160u
#define HB_STAMP_OFFSET 64u
#define HB_STAMP_BYTES 24u

static int64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000ll + (int64_t)t.tv_nsec;
}

/* Serve one request with stamps (see the file's comment): 1 served, 0 none ready, < 0 error. */
static int serve_stamped(qrt_endpoint *ep, uint8_t *base)
{
    qrt_msg m;
    uint32_t seq = ep->req.next_seq;
    int p = qrt_peek(&ep->req, ep->req.next_slot, seq, &m);
    if (p != 1)
        return p < 0 ? p : 0;
    int64_t t_in = now_ns();
    int r = qrt_dispatch_one(ep);
    if (r <= 0)
        return r;
    int64_t t_out = now_ns();
    uint8_t *e = base + HB_STAMP_OFFSET + (size_t)(seq % HB_STAMPS) * HB_STAMP_BYTES;
    __atomic_store_n((uint32_t *)e, 0u, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    memcpy(e + 8, &t_in, 8);
    memcpy(e + 16, &t_out, 8);
    __atomic_store_n((uint32_t *)e, seq, __ATOMIC_RELEASE);
    return r;
}

static size_t page_round(size_t n)
{
    return (n + 4095u) & ~(size_t)4095u;
}

int main(int argc, char **argv)
{
    if (argc != 6 && argc != 9) {
        fprintf(stderr, "usage: hb_shm_consumer SHM_NAME SLOT_BYTES SLOTS ENCODING CPU [FAULT KIND ROUND]\n");
        return 1;
    }
    const char *name = argv[1];
    uint32_t slot_bytes = (uint32_t)strtoul(argv[2], 0, 10), slots = (uint32_t)strtoul(argv[3], 0, 10);
    uint32_t encoding = (uint32_t)strtoul(argv[4], 0, 10);
    int cpu = atoi(argv[5]);
    const char *fault = argc == 9 ? argv[7] : "";
    uint32_t fault_seq = argc == 9 ? (uint32_t)strtoul(argv[8], 0, 10) : 0u;
    size_t qbytes = page_round((size_t)slot_bytes * slots);
    size_t total = HB_CONTROL_BYTES + 2 * qbytes;

    /* Never outlive the twin: a spinning orphan would take a core for good. */
    pid_t parent = getppid();
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        return 1;
    if (cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        if (cpu < CPU_SETSIZE)
            CPU_SET(cpu, &set);
        errno = EINVAL;
        if (cpu >= CPU_SETSIZE || sched_setaffinity(0, sizeof set, &set) != 0) {
            /* fatal: a run must not record "on core N" while the consumer runs unpinned */
            fprintf(stderr, "bridge.cpu: %d: cannot pin the consumer there (%s)\n", cpu, strerror(errno));
            return 1;
        }
    }
    int fd = shm_open(name, O_RDWR, 0);
    if (fd < 0) {
        perror("hb_shm_consumer: shm_open");
        return 1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || (size_t)st.st_size < total) {
        fprintf(stderr, "hb_shm_consumer: %s is %ld bytes, need %zu\n", name, (long)st.st_size, total);
        return 1;
    }
    uint8_t *base = mmap(0, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (base == MAP_FAILED) {
        perror("hb_shm_consumer: mmap");
        return 1;
    }
    hb_control *ctl = (hb_control *)base;
    if (ctl->magic != HB_MAGIC) {
        fprintf(stderr, "hb_shm_consumer: %s has no bridge control block\n", name);
        return 1;
    }
    uint8_t *req = base + HB_CONTROL_BYTES, *rep = req + qbytes;
    qrt_queue rq, pq;
    qrt_endpoint ep;
    uint8_t *stage = 0;
    int rc = qrt_queue_init(&rq, req, slot_bytes, slots, encoding);
    if (rc == QRT_OK)
        rc = qrt_queue_init(&pq, rep, slot_bytes, slots, encoding);
    if (rc == QRT_OK) {
        uint64_t sb = qrt_endpoint_stage_bytes(&rq, &pq);
        if (sb && !(stage = aligned_alloc(16, (size_t)((sb + 15u) & ~15ull))))
            rc = QRT_ERR_ARG;
    }
    if (rc == QRT_OK)
        rc = qrt_endpoint_init(&ep, &rq, &pq, stage);
    if (rc == QRT_OK)
        rc = qrt_register(&ep, 1, qrt_fn_invert);
    if (rc == QRT_OK)
        rc = qrt_register(&ep, 2, qrt_fn_xor_fold);
    if (rc == QRT_OK)
        rc = qrt_register(&ep, 3, qrt_fn_sum32);
    if (rc == QRT_OK)
        rc = qrt_register(&ep, QRT_FUNCTION_DECODE_REP3, qrt_fn_decode_rep3);
    if (rc == QRT_OK)
        rc = qrt_register(&ep, QRT_FUNCTION_DECODE_STEANE7, qrt_fn_decode_steane7);
    if (rc == QRT_OK)
        rc = qrt_register(&ep, QRT_FUNCTION_DECODE_UF_SURFACE3, qrt_fn_decode_uf_surface3);
    ctl->pid = (uint32_t)getpid();
    if (rc != QRT_OK) {
        ctl->error = rc;
        __atomic_store_n(&ctl->state, 3u, __ATOMIC_RELEASE);
        return 1;
    }
    __atomic_store_n(&ctl->state, 1u, __ATOMIC_RELEASE);
    uint64_t served = 0;
    uint32_t idle = 0;
    int stamps = __atomic_load_n(&ctl->stamps, __ATOMIC_ACQUIRE) == 1u;
    for (;;) {
        if (fault_seq && served + 1 == fault_seq) {
            /* Fault injection: act once request fault_seq has wholly landed. */
            qrt_msg m;
            if (qrt_peek(&ep.req, ep.req.next_slot, ep.req.next_seq, &m) == 1) {
                if (strcmp(fault, "die") == 0)
                    _exit(3);
                if (strcmp(fault, "hang") == 0) {
                    while (!__atomic_load_n(&ctl->stop, __ATOMIC_ACQUIRE))
                        usleep(1000);
                    break;
                }
                if (strcmp(fault, "wrong") == 0) {
                    uint8_t *p = qrt__slot(&ep.req, m.slot) + (encoding == QRT_ENCODING_CLASSIC ? 16u : 20u);
                    *p ^= 0xFFu;
                }
                fault_seq = 0;
            } else {
                /* not landed yet: poll again rather than let qrt_dispatch_one claim it unseen */
                if (++idle == 1024u) {
                    idle = 0;
                    if (__atomic_load_n(&ctl->stop, __ATOMIC_ACQUIRE))
                        break;
                }
                continue;
            }
        }
        int r = stamps ? serve_stamped(&ep, base) : qrt_dispatch_one(&ep);
        if (r > 0) {
            ++served;
            __atomic_store_n(&ctl->served, served, __ATOMIC_RELAXED);
            idle = 0;
        } else if (r < 0) {
            ctl->error = r;
            __atomic_store_n(&ctl->state, 3u, __ATOMIC_RELEASE);
            return 1;
        } else if (++idle == 1024u) {
            idle = 0;
            if (__atomic_load_n(&ctl->stop, __ATOMIC_ACQUIRE))
                break;
        }
    }
    __atomic_store_n(&ctl->state, 2u, __ATOMIC_RELEASE);
    return 0;
}
