/* core.c: the compiled core of twin's one engine (C11, integer picoseconds).

   twin_direct_run: the recurrence of twin/engine/direct.py (run_direct), round for round, on the
   random draws the Python side hands it (the same JitterStream blocks, the same gaps array), so
   its timestamps and hops equal run_direct's and the event model's.

   Parameters and state travel as int64 arrays whose indices are named below and mirrored in
   twin/engine/native.py (DIRECT_PARAMS, DIRECT_STATE): the state array persists between calls, so
   the Python side runs the rounds in chunks (progress, a stop request) exactly where run_direct
   looks up.

   Built at install time by setup.py as the extension twin.engine._core (with TWIN_CORE_PYMODULE
   defined: an empty CPython module), or privately by twin/engine/native.py with the system C
   compiler; loaded with ctypes. */
#include <stdint.h>
#include <string.h>

#ifndef TWIN_CORE_BUILD_ID
#define TWIN_CORE_BUILD_ID "unknown"
#endif

const char *twin_core_build_id(void) { return TWIN_CORE_BUILD_ID; }

#define PPB 1000000000LL

/* floor and ceiling division of a by b > 0 (Python's // for negative a) */
static inline int64_t fdiv(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && a < 0) ? q - 1 : q;
}
static inline int64_t cdiv(int64_t a, int64_t b) { return -fdiv(-a, b); }
/* the first instant of the grid phase + k * period at or after t (twin.units.ceil_to_grid) */
static inline int64_t ceil_grid(int64_t t, int64_t period, int64_t phase)
{
    return phase - fdiv(phase - t, period) * period;
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

static inline __int128 fdiv128(__int128 a, __int128 b)
{
    __int128 q = a / b;
    return (a % b != 0 && a < 0) ? q - 1 : q;
}

static int64_t clk_at_or_after(const clk_t *c, int64_t t)
{
    if (t <= c->phase)
        return clk_edge(c, 0);
    if (c->ppb == 0) /* edges phase + k period exactly */
        return c->phase + cdiv(t - c->phase, c->period) * c->period;
    __int128 s = (__int128)c->period * (PPB + c->ppb);
    int64_t k = (int64_t)(-fdiv128((__int128)(c->phase - t) * PPB, s));
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
enum {
    P_N, P_SLOTS, P_CLOSED, P_IN_FLIGHT, P_PER_PIECE, P_PHASE, P_POLL, P_COST, P_BODY, P_FENCE,
    P_CARD_POLL, P_READ, P_BRIDGE, P_LAND, P_CARD_CLK, P_CLK_PERIOD, P_CLK_PPB, P_CLK_PHASE,
    P_PERIOD_CYCLES, P_GAP, P_AURORA, P_AUR_SER, P_AUR_LAT, P_REPLY_SEND, P_REQ_LAT, P_REP_LAT,
    P_N_REQ, P_REQ_SER0, P_REQ_SER1, P_REQ_SER2, P_REQ_SER3, P_REQ_TAIL0, P_REQ_TAIL1, P_REQ_TAIL2,
    P_REQ_TAIL3, P_REP_SER0, P_REP_SER1, P_REP_TAIL0, P_REP_TAIL1, P_HAS_GAPS, P_HAS_EXTRA, P_COUNT
};
enum {
    S_I, S_TS, S_BACK, S_TX, S_RX, S_BRIDGE, S_FREE_C, S_LAST_HAVE, S_REQ_FREE, S_REQ_LAST, S_REP_FREE,
    S_REP_LAST, S_SCHEDULED, S_HEAP_N, S_WRITES, S_COUNT
};

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

/* Run rounds st[S_I] .. end-1 of the direct recurrence. p: parameters (P_*); st: state (S_*),
   updated; heap: 2 * in_flight int64; have: slots int64 (the ring of t_have); req_jit: the
   request lane's jitter for these rounds (n_req per round, from index 0); rep_jit: the reply
   lane's (1 per round per-piece, 2 classic); gaps: every round's gap or NULL; extra: every round's
   extra body or NULL. Outputs indexed by round: t_send, t_in, t_have, t_back, issue, land, reply,
   rland. Returns 0, or -(round + 1) for a round that finds every slot busy (direct engine does not
   apply), with st[S_I] at that round. */
int64_t twin_direct_run(const int64_t *p, int64_t *st, int64_t end, int64_t *heap, int64_t *have,
                        const int64_t *req_jit, const int64_t *rep_jit, const int64_t *gaps, const int64_t *extra,
                        int64_t *t_send, int64_t *t_in, int64_t *t_have, int64_t *t_back, int64_t *issue,
                        int64_t *land_o, int64_t *reply_o, int64_t *rland_o)
{
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
        const int64_t tin = cdiv(arrive, cclk) * cclk;
        if (i >= slots && have[i % slots] > tin) {
            rc = -(i + 1);
            break;
        }
        t_send[i] = ts;
        t_in[i] = tin;
        bridge_free = (tin > bridge_free ? tin : bridge_free) + bridge;
        const int64_t t_issue = bridge_free + land_ps;
        int64_t land = 0;
        for (int64_t k = 0; k < n_req; k++)
            land = lane_plan(&req, t_issue, req_ser[k], req_tail[k], req_jit[j * n_req + k]);
        int64_t t = land > t_free_c ? land : t_free_c;
        int64_t t2 = ceil_grid(t, P, phase) + cost + body;
        if (extra != NULL)
            t2 += extra[i];
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
        const int64_t armed = tin > last_have ? tin : last_have;
        t = rland > armed ? rland : armed;
        const int64_t th = cdiv(t, cP) * cP + read;
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
        t_back[i] = back;
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
