/* qrt.h: the device runtime library of the exchange layer.

   One freestanding header (C11; also CUDA C++ under nvcc), header-only: every function is
   `static inline` (plus `__host__ __device__` under nvcc), so a persistent kernel, a resident
   worker, an OpenMP region or a host thread includes it and gets the verbs inlined. qrt_lib.c
   builds the same functions as exported symbols (QRT_EXPORT) for bindings (ctypes).

   The byte layout comes from qrt_contract.h (generated from twin/exchange/contract.yaml):
   classic   = 16-byte header {seq u32, function u16, length u16, flags u32, reserved u32} then the
               payload; the writer puts header fields and payload first and the seq word LAST (a
               reply adds a release fence before its seq, the "ready" word);
   per-piece = 16-byte pieces {seq u32, 12 data bytes}; piece 0 holds the header fields, pieces
               1.. the payload; every piece carries the message's seq, so each is self-validating.

   Verbs (consumer side, on an endpoint):
     qrt_next      claim the next request if the whole message has landed (non-blocking)
     qrt_read      copy the request payload out (per-piece: reassembled)
     qrt_append    append reply payload bytes (not visible to the producer yet)
     qrt_complete  publish the reply: the only verb that makes a reply visible
     qrt_dispatch_one  next + dispatch table + complete (function 0 = built-in echo)
   Producer side, on a queue: qrt_post (write a whole message, publish last), qrt_peek (is message
   `seq` complete in slot `slot`), qrt_queue_read (copy its payload out).
   Composition: qrt_signal (a 32-bit counter: raise = add-release, wait = acquire load compare) and
   qrt_dq (a single-producer/single-consumer ring of message descriptors).

   ABI: every function takes and returns scalars and pointers only (no struct by value). Negative
   return values are QRT_ERR_* codes. Memory ordering lives only here: clients never write a fence.

   Sequence numbers: message 1, 2, ... carries seq 1, 2, ..., 0xFFFFFFFF, then 1 again (0 means
   empty); slots are taken in order 0, 1, ..., slots-1, 0, ... The slot follows the message's
   ordinal, not `seq % slots`, so the cycle stays in order across the 32-bit wrap.

   Threading: one claimer per endpoint (qrt_next / qrt_dispatch_one are not thread-safe against
   each other). Messages are independent after the claim: any number (up to `slots`) may be
   between qrt_next and qrt_complete, and each may be completed by a different thread (for example
   a resident worker that popped it from a qrt_dq). Read a request before completing it: after
   qrt_complete the producer may reuse its slot.
*/
#ifndef QRT_H
#define QRT_H

#include "qrt_contract.h"

#if defined(__BYTE_ORDER__) && defined(__ORDER_LITTLE_ENDIAN__)
#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "qrt.h: the contract's byte order is little-endian; this target is big-endian"
#endif
#endif

#define QRT_API_VERSION 1u

/* ------------------------------------------------------------------------------------------ */
/* Target layer                                                                                */
/* ------------------------------------------------------------------------------------------ */

#if defined(__CUDACC__)
#define QRT_HD __host__ __device__
#else
#define QRT_HD
#endif

#if defined(QRT_EXPORT)
/* qrt_lib.c: external definitions, visible from the shared object. */
#if defined(__GNUC__) || defined(__clang__)
#define QRT_API __attribute__((visibility("default"))) QRT_HD
#else
#define QRT_API QRT_HD
#endif
#else
#define QRT_API static inline QRT_HD
#endif
#define QRT_INTERNAL static inline QRT_HD

/* A 32-bit word that may alias any bytes (the slots are byte buffers written by other agents). */
#if defined(__GNUC__) || defined(__clang__)
typedef uint32_t __attribute__((__may_alias__)) qrt__w32;
#else
typedef uint32_t qrt__w32;
#endif

/* The scope of the GPU's ordered accesses (PTX memory-model scopes): "sys" by default, since the
   peer is the host or a PCIe device. A kernel whose queues only its own thread block touches (an
   on-chip mirror of a remote slot, as hw_bridge/c/hb_cuda_kernel.cu keeps) defines QRT_GPU_SCOPE
   "cta" before including this header; its accesses to the real queues are then its own. */
#ifndef QRT_GPU_SCOPE
#define QRT_GPU_SCOPE "sys"
#define QRT__GPU_FENCE() __threadfence_system()
#else
#define QRT__GPU_FENCE() asm volatile("fence.acq_rel." QRT_GPU_SCOPE ";" : : : "memory")
#endif

/* The release fence of the contract: every write before it is visible to the peer before any
   write after it. Host: a C11 release fence; GPU: a fence at QRT_GPU_SCOPE (system scope unless
   the kernel says otherwise). */
#if defined(__CUDA_ARCH__)
#define QRT_RELEASE_FENCE() QRT__GPU_FENCE()
#else
#define QRT_RELEASE_FENCE() __atomic_thread_fence(__ATOMIC_RELEASE)
#endif

#if defined(__cplusplus)
extern "C" {
#endif

/* ------------------------------------------------------------------------------------------ */
/* Errors and limits                                                                           */
/* ------------------------------------------------------------------------------------------ */

#define QRT_OK 0
#define QRT_ERR_ARG (-1)          /* a null pointer or an argument out of range */
#define QRT_ERR_SLOT_BYTES (-2)   /* slot_bytes not a multiple of 16 or below QRT_MIN_SLOT_BYTES */
#define QRT_ERR_SLOTS (-3)        /* slots outside 1..QRT_MAX_SLOTS, or request/reply counts differ */
#define QRT_ERR_ENCODING (-4)     /* not QRT_ENCODING_CLASSIC or QRT_ENCODING_PER_PIECE */
#define QRT_ERR_ALIGN (-5)        /* a queue base or stage not 4-byte aligned */
#define QRT_ERR_TOO_LONG (-6)     /* more payload than the slot holds */
#define QRT_ERR_FUNCTION_ID (-7)  /* function id 0 (built-in echo) or >= QRT_MAX_FUNCTIONS */
#define QRT_ERR_STATE (-8)        /* append/complete on a message that is not claimed */
#define QRT_ERR_STAGE (-9)        /* a per-piece queue needs a stage and none was given */

#define QRT_MAX_FUNCTIONS 64u     /* dispatch table entries: function ids 0..63 (0 = echo) */
#define QRT_MAX_LENGTH 65535u     /* the header's length field is 16 bits */

#define QRT_MSG_FREE 0u           /* qrt_msg.state */
#define QRT_MSG_CLAIMED 1u        /* returned by qrt_next / qrt_peek / qrt_post */
#define QRT_MSG_COMPLETED 2u      /* after qrt_complete */

/* ------------------------------------------------------------------------------------------ */
/* Types                                                                                       */
/* ------------------------------------------------------------------------------------------ */

/* A queue: `slots` slots of `slot_bytes` at `base`, one encoding, and a cursor (the next
   message's sequence number and slot). Initialise with qrt_queue_init. */
typedef struct qrt_queue {
    uint8_t *base;        /* first slot; 4-byte aligned */
    uint32_t slot_bytes;  /* multiple of 16, >= QRT_MIN_SLOT_BYTES */
    uint32_t slots;       /* 1..QRT_MAX_SLOTS */
    uint32_t encoding;    /* QRT_ENCODING_CLASSIC or QRT_ENCODING_PER_PIECE */
    uint32_t capacity;    /* payload bytes one slot holds (<= QRT_MAX_LENGTH) */
    uint32_t next_seq;    /* sequence number of the next message (starts at 1; never 0) */
    uint32_t next_slot;   /* its slot */
} qrt_queue;

/* A message descriptor (32 bytes, eight u32). Filled by qrt_next / qrt_peek / qrt_post. */
typedef struct qrt_msg {
    uint32_t seq;        /* sequence number */
    uint32_t slot;       /* slot index (the same index in the request and the reply queue) */
    uint32_t function;   /* function id (u16 in the header) */
    uint32_t length;     /* payload length in bytes, as the header says */
    uint32_t flags;      /* request flags (QRT_FLAG_*) or, for a reply, its status */
    uint32_t reply_len;  /* reply bytes appended so far */
    uint32_t status;     /* reply status once completed (QRT_STATUS_*) */
    uint32_t state;      /* QRT_MSG_FREE / QRT_MSG_CLAIMED / QRT_MSG_COMPLETED */
} qrt_msg;

/* A function the endpoint serves: reads in_len bytes at `in`, writes at most out_cap bytes at
   `out`, returns the reply length (0..out_cap) or a negative value on failure. */
typedef int32_t (*qrt_fn)(const uint8_t *in, uint32_t in_len, uint8_t *out, uint32_t out_cap);

/* A consumer's endpoint: the request queue (in this consumer's memory), the reply queue (the
   producer's memory, mapped here), per-slot staging for per-piece messages, dispatch table. */
typedef struct qrt_endpoint {
    qrt_queue req;
    qrt_queue rep;
    uint8_t *stage;       /* slots * (stage_in + stage_out) bytes, consumer-local; NULL if unused */
    uint32_t stage_in;    /* per slot: a per-piece request reassembled for a function (0 if classic) */
    uint32_t stage_out;   /* per slot: a per-piece reply built before qrt_complete (0 if classic) */
    qrt_fn table[QRT_MAX_FUNCTIONS];  /* table[0] unused: function 0 is the built-in echo */
} qrt_endpoint;

/* A signal: a 32-bit counter. */
typedef struct qrt_signal {
    uint32_t value;
} qrt_signal;

/* A single-producer/single-consumer ring of message descriptors over caller storage.
   tail (producer) and head (consumer) sit on different 64-byte lines. */
typedef struct qrt_dq {
    qrt_msg *items;       /* capacity descriptors */
    uint32_t mask;        /* capacity - 1 (capacity a power of two) */
    uint32_t pad0_[13];
    uint32_t tail;        /* pushes so far; written by the producer only */
    uint32_t pad1_[15];
    uint32_t head;        /* pops so far; written by the consumer only */
    uint32_t pad2_[15];
} qrt_dq;

/* ------------------------------------------------------------------------------------------ */
/* Internal: ordered accesses to words other agents read or write                              */
/* ------------------------------------------------------------------------------------------ */

/* Acquire load: no later read is performed before it. */
QRT_INTERNAL uint32_t qrt__load_acquire(const void *p)
{
#if defined(__CUDA_ARCH__)
#if __CUDA_ARCH__ >= 700
    uint32_t v;
    asm volatile("ld.acquire." QRT_GPU_SCOPE ".u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
#else
    uint32_t v = *(const volatile qrt__w32 *)p;
    __threadfence_system();
    return v;
#endif
#else
    return __atomic_load_n((const qrt__w32 *)p, __ATOMIC_ACQUIRE);
#endif
}

/* Plain (relaxed, not cached in a register) load of a word. */
QRT_INTERNAL uint32_t qrt__load(const void *p)
{
    return *(const volatile qrt__w32 *)p;
}

#if defined(__CUDA_ARCH__)
/* GPU: a relaxed system-scope load (several may be in flight at once) and an acquire fence that
   orders every later access after the relaxed loads before it. */
QRT_INTERNAL uint32_t qrt__load_relaxed_dev(const void *p)
{
#if __CUDA_ARCH__ >= 700
    uint32_t v;
    asm volatile("ld.relaxed." QRT_GPU_SCOPE ".u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
#else
    return *(const volatile qrt__w32 *)p;
#endif
}

QRT_INTERNAL void qrt__fence_acquire_dev(void)
{
#if __CUDA_ARCH__ >= 700
    asm volatile("fence.acq_rel." QRT_GPU_SCOPE ";" : : : "memory");
#else
    __threadfence_system();
#endif
}
#endif

/* Relaxed store of a word (ordered by a later fence / release). */
QRT_INTERNAL void qrt__store(void *p, uint32_t v)
{
    *(volatile qrt__w32 *)p = v;
}

/* Release store: every earlier write is visible before this one. */
QRT_INTERNAL void qrt__store_release(void *p, uint32_t v)
{
#if defined(__CUDA_ARCH__)
#if __CUDA_ARCH__ >= 700
    asm volatile("st.release." QRT_GPU_SCOPE ".u32 [%0], %1;" : : "l"(p), "r"(v) : "memory");
#else
    __threadfence_system();
    *(volatile qrt__w32 *)p = v;
#endif
#else
    __atomic_store_n((qrt__w32 *)p, v, __ATOMIC_RELEASE);
#endif
}

/* The publish ("ready") word, written after QRT_RELEASE_FENCE(). On the host the store itself is
   also a release store (free on x86 and the same stlr on Arm), which keeps thread sanitizers
   informed; on the GPU the fence already orders it and the store is relaxed. */
QRT_INTERNAL void qrt__store_publish(void *p, uint32_t v)
{
#if defined(__CUDA_ARCH__)
    *(volatile qrt__w32 *)p = v;
#else
    __atomic_store_n((qrt__w32 *)p, v, __ATOMIC_RELEASE);
#endif
}

QRT_INTERNAL uint32_t qrt__fetch_add_release(uint32_t *p, uint32_t n)
{
#if defined(__CUDA_ARCH__)
#if __CUDA_ARCH__ >= 700
    uint32_t old;
    asm volatile("atom.release." QRT_GPU_SCOPE ".add.u32 %0, [%1], %2;" : "=r"(old) : "l"(p), "r"(n) : "memory");
    return old;
#else
    __threadfence_system();
    return atomicAdd((unsigned int *)p, n);
#endif
#else
    return __atomic_fetch_add(p, n, __ATOMIC_RELEASE);
#endif
}

/* The little-endian word made of up to 4 bytes at src (missing bytes are zero). */
QRT_INTERNAL uint32_t qrt__gather(const uint8_t *src, uint32_t avail)
{
    uint32_t w = 0, i;
    if (avail >= 4u && ((uintptr_t)src & 3u) == 0u)
        return *(const qrt__w32 *)src;
    if (avail > 4u)
        avail = 4u;
    for (i = 0; i < avail; ++i)
        w |= (uint32_t)src[i] << (8u * i);
    return w;
}

/* Copy n bytes; words when both ends are 4-byte aligned. On the GPU, 16-byte aligned copies move
   64 bytes per step with all four loads issued before the first store (the source may be across
   PCIe, where each load is a round trip: issue them together). */
QRT_INTERNAL void qrt__copy(uint8_t *dst, const uint8_t *src, uint32_t n)
{
    uint32_t i = 0;
#if defined(__CUDA_ARCH__)
    if ((((uintptr_t)dst | (uintptr_t)src) & 15u) == 0u) {
        for (; i + 64u <= n; i += 64u) {
            uint4 a = *(const uint4 *)(src + i), b = *(const uint4 *)(src + i + 16u);
            uint4 c = *(const uint4 *)(src + i + 32u), d = *(const uint4 *)(src + i + 48u);
            *(uint4 *)(dst + i) = a;
            *(uint4 *)(dst + i + 16u) = b;
            *(uint4 *)(dst + i + 32u) = c;
            *(uint4 *)(dst + i + 48u) = d;
        }
        if (n - i >= 16u) {  /* the last one to three 16-byte blocks, loads first */
            uint32_t r = (n - i) / 16u;
            uint4 a = *(const uint4 *)(src + i), b, c;
            if (r > 1u)
                b = *(const uint4 *)(src + i + 16u);
            if (r > 2u)
                c = *(const uint4 *)(src + i + 32u);
            *(uint4 *)(dst + i) = a;
            if (r > 1u)
                *(uint4 *)(dst + i + 16u) = b;
            if (r > 2u)
                *(uint4 *)(dst + i + 32u) = c;
            i += 16u * r;
        }
    }
#endif
    if ((((uintptr_t)dst | (uintptr_t)src) & 3u) == 0u) {
        for (; i + 4u <= n; i += 4u)
            *(qrt__w32 *)(dst + i) = *(const qrt__w32 *)(src + i);
    }
    for (; i < n; ++i)
        dst[i] = src[i];
}

/* One 16-byte piece: data words w0..w2, then the sequence word. On the GPU an aligned piece is
   one 16-byte store (one write on the bus); otherwise the data words go first and the sequence
   word is a release store, so the piece is never seen with the new seq and old data. */
QRT_INTERNAL void qrt__put_piece(uint8_t *p, uint32_t seq, uint32_t w0, uint32_t w1, uint32_t w2)
{
#if defined(__CUDA_ARCH__)
    if (((uintptr_t)p & 15u) == 0u) {
#if __CUDA_ARCH__ >= 700
        asm volatile("st.relaxed." QRT_GPU_SCOPE ".v4.u32 [%0], {%1, %2, %3, %4};"
                     : : "l"(p), "r"(seq), "r"(w0), "r"(w1), "r"(w2) : "memory");
#else
        asm volatile("st.volatile.v4.u32 [%0], {%1, %2, %3, %4};"
                     : : "l"(p), "r"(seq), "r"(w0), "r"(w1), "r"(w2) : "memory");
#endif
        return;
    }
#endif
    qrt__store(p + 4, w0);
    qrt__store(p + 8, w1);
    qrt__store(p + 12, w2);
    qrt__store_release(p, seq);
}

/* Do pieces 1..k-1 of the slot at p all carry seq? Acquire: after a 1 their data may be read.
   GPU: the sequence words are loaded eight at a time (relaxed, in flight together), then one
   acquire fence; host: one acquire load per piece. */
QRT_INTERNAL int qrt__pieces_landed(const uint8_t *p, uint32_t k, uint32_t seq)
{
    uint32_t i;
#if defined(__CUDA_ARCH__)
    uint32_t j, v[8];
    for (i = 1; i < k; i += 8u) {
#pragma unroll
        for (j = 0; j < 8u; ++j)
            v[j] = i + j < k ? qrt__load_relaxed_dev(p + (size_t)(i + j) * QRT_PIECE_BYTES) : seq;
#pragma unroll
        for (j = 0; j < 8u; ++j)
            if (v[j] != seq)
                return 0;
    }
    qrt__fence_acquire_dev();
#else
    for (i = 1; i < k; ++i)
        if (qrt__load_acquire(p + (size_t)i * QRT_PIECE_BYTES) != seq)
            return 0;
#endif
    return 1;
}

QRT_INTERNAL uint32_t qrt__next_seq(uint32_t seq)
{
    seq += 1u;
    return seq == 0u ? 1u : seq;
}

QRT_INTERNAL uint32_t qrt__pieces(uint32_t length)
{
    return 1u + (length + QRT_PIECE_DATA_BYTES - 1u) / QRT_PIECE_DATA_BYTES;
}

QRT_INTERNAL uint32_t qrt__round16(uint32_t n)
{
    return (n + 15u) & ~15u;
}

QRT_INTERNAL uint8_t *qrt__slot(const qrt_queue *q, uint32_t slot)
{
    return q->base + (size_t)slot * q->slot_bytes;
}

/* Per-slot staging areas of an endpoint. */
QRT_INTERNAL uint8_t *qrt__stage_in(const qrt_endpoint *ep, uint32_t slot)
{
    return ep->stage + (size_t)slot * (ep->stage_in + ep->stage_out);
}

QRT_INTERNAL uint8_t *qrt__stage_out(const qrt_endpoint *ep, uint32_t slot)
{
    return qrt__stage_in(ep, slot) + ep->stage_in;
}

/* Where a reply's payload is built: the reply slot itself (classic: nothing is visible until
   the seq word) or the slot's staging area (per-piece: nothing is written to the reply slot
   until qrt_complete). */
QRT_INTERNAL uint8_t *qrt__reply_area(const qrt_endpoint *ep, const qrt_msg *m)
{
    if (ep->rep.encoding == QRT_ENCODING_CLASSIC)
        return qrt__slot(&ep->rep, m->slot) + QRT_HEADER_BYTES;
    return qrt__stage_out(ep, m->slot);
}

/* The header word at QRT_HEADER_FUNCTION_OFFSET: function id (u16), then payload length (u16). */
QRT_INTERNAL uint32_t qrt__header_word(uint32_t function, uint32_t length)
{
    return (function & 0xFFFFu) | (length << 16);
}

/* The status of the built-in echo (function 0) answering a request of `length` payload bytes
   between slots holding req_capacity and rep_capacity bytes: QRT_STATUS_OK, or
   QRT_STATUS_BAD_LENGTH (the request is longer than either holds; the reply is then empty).
   qrt_dispatch_one decides by it; so does a kernel that serves echo without the dispatch table. */
QRT_INTERNAL uint32_t qrt__echo_status(uint32_t length, uint32_t req_capacity, uint32_t rep_capacity)
{
    return length > req_capacity || length > rep_capacity ? QRT_STATUS_BAD_LENGTH : QRT_STATUS_OK;
}

/* Write message (seq, function, flags) with payload src[0..n) into the slot at p, publish last. */
QRT_INTERNAL void qrt__write_message(uint8_t *p, uint32_t encoding, uint32_t seq, uint32_t function,
                                     uint32_t flags, const uint8_t *src, uint32_t n, int payload_in_place)
{
    uint32_t fl = qrt__header_word(function, n);
    if (encoding == QRT_ENCODING_CLASSIC) {
        if (!payload_in_place && n)
            qrt__copy(p + QRT_HEADER_BYTES, src, n);
        qrt__store(p + QRT_HEADER_FUNCTION_OFFSET, fl);
        qrt__store(p + QRT_HEADER_FLAGS_OFFSET, flags);
        qrt__store(p + QRT_HEADER_RESERVED_OFFSET, 0u);
        QRT_RELEASE_FENCE();
        qrt__store_publish(p + QRT_HEADER_SEQ_OFFSET, seq);
    } else {
        uint32_t k = qrt__pieces(n), i, off;
        for (i = 1; i < k; ++i) {
            off = (i - 1u) * QRT_PIECE_DATA_BYTES;
            qrt__put_piece(p + (size_t)i * QRT_PIECE_BYTES, seq,
                           qrt__gather(src + off, n - off),
                           n - off > 4u ? qrt__gather(src + off + 4u, n - off - 4u) : 0u,
                           n - off > 8u ? qrt__gather(src + off + 8u, n - off - 8u) : 0u);
        }
        qrt__put_piece(p, seq, fl, flags, 0u);
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Queues                                                                                      */
/* ------------------------------------------------------------------------------------------ */

/* Payload bytes a slot of this size holds in this encoding (at most QRT_MAX_LENGTH). */
QRT_API uint32_t qrt_capacity(uint32_t slot_bytes, uint32_t encoding)
{
    uint32_t c;
    if (slot_bytes < QRT_PIECE_BYTES)
        return 0u;
    if (encoding == QRT_ENCODING_CLASSIC)
        c = slot_bytes - QRT_HEADER_BYTES;
    else
        c = (slot_bytes / QRT_PIECE_BYTES - 1u) * QRT_PIECE_DATA_BYTES;
    return c > QRT_MAX_LENGTH ? QRT_MAX_LENGTH : c;
}

/* Initialise a queue over `slots` slots of `slot_bytes` at base. The cursor starts at message 1,
   slot 0. Does not touch the memory. Returns QRT_OK or QRT_ERR_ARG / _ALIGN / _SLOT_BYTES /
   _SLOTS / _ENCODING. */
QRT_API int qrt_queue_init(qrt_queue *q, void *base, uint32_t slot_bytes, uint32_t slots, uint32_t encoding)
{
    if (!q || !base)
        return QRT_ERR_ARG;
    if (((uintptr_t)base & 3u) != 0u)
        return QRT_ERR_ALIGN;
    if (slot_bytes % QRT_PIECE_BYTES != 0u || slot_bytes < QRT_MIN_SLOT_BYTES)
        return QRT_ERR_SLOT_BYTES;
    if (slots < 1u || slots > QRT_MAX_SLOTS)
        return QRT_ERR_SLOTS;
    if (encoding != QRT_ENCODING_CLASSIC && encoding != QRT_ENCODING_PER_PIECE)
        return QRT_ERR_ENCODING;
    q->base = (uint8_t *)base;
    q->slot_bytes = slot_bytes;
    q->slots = slots;
    q->encoding = encoding;
    q->capacity = qrt_capacity(slot_bytes, encoding);
    q->next_seq = 1u;
    q->next_slot = 0u;
    return QRT_OK;
}

/* Non-blocking: is message `seq` complete in slot `slot`? Classic: the seq word equals seq.
   Per-piece: piece 0 and every piece its length needs carry seq; a length whose pieces would run
   past the slot is a torn header (not ready). Returns 1 and fills *m (state CLAIMED), 0 when not
   ready, QRT_ERR_ARG on a bad argument. Does not move the queue's cursor. */
QRT_API int qrt_peek(const qrt_queue *q, uint32_t slot, uint32_t seq, qrt_msg *m)
{
    const uint8_t *p;
    uint32_t fl, length, k;
    if (!q || !m || slot >= q->slots || seq == 0u)
        return QRT_ERR_ARG;
    p = qrt__slot(q, slot);
    if (qrt__load_acquire(p) != seq)
        return 0;
    fl = qrt__load(p + QRT_HEADER_FUNCTION_OFFSET);
    length = fl >> 16;
    if (q->encoding != QRT_ENCODING_CLASSIC) {
        k = qrt__pieces(length);
        if ((uint64_t)k * QRT_PIECE_BYTES > q->slot_bytes || !qrt__pieces_landed(p, k, seq))
            return 0;
    }
    m->seq = seq;
    m->slot = slot;
    m->function = fl & 0xFFFFu;
    m->length = length;
    m->flags = qrt__load(p + QRT_HEADER_FLAGS_OFFSET);
    m->reply_len = 0u;
    m->status = 0u;
    m->state = QRT_MSG_CLAIMED;
    return 1;
}

/* Copy the payload of message m (found by qrt_peek / qrt_next) out of queue q into dst:
   min(m->length, q->capacity, cap) bytes; per-piece pieces are reassembled. Returns the bytes
   copied (0 on a bad argument). */
QRT_API uint32_t qrt_queue_read(const qrt_queue *q, const qrt_msg *m, uint8_t *dst, uint32_t cap)
{
    const uint8_t *p;
    uint32_t n, i, off, c;
    if (!q || !m || !dst || m->slot >= q->slots)
        return 0u;
    n = m->length;
    if (n > q->capacity)
        n = q->capacity;
    if (n > cap)
        n = cap;
    p = qrt__slot(q, m->slot);
    if (q->encoding == QRT_ENCODING_CLASSIC) {
        qrt__copy(dst, p + QRT_HEADER_BYTES, n);
        return n;
    }
    i = 1;
    off = 0;
#if defined(__CUDA_ARCH__)
    /* GPU: whole 16-byte pieces, four loads in flight, then their 12 data bytes as words. */
    if ((((uintptr_t)p & 15u) | ((uintptr_t)dst & 3u)) == 0u) {
        for (; off + 4u * QRT_PIECE_DATA_BYTES <= n; i += 4u, off += 4u * QRT_PIECE_DATA_BYTES) {
            const uint4 *src = (const uint4 *)(p + (size_t)i * QRT_PIECE_BYTES);
            uint4 a = src[0], b = src[1], c4 = src[2], d = src[3];
            qrt__w32 *o = (qrt__w32 *)(dst + off);
            o[0] = a.y; o[1] = a.z; o[2] = a.w;
            o[3] = b.y; o[4] = b.z; o[5] = b.w;
            o[6] = c4.y; o[7] = c4.z; o[8] = c4.w;
            o[9] = d.y; o[10] = d.z; o[11] = d.w;
        }
    }
#endif
    for (; off < n; ++i, off += QRT_PIECE_DATA_BYTES) {
        c = n - off < QRT_PIECE_DATA_BYTES ? n - off : QRT_PIECE_DATA_BYTES;
        qrt__copy(dst + off, p + (size_t)i * QRT_PIECE_BYTES + QRT_PIECE_DATA_OFFSET, c);
    }
    return n;
}

/* Producer side: write a whole message at the queue's cursor and publish it last (classic:
   header fields and payload, release fence, seq word; per-piece: every piece with seq). Fills
   *m (seq, slot, function, length, flags) and advances the cursor. The caller must know the slot
   is free (its previous reply consumed). Returns QRT_OK, QRT_ERR_ARG or QRT_ERR_TOO_LONG. */
QRT_API int qrt_post(qrt_queue *q, qrt_msg *m, uint32_t function, uint32_t flags, const uint8_t *src, uint32_t n)
{
    if (!q || !m || (!src && n) || function > 0xFFFFu)
        return QRT_ERR_ARG;
    if (n > q->capacity)
        return QRT_ERR_TOO_LONG;
    qrt__write_message(qrt__slot(q, q->next_slot), q->encoding, q->next_seq, function, flags, src, n, 0);
    m->seq = q->next_seq;
    m->slot = q->next_slot;
    m->function = function;
    m->length = n;
    m->flags = flags;
    m->reply_len = 0u;
    m->status = 0u;
    m->state = QRT_MSG_CLAIMED;
    q->next_seq = qrt__next_seq(q->next_seq);
    q->next_slot = q->next_slot + 1u == q->slots ? 0u : q->next_slot + 1u;
    return QRT_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* Endpoint (consumer)                                                                         */
/* ------------------------------------------------------------------------------------------ */

/* Staging bytes an endpoint over these queues needs (0 when both are classic): per slot, a
   per-piece request reassembled for a function and a per-piece reply built before complete. */
QRT_API uint64_t qrt_endpoint_stage_bytes(const qrt_queue *req, const qrt_queue *rep)
{
    uint64_t per = 0;
    if (!req || !rep)
        return 0u;
    if (req->encoding != QRT_ENCODING_CLASSIC)
        per += qrt__round16(req->capacity);
    if (rep->encoding != QRT_ENCODING_CLASSIC)
        per += qrt__round16(rep->capacity);
    return per * req->slots;
}

/* Initialise an endpoint from two initialised queues (copied, cursors included): the request
   queue in this consumer's memory and the reply queue in the producer's (mapped). Both must
   have the same slot count. `stage` is consumer-local memory of qrt_endpoint_stage_bytes bytes,
   4-byte aligned (NULL allowed when that is 0). The dispatch table starts empty (echo only).
   Returns QRT_OK or QRT_ERR_ARG / _SLOTS / _STAGE / _ALIGN. */
QRT_API int qrt_endpoint_init(qrt_endpoint *ep, const qrt_queue *req, const qrt_queue *rep, uint8_t *stage)
{
    uint32_t i;
    if (!ep || !req || !rep || !req->base || !rep->base)
        return QRT_ERR_ARG;
    if (req->slots != rep->slots)
        return QRT_ERR_SLOTS;
    if (qrt_endpoint_stage_bytes(req, rep) && !stage)
        return QRT_ERR_STAGE;
    if (((uintptr_t)stage & 3u) != 0u)
        return QRT_ERR_ALIGN;
    ep->req = *req;
    ep->rep = *rep;
    ep->stage = stage;
    ep->stage_in = req->encoding != QRT_ENCODING_CLASSIC ? qrt__round16(req->capacity) : 0u;
    ep->stage_out = rep->encoding != QRT_ENCODING_CLASSIC ? qrt__round16(rep->capacity) : 0u;
    for (i = 0; i < QRT_MAX_FUNCTIONS; ++i)
        ep->table[i] = 0;
    return QRT_OK;
}

/* Serve function `function_id` (1..QRT_MAX_FUNCTIONS-1) with fn; fn = NULL removes it.
   Returns QRT_OK, QRT_ERR_ARG or QRT_ERR_FUNCTION_ID (0 is the built-in echo). */
QRT_API int qrt_register(qrt_endpoint *ep, uint32_t function_id, qrt_fn fn)
{
    if (!ep)
        return QRT_ERR_ARG;
    if (function_id == QRT_FUNCTION_ECHO || function_id >= QRT_MAX_FUNCTIONS)
        return QRT_ERR_FUNCTION_ID;
    ep->table[function_id] = fn;
    return QRT_OK;
}

/* Claim the next request: non-blocking poll of the slot of the next expected sequence number.
   Returns 1 and fills *m when the whole message has landed (and moves on to the next one),
   0 when it has not, QRT_ERR_ARG on a bad argument. */
QRT_API int qrt_next(qrt_endpoint *ep, qrt_msg *m)
{
    int r;
    if (!ep)
        return QRT_ERR_ARG;
    r = qrt_peek(&ep->req, ep->req.next_slot, ep->req.next_seq, m);
    if (r == 1) {
        ep->req.next_seq = qrt__next_seq(ep->req.next_seq);
        ep->req.next_slot = ep->req.next_slot + 1u == ep->req.slots ? 0u : ep->req.next_slot + 1u;
    }
    return r;
}

/* Copy the claimed request's payload into dst (at most cap bytes). Returns the bytes copied. */
QRT_API uint32_t qrt_read(const qrt_endpoint *ep, const qrt_msg *m, uint8_t *dst, uint32_t cap)
{
    if (!ep || !m || m->state != QRT_MSG_CLAIMED)
        return 0u;
    return qrt_queue_read(&ep->req, m, dst, cap);
}

/* Append n reply bytes to the claimed message m. Nothing becomes visible to the producer: classic
   writes the payload area of the reply slot (its seq word still holds an old number); per-piece
   writes the slot's staging area. Returns QRT_OK, QRT_ERR_ARG, QRT_ERR_STATE or QRT_ERR_TOO_LONG
   (nothing appended when the reply would exceed the reply slot's capacity). */
QRT_API int qrt_append(qrt_endpoint *ep, qrt_msg *m, const uint8_t *src, uint32_t n)
{
    if (!ep || !m || (!src && n) || m->slot >= ep->rep.slots)
        return QRT_ERR_ARG;
    if (m->state != QRT_MSG_CLAIMED)
        return QRT_ERR_STATE;
    if (n > ep->rep.capacity - m->reply_len)
        return QRT_ERR_TOO_LONG;
    qrt__copy(qrt__reply_area(ep, m) + m->reply_len, src, n);
    m->reply_len += n;
    return QRT_OK;
}

/* Publish the reply to m with status (QRT_STATUS_*) in its flags field: the only verb that makes
   a reply visible. Classic: the header fields (function, length, flags = status, reserved), a
   release fence, then the ready (seq) word. Per-piece: every piece of the reply with m->seq, each
   piece's data before its seq word. Returns QRT_OK, QRT_ERR_ARG or QRT_ERR_STATE. */
QRT_API int qrt_complete(qrt_endpoint *ep, qrt_msg *m, uint32_t status)
{
    if (!ep || !m || m->slot >= ep->rep.slots)
        return QRT_ERR_ARG;
    if (m->state != QRT_MSG_CLAIMED)
        return QRT_ERR_STATE;
    qrt__write_message(qrt__slot(&ep->rep, m->slot), ep->rep.encoding, m->seq, m->function, status,
                       qrt__reply_area(ep, m), m->reply_len, 1);
    m->status = status;
    m->state = QRT_MSG_COMPLETED;
    return QRT_OK;
}

/* Serve one request if one is ready: claim it, run function m.function (0 = built-in echo, else
   the table) and complete it. Status: QRT_STATUS_OK; QRT_STATUS_UNKNOWN_FUNCTION (no such entry),
   QRT_STATUS_FUNCTION_FAILED (it returned < 0), QRT_STATUS_BAD_LENGTH (request longer than its
   slot holds, or reply longer than the function's out_cap / the reply slot) with an empty reply.
   Returns 1 when it served a request, 0 when none was ready, negative on error. */
QRT_API int qrt_dispatch_one(qrt_endpoint *ep)
{
    qrt_msg m;
    qrt_fn fn = 0;
    const uint8_t *in;
    uint8_t *out;
    uint32_t status = QRT_STATUS_OK, out_cap;
    int32_t r;
    int got = qrt_next(ep, &m);
    if (got <= 0)
        return got;
    out = qrt__reply_area(ep, &m);
    out_cap = ep->rep.capacity;
    if (m.function == QRT_FUNCTION_ECHO) {
        status = qrt__echo_status(m.length, ep->req.capacity, out_cap);
        if (status == QRT_STATUS_OK)
            m.reply_len = qrt_queue_read(&ep->req, &m, out, out_cap);
    } else if (m.length > ep->req.capacity) {
        status = QRT_STATUS_BAD_LENGTH;
    } else {
        if (m.function < QRT_MAX_FUNCTIONS)
            fn = ep->table[m.function];
        if (!fn) {
            status = QRT_STATUS_UNKNOWN_FUNCTION;
        } else {
            if (ep->req.encoding == QRT_ENCODING_CLASSIC) {
                in = qrt__slot(&ep->req, m.slot) + QRT_HEADER_BYTES;
            } else {
                uint8_t *st = qrt__stage_in(ep, m.slot);
                qrt_queue_read(&ep->req, &m, st, ep->stage_in);
                in = st;
            }
            r = fn(in, m.length, out, out_cap);
            if (r < 0)
                status = QRT_STATUS_FUNCTION_FAILED;
            else if ((uint32_t)r > out_cap)
                status = QRT_STATUS_BAD_LENGTH;
            else
                m.reply_len = (uint32_t)r;
        }
    }
    if (status != QRT_STATUS_OK)
        m.reply_len = 0u;
    r = qrt_complete(ep, &m, status);
    return r < 0 ? r : 1;
}

/* ------------------------------------------------------------------------------------------ */
/* Signals                                                                                     */
/* ------------------------------------------------------------------------------------------ */

/* Set the counter (before any other agent uses it). */
QRT_API void qrt_signal_init(qrt_signal *s, uint32_t value)
{
    if (s)
        qrt__store_release(&s->value, value);
}

/* Add n with release ordering (every write before it is visible to whoever sees the new value).
   Returns the new value (modulo 2**32). */
QRT_API uint32_t qrt_signal_raise(qrt_signal *s, uint32_t n)
{
    if (!s)
        return 0u;
    return qrt__fetch_add_release(&s->value, n) + n;
}

/* The counter, with acquire ordering. */
QRT_API uint32_t qrt_signal_load(const qrt_signal *s)
{
    return s ? qrt__load_acquire(&s->value) : 0u;
}

/* Non-blocking wait: 1 when the counter has reached target (wrap-aware: value - target taken as
   a signed 32-bit difference is >= 0), else 0. Acquire: after a 1, the raiser's earlier writes
   are visible. */
QRT_API int qrt_signal_wait_nb(const qrt_signal *s, uint32_t target)
{
    if (!s)
        return 0;
    return (int32_t)(qrt__load_acquire(&s->value) - target) >= 0 ? 1 : 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Device-side queue (SPSC ring of message descriptors)                                        */
/* ------------------------------------------------------------------------------------------ */

/* Initialise a ring over `capacity` descriptors at items (capacity a power of two, 1..2**31).
   Returns QRT_OK or QRT_ERR_ARG. */
QRT_API int qrt_dq_init(qrt_dq *q, qrt_msg *items, uint32_t capacity)
{
    uint32_t i;
    if (!q || !items || capacity == 0u || capacity > 0x80000000u || (capacity & (capacity - 1u)) != 0u)
        return QRT_ERR_ARG;
    q->items = items;
    q->mask = capacity - 1u;
    for (i = 0; i < 13u; ++i)
        q->pad0_[i] = 0u;
    for (i = 0; i < 15u; ++i)
        q->pad1_[i] = q->pad2_[i] = 0u;
    q->tail = 0u;
    q->head = 0u;
    return QRT_OK;
}

/* Producer: push a copy of *m. Returns 1 when pushed, 0 when full, QRT_ERR_ARG. */
QRT_API int qrt_dq_push(qrt_dq *q, const qrt_msg *m)
{
    uint32_t t, h;
    if (!q || !m)
        return QRT_ERR_ARG;
    t = qrt__load(&q->tail);
    h = qrt__load_acquire(&q->head);
    if (t - h > q->mask)
        return 0;
    qrt__copy((uint8_t *)&q->items[t & q->mask], (const uint8_t *)m, (uint32_t)sizeof(qrt_msg));
    qrt__store_release(&q->tail, t + 1u);
    return 1;
}

/* Consumer: pop the oldest descriptor into *m. Returns 1 when popped, 0 when empty, QRT_ERR_ARG. */
QRT_API int qrt_dq_pop(qrt_dq *q, qrt_msg *m)
{
    uint32_t t, h;
    if (!q || !m)
        return QRT_ERR_ARG;
    h = qrt__load(&q->head);
    t = qrt__load_acquire(&q->tail);
    if (t == h)
        return 0;
    qrt__copy((uint8_t *)m, (const uint8_t *)&q->items[h & q->mask], (uint32_t)sizeof(qrt_msg));
    qrt__store_release(&q->head, h + 1u);
    return 1;
}

/* Descriptors in the ring now (a snapshot). */
QRT_API uint32_t qrt_dq_count(const qrt_dq *q)
{
    if (!q)
        return 0u;
    return qrt__load_acquire(&q->tail) - qrt__load_acquire(&q->head);
}

#if defined(__cplusplus)
}
#endif

QRT_STATIC_ASSERT(sizeof(qrt_msg) == 32, "qrt_msg is eight u32");
QRT_STATIC_ASSERT(sizeof(qrt_signal) == 4, "qrt_signal is one u32");
QRT_STATIC_ASSERT(offsetof(qrt_dq, head) - offsetof(qrt_dq, tail) >= 64, "head and tail on different lines");

#endif /* QRT_H */
