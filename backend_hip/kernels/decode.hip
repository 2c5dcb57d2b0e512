/*
 * Decode attention over a paged, quantized KV cache (spec section 2), and
 * the split-KV merge. Three kernel families, instantiated at the bottom:
 *
 * qattn_decode_generic_<kv>_d<D>_r<4|8|16>
 *   Every case of the spec. One workgroup per (request, kv head, chunk of
 *   up to 4/8/16 query rows, split); the rows of a chunk are the (row, head)
 *   pairs of one GQA group, so each K/V element loaded serves all of them.
 *   Per tile of `wg` keys: (1) each thread scores one key against the
 *   chunk's queries held in LDS; (2) one wave per query updates the online
 *   softmax; (3) threads own 4 output columns x a key subset and accumulate
 *   P.V. Partials of the key subsets are summed at the end through LDS.
 *
 * qattn_decode_packed_<fn|fnuz>_g<4|8> (wave32: gfx12, and the NVIDIA twin)
 *   The gfx1201 packed FP8 reader: D = 128, one query row, GQA 4 or 8. Each
 *   lane loads its K row half as 16-byte words of four fp8 codes, converts
 *   every word with two packed conversions (v_cvt_pk_f32_fp8, native for
 *   E4M3FN on gfx12; fnuz takes the exact bit path), and both QK^T and PV
 *   run on BF16 WMMA (qh_matrix.h). Four waves take turns over 16-key
 *   blocks and merge their softmax states through LDS.
 *
 * qattn_decode_merge
 *   Combines per-split partial outputs and LSEs (plus sinks).
 *
 * Visibility (spec 2): row r of request b sits at t = L - R + r and sees
 * keys p with 0 <= p <= t and, with a window, p >= t - window_left. A key
 * whose page or slot falls outside the cache is treated as masked rather
 * than read (the host check QATTN_CHECK_INDICES=1 reports such inputs).
 */
#include "qh_device.h"
#include "qh_fp8.h"
#include "qh_lds.h"
#include "qh_matrix.h"
#include "qh_params.h"

/* Element offset a * stride inside one tensor: fits 32 bits unsigned
 * because the validator bounds every tensor to INT32_MAX elements. */
QH_DEV uint32_t off32(int32_t a, int32_t stride) { return (uint32_t)a * (uint32_t)stride; }

/* Page of key `key` of the request whose pages start at kv_indices[page_base]
 * (its row in the page in *row), or -1 when the page table points outside
 * the cache. Branch-free (the index read goes to a clamped position and
 * validity is selected): nested divergent branches cost wave64 a saved exec
 * mask each, and the generic kernel's loop is at the edge of gfx942's
 * scalar register budget. The kernels do not call it when n_pages is 0. */
QH_DEV int32_t dec_page(const qh_decode_params &p, int32_t page_base, int32_t key, int32_t *row) {
    const uint32_t pos = (uint32_t)page_base + (uint32_t)(key / p.page_size);
    const bool pos_ok = page_base >= 0 && pos < (uint32_t)p.n_pages;
    const int32_t page = p.indices[off32(pos_ok ? (int32_t)pos : 0, p.indices_s)];
    *row = key % p.page_size;
    const int64_t slot = (int64_t)page * p.page_size + *row;
    return (pos_ok && page >= 0 && slot < p.n_slots) ? page : -1;
}

/* Element offset of (page, row) in a view with page stride ps and row
 * stride rs: exact in 32 bits inside the cache (qh_params.h). */
QH_DEV uint32_t dec_row_off(int32_t page, int32_t row, uint32_t ps, uint32_t rs) {
    return (uint32_t)page * ps + (uint32_t)row * rs;
}

QH_DEV float dec_softcap(const qh_decode_params &p, float s) {
    return p.softcap > 0.0f ? p.softcap * qh_tanhf(s / p.softcap) : s;
}

/* Key range [*lo, *hi) a block must visit: the union of its rows' visible
 * keys (rows at positions t_first..t_last), cut to its split. Positions fit
 * int32 (kv_lens is i32); the split bounds are formed in int64 first. */
QH_DEV void dec_key_range(const qh_decode_params &p, int32_t t_first, int32_t t_last, int split,
                          int32_t *lo, int32_t *hi) {
    if (p.n_pages == 0) { /* no page table (or no cache): every row is empty */
        *lo = *hi = 0;
        return;
    }
    int64_t a = p.window_left >= 0 ? (int64_t)t_first - p.window_left : 0;
    if (a < 0) a = 0;
    int64_t b = (int64_t)t_last + 1;
    if (p.num_splits > 1) {
        const int64_t s0 = (int64_t)split * p.keys_per_split;
        const int64_t s1 = s0 + p.keys_per_split;
        if (a < s0) a = s0;
        if (b > s1) b = s1;
    }
    *lo = (int32_t)a;
    *hi = (int32_t)(b > a ? b : a);
}

/* Writes one finished (row, head) result: o (and lse) when there is one
 * split, else the split's normalised partial and its LSE. `acc` holds the
 * unnormalised sum of p * v for `ncols` columns starting at `col`. */
QH_DEV void dec_finish(const qh_decode_params &p, int b, int r, int h, int split, int col,
                       int ncols, const float *acc, float m_run, float l_run, bool write_lse) {
    if (p.num_splits > 1) {
        /* the planner's layout: o [B, R, Hq, splits, D], lse [B, R, Hq, splits] */
        const int64_t row = (((int64_t)b * p.R + r) * p.Hq + h) * p.num_splits + split;
        float *wo = QH_LATE(p, ws_o) + row * p.D;
        const float inv = l_run > 0.0f ? 1.0f / l_run : 0.0f;
        for (int c = 0; c < ncols; ++c) wo[col + c] = acc[c] * inv;
        if (write_lse) QH_LATE(p, ws_lse)[row] = l_run > 0.0f ? m_run + qh_logf(l_run) : qh_neg_inf();
        return;
    }
    float scale, lse;
    if (p.flags & QH_DEC_SINKS) {
        const float sink = QH_LATE(p, sinks)[off32(h, p.sinks_s)];
        const float mx = qh_fmaxf(m_run, sink);
        const float e_run = l_run > 0.0f ? qh_expf(m_run - mx) : 0.0f;
        const float z = l_run * e_run + qh_expf(sink - mx);
        scale = e_run / z;
        lse = mx + qh_logf(z);
    } else {
        scale = l_run > 0.0f ? 1.0f / l_run : 0.0f;
        lse = l_run > 0.0f ? m_run + qh_logf(l_run) : qh_neg_inf();
    }
    uint16_t *o = QH_LATE(p, o) + off32(b, p.o_s[0]) + off32(r, p.o_s[1]) + off32(h, p.o_s[2]);
    for (int c = 0; c < ncols; ++c) o[col + c] = qh_f32_to_bf16(acc[c] * scale);
    if (write_lse && (p.flags & QH_DEC_LSE))
        QH_LATE(p, lse)[off32(b, p.lse_s[0]) + off32(r, p.lse_s[1]) + off32(h, p.lse_s[2])] = lse;
}

/* ======================================================================
 * Generic kernel
 * ====================================================================== */
template <int FMT, int D, int MR>
QH_DEV void decode_generic(const qh_decode_params &p) {
    constexpr int ESZ = FMT == QH_BF16 ? 2 : 1;
    constexpr int RPR = MR / 4; /* rows per round of the final reduction */
    __shared__ float q_s[MR][D];
    /* scores, then probabilities (times v_scale); at the end the scratch of
     * the cross-thread reduction (MR/4 rows x wg x 4 floats fit exactly) */
    __shared__ float s_s[MR][QH_DEC_MAX_WG];
    __shared__ int32_t slot_s[QH_DEC_MAX_WG]; /* each key's V row offset, -1 masked */
    __shared__ float vsc_s[QH_DEC_MAX_WG];
    __shared__ float m_s[MR], l_s[MR], alpha_s[MR];

    const int tid = (int)qh_tid();
    const int WG = p.wg;
    const int G = p.Hq / p.Hkv;
    int bx = (int)qh_bid_x();
    const int qc = bx % p.n_qchunks;
    bx /= p.n_qchunks;
    const int kvh = bx % p.Hkv;
    const int b = bx / p.Hkv;
    const int split = (int)qh_bid_y();
    const int m0 = qc * p.rows_per_block;
    const int M = qh_min(p.rows_per_block, G * p.R - m0);

    const int32_t L = p.lens[off32(b, p.lens_s)];
    const int32_t page_base = p.indptr[off32(b, p.indptr_s)];
    /* query m of the chunk is (row r, head h) with m0 + m = r * G + (h - kvh * G);
     * row r sits at position t = L - R + r */
    const int32_t t_base = L - p.R;
    int32_t k_lo, k_hi;
    dec_key_range(p, t_base + m0 / G, t_base + (m0 + M - 1) / G, split, &k_lo, &k_hi);

    const float fk = qh_fp8_factor<FMT>();
    const uint8_t *kbase = p.k + (uint64_t)off32(kvh, p.k_sh) * ESZ;
    const uint8_t *vbase = p.v + (uint64_t)off32(kvh, p.v_sh) * ESZ;
    const float *kscale = FMT != QH_BF16 ? p.k_scale + off32(kvh, p.ks_sh) : nullptr;
    const float *vscale = FMT != QH_BF16 ? p.v_scale + off32(kvh, p.vs_sh) : nullptr;
    const bool vec = (p.flags & QH_DEC_KV_VEC) != 0;

    for (int i = tid; i < MR * D; i += WG) {
        const int m = i / D, d = i % D;
        float x = 0.0f;
        if (m < M) {
            const int qi = m0 + m, r = qi / G, h = kvh * G + qi % G;
            x = qh_bf16_to_f32(p.q[off32(b, p.q_s[0]) + off32(r, p.q_s[1]) + off32(h, p.q_s[2]) + d]);
        }
        q_s[m][d] = x;
    }
    if (tid < MR) {
        m_s[tid] = qh_neg_inf();
        l_s[tid] = 0.0f;
        alpha_s[tid] = 1.0f; /* rows past M are never updated */
    }
    qh_barrier();

    /* phase-3 ownership: 4 columns x every KG-th key of the tile */
    const int NCG = D / 4, KG = WG / NCG;
    const int cg = tid % NCG, kg = tid / NCG;
    float acc_o[MR][4];
    for (int m = 0; m < MR; ++m)
        for (int c = 0; c < 4; ++c) acc_o[m][c] = 0.0f;

    for (int32_t t0 = k_lo; t0 < k_hi; t0 += WG) {
        /* ---- phase 1: one key per thread, scored against all 16 query
         * slots (rows past M hold zeros and are discarded in phase 2) ---- */
        {
            const int32_t key = t0 + tid;
            int32_t row = 0;
            const int32_t page = key < k_hi ? dec_page(p, page_base, key, &row) : -1;
            /* No branch around the loads: an invalid key reads slot 0 (the
             * kernel is not launched with an empty cache) and is masked. */
            const int32_t pg = page >= 0 ? page : 0, rw = page >= 0 ? row : 0;
            const uint8_t *krow = kbase + (uint64_t)dec_row_off(pg, rw, p.k_ps, p.k_rs) * ESZ;
            const float ksc = FMT != QH_BF16 ? kscale[dec_row_off(pg, rw, p.ks_ps, p.ks_rs)] * fk : 1.0f;
            const float vsc = page < 0 ? 0.0f
                              : FMT != QH_BF16 ? vscale[dec_row_off(pg, rw, p.vs_ps, p.vs_rs)] * fk
                                               : 1.0f;
            float dot[MR];
            for (int m = 0; m < MR; ++m) dot[m] = 0.0f;
            /* q is constant over the key loop: read through an opaque offset
             * so the compiler re-reads it from LDS (a broadcast) rather than
             * holding MR x D values in registers across the loop */
            const float *qb = &q_s[0][0] + qh_as_vector(0);
            for (int d = 0; d < D; d += 4) {
                float kv[4];
                qh_kv_load4<FMT>(krow + d * ESZ, vec, kv);
#pragma unroll
                for (int m = 0; m < MR; ++m)
                    for (int j = 0; j < 4; ++j) dot[m] = __builtin_fmaf(qb[m * D + d + j], kv[j], dot[m]);
                /* one step at a time: otherwise the scheduler may issue the
                 * q reads of many steps at once (MR x D registers) */
                qh_sched_barrier();
            }
            const float sc = p.sm_scale * ksc;
#pragma unroll
            for (int m = 0; m < MR; ++m)
                s_s[m][tid] = page >= 0 ? sc * dot[m] : qh_neg_inf();
            /* the key's V row offset (< 2^31 inside the cache), -1 masked */
            slot_s[tid] = page >= 0 ? (int32_t)dec_row_off(pg, rw, p.v_ps, p.v_rs) : -1;
            vsc_s[tid] = vsc;
        }
        qh_barrier();

        /* ---- phase 2: each row's soft cap, mask and online softmax, one
         * wave per row; rows past M become all-zero probabilities ---- */
        {
            const int nw = WG / QH_WAVE, w = tid / QH_WAVE, lane = (int)qh_lane();
            for (int m = w; m < MR; m += nw) {
                if (m >= M) {
                    for (int j = lane; j < WG; j += QH_WAVE) s_s[m][j] = 0.0f;
                    continue;
                }
                const int32_t t = t_base + (m0 + m) / G;
                const int32_t lo = p.window_left >= 0 ? t - p.window_left : INT32_MIN;
                float tmax = qh_neg_inf();
                for (int j = lane; j < WG; j += QH_WAVE) {
                    const int32_t key = t0 + j;
                    float s = s_s[m][j];
                    /* masked (-inf) stays masked: the cap maps -inf to -cap */
                    if (key > t || key < lo || s == qh_neg_inf()) s = qh_neg_inf();
                    else s = dec_softcap(p, s);
                    s_s[m][j] = s;
                    tmax = qh_fmaxf(tmax, s);
                }
                tmax = qh_wave_max(tmax);
                const float m_old = m_s[m];
                const float m_new = qh_fmaxf(m_old, tmax);
                const bool none = m_new == qh_neg_inf();
                const float alpha = none ? 1.0f : qh_expf(m_old - m_new);
                float psum = 0.0f;
                for (int j = lane; j < WG; j += QH_WAVE) {
                    const float s = s_s[m][j];
                    const float e = s == qh_neg_inf() ? 0.0f : qh_expf(s - m_new);
                    psum += e;
                    s_s[m][j] = e * vsc_s[j];
                }
                psum = qh_wave_sum(psum);
                if (lane == 0) {
                    m_s[m] = m_new;
                    l_s[m] = l_s[m] * alpha + psum;
                    alpha_s[m] = alpha;
                }
            }
        }
        qh_barrier();

        /* ---- phase 3: P.V for 4 columns over every KG-th key ---- */
        if (kg < KG) {
#pragma unroll
            for (int m = 0; m < MR; ++m) {
                const float a = alpha_s[m];
                for (int c = 0; c < 4; ++c) acc_o[m][c] *= a;
            }
            for (int kk = kg; kk < WG; kk += KG) {
                const int32_t voff = slot_s[kk];
                if (voff < 0) continue;
                const uint8_t *vrow = vbase + (uint64_t)(uint32_t)voff * ESZ;
                float vv[4];
                qh_kv_load4<FMT>(vrow + cg * 4 * ESZ, vec, vv);
#pragma unroll
                for (int m = 0; m < MR; ++m) {
                    const float pm = s_s[m][kk];
                    for (int c = 0; c < 4; ++c) acc_o[m][c] += pm * vv[c];
                }
            }
        }
        qh_barrier();
    }

    /* ---- sum the KG key subsets, MR/4 rows per round (what the score
     * tile holds), into q_s (free now), then finish every (row, 4 columns)
     * from one loop ---- */
    float *red = &s_s[0][0]; /* [RPR][KG][D] floats = 4 * RPR * wg */
#pragma unroll
    for (int rr = 0; rr < 4; ++rr) {
        if (rr * RPR >= M) break;
        if (kg < KG) {
#pragma unroll
            for (int mi = 0; mi < RPR; ++mi)
                for (int c = 0; c < 4; ++c)
                    red[(mi * KG + kg) * D + cg * 4 + c] = acc_o[rr * RPR + mi][c];
        }
        qh_barrier();
        for (int i = tid; i < RPR * D; i += WG) {
            const int mi = i / D, col = i % D;
            float tot = 0.0f;
            for (int k = 0; k < KG; ++k) tot += red[(mi * KG + k) * D + col];
            q_s[rr * RPR + mi][col] = tot;
        }
        qh_barrier();
    }
    for (int i = tid; i < M * (D / 4); i += WG) {
        const int m = i / (D / 4), col = (i % (D / 4)) * 4;
        const int qi = m0 + m;
        dec_finish(p, b, qi / G, kvh * G + qi % G, split, col, 4, &q_s[m][col], m_s[m], l_s[m],
                   col == 0);
    }
}

/* ======================================================================
 * Packed FP8 kernel (wave32): D = 128, E4M3FN, R = 1, GQA G in {4, 8}
 * ====================================================================== */
#if QH_WAVE == 32
/* bf16 bits of a value converted from fp8 (exact: <= 4 significant bits). */
QH_DEV uint32_t pk_bf16_pair(float lo, float hi) {
    return (qh_f32_bits(lo) >> 16) | (qh_f32_bits(hi) & 0xFFFF0000u);
}

template <int G, int FMT>
QH_DEV void decode_packed(const qh_decode_params &p) {
    constexpr int D = 128, NW = QH_PACKED_WAVES;
    /* Per wave: V^T of its current 16 keys as bf16, [dv][16 keys]. After the
     * key loop the same 16 KiB hold each wave's G x D partial output. */
    __shared__ uint8_t lds[NW * D * 16 * 2] __attribute__((aligned(16)));
    __shared__ float ml_s[NW][2][8]; /* per wave: m and l of each head */
    uint16_t(*vt_s)[D][16] = (uint16_t(*)[D][16])lds;

    const int tid = (int)qh_tid();
    const int w = tid / 32, lane = (int)qh_lane();
    const int g = lane >> 4, c = lane & 15;
    const int kvh = (int)qh_bid_x() % p.Hkv, b = (int)qh_bid_x() / p.Hkv;
    const int split = (int)qh_bid_y();

    const int32_t L = p.lens[off32(b, p.lens_s)];
    const int32_t page_base = p.indptr[off32(b, p.indptr_s)];
    int32_t k_lo, k_hi;
    dec_key_range(p, L - 1, L - 1, split, &k_lo, &k_hi);

    /* Q as the B operand of S^T = K.Q^T: lane (head c, group g), k-step ks,
     * slot e holds q[d = 64g + 8ks + e]. The same d order feeds K's A
     * operand, so each lane reads one contiguous 64-byte half of a K row. */
    uint32_t qb[8][4];
    {
        const uint16_t *qrow = p.q + off32(b, p.q_s[0]) + off32(kvh * G + (c < G ? c : 0), p.q_s[2]);
        for (int ks = 0; ks < 8; ++ks)
            for (int v = 0; v < 4; ++v) {
                const int d = 64 * g + 8 * ks + 2 * v;
                qb[ks][v] = c < G ? ((uint32_t)qrow[d] | ((uint32_t)qrow[d + 1] << 16)) : 0u;
            }
    }

    const uint8_t *kbase = p.k + off32(kvh, p.k_sh);
    const uint8_t *vbase = p.v + off32(kvh, p.v_sh);
    const float *kscale = p.k_scale + off32(kvh, p.ks_sh);
    const float *vscale = p.v_scale + off32(kvh, p.vs_sh);
    const float fk = qh_fp8_factor<FMT>();

    float m_run = qh_neg_inf(), l_part = 0.0f;
    float o_acc[8][8]; /* [dv block][head 8g + v] */
    for (int i = 0; i < 8; ++i)
        for (int v = 0; v < 8; ++v) o_acc[i][v] = 0.0f;

    for (int32_t kb = k_lo + 16 * w; kb < k_hi; kb += 16 * NW) {
        /* this lane's key for the A operand and the V staging: key c */
        const int32_t key = kb + c;
        int32_t row = 0;
        const int32_t page = key < k_hi ? dec_page(p, page_base, key, &row) : -1;
        float my_ksc = 0.0f, my_vsc = 0.0f;
        qh_u32x4 kw[4], vw[4];
        for (int i = 0; i < 4; ++i) {
            kw[i] = qh_u32x4{0u, 0u, 0u, 0u};
            vw[i] = kw[i];
        }
        if (page >= 0) {
            my_ksc = kscale[dec_row_off(page, row, p.ks_ps, p.ks_rs)] * fk;
            my_vsc = vscale[dec_row_off(page, row, p.vs_ps, p.vs_rs)] * fk;
            const qh_u32x4 *kr = (const qh_u32x4 *)(kbase + dec_row_off(page, row, p.k_ps, p.k_rs) + 64 * g);
            const qh_u32x4 *vr = (const qh_u32x4 *)(vbase + dec_row_off(page, row, p.v_ps, p.v_rs) + 64 * g);
            for (int i = 0; i < 4; ++i) {
                kw[i] = kr[i];
                vw[i] = vr[i];
            }
        }

        /* S^T[key][head] over 8 k-steps of 16 dims */
        float s[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
        for (int ks = 0; ks < 8; ++ks) {
            const qh_u32x4 &q4 = kw[ks / 2];
            const uint32_t w0 = (ks & 1) ? q4.z : q4.x, w1 = (ks & 1) ? q4.w : q4.y;
            float f[8];
            qh_fp8x4_to_f32<FMT>(w0, f);
            qh_fp8x4_to_f32<FMT>(w1, f + 4);
            const uint32_t a[4] = {pk_bf16_pair(f[0], f[1]), pk_bf16_pair(f[2], f[3]),
                                   pk_bf16_pair(f[4], f[5]), pk_bf16_pair(f[6], f[7])};
            qh_wmma_bf16(a, qb[ks], s);
        }

        /* lane (head c, group g) now holds keys 8g + v; fetch their scales */
        float tmax = qh_neg_inf();
        float vsc[8];
        for (int v = 0; v < 8; ++v) {
            const uint32_t src = (uint32_t)(8 * g + v);
            const float ksc = qh_shfl_f32(my_ksc, src);
            vsc[v] = qh_shfl_f32(my_vsc, src);
            /* k_lo/k_hi already hold the window; a key is visible iff its slot is valid */
            const bool vis = qh_shfl_u32(page >= 0 ? 1u : 0u, src) != 0u;
            s[v] = vis ? dec_softcap(p, p.sm_scale * s[v] * ksc) : qh_neg_inf();
            tmax = qh_fmaxf(tmax, s[v]);
        }
        tmax = qh_fmaxf(tmax, qh_shfl_xor_f32(tmax, 16u));
        const float m_new = qh_fmaxf(m_run, tmax);
        const bool none = m_new == qh_neg_inf();
        const float alpha = none ? 1.0f : qh_expf(m_run - m_new);
        float psum = 0.0f;
        uint32_t pa[4];
        for (int v = 0; v < 8; v += 2) {
            const float p0 = s[v] == qh_neg_inf() ? 0.0f : qh_expf(s[v] - m_new);
            const float p1 = s[v + 1] == qh_neg_inf() ? 0.0f : qh_expf(s[v + 1] - m_new);
            psum += p0 + p1;
            /* P as the A operand of O = P.V: row = head c, slot e = key 8g+e */
            pa[v / 2] = (uint32_t)qh_f32_to_bf16(p0 * vsc[v]) |
                        ((uint32_t)qh_f32_to_bf16(p1 * vsc[v + 1]) << 16);
        }
        l_part = l_part * alpha + psum;
        m_run = m_new;

        /* stage V^T: lane (key c, half g) writes dims 64g .. 64g+63 */
        for (int i = 0; i < 4; ++i) {
            const uint32_t words[4] = {vw[i].x, vw[i].y, vw[i].z, vw[i].w};
            for (int j = 0; j < 4; ++j) {
                float f[4];
                qh_fp8x4_to_f32<FMT>(words[j], f);
                const int d0 = 64 * g + 16 * i + 4 * j;
                for (int e = 0; e < 4; ++e) vt_s[w][d0 + e][c] = (uint16_t)(qh_f32_bits(f[e]) >> 16);
            }
        }
        qh_wave_sync();

        /* rescale O rows (heads 8g + v) by their heads' alpha */
        for (int v = 0; v < 8; ++v) {
            const float a = qh_shfl_f32(alpha, (uint32_t)(8 * g + v));
            for (int i = 0; i < 8; ++i) o_acc[i][v] *= a;
        }
        /* O[head][dv] += P[head][key] . V[key][dv], 8 blocks of 16 dims */
        for (int i = 0; i < 8; ++i) {
            const qh_u32x4 bv = *(const qh_u32x4 *)&vt_s[w][16 * i + c][8 * g];
            const uint32_t bw[4] = {bv.x, bv.y, bv.z, bv.w};
            qh_wmma_bf16(pa, bw, o_acc[i]);
        }
        qh_wave_sync();
    }

    /* ---- merge the four waves ---- */
    const float l_head = l_part + qh_shfl_xor_f32(l_part, 16u);
    qh_barrier(); /* all waves are done with vt_s */
    float *o_s = (float *)lds; /* [NW][8 heads][D] f32 = 16 KiB */
    if (g == 0 && c < G) {
        ml_s[w][0][c] = m_run;
        ml_s[w][1][c] = l_head;
    }
    for (int v = 0; v < 8; ++v) {
        const int h = 8 * g + v;
        if (h < G)
            for (int i = 0; i < 8; ++i) o_s[(w * 8 + h) * D + 16 * i + c] = o_acc[i][v];
    }
    qh_barrier();
    /* thread t: head t / (128 / G)... every thread finishes G * D / 128 values */
    for (int idx = tid; idx < G * (D / 4); idx += 32 * NW) {
        const int h = idx / (D / 4), col = (idx % (D / 4)) * 4;
        float mx = qh_neg_inf();
        for (int ww = 0; ww < NW; ++ww) mx = qh_fmaxf(mx, ml_s[ww][0][h]);
        float l_tot = 0.0f, acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        for (int ww = 0; ww < NW; ++ww) {
            const float lw = ml_s[ww][1][h];
            if (!(lw > 0.0f)) continue;
            const float e = qh_expf(ml_s[ww][0][h] - mx);
            l_tot += lw * e;
            for (int j = 0; j < 4; ++j) acc[j] += o_s[(ww * 8 + h) * D + col + j] * e;
        }
        dec_finish(p, b, 0, kvh * G + h, split, col, 4, acc, mx, l_tot, col == 0);
    }
}
#endif /* QH_WAVE == 32 */

/* ======================================================================
 * Split-KV merge: one workgroup of 64 threads per (request, row, head)
 * ====================================================================== */
QH_DEV void decode_merge(const qh_decode_params &p) {
    const int tid = (int)qh_tid();
    int64_t idx = qh_bid_x();
    const int h = (int)(idx % p.Hq);
    idx /= p.Hq;
    const int r = (int)(idx % p.R);
    const int b = (int)(idx / p.R);
    /* this (b, r, h)'s splits are consecutive rows of the workspace */
    const int64_t row0 = (((int64_t)b * p.R + r) * p.Hq + h) * p.num_splits;
    const float *lse = p.ws_lse + row0;
    const float *wo = p.ws_o + row0 * p.D;

    const bool has_sink = (p.flags & QH_DEC_SINKS) != 0;
    const float sink = has_sink ? p.sinks[off32(h, p.sinks_s)] : 0.0f;
    float mx = has_sink ? sink : qh_neg_inf();
    for (int s = 0; s < p.num_splits; ++s) mx = qh_fmaxf(mx, lse[s]);
    const bool none = mx == qh_neg_inf();
    float z = has_sink ? qh_expf(sink - mx) : 0.0f;
    for (int s = 0; s < p.num_splits; ++s) {
        const float ls = lse[s];
        if (ls != qh_neg_inf()) z += qh_expf(ls - mx);
    }
    uint16_t *o = p.o + off32(b, p.o_s[0]) + off32(r, p.o_s[1]) + off32(h, p.o_s[2]);
    for (int col = tid; col < p.D; col += 64) {
        float acc = 0.0f;
        if (!none)
            for (int s = 0; s < p.num_splits; ++s) {
                const float ls = lse[s];
                if (ls != qh_neg_inf()) acc += wo[s * p.D + col] * qh_expf(ls - mx);
            }
        o[col] = qh_f32_to_bf16(none ? 0.0f : acc / z);
    }
    if (tid == 0 && (p.flags & QH_DEC_LSE))
        p.lse[off32(b, p.lse_s[0]) + off32(r, p.lse_s[1]) + off32(h, p.lse_s[2])] =
            none ? qh_neg_inf() : mx + qh_logf(z);
}

/* ======================================================================
 * Instantiations: the names the runtime looks up (qh_kernels.def)
 * ====================================================================== */
/* qattn_decode_generic_<kv>_d<D>_r<MR>: MR query rows per workgroup (4, 8
 * or 16), the smallest that holds the plan's rows, so GQA 4 and 8 decode
 * does not pay for 16 rows of registers, FMAs and LDS. */
#define QH_DEC_GENERIC(name, fmt, d, mr)                                                         \
    QH_KERNEL QH_LAUNCH_BOUNDS(QH_DEC_MAX_WG) void qattn_decode_generic_##name##_d##d##_r##mr( \
        qh_decode_params p) {                                                                    \
        decode_generic<fmt, d, mr>(p);                                                           \
    }
#define QH_DEC_GENERIC_ROWS(name, fmt, d) \
    QH_DEC_GENERIC(name, fmt, d, 4)       \
    QH_DEC_GENERIC(name, fmt, d, 8)       \
    QH_DEC_GENERIC(name, fmt, d, 16)

#if !defined(QH_ONLY) || QH_ONLY == 1
QH_DEC_GENERIC_ROWS(bf16, QH_BF16, 64)
QH_DEC_GENERIC_ROWS(bf16, QH_BF16, 128)
QH_DEC_GENERIC_ROWS(bf16, QH_BF16, 256)
QH_DEC_GENERIC_ROWS(i8, QH_I8, 64)
QH_DEC_GENERIC_ROWS(i8, QH_I8, 128)
QH_DEC_GENERIC_ROWS(i8, QH_I8, 256)
#endif
#if !defined(QH_ONLY) || QH_ONLY == 2
QH_DEC_GENERIC_ROWS(fn, QH_FN, 64)
QH_DEC_GENERIC_ROWS(fn, QH_FN, 128)
QH_DEC_GENERIC_ROWS(fn, QH_FN, 256)
QH_DEC_GENERIC_ROWS(fnuz, QH_FNUZ, 64)
QH_DEC_GENERIC_ROWS(fnuz, QH_FNUZ, 128)
QH_DEC_GENERIC_ROWS(fnuz, QH_FNUZ, 256)
#endif

#if !defined(QH_ONLY) || QH_ONLY == 3
QH_KERNEL QH_LAUNCH_BOUNDS(64) void qattn_decode_merge(qh_decode_params p) { decode_merge(p); }

#if QH_WAVE == 32
#define QH_DEC_PACKED(name, fmt, g)                                                            \
    QH_KERNEL QH_LAUNCH_BOUNDS(32 * QH_PACKED_WAVES) void qattn_decode_packed_##name##_g##g( \
        qh_decode_params p) {                                                                  \
        decode_packed<g, fmt>(p);                                                              \
    }
QH_DEC_PACKED(fn, QH_FN, 4)
QH_DEC_PACKED(fn, QH_FN, 8)
QH_DEC_PACKED(fnuz, QH_FNUZ, 4)
QH_DEC_PACKED(fnuz, QH_FNUZ, 8)
#endif
#endif
