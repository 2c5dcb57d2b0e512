/*
 * Paged FP8 MQA logits (spec section 5): the design of
 * shaders/paged_mqa_logits_simt.comp in HIP, launched as its plan says by
 * hip_paged_mqa_logits.c.
 *
 * The parameter block is the core's qattn_paged_mqa_kernel_args and the
 * index rules are qattn/paged_mqa_index.h's, the shaders' own.
 *
 * qattn_paged_mqa_simt_<q fmt>_<k fmt>
 * Workgroup (split x, requests y with stride grid_y): the context positions
 * [x * kps, x * kps + kps) below max_kv_len, nth positions (one per thread)
 * a tile. Per tile: each thread resolves its position's slot through the
 * page table (an entry outside the request's pages or the table, or a slot
 * outside the cache, makes it invisible: spec 2) and its key's offset (the
 * page's base in 64 bits: caches of any size); the workgroup reads the
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

#define QATTN_PMI_FN QH_DEV
#include "qattn/paged_mqa_index.h"

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

QH_DEV void pm_neg_inf(const qh_paged_mqa_params &p, int32_t b, int32_t from, int32_t to, int32_t tid,
                       int32_t nth) {
    for (int32_t t = 0; t < QH_LATE(p, a.N); ++t) {
        float *row = QH_LATE(p, a.logits) + (int64_t)b * QH_LATE(p, a.l_sb) + (int64_t)t * QH_LATE(p, a.l_sr);
        for (int32_t c = from + tid; c < to; c += nth) row[c] = qh_neg_inf();
    }
}

/* The request's page-table range and the positions any of its rows sees
 * (paged_mqa_common.glsl's pm_request_of). */
struct pm_request {
    int32_t L, begin, lim;
};
QH_DEV pm_request pm_request_of(const qh_paged_mqa_params &p, int32_t b) {
    pm_request r;
    r.L = QH_LATE(p, a.lens)[b];
    r.begin = QH_LATE(p, a.indptr)[b];
    const int32_t end = qh_min(QH_LATE(p, a.indptr)[b + 1], QH_LATE(p, a.n_indices));
    r.lim = pmi_limit(r.L, r.begin, end, p.a.P);
    return r;
}

/* One kernel per (q, k) format pair: a runtime choice kept both converters'
 * constants live and spilled SGPRs on wave64. */
template <int QF, int KF> QH_DEV void pm_kernel(const qh_paged_mqa_params &p) {
    QH_DYN_LDS(lds);
    const int32_t nth = p.a.kv_tile, D = p.a.D, H = p.a.H, KST = D + 4;
    uint8_t *sk = lds;                               /* [nth][KST] codes */
    uint64_t *soff = (uint64_t *)(lds + nth * KST);  /* key element offsets (64-bit: caches of any size) */
    float *ss = (float *)(soff + nth);               /* scales */
    int32_t *sok = (int32_t *)(ss + nth);            /* 1: the position has a slot */
    uint8_t *sq = (uint8_t *)(sok + nth);            /* q_staged: one row's [H][D] codes */
    const int32_t tid = (int32_t)qh_tid();
    const float factor = qh_fp8_factor<QF>() * qh_fp8_factor<KF>();
    const int32_t c0 = pmi_split_begin((int32_t)qh_bid_x(), QH_LATE(p, a.keys_per_split), QH_LATE(p, a.M));
    const int32_t c1 = pmi_split_end(c0, QH_LATE(p, a.keys_per_split), QH_LATE(p, a.M));
    for (int32_t b = (int32_t)qh_bid_y(); b < QH_LATE(p, a.B); b += QH_LATE(p, a.grid_y)) {
        /* per-request values kept in VGPRs: the tile loop's SGPRs are full */
        const pm_request rq = pm_request_of(p, b);
        const int32_t L = qh_as_vector(rq.L), begin = qh_as_vector(rq.begin);
        const int32_t t_end = qh_max(c0, qh_min(c1, qh_as_vector(rq.lim)));
        if (QH_LATE(p, a.clean)) pm_neg_inf(p, b, t_end, c1, tid, nth);
        for (int32_t base = c0; base < t_end; base += nth) {
            /* 1. this thread's position: slot, key offset, scale.
             * branch-free but for the two loads: nested divergent ifs each
             * hold an exec mask in SGPRs, which wave64 cannot spare here.
             * indices[0] exists whenever a tile runs (end > begin >= 0 or
             * the entries are past its start) */
            const int32_t pos = base + tid;
            const int32_t e = pmi_entry(begin, pos, p.a.P); /* < end, as pos < lim */
            const bool inrange = pos < t_end && e >= 0;
            const int32_t page = QH_LATE(p, a.indices)[inrange ? e : 0];
            const int32_t row = pos % p.a.P;
            const bool ok = inrange && pmi_slot_ok(page, row, p.a.P, QH_LATE(p, a.n_slots));
            const int32_t pg = ok ? page : 0;
            const uint64_t off = pmi_elem(pg, row, QH_LATE(p, a.k_ps), QH_LATE(p, a.k_rs));
            const uint64_t se = pmi_elem(pg, row, QH_LATE(p, a.ks_ps), QH_LATE(p, a.ks_rs));
            float sc = 0.0f;
            if (ok) sc = QH_LATE(p, a.ks)[se] * factor;
            qh_barrier(); /* the previous tile's readers are done */
            sok[tid] = ok ? 1 : 0;
            soff[tid] = off;
            ss[tid] = sc;
            qh_barrier();
            /* 2. the tile's keys once, consecutive threads on one key's words */
            for (int32_t idx = tid; idx < nth * (D / 4); idx += nth) {
                const int32_t key = idx / (D / 4), wd = idx % (D / 4);
                uint32_t w = 0u;
                if (sok[key]) w = pm_word(QH_LATE(p, a.k) + soff[key] + 4 * wd, QH_LATE(p, a.load16) != 0);
                *(uint32_t *)(sk + key * KST + 4 * wd) = w;
            }
            qh_barrier();
            /* 3. position pos for every row of the request */
            const bool live = pos < t_end;
            for (int32_t t = 0; t < QH_LATE(p, a.N); ++t) {
                const int32_t last = pmi_last(L, QH_LATE(p, a.N), t);
                if (base > last && !QH_LATE(p, a.clean)) continue; /* uniform: nothing of the tile to write */
                /* q and weights through vector loads (every lane the same
                 * address): as scalar loads their words exhaust the SGPRs */
                const int32_t bv = qh_as_vector(b);
                const uint8_t *qrow = QH_LATE(p, a.q) + (int64_t)bv * QH_LATE(p, a.q_sb) + (int64_t)t * QH_LATE(p, a.q_sr);
                const uint8_t *qsrc = qrow;
                int32_t qh = QH_LATE(p, a.q_sh);
                bool qal = QH_LATE(p, a.load16) != 0;
                if (QH_LATE(p, a.q_staged)) {
                    if (base <= last) {
                        qh_barrier(); /* the previous row's readers are done */
                        for (int32_t idx = tid; idx < H * (D / 4); idx += nth) {
                            const int32_t h = idx / (D / 4), wd = idx % (D / 4);
                            *(uint32_t *)(sq + h * D + 4 * wd) =
                                pm_word(qrow + (int64_t)h * QH_LATE(p, a.q_sh) + 4 * wd, QH_LATE(p, a.load16) != 0);
                        }
                        qh_barrier();
                    }
                    qsrc = sq;
                    qh = D;
                    qal = true;
                }
                if (!live) continue;
                float *lrow = QH_LATE(p, a.logits) + (int64_t)b * QH_LATE(p, a.l_sb) + (int64_t)t * QH_LATE(p, a.l_sr);
                if (ok && pos <= last) {
                    const float *wrow = QH_LATE(p, a.w) + (int64_t)bv * QH_LATE(p, a.w_sb) + (int64_t)t * QH_LATE(p, a.w_sr);
                    const uint8_t *krow = sk + tid * KST;
                    const float sct = ss[tid];
                    const float outv = pm_score<QF, KF>(qsrc, qh, qal, krow, wrow, sct, H, D);
                    lrow[pos] = outv;
                } else if (QH_LATE(p, a.clean)) {
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

/* ======================================================================
 * The matrix variant: shaders/paged_mqa_logits_matrix.comp in HIP, the
 * same stages in the same order (decode the step's fragments, load the
 * next step, per pass: products, epilogue, one store per (row, key)), the
 * same bounds and NaN rules; read the shader's header first.
 *
 * qattn_paged_mqa_matrix_d<64|128|256>_<reg|shared>
 *   reg: the plan's fragment_layout 1 (fragments built and accumulators
 *   read lane by lane); shared: 0 (both through LDS, as the shader's
 *   LAYOUT 0). One wave of 32 lanes per 16 x key_tiles keys of a step,
 *   plan.subgroups waves; q and weights staged in LDS as the shader stages
 *   them, the plan's shared_bytes in the shader's order (q, weights, then
 *   with LAYOUT 0 the waves' key rows and accumulator tiles).
 *
 * Fragment layouts, per target:
 * NVIDIA twin (mma.sync m16n8k16, two per 16 columns; qh_matrix.h): the
 *   shader's layout exactly, lane l, g = l / 4, t = l % 4: keys g and g + 8
 *   of each 16-key tile, chunk u of 16 bytes at 64u + 16t of the key row,
 *   its word w dim block j = 4u + w at k = 2t, 2t+1 (c0, c2) and 2t+8, 2t+9
 *   (c1, c3). A registers: a[0] = (c0, c2) of key g, a[1] of key g + 8,
 *   a[2] = (c1, c3) of key g, a[3] of key g + 8. B of columns n = g (+ 8):
 *   words at 16j + 2t and 16j + 2t + 8 of the staged column. Accumulator:
 *   keys g, g + 8 at columns 2t, 2t + 1 (+ 8): the shader's epilogue, the
 *   same vec4 of weights.
 * gfx12 (WMMA f32_16x16x16_f16, wave32; qh_matrix.h): lane l, g = l / 16,
 *   c = l % 16 holds key c of each tile (A's row c) and column c (B, C);
 *   its 8 k slots of a block are lane group g's. The lane loads chunks
 *   2u + g of 16 bytes (u < D / 32) of key c; word w of chunk u is block
 *   j = 2u + w / 2, its (c0, c2), (c1, c3) pairs registers 2 (w % 2) and
 *   2 (w % 2) + 1 of the block's A fragment; q is staged so that column c's
 *   16 bytes at 16j + 8g are the same dims (one 16-byte LDS read per B
 *   fragment). The accumulator holds column c of keys 8g .. 8g + 7: the
 *   epilogue is 8 max + 8 FMA with the column's one weight, and the head
 *   sum a reduce-scatter over the 16 columns (xor 8, 4, 2, 1: 8 shuffles
 *   per row and tile) that leaves key 8g + v(c) with the lanes of even c.
 * gfx942 (wave64) has no kernel: the planner's gate (subgroups of 32)
 *   gives it the simt variant.
 * ====================================================================== */
#if defined(QH_NVIDIA) || defined(QH_GFX12)
#define QH_PM_MATRIX 1
/* Fields of the parameter block read where they are used (QH_LATE): held
 * in SGPRs across the step loop, they spilled on gfx12. */
#define PA(f) QH_LATE(p, a.f)
#include "qh_matrix.h"
/* the twin's path: on the twin, and on the wave32 host simulation, where
 * QATTN_HOSTSIM_PAGED_TWIN=1 runs it instead of gfx12's */
#if defined(QH_NVIDIA) || (defined(QH_HOSTSIM) && QH_WAVE == 32)
#define QH_PM_NVL 1
#else
#define QH_PM_NVL 0
#endif
#if defined(QH_GFX12)
#define QH_PM_AMDL 1
#else
#define QH_PM_AMDL 0
#endif

/* Four codes -> the f16 pairs (c0, c2) and (c1, c3), exactly (value x 2^-8
 * fn, 2^-7 fnuz; the kernel's unshift undoes a product's two factors). */
QH_DEV void mx_decode(uint32_t x, uint32_t &lo, uint32_t &hi) {
    lo = ((x << 7) & 0x3F803F80u) | ((x << 8) & 0x80008000u);
    hi = ((x >> 1) & 0x3F803F80u) | (x & 0x80008000u);
}
/* Bit 7 of each byte set where that code is NaN (fn: S.1111.111; fnuz: 0x80). */
QH_DEV uint32_t mx_nan_bytes(uint32_t w, bool fnuz) {
    const uint32_t m = w & 0x7F7F7F7Fu;
    return fnuz ? (w & 0x80808080u & ~(m + 0x7F7F7F7Fu)) : ((m + 0x01010101u) & 0x80808080u);
}
QH_DEV uint32_t mx_shfl_xor_u32(uint32_t v, uint32_t mask) { return qh_shfl_u32(v, qh_lane() ^ mask); }

/* Position pos (< the request's limit): its page id and row, page -1 when
 * it has no slot (paged_mqa_common.glsl's pm_slot). */
QH_DEV void mx_slot(const qh_paged_mqa_params &p, const pm_request &rq, int32_t pos, int32_t &page,
                    int32_t &row) {
    const int32_t e = pmi_entry(rq.begin, pos, p.a.P);
    row = pos % p.a.P;
    page = -1;
    if (e >= 0) {
        const int32_t pg = PA(indices)[e];
        if (pmi_slot_ok(pg, row, p.a.P, PA(n_slots))) page = pg;
    }
}

template <int D, bool LAYOUT, bool NVL> QH_DEV void pm_matrix(const qh_paged_mqa_params &p) {
    constexpr int KM = LAYOUT && D <= 128 ? 2 : 1; /* plan.key_tiles */
    constexpr int NB = D / 16;                     /* 16-dim blocks */
    constexpr int KPL = NVL ? 2 : 1;               /* keys of a tile a lane loads */
    constexpr int NU = NVL ? D / 64 : D / 32;      /* its 16-byte chunks of each */
    QH_DYN_LDS(lds);
    const int32_t HP = PA(head_slots), PR = PA(pass_rows), PASSES = PA(passes), QR = PA(q_row_halves);
    const int32_t NSG = PA(subgroups), NTH = 32 * NSG, KT = 16 * KM * NSG, HT = HP / 16;
    const int32_t NR = p.a.N, H = p.a.H;
    const bool q_fnuz = PA(q_fnuz) != 0, k_fnuz = PA(k_fnuz) != 0;
    uint32_t *qs = (uint32_t *)lds;                            /* staged q, f16 pairs */
    float *wsm = (float *)(lds + (size_t)PR * HP * QR * 2);    /* their weights */
    uint32_t *kst = (uint32_t *)(wsm + (size_t)PR * HP);       /* LAYOUT 0: the waves' key rows */
    float *acs = (float *)(kst + (size_t)NSG * 16 * QR / 2);   /* LAYOUT 0: the waves' accumulator tiles */
    const int32_t tid = (int32_t)qh_tid(), sub = tid / 32, lane = (int32_t)qh_lane();
    const int32_t g = NVL ? lane >> 2 : lane >> 4, t = lane & 3, c = lane & 15;
    const int32_t kreg = sub * 16 * QR, areg = sub * 256;
    const int32_t c0 = pmi_split_begin((int32_t)qh_bid_x(), PA(keys_per_split), p.a.M);
    const int32_t c1 = pmi_split_end(c0, PA(keys_per_split), p.a.M);
    const float QNAN = qh_bits_f32(0x7FC00000u);

    /* Rows [r0, r0 + PR) of request b: one thread per column (see the shader). */
    auto stage_q = [&](int32_t b, int32_t r0) {
        qh_barrier(); /* the previous pass's readers are done */
        for (int32_t col = tid; col < PR * HP; col += NTH) {
            const int32_t r = col / HP, h = col % HP, row = r0 + r;
            const bool real = row < NR && h < H;
            uint32_t nan = 0u;
            const uint8_t *qa = PA(q) + (int64_t)b * PA(q_sb) + (int64_t)(real ? row : 0) * PA(q_sr) +
                                (int64_t)(real ? h : 0) * PA(q_sh);
            for (int32_t uu = 0; uu < D / 16; ++uu) {
                qh_u32x4 x = {0u, 0u, 0u, 0u};
                if (real) x = *(const qh_u32x4 *)(qa + 16 * uu);
                const uint32_t ws[4] = {x.x, x.y, x.z, x.w};
                for (int w = 0; w < 4; ++w) {
                    nan |= mx_nan_bytes(ws[w], q_fnuz);
                    uint32_t lo, hi;
                    mx_decode(ws[w], lo, hi);
                    if (NVL) { /* chunk uu is lane t = uu % 4's chunk uu / 4 */
                        const int32_t at = col * QR + 16 * (4 * (uu >> 2) + w) + 2 * (uu & 3);
                        qs[at / 2] = lo;
                        qs[at / 2 + 4] = hi;
                    } else { /* chunk uu is lane group uu % 2's chunk uu / 2 */
                        const int32_t at = col * QR + 16 * (2 * (uu >> 1) + (w >> 1)) + 8 * (uu & 1) + 4 * (w & 1);
                        qs[at / 2] = lo;
                        qs[at / 2 + 1] = hi;
                    }
                }
            }
            float wv = 0.0f;
            if (real)
                wv = nan != 0u ? QNAN : PA(w)[(int64_t)b * PA(w_sb) + (int64_t)row * PA(w_sr) + h];
            if (LAYOUT && NVL) { /* block h / 16, lane t, component: the shader's */
                const int32_t hb = h % 16;
                wsm[((r * HT + h / 16) * 4 + (hb & 7) / 2) * 4 + (hb & 1) + 2 * (hb >> 3)] = wv;
            } else {
                wsm[col] = wv;
            }
        }
        qh_barrier();
    };

    for (int32_t b = (int32_t)qh_bid_y(); b < p.a.B; b += PA(grid_y)) {
        const pm_request rq = pm_request_of(p, b);
        const int32_t L = rq.L;
        const int32_t t_end = qh_max(c0, qh_min(c1, rq.lim));
        if (PA(clean)) pm_neg_inf(p, b, t_end, c1, tid, NTH);
        if (t_end <= c0) continue; /* uniform: the request has nothing here */
        if (PASSES == 1) stage_q(b, 0);

        int32_t kpage[KM][KPL];
        float ksc[KM][KPL];
        qh_u32x4 kraw[KM][KPL][NU];
        auto load_step = [&](int32_t s0) {
#pragma unroll
            for (int m = 0; m < KM; ++m)
#pragma unroll
                for (int a = 0; a < KPL; ++a) {
                    const int32_t pos = s0 + 16 * (KM * sub + m) + (NVL ? g + 8 * a : c);
                    int32_t page = -1, row = 0;
                    if (pos < t_end) mx_slot(p, rq, pos, page, row);
                    kpage[m][a] = page;
                    ksc[m][a] = 0.0f;
#pragma unroll
                    for (int u = 0; u < NU; ++u) kraw[m][a][u] = qh_u32x4{0u, 0u, 0u, 0u};
                    if (page >= 0) {
                        const uint8_t *ka = PA(k) + pmi_elem(page, row, PA(k_ps), PA(k_rs));
#pragma unroll
                        for (int u = 0; u < NU; ++u)
                            kraw[m][a][u] = *(const qh_u32x4 *)(ka + (NVL ? 64 * u + 16 * t : 16 * (2 * u + g)));
                        ksc[m][a] = PA(ks)[pmi_elem(page, row, PA(ks_ps), PA(ks_rs))];
                    }
                }
        };
        load_step(c0);

        for (int32_t base = c0; base < t_end; base += KT) {
            /* 1. fragments of this step's keys (sign folded, NaN caught) */
            uint32_t ka[KM][NB][4];
            float kscale[KM][KPL]; /* |scale| x unshift, NaN for a key with a NaN code */
            bool kex[KM][KPL];
#pragma unroll
            for (int m = 0; m < KM; ++m) {
                if (!LAYOUT) qh_wave_sync(); /* the previous step's reads of kst are done */
#pragma unroll
                for (int a = 0; a < KPL; ++a) {
                    const uint32_t flip = ksc[m][a] < 0.0f ? 0x80808080u : 0u;
                    uint32_t nan = 0u;
#pragma unroll
                    for (int u = 0; u < NU; ++u) {
                        const uint32_t ws[4] = {kraw[m][a][u].x, kraw[m][a][u].y, kraw[m][a][u].z, kraw[m][a][u].w};
#pragma unroll
                        for (int w = 0; w < 4; ++w) {
                            nan |= mx_nan_bytes(ws[w], k_fnuz);
                            uint32_t lo, hi;
                            mx_decode(ws[w] ^ flip, lo, hi);
                            if (NVL) {
                                const int j = 4 * u + w;
                                if (LAYOUT) {
                                    ka[m][j][a] = lo;
                                    ka[m][j][2 + a] = hi;
                                } else {
                                    const int32_t at = kreg + (g + 8 * a) * QR + 16 * j + 2 * t;
                                    kst[at / 2] = lo;
                                    kst[at / 2 + 4] = hi;
                                }
                            } else {
                                const int j = 2 * u + (w >> 1);
                                if (LAYOUT) {
                                    ka[m][j][2 * (w & 1)] = lo;
                                    ka[m][j][2 * (w & 1) + 1] = hi;
                                } else {
                                    const int32_t at = kreg + c * QR + 16 * j + 8 * g + 4 * (w & 1);
                                    kst[at / 2] = lo;
                                    kst[at / 2 + 1] = hi;
                                }
                            }
                        }
                    }
                    /* the lanes of a key hold its bytes: one flag for all */
                    if (NVL) {
                        nan |= mx_shfl_xor_u32(nan, 1u);
                        nan |= mx_shfl_xor_u32(nan, 2u);
                    } else {
                        nan |= mx_shfl_xor_u32(nan, 16u);
                    }
                    kex[m][a] = kpage[m][a] >= 0;
                    kscale[m][a] = nan != 0u ? QNAN : qh_fabsf(ksc[m][a]) * PA(unshift);
                }
                if (!LAYOUT) {
                    qh_wave_sync();
#pragma unroll
                    for (int j = 0; j < NB; ++j) {
                        if (NVL) {
                            ka[m][j][0] = kst[(kreg + g * QR + 16 * j + 2 * t) / 2];
                            ka[m][j][1] = kst[(kreg + (g + 8) * QR + 16 * j + 2 * t) / 2];
                            ka[m][j][2] = kst[(kreg + g * QR + 16 * j + 2 * t) / 2 + 4];
                            ka[m][j][3] = kst[(kreg + (g + 8) * QR + 16 * j + 2 * t) / 2 + 4];
                        } else {
#pragma unroll
                            for (int r = 0; r < 4; ++r) ka[m][j][r] = kst[(kreg + c * QR + 16 * j + 8 * g) / 2 + r];
                        }
                    }
                }
            }
            /* 2. the next step's keys, in flight during the products */
            if (base + KT < t_end) load_step(base + KT);

            /* 3. every pass: products and epilogue, one store per (row, key) */
            for (int32_t pass = 0; pass < PASSES; ++pass) {
                const int32_t r0 = pass * PR;
                if (PASSES > 1) stage_q(b, r0);
                for (int32_t rr = 0; rr < PR && r0 + rr < NR; ++rr) {
                    const int32_t row = r0 + rr;
                    const int32_t last = pmi_last(L, NR, row);
                    float *lrow = PA(logits) + (int64_t)b * PA(l_sb) + (int64_t)row * PA(l_sr);
                    if (base > last) { /* uniform: the row sees none of the step */
                        if (PA(clean))
                            for (int32_t pos = base + tid; pos < qh_min(base + KT, t_end); pos += NTH)
                                lrow[pos] = qh_neg_inf();
                        continue;
                    }
                    if (LAYOUT) {
                        float part[KM][8];
#pragma unroll
                        for (int m = 0; m < KM; ++m)
#pragma unroll
                            for (int v = 0; v < 8; ++v) part[m][v] = 0.0f;
                        for (int32_t hb = 0; hb < HT; ++hb) {
                            const int32_t col = rr * HP + 16 * hb;
                            if (NVL) {
#if QH_PM_NVL
                                float acc[KM][2][4];
#pragma unroll
                                for (int m = 0; m < KM; ++m)
#pragma unroll
                                    for (int i = 0; i < 8; ++i) acc[m][i >> 2][i & 3] = 0.0f;
#pragma unroll
                                for (int j = 0; j < NB; ++j)
#pragma unroll
                                    for (int hh = 0; hh < 2; ++hh) {
                                        const int32_t at = ((col + g + 8 * hh) * QR + 16 * j + 2 * t) / 2;
                                        const uint32_t b0 = qs[at], b1 = qs[at + 4];
#pragma unroll
                                        for (int m = 0; m < KM; ++m) qh_mma16816(acc[m][hh], ka[m][j], b0, b1);
                                    }
                                const float *w4 = wsm + ((rr * HT + hb) * 4 + t) * 4;
#pragma unroll
                                for (int m = 0; m < KM; ++m)
#pragma unroll
                                    for (int hh = 0; hh < 2; ++hh) {
                                        part[m][0] += w4[2 * hh] * qh_fmaxf(acc[m][hh][0], 0.0f) +
                                                      w4[2 * hh + 1] * qh_fmaxf(acc[m][hh][1], 0.0f);
                                        part[m][1] += w4[2 * hh] * qh_fmaxf(acc[m][hh][2], 0.0f) +
                                                      w4[2 * hh + 1] * qh_fmaxf(acc[m][hh][3], 0.0f);
                                    }
#endif
                            } else {
#if QH_PM_AMDL
                                float acc[KM][8];
#pragma unroll
                                for (int m = 0; m < KM; ++m)
#pragma unroll
                                    for (int v = 0; v < 8; ++v) acc[m][v] = 0.0f;
#pragma unroll
                                for (int j = 0; j < NB; ++j) {
                                    const int32_t at = ((col + c) * QR + 16 * j + 8 * g) / 2;
                                    const uint32_t bq[4] = {qs[at], qs[at + 1], qs[at + 2], qs[at + 3]};
#pragma unroll
                                    for (int m = 0; m < KM; ++m) qh_wmma_f16(ka[m][j], bq, acc[m]);
                                }
                                const float wv = wsm[rr * HP + 16 * hb + c];
#pragma unroll
                                for (int m = 0; m < KM; ++m)
#pragma unroll
                                    for (int v = 0; v < 8; ++v) part[m][v] += wv * qh_fmaxf(acc[m][v], 0.0f);
#endif
                            }
                        }
                        if (NVL) {
                            /* the head sum: the four lanes of a key hold its columns;
                             * lane t stores (tile, key) pair t */
#pragma unroll
                            for (int m = 0; m < KM; ++m)
#pragma unroll
                                for (int a = 0; a < 2; ++a) {
                                    part[m][a] += qh_shfl_xor_f32(part[m][a], 1u);
                                    part[m][a] += qh_shfl_xor_f32(part[m][a], 2u);
                                }
#pragma unroll
                            for (int m = 0; m < KM; ++m)
#pragma unroll
                                for (int a = 0; a < 2; ++a) {
                                    const int32_t pos = base + 16 * (KM * sub + m) + g + 8 * a;
                                    if (2 * m + a != t || pos >= t_end) continue;
                                    if (kex[m][a] && pos <= last) lrow[pos] = part[m][a] * kscale[m][a];
                                    else if (PA(clean)) lrow[pos] = qh_neg_inf();
                                }
                        } else {
                            /* the head sum: a reduce-scatter over the 16 columns
                             * leaves key 8g + v(c) in lanes c, c ^ 1 */
#pragma unroll
                            for (int m = 0; m < KM; ++m) {
                                float r8[8];
#pragma unroll
                                for (int v = 0; v < 8; ++v) r8[v] = part[m][v];
#pragma unroll
                                for (int n = 4; n >= 1; n /= 2) { /* xor 8, 4, 2: halve the values */
                                    const bool upper = (c & (2 * n)) != 0;
#pragma unroll
                                    for (int i = 0; i < n; ++i) {
                                        const float send = upper ? r8[i] : r8[i + n];
                                        const float keep = upper ? r8[i + n] : r8[i];
                                        r8[i] = keep + qh_shfl_xor_f32(send, (uint32_t)(2 * n));
                                    }
                                }
                                r8[0] += qh_shfl_xor_f32(r8[0], 1u);
                                const int32_t v = 4 * ((c >> 3) & 1) + 2 * ((c >> 2) & 1) + ((c >> 1) & 1);
                                const int32_t key = 8 * g + v;
                                const float sc = qh_shfl_f32(kscale[m][0], (uint32_t)key);
                                const uint32_t ex = qh_shfl_u32(kex[m][0] ? 1u : 0u, (uint32_t)key);
                                const int32_t pos = base + 16 * (KM * sub + m) + key;
                                if ((c & 1) == 0 && pos < t_end) {
                                    if (ex && pos <= last) lrow[pos] = r8[0] * sc;
                                    else if (PA(clean)) lrow[pos] = qh_neg_inf();
                                }
                            }
                        }
                    } else {
                        /* LAYOUT 0: each tile through LDS; lane l sums columns
                         * 8 (l / 16) .. of key l % 16 (KM = 1) */
                        const int32_t mykey = lane & 15, hf = lane >> 4;
                        float part = 0.0f;
                        for (int32_t hb = 0; hb < HT; ++hb) {
                            const int32_t col = rr * HP + 16 * hb;
                            if (NVL) {
#if QH_PM_NVL
                                float acc[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
#pragma unroll
                                for (int j = 0; j < NB; ++j)
#pragma unroll
                                    for (int hh = 0; hh < 2; ++hh) {
                                        const int32_t at = ((col + g + 8 * hh) * QR + 16 * j + 2 * t) / 2;
                                        qh_mma16816(acc[hh], ka[0][j], qs[at], qs[at + 4]);
                                    }
#pragma unroll
                                for (int hh = 0; hh < 2; ++hh)
#pragma unroll
                                    for (int i = 0; i < 4; ++i)
                                        acs[areg + (g + 8 * (i >> 1)) * 16 + 8 * hh + 2 * t + (i & 1)] = acc[hh][i];
#endif
                            } else {
#if QH_PM_AMDL
                                float acc[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
                                for (int j = 0; j < NB; ++j) {
                                    const int32_t at = ((col + c) * QR + 16 * j + 8 * g) / 2;
                                    const uint32_t bq[4] = {qs[at], qs[at + 1], qs[at + 2], qs[at + 3]};
                                    qh_wmma_f16(ka[0][j], bq, acc);
                                }
#pragma unroll
                                for (int v = 0; v < 8; ++v) acs[areg + (8 * g + v) * 16 + c] = acc[v];
#endif
                            }
                            qh_wave_sync();
#pragma unroll
                            for (int n = 0; n < 8; ++n)
                                part += wsm[col + 8 * hf + n] * qh_fmaxf(acs[areg + mykey * 16 + 8 * hf + n], 0.0f);
                            qh_wave_sync(); /* readers done before the next tile's store */
                        }
                        part += qh_shfl_xor_f32(part, 16u);
                        /* lanes 0..15 store key lane; its existence and scale are
                         * the lane that loaded it (twin: lane (key % 8) 4, pair
                         * key / 8; gfx12: lane key) */
                        const uint32_t src = NVL ? (uint32_t)(mykey & 7) * 4u : (uint32_t)mykey;
                        const float s0 = qh_shfl_f32(kscale[0][0], src);
                        const float s8 = qh_shfl_f32(kscale[0][KPL - 1], src);
                        const uint32_t e0 = qh_shfl_u32(kex[0][0] ? 1u : 0u, src);
                        const uint32_t e8 = qh_shfl_u32(kex[0][KPL - 1] ? 1u : 0u, src);
                        const bool ex = (NVL && mykey >= 8 ? e8 : e0) != 0u;
                        const float sc = NVL && mykey >= 8 ? s8 : s0;
                        const int32_t pos = base + 16 * sub + mykey;
                        if (hf == 0 && pos < t_end) {
                            if (ex && pos <= last) lrow[pos] = part * sc;
                            else if (PA(clean)) lrow[pos] = qh_neg_inf();
                        }
                    }
                }
            }
        }
    }
}

/* Instantiations: the names the runtime looks up (qh_kernels.def). */
#if defined(QH_NVIDIA)
#define QH_PM_RUN(d, layout, p) pm_matrix<d, layout, true>(p)
#elif QH_PM_NVL
/* The wave32 host simulation runs the twin's path instead of gfx12's when
 * QATTN_HOSTSIM_PAGED_TWIN=1 (hip_hostsim_gfx12_parity_paged_mqa_twin):
 * its logic, bounds and layouts checked on the CPU, its mma.sync emulated
 * from the PTX layout. */
#include <stdlib.h>
static bool pm_sim_twin(void) {
    static int v = -1;
    if (v < 0) {
        const char *e = getenv("QATTN_HOSTSIM_PAGED_TWIN");
        v = e && e[0] == '1';
    }
    return v != 0;
}
#define QH_PM_RUN(d, layout, p) (pm_sim_twin() ? pm_matrix<d, layout, true>(p) : pm_matrix<d, layout, false>(p))
#else
#define QH_PM_RUN(d, layout, p) pm_matrix<d, layout, false>(p)
#endif
#define QH_PM_MX(d, name, layout)                                                                     \
    QH_KERNEL QH_LAUNCH_BOUNDS(128) void qattn_paged_mqa_matrix_d##d##_##name(qh_paged_mqa_params p) { \
        QH_PM_RUN(d, layout, p);                                                                      \
    }
QH_PM_MX(64, reg, true)
QH_PM_MX(64, shared, false)
QH_PM_MX(128, reg, true)
QH_PM_MX(128, shared, false)
QH_PM_MX(256, reg, true)
QH_PM_MX(256, shared, false)
#endif /* QH_PM_MATRIX */
