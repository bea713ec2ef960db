/* A flow's statistics, one batch of rounds at a time, in two passes over its instants (integer ps).
 *
 * The counting behind twin/engine/flow_counts.py (twin.engine.hops.FlowStats, twin.stats.Counts and
 * twin.stats.SumsByValue hold the arrays; this file only reads the batch and adds into them). A batch is
 * m rounds; column j is the difference to[j][i] - from[j][i] of two int64 instant columns (a stage's time,
 * or the round trip t_have - t_in), computed on the fly, never stored.
 *
 * - twin_stats_bounds: pass 1, each column's min and max over the batch (and the first round of the
 *   largest value of column `arg`, as numpy's argmax), so the caller can size each column's dense counts
 *   (lo .. hi) before pass 2.
 * - twin_stats_count: pass 2, column j's value v counted in dense[j][v - base[j]] (dense[j] NULL: not
 *   counted here), and for the first `k_sum` columns summed per key: the key (column `key`'s value) at
 *   position p = lut[key - lut_base] (or pos[i] where lut is NULL) adds 1 to key_counts[p] and v to
 *   sums[j * stride + p]; each column's exact total over the batch into total[j].
 *
 * The caller guarantees every index is in range (the bounds of pass 1 inside each dense array, every key
 * in the table) and that no int64 sum overflows (twin.stats.SumsByValue bounds each column's magnitude).
 * Compiled into the engine's core extension (twin.engine._core) beside core.c; no state, no allocation.
 */
#include <stdint.h>

#ifdef _WIN32
#define TWIN_STATS_API __declspec(dllexport)
#else
#define TWIN_STATS_API __attribute__((visibility("default")))
#endif

/* Pass 1: lo[j], hi[j] of column j (to[j] - from[j]) over rounds 0..m-1, j < k; returns the first round
 * at column `arg`'s maximum (-1 for no rounds or arg outside 0..k-1). */
TWIN_STATS_API int64_t twin_stats_bounds(int64_t m, int64_t k, const int64_t *const *from,
                                         const int64_t *const *to, int64_t arg, int64_t *lo, int64_t *hi)
{
    int64_t at = -1;
    for (int64_t j = 0; j < k; j++) {
        const int64_t *a = from[j], *b = to[j];
        if (m <= 0 || a == b) { /* no rounds, or one instant twice: 0 in every round */
            lo[j] = hi[j] = 0;
            if (j == arg && m > 0)
                at = 0;
            continue;
        }
        int64_t mn = b[0] - a[0], mx = mn, imx = 0;
        for (int64_t i = 1; i < m; i++) {
            int64_t v = b[i] - a[i];
            mn = v < mn ? v : mn;
            if (v > mx) {
                mx = v;
                imx = i;
            }
        }
        lo[j] = mn;
        hi[j] = mx;
        if (j == arg)
            at = imx;
    }
    return at;
}

/* The keys' positions (column `key`) into pos (int64, m), by the table lut (key - lut_base in 0..span-1;
 * entry -1: not a key); returns how many keys the table lacks (0: every position written). */
TWIN_STATS_API int64_t twin_stats_positions(int64_t m, const int64_t *from, const int64_t *to,
                                            const int32_t *lut, int64_t lut_base, int64_t span, int64_t *pos)
{
    int64_t missing = 0;
    for (int64_t i = 0; i < m; i++) {
        int64_t off = to[i] - from[i] - lut_base;
        int64_t p = (off >= 0 && off < span) ? lut[off] : -1;
        missing += p < 0;
        pos[i] = p;
    }
    return missing;
}

/* Pass 2 (see the head of the file). pos: each round's key position (int64, m); key_counts: NULL to
 * leave the keys' counts alone. */
TWIN_STATS_API void twin_stats_count(int64_t m, int64_t k, const int64_t *const *from, const int64_t *const *to,
                                     int64_t *const *dense, const int64_t *base, int64_t k_sum, const int64_t *pos,
                                     int64_t *key_counts, int64_t *sums, int64_t stride, int64_t *total)
{
    if (key_counts)
        for (int64_t i = 0; i < m; i++)
            key_counts[pos[i]]++;
    for (int64_t j = 0; j < k; j++) {
        const int64_t *a = from[j], *b = to[j];
        int64_t *d = dense[j];
        int64_t s = 0;
        if (a == b && !d) { /* one instant twice: 0 in every round, nothing to add */
            total[j] = 0;
            continue;
        }
        if (j < k_sum) {
            int64_t *row = sums + j * stride;
            if (d) {
                const int64_t o = base[j];
                for (int64_t i = 0; i < m; i++) {
                    int64_t v = b[i] - a[i];
                    d[v - o]++;
                    row[pos[i]] += v;
                    s += v;
                }
            } else {
                for (int64_t i = 0; i < m; i++) {
                    int64_t v = b[i] - a[i];
                    row[pos[i]] += v;
                    s += v;
                }
            }
        } else if (d) {
            const int64_t o = base[j];
            for (int64_t i = 0; i < m; i++) {
                int64_t v = b[i] - a[i];
                d[v - o]++;
                s += v;
            }
        } else {
            for (int64_t i = 0; i < m; i++)
                s += b[i] - a[i];
        }
        total[j] = s;
    }
}

#define TWIN_STATS_BLOCK 1024

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__GLIBC__) /* (ifuncs) */
/* (min and max of int64 vectorise with AVX2's 64-bit compares, not with the x86-64 baseline's SSE2) */
#define TWIN_STATS_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define TWIN_STATS_CLONES
#endif

/* Rounds i0 .. i1-1 of column to - from: its min and max, no argmax (vectorisable). */
TWIN_STATS_CLONES static void block_min_max(const int64_t *a, const int64_t *b, int64_t i0, int64_t i1,
                                            int64_t *mn, int64_t *mx)
{
    int64_t lo = b[i0] - a[i0], hi = lo;
    for (int64_t i = i0 + 1; i < i1; i++) {
        int64_t v = b[i] - a[i];
        lo = v < lo ? v : lo;
        hi = v > hi ? v : hi;
    }
    *mn = lo;
    *mx = hi;
}

/* Rounds i0 .. i1-1 of column j: its min and max (0, 0 for one instant twice) and the first round at its
 * maximum. */
static void block_bounds(const int64_t *a, const int64_t *b, int64_t i0, int64_t i1, int64_t *mn, int64_t *mx,
                         int64_t *imx)
{
    if (a == b) {
        *mn = *mx = 0;
        *imx = i0;
        return;
    }
    int64_t lo = b[i0] - a[i0], hi = lo, at = i0;
    for (int64_t i = i0 + 1; i < i1; i++) {
        int64_t v = b[i] - a[i];
        lo = v < lo ? v : lo;
        if (v > hi) {
            hi = v;
            at = i;
        }
    }
    *mn = lo;
    *mx = hi;
    *imx = at;
}

/* Whether block i0 .. i1-1 can be counted as it is: every counted column's values inside its dense counts
 * (base[j] .. base[j] + len[j] - 1), no sum past 2**63 by the columns' bounds (mass). Its bounds into bl,
 * bh, bat; each round's key position into pos (-1 for a key the table lacks: the round is then left out of
 * the sums and the keys' counts, its index appended to skipped[*n_skipped]). */
static int block_fits(int64_t i0, int64_t i1, int64_t k, const int64_t *const *from, const int64_t *const *to,
                      int64_t *const *dense, const int64_t *base, const int64_t *len, int64_t k_sum,
                      const int32_t *lut, int64_t lut_base, int64_t span, int64_t key, int64_t arg, const int64_t *mass,
                      int64_t *pos, int64_t *bl, int64_t *bh, int64_t *bat, int64_t *skipped, int64_t *n_skipped)
{
    int64_t nb = i1 - i0;
    for (int64_t j = 0; j < k; j++) {
        if (j == arg || from[j] == to[j])
            block_bounds(from[j], to[j], i0, i1, &bl[j], &bh[j], &bat[j]);
        else
            block_min_max(from[j], to[j], i0, i1, &bl[j], &bh[j]);
        if (dense[j] && (bl[j] < base[j] || bh[j] - base[j] >= len[j]))
            return 0;
        if (j < k_sum) {
            int64_t big = -bl[j] > bh[j] ? -bl[j] : bh[j];
            if (big > (INT64_MAX - mass[j]) / nb)
                return 0;
        }
    }
    if (k_sum) {
        const int64_t *a = from[key], *b = to[key];
        for (int64_t i = i0; i < i1; i++) {
            int64_t off = b[i] - a[i] - lut_base;
            int64_t p = (off >= 0 && off < span) ? lut[off] : -1;
            pos[i - i0] = p;
        }
        /* (a second loop: the first stays branch-free) */
        for (int64_t i = i0; i < i1; i++)
            if (pos[i - i0] < 0)
                skipped[(*n_skipped)++] = i;
    }
    return 1;
}

/* One pass over a batch in blocks of TWIN_STATS_BLOCK rounds, each block's columns read while in cache:
 * its bounds (block_fits), then column j's values counted in dense[j] (NULL: not counted), the first
 * k_sum summed per key position (lut, as twin_stats_positions) into key_counts and sums (row j at
 * j * stride), each column's bound on its sums' magnitude in mass (+ the block's total where its values
 * are >= 0, else its rounds times its largest magnitude, as twin.stats.SumsByValue keeps it). Stops before
 * the first block that does not fit. Returns the rounds counted (0 .. m, whole blocks but the last); lo,
 * hi, at (column `arg`'s first maximum, -1 if none) and total over them (lo, hi, total 0 for none); the
 * rounds among them whose key the table lacks, left out of the sums and keys' counts only, in skipped
 * (room for m) and their number in *n_skipped (set to 0 first). scratch: zeros, one per key (stride), left
 * zeros: a block's rounds per key, by which a column constant over the block is summed. */
TWIN_STATS_API int64_t twin_stats_add(int64_t m, int64_t k, const int64_t *const *from, const int64_t *const *to,
                                      int64_t *const *dense, const int64_t *base, const int64_t *len,
                                      int64_t k_sum, const int32_t *lut, int64_t lut_base, int64_t span,
                                      int64_t key, int64_t *key_counts, int64_t *sums, int64_t stride,
                                      int64_t *mass, int64_t arg, int64_t *lo, int64_t *hi, int64_t *at,
                                      int64_t *total, int64_t *skipped, int64_t *n_skipped, int64_t *scratch)
{
    int64_t pos[TWIN_STATS_BLOCK], touched[TWIN_STATS_BLOCK], bl[64], bh[64], bat[64];
    int64_t i0 = 0;
    *at = -1;
    *n_skipped = 0;
    if (k > 64)
        return 0;
    for (int64_t j = 0; j < k; j++)
        lo[j] = hi[j] = total[j] = 0;
    for (; i0 < m; i0 += TWIN_STATS_BLOCK) {
        int64_t i1 = i0 + TWIN_STATS_BLOCK < m ? i0 + TWIN_STATS_BLOCK : m, nb = i1 - i0;
        int64_t skip0 = *n_skipped;
        if (!block_fits(i0, i1, k, from, to, dense, base, len, k_sum, lut, lut_base, span, key, arg, mass, pos, bl,
                        bh, bat, skipped, n_skipped)) {
            *n_skipped = skip0;
            break;
        }
        int64_t some_skipped = *n_skipped > skip0, nt = 0;
        if (k_sum) /* the block's rounds per key: a column constant over the block sums by them */
            for (int64_t i = 0; i < nb; i++) {
                int64_t p = pos[i];
                if (p >= 0) {
                    if (!scratch[p])
                        touched[nt++] = p;
                    scratch[p]++;
                }
            }
        for (int64_t j = 0; j < k; j++) {
            const int64_t *restrict a = from[j], *restrict b = to[j];
            int64_t *restrict d = dense[j], s = 0;
            const int64_t o = base[j];
            if (a == b) {
                if (d)
                    d[-o] += nb;
            } else if (bl[j] == bh[j]) { /* one value over the block: no pass over its rounds */
                int64_t v = bl[j];
                if (d)
                    d[v - o] += nb;
                s = v * nb;
                if (j < k_sum && v) {
                    int64_t *restrict row = sums + j * stride;
                    for (int64_t t = 0; t < nt; t++)
                        row[touched[t]] += v * scratch[touched[t]];
                }
            } else if (j < k_sum) {
                int64_t *restrict row = sums + j * stride;
                if (d && !some_skipped) {
                    for (int64_t i = i0; i < i1; i++) {
                        int64_t v = b[i] - a[i];
                        row[pos[i - i0]] += v;
                        s += v;
                        d[v - o]++;
                    }
                } else {
                    for (int64_t i = i0; i < i1; i++) {
                        int64_t v = b[i] - a[i], p = pos[i - i0];
                        if (p >= 0)
                            row[p] += v;
                        s += v;
                        if (d)
                            d[v - o]++;
                    }
                }
            } else if (d) {
                for (int64_t i = i0; i < i1; i++) {
                    int64_t v = b[i] - a[i];
                    d[v - o]++;
                    s += v;
                }
            } else {
                for (int64_t i = i0; i < i1; i++)
                    s += b[i] - a[i];
            }
            if (j < k_sum) {
                int64_t big = -bl[j] > bh[j] ? -bl[j] : bh[j];
                mass[j] += bl[j] >= 0 ? s : nb * big;
            }
            total[j] += s;
            if (i0 == 0 || bl[j] < lo[j])
                lo[j] = bl[j];
            if (i0 == 0 || bh[j] > hi[j]) {
                if (j == arg)
                    *at = bat[j];
                hi[j] = bh[j];
            }
        }
        for (int64_t t = 0; t < nt; t++) {
            key_counts[touched[t]] += scratch[touched[t]];
            scratch[touched[t]] = 0;
        }
    }
    return i0 < m ? i0 : m;
}
