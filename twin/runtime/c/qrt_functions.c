/* qrt_functions.c: C implementations of the registered functions (twin/runtime/functions.py).
 * Signature of the runtime's dispatch table: reply length, or a negative error.
 * Each must give byte for byte what its Python twin gives. */
#include <stdint.h>

/* A CUDA build (hw_bridge/c/hb_cuda_kernel.cu) defines QRT_FN_EXPORT as __device__ first. */
#ifndef QRT_FN_EXPORT
#if defined(_WIN32)
#define QRT_FN_EXPORT __declspec(dllexport)
#else
#define QRT_FN_EXPORT __attribute__((visibility("default")))
#endif
#endif

QRT_FN_EXPORT int32_t qrt_fn_invert(const uint8_t *in, uint32_t n, uint8_t *out, uint32_t cap) {
    if (n > cap) return -1;
    for (uint32_t i = 0; i < n; i++) out[i] = (uint8_t)~in[i];
    return (int32_t)n;
}

QRT_FN_EXPORT int32_t qrt_fn_xor_fold(const uint8_t *in, uint32_t n, uint8_t *out, uint32_t cap) {
    if (cap < 1) return -1;
    uint8_t x = 0;
    for (uint32_t i = 0; i < n; i++) x ^= in[i];
    out[0] = x;
    return 1;
}

QRT_FN_EXPORT int32_t qrt_fn_sum32(const uint8_t *in, uint32_t n, uint8_t *out, uint32_t cap) {
    if (cap < 4) return -1;
    uint32_t s = 0;
    for (uint32_t i = 0; i < n; i++) s += in[i];
    out[0] = (uint8_t)s; out[1] = (uint8_t)(s >> 8); out[2] = (uint8_t)(s >> 16); out[3] = (uint8_t)(s >> 24);
    return 4;
}

/* The lookup decoders (twin/qec/lookup.py decode_payload): the syndrome's ceil(D/8) bytes little-endian,
 * bits at and above D ignored, the table's entry as ceil(K/8) bytes little-endian; a payload shorter
 * than the syndrome is an error (the Python twin raises ValueError). */
#include "qrt_lookup.h"

#if defined(__CUDACC__)
__device__
#endif
static inline int32_t qrt__lookup(const uint8_t *in, uint32_t n, uint8_t *out, uint32_t cap, const uint32_t *table,
                                  uint32_t detectors, uint32_t reply_bytes) {
    const uint32_t nb = (detectors + 7u) / 8u;
    if (n < nb || cap < reply_bytes) return -1;
    uint32_t s = 0;
    for (uint32_t i = 0; i < nb; i++) s |= (uint32_t)in[i] << (8u * i);
    const uint32_t v = table[s & ((1u << detectors) - 1u)];
    for (uint32_t i = 0; i < reply_bytes; i++) out[i] = (uint8_t)(v >> (8u * i));
    return (int32_t)reply_bytes;
}

QRT_FN_EXPORT int32_t qrt_fn_decode_rep3(const uint8_t *in, uint32_t n, uint8_t *out, uint32_t cap) {
    return qrt__lookup(in, n, out, cap, QRT_REP3_TABLE, QRT_REP3_DETECTORS, QRT_REP3_REPLY_BYTES);
}

QRT_FN_EXPORT int32_t qrt_fn_decode_steane7(const uint8_t *in, uint32_t n, uint8_t *out, uint32_t cap) {
    return qrt__lookup(in, n, out, cap, QRT_STEANE7_TABLE, QRT_STEANE7_DETECTORS, QRT_STEANE7_REPLY_BYTES);
}

/* The union-find decoder of the distance-3 surface code memory experiment (twin/qec/union_find.py, its
 * Python reference, step for step: growth, then peeling) on the generated graph qrt_uf_graph.h. The syndrome's
 * ceil(D/8) bytes in (bits at and above D ignored), the correction's ceil(K/8) bytes out; a payload shorter
 * than the syndrome is an error. Fixed arrays on the stack: no allocation, so it runs in a persistent kernel. */
#include "qrt_uf_graph.h"

#define QRT__UF_D QRT_UF_SURFACE3_DETECTORS
#define QRT__UF_N (QRT_UF_SURFACE3_DETECTORS + 1u)
#define QRT__UF_E QRT_UF_SURFACE3_EDGES

#if defined(__CUDACC__)
__device__
#endif
static inline uint32_t qrt__uf_find(uint8_t *parent, uint32_t x) {
    while (parent[x] != x) {
        parent[x] = parent[parent[x]];
        x = parent[x];
    }
    return x;
}

/* Growth (union_find.py UfGraph._grow): sup[e] ends equal to QRT_UF_SURFACE3_LEN[e] for the full edges. */
#if defined(__CUDACC__)
__device__
#endif
static inline void qrt__uf_grow(const uint8_t *defect, uint8_t *sup) {
    uint8_t parent[QRT__UF_N], odd[QRT__UF_N], bnd[QRT__UF_N], grown[QRT__UF_E];
    for (uint32_t i = 0; i < QRT__UF_N; i++) {
        parent[i] = (uint8_t)i;
        odd[i] = defect[i];
        bnd[i] = i == QRT__UF_D;
    }
    for (uint32_t e = 0; e < QRT__UF_E; e++) sup[e] = 0;
    for (;;) {
        uint32_t ng = 0, active = 0, changed = 0;
        for (uint32_t n = 0; n < QRT__UF_D; n++) {
            const uint32_t r = qrt__uf_find(parent, n);
            if (!odd[r] || bnd[r]) continue;
            active = 1;
            for (uint32_t k = QRT_UF_SURFACE3_ADJ_START[n]; k < QRT_UF_SURFACE3_ADJ_START[n + 1u]; k++) {
                const uint32_t e = QRT_UF_SURFACE3_ADJ_EDGE[k];
                if (sup[e] < QRT_UF_SURFACE3_LEN[e]) {
                    changed = 1;
                    if (++sup[e] == QRT_UF_SURFACE3_LEN[e]) grown[ng++] = (uint8_t)e;
                }
            }
        }
        if (!active || !changed) break;
        for (uint32_t i = 1; i < ng; i++) { /* edge order */
            const uint8_t x = grown[i];
            uint32_t j = i;
            for (; j > 0 && grown[j - 1u] > x; j--) grown[j] = grown[j - 1u];
            grown[j] = x;
        }
        for (uint32_t i = 0; i < ng; i++) {
            uint32_t a = qrt__uf_find(parent, QRT_UF_SURFACE3_U[grown[i]]);
            uint32_t b = qrt__uf_find(parent, QRT_UF_SURFACE3_V[grown[i]]);
            if (a == b) continue;
            if (b < a) { const uint32_t t = a; a = b; b = t; }
            parent[b] = (uint8_t)a;
            odd[a] ^= odd[b];
            bnd[a] |= bnd[b];
        }
    }
}

/* Peeling (union_find.py UfGraph._peel): the correction's observable mask. */
#if defined(__CUDACC__)
__device__
#endif
static inline uint32_t qrt__uf_peel(uint8_t *defect, const uint8_t *sup) {
    uint8_t seen[QRT__UF_N], order[QRT__UF_N];
    int16_t tree[QRT__UF_N];
    uint32_t len = 0, corr = 0;
    for (uint32_t i = 0; i < QRT__UF_N; i++) { seen[i] = 0; tree[i] = -1; }
    for (uint32_t q = 0; q <= QRT__UF_D; q++) {
        const uint32_t root = q == 0 ? QRT__UF_D : q - 1u; /* the boundary first, then the events in index order */
        if (seen[root] || (root != QRT__UF_D && !defect[root])) continue;
        seen[root] = 1;
        uint32_t head = len;
        order[len++] = (uint8_t)root;
        while (head < len) {
            const uint32_t n = order[head++];
            for (uint32_t k = QRT_UF_SURFACE3_ADJ_START[n]; k < QRT_UF_SURFACE3_ADJ_START[n + 1u]; k++) {
                const uint32_t e = QRT_UF_SURFACE3_ADJ_EDGE[k];
                const uint32_t m = QRT_UF_SURFACE3_U[e] == n ? QRT_UF_SURFACE3_V[e] : QRT_UF_SURFACE3_U[e];
                if (sup[e] == QRT_UF_SURFACE3_LEN[e] && !seen[m]) {
                    seen[m] = 1;
                    tree[m] = (int16_t)e;
                    order[len++] = (uint8_t)m;
                }
            }
        }
    }
    while (len > 0) {
        const uint32_t n = order[--len];
        if (tree[n] < 0 || !defect[n]) continue;
        const uint32_t e = (uint32_t)tree[n];
        corr ^= QRT_UF_SURFACE3_OBS[e];
        defect[n] = 0;
        defect[QRT_UF_SURFACE3_U[e] == n ? QRT_UF_SURFACE3_V[e] : QRT_UF_SURFACE3_U[e]] ^= 1u;
    }
    return corr;
}

QRT_FN_EXPORT int32_t qrt_fn_decode_uf_surface3(const uint8_t *in, uint32_t n, uint8_t *out, uint32_t cap) {
    const uint32_t nb = (QRT__UF_D + 7u) / 8u;
    if (n < nb || cap < QRT_UF_SURFACE3_REPLY_BYTES) return -1;
    uint8_t defect[QRT__UF_N], sup[QRT__UF_E];
    for (uint32_t i = 0; i < QRT__UF_D; i++) defect[i] = (uint8_t)((in[i >> 3] >> (i & 7u)) & 1u);
    defect[QRT__UF_D] = 0;
    qrt__uf_grow(defect, sup);
    const uint32_t corr = qrt__uf_peel(defect, sup);
    for (uint32_t i = 0; i < QRT_UF_SURFACE3_REPLY_BYTES; i++) out[i] = (uint8_t)(corr >> (8u * i));
    return (int32_t)QRT_UF_SURFACE3_REPLY_BYTES;
}
