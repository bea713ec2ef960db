/* cuda_pingpong.cu: the minimal persistent-kernel ping-pong that hw_bridge's cuda backend is measured
   against (benchmarks/cuda_overhead.py). It serves the same queues in the same classic slot layout as
   the bridge's kernel (16-byte header with the sequence word first, then the payload), so the host
   side of every round is the same C code (hw_bridge/c/hb_producer.c, hb_batch) and the reply is
   checked byte for byte in both; what the ping-pong leaves out is the runtime library's work: the
   dispatch table, the length and function checks, qrt_peek's header reads and qrt_complete.

   pp_kernel: one block of `blockDim.x` threads (1, or 32 = one warp). Lane 0 polls the request slot's
   sequence word (acquire != 0: ld.acquire.sys; else a volatile load followed by fence.acq_rel.sys once
   it matches); then the lanes copy the slot's first `nbytes` bytes (header and payload, a multiple of
   16) into the reply slot in 16-byte relaxed loads and stores, lane i taking chunks i, i + lanes, ...;
   the sequence word is written last by lane 0 after a warp barrier and a system-scope fence.

   main (built as an executable): the placement the python side cannot drive, the request queue in
   device memory written by the host with cudaMemcpyAsync (the slot's body, then its sequence word, on
   one stream) and the reply queue in pinned, mapped host memory; prints every round's time in ns.
   Usage: cuda_pingpong ROUNDS PAYLOAD_BYTES [LANES=1] [ACQUIRE=1]

   Build: nvcc -arch=sm_90 -O2 -cubin -o pp.cubin cuda_pingpong.cu   (the kernel, loaded by CuPy)
          nvcc -arch=sm_90 -O2 -o cuda_pingpong cuda_pingpong.cu      (the device-memory placement) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

__device__ __forceinline__ uint32_t pp_poll(const uint8_t *p, int acquire)
{
    uint32_t v;
    if (acquire)
        asm volatile("ld.acquire.sys.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    else
        v = *(const volatile uint32_t *)p;
    return v;
}

extern "C" __global__ void pp_kernel(uint8_t *req, uint8_t *rep, uint32_t slot_bytes, uint32_t slots, uint32_t nbytes,
                                     int acquire, const volatile uint32_t *stop, unsigned long long *served)
{
    const uint32_t lane = threadIdx.x, lanes = blockDim.x;
    uint32_t seq = 1, slot = 0, idle = 0;
    unsigned long long n = 0;

    if (blockIdx.x != 0)
        return;
    for (;;) {
        const uint8_t *q = req + (size_t)slot * slot_bytes;
        uint8_t *r = rep + (size_t)slot * slot_bytes;
        uint32_t go = 0;
        if (lane == 0) {
            for (;;) {
                if (pp_poll(q, acquire) == seq) {
                    go = 1;
                    break;
                }
                if (++idle == 256u) {
                    idle = 0;
                    if (*stop)
                        break;
                }
            }
            if (go && !acquire)
                asm volatile("fence.acq_rel.sys;" : : : "memory");
        }
        if (lanes > 1) {
            go = __shfl_sync(0xffffffffu, go, 0);
            __syncwarp();
        }
        if (!go)
            break;
        for (uint32_t off = lane * 16u; off < nbytes; off += lanes * 16u) {
            uint32_t a, b, c, d;
            asm volatile("ld.relaxed.sys.v4.u32 {%0, %1, %2, %3}, [%4];"
                         : "=r"(a), "=r"(b), "=r"(c), "=r"(d) : "l"(q + off) : "memory");
            if (off == 0) { /* the header but its sequence word */
                asm volatile("st.relaxed.sys.u32 [%0], %1;" : : "l"(r + 4), "r"(b) : "memory");
                asm volatile("st.relaxed.sys.v2.u32 [%0], {%1, %2};" : : "l"(r + 8), "r"(c), "r"(d) : "memory");
            } else {
                asm volatile("st.relaxed.sys.v4.u32 [%0], {%1, %2, %3, %4};"
                             : : "l"(r + off), "r"(a), "r"(b), "r"(c), "r"(d) : "memory");
            }
        }
        if (lanes > 1)
            __syncwarp();
        if (lane == 0) {
            __threadfence_system();
            asm volatile("st.relaxed.sys.u32 [%0], %1;" : : "l"(r), "r"(seq) : "memory");
        }
        ++n;
        seq = seq + 1u == 0u ? 1u : seq + 1u;
        slot = slot + 1u == slots ? 0u : slot + 1u;
    }
    if (lane == 0) {
        *(volatile unsigned long long *)served = n;
        __threadfence_system();
    }
}

#define CHECK(call)                                                                           \
    do {                                                                                      \
        cudaError_t e_ = (call);                                                              \
        if (e_ != cudaSuccess) {                                                              \
            fprintf(stderr, "cuda_pingpong: %s failed: %s\n", #call, cudaGetErrorString(e_)); \
            exit(1);                                                                          \
        }                                                                                     \
    } while (0)

static inline int64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000ll + (int64_t)t.tv_nsec;
}

int main(int argc, char **argv)
{
    long rounds = argc > 1 ? atol(argv[1]) : 100000;
    long payload = argc > 2 ? atol(argv[2]) : 64;
    int lanes = argc > 3 ? atoi(argv[3]) : 1;
    int acquire = argc > 4 ? atoi(argv[4]) : 1;
    const uint32_t slots = 8;
    uint32_t nbytes = (uint32_t)(16 + ((payload + 15) / 16) * 16), slot_bytes = 16;
    uint8_t *dreq, *hrep, *img;
    uint32_t *hstop;
    unsigned long long *served;
    cudaStream_t s;

    while (slot_bytes < nbytes)
        slot_bytes *= 2;
    if (rounds < 1 || payload < 1 || payload > 4096 || (lanes != 1 && lanes != 32)) {
        fprintf(stderr, "usage: cuda_pingpong ROUNDS PAYLOAD_BYTES(1..4096) [LANES=1|32] [ACQUIRE=1|0]\n");
        return 2;
    }
    CHECK(cudaMalloc((void **)&dreq, (size_t)slots * slot_bytes));
    CHECK(cudaMemset(dreq, 0, (size_t)slots * slot_bytes));
    CHECK(cudaHostAlloc((void **)&hrep, (size_t)slots * slot_bytes, cudaHostAllocMapped));
    CHECK(cudaHostAlloc((void **)&hstop, 64, cudaHostAllocMapped));
    CHECK(cudaHostAlloc((void **)&served, 64, cudaHostAllocMapped));
    CHECK(cudaHostAlloc((void **)&img, (size_t)slot_bytes, 0));
    memset(hrep, 0, (size_t)slots * slot_bytes);
    *hstop = 0;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaStream_t ks;
    CHECK(cudaStreamCreateWithFlags(&ks, cudaStreamNonBlocking));
    pp_kernel<<<1, lanes, 0, ks>>>(dreq, hrep, slot_bytes, slots, nbytes, acquire, hstop, served);
    CHECK(cudaGetLastError());
    int64_t *t = (int64_t *)malloc(sizeof(int64_t) * (size_t)rounds);
    uint32_t seq = 1, slot = 0, fl = (uint32_t)payload << 16;
    for (long i = 0; i < rounds; ++i) {
        uint8_t *d = dreq + (size_t)slot * slot_bytes;
        volatile uint32_t *ready = (volatile uint32_t *)(hrep + (size_t)slot * slot_bytes);
        memset(img, 0, nbytes);
        memcpy(img + 4, &fl, 4);
        for (long j = 0; j < payload; ++j)
            img[16 + j] = (uint8_t)(seq * 131u + (uint32_t)j);
        memcpy(img, &seq, 4);
        int64_t t0 = now_ns();
        CHECK(cudaMemcpyAsync(d + 4, img + 4, nbytes - 4, cudaMemcpyHostToDevice, s));
        CHECK(cudaMemcpyAsync(d, img, 4, cudaMemcpyHostToDevice, s)); /* the sequence word last */
        while (*ready != seq) {
            if (now_ns() - t0 > 2000000000ll) {
                fprintf(stderr, "cuda_pingpong: no reply to round %ld within 2 s\n", i + 1);
                return 1;
            }
        }
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        t[i] = now_ns() - t0;
        if (memcmp((const uint8_t *)ready + 16, img + 16, (size_t)payload) != 0) {
            fprintf(stderr, "cuda_pingpong: wrong reply at round %ld\n", i + 1);
            return 1;
        }
        seq = seq + 1u == 0u ? 1u : seq + 1u;
        slot = slot + 1u == slots ? 0u : slot + 1u;
    }
    *(volatile uint32_t *)hstop = 1;
    CHECK(cudaStreamSynchronize(ks));
    printf("rounds:\n");
    for (long i = 0; i < rounds; ++i)
        printf("%lld\n", (long long)t[i]);
    return 0;
}
