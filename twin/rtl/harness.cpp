// The co-simulation harness: a thin extern "C" layer over one Verilated node (the link card's
// engine or the V80 consumer logic), loaded from Python with ctypes.
//
// The node's own memory (its queue) is a buffer owned by Python (the twin's MemoryRegion), read
// through the RTL's memory port: a read asked for after edge k returns the buffer's 64 bytes as
// they are at edge k+1. Posted writes leave on the wr_* port and are assembled here; the link
// side (card only) takes frames from a FIFO filled by Python and hands replies back.
// qrt_step runs the clock until something the rest of the timeline must see happens (a posted
// write complete, a reply handed back), the node is idle (waiting for memory or a frame), or
// N cycles have run. Time is counted in cycles; Python maps cycle c to phase + c * period ps.
#include <verilated.h>
#include "Vqrt_node.h"
#if QRT_TRACE
#include <verilated_vcd_c.h>
#endif
#include <cstdint>
#include <cstring>
#include <deque>
#include <vector>

struct QrtEvent {
    int32_t kind;       // 1: posted write complete, 2: reply handed back (card)
    uint32_t addr;      // write: byte offset in the destination region
    uint32_t nbytes;
    uint32_t pad;
    uint64_t cycle;     // the cycle whose edge issued it
};

struct QrtStep {
    int32_t why;        // 0: N cycles ran, 1: idle, 2: events
    int32_t nevents;
    uint64_t cycles;    // cycles run in this call
    QrtEvent ev[2];
};

struct QrtNode {
    VerilatedContext* ctx;
    Vqrt_node* top;
    uint8_t* mem;
    uint32_t mem_bytes;
    uint64_t cycle;
    uint64_t evaluated;
    int64_t phase_ps, period_ps;
    bool rd_pend;
    uint32_t rd_addr;
    std::vector<uint8_t> wbuf, wdone;
    uint32_t waddr, wdone_addr;
    bool win;
    std::vector<uint8_t> obuf, odone;
    std::deque<std::vector<uint8_t>> frames;
    size_t fpos;
    std::deque<uint64_t> accepted;
#if QRT_TRACE
    VerilatedVcdC* tfp;
#endif
    bool tron;
};

template <typename W>
static void put_wide(W& w, const uint8_t* src, size_t n) {
    uint8_t tmp[64] = {0};
    std::memcpy(tmp, src, n);
    for (int i = 0; i < 16; ++i) {
        uint32_t v;
        std::memcpy(&v, tmp + 4 * i, 4);
        w[i] = v;
    }
}

template <typename W>
static void get_wide(const W& w, uint8_t* dst, size_t n) {
    uint8_t tmp[64];
    for (int i = 0; i < 16; ++i) {
        uint32_t v = w[i];
        std::memcpy(tmp + 4 * i, &v, 4);
    }
    std::memcpy(dst, tmp, n);
}

// The memory read port as the rising edge sees it: the 64 bytes at the pending read address
// (zero beyond the region), valid while a read is pending.
static void drive_read_port(QrtNode* n, Vqrt_node* t) {
    if (n->rd_pend) {
        uint8_t tmp[64] = {0};
        uint32_t a = n->rd_addr;
        if (a < n->mem_bytes) {
            uint32_t k = n->mem_bytes - a < 64 ? n->mem_bytes - a : 64;
            std::memcpy(tmp, n->mem + a, k);
        }
        put_wide(t->mem_rd_data, tmp, 64);
        t->mem_rd_valid = 1;
    } else {
        t->mem_rd_valid = 0;
    }
}

static void dump(QrtNode* n, int64_t t) {
#if QRT_TRACE
    if (n->tron && n->tfp) n->tfp->dump((uint64_t)t);
#else
    (void)n; (void)t;
#endif
}

extern "C" {

int qrt_traced(void) { return QRT_TRACE; }

QrtNode* qrt_create(uint8_t* mem, uint32_t mem_bytes, int64_t phase_ps, int64_t period_ps) {
    QrtNode* n = new QrtNode();
    n->ctx = new VerilatedContext;
#if QRT_TRACE
    n->ctx->traceEverOn(true);
    n->tfp = nullptr;
#endif
    n->top = new Vqrt_node{n->ctx};
    n->mem = mem;
    n->mem_bytes = mem_bytes;
    n->phase_ps = phase_ps;
    n->period_ps = period_ps;
    n->cycle = 0;
    n->evaluated = 0;
    n->rd_pend = false;
    n->rd_addr = 0;
    n->win = false;
    n->fpos = 0;
    n->tron = false;
    return n;
}

void qrt_destroy(QrtNode* n) {
#if QRT_TRACE
    if (n->tfp) { n->tfp->close(); delete n->tfp; }
#endif
    n->top->final();
    delete n->top;
    delete n->ctx;
    delete n;
}

// Configuration (static while running), then reset: two cycles with rst high, not on the timeline.
void qrt_reset(QrtNode* n, uint32_t slots, uint32_t slot_bytes, uint32_t encoding, uint32_t function,
               uint32_t cycles_a, uint32_t cycles_b) {
    auto* t = n->top;
    t->cfg_slots = slots;
    t->cfg_slot_bytes = slot_bytes;
    t->cfg_encoding = encoding;
#if QRT_CARD
    t->cfg_function = function;
    t->cfg_land_cycles = cycles_a;
    t->cfg_read_cycles = cycles_b;
    t->in_valid = 0;
#else
    (void)function; (void)cycles_b;
    t->cfg_answer_cycles = cycles_a;
#endif
    t->mem_rd_valid = 0;
    t->rst = 1;
    for (int i = 0; i < 2; ++i) {
        t->clk = 0; t->eval();
        t->clk = 1; t->eval();
    }
    t->rst = 0;
    t->clk = 0;
    t->eval();
    n->rd_pend = t->mem_rd_en;
    n->rd_addr = t->mem_rd_addr;
}

int qrt_trace_open(QrtNode* n, const char* path) {
#if QRT_TRACE
    if (!n->tfp) {
        n->tfp = new VerilatedVcdC;
        n->top->trace(n->tfp, 99);
        n->tfp->open(path);
    }
    return 1;
#else
    (void)n; (void)path;
    return 0;
#endif
}

void qrt_trace_on(QrtNode* n, int on) { n->tron = on != 0; }

void qrt_set_cycle(QrtNode* n, uint64_t c) { n->cycle = c; }
uint64_t qrt_cycle(QrtNode* n) { return n->cycle; }
uint64_t qrt_evaluated(QrtNode* n) { return n->evaluated; }

// A frame offered on the link side (card only); it enters from the next cycle evaluated.
void qrt_push_frame(QrtNode* n, const uint8_t* data, uint32_t nbytes) {
    n->frames.emplace_back(data, data + nbytes);
}

// Cycle at which the oldest not-yet-collected frame's first word was accepted; 0 if none (then *ok = 0).
uint64_t qrt_pop_accepted(QrtNode* n, int* ok) {
    if (n->accepted.empty()) { *ok = 0; return 0; }
    *ok = 1;
    uint64_t c = n->accepted.front();
    n->accepted.pop_front();
    return c;
}

const uint8_t* qrt_write_data(QrtNode* n) { return n->wdone.data(); }
const uint8_t* qrt_reply_data(QrtNode* n) { return n->odone.data(); }

uint32_t qrt_counter(QrtNode* n, int which) {
    auto* t = n->top;
#if QRT_CARD
    switch (which) {
        case 0: return t->n_requests;
        case 1: return t->n_replies;
        case 2: return t->err_frame;
        case 3: return t->err_status;
        case 4: return t->err_length;
    }
#else
    switch (which) {
        case 0: return t->n_served;
        case 1: return t->err_status;
    }
#endif
    return 0;
}

// stop_on_idle = 0 clocks through idle cycles too (every cycle evaluated; for the benchmark).
int qrt_step(QrtNode* n, uint64_t max_cycles, QrtStep* out, int stop_on_idle) {
    auto* t = n->top;
    out->why = 0;
    out->nevents = 0;
    out->cycles = 0;
    for (uint64_t i = 0; i < max_cycles; ++i) {
        const int64_t now = n->phase_ps + (int64_t)n->cycle * n->period_ps;
        // inputs seen by the rising edge of this cycle
        drive_read_port(n, t);
        bool fire = false;
#if QRT_CARD
        if (!n->frames.empty()) {
            const auto& f = n->frames.front();
            size_t left = f.size() - n->fpos;
            size_t b = left < 64 ? left : 64;
            put_wide(t->in_data, f.data() + n->fpos, b);
            t->in_bytes = (uint8_t)b;
            t->in_last = left <= 64;
            t->in_valid = 1;
            t->eval();
            fire = t->in_ready;
        } else {
            t->in_valid = 0;
        }
#endif
        t->clk = 1;
        t->eval();
        dump(n, now);
#if QRT_CARD
        if (fire) {
            if (n->fpos == 0) n->accepted.push_back(n->cycle);
            n->fpos += 64;
            if (n->fpos >= n->frames.front().size()) { n->frames.pop_front(); n->fpos = 0; }
        }
#endif
        n->rd_pend = t->mem_rd_en;
        n->rd_addr = t->mem_rd_addr;
        if (t->wr_valid) {
            if (!n->win) { n->win = true; n->waddr = t->wr_addr; n->wbuf.clear(); }
            uint8_t tmp[64];
            get_wide(t->wr_data, tmp, 64);
            n->wbuf.insert(n->wbuf.end(), tmp, tmp + t->wr_bytes);
            if (t->wr_last) {
                n->win = false;
                n->wdone.swap(n->wbuf);
                n->wdone_addr = n->waddr;
                QrtEvent& e = out->ev[out->nevents++];
                e.kind = 1; e.addr = n->wdone_addr; e.nbytes = (uint32_t)n->wdone.size(); e.cycle = n->cycle;
            }
        }
#if QRT_CARD
        if (t->out_valid) {
            uint8_t tmp[64];
            get_wide(t->out_data, tmp, 64);
            n->obuf.insert(n->obuf.end(), tmp, tmp + t->out_bytes);
            if (t->out_last) {
                n->odone.swap(n->obuf);
                n->obuf.clear();
                QrtEvent& e = out->ev[out->nevents++];
                e.kind = 2; e.addr = 0; e.nbytes = (uint32_t)n->odone.size(); e.cycle = n->cycle;
            }
        }
#endif
        t->clk = 0;
        t->eval();
        dump(n, now + n->period_ps / 2);
        n->cycle++;
        n->evaluated++;
        out->cycles++;
        if (out->nevents) { out->why = 2; return 2; }
#if QRT_CARD
        bool waiting = n->frames.empty() || !t->in_ready;
#else
        bool waiting = true;
#endif
        if (stop_on_idle && t->idle && waiting) { out->why = 1; return 1; }
    }
    return 0;
}

#if !QRT_CARD
// The benchmark's native reference: the same V80 model clocked by a C++ loop, every cycle
// evaluated, with a producer written here: a 64-byte classic echo request lands in slot 0..slots-1
// (data then sequence word) `latency` cycles after the previous reply's ready word left; the
// replies' posted writes are assembled as in qrt_step. Returns the cycles run; *rounds the
// requests answered.
uint64_t qrt_native_echo(QrtNode* n, uint64_t cycles, uint32_t latency, uint32_t slot_bytes, uint32_t slots,
                         uint64_t* rounds) {
    auto* t = n->top;
    uint32_t seq = 1;
    uint64_t land_at = latency, done = 0;
    bool waiting = false;
    uint64_t c0 = n->cycle;
    for (uint64_t i = 0; i < cycles; ++i) {
        if (!waiting && n->cycle - c0 >= land_at) {   // the request lands: payload, then sequence word
            uint8_t* slot = n->mem + ((seq - 1) % slots) * slot_bytes;
            uint16_t fn = 0, len = 64;
            std::memcpy(slot + 4, &fn, 2);
            std::memcpy(slot + 6, &len, 2);
            std::memset(slot + 8, 0, 8);
            for (int b = 0; b < 64; ++b) slot[16 + b] = (uint8_t)(seq + b);
            std::memcpy(slot, &seq, 4);
            waiting = true;
        }
        drive_read_port(n, t);
        t->clk = 1;
        t->eval();
        n->rd_pend = t->mem_rd_en;
        n->rd_addr = t->mem_rd_addr;
        if (t->wr_valid) {
            if (!n->win) { n->win = true; n->waddr = t->wr_addr; n->wbuf.clear(); }
            uint8_t tmp[64];
            get_wide(t->wr_data, tmp, 64);
            n->wbuf.insert(n->wbuf.end(), tmp, tmp + t->wr_bytes);
            if (t->wr_last) {
                n->win = false;
                n->wdone.swap(n->wbuf);
                if (n->wdone.size() == 4) {   // the ready word: the next request lands after the path
                    ++done;
                    ++seq;
                    waiting = false;
                    land_at = n->cycle - c0 + 2 * (uint64_t)latency;
                }
            }
        }
        t->clk = 0;
        t->eval();
        n->cycle++;
        n->evaluated++;
    }
    *rounds = done;
    return cycles;
}
#endif
}
