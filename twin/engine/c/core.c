/* core.c: the compiled core of twin's one engine (C11, integer picoseconds).

   twin_direct_run: the recurrence of twin/engine/direct.py (run_direct), round for round, on the
   random draws the Python side hands it (the same JitterStream blocks, the same gaps array), so
   its timestamps and hops equal run_direct's and the event model's.

   Parameters and state travel as int64 arrays whose indices are the enums of core_interface.h,
   generated with twin/engine/core_interface.py from one table (twin/engine/core_interface.yaml,
   `twin gen`; the event core's flow parameters, record columns and statistics likewise): the state
   array persists between calls, so the Python side runs the rounds in chunks (progress, a stop
   request) exactly where run_direct looks up.

   Built at install time by setup.py as the extension twin.engine._core (with TWIN_CORE_PYMODULE
   defined: an empty CPython module), or privately by twin/engine/native.py with the system C
   compiler; loaded with ctypes. */
#include <stdint.h>
#include <string.h>

#include "core_interface.h" /* the index tables shared with Python (generated: twin gen) */

#ifndef TWIN_CORE_BUILD_ID
#define TWIN_CORE_BUILD_ID "unknown"
#endif

const char *twin_core_build_id(void) { return TWIN_CORE_BUILD_ID; }

#define PPB 1000000000LL

/* floor and ceiling division of a by b > 0 (Python's // for negative a); not fdiv: glibc 2.28+ declares
   fdiv (C23's narrowing division) in math.h, which Python.h includes */
static inline int64_t floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && a < 0) ? q - 1 : q;
}
static inline int64_t ceil_div(int64_t a, int64_t b) { return -floor_div(-a, b); }
/* the first instant of the grid phase + k * period at or after t (twin.units.ceil_to_grid) */
static inline int64_t ceil_grid(int64_t t, int64_t period, int64_t phase)
{
    return phase - floor_div(phase - t, period) * period;
}

/* ---- clock (twin.kernel.clock.Clock, no drift): edge k at phase + floor(k period (1e9 + ppb) / 1e9) */
typedef struct { int64_t period, ppb, phase; } clk_t;

static inline int64_t clk_edge(const clk_t *c, int64_t k)
{
    if (c->ppb == 0)
        return c->phase + k * c->period;
    __int128 s = (__int128)c->period * (PPB + c->ppb);
    return c->phase + (int64_t)(((__int128)k * s) / PPB);
}

static inline __int128 floor_div128(__int128 a, __int128 b)
{
    __int128 q = a / b;
    return (a % b != 0 && a < 0) ? q - 1 : q;
}

static int64_t clk_at_or_after(const clk_t *c, int64_t t)
{
    if (t <= c->phase)
        return clk_edge(c, 0);
    if (c->ppb == 0) /* edges phase + k period exactly */
        return c->phase + ceil_div(t - c->phase, c->period) * c->period;
    __int128 s = (__int128)c->period * (PPB + c->ppb);
    int64_t k = (int64_t)(-floor_div128((__int128)(c->phase - t) * PPB, s));
    while (k > 0 && clk_edge(c, k - 1) >= t)
        k--;
    while (clk_edge(c, k) < t)
        k++;
    return clk_edge(c, k);
}

/* ---- a lane (twin.kernel.posted.Lane.plan): serialise, land after latency + jitter (+ tail), in order */
typedef struct { int64_t free, last, lat, writes, busy, held; } lane_t;

static inline int64_t lane_plan(lane_t *L, int64_t t_issue, int64_t ser, int64_t tail, int64_t jit)
{
    int64_t start = t_issue > L->free ? t_issue : L->free;
    L->free = start + ser;
    L->busy += ser;
    int64_t land = start + ser + L->lat + jit + tail;
    if (land < L->last) {
        land = L->last;
        L->held++;
    }
    L->last = land;
    L->writes++;
    return land;
}

/* ---- the direct engine ---------------------------------------------------------------------- */

/* the pending sends of several in flight: a binary heap of (instant, order scheduled) */
static inline int heap_less(const int64_t *h, int64_t a, int64_t b)
{
    return h[2 * a] < h[2 * b] || (h[2 * a] == h[2 * b] && h[2 * a + 1] < h[2 * b + 1]);
}
static void heap_swap(int64_t *h, int64_t a, int64_t b)
{
    int64_t t0 = h[2 * a], t1 = h[2 * a + 1];
    h[2 * a] = h[2 * b];
    h[2 * a + 1] = h[2 * b + 1];
    h[2 * b] = t0;
    h[2 * b + 1] = t1;
}
static void heap_push(int64_t *h, int64_t *n, int64_t t, int64_t order)
{
    int64_t i = (*n)++;
    h[2 * i] = t;
    h[2 * i + 1] = order;
    while (i > 0 && heap_less(h, i, (i - 1) / 2)) {
        heap_swap(h, i, (i - 1) / 2);
        i = (i - 1) / 2;
    }
}
static int64_t heap_pop(int64_t *h, int64_t *n)
{
    int64_t t = h[0];
    (*n)--;
    h[0] = h[2 * *n];
    h[1] = h[2 * *n + 1];
    int64_t i = 0;
    for (;;) {
        int64_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < *n && heap_less(h, l, m))
            m = l;
        if (r < *n && heap_less(h, r, m))
            m = r;
        if (m == i)
            break;
        heap_swap(h, i, m);
        i = m;
    }
    return t;
}

/* ---- a consumer's service beyond its constant body (twin.engine.service_core; SV_*, IR_*, MR_*) -------------
   Each function is the Python one's arithmetic, operation for operation in IEEE double (built with
   -ffp-contract=off: no fused multiply-add), so the instants are the Python engines' to the picosecond. */
#include <math.h>

static inline const void *sv_ptr(const int64_t *sv, int k) { return (const void *)(intptr_t)sv[k]; }

/* twin.devices.service.IdleCost.at: the extra service (ps, a double) after an idle gap */
static double idle_at(const int64_t *r, int64_t gap)
{
    const int64_t g = gap > 0 ? gap : 0;
    if (r[IR_KIND] == IDLE_SATURATING)
        return (double)r[IR_COST] * -expm1(-((double)g / (double)r[IR_TAU]));
    const int64_t *gp = (const int64_t *)(intptr_t)r[IR_GAPS], *cp = (const int64_t *)(intptr_t)r[IR_COSTS];
    const int64_t np = r[IR_NPTS];
    if (g <= gp[0])
        return (double)cp[0];
    for (int64_t k = 1; k < np; k++)
        if (g <= gp[k]) {
            double f = log((double)g / (double)gp[k - 1]) / log((double)gp[k] / (double)gp[k - 1]);
            return (double)cp[k - 1] + f * (double)(cp[k] - cp[k - 1]);
        }
    return (double)cp[np - 1];
}

/* twin.devices.service.mix_fraction */
static double mix_at(const int64_t *sv, int64_t gap)
{
    const int64_t np = sv[SV_N_MIX], *gp = sv_ptr(sv, SV_MIX_GAP);
    const double *fp = sv_ptr(sv, SV_MIX_FRAC);
    const int64_t g = gap > 1 ? gap : 1;
    if (g <= gp[0])
        return fp[0];
    for (int64_t k = 1; k < np; k++)
        if (g <= gp[k])
            return fp[k - 1] + (fp[k] - fp[k - 1]) * log((double)g / (double)gp[k - 1]) /
                                   log((double)gp[k] / (double)gp[k - 1]);
    return fp[np - 1];
}

/* twin.devices.service.mode_extra_ps of round i's pick */
static int64_t mode_extra(const int64_t *sv, int64_t i, int64_t gap)
{
    const int64_t k = ((const int64_t *)sv_ptr(sv, SV_PICK_K))[i];
    if (k >= sv[SV_N_MODES])
        return 0;
    const double v = ((const double *)sv_ptr(sv, SV_PICK_V))[i];
    const double f = sv[SV_N_MIX] ? mix_at(sv, gap) : 0.0;
    const int64_t *m = (const int64_t *)sv_ptr(sv, SV_MODES) + k * MR_COUNT;
    double off = (double)m[MR_OFFSET], wid = (double)m[MR_WIDTH];
    if (f != 0.0 && m[MR_HAS_LONG]) {
        off += f * ((double)m[MR_LONG_OFFSET] - off);
        wid += f * ((double)m[MR_LONG_WIDTH] - wid);
    }
    return f == 0.0 ? (int64_t)(off + floor(v * wid)) : (int64_t)rint(off + v * wid);
}

/* twin.devices.host_runtime.HostRuntime.stages_ps of round i: (enqueue, wake, hand-back) into hs */
static void host_stages(const int64_t *sv, int64_t i, int64_t gap, int64_t *hs)
{
    const double g = log((double)(gap > 1 ? gap : 1)), *li = sv_ptr(sv, SV_HR_LOGIDLE);
    int64_t best = 0;
    double d = fabs(li[0] - g);
    for (int64_t k = 1; k < sv[SV_HR_N]; k++)
        if (fabs(li[k] - g) < d) {
            d = fabs(li[k] - g);
            best = k;
        }
    const int64_t rows = ((const int64_t *)sv_ptr(sv, SV_HR_ROWS))[best];
    int64_t j = (int64_t)(((const double *)sv_ptr(sv, SV_HR_U))[i] * (double)rows);
    j = ((const int64_t *)sv_ptr(sv, SV_HR_FIRST))[best] + (j < rows - 1 ? j : rows - 1);
    hs[0] = ((const int64_t *)sv_ptr(sv, SV_HR_ENQ))[j];
    hs[1] = ((const int64_t *)sv_ptr(sv, SV_HR_WAKE))[j];
    hs[2] = ((const int64_t *)sv_ptr(sv, SV_HR_HAND))[j];
}

/* twin.devices.consumer.ConsumerParams.round_extra_ps plus the host runtime's stages: round i's service beyond
   the constant body (ps) after an idle gap (the thread free -> the poll that took the request); the stages
   written to SV_STAGES (3 per round) */
static int64_t service_extra(const int64_t *sv, int64_t i, int64_t gap)
{
    int64_t x = 0;
    if (sv[SV_N_IDLE]) {
        double s = 0.0;
        const int64_t *rows = sv_ptr(sv, SV_IDLE);
        for (int64_t k = 0; k < sv[SV_N_IDLE]; k++)
            s += idle_at(rows + k * IR_COUNT, gap);
        x = (int64_t)rint(s);
    }
    if (sv[SV_N_MODES])
        x += mode_extra(sv, i, gap);
    if (sv[SV_HR_N]) {
        int64_t *hs = (int64_t *)(intptr_t)sv[SV_STAGES] + 3 * i;
        host_stages(sv, i, gap, hs);
        x += hs[0] + hs[1] + hs[2];
    }
    return x;
}

/* Run rounds st[S_I] .. end-1 of the direct recurrence. p: parameters (P_*); st: state (S_*),
   updated; heap: 2 * in_flight int64; have: slots int64 (the ring of t_have); req_jit: the
   request lane's jitter for these rounds (n_req per round, from index 0); rep_jit: the reply
   lane's (1 per round per-piece, 2 classic); gaps: every round's gap or NULL; extra: every round's
   extra body or NULL. outs: the addresses of the outputs indexed by round (DO_*): t_send, t_in, t_have,
   t_back, issue, land, reply, rland, and the hops that follow from them (twin.engine.direct._hops): seen
   (the first poll after the landing, plus its cost), start (reply - body - extra), publish (reply +
   fence, per-piece reply). t_in, t_back and publish may be 0 where the caller keeps them as the same
   array as t_send, t_have and reply, by its proof (twin.engine.direct._aliases): every generator edge is a card
   clock edge and there is no Aurora link (then t_in is taken as the send instant, no division); no
   Aurora link; per-piece encoding. A round that breaks one returns TWIN_DIRECT_ALIAS (t_in: an
   Aurora link; t_back: back != t_have; publish: not per-piece). seen reuses the reply's poll when
   the thread was idle at the landing (the same poll: one division fewer).
   Returns 0, or -(round + 1) for a round that finds every slot busy (direct engine does not
   apply), with st[S_I] at that round. */
#define TWIN_DIRECT_ALIAS INT64_MIN
static inline int64_t *out_col(const int64_t *outs, int k) { return (int64_t *)(intptr_t)outs[k]; }

int64_t twin_direct_run(const int64_t *p, int64_t *st, int64_t end, int64_t *heap, int64_t *have,
                        const int64_t *req_jit, const int64_t *rep_jit, const int64_t *gaps, const int64_t *extra,
                        const int64_t *outs)
{
    int64_t *const t_send = out_col(outs, DO_T_SEND), *const t_in = out_col(outs, DO_T_IN);
    int64_t *const t_have = out_col(outs, DO_T_HAVE), *const t_back = out_col(outs, DO_T_BACK);
    int64_t *const issue = out_col(outs, DO_ISSUE), *const land_o = out_col(outs, DO_LAND);
    int64_t *const reply_o = out_col(outs, DO_REPLY), *const rland_o = out_col(outs, DO_RLAND);
    int64_t *const seen_o = out_col(outs, DO_SEEN), *const start_o = out_col(outs, DO_START);
    int64_t *const publish_o = out_col(outs, DO_PUBLISH);
    const int64_t n = p[P_N], slots = p[P_SLOTS], closed = p[P_CLOSED], per_piece = p[P_PER_PIECE];
    const int64_t phase = p[P_PHASE], P = p[P_POLL], cost = p[P_COST], body = p[P_BODY], fence = p[P_FENCE];
    const int64_t cP = p[P_CARD_POLL], read = p[P_READ], bridge = p[P_BRIDGE], land_ps = p[P_LAND];
    const int64_t cclk = p[P_CARD_CLK], aur = p[P_AURORA], aur_ser = p[P_AUR_SER], aur_lat = p[P_AUR_LAT];
    const int64_t reply_send = p[P_REPLY_SEND], n_req = p[P_N_REQ], gap_ps = p[P_GAP];
    const int64_t period_cycles = p[P_PERIOD_CYCLES];
    const int multi = closed && p[P_IN_FLIGHT] > 1;
    const clk_t clock = {p[P_CLK_PERIOD], p[P_CLK_PPB], p[P_CLK_PHASE]};
    const int64_t *req_ser = p + P_REQ_SER0, *req_tail = p + P_REQ_TAIL0;
    const int64_t rep_ser0 = p[P_REP_SER0], rep_ser1 = p[P_REP_SER1];
    const int64_t rep_tail0 = p[P_REP_TAIL0], rep_tail1 = p[P_REP_TAIL1];
    if (!p[P_HAS_GAPS])
        gaps = NULL;
    if (!p[P_HAS_EXTRA])
        extra = NULL;
    const int64_t *const svc = (const int64_t *)(intptr_t)p[P_SVC];
    lane_t req = {st[S_REQ_FREE], st[S_REQ_LAST], p[P_REQ_LAT], 0, 0, 0};
    lane_t rep = {st[S_REP_FREE], st[S_REP_LAST], p[P_REP_LAT], 0, 0, 0};
    int64_t ts = st[S_TS], back = st[S_BACK], tx_free = st[S_TX], rx_free = st[S_RX];
    int64_t bridge_free = st[S_BRIDGE], t_free_c = st[S_FREE_C], last_have = st[S_LAST_HAVE];
    int64_t scheduled = st[S_SCHEDULED], heap_n = st[S_HEAP_N];
    const int64_t i0 = st[S_I];
    int64_t i, rc = 0;
    const int64_t rep_per = per_piece ? 1 : 2;
    for (i = i0; i < end; i++) {
        const int64_t j = i - i0; /* index into this call's jitter */
        if (i && !closed)
            ts = gaps == NULL ? clk_edge(&clock, i * period_cycles) : clk_at_or_after(&clock, ts + gaps[i - 1]);
        else if (multi)
            ts = heap_pop(heap, &heap_n);
        else if (closed && i)
            ts = clk_at_or_after(&clock, back + (gaps == NULL ? gap_ps : gaps[i - 1]));
        int64_t arrive = ts;
        if (aur) {
            tx_free = (ts > tx_free ? ts : tx_free) + aur_ser;
            arrive = tx_free + aur_lat;
        }
        /* t_in kept as t_send (NULL): every edge is a card edge, the request enters as it leaves */
        const int64_t tin = t_in == NULL ? arrive : ceil_div(arrive, cclk) * cclk;
        if (i >= slots && have[i % slots] > tin) {
            rc = -(i + 1);
            break;
        }
        if (t_in != NULL)
            t_in[i] = tin;
        else if (aur) {
            rc = TWIN_DIRECT_ALIAS;
            break;
        }
        t_send[i] = ts;
        bridge_free = (tin > bridge_free ? tin : bridge_free) + bridge;
        const int64_t t_issue = bridge_free + land_ps;
        int64_t land = 0;
        for (int64_t k = 0; k < n_req; k++)
            land = lane_plan(&req, t_issue, req_ser[k], req_tail[k], req_jit[j * n_req + k]);
        const int idle = land >= t_free_c; /* the thread was free: the poll that sees it takes it */
        int64_t t = idle ? land : t_free_c;
        const int64_t polled = ceil_grid(t, P, phase);
        const int64_t x = (svc != NULL ? service_extra(svc, i, polled - t_free_c) : 0) + (extra != NULL ? extra[i] : 0);
        int64_t t2 = polled + cost + body + x;
        int64_t rland;
        if (per_piece) {
            rland = lane_plan(&rep, t2, rep_ser0, rep_tail0, rep_jit[j]);
            t_free_c = t2;
        } else {
            lane_plan(&rep, t2, rep_ser0, rep_tail0, rep_jit[2 * j]);
            t_free_c = t2 + fence;
            rland = lane_plan(&rep, t_free_c, rep_ser1, rep_tail1, rep_jit[2 * j + 1]);
        }
        issue[i] = t_issue;
        land_o[i] = land;
        reply_o[i] = t2;
        rland_o[i] = rland;
        seen_o[i] = (idle ? polled : ceil_grid(land, P, phase)) + cost;
        start_o[i] = t2 - body - x;
        if (publish_o != NULL)
            publish_o[i] = per_piece ? t2 : t2 + fence;
        else if (!per_piece) {
            rc = TWIN_DIRECT_ALIAS;
            break;
        }
        const int64_t armed = tin > last_have ? tin : last_have;
        t = rland > armed ? rland : armed;
        const int64_t th = ceil_div(t, cP) * cP + read;
        have[i % slots] = th;
        last_have = th;
        t_have[i] = th;
        if (!aur) {
            back = th;
        } else {
            int64_t a = th + reply_send;
            rx_free = (a > rx_free ? a : rx_free) + aur_ser;
            back = rx_free + aur_lat;
        }
        if (t_back != NULL)
            t_back[i] = back;
        else if (back != th) {
            rc = TWIN_DIRECT_ALIAS;
            break;
        }
        if (multi && scheduled < n) {
            const int64_t gap = gaps == NULL ? gap_ps : gaps[scheduled - 1];
            heap_push(heap, &heap_n, clk_at_or_after(&clock, back + gap), scheduled);
            scheduled++;
        }
    }
    (void)rep_per;
    st[S_I] = i;
    st[S_TS] = ts;
    st[S_BACK] = back;
    st[S_TX] = tx_free;
    st[S_RX] = rx_free;
    st[S_BRIDGE] = bridge_free;
    st[S_FREE_C] = t_free_c;
    st[S_LAST_HAVE] = last_have;
    st[S_REQ_FREE] = req.free;
    st[S_REQ_LAST] = req.last;
    st[S_REP_FREE] = rep.free;
    st[S_REP_LAST] = rep.last;
    st[S_SCHEDULED] = scheduled;
    st[S_HEAP_N] = heap_n;
    st[S_WRITES] += req.writes + rep.writes;
    return rc;
}

/* ---- SHA-256 (FIPS 180-4): the card's digest over every reply it reads --------------------------- */
#include <stdlib.h>

typedef struct { uint32_t h[8]; uint8_t buf[64]; uint64_t len; uint32_t used; } sha256_t;

static const uint32_t SHA_K[64] = {
    0x428a2f98u,0x71374491u,0xb5c0fbcfu,0xe9b5dba5u,0x3956c25bu,0x59f111f1u,0x923f82a4u,0xab1c5ed5u,
    0xd807aa98u,0x12835b01u,0x243185beu,0x550c7dc3u,0x72be5d74u,0x80deb1feu,0x9bdc06a7u,0xc19bf174u,
    0xe49b69c1u,0xefbe4786u,0x0fc19dc6u,0x240ca1ccu,0x2de92c6fu,0x4a7484aau,0x5cb0a9dcu,0x76f988dau,
    0x983e5152u,0xa831c66du,0xb00327c8u,0xbf597fc7u,0xc6e00bf3u,0xd5a79147u,0x06ca6351u,0x14292967u,
    0x27b70a85u,0x2e1b2138u,0x4d2c6dfcu,0x53380d13u,0x650a7354u,0x766a0abbu,0x81c2c92eu,0x92722c85u,
    0xa2bfe8a1u,0xa81a664bu,0xc24b8b70u,0xc76c51a3u,0xd192e819u,0xd6990624u,0xf40e3585u,0x106aa070u,
    0x19a4c116u,0x1e376c08u,0x2748774cu,0x34b0bcb5u,0x391c0cb3u,0x4ed8aa4au,0x5b9cca4fu,0x682e6ff3u,
    0x748f82eeu,0x78a5636fu,0x84c87814u,0x8cc70208u,0x90befffau,0xa4506cebu,0xbef9a3f7u,0xc67178f2u};

static void sha_init(sha256_t *c)
{
    static const uint32_t H0[8] = {0x6a09e667u,0xbb67ae85u,0x3c6ef372u,0xa54ff53au,
                                   0x510e527fu,0x9b05688cu,0x1f83d9abu,0x5be0cd19u};
    memcpy(c->h, H0, sizeof H0);
    c->len = 0;
    c->used = 0;
}

#define ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))
static void sha_block(sha256_t *c, const uint8_t *b)
{
    uint32_t w[64], a, bb, cc, d, e, f, g, h;
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)b[4 * i] << 24 | (uint32_t)b[4 * i + 1] << 16 | (uint32_t)b[4 * i + 2] << 8 | b[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = ROR(w[i - 15], 7) ^ ROR(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = ROR(w[i - 2], 17) ^ ROR(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    a = c->h[0]; bb = c->h[1]; cc = c->h[2]; d = c->h[3]; e = c->h[4]; f = c->h[5]; g = c->h[6]; h = c->h[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = h + (ROR(e, 6) ^ ROR(e, 11) ^ ROR(e, 25)) + ((e & f) ^ (~e & g)) + SHA_K[i] + w[i];
        uint32_t t2 = (ROR(a, 2) ^ ROR(a, 13) ^ ROR(a, 22)) + ((a & bb) ^ (a & cc) ^ (bb & cc));
        h = g; g = f; f = e; e = d + t1; d = cc; cc = bb; bb = a; a = t1 + t2;
    }
    c->h[0] += a; c->h[1] += bb; c->h[2] += cc; c->h[3] += d; c->h[4] += e; c->h[5] += f; c->h[6] += g; c->h[7] += h;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
/* The same compression with the x86 SHA extensions (SHA-NI), where the processor has them (checked once
   with cpuid: leaf 7 EBX bit 29, leaf 1 ECX bits 9 and 19 for SSSE3 and SSE4.1). */
#include <cpuid.h>
#include <immintrin.h>

__attribute__((target("sha,sse4.1,ssse3"))) static void sha_block_ni(uint32_t state[8], const uint8_t *data)
{
    const __m128i MASK = _mm_set_epi64x(0x0c0d0e0f08090a0bULL, 0x0405060700010203ULL);
    __m128i tmp = _mm_loadu_si128((const __m128i *)&state[0]);
    __m128i s1 = _mm_loadu_si128((const __m128i *)&state[4]);
    tmp = _mm_shuffle_epi32(tmp, 0xB1);          /* CDAB */
    s1 = _mm_shuffle_epi32(s1, 0x1B);            /* EFGH */
    __m128i s0 = _mm_alignr_epi8(tmp, s1, 8);    /* ABEF */
    s1 = _mm_blend_epi16(s1, tmp, 0xF0);         /* CDGH */
    const __m128i abef = s0, cdgh = s1;
    __m128i m[4];
    for (int g = 0; g < 16; g++) {
        __m128i w;
        if (g < 4) {
            w = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(data + 16 * g)), MASK);
        } else {
            w = _mm_sha256msg1_epu32(m[g & 3], m[(g + 1) & 3]);
            w = _mm_add_epi32(w, _mm_alignr_epi8(m[(g + 3) & 3], m[(g + 2) & 3], 4));
            w = _mm_sha256msg2_epu32(w, m[(g + 3) & 3]);
        }
        m[g & 3] = w;
        __m128i msg = _mm_add_epi32(w, _mm_loadu_si128((const __m128i *)&SHA_K[4 * g]));
        s1 = _mm_sha256rnds2_epu32(s1, s0, msg);
        msg = _mm_shuffle_epi32(msg, 0x0E);
        s0 = _mm_sha256rnds2_epu32(s0, s1, msg);
    }
    s0 = _mm_add_epi32(s0, abef);
    s1 = _mm_add_epi32(s1, cdgh);
    tmp = _mm_shuffle_epi32(s0, 0x1B);           /* FEBA */
    s1 = _mm_shuffle_epi32(s1, 0xB1);            /* DCHG */
    s0 = _mm_blend_epi16(tmp, s1, 0xF0);         /* DCBA */
    s1 = _mm_alignr_epi8(s1, tmp, 8);            /* HGFE */
    _mm_storeu_si128((__m128i *)&state[0], s0);
    _mm_storeu_si128((__m128i *)&state[4], s1);
}

static int sha_ni(void)
{
    static int have = -1;
    if (have < 0) {
        unsigned a, b, c, d;
        have = __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b >> 29 & 1) && __get_cpuid(1, &a, &b, &c, &d) &&
               (c >> 9 & 1) && (c >> 19 & 1);
    }
    return have;
}
#define SHA_BLOCK(c, b) (sha_ni() ? sha_block_ni((c)->h, (b)) : sha_block((c), (b)))
#else
#define SHA_BLOCK(c, b) sha_block((c), (b))
#endif

static void sha_update(sha256_t *c, const uint8_t *p, uint64_t n)
{
    c->len += n;
    if (c->used) { /* complete the buffered block first */
        uint32_t take = 64 - c->used;
        if (take > n)
            take = (uint32_t)n;
        memcpy(c->buf + c->used, p, take);
        c->used += take;
        p += take;
        n -= take;
        if (c->used < 64)
            return;
        SHA_BLOCK(c, c->buf);
        c->used = 0;
    }
    for (; n >= 64; p += 64, n -= 64) /* whole blocks straight from the input */
        SHA_BLOCK(c, p);
    if (n) {
        memcpy(c->buf, p, n);
        c->used = (uint32_t)n;
    }
}

static void sha_final(const sha256_t *in, uint8_t out[32])
{
    sha256_t c = *in;
    uint64_t bits = c.len * 8;
    uint8_t pad = 0x80, z = 0, lenb[8];
    sha_update(&c, &pad, 1);
    while (c.used != 56)
        sha_update(&c, &z, 1);
    for (int i = 0; i < 8; i++)
        lenb[i] = (uint8_t)(bits >> (56 - 8 * i));
    sha_update(&c, lenb, 8);
    for (int i = 0; i < 8; i++) {
        out[4 * i] = (uint8_t)(c.h[i] >> 24);
        out[4 * i + 1] = (uint8_t)(c.h[i] >> 16);
        out[4 * i + 2] = (uint8_t)(c.h[i] >> 8);
        out[4 * i + 3] = (uint8_t)c.h[i];
    }
}

/* ---- the event core: twin/engine/event.py's run_topology for the sim models ---------------------

   One timeline of events keyed (instant, order scheduled): a binary heap, so a flow that does not
   interact with the others costs the same per round whatever the mesh size. Every event of the
   simpy reference is one event here, scheduled at the same instant in the same order (so
   "events" counts alike and equal instants break ties alike): a send, the card taking a request
   (bridge), the engine's posted writes, every landing (bytes copied into the destination region,
   its poller told), a poller's hit (poll instant + cost), the consumer posting its reply, re-arming,
   the card reading a reply out (checked byte for byte against the function's reference, hashed), the
   reply back at the generator. Nodes: the sim consumer (one serving thread per node shared by its
   queues, first come first served), the sim link card (bridge shared by its queue pairs, slots,
   backlog in arrival order, reply poller in issue order), lanes shared by the flows over one link direction,
   and the two-stage consumer (twin.devices.handoff, FP_HO): stage 1 hands each request over its own lane into a
   queue in the serving device's memory (E_HANDOFF, E_LAND_HO_*), stage 2 polls it on its own grid and thread
   and replies on the flow's reply path (E_HFIRE, E_HARM).
   What it does not compute, twin/engine/features.py refuses before it runs.

   The function a consumer runs is the echo (FP_FN 0: the reply is the request's payload) or one of the runtime
   library's C functions (twin/runtime/c/qrt_functions.c, compiled into the core beside this file: the code the
   `code` model's endpoint dispatches to, not a copy), called through its address (FP_FN) on the payload as it
   arrived; the card's reference is the same function on the payload it sent. */

/* a runtime library function (qrt.h's qrt_fn): reply length, or < 0 when it fails */
typedef int32_t (*core_fn_t)(const uint8_t *in, uint32_t in_len, uint8_t *out, uint32_t out_cap);

/* Exact division of n >= 0 by a divisor d >= 1 fixed for the run, by one multiply and one correction
   (m = floor((2^64 - 1) / d): for n < 2^64, floor(n m / 2^64) is n / d or one less): the event core's
   grids, clocks and slots divide a few dozen times a round, and a hardware divide costs tens of cycles. */
typedef struct { uint64_t d, m; } udiv_t;

static inline udiv_t udiv_of(int64_t d) { return (udiv_t){(uint64_t)d, d > 0 ? UINT64_MAX / (uint64_t)d : 0}; }
static inline uint64_t udiv(udiv_t v, uint64_t n)
{
    uint64_t q = (uint64_t)(((unsigned __int128)n * v.m) >> 64);
    return n - q * v.d >= v.d ? q + 1 : q;
}
/* ceil_grid(t, v.d, phase): the first instant phase + k v.d at or after t */
static inline int64_t grid_up(int64_t t, udiv_t v, int64_t phase)
{
    if (t < phase)
        return phase - (int64_t)(udiv(v, (uint64_t)(phase - t)) * v.d);
    uint64_t u = (uint64_t)(t - phase), k = udiv(v, u);
    return phase + (int64_t)((k * v.d < u ? k + 1 : k) * v.d);
}

/* a poller; win: its blackout windows (start, end) sorted, nwin of them (twin.kernel.Poller's blackouts: a
   stalled consumer, a frozen host), or none */
typedef struct {
    int64_t period, phase, cost, armed, pending, armed_at, polls, hits, seq;
    const int64_t *win;
    int64_t nwin;
    udiv_t div; /* period's divisor */
} poller_t;

/* the faults (twin.faults.FaultPlan), the flow's parameters FP_TIMEOUT .. FP_NSTALLS, and a round's record by
   column (FO_*): core_interface.h */

typedef struct { int64_t free, served, busy; } thread_t;

typedef struct {
    const int64_t *p;
    int64_t *col[FO_COUNT]; /* the record's columns (n int64 each) */
    const int64_t *gaps; /* every round's gap, or NULL */
    clk_t clock;
    udiv_t slots, card_clk, clk_period; /* the divisors of slot_base, the card's clock and the generator's clock */
    uint8_t *reqmem, *repmem, *cstage, *pstage;
    int64_t sent, received, scheduled;              /* generator */
    int64_t issued, read, watching, backlog_max, mismatches, corrupted; /* card: requests issued, replies read */
    int64_t *backq, bhead, blen, bcap; /* the card's backlog: (round, ready instant) pairs in arrival order, a ring */
    int64_t *outq, ohead, olen;        /* its outstanding rounds in issue order: a ring of FP_SLOTS */
    uint8_t *replied;                  /* per round: its reply read (a flow with a reply timeout), else NULL */
    int64_t dropped, resent, timeouts;                /* faults */
    int64_t next_seq;                                 /* consumer */
    poller_t cpoll, kpoll;
    sha256_t digest;
    /* a hand-off to a second device (FP_HO; twin.devices.handoff): its queue in the serving device's memory and
       the first stage's stage of it, the serving stage's poller and thread (its own), its record by column */
    uint8_t *hmem, *hstage;
    poller_t hpoll;
    thread_t hthread;
    int64_t h_next_seq;
    int64_t *hcol[HO_COUNT];
} flow_t;

/* an event: instant, order scheduled, type (8 bits) and flow (24 bits), one argument (a sequence number) */
typedef struct { int64_t t, eid; uint32_t tf, a; } ev_t;

enum { E_SEND_NEXT, E_SEND_OPEN, E_SUBMIT, E_WRITE, E_LAND_REQ_ALL, E_LAND_REQ_DATA, E_LAND_REQ_WORD, E_LAND_REP_ALL,
       E_LAND_REP_DATA, E_LAND_REP_WORD, E_CFIRE, E_KFIRE, E_HAVE, E_POST_ALL, E_POST_DATA, E_POST_WORD, E_ARM, E_BACK,
       E_RESEND, E_OVERDUE, E_HANDOFF, E_LAND_HO_ALL, E_LAND_HO_DATA, E_LAND_HO_WORD, E_HFIRE, E_HARM };
/* a landing's bytes in the slot of message seq with payload len: per-piece all pieces, classic the header fields
   and payload from byte 4, or the sequence word */
static inline void land_range(int kind, int64_t base, int64_t len, int64_t *off, int64_t *n)
{
    *off = kind == 1 ? base + 4 : base;
    *n = kind == 0 ? 16 * (1 + (len + 11) / 12) : kind == 1 ? 12 + len : 4;
}

typedef struct {
    int64_t nflows, nlanes, nthreads, nbridges;
    flow_t *f;
    lane_t *lanes;
    const int64_t **ljit;
    int64_t *ljit_i, *lbytes;
    thread_t *threads;
    int64_t *bridges;
    ev_t *heap;
    int64_t hn, hcap, eid, now, events, counter;
    int hole; /* a step is running and its event is still the heap's root */
    int64_t off_flow, off_seq; /* a function's reply not of its planned length (FP_REP_LEN): flow, round (0: none) */
    int oom;                   /* a card's backlog could not grow */
} world_t;

/* an event's place in the order as one unsigned 128-bit number: the instant (sign bit flipped, so that signed
   order is unsigned order) above the order scheduled */
static inline unsigned __int128 ev_key(const ev_t *e)
{
    return (unsigned __int128)((uint64_t)e->t ^ (1ull << 63)) << 64 | (uint64_t)e->eid;
}

/* Place e into the 4-ary heap h[0..n) whose root slot is free: down from the root, the least child up (the
   least of up to four children found on keys kept in registers) */
static inline void sift_down(ev_t *h, int64_t n, ev_t e)
{
    const unsigned __int128 ke = ev_key(&e);
    int64_t i = 0;
    for (;;) {
        int64_t c = 4 * i + 1, m = c;
        if (c >= n)
            break;
        int64_t end = c + 4 < n ? c + 4 : n;
        unsigned __int128 km = ev_key(&h[c]);
        for (int64_t k = c + 1; k < end; k++) {
            unsigned __int128 kk = ev_key(&h[k]);
            int lt = kk < km;
            m = lt ? k : m;
            km = lt ? kk : km;
        }
        if (!(km < ke))
            break;
        h[i] = h[m];
        i = m;
    }
    h[i] = e;
}

/* Schedule an event. While a step runs, the event it took is still the heap's root (w->hole): the step's first
   new event replaces it (one walk down instead of a removal and an insertion); the heap's order is the same. */
static inline __attribute__((always_inline)) void push(world_t *w, int64_t t, int type, int64_t flow, int64_t a)
{
    ev_t e = {t, w->eid++, (uint32_t)type << 24 | (uint32_t)flow, (uint32_t)a};
    w->events++;
    if (w->hole) {
        w->hole = 0;
        sift_down(w->heap, w->hn, e);
        return;
    }
    if (w->hn == w->hcap) {
        w->hcap *= 2;
        w->heap = realloc(w->heap, (size_t)w->hcap * sizeof(ev_t));
    }
    ev_t *h = w->heap;
    int64_t i = w->hn++;
    while (i > 0) { /* a 4-ary heap: parent (i - 1) / 4 */
        int64_t up = (i - 1) >> 2;
        if (!(ev_key(&e) < ev_key(&h[up])))
            break;
        h[i] = h[up];
        i = up;
    }
    h[i] = e;
}

/* The next event: the root, left in place as the hole a step's first push fills (end_step removes it if none) */
static inline ev_t take(world_t *w)
{
    w->hole = 1;
    return w->heap[0];
}

static inline void end_step(world_t *w)
{
    if (w->hole) {
        w->hole = 0;
        ev_t *h = w->heap;
        ev_t last = h[--w->hn];
        if (w->hn)
            sift_down(h, w->hn, last);
    }
}

static inline int64_t plan_lane(world_t *w, int64_t lane, int64_t t, int64_t ser, int64_t tail, int64_t nbytes)
{
    const int64_t *j = w->ljit[lane];
    int64_t jit = j ? j[w->ljit_i[lane]++] : 0;
    w->lbytes[lane] += nbytes;
    return lane_plan(&w->lanes[lane], t, ser, tail, jit);
}

static inline uint32_t rd32(const uint8_t *b) { uint32_t v; memcpy(&v, b, 4); return v; }
static inline uint16_t rd16(const uint8_t *b) { uint16_t v; memcpy(&v, b, 2); return v; }
static inline void wr32(uint8_t *b, uint32_t v) { memcpy(b, &v, 4); }
static inline void wr16(uint8_t *b, uint16_t v) { memcpy(b, &v, 2); }

/* the record's column col of round seq */
#define OUT(f, c, seq) ((f)->col[c][(seq) - 1])

static inline int64_t slot_base(const flow_t *f, int64_t seq)
{
    uint64_t n = (uint64_t)(seq - 1); /* seq >= 1 */
    return (int64_t)(n - udiv(f->slots, n) * f->slots.d) * f->p[FP_SLOT_BYTES];
}

/* twin.exchange.encoding.Encoding.ready: the message seq is complete in the slot at base */
static int msg_ready(const flow_t *f, const uint8_t *mem, int64_t base, int64_t seq)
{
    if (rd32(mem + base) != (uint32_t)seq)
        return 0;
    if (!f->p[FP_PER_PIECE])
        return 1;
    int64_t len = rd16(mem + base + 6), k = 1 + (len + 11) / 12;
    if (k * 16 > f->p[FP_SLOT_BYTES])
        return 0;
    for (int64_t i = 1; i < k; i++)
        if (rd32(mem + base + 16 * i) != (uint32_t)seq)
            return 0;
    return 1;
}

/* twin.devices.generator.payload_for: the mixed counter word of round seq, repeated (syndrome bits kept) */
static void payload_for(const flow_t *f, int64_t seq, uint8_t *out)
{
    const int64_t n = f->p[FP_FRAME], bits = f->p[FP_SYN_BITS];
    uint64_t word = (uint64_t)seq * 0x9E3779B97F4A7C15ull ^ (uint64_t)f->p[FP_SALT];
    int64_t i = 0;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    for (; i + 8 <= n; i += 8) /* the word's little-endian bytes, eight at a time */
        memcpy(out + i, &word, 8);
#endif
    for (; i < n; i++)
        out[i] = (uint8_t)(word >> (8 * (i % 8)));
    if (bits) {
        int64_t full = bits / 8, rest = bits % 8;
        if (full < n) {
            out[full] &= (uint8_t)((1u << rest) - 1u);
            memset(out + full + 1, 0, (size_t)(n - full - 1));
        }
    }
}

/* twin.exchange.encoding.Encoding.writes: the slot image of message seq at stage + base; the writes are
   classic [4, 16 + len) then [0, 4); per-piece [0, 16 * pieces) */
static void encode(const flow_t *f, uint8_t *stage, int64_t base, int64_t seq, const uint8_t *payload, int64_t len,
                   int64_t function, int64_t flags)
{
    uint8_t *s = stage + base;
    wr32(s, (uint32_t)seq);
    wr16(s + 4, (uint16_t)function);
    wr16(s + 6, (uint16_t)len);
    wr32(s + 8, (uint32_t)flags);
    wr32(s + 12, 0);
    if (!f->p[FP_PER_PIECE]) {
        memcpy(s + 16, payload, (size_t)len);
        return;
    }
    int64_t i = 0, k = 1;
    for (; i + 12 <= len; i += 12, k++) { /* whole pieces: fixed-size moves, no call */
        wr32(s + 16 * k, (uint32_t)seq);
        memcpy(s + 16 * k + 4, payload + i, 12);
    }
    if (i < len) { /* the last piece's take = len - i < 12 bytes, zero-padded */
        const int64_t take = len - i;
        wr32(s + 16 * k, (uint32_t)seq);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        /* twelve bytes read (payload has room: the scratch regions are longer than a message), those past take
           masked off */
        uint64_t lo;
        uint32_t hi;
        memcpy(&lo, payload + i, 8);
        memcpy(&hi, payload + i + 8, 4);
        if (take < 8) {
            lo &= (1ull << (8 * take)) - 1u;
            hi = 0;
        } else {
            hi &= (uint32_t)((1ull << (8 * (take - 8))) - 1u);
        }
        memcpy(s + 16 * k + 4, &lo, 8);
        memcpy(s + 16 * k + 12, &hi, 4);
#else
        memset(s + 16 * k + 4, 0, 12);
        for (int64_t j = 0; j < take; j++)
            s[16 * k + 4 + j] = payload[i + j];
#endif
    }
}

/* twin.exchange.encoding.Encoding.payload: the payload of the slot at base (its length from the header) */
static int64_t decode(const flow_t *f, const uint8_t *mem, int64_t base, uint8_t *out)
{
    int64_t len = rd16(mem + base + 6);
    if (!f->p[FP_PER_PIECE]) {
        memcpy(out, mem + base + 16, (size_t)len);
        return len;
    }
    const uint8_t *m = mem + base;
    int64_t i = 0, k = 1;
    for (; i < len; i += 12, k++) /* twelve bytes a piece; out has room past len for the last piece's */
        memcpy(out + i, m + 16 * k + 4, 12);
    return len;
}

/* Poller.first_poll: the first poll instant at or after t outside the blackouts (each window in order: an
   instant in it moves to the first grid instant at or after its end) */
#if defined(__GNUC__) || defined(__clang__)
__attribute__((noinline))
#endif
static int64_t blackout_skip(const poller_t *q, int64_t t)
{
    for (int64_t i = 0; i < q->nwin; i++)
        if (q->win[2 * i] <= t && t < q->win[2 * i + 1])
            t = ceil_grid(q->win[2 * i + 1], q->period, q->phase);
    return t;
}

static inline int64_t first_poll(const poller_t *q, int64_t t)
{
    int64_t g = grid_up(t, q->div, q->phase);
    return q->nwin ? blackout_skip(q, g) : g;
}

static void poller_schedule(world_t *w, poller_t *q, int type, int64_t flow)
{
    q->pending = 1;
    int64_t t_poll = first_poll(q, w->now);
    q->polls += (int64_t)udiv(q->div, (uint64_t)(t_poll - q->armed_at)) + 1; /* t_poll >= armed_at: both polls, in order */
    push(w, t_poll + q->cost, type, flow, 0);
}

static void poller_arm(world_t *w, poller_t *q, int type, int64_t flow, const uint8_t *mem, int64_t seq)
{
    flow_t *f = &w->f[flow];
    q->armed = 1;
    q->seq = seq;
    q->armed_at = first_poll(q, w->now);
    if (msg_ready(f, mem, slot_base(f, seq), seq))
        poller_schedule(w, q, type, flow);
}

static void poller_landed(world_t *w, poller_t *q, int type, int64_t flow, const uint8_t *mem)
{
    flow_t *f = &w->f[flow];
    if (q->armed && !q->pending && msg_ready(f, mem, slot_base(f, q->seq), q->seq))
        poller_schedule(w, q, type, flow);
}

/* LinkCard._watch: the reply poller armed for the oldest outstanding request (in issue order) */
static void card_watch(world_t *w, int64_t fi)
{
    flow_t *f = &w->f[fi];
    f->watching = 1;
    poller_arm(w, &f->kpoll, E_KFIRE, fi, f->repmem, f->outq[f->ohead]);
}

/* The card's backlog (LinkCard._backlog, a deque in arrival order: a dropped frame's resend may arrive after
   later rounds): append round seq, ready at `ready`; the ring doubles when full. Returns 0 when out of memory. */
static int back_push(flow_t *f, int64_t seq, int64_t ready)
{
    if (f->blen == f->bcap) {
        int64_t cap = 2 * f->bcap, *q = malloc((size_t)cap * 2 * sizeof(int64_t));
        if (!q)
            return 0;
        for (int64_t k = 0; k < f->blen; k++) {
            int64_t j = (f->bhead + k) % f->bcap;
            q[2 * k] = f->backq[2 * j];
            q[2 * k + 1] = f->backq[2 * j + 1];
        }
        free(f->backq);
        f->backq = q;
        f->bhead = 0;
        f->bcap = cap;
    }
    int64_t i = f->bhead + f->blen;
    i = i >= f->bcap ? i - f->bcap : i;
    f->backq[2 * i] = seq;
    f->backq[2 * i + 1] = ready;
    f->blen++;
    return 1;
}

/* ---- faults (twin.faults.FaultPlan, as the simpy reference injects them): kept out of the hot path (a flow
   without faults pays one test per hook) */
#if defined(__GNUC__) || defined(__clang__)
#define FAULT_PATH __attribute__((cold, noinline))
#else
#define FAULT_PATH
#endif

static inline int fault_round(const flow_t *f, int64_t seq, int flag)
{
    const uint8_t *fr = (const uint8_t *)(intptr_t)f->p[FP_FAULT_ROUNDS];
    return fr != NULL && (fr[seq - 1] & flag);
}

/* FaultPlan.tamper: a corrupt round on `path` (1 request, 2 reply) flips all bits of the first payload byte of
   the message staged at stage + base (slot offset 16 classic, 20 per-piece: piece 1's first data byte), which
   then moves through the posted writes; a message without payload is left alone, as are sequence words */
FAULT_PATH static void fault_flip(const flow_t *f, uint8_t *stage, int64_t base, int64_t seq, int64_t path,
                                  int64_t len)
{
    if (f->p[FP_CORRUPT_PATH] == path && len > 0 && fault_round(f, seq, FAULT_CORRUPT))
        stage[base + (f->p[FP_PER_PIECE] ? 20 : 16)] ^= 0xFF;
}

static inline void fault_tamper(const flow_t *f, uint8_t *stage, int64_t base, int64_t seq, int64_t path,
                                int64_t len)
{
    if (f->p[FP_FAULT_ROUNDS])
        fault_flip(f, stage, base, seq, path, len);
}

/* LinkCard._issue with a timeout: the check, timeout after the request is issued, that its reply is in */
static inline void fault_watch_reply(world_t *w, int64_t fi, int64_t seq, int64_t t_issue)
{
    if (w->f[fi].p[FP_TIMEOUT])
        push(w, t_issue + w->f[fi].p[FP_TIMEOUT], E_OVERDUE, fi, seq);
}

/* _FlowRun.send of a drop round: the frame is lost on the link (no lane is used); the control side sends it
   again after its timeout (E_RESEND). Returns whether round seq was dropped. */
FAULT_PATH static int fault_lose(world_t *w, int64_t fi, int64_t seq)
{
    flow_t *f = &w->f[fi];
    if (!fault_round(f, seq, FAULT_DROP))
        return 0;
    f->dropped++;
    push(w, w->now + f->p[FP_TIMEOUT], E_RESEND, fi, seq);
    return 1;
}

static inline int fault_drop(world_t *w, int64_t fi, int64_t seq)
{
    return w->f[fi].p[FP_FAULT_ROUNDS] && fault_lose(w, fi, seq);
}

/* LinkCard._issue: request seq, ready at `ready`, goes out at once or when ready; its slot wait is recorded in
   issue order (LinkCard.slot_wait_ps) */
static void card_issue(world_t *w, int64_t fi, int64_t seq, int64_t ready)
{
    flow_t *f = &w->f[fi];
    int64_t t_issue = w->now > ready ? w->now : ready, o = f->ohead + f->olen++;
    f->col[FO_SLOT_WAIT][f->issued++] = t_issue - ready;
    f->outq[o >= f->p[FP_SLOTS] ? o - f->p[FP_SLOTS] : o] = seq;
    push(w, t_issue, E_WRITE, fi, seq);
    fault_watch_reply(w, fi, seq, t_issue);
    if (!f->watching)
        card_watch(w, fi);
}

/* clk_at_or_after(&f->clock, t), by the flow's divisor when the clock has no ppb offset */
static inline int64_t clock_up(const flow_t *f, int64_t t)
{
    const clk_t *c = &f->clock;
    if (c->ppb != 0 || t <= c->phase)
        return clk_at_or_after(c, t);
    return grid_up(t, f->clk_period, c->phase);
}

/* _FlowRun.deliver: the frame crosses the link (if any) and enters the card at its next clock edge */
static void deliver(world_t *w, int64_t fi, int64_t seq)
{
    const int64_t *p = w->f[fi].p;
    int64_t arrive = w->now;
    if (p[FP_LUP] >= 0)
        arrive = plan_lane(w, p[FP_LUP], w->now, p[FP_UP_SER], p[FP_UP_TAIL], p[FP_FRAME]);
    push(w, grid_up(arrive, w->f[fi].card_clk, 0), E_SUBMIT, fi, seq);
}

static void send_next(world_t *w, int64_t fi)
{
    flow_t *f = &w->f[fi];
    int64_t seq = ++f->sent;
    OUT(f, FO_T_SEND, seq) = w->now;
    if (!fault_drop(w, fi, seq))
        deliver(w, fi, seq);
}

/* A message's posted writes of round seq from `now` on lane `lane` (Encoding.writes of a frame-long payload, one
   PostedWritePath.write each): per-piece one burst, classic the header and payload, then the sequence word;
   ser and tail: the two writes' serialisation and tail (ps). Each landing is the event land_ev + its kind
   (land_range's: all, data, word). Returns the last landing. */
static inline int64_t post_message(world_t *w, int64_t fi, int64_t seq, int64_t lane, const int64_t *ser,
                                   const int64_t *tail, int land_ev)
{
    const int64_t *p = w->f[fi].p;
    int64_t land;
    if (p[FP_PER_PIECE]) {
        land = plan_lane(w, lane, w->now, ser[0], tail[0], 16 * (1 + (p[FP_FRAME] + 11) / 12));
        push(w, land, land_ev, fi, seq);
    } else {
        land = plan_lane(w, lane, w->now, ser[0], tail[0], 12 + p[FP_FRAME]);
        push(w, land, land_ev + 1, fi, seq);
        land = plan_lane(w, lane, w->now, ser[1], tail[1], 4);
        push(w, land, land_ev + 2, fi, seq);
    }
    return land;
}

/* PollingConsumer._take: the thread th takes the request the poller q saw (now = poll + cost; landed at land,
   < 0 unknown) now, or at its first poll after it is free; *seen: the poll an idle thread would have seen it
   with. Returns the instant taken. */
static inline int64_t take_request(const world_t *w, const poller_t *q, const thread_t *th, int64_t land,
                                   int64_t *seen)
{
    const int64_t t = w->now, cost = q->cost;
    const int64_t at = th->free <= t - cost ? t : first_poll(q, th->free) + cost, s = first_poll(q, land) + cost;
    *seen = land < 0 ? t : (s < t ? s : t);
    return at;
}

/* step's scratch: three regions of SCRATCH bytes, each one message of the contract's largest length (and the
   8 bytes of the reply's hashed header before it) */
#define SCRATCH (65536 + 64)

/* A function's reply of another length than planned (FP_REP_LEN: the reply lane's writes, and so the timing,
   were planned for it), or a failure (< 0; the reference's status function_failed): noted, the run stops
   (twin_event_run returns -2) and the caller leaves the flow to the simpy reference. */
FAULT_PATH static void function_off(world_t *w, int64_t fi, int64_t seq)
{
    if (!w->off_seq) {
        w->off_flow = fi;
        w->off_seq = seq;
    }
}

/* FunctionAnswer.answer with a runtime library function: its reply to the payload in[0..len), into out (room
   for a contract message); *reply points at it. Returns the reply's length. */
static int64_t run_function(world_t *w, const flow_t *f, int64_t fi, int64_t seq, const uint8_t *in, int64_t len,
                            const uint8_t **reply, uint8_t *out)
{
    int32_t r = ((core_fn_t)(intptr_t)f->p[FP_FN])(in, (uint32_t)len, out, 65535u);
    *reply = out;
    if (r != f->p[FP_REP_LEN]) {
        function_off(w, fi, seq);
        return 0;
    }
    return r;
}

/* LinkCard.reference: the function on the payload sent (sent[0..frame)), into out; out. */
static const uint8_t *reference(world_t *w, const flow_t *f, int64_t fi, int64_t seq, const uint8_t *sent,
                                uint8_t *out)
{
    int32_t r = ((core_fn_t)(intptr_t)f->p[FP_FN])(sent, (uint32_t)f->p[FP_FRAME], out, 65535u);
    if (r != f->p[FP_REP_LEN])
        function_off(w, fi, seq);
    return out;
}

/* HostingPart.serve's reply and PollingConsumer._done: thread th (poll cost `cost`) took round seq out of the
   queue at mem at `at`; the function on its payload as it arrived, the reply staged and its writes posted from
   t2 (classic: the ready word after `fence`), the thread booked. Returns the instant the thread is free. */
static inline int64_t serve_reply(world_t *w, flow_t *f, int64_t fi, int64_t seq, const uint8_t *mem, int64_t at,
                                  int64_t t2, int64_t fence, int64_t cost, thread_t *th, uint8_t *scratch)
{
    const int64_t *p = f->p, base = slot_base(f, seq), function = rd16(mem + base + 4);
    int64_t len = decode(f, mem, base, scratch); /* the echo: the reply is the request's payload */
    const uint8_t *reply = scratch;
    if (p[FP_FN]) /* a runtime library function on the payload as it arrived */
        len = run_function(w, f, fi, seq, scratch, len, &reply, scratch + SCRATCH);
    encode(f, f->pstage, base, seq, reply, len, function, 0);
    fault_tamper(f, f->pstage, base, seq, PATH_REPLY, len);
    if (p[FP_PER_PIECE]) {
        push(w, t2, E_POST_ALL, fi, seq);
    } else {
        push(w, t2, E_POST_DATA, fi, seq);
        push(w, t2 + fence, E_POST_WORD, fi, seq);
    }
    const int64_t t_free = t2 + fence;
    th->busy += t_free - at + cost;
    th->free = t_free;
    th->served++;
    OUT(f, FO_REPLY, seq) = t2;
    OUT(f, FO_PUBLISH, seq) = t2 + fence;
    return t_free;
}

/* HandOff.serve: the first stage read and pre-processed round seq (taken by thread th at `at`) by t; it stages
   the request's bytes for the hand-off queue (the same encoding and slot) and posts them at t (E_HANDOFF); its
   thread is free at t. Returns t. */
static int64_t hand_off(world_t *w, flow_t *f, int64_t fi, int64_t seq, int64_t at, int64_t t, thread_t *th,
                        uint8_t *scratch)
{
    const int64_t base = slot_base(f, seq), len = decode(f, f->reqmem, base, scratch);
    encode(f, f->hstage, base, seq, scratch, len, rd16(f->reqmem + base + 4), 0);
    push(w, t, E_HANDOFF, fi, seq);
    f->hcol[HO_H_ISSUE][seq - 1] = t;
    th->busy += t - at + f->cpoll.cost;
    th->free = t;
    th->served++;
    return t;
}

static inline __attribute__((always_inline)) void step(world_t *w, uint8_t *scratch)
{
    ev_t e = take(w);
    w->now = e.t;
    const int64_t fi = e.tf & 0xFFFFFF;
    flow_t *f = &w->f[fi];
    const int64_t *p = f->p;
    switch (e.tf >> 24) {
    case E_SEND_NEXT:
        send_next(w, fi);
        break;
    case E_SEND_OPEN: {
        send_next(w, fi);
        if (f->sent < p[FP_N]) {
            int64_t j = e.a;
            int64_t t = p[FP_HAS_GAPS] ? clock_up(f, w->now + f->gaps[j])
                                       : clk_edge(&f->clock, (j + 1) * p[FP_PERIOD_CYCLES]);
            push(w, t, E_SEND_OPEN, fi, j + 1);
        }
        break;
    }
    case E_SUBMIT: { /* LinkCard.submit: the bridge (shared by the card's queue pairs), then issue or backlog */
        int64_t seq = e.a, *bfree = &w->bridges[p[FP_BRIDGE]];
        *bfree = (w->now > *bfree ? w->now : *bfree) + p[FP_BRIDGE_PS];
        int64_t ready = *bfree + p[FP_LAND_PS];
        OUT(f, FO_T_IN, seq) = w->now;
        if (f->blen == 0 && f->olen < p[FP_SLOTS]) {
            card_issue(w, fi, seq, ready);
        } else {
            if (!back_push(f, seq, ready))
                w->oom = 1;
            if (f->blen > f->backlog_max)
                f->backlog_max = f->blen;
        }
        break;
    }
    case E_WRITE: { /* the engine's posted writes of request seq into the consumer's request queue */
        int64_t seq = e.a, base = slot_base(f, seq), land;
        payload_for(f, seq, scratch);
        encode(f, f->cstage, base, seq, scratch, p[FP_FRAME], p[FP_FUNCTION], 0);
        fault_tamper(f, f->cstage, base, seq, PATH_REQUEST, p[FP_FRAME]);
        land = post_message(w, fi, seq, p[FP_LREQ], p + FP_REQ_SER0, p + FP_REQ_TAIL0, E_LAND_REQ_ALL);
        OUT(f, FO_ISSUE, seq) = w->now;
        OUT(f, FO_LAND, seq) = land;
        break;
    }
    case E_LAND_REQ_ALL:
    case E_LAND_REQ_DATA:
    case E_LAND_REQ_WORD: { /* the bytes come from the card's stage (unchanged until the slot is free again) */
        int64_t off, n;
        land_range((int)(e.tf >> 24) - E_LAND_REQ_ALL, slot_base(f, e.a), p[FP_FRAME], &off, &n);
        memcpy(f->reqmem + off, f->cstage + off, (size_t)n);
        poller_landed(w, &f->cpoll, E_CFIRE, fi, f->reqmem);
        break;
    }
    case E_LAND_REP_ALL:
    case E_LAND_REP_DATA:
    case E_LAND_REP_WORD: { /* from the consumer's stage (unchanged until the card has read the reply) */
        int64_t off, n, base = slot_base(f, e.a);
        land_range((int)(e.tf >> 24) - E_LAND_REP_ALL, base, rd16(f->pstage + base + 6), &off, &n);
        memcpy(f->repmem + off, f->pstage + off, (size_t)n);
        poller_landed(w, &f->kpoll, E_KFIRE, fi, f->repmem);
        break;
    }
    case E_CFIRE: { /* PollingConsumer._take and _seen: the thread takes it now or after its current request */
        poller_t *q = &f->cpoll;
        int64_t seq = q->seq, seen, t_free;
        q->armed = q->pending = 0;
        q->hits++;
        thread_t *th = &w->threads[p[FP_THREAD]];
        int64_t at = take_request(w, q, th, OUT(f, FO_LAND, seq), &seen);
        OUT(f, FO_SEEN, seq) = seen;
        OUT(f, FO_START, seq) = at;
        int64_t t2 = at + p[FP_BODY];
        if (p[FP_HO]) { /* a first stage: it hands the request to the serving device */
            t_free = hand_off(w, f, fi, seq, at, t2, th, scratch);
        } else {
            if (p[FP_SVC]) /* its service varies: idle cost, modes, host runtime (th->free: before this request) */
                t2 += service_extra((const int64_t *)(intptr_t)p[FP_SVC], seq - 1, at - p[FP_COST] - th->free);
            t_free = serve_reply(w, f, fi, seq, f->reqmem, at, t2, p[FP_PER_PIECE] ? 0 : p[FP_FENCE], p[FP_COST], th,
                                 scratch);
        }
        f->next_seq = seq + 1;
        push(w, t_free > w->now ? t_free : w->now, E_ARM, fi, 0);
        break;
    }
    case E_HANDOFF: /* HandOff._hand_off: the request's writes into the hand-off queue, over the hand-off's lane */
        f->hcol[HO_H_LAND][e.a - 1] = post_message(w, fi, e.a, p[FP_HO_LANE], p + FP_HO_SER0, p + FP_HO_TAIL0,
                                                   E_LAND_HO_ALL);
        break;
    case E_LAND_HO_ALL:
    case E_LAND_HO_DATA:
    case E_LAND_HO_WORD: { /* from the first stage's stage (unchanged until the card has read the reply) */
        int64_t off, n;
        land_range((int)(e.tf >> 24) - E_LAND_HO_ALL, slot_base(f, e.a), p[FP_FRAME], &off, &n);
        memcpy(f->hmem + off, f->hstage + off, (size_t)n);
        poller_landed(w, &f->hpoll, E_HFIRE, fi, f->hmem);
        break;
    }
    case E_HFIRE: { /* the serving stage's PollingConsumer._take: its own thread, the flow's reply path */
        poller_t *q = &f->hpoll;
        int64_t seq = q->seq, seen;
        q->armed = q->pending = 0;
        q->hits++;
        int64_t at = take_request(w, q, &f->hthread, f->hcol[HO_H_LAND][seq - 1], &seen);
        f->hcol[HO_H_SEEN][seq - 1] = seen;
        f->hcol[HO_H_START][seq - 1] = at;
        int64_t t_free = serve_reply(w, f, fi, seq, f->hmem, at, at + p[FP_HO_BODY],
                                     p[FP_PER_PIECE] ? 0 : p[FP_HO_FENCE], q->cost, &f->hthread, scratch);
        f->h_next_seq = seq + 1;
        push(w, t_free > w->now ? t_free : w->now, E_HARM, fi, 0);
        break;
    }
    case E_HARM:
        poller_arm(w, &f->hpoll, E_HFIRE, fi, f->hmem, f->h_next_seq);
        break;
    case E_POST_ALL:
    case E_POST_DATA:
    case E_POST_WORD: { /* the consumer's reply writes: per-piece one burst; classic data, then the ready word */
        int kind = (int)(e.tf >> 24) - E_POST_ALL;
        int64_t seq = e.a, base = slot_base(f, seq), off, n, land;
        land_range(kind, base, rd16(f->pstage + base + 6), &off, &n);
        land = plan_lane(w, p[FP_LREP], w->now, kind == 2 ? p[FP_REP_SER1] : p[FP_REP_SER0],
                         kind == 2 ? p[FP_REP_TAIL1] : p[FP_REP_TAIL0], n);
        push(w, land, E_LAND_REP_ALL + kind, fi, seq);
        OUT(f, FO_RLAND, seq) = land;
        break;
    }
    case E_ARM:
        poller_arm(w, &f->cpoll, E_CFIRE, fi, f->reqmem, f->next_seq);
        break;
    case E_KFIRE: {
        poller_t *q = &f->kpoll;
        q->armed = q->pending = 0;
        q->hits++;
        push(w, w->now + p[FP_READ], E_HAVE, fi, q->seq);
        break;
    }
    case E_HAVE: { /* LinkCard._have: read the reply out, check it against the function's reference, free the slot */
        int64_t seq = e.a, base = slot_base(f, seq);
        uint8_t *hdr = scratch, *got = scratch + 8, *want = scratch + SCRATCH; /* hashed: hdr then got, one run */
        int64_t len = decode(f, f->repmem, base, got);
        uint32_t hseq = rd32(f->repmem + base), flags = rd32(f->repmem + base + 8);
        payload_for(f, seq, want);
        const uint8_t *ref = want;
        if (p[FP_FN]) /* the reference: the function on the payload sent (region 2 until a mismatch needs it) */
            ref = reference(w, f, fi, seq, want, scratch + 2 * SCRATCH);
        int ok = len == p[FP_REP_LEN] && flags == 0 && memcmp(got, ref, (size_t)len) == 0;
        wr32(hdr, hseq);
        wr32(hdr + 4, flags);
        sha_update(&f->digest, hdr, 8 + (uint64_t)len);
        f->read++;
        f->ohead = f->ohead + 1 == p[FP_SLOTS] ? 0 : f->ohead + 1; /* seq was the oldest outstanding */
        f->olen--;
        if (f->replied)
            f->replied[seq - 1] = 1;
        if (!ok) {
            f->mismatches++;
            uint8_t *sent = scratch + 2 * SCRATCH;
            int64_t n = decode(f, f->reqmem, base, sent);
            if (n != p[FP_FRAME] || memcmp(sent, want, (size_t)n) != 0)
                f->corrupted++;
        }
        f->watching = 0;
        while (f->blen && f->olen < p[FP_SLOTS]) { /* the backlog in arrival order, while slots are free */
            const int64_t *b = f->backq + 2 * f->bhead;
            int64_t bseq = b[0], bready = b[1];
            f->bhead = f->bhead + 1 == f->bcap ? 0 : f->bhead + 1;
            f->blen--;
            card_issue(w, fi, bseq, bready);
        }
        if (f->olen && !f->watching)
            card_watch(w, fi);
        /* on_reply: the reply goes back towards the generator */
        OUT(f, FO_T_HAVE, seq) = w->now;
        OUT(f, FO_OK, seq) = ok;
        int64_t back = w->now;
        if (p[FP_LDOWN] >= 0)
            back = plan_lane(w, p[FP_LDOWN], w->now + p[FP_REPLY_SEND], p[FP_DOWN_SER], p[FP_DOWN_TAIL], p[FP_FRAME]);
        OUT(f, FO_T_BACK, seq) = back;
        push(w, back, E_BACK, fi, seq);
        break;
    }
    case E_BACK: /* TrafficGenerator.reply: closed loop, the reply sends the next request after its gap */
        w->counter++;
        f->received++;
        if (p[FP_CLOSED] && f->scheduled < p[FP_N]) {
            int64_t gap = p[FP_HAS_GAPS] ? f->gaps[f->scheduled - 1] : p[FP_GAP];
            f->scheduled++;
            push(w, clock_up(f, w->now + gap), E_SEND_NEXT, fi, 0);
        }
        break;
    case E_RESEND: /* _FlowRun.resend: the control side's timeout ran out, the lost frame goes again */
        f->resent++;
        deliver(w, fi, e.a);
        break;
    case E_OVERDUE: /* LinkCard._overdue: the reply of request e.a is not in yet */
        if (!f->replied[e.a - 1])
            f->timeouts++;
        break;
    }
    end_step(w);
}

/* The columns of a flow's record (FO_COUNT): the Python side checks its own list against it. */
int64_t twin_event_columns(void) { return FO_COUNT; }

/* A timeline of nflows flows. fp: nflows * FP_COUNT parameters; fo: per flow the addresses of its record
   (FO_COUNT columns of n int64, in the order FO_*; rows past the last reply are not written) and of its gaps (0: none); lp: nlanes * 1 latencies; lj: nlanes addresses of the lanes' jitter draws
   (0: none); nthreads serving threads, nbridges card bridges. The consumers arm, then the generators
   start, in flow order, as run_topology does. Returns NULL when out of memory. */
void *twin_event_new(int64_t nflows, const int64_t *fp, const int64_t *fo, int64_t nlanes, const int64_t *lp,
                     const int64_t *lj, int64_t nthreads, int64_t nbridges)
{
    world_t *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->nflows = nflows;
    w->nlanes = nlanes;
    w->nthreads = nthreads;
    w->nbridges = nbridges;
    w->f = calloc((size_t)nflows, sizeof(flow_t));
    w->lanes = calloc((size_t)(nlanes + 1), sizeof(lane_t));
    w->ljit = calloc((size_t)(nlanes + 1), sizeof(int64_t *));
    w->ljit_i = calloc((size_t)(nlanes + 1), sizeof(int64_t));
    w->lbytes = calloc((size_t)(nlanes + 1), sizeof(int64_t));
    w->threads = calloc((size_t)(nthreads + 1), sizeof(thread_t));
    w->bridges = calloc((size_t)(nbridges + 1), sizeof(int64_t));
    w->hcap = 1024;
    w->heap = malloc((size_t)w->hcap * sizeof(ev_t));
    for (int64_t l = 0; l < nlanes; l++) {
        w->lanes[l].lat = lp[l];
        w->ljit[l] = (const int64_t *)(intptr_t)lj[l];
    }
    for (int64_t i = 0; i < nflows; i++) {
        flow_t *f = &w->f[i];
        const int64_t *p = fp + i * FP_COUNT;
        f->p = p;
        for (int k = 0; k < FO_COUNT; k++)
            f->col[k] = (int64_t *)(intptr_t)fo[2 * i] + k * p[FP_N];
        f->gaps = (const int64_t *)(intptr_t)fo[2 * i + 1];
        f->clock = (clk_t){p[FP_CLK_PERIOD], p[FP_CLK_PPB], p[FP_CLK_PHASE]};
        size_t bytes = (size_t)(p[FP_SLOTS] * p[FP_SLOT_BYTES]);
        f->reqmem = calloc(bytes, 1);
        f->repmem = calloc(bytes, 1);
        f->cstage = calloc(bytes, 1);
        f->pstage = calloc(bytes, 1);
        f->cpoll = (poller_t){p[FP_POLL], p[FP_PHASE], p[FP_COST], 0, 0, 0, 0, 0, 0};
        f->kpoll = (poller_t){p[FP_CARD_POLL], 0, 0, 0, 0, 0, 0, 0, 0};
        f->cpoll.div = udiv_of(p[FP_POLL]);
        f->kpoll.div = udiv_of(p[FP_CARD_POLL]);
        f->slots = udiv_of(p[FP_SLOTS]);
        f->card_clk = udiv_of(p[FP_CARD_CLK]);
        f->clk_period = udiv_of(p[FP_CLK_PERIOD]);
        f->cpoll.win = (const int64_t *)(intptr_t)p[FP_STALLS];
        f->cpoll.nwin = f->cpoll.win ? p[FP_NSTALLS] : 0;
        f->next_seq = 1;
        sha_init(&f->digest);
        f->bcap = 16;
        f->backq = malloc((size_t)f->bcap * 2 * sizeof(int64_t));
        f->outq = malloc((size_t)p[FP_SLOTS] * sizeof(int64_t));
        f->replied = p[FP_TIMEOUT] ? calloc((size_t)p[FP_N], 1) : NULL;
        if (p[FP_HO]) {
            f->hmem = calloc(bytes, 1);
            f->hstage = calloc(bytes, 1);
            f->hpoll = (poller_t){p[FP_HO_POLL], p[FP_HO_PHASE], p[FP_HO_COST], 0, 0, 0, 0, 0, 0};
            f->hpoll.div = udiv_of(p[FP_HO_POLL]);
            f->h_next_seq = 1;
            for (int k = 0; k < HO_COUNT; k++)
                f->hcol[k] = (int64_t *)(intptr_t)p[FP_HO_OUT] + k * p[FP_N];
        }
        if (!f->reqmem || !f->repmem || !f->cstage || !f->pstage || !f->backq || !f->outq
            || (p[FP_TIMEOUT] && !f->replied) || (p[FP_HO] && (!f->hmem || !f->hstage)))
            return NULL;
    }
    for (int64_t i = 0; i < nflows; i++) { /* PollingConsumer.setup (StagedConsumer.setup: stage 1, then stage 2) */
        poller_arm(w, &w->f[i].cpoll, E_CFIRE, i, w->f[i].reqmem, 1);
        if (w->f[i].p[FP_HO])
            poller_arm(w, &w->f[i].hpoll, E_HFIRE, i, w->f[i].hmem, 1);
    }
    for (int64_t i = 0; i < nflows; i++) { /* TrafficGenerator.start */
        flow_t *f = &w->f[i];
        if (f->p[FP_CLOSED]) {
            f->scheduled = f->p[FP_IN_FLIGHT] < f->p[FP_N] ? f->p[FP_IN_FLIGHT] : f->p[FP_N];
            for (int64_t k = 0; k < f->scheduled; k++)
                push(w, clk_edge(&f->clock, 0), E_SEND_NEXT, i, 0);
        } else {
            push(w, clk_edge(&f->clock, 0), E_SEND_OPEN, i, 0);
        }
    }
    return w;
}

/* Process events until `target` replies are back at their generators (all flows). Returns the replies
   back so far, -1 when the timeline ran dry first, -2 when a function's reply was not of its planned length
   (twin_event_off says which), -3 when out of memory. */
int64_t twin_event_run(void *h, int64_t target)
{
    world_t *w = h;
    /* one per thread: the core runs with the GIL released, and two threads may each run a timeline (two parts
       of a partitioned mesh in one Dask worker process) */
    static _Thread_local uint8_t scratch[3 * SCRATCH];
    while (w->counter < target) {
        if (w->hn == 0)
            return -1;
        step(w, scratch);
        if (w->off_seq)
            return -2;
        if (w->oom)
            return -3;
    }
    return w->counter;
}

/* One step of a topology's components (nworlds timelines, each a handle of twin_event_new) in one call:
   timeline k processes events until targets[k] replies of it are back (twin_event_run), got[k] its replies
   back after (k in order; a timeline at or past its target is left as it is). Returns -1 when every
   timeline reached its target, else the index of the first that did not, got[k] then twin_event_run's
   code (-1 ran dry, -2 a function's reply of another length, -3 out of memory) and the timelines after
   it not run. */
int64_t twin_event_run_all(int64_t nworlds, void *const *hs, const int64_t *targets, int64_t *got)
{
    for (int64_t k = 0; k < nworlds; k++) {
        world_t *w = hs[k];
        got[k] = w->counter < targets[k] ? twin_event_run(w, targets[k]) : w->counter;
        if (got[k] < 0)
            return k;
    }
    return -1;
}

/* The counters: out[0..WS_COUNT) events, now, replies back; then per flow FS_COUNT (the digest's 32 bytes in
   FS_D0..FS_D3), per lane LS_COUNT (writes, bytes, busy, held), per thread TS_COUNT (served, busy). */
void twin_event_stats(void *h, int64_t *out)
{
    world_t *w = h;
    out[WS_EVENTS] = w->events;
    out[WS_NOW] = w->now;
    out[WS_REPLIES] = w->counter;
    int64_t *o = out + WS_COUNT;
    for (int64_t i = 0; i < w->nflows; i++, o += FS_COUNT) {
        flow_t *f = &w->f[i];
        o[FS_MISMATCHES] = f->mismatches;
        o[FS_BACKLOG_MAX] = f->backlog_max;
        o[FS_CONSUMER_POLLS] = f->cpoll.polls;
        o[FS_CARD_POLLS] = f->kpoll.polls;
        o[FS_CORRUPTED] = f->corrupted;
        o[FS_SENT] = f->sent;
        o[FS_RECEIVED] = f->received;
        o[FS_ISSUED] = f->issued;
        sha_final(&f->digest, (uint8_t *)(o + FS_D0));
        o[FS_DROPPED] = f->dropped;
        o[FS_RESENT] = f->resent;
        o[FS_REPLY_TIMEOUTS] = f->timeouts;
    }
    for (int64_t l = 0; l < w->nlanes; l++, o += LS_COUNT) {
        o[LS_WRITES] = w->lanes[l].writes;
        o[LS_BYTES] = w->lbytes[l];
        o[LS_BUSY] = w->lanes[l].busy;
        o[LS_HELD] = w->lanes[l].held;
    }
    for (int64_t t = 0; t < w->nthreads; t++, o += TS_COUNT) {
        o[TS_SERVED] = w->threads[t].served;
        o[TS_BUSY] = w->threads[t].busy;
    }
}

/* The flow (index in this timeline) and round of the function reply that stopped twin_event_run (-2) in
   out[0], out[1] (round 0: none). */
void twin_event_off(void *h, int64_t *out)
{
    const world_t *w = h;
    out[0] = w->off_flow;
    out[1] = w->off_seq;
}

void twin_event_free(void *h)
{
    world_t *w = h;
    if (!w)
        return;
    for (int64_t i = 0; i < w->nflows; i++) {
        flow_t *f = &w->f[i];
        free(f->reqmem);
        free(f->repmem);
        free(f->cstage);
        free(f->pstage);
        free(f->backq);
        free(f->outq);
        free(f->replied);
        free(f->hmem);
        free(f->hstage);
    }
    free(w->f);
    free(w->lanes);
    free(w->ljit);
    free(w->ljit_i);
    free(w->lbytes);
    free(w->threads);
    free(w->bridges);
    free(w->heap);
    free(w);
}

#ifdef TWIN_CORE_PYMODULE
/* An empty CPython module, so that setuptools builds this file at install time (setup.py);
   twin/engine/native.py loads the same shared object with ctypes. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static struct PyModuleDef core_module = {
    PyModuleDef_HEAD_INIT, "_core", "The compiled core of twin's engine (loaded with ctypes by twin.engine.native).",
    -1, NULL, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__core(void) { return PyModule_Create(&core_module); }
#endif
