/*
 * Paged FP8 MQA logits (spec section 5): the design of
 * shaders/paged_mqa_logits_simt.comp in HIP, launched as its plan says by
 * hip_paged_mqa_logits.c.
 *
 * Workgroup (split x, requests y with stride grid_y): the context positions
 * [x * kps, x * kps + kps) below max_kv_len, nth positions (one per thread)
 * a tile. Per tile: each thread resolves its position's slot through the
 * page table (an entry outside the request's pages or the table, or a slot
 * outside the cache, makes it invisible: spec 2); the workgroup reads the
 * tile's keys once into LDS, consecutive threads on one key's 4-byte words;
 * then every row of the request scores the tile from LDS. With q_staged
 * each row's q codes go to LDS once per tile (the plan's choice); without,
 * threads read them from global memory.
 *
 * The LDS keeps the fp8 codes themselves (rows of D + 4 bytes, so lanes
 * reading their own keys' words fall in different banks), decoded at use
 * by the target's packed converter where it has one; the plan's
 * shared_bytes (sized for the Vulkan kernel's f16 tile) bounds what this
 * uses. Products accumulate in f32: fp8 x fp8 products are exact there.
 * Fields the inner loops do not need are read where used (QH_LATE), so the
 * parameter block does not hold SGPRs across the tile loop.
 */
#include "qh_device.h"
#include "qh_fp8.h"
#include "qh_params.h"

QH_DEV uint32_t pm_word(const uint8_t *a, bool aligned) {
    if (aligned) return *(const uint32_t *)a;
    return (uint32_t)a[0] | ((uint32_t)a[1] << 8) | ((uint32_t)a[2] << 16) | ((uint32_t)a[3] << 24);
}

/* sum_h w[h] * max(0, sc * q_h . k) for one key row of LDS codes; q rows
 * `qh` bytes apart (LDS or global). Codes decode times 1 / qh_fp8_factor;
 * sc carries both factors. */
template <int QF, int KF>
QH_DEV float pm_score(const uint8_t *q, int32_t qh, bool qal, const uint8_t *krow, const float *w, float sc,
                      int32_t H, int32_t D) {
    float outv = 0.0f;
    for (int32_t h = 0; h < H; ++h) {
        const uint8_t *qv = q + (int64_t)h * qh;
        float acc = 0.0f;
        for (int32_t wd = 0; wd < D / 4; ++wd) {
            float a[4], k4[4];
            qh_fp8x4_to_f32<QF>(pm_word(qv + 4 * wd, qal), a);
            qh_fp8x4_to_f32<KF>(*(const uint32_t *)(krow + 4 * wd), k4);
            acc += a[0] * k4[0] + a[1] * k4[1] + a[2] * k4[2] + a[3] * k4[3];
        }
        outv += w[h] * qh_fmaxf(0.0f, sc * acc);
    }
    return outv;
}

QH_DEV void pm_neg_inf(const qh_paged_mqa_params &p, int32_t b, int32_t from, int32_t to, int32_t tid) {
    for (int32_t t = 0; t < p.N; ++t) {
        float *row = p.logits + (int64_t)b * p.l_s[0] + (int64_t)t * p.l_s[1];
        for (int32_t c = from + tid; c < to; c += p.nth) row[c] = qh_neg_inf();
    }
}

/* One kernel per (q, k) format pair: a runtime choice kept both converters'
 * constants live and spilled SGPRs on wave64. */
template <int QF, int KF> QH_DEV void pm_kernel(const qh_paged_mqa_params &p) {
    QH_DYN_LDS(lds);
    const int32_t nth = p.nth, D = p.D, H = p.H, KST = D + 4;
    uint8_t *sk = lds;                               /* [nth][KST] codes */
    float *ss = (float *)(lds + nth * KST);          /* scales */
    uint32_t *soff = (uint32_t *)(ss + nth);         /* key byte offsets from p.k */
    int32_t *sok = (int32_t *)(soff + nth);          /* 1: the position has a slot */
    uint8_t *sq = (uint8_t *)(sok + nth);            /* q_staged: one row's [H][D] codes */
    const int32_t tid = (int32_t)qh_tid();
    const float factor = qh_fp8_factor<QF>() * qh_fp8_factor<KF>();
    const int64_t c0_64 = (int64_t)qh_bid_x() * QH_LATE(p, kps);
    const int32_t c0 = (int32_t)(c0_64 < QH_LATE(p, M) ? c0_64 : QH_LATE(p, M));
    const int32_t c1 = QH_LATE(p, kps) > QH_LATE(p, M) - c0 ? QH_LATE(p, M) : c0 + QH_LATE(p, kps);
    const uint32_t pages = (uint32_t)qh_as_vector((int32_t)(((uint32_t)QH_LATE(p, n_slots) + (uint32_t)p.P - 1u) / (uint32_t)p.P));
    for (int32_t b = (int32_t)qh_bid_y(); b < QH_LATE(p, B); b += QH_LATE(p, grid_y)) {
        /* per-request values kept in VGPRs: the tile loop's SGPRs are full */
        const int32_t L = qh_as_vector(QH_LATE(p, lens)[b]);
        const int32_t begin = qh_as_vector(QH_LATE(p, indptr)[b]);
        const int32_t end = qh_as_vector(qh_min(QH_LATE(p, indptr)[b + 1], QH_LATE(p, n_idx)));
        const int64_t cap = end > begin ? (int64_t)(end - begin) * p.P : 0;
        const int64_t lim64 = qh_max(L, 0) < cap ? qh_max(L, 0) : cap;
        const int32_t t_end = qh_max(c0, (int32_t)(lim64 < c1 ? lim64 : c1));
        if (QH_LATE(p, clean)) pm_neg_inf(p, b, t_end, c1, tid);
        for (int32_t base = c0; base < t_end; base += nth) {
            /* 1. this thread's position: slot, key offset, scale */
            const int32_t pos = base + tid;
            /* branch-free but for the two loads: nested divergent ifs each
             * hold an exec mask in SGPRs, which wave64 cannot spare here.
             * indices[0] exists whenever a tile runs (end > begin >= 0 or
             * the entries are past its start) */
            const int32_t e = begin + pos / p.P; /* < end, as pos < cap */
            const bool inrange = pos < t_end && e >= 0;
            const int32_t page = QH_LATE(p, indices)[inrange ? e : 0];
            const int32_t row = pos % p.P;
            const uint32_t slot = (uint32_t)page * (uint32_t)p.P + (uint32_t)row;
            const bool ok = inrange && page >= 0 && (uint32_t)page < pages && slot < (uint32_t)QH_LATE(p, n_slots);
            const uint32_t off = QH_LATE(p, k_paged) ? (uint32_t)page * (uint32_t)QH_LATE(p, k_page) +
                                                           (uint32_t)row * (uint32_t)QH_LATE(p, k_row)
                                                     : slot * (uint32_t)QH_LATE(p, k_row);
            const uint32_t se = QH_LATE(p, s_paged) ? (uint32_t)page * (uint32_t)QH_LATE(p, s_page) +
                                                          (uint32_t)row * (uint32_t)QH_LATE(p, s_row)
                                                    : slot * (uint32_t)QH_LATE(p, s_row);
            float sc = 0.0f;
            if (ok) sc = QH_LATE(p, k_scale)[se] * factor;
            qh_barrier(); /* the previous tile's readers are done */
            sok[tid] = ok ? 1 : 0;
            soff[tid] = off;
            ss[tid] = sc;
            qh_barrier();
            /* 2. the tile's keys once, consecutive threads on one key's words */
            for (int32_t idx = tid; idx < nth * (D / 4); idx += nth) {
                const int32_t key = idx / (D / 4), wd = idx % (D / 4);
                uint32_t w = 0u;
                if (sok[key]) w = pm_word(p.k + soff[key] + 4 * wd, QH_LATE(p, aligned4) != 0);
                *(uint32_t *)(sk + key * KST + 4 * wd) = w;
            }
            qh_barrier();
            /* 3. position pos for every row of the request */
            const bool live = pos < t_end;
            for (int32_t t = 0; t < QH_LATE(p, N); ++t) {
                const int32_t last = L - QH_LATE(p, N) + t;
                if (base > last && !QH_LATE(p, clean)) continue; /* uniform: nothing of the tile to write */
                /* q and weights through vector loads (every lane the same
                 * address): as scalar loads their words exhaust the SGPRs */
                const int32_t bv = qh_as_vector(b);
                const uint8_t *qrow = QH_LATE(p, q) + (int64_t)bv * QH_LATE(p, q_s[0]) + (int64_t)t * QH_LATE(p, q_s[1]);
                const uint8_t *qsrc = qrow;
                int32_t qh = QH_LATE(p, q_s[2]);
                bool qal = QH_LATE(p, aligned4) != 0;
                if (QH_LATE(p, q_staged)) {
                    if (base <= last) {
                        qh_barrier(); /* the previous row's readers are done */
                        for (int32_t idx = tid; idx < H * (D / 4); idx += nth) {
                            const int32_t h = idx / (D / 4), wd = idx % (D / 4);
                            *(uint32_t *)(sq + h * D + 4 * wd) =
                                pm_word(qrow + (int64_t)h * QH_LATE(p, q_s[2]) + 4 * wd, QH_LATE(p, aligned4) != 0);
                        }
                        qh_barrier();
                    }
                    qsrc = sq;
                    qh = D;
                    qal = true;
                }
                if (!live) continue;
                float *lrow = QH_LATE(p, logits) + (int64_t)b * QH_LATE(p, l_s[0]) + (int64_t)t * QH_LATE(p, l_s[1]);
                if (ok && pos <= last) {
                    const float *wrow = QH_LATE(p, weights) + (int64_t)bv * QH_LATE(p, w_s[0]) + (int64_t)t * QH_LATE(p, w_s[1]);
                    const uint8_t *krow = sk + tid * KST;
                    const float sct = ss[tid];
                    const float outv = pm_score<QF, KF>(qsrc, qh, qal, krow, wrow, sct, H, D);
                    lrow[pos] = outv;
                } else if (QH_LATE(p, clean)) {
                    lrow[pos] = qh_neg_inf();
                }
            }
        }
    }
}

#define QH_PAGED_MQA(qn, kn, QF, KF)                                                         \
    QH_KERNEL QH_LAUNCH_BOUNDS(128) void qattn_paged_mqa_simt_##qn##_##kn(qh_paged_mqa_params p) { \
        pm_kernel<QF, KF>(p);                                                                \
    }
QH_PAGED_MQA(fn, fn, QH_FN, QH_FN)
QH_PAGED_MQA(fn, fnuz, QH_FN, QH_FNUZ)
QH_PAGED_MQA(fnuz, fn, QH_FNUZ, QH_FN)
QH_PAGED_MQA(fnuz, fnuz, QH_FNUZ, QH_FNUZ)
