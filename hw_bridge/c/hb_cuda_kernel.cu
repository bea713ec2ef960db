/* hb_cuda_kernel.cu: the cuda backend's persistent kernel, built from the device runtime library
   (qrt.h) and the same C functions the CPU consumers serve (twin/runtime/c/qrt_functions.c, built
   here as device code). hw_bridge/cuda.py puts both queues in pinned, mapped host memory and
   launches one block of one warp (32 threads) with 2 * slot_bytes of dynamic shared memory.

   Every read of the request queue and every write of the reply queue crosses PCIe, and one
   thread's reads that depend on each other (the sequence word, then the header, then the payload)
   each cost a whole PCIe round trip. So the warp moves the slot in one burst:
   1. lane 0 polls the request slot's sequence word (an ld.acquire.sys load, on the real slot),
      comparing with the expected number held in a register;
   2. once it matches, lane i loads 16-byte chunks i, i + 32, i + 64, i + 96 of the slot into
      registers (all loads in flight together: one round trip for a slot of up to 2,048 bytes);
   3. a classic echo request (function 0, read off lane 0's chunk) is answered from those
      registers: the checks are qrt_dispatch_one's for echo (qrt__echo_status: the length within
      both slots, else an empty reply with QRT_STATUS_BAD_LENGTH), the reply header as
      qrt_complete writes it (qrt__header_word, status in flags, reserved 0), the lanes store the
      header fields and payload chunks, then lane 0 makes them visible (one system-scope fence)
      and writes the sequence word last;
   4. anything else (another function, per-piece, a slot over 2,048 bytes) goes through the library:
      the chunks are stored into a one-slot mirror queue in shared memory, lane 0 runs
      qrt_dispatch_one on it (claim, dispatch table, function, complete), and the lanes copy the
      mirror's reply slot to the real reply slot, its sequence word last after one system-scope
      fence (classic), or piece by piece (per-piece: each piece one 16-byte store with its own
      sequence word). A per-piece message whose pieces had not all landed when copied is copied
      again.
   Step 3 is the dispatch specialised for the function id resolved when the header arrives: no
   dependent loads of the endpoint's state (which the system-scope acquire's L1 invalidation
   would send to L2 each round) and no on-chip copy; benchmarks/cuda_overhead.py measures what it
   saved (built with -DHB_NO_ECHO_PATH, every request takes step 4). The library is built with QRT_GPU_SCOPE "cta": its ordered accesses touch only the
   mirror, which this warp alone uses, so they need no system-scope fence; the accesses to the
   real queues (the poll, the copies, the fence before the reply's sequence word) are system
   scope, written here. On exit *served holds the requests served and *status 0 or the first
   negative qrt error. The stop signal is read once every 256 empty polls. */
#define QRT_GPU_SCOPE "cta"
#include "qrt.h"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 700
#error "hb_cuda_kernel.cu needs sm_70 or newer (the PTX memory model's relaxed and acquire accesses)"
#endif

#define QRT_FN_EXPORT __device__
#define QRT_TABLE_SPACE __constant__ /* the lookup decoders' tables (qrt_lookup.h) and the union-find graph
                                       (qrt_uf_graph.h) in constant memory */
#include "qrt_functions.c"

/* Copy n16 16-byte chunks from src to dst, chunk i by lane i % 32, up to four loads in flight per
   lane before their stores; relaxed system-scope accesses (either side may be the host's memory). */
static __device__ __forceinline__ void hb_copy_warp(uint8_t *dst, const uint8_t *src, uint32_t n16, uint32_t lane)
{
    for (uint32_t base = lane; base < n16; base += 128u) {
        uint4 v[4];
#pragma unroll
        for (uint32_t k = 0; k < 4u; ++k) {
            uint32_t i = base + 32u * k;
            if (i < n16)
                asm volatile("ld.relaxed.sys.v4.u32 {%0, %1, %2, %3}, [%4];"
                             : "=r"(v[k].x), "=r"(v[k].y), "=r"(v[k].z), "=r"(v[k].w) : "l"(src + 16u * i) : "memory");
        }
#pragma unroll
        for (uint32_t k = 0; k < 4u; ++k) {
            uint32_t i = base + 32u * k;
            if (i < n16)
                asm volatile("st.relaxed.sys.v4.u32 [%0], {%1, %2, %3, %4};"
                             : : "l"(dst + 16u * i), "r"(v[k].x), "r"(v[k].y), "r"(v[k].z), "r"(v[k].w) : "memory");
        }
    }
}

/* An acquire load of a word the host writes (system scope). */
static __device__ __forceinline__ uint32_t hb_load_acquire_sys(const void *p)
{
    uint32_t v;
    asm volatile("ld.acquire.sys.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

/* A relaxed system-scope 16-byte load and store (either side may be the host's memory). */
static __device__ __forceinline__ uint4 hb_load16(const uint8_t *p)
{
    uint4 v;
    asm volatile("ld.relaxed.sys.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p)
                 : "memory");
    return v;
}

static __device__ __forceinline__ void hb_store16(uint8_t *p, uint4 v)
{
    asm volatile("st.relaxed.sys.v4.u32 [%0], {%1, %2, %3, %4};" : : "l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
                 : "memory");
}

/* A classic reply slot's header fields but its sequence word (function|length, flags, reserved). */
static __device__ __forceinline__ void hb_store_header_fields(uint8_t *out, uint32_t fl, uint32_t flags, uint32_t reserved)
{
    asm volatile("st.relaxed.sys.u32 [%0], %1;" : : "l"(out + 4), "r"(fl) : "memory");
    asm volatile("st.relaxed.sys.v2.u32 [%0], {%1, %2};" : : "l"(out + 8), "r"(flags), "r"(reserved) : "memory");
}

/* 16-byte chunks each lane holds in the echo path: slots up to 32 * 16 * HB_CHUNKS bytes */
#define HB_CHUNKS 4u

extern "C" __global__ void hb_live_kernel(uint8_t *req, uint8_t *rep, uint32_t slot_bytes, uint32_t slots,
                                          uint32_t encoding, uint8_t *stage, const qrt_signal *stop,
                                          unsigned long long *served, int *status)
{
    extern __shared__ __align__(16) uint8_t mirror[]; /* request slot, then reply slot */
    qrt_queue rq, pq, real;
    qrt_endpoint ep;
    const uint32_t lane = threadIdx.x, n16 = slot_bytes / 16u;
    /* steps 2-3 apply to classic slots of at most HB_CHUNKS chunks per lane */
#ifdef HB_NO_ECHO_PATH /* every request through qrt_dispatch_one (benchmarks/cuda_overhead.py compares) */
    const bool fast = false;
#else
    const bool fast = encoding == QRT_ENCODING_CLASSIC && n16 <= 32u * HB_CHUNKS;
#endif
    const uint32_t cap = qrt_capacity(slot_bytes, encoding); /* request and reply slots are the same size */
    uint32_t idle = 0, slot = 0, expect = 1u;
    unsigned long long n = 0;
    int rc;

    if (blockIdx.x != 0 || threadIdx.y != 0 || threadIdx.z != 0 || lane >= 32u)
        return;
    rc = qrt_queue_init(&real, req, slot_bytes, slots, encoding);
    if (rc == QRT_OK)
        rc = qrt_queue_init(&rq, mirror, slot_bytes, 1u, encoding);
    if (rc == QRT_OK)
        rc = qrt_queue_init(&pq, mirror + slot_bytes, slot_bytes, 1u, encoding);
    if (rc == QRT_OK)
        rc = qrt_endpoint_init(&ep, &rq, &pq, stage);
    if (rc == QRT_OK)
        rc = qrt_register(&ep, 1u, qrt_fn_invert);
    if (rc == QRT_OK)
        rc = qrt_register(&ep, 2u, qrt_fn_xor_fold);
    if (rc == QRT_OK)
        rc = qrt_register(&ep, 3u, qrt_fn_sum32);
    if (rc == QRT_OK)
        rc = qrt_register(&ep, 16u, qrt_fn_decode_rep3);
    if (rc == QRT_OK)
        rc = qrt_register(&ep, 17u, qrt_fn_decode_steane7);
    if (rc == QRT_OK)
        rc = qrt_register(&ep, 19u, qrt_fn_decode_uf_surface3);
    for (uint32_t i = lane; i < 2u * n16; i += 32u) /* the mirror holds no message yet */
        ((uint4 *)mirror)[i] = make_uint4(0u, 0u, 0u, 0u);
    __syncwarp();
    if (lane == 0) {
        *(volatile int *)status = rc == QRT_OK ? 1 : rc; /* 1: serving */
        __threadfence_system();
    }
    while (rc == QRT_OK) {
        const uint8_t *src = req + (size_t)slot * slot_bytes;
        uint8_t *out = rep + (size_t)slot * slot_bytes;
        uint32_t go = 0;
        if (lane == 0) { /* 1. poll the real slot */
            for (;;) {
                if (hb_load_acquire_sys(src) == expect) {
                    go = 1;
                    break;
                }
                if (++idle == 256u) {
                    idle = 0;
                    if (hb_load_acquire_sys(&stop->value) >= 1u)
                        break;
                }
            }
        }
        go = __shfl_sync(0xffffffffu, go, 0);
        if (!go)
            break;
        if (fast) {
            /* 2. the slot into registers: chunk lane + 32 k in v[k] */
            uint4 v[HB_CHUNKS];
#pragma unroll
            for (uint32_t k = 0; k < HB_CHUNKS; ++k)
                v[k] = lane + 32u * k < n16 ? hb_load16(src + 16u * (lane + 32u * k)) : make_uint4(0u, 0u, 0u, 0u);
            const uint32_t fl = __shfl_sync(0xffffffffu, v[0].y, 0);
            if ((fl & 0xFFFFu) == QRT_FUNCTION_ECHO) { /* 3. echo from the registers */
                const uint32_t length = fl >> 16, st = qrt__echo_status(length, cap, cap);
                const uint32_t len = st == QRT_STATUS_OK ? length : 0u;
                if (lane == 0)
                    hb_store_header_fields(out, qrt__header_word(QRT_FUNCTION_ECHO, len), st, 0u);
#pragma unroll
                for (uint32_t k = 0; k < HB_CHUNKS; ++k) {
                    const uint32_t i = lane + 32u * k;
                    if (i != 0u && 16u * i < QRT_HEADER_BYTES + len)
                        hb_store16(out + 16u * i, v[k]);
                }
                __syncwarp();
                if (lane == 0) {
                    __threadfence_system();
                    qrt__store_publish(out, expect);
                }
                expect = qrt__next_seq(expect);
                ++n;
                slot = slot + 1u == slots ? 0u : slot + 1u;
                continue;
            }
#pragma unroll
            for (uint32_t k = 0; k < HB_CHUNKS; ++k) /* 4. the library's way, from the on-chip copy */
                if (lane + 32u * k < n16)
                    ((uint4 *)mirror)[lane + 32u * k] = v[k];
        } else {
            __syncwarp();
            hb_copy_warp(mirror, src, n16, lane);
        }
        __syncwarp();
        int r = 0;
        if (lane == 0) {
            ep.req.next_seq = expect;
            r = qrt_dispatch_one(&ep);
            expect = ep.req.next_seq;
        }
        r = __shfl_sync(0xffffffffu, r, 0);
        if (r < 0) {
            rc = r;
            break;
        }
        if (r == 0) { /* a per-piece message still landing: copy it again (and heed the stop signal) */
            uint32_t quit = 0;
            if (lane == 0 && ++idle == 256u) {
                idle = 0;
                quit = hb_load_acquire_sys(&stop->value) >= 1u;
            }
            if (__shfl_sync(0xffffffffu, quit, 0))
                break;
            continue;
        }
        __syncwarp(); /* the reply, sequence word last */
        if (encoding == QRT_ENCODING_CLASSIC) {
            if (lane == 0) {
                const uint32_t *h = (const uint32_t *)(mirror + slot_bytes);
                hb_store_header_fields(out, h[1], h[2], h[3]);
            }
            if (n16 > 1u)
                hb_copy_warp(out + 16, mirror + slot_bytes + 16, n16 - 1u, lane);
            __syncwarp();
            if (lane == 0) {
                __threadfence_system();
                qrt__store_publish(out, ((const uint32_t *)(mirror + slot_bytes))[0]);
            }
        } else {
            hb_copy_warp(out, mirror + slot_bytes, n16, lane);
        }
        ++n;
        slot = slot + 1u == slots ? 0u : slot + 1u;
    }
    if (lane == 0) {
        *(volatile unsigned long long *)served = n;
        *(volatile int *)status = rc;
        __threadfence_system();
    }
}
