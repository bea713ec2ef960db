/* qrt_echo_host.cu: round-trip latency of the persistent echo kernel (qrt_echo_kernel.cu) with the
   host thread as the producer.

   Both queues live in pinned, mapped host memory (cudaHostAlloc(..., cudaHostAllocMapped)): the
   host writes each request with the library's qrt_post (classic: header fields and payload,
   release fence, seq word last; per-piece: every piece with seq), the kernel polls the request
   slot across PCIe, answers, and writes the reply into the reply queue; the host polls the reply's
   ready word in its own memory. One request in flight (closed loop). Each round is timed with
   clock_gettime(CLOCK_MONOTONIC) from just before the post to the moment the reply is complete,
   and every reply is checked byte for byte.

   This is not the seeds' card path (there the request queue is in GPU memory and a link card is
   the producer): it measures the host <-> GPU exchange over PCIe with the same library.

   Build:  nvcc -arch=sm_90 -O2 -o qrt_echo_host qrt_echo_host.cu
   Run:    ./qrt_echo_host [requests=100000] [payload_bytes=48] [classic|per_piece] [slots=4]
                           [warmup=10000] [function=0]
   Prints p50/p90/p99/p99.9/max in ns; exits 1 on any CUDA error, wrong reply or timeout. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "qrt_echo_kernel.cu"

#define CHECK(call)                                                                          \
    do {                                                                                     \
        cudaError_t e_ = (call);                                                             \
        if (e_ != cudaSuccess) {                                                             \
            fprintf(stderr, "qrt_echo_host: %s failed: %s\n", #call, cudaGetErrorString(e_)); \
            exit(1);                                                                         \
        }                                                                                    \
    } while (0)

static inline uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of sorted v[0..n). */
static uint64_t pct(const uint64_t *v, size_t n, double p)
{
    size_t k = (size_t)(p / 100.0 * (double)n + 0.999999999);
    if (k < 1)
        k = 1;
    if (k > n)
        k = n;
    return v[k - 1];
}

int main(int argc, char **argv)
{
    long requests = argc > 1 ? atol(argv[1]) : 100000;
    long payload = argc > 2 ? atol(argv[2]) : 48;
    const char *enc_name = argc > 3 ? argv[3] : "classic";
    long slots = argc > 4 ? atol(argv[4]) : 4;
    long warmup = argc > 5 ? atol(argv[5]) : 10000;
    long function = argc > 6 ? atol(argv[6]) : 0;
    uint32_t encoding, slot_bytes = 256;
    const uint64_t timeout_ns = 2000000000ull;

    if (strcmp(enc_name, "classic") == 0)
        encoding = QRT_ENCODING_CLASSIC;
    else if (strcmp(enc_name, "per_piece") == 0)
        encoding = QRT_ENCODING_PER_PIECE;
    else {
        fprintf(stderr, "qrt_echo_host: encoding must be classic or per_piece, got %s\n", enc_name);
        return 2;
    }
    while (qrt_capacity(slot_bytes, encoding) < (uint32_t)(payload > 0 ? payload : 0))
        slot_bytes *= 2;
    if (requests < 1 || payload < 0 || payload > (long)QRT_MAX_LENGTH || slots < 1 ||
        slots > (long)QRT_MAX_SLOTS || warmup < 0 || (function != 0 && function != QRT_DEMO_INVERT)) {
        fprintf(stderr, "qrt_echo_host: bad arguments (requests >= 1, 0 <= payload <= 65535, "
                        "1 <= slots <= 65536, warmup >= 0, function 0 or 1)\n");
        return 2;
    }

    CHECK(cudaSetDeviceFlags(cudaDeviceMapHost));
    size_t qbytes = (size_t)slot_bytes * (size_t)slots;
    uint8_t *req_h, *rep_h, *req_d, *rep_d, *stage_d = NULL;
    qrt_signal *stop_h, *stop_d;
    unsigned long long *served_h, *served_d;
    int *status_h, *status_d;
    CHECK(cudaHostAlloc((void **)&req_h, qbytes, cudaHostAllocMapped));
    CHECK(cudaHostAlloc((void **)&rep_h, qbytes, cudaHostAllocMapped));
    CHECK(cudaHostAlloc((void **)&stop_h, sizeof(qrt_signal), cudaHostAllocMapped));
    CHECK(cudaHostAlloc((void **)&served_h, sizeof(*served_h), cudaHostAllocMapped));
    CHECK(cudaHostAlloc((void **)&status_h, sizeof(*status_h), cudaHostAllocMapped));
    memset(req_h, 0, qbytes);
    memset(rep_h, 0, qbytes);
    qrt_signal_init(stop_h, 0u);
    *served_h = 0;
    *status_h = 1;
    CHECK(cudaHostGetDevicePointer((void **)&req_d, req_h, 0));
    CHECK(cudaHostGetDevicePointer((void **)&rep_d, rep_h, 0));
    CHECK(cudaHostGetDevicePointer((void **)&stop_d, stop_h, 0));
    CHECK(cudaHostGetDevicePointer((void **)&served_d, served_h, 0));
    CHECK(cudaHostGetDevicePointer((void **)&status_d, status_h, 0));

    /* Host views of the queues: the producer writes requests and polls replies with the library. */
    qrt_queue reqq, repq;
    if (qrt_queue_init(&reqq, req_h, slot_bytes, (uint32_t)slots, encoding) != QRT_OK ||
        qrt_queue_init(&repq, rep_h, slot_bytes, (uint32_t)slots, encoding) != QRT_OK) {
        fprintf(stderr, "qrt_echo_host: qrt_queue_init failed\n");
        return 1;
    }
    uint64_t stage_bytes = qrt_endpoint_stage_bytes(&reqq, &repq);
    if (stage_bytes)
        CHECK(cudaMalloc((void **)&stage_d, (size_t)stage_bytes));

    qrt_echo_kernel<<<1, 32>>>(req_d, rep_d, slot_bytes, (uint32_t)slots, encoding, stage_d, stop_d,
                               served_d, status_d);
    CHECK(cudaGetLastError());

    long total = warmup + requests;
    uint64_t *rtt = (uint64_t *)malloc(sizeof(uint64_t) * (size_t)requests);
    uint8_t *in = (uint8_t *)malloc((size_t)payload + 1);
    uint8_t *out = (uint8_t *)malloc((size_t)payload + 1);
    if (!rtt || !in || !out) {
        fprintf(stderr, "qrt_echo_host: out of memory\n");
        return 1;
    }
    int failed = 0;
    for (long i = 0; i < total && !failed; ++i) {
        qrt_msg m, r;
        for (long j = 0; j < payload; ++j)
            in[j] = (uint8_t)(i * 131 + j * 7 + 1);
        uint64_t t0 = now_ns();
        if (qrt_post(&reqq, &m, (uint32_t)function, 0u, in, (uint32_t)payload) != QRT_OK) {
            fprintf(stderr, "qrt_echo_host: qrt_post failed at request %ld\n", i);
            failed = 1;
            break;
        }
        uint64_t spins = 0;
        while (qrt_peek(&repq, m.slot, m.seq, &r) != 1) {
            if ((++spins & 0xFFFFu) == 0u && now_ns() - t0 > timeout_ns) {
                fprintf(stderr, "qrt_echo_host: no reply to request %ld (seq %u) within 2 s; kernel status %d\n",
                        i, m.seq, *(volatile int *)status_h);
                failed = 1;
                break;
            }
        }
        if (failed)
            break;
        uint64_t t1 = now_ns();
        uint32_t got = qrt_queue_read(&repq, &r, out, (uint32_t)payload + 1u);
        int bad = r.flags != QRT_STATUS_OK || r.function != (uint32_t)function || got != (uint32_t)payload;
        for (long j = 0; j < payload && !bad; ++j)
            bad = out[j] != (function == 0 ? in[j] : (uint8_t)~in[j]);
        if (bad) {
            fprintf(stderr, "qrt_echo_host: wrong reply to request %ld: status %u function %u length %u\n",
                    i, r.flags, r.function, got);
            failed = 1;
        }
        if (i >= warmup)
            rtt[i - warmup] = t1 - t0;
    }

    qrt_signal_raise(stop_h, 1u);
    CHECK(cudaDeviceSynchronize());
    printf("device: ");
    {
        cudaDeviceProp prop;
        int dev = 0;
        CHECK(cudaGetDevice(&dev));
        CHECK(cudaGetDeviceProperties(&prop, dev));
        printf("%s\n", prop.name);
    }
    printf("encoding %s, function %ld, payload %ld B, slot %u B, slots %ld, warm-up %ld, requests %ld\n",
           enc_name, function, payload, slot_bytes, slots, warmup, requests);
    printf("kernel served %llu, status %d\n", *served_h, *status_h);
    if (failed || *status_h != 0 || *served_h != (unsigned long long)total) {
        fprintf(stderr, "qrt_echo_host: FAILED\n");
        return 1;
    }
    qsort(rtt, (size_t)requests, sizeof(uint64_t), cmp_u64);
    printf("round trip ns: min %llu p50 %llu p90 %llu p99 %llu p99.9 %llu max %llu\n",
           (unsigned long long)rtt[0], (unsigned long long)pct(rtt, (size_t)requests, 50.0),
           (unsigned long long)pct(rtt, (size_t)requests, 90.0),
           (unsigned long long)pct(rtt, (size_t)requests, 99.0),
           (unsigned long long)pct(rtt, (size_t)requests, 99.9), (unsigned long long)rtt[requests - 1]);

    free(rtt);
    free(in);
    free(out);
    if (stage_d)
        CHECK(cudaFree(stage_d));
    CHECK(cudaFreeHost(req_h));
    CHECK(cudaFreeHost(rep_h));
    CHECK(cudaFreeHost(stop_h));
    CHECK(cudaFreeHost(served_h));
    CHECK(cudaFreeHost(status_h));
    return 0;
}
