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
