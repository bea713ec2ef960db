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
