/* hb_producer.c: the producer side of a live endpoint, in C so that no Python runs between the
   two timestamps of a round.

   A live endpoint's request queue is memory the consumer polls (POSIX shared memory for the shm
   backend, pinned mapped host memory for the cuda backend); its reply queue is memory this side
   polls. hb_deliver lands one request slot image there exactly as the twin's link card would,
   in the contract's order (twin/exchange/contract.yaml): classic = every byte but the sequence
   word, a release fence, the sequence word last; per-piece = each 16-byte piece's data, then its
   sequence word with release order. hb_wait polls the reply slot with the runtime library's
   qrt_peek. hb_batch runs whole rounds (deliver, wait, check) in a loop for measurements.

   Times are CLOCK_MONOTONIC nanoseconds. Built as a shared object by hw_bridge/build.py. */
#define _GNU_SOURCE
#include <string.h>
#include <time.h>

#include "qrt.h"

#define HB_API __attribute__((visibility("default")))

HB_API int64_t hb_now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000ll + (int64_t)t.tv_nsec;
}

/* Land `nbytes` of a request slot image (a whole message: header and payload, or whole pieces)
   at `slot`, publishing it last. Returns 0, or -1 when nbytes is below one piece or (per-piece)
   not a whole number of pieces. */
HB_API int hb_deliver(uint8_t *slot, const uint8_t *image, uint32_t nbytes, uint32_t encoding)
{
    uint32_t k, seq;
    if (nbytes < QRT_PIECE_BYTES)
        return -1;
    memcpy(&seq, image, 4);
    if (encoding == QRT_ENCODING_CLASSIC) {
        memcpy(slot + 4, image + 4, nbytes - 4);
        __atomic_thread_fence(__ATOMIC_RELEASE);
        __atomic_store_n((uint32_t *)slot, seq, __ATOMIC_RELEASE);
        return 0;
    }
    if (nbytes % QRT_PIECE_BYTES)
        return -1;
    for (k = 0; k < nbytes; k += QRT_PIECE_BYTES) {
        uint32_t s;
        memcpy(&s, image + k, 4);
        memcpy(slot + k + 4, image + k + 4, QRT_PIECE_BYTES - 4);
        __atomic_store_n((uint32_t *)(slot + k), s, __ATOMIC_RELEASE);
    }
    return 0;
}

/* Poll reply slot `slot` (slot_bytes bytes, `encoding`) until message `seq` is complete there or
   the clock passes deadline_ns. On success writes the instant it was seen to *t_seen and the
   reply's bytes (header + payload, or whole pieces) to *nbytes, returns 1; on timeout returns 0
   (a reply first seen after deadline_ns is late: 0 too, however few polls it took, so a timeout
   shorter than one round trip always fails); -1 on a bad argument. *stop (may be NULL) non-zero also ends the wait (returns 0). */
HB_API int hb_wait(uint8_t *slot, uint32_t slot_bytes, uint32_t encoding, uint32_t seq, int64_t deadline_ns,
                   int64_t *t_seen, uint32_t *nbytes, const volatile uint32_t *stop)
{
    qrt_queue q;
    qrt_msg m;
    uint32_t spins = 0;
    if (qrt_queue_init(&q, slot, slot_bytes, 1, encoding) != QRT_OK)
        return -1;
    for (;;) {
        int r = qrt_peek(&q, 0, seq, &m);
        if (r == 1) {
            *t_seen = hb_now_ns();
            if (*t_seen > deadline_ns)
                return 0;
            *nbytes = encoding == QRT_ENCODING_CLASSIC ? QRT_HEADER_BYTES + m.length
                                                       : QRT_PIECE_BYTES * (1u + (m.length + 11u) / 12u);
            return 1;
        }
        if (r < 0)
            return -1;
        if ((++spins & 0x3FFu) == 0u) {
            if (hb_now_ns() > deadline_ns || (stop && *stop))
                return 0;
        }
    }
}

/* One round: deliver `image` into request slot `req_slot`, wait for the reply in `rep_slot`.
   Not before the clock reads not_before_ns (0: at once): the producer spins on the clock until
   then, so the consumer idles as long as the traffic says (a duty cycle). t[0] = just before the
   first byte is written, t[1] = the reply seen complete. Returns as hb_wait. */
HB_API int hb_exchange(uint8_t *req_slot, uint8_t *rep_slot, uint32_t slot_bytes, uint32_t encoding,
                       const uint8_t *image, uint32_t nbytes, int64_t timeout_ns, int64_t *t, uint32_t *reply_bytes,
                       const volatile uint32_t *stop, int64_t not_before_ns)
{
    uint32_t seq;
    memcpy(&seq, image, 4);
    do
        t[0] = hb_now_ns();
    while (t[0] < not_before_ns);
    if (hb_deliver(req_slot, image, nbytes, encoding) != 0)
        return -1;
    return hb_wait(rep_slot, slot_bytes, encoding, seq, t[0] + timeout_ns, &t[1], reply_bytes, stop);
}

/* n rounds in a loop, one request in flight: round i posts images[i] (stride bytes apart,
   lengths[i] bytes) into slot i % slots of req_base, waits for its reply in the same slot of
   rep_base and compares the reply's bytes with expect[i] (same stride, expect_len[i] bytes).
   t0[i], t1[i]: before the request's first write, reply seen. bad[i] = 1 for a reply that
   differs. gaps_ns (may be NULL: back to back): round i > 0 is not sent before gaps_ns[i] after
   round i-1's reply was seen (a duty cycle). Returns the rounds completed (< n when a reply timed
   out after timeout_ns), -1 on a bad argument. */
HB_API int64_t hb_batch(uint8_t *req_base, uint8_t *rep_base, uint32_t slot_bytes, uint32_t slots, uint32_t encoding,
                        const uint8_t *images, const uint32_t *lengths, const uint8_t *expect,
                        const uint32_t *expect_len, uint32_t stride, int64_t n, int64_t timeout_ns,
                        int64_t *t0, int64_t *t1, uint8_t *bad, const int64_t *gaps_ns)
{
    int64_t i;
    for (i = 0; i < n; ++i) {
        size_t off = (size_t)(i % slots) * slot_bytes;
        int64_t t[2];
        uint32_t got = 0;
        int64_t not_before = gaps_ns && i > 0 ? t1[i - 1] + gaps_ns[i] : 0;
        int r = hb_exchange(req_base + off, rep_base + off, slot_bytes, encoding, images + (size_t)i * stride,
                            lengths[i], timeout_ns, t, &got, 0, not_before);
        if (r < 0)
            return -1;
        if (r == 0)
            return i;
        t0[i] = t[0];
        t1[i] = t[1];
        bad[i] = got != expect_len[i] || memcmp(rep_base + off, expect + (size_t)i * stride, got) != 0;
    }
    return n;
}
