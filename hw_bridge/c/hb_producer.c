/* hb_producer.c: the producer side of a live endpoint, in C so that no Python runs between the
   two timestamps of a round.

   A live endpoint's request queue is memory the consumer polls (POSIX shared memory for the shm
   backend, pinned mapped host memory for the cuda backend); its reply queue is memory this side
   polls. hb_deliver lands one request slot image there exactly as the twin's link card would,
   in the contract's order (twin/exchange/contract.yaml): classic = every byte but the sequence
   word, a release fence, the sequence word last; per-piece = each 16-byte piece's data, then its
   sequence word with release order. hb_wait polls the reply slot with the runtime library's
   qrt_peek. hb_batch runs whole rounds (deliver, wait, check) in a loop for measurements;
   hb_paced runs a live flow's rounds at their simulated instants mapped to wall time (below).

   Times are CLOCK_MONOTONIC nanoseconds (the clock clock_nanosleep can sleep on with an absolute
   deadline, and the one the shm consumer stamps its rounds with: one clock for both processes).
   Built as a shared object by hw_bridge/build.py. */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <sys/prctl.h>
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


/* ---------------------------------------------------------------------------------------------
   hb_paced: a live flow's rounds at their simulated instants, no Python between rounds.

   Round i's request is planned for a wall instant computed from at_ps[i] (int64 picoseconds of
   simulated time, rounded to the nearest ns):
     closed loop (HB_P_CLOSED = 1): planned(i) = reply of round i-1 seen + at_ps[i] (the flow's
       simulated time from the device's reply published to the next request landed in its memory:
       reply path, control side, traffic gap, request path); round 0 at once;
     open loop: planned(i) = epoch + at_ps[i] (at_ps: the request's landing instant relative to
       round 0's); the epoch is round 0's wall instant, set on the first call.
   The producer sleeps (clock_nanosleep, TIMER_ABSTIME) until planned - spin when the wait is
   longer than spin ns, then spins on the clock to the planned instant, writes the request (the
   contract's order, hb_deliver), and spins on the reply (hb_wait). One request in flight; round
   i uses slot i % slots. Per round (arrays indexed by the flow's round, n long):
     planned_ns, sent_ns (just before the first byte written; lateness = sent - planned),
     seen_ns (reply seen complete), bad (1: the reply's bytes differ from expect),
     dev_in_ns / dev_out_ns (the consumer's own clock: request seen landed / reply published,
       from its stamp block when `stamps` is not NULL, else left as they are; -1 when the
       consumer's stamp for the round did not come).
   Images and expected replies are indexed from round st[HB_P_DONE] (the first of this call),
   stride bytes apart; `replies` (may be NULL) gets, at the same index, the reply slot's bytes as
   the producer saw them complete (header + payload, or whole pieces; at most stride bytes), so a
   caller can keep the device's own answers (a decoder's corrections) beside the check. A round sent more than late ns after its planned instant is late
   (st[HB_P_LATE_ROUNDS] counts them; a scenario's threshold).

   It returns to its caller after st[HB_P_CHUNK] rounds, after a round that ends past
   st[HB_P_UNTIL] (a wall-clock bound on one call, so the caller can look for a stop request between
   calls however slow the rounds), at the flow's end, on a timeout or when
   *stop is non-zero (set by another thread; checked between rounds: the reply awaited is still
   awaited, up to the timeout, and no new request is sent): st[HB_P_DONE] is then the rounds completed, st[HB_P_STATUS] 0 (chunk or flow
   done), 1 (a reply did not come within the timeout: round st[HB_P_DONE] is the one waiting),
   2 (stopped), -1 (bad argument). The caller calls again to go on (epoch and the last reply's
   instant are kept in st). */
enum {
    HB_P_N,           /* rounds in the flow */
    HB_P_DONE,        /* in/out: rounds completed */
    HB_P_CLOSED,      /* 1 closed loop, 0 open loop */
    HB_P_EPOCH,       /* open loop: wall ns of at_ps == 0 (0: set at the first round) */
    HB_P_LAST_SEEN,   /* closed loop: the previous round's reply seen (ns) */
    HB_P_TIMEOUT,     /* reply timeout (ns) */
    HB_P_SPIN,        /* busy-wait below this (ns); sleep above */
    HB_P_LATE,        /* a round later than this is late (ns) */
    HB_P_LATE_ROUNDS, /* out: rounds sent late */
    HB_P_CHUNK,       /* return after this many rounds */
    HB_P_STATUS,      /* out: 0 / 1 timeout / 2 stopped / -1 bad argument */
    HB_P_SLOT_BYTES,
    HB_P_SLOTS,
    HB_P_ENCODING,
    HB_P_STRIDE,
    HB_P_UNTIL,       /* also return once a round ends after this wall instant (ns; 0: none) */
    HB_P_SENT,        /* in/out (window > 1): requests written (done <= sent <= done + window) */
    HB_P_AVAIL,       /* rows of images / expect given from round st[HB_P_DONE] (window > 1: sends stop there) */
    HB_P_WINDOW,      /* requests in flight at most (open loop; <= slots, <= HB_STAMPS); 0 or 1: one */
    HB_P_WORDS
};

/* The consumer's stamp block (hb_shm_consumer.c): HB_STAMPS entries of {seq u32, pad u32,
   in_ns i64, out_ns i64} indexed by seq % HB_STAMPS, the seq word written last (release). */
#define HB_STAMPS 160u
#define HB_STAMP_BYTES 24u

HB_API int32_t hb_stamp_geometry(void)
{
    return (int32_t)(HB_STAMPS * 1000u + HB_STAMP_BYTES);
}

static void hb_sleep_until(int64_t t_ns)
{
    struct timespec ts;
    ts.tv_sec = (time_t)(t_ns / 1000000000ll);
    ts.tv_nsec = (long)(t_ns % 1000000000ll);
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, 0) == EINTR)
        ;
}

/* Read round i's consumer stamp (seq) into dev_in/dev_out; wait up to wait_ns for it. */
static void hb_take_stamp(const uint8_t *stamps, uint32_t seq, int64_t wait_ns, int64_t *dev_in, int64_t *dev_out)
{
    const uint8_t *e = stamps + (size_t)(seq % HB_STAMPS) * HB_STAMP_BYTES;
    int64_t until = wait_ns ? hb_now_ns() + wait_ns : 0;
    for (;;) {
        if (__atomic_load_n((const uint32_t *)e, __ATOMIC_ACQUIRE) == seq) {
            memcpy(dev_in, e + 8, 8);
            memcpy(dev_out, e + 16, 8);
            /* an entry overwritten meanwhile (seq + HB_STAMPS) would not carry seq again */
            if (__atomic_load_n((const uint32_t *)e, __ATOMIC_ACQUIRE) == seq)
                return;
        }
        if (!wait_ns || hb_now_ns() > until) {
            *dev_in = *dev_out = -1;
            return;
        }
    }
}

static int64_t hb_paced_rounds(uint8_t *req_base, uint8_t *rep_base, const uint8_t *stamps, int64_t *st,
                               const uint8_t *images, const uint32_t *lengths, const uint8_t *expect,
                               const uint32_t *expect_len, const int64_t *at_ps, int64_t *planned_ns,
                               int64_t *sent_ns, int64_t *seen_ns, int64_t *dev_in_ns, int64_t *dev_out_ns,
                               uint8_t *bad, const volatile uint32_t *stop, uint8_t *replies)
{
    int64_t n = st[HB_P_N], first = st[HB_P_DONE], i, end;
    uint32_t slot_bytes = (uint32_t)st[HB_P_SLOT_BYTES], slots = (uint32_t)st[HB_P_SLOTS];
    uint32_t enc = (uint32_t)st[HB_P_ENCODING], stride = (uint32_t)st[HB_P_STRIDE];
    int64_t spin = st[HB_P_SPIN], late = st[HB_P_LATE];
    if (!slots || !slot_bytes || stride < QRT_PIECE_BYTES || first < 0 || first > n || st[HB_P_CHUNK] < 1) {
        st[HB_P_STATUS] = -1;
        return -1;
    }
    end = first + st[HB_P_CHUNK] < n ? first + st[HB_P_CHUNK] : n;
    st[HB_P_STATUS] = 0;
    for (i = first; i < end; ++i) {
        size_t off = (size_t)(i % slots) * slot_bytes, k = (size_t)(i - first);
        const uint8_t *image = images + k * stride;
        int64_t at = (at_ps[i] + 500) / 1000, plan, t0, t1, now;
        uint32_t seq, got = 0;
        int r;
        memcpy(&seq, image, 4);
        if (st[HB_P_CLOSED])
            plan = i == 0 ? hb_now_ns() : st[HB_P_LAST_SEEN] + at;
        else {
            if (i == 0 && st[HB_P_EPOCH] == 0)
                st[HB_P_EPOCH] = hb_now_ns() - at;
            plan = st[HB_P_EPOCH] + at;
        }
        now = hb_now_ns();
        if (plan - now > spin)
            hb_sleep_until(plan - spin);
        do
            t0 = hb_now_ns();
        while (t0 < plan);
        if (hb_deliver(req_base + off, image, lengths[k], enc) != 0) {
            st[HB_P_STATUS] = -1;
            return -1;
        }
        /* a stop ends the flow at a round boundary: the reply sent for is still awaited (up to the
           timeout, so a consumer that hangs is named as such), only no further request goes */
        r = hb_wait(rep_base + off, slot_bytes, enc, seq, t0 + st[HB_P_TIMEOUT], &t1, &got, NULL);
        if (r < 0) {
            st[HB_P_STATUS] = -1;
            return -1;
        }
        if (r == 0) {
            st[HB_P_STATUS] = 1;
            return i - first;
        }
        planned_ns[i] = plan;
        sent_ns[i] = t0;
        seen_ns[i] = t1;
        st[HB_P_LAST_SEEN] = t1;
        if (t0 - plan > late)
            ++st[HB_P_LATE_ROUNDS];
        bad[i] = got != expect_len[k] || memcmp(rep_base + off, expect + k * stride, got) != 0;
        if (replies)
            memcpy(replies + k * stride, rep_base + off, got < stride ? got : stride);
        /* the previous round's stamp is certainly written (the consumer stamps a round before it
           serves the next); the flow's last round's waits for it a little */
        if (stamps && i > 0)
            hb_take_stamp(stamps, seq - 1u, 0, &dev_in_ns[i - 1], &dev_out_ns[i - 1]);
        if (stamps && i == n - 1)
            hb_take_stamp(stamps, seq, 10000000ll, &dev_in_ns[i], &dev_out_ns[i]);
        st[HB_P_DONE] = i + 1;
        if (stop && *stop) {
            st[HB_P_STATUS] = 2;
            return i + 1 - first;
        }
        if (st[HB_P_UNTIL] && t1 > st[HB_P_UNTIL])
            return i + 1 - first;
    }
    return end - first;
}

/* Non-blocking: reply `seq` complete in `slot`? 1 (its byte count in *nbytes), 0 not yet, -1 bad argument. */
static int hb_peek_reply(uint8_t *slot, uint32_t slot_bytes, uint32_t encoding, uint32_t seq, uint32_t *nbytes)
{
    qrt_queue q;
    qrt_msg m;
    int r;
    if (qrt_queue_init(&q, slot, slot_bytes, 1, encoding) != QRT_OK)
        return -1;
    r = qrt_peek(&q, 0, seq, &m);
    if (r == 1)
        *nbytes = encoding == QRT_ENCODING_CLASSIC ? QRT_HEADER_BYTES + m.length
                                                   : QRT_PIECE_BYTES * (1u + (m.length + 11u) / 12u);
    return r < 0 ? -1 : r;
}

/* The per-round record arrays of a paced flow (the arguments of hb_paced after st). */
typedef struct hb_rec {
    const uint8_t *images;
    const uint32_t *lengths;
    const uint8_t *expect;
    const uint32_t *expect_len;
    const int64_t *at_ps;
    int64_t *planned_ns, *sent_ns, *seen_ns, *dev_in_ns, *dev_out_ns;
    uint8_t *bad, *replies;
} hb_rec;

/* Round j's reply (seq) seen complete at t1 with got bytes: record, check, copy, stamps. */
static void hb_window_reply(const hb_rec *r, const uint8_t *rep, const uint8_t *stamps, int64_t *st, int64_t j,
                            int64_t first, uint32_t seq, int64_t t1, uint32_t got)
{
    size_t k = (size_t)(j - first), stride = (size_t)st[HB_P_STRIDE];
    r->seen_ns[j] = t1;
    r->bad[j] = got != r->expect_len[k] || memcmp(rep, r->expect + k * stride, got) != 0;
    if (r->replies)
        memcpy(r->replies + k * stride, rep, got < stride ? got : stride);
    /* the consumer stamps a round before it looks at the next: j - 1's is written once j's reply is out */
    if (stamps && j > 0)
        hb_take_stamp(stamps, seq - 1u, 0, &r->dev_in_ns[j - 1], &r->dev_out_ns[j - 1]);
    if (stamps && j == st[HB_P_N] - 1)
        hb_take_stamp(stamps, seq, 10000000ll, &r->dev_in_ns[j], &r->dev_out_ns[j]);
    st[HB_P_DONE] = j + 1;
}

/* Round i's request written at its planned instant (or at once when that has passed). */
static int hb_window_send(const hb_rec *r, uint8_t *req, int64_t *st, int64_t i, int64_t first, int64_t plan)
{
    size_t k = (size_t)(i - first);
    int64_t t0;
    do
        t0 = hb_now_ns();
    while (t0 < plan);
    if (hb_deliver(req, r->images + k * (size_t)st[HB_P_STRIDE], r->lengths[k], (uint32_t)st[HB_P_ENCODING]) != 0)
        return -1;
    r->planned_ns[i] = plan;
    r->sent_ns[i] = t0;
    if (t0 - plan > st[HB_P_LATE])
        ++st[HB_P_LATE_ROUNDS];
    st[HB_P_SENT] = i + 1;
    return 0;
}

/* An open loop with up to `window` requests in flight (the stream's own pace: a request is
   written at its instant whatever the replies, as long as a slot is free; a request whose instant
   passes while `window` are in flight waits for the oldest reply, late). The producer spins,
   polling the oldest reply between sends; with none in flight it sleeps as hb_paced_rounds. Sends
   stop at round first + st[HB_P_AVAIL] (the images given); the call returns after st[HB_P_CHUNK]
   replies, past st[HB_P_UNTIL], on a stop, or on a timeout (the oldest reply not seen within
   timeout of its request), with requests possibly still in flight (st[HB_P_SENT] > st[HB_P_DONE]:
   the next call, given images from st[HB_P_DONE] on, goes on with them). */
static int64_t hb_paced_window(uint8_t *req_base, uint8_t *rep_base, const uint8_t *stamps, int64_t *st,
                               const hb_rec *r, const volatile uint32_t *stop)
{
    int64_t n = st[HB_P_N], first = st[HB_P_DONE], w = st[HB_P_WINDOW];
    int64_t chunk_end = first + st[HB_P_CHUNK] < n ? first + st[HB_P_CHUNK] : n;
    int64_t send_end = first + st[HB_P_AVAIL] < n ? first + st[HB_P_AVAIL] : n;
    uint32_t slot_bytes = (uint32_t)st[HB_P_SLOT_BYTES], slots = (uint32_t)st[HB_P_SLOTS];
    uint32_t enc = (uint32_t)st[HB_P_ENCODING];
    size_t stride = (size_t)st[HB_P_STRIDE];
    if (st[HB_P_CLOSED] || w > (int64_t)slots || w > (int64_t)HB_STAMPS || st[HB_P_SENT] < first ||
        st[HB_P_SENT] - first > w || st[HB_P_AVAIL] < st[HB_P_SENT] - first) {
        st[HB_P_STATUS] = -1;
        return -1;
    }
    while (st[HB_P_DONE] < chunk_end) {
        int64_t done = st[HB_P_DONE], i = st[HB_P_SENT], now, plan = 0;
        int can;
        if (stop && *stop && send_end > i) /* stopped: no new request; those in flight are awaited */
            send_end = i;
        can = i < send_end && i - done < w;
        if (can) {
            int64_t at = (r->at_ps[i] + 500) / 1000;
            if (i == 0 && st[HB_P_EPOCH] == 0)
                st[HB_P_EPOCH] = hb_now_ns() - at;
            plan = st[HB_P_EPOCH] + at;
        }
        if (done == i) { /* none in flight: wait for the instant as one request at a time does */
            if (!can)
                break;
            now = hb_now_ns();
            if (plan - now > st[HB_P_SPIN])
                hb_sleep_until(plan - st[HB_P_SPIN]);
            if (hb_window_send(r, req_base + (size_t)(i % slots) * slot_bytes, st, i, first, plan) != 0)
                goto bad;
            continue;
        }
        {
            size_t off = (size_t)(done % slots) * slot_bytes;
            uint32_t seq, got = 0;
            int pr;
            memcpy(&seq, r->images + (size_t)(done - first) * stride, 4);
            pr = hb_peek_reply(rep_base + off, slot_bytes, enc, seq, &got);
            if (pr < 0)
                goto bad;
            now = hb_now_ns();
            if (pr == 1 && now <= r->sent_ns[done] + st[HB_P_TIMEOUT]) {
                hb_window_reply(r, rep_base + off, stamps, st, done, first, seq, now, got);
                if (st[HB_P_UNTIL] && now > st[HB_P_UNTIL])
                    break;
                continue;
            }
            if (pr == 1 || now > r->sent_ns[done] + st[HB_P_TIMEOUT]) {
                st[HB_P_STATUS] = 1;
                return st[HB_P_DONE] - first;
            }
            if (can && now >= plan &&
                hb_window_send(r, req_base + (size_t)(i % slots) * slot_bytes, st, i, first, plan) != 0)
                goto bad;
        }
    }
    if (stop && *stop)
        st[HB_P_STATUS] = 2;
    return st[HB_P_DONE] - first;
bad:
    st[HB_P_STATUS] = -1;
    return -1;
}

/* The thread's timer slack is 1 ns during the call (the kernel's default, 50 us, would let a
   clock_nanosleep end up to that late), restored after. */
HB_API int64_t hb_paced(uint8_t *req_base, uint8_t *rep_base, const uint8_t *stamps, int64_t *st,
                        const uint8_t *images, const uint32_t *lengths, const uint8_t *expect,
                        const uint32_t *expect_len, const int64_t *at_ps, int64_t *planned_ns, int64_t *sent_ns,
                        int64_t *seen_ns, int64_t *dev_in_ns, int64_t *dev_out_ns, uint8_t *bad,
                        const volatile uint32_t *stop, uint8_t *replies)
{
    int slack = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
    int64_t r;
    prctl(PR_SET_TIMERSLACK, 1ul, 0, 0, 0);
    if (st[HB_P_WINDOW] > 1) {
        hb_rec rec = {images, lengths, expect, expect_len, at_ps, planned_ns, sent_ns, seen_ns, dev_in_ns,
                      dev_out_ns, bad, replies};
        st[HB_P_STATUS] = 0;
        r = st[HB_P_SLOTS] < 1 || st[HB_P_SLOT_BYTES] < 1 || st[HB_P_STRIDE] < QRT_PIECE_BYTES || st[HB_P_CHUNK] < 1
                ? (st[HB_P_STATUS] = -1, -1)
                : hb_paced_window(req_base, rep_base, stamps, st, &rec, stop);
    } else
        r = hb_paced_rounds(req_base, rep_base, stamps, st, images, lengths, expect, expect_len, at_ps, planned_ns,
                            sent_ns, seen_ns, dev_in_ns, dev_out_ns, bad, stop, replies);
    if (slack > 0)
        prctl(PR_SET_TIMERSLACK, (unsigned long)slack, 0, 0, 0);
    return r;
}
