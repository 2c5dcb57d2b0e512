/*
 * FP8 MQA logits (spec section 3):
 *   logits[i, j] = sum_h w[i, h] * max(0, k_scale[j] * q[i, h, :] . k[j, :])
 * for ks[i] <= j < ke[i] (clamped to [0, S_kv]); -inf elsewhere when
 * clean_logits, else untouched.
 *
 * Shared geometry (the plan's, launched as planned by hip_mqa_logits.c): a
 * workgroup owns consecutive query rows (staged: `waves * rows_per_wave`,
 * each wave keeping its own; direct: `rows_per_wave`, shared by all waves;
 * a short last block simply has rows past S, which it skips: no host
 * padding) and one grid.y slice of `kv_per_slice` KV columns. Slice bounds are formed so no int32 addition can
 * overflow even when S_kv is near INT32_MAX.
 *
 * qattn_mqa_direct           each lane reads its own K rows from global
 *                            memory; any head dim (64..512); FMA math.
 * qattn_mqa_staged_fma       the block's waves share each 64-column K tile
 *                            through LDS; head dim <= 256; FMA math. The
 *                            portable form of the staged kernel (and what
 *                            the NVIDIA twin runs).
 * qattn_mqa_staged_mfma_d<D> gfx942: the same staging, scores on
 *                            V_MFMA_F32_16X16X32_FP8_FP8 (fnuz; fn inputs
 *                            re-encoded, spec 1, with their scale doubled).
 *                            4 waves x 64 lanes; promises 3 waves per SIMD
 *                            (LDS <= 64 KiB / 3 per block, VGPRs <= 168),
 *                            checked by the code-object qualification.
 * Dot products accumulate in f32: fp8 x fp8 products are exact in f32.
 */
#include "qh_device.h"
#include "qh_fp8.h"
#include "qh_lds.h"
#include "qh_matrix.h"
#include "qh_params.h"

/* Four codes of a runtime-chosen format as f32 (times 1/mqa_factor). */
QH_DEV void mqa_cvt4(uint32_t w, int fmt, float out[4]) {
    if (fmt == QH_FN)
        qh_fp8x4_to_f32<QH_FN>(w, out);
    else
        qh_fp8x4_to_f32<QH_FNUZ>(w, out);
}
QH_DEV float mqa_factor(int fmt) {
    return fmt == QH_FN ? qh_fp8_factor<QH_FN>() : qh_fp8_factor<QH_FNUZ>();
}
/* Four bytes as one word; `al`: the address is 4-byte aligned. */
QH_DEV uint32_t mqa_ld4(const uint8_t *p, bool al) {
    return al ? *(const uint32_t *)p
              : (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

/* Row i's window, clamped to [0, S_kv]; empty when ks >= ke. */
QH_DEV void mqa_window(const qh_mqa_params &p, int32_t i, int32_t *lo, int32_t *hi) {
    int32_t a = p.ks[(uint32_t)i * (uint32_t)p.ks_s];
    int32_t b = p.ke[(uint32_t)i * (uint32_t)p.ke_s];
    a = qh_min(qh_max(a, 0), p.Skv);
    b = qh_min(qh_max(b, 0), p.Skv);
    *lo = a;
    *hi = b > a ? b : a;
}

/* This block's KV columns [*c0, *c1) of slice y, without int32 overflow. */
QH_DEV void mqa_slice(const qh_mqa_params &p, int32_t *c0, int32_t *c1) {
    const int64_t a = (int64_t)qh_bid_y() * p.kv_per_slice;
    const int32_t s0 = (int32_t)(a < p.Skv ? a : p.Skv);
    *c0 = s0;
    *c1 = p.kv_per_slice > p.Skv - s0 ? p.Skv : s0 + p.kv_per_slice;
}

QH_DEV float *mqa_out_row(const qh_mqa_params &p, int32_t i) {
    return p.logits + (uint32_t)i * (uint32_t)p.lg_s;
}

/* One logit by FMA: row i against the K row at `krow` (global or LDS).
 * `ksc` already carries both formats' factors. Heads go 4 at a time so the
 * K row is converted once per 16 dims for 4 heads (wave-uniform q words
 * become scalar loads on AMD; 4 heads keep them within the SGPR budget). */
QH_DEV float mqa_logit_fma(const qh_mqa_params &p, int32_t i, const uint8_t *krow, bool kal,
                           float ksc) {
    /* q and weights through vector loads (every lane the same address): as
     * scalar loads their words exhaust wave64's SGPRs in this loop nest */
    const uint8_t *qrow = p.q + (uint32_t)qh_as_vector(i) * (uint32_t)p.q_s[0];
    const float *wrow = p.weights + (uint32_t)i * (uint32_t)p.w_s[0];
    const bool qal = (p.flags & QH_MQA_ALIGNED4) != 0;
    float out = 0.0f;
    for (int h0 = 0; h0 < p.H; h0 += 4) {
        float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        for (int d = 0; d < p.D; d += 16) {
            float kf[16];
            for (int j = 0; j < 4; ++j) mqa_cvt4(mqa_ld4(krow + d + 4 * j, kal), p.k_fmt, kf + 4 * j);
#pragma unroll
            for (int hh = 0; hh < 4; ++hh) {
                if (h0 + hh < p.H) {
                    const uint8_t *qh = qrow + (uint32_t)(h0 + hh) * (uint32_t)p.q_s[1] + d;
                    for (int j = 0; j < 4; ++j) {
                        float qf[4];
                        mqa_cvt4(mqa_ld4(qh + 4 * j, qal), p.q_fmt, qf);
                        acc[hh] += qf[0] * kf[4 * j] + qf[1] * kf[4 * j + 1] + qf[2] * kf[4 * j + 2] +
                                   qf[3] * kf[4 * j + 3];
                    }
                }
            }
        }
#pragma unroll
        for (int hh = 0; hh < 4; ++hh)
            if (h0 + hh < p.H)
                out += wrow[(uint32_t)(h0 + hh) * (uint32_t)p.w_s[1]] * qh_fmaxf(0.0f, ksc * acc[hh]);
    }
    return out;
}

/* Writes -inf over [a, b) of row i, the lanes of one wave striding. */
QH_DEV void mqa_fill_ninf(const qh_mqa_params &p, int32_t i, int32_t a, int32_t b, int lane) {
    float *o = mqa_out_row(p, i);
    for (int32_t j = a + lane; j < b; j += QH_WAVE) o[j] = qh_neg_inf();
}

/* ======================================================================
 * Direct-load kernel
 * ====================================================================== */
/* Writes -inf over [a, b) of row i, all threads of the workgroup striding. */
QH_DEV void mqa_fill_ninf_block(const qh_mqa_params &p, int32_t i, int32_t a, int32_t b, uint32_t tid,
                                uint32_t nthreads) {
    float *o = mqa_out_row(p, i);
    for (int32_t j = a + (int32_t)tid; j < b; j += (int32_t)nthreads) o[j] = qh_neg_inf();
}

/* The workgroup's `rows_per_wave` rows (the plan's rows per workgroup: for
 * this kernel every wave keeps all of them) are shared by all its threads,
 * which stride over the slice's columns. */
QH_DEV void mqa_direct(const qh_mqa_params &p) {
    const uint32_t tid = qh_tid(), nthreads = (uint32_t)(p.waves * QH_WAVE);
    int32_t c0, c1;
    mqa_slice(p, &c0, &c1);
    const bool kal = (p.flags & QH_MQA_ALIGNED4) != 0;
    const bool clean = (p.flags & QH_MQA_CLEAN) != 0;
    const float f = mqa_factor(p.q_fmt) * mqa_factor(p.k_fmt);
    const int32_t row0 = (int32_t)qh_bid_x() * p.rows_per_wave;
    for (int rr = 0; rr < p.rows_per_wave; ++rr) {
        const int32_t i = row0 + rr;
        if (i >= p.S) break; /* short last block */
        int32_t lo, hi;
        mqa_window(p, i, &lo, &hi);
        const int32_t a = qh_max(lo, c0), b = qh_min(hi, c1);
        if (clean) {
            mqa_fill_ninf_block(p, i, c0, qh_min(a, c1), tid, nthreads);
            mqa_fill_ninf_block(p, i, qh_max(b, c0), c1, tid, nthreads);
        }
        float *o = mqa_out_row(p, i);
        for (int32_t j = a + (int32_t)tid; j < b; j += (int32_t)nthreads) {
            const float ksc = p.k_scale[(uint32_t)j * (uint32_t)p.ksc_s] * f;
            o[j] = mqa_logit_fma(p, i, p.k + (uint32_t)j * (uint32_t)p.k_s, kal, ksc);
        }
    }
}

/* ======================================================================
 * Staged kernels: 4 waves share each 64-column K tile through LDS
 * ====================================================================== */
/* LDS row strides. FMA lanes read 4-byte words of different rows at the
 * same offset: D plus one word puts them in different banks. MFMA lanes
 * read 8-byte fragments: D plus two words keeps them 8-byte aligned (one
 * ds_read_b64 with an immediate offset) and conflict-free for 16 lanes. */
QH_DEV constexpr int mqa_stride_fma(int dmax) { return dmax + 4; }
[[maybe_unused]] QH_DEV constexpr int mqa_stride_mfma(int d) { return d + 8; }

/* Stages K columns [c, c + n) of the tile into `kt` (zero rows past n) and
 * their scales (times both format factors) into `kts`. */
QH_DEV void mqa_stage(const qh_mqa_params &p, uint8_t *kt, int stride, float *kts, int32_t c,
                      int32_t n, float f, uint32_t tid, uint32_t nthreads) {
    const uint8_t *src = p.k + (uint32_t)c * (uint32_t)p.k_s;
    const int align = (p.flags & QH_MQA_ALIGNED4) ? 4 : 1;
    qh_lds_stage_rows(kt, stride, src, (uint32_t)p.k_s, QH_MQA_TILE, n, p.D, align, tid, nthreads);
    for (int j = (int)tid; j < QH_MQA_TILE; j += (int)nthreads)
        kts[j] = j < n ? p.k_scale[(uint32_t)(c + j) * (uint32_t)p.ksc_s] * f : 0.0f;
}

/* Writes the tile's logits of row i: value for in-window columns, -inf for
 * the others when clean. `val[k]` is column c + lane + k * WAVE. */
template <int NC>
QH_DEV void mqa_store_tile(const qh_mqa_params &p, int32_t i, int32_t c, int32_t n, int32_t lo,
                           int32_t hi, const float val[NC], int lane, bool clean) {
    float *o = mqa_out_row(p, i);
    for (int k = 0; k < NC; ++k) {
        const int jj = lane + k * QH_WAVE;
        const int32_t j = c + jj;
        if (jj >= n) continue;
        if (j >= lo && j < hi)
            o[j] = val[k];
        else if (clean)
            o[j] = qh_neg_inf();
    }
}

/* The tile loop both staged kernels share; Score(i, kt, kts, val) fills the
 * wave's values for row i over the staged tile. */
template <int DMAX, int STRIDE, typename Score>
QH_DEV void mqa_staged(const qh_mqa_params &p, Score score) {
    constexpr int NC = QH_MQA_TILE / QH_WAVE;
    __shared__ uint8_t kt[QH_MQA_TILE * STRIDE] __attribute__((aligned(16)));
    __shared__ float kts[QH_MQA_TILE];
    const uint32_t tid = qh_tid(), nthreads = (uint32_t)(QH_MQA_WAVES * QH_WAVE);
    const int lane = (int)qh_lane();
    const int w = qh_uniform((int)(tid / QH_WAVE));
    int32_t c0, c1;
    mqa_slice(p, &c0, &c1);
    const bool clean = (p.flags & QH_MQA_CLEAN) != 0;
    const float f = mqa_factor(p.q_fmt) * mqa_factor(p.k_fmt);
    const int32_t rows_blk = QH_MQA_WAVES * p.rows_per_wave;
    const int32_t blk0 = (int32_t)qh_bid_x() * rows_blk;
    const int32_t row0 = blk0 + w * p.rows_per_wave;
    /* Each row's window once, in LDS, and the union of the block's
     * windows: tiles no row sees are skipped without staging. */
    __shared__ int32_t win_s[QH_MQA_WAVES * 4][2];
    if ((int32_t)tid < rows_blk) {
        int32_t lo = 0, hi = 0;
        if (blk0 + (int32_t)tid < p.S) mqa_window(p, blk0 + (int32_t)tid, &lo, &hi);
        win_s[tid][0] = lo;
        win_s[tid][1] = hi;
    }
    qh_barrier();
    int32_t ulo = p.Skv, uhi = 0;
    for (int32_t r = 0; r < rows_blk; ++r)
        if (win_s[r][0] < win_s[r][1]) {
            ulo = qh_min(ulo, win_s[r][0]);
            uhi = qh_max(uhi, win_s[r][1]);
        }

    for (int32_t c = c0; c < c1; c += QH_MQA_TILE) {
        const int32_t n = qh_min(QH_MQA_TILE, c1 - c);
        if (c + n <= ulo || c >= uhi) { /* no row of the block sees this tile */
            if (clean)
                for (int rr = 0; rr < p.rows_per_wave && row0 + rr < p.S; ++rr)
                    mqa_fill_ninf(p, row0 + rr, c, c + n, lane);
            continue;
        }
        mqa_stage(p, kt, STRIDE, kts, c, n, f, tid, nthreads);
        qh_barrier();
        for (int rr = 0; rr < p.rows_per_wave; ++rr) {
            const int32_t i = row0 + rr;
            if (i >= p.S) break; /* short last block */
            const int32_t lo = win_s[w * p.rows_per_wave + rr][0];
            const int32_t hi = win_s[w * p.rows_per_wave + rr][1];
            float val[NC];
            if (qh_max(lo, c) < qh_min(hi, c + n))
                score(i, (const uint8_t *)kt, (const float *)kts, val);
            else
                for (int k = 0; k < NC; ++k) val[k] = 0.0f;
            mqa_store_tile<NC>(p, i, c, n, lo, hi, val, lane, clean);
        }
        qh_barrier();
    }
}

/* FMA scores from the staged tile: lane owns columns lane + k * WAVE (NC of
 * them). q is decoded once per (row, 4 heads) into the wave's own LDS
 * slice as f32, so lanes read it by broadcast instead of each decoding the
 * same codes; each lane decodes its columns' K codes once per 16 dims and
 * uses them for 4 heads. */
template <int DMAX>
QH_DEV void mqa_staged_fma(const qh_mqa_params &p) {
    constexpr int STRIDE = mqa_stride_fma(DMAX);
    constexpr int NC = QH_MQA_TILE / QH_WAVE;
    constexpr int HC = 4; /* heads per q slice */
    __shared__ float qs[QH_MQA_WAVES][HC][DMAX] __attribute__((aligned(16)));
    const int lane = (int)qh_lane();
    const int w = qh_uniform((int)(qh_tid() / QH_WAVE));
    const bool qal = (p.flags & QH_MQA_ALIGNED4) != 0;
    mqa_staged<DMAX, STRIDE>(p, [&](int32_t i, const uint8_t *kt, const float *kts, float *val) {
        const uint8_t *qrow = p.q + (uint32_t)i * (uint32_t)p.q_s[0];
        const float *wrow = p.weights + (uint32_t)i * (uint32_t)p.w_s[0];
        float out[NC];
        for (int c = 0; c < NC; ++c) out[c] = 0.0f;
        const int dw = p.D / 4; /* words per head row */
        for (int h0 = 0; h0 < p.H; h0 += HC) {
            for (int x = lane; x < HC * dw; x += QH_WAVE) {
                const int hh = x / dw, d4 = x % dw, h = h0 + hh;
                float f[4] = {0.0f, 0.0f, 0.0f, 0.0f};
                if (h < p.H) mqa_cvt4(mqa_ld4(qrow + (uint32_t)h * (uint32_t)p.q_s[1] + 4 * d4, qal), p.q_fmt, f);
                for (int e = 0; e < 4; ++e) qs[w][hh][4 * d4 + e] = f[e];
            }
            qh_wave_sync();
            float acc[HC][NC];
            for (int hh = 0; hh < HC; ++hh)
                for (int c = 0; c < NC; ++c) acc[hh][c] = 0.0f;
            for (int d = 0; d < p.D; d += 16) {
                float kf[NC][16];
                for (int c = 0; c < NC; ++c) {
                    const uint8_t *krow = kt + (lane + c * QH_WAVE) * STRIDE + d;
                    for (int j = 0; j < 4; ++j)
                        mqa_cvt4(*(const uint32_t *)(krow + 4 * j), p.k_fmt, &kf[c][4 * j]);
                }
#pragma unroll
                for (int hh = 0; hh < HC; ++hh) {
                    const float *qv = &qs[w][hh][d];
                    for (int e = 0; e < 16; ++e)
                        for (int c = 0; c < NC; ++c) acc[hh][c] += qv[e] * kf[c][e];
                }
            }
            for (int hh = 0; hh < HC; ++hh) {
                const int h = h0 + hh;
                const float wt = h < p.H ? wrow[(uint32_t)h * (uint32_t)p.w_s[1]] : 0.0f;
                for (int c = 0; c < NC; ++c)
                    out[c] += wt * qh_fmaxf(0.0f, kts[lane + c * QH_WAVE] * acc[hh][c]);
            }
            qh_wave_sync(); /* the slice is rewritten for the next heads */
        }
        for (int c = 0; c < NC; ++c) val[c] = out[c];
    });
}

#if defined(QH_GFX942)
/* 8 consecutive codes of a row as one MFMA operand, re-encoded to fnuz
 * when the tensor is fn (its factor 2 is in the scale). */
QH_DEV uint64_t mfma_operand(uint32_t lo, uint32_t hi, bool fn) {
    if (fn) {
        lo = qh_fn_to_fnuz_x4(lo);
        hi = qh_fn_to_fnuz_x4(hi);
    }
    return (uint64_t)lo | ((uint64_t)hi << 32);
}

/* MFMA scores: per 16-head block, A = Q (heads x 32 dims), B = K^T (32 dims
 * x 16 columns), C lane (column c, group g) = heads 4g..4g+3. Each lane
 * keeps a partial over its 4 heads for each of the 4 column blocks; a
 * reduce-scatter over the 4 lane groups leaves lane l with column l. */
template <int D>
QH_DEV void mqa_staged_mfma(const qh_mqa_params &p) {
    constexpr int KS = D / 32, STRIDE = mqa_stride_mfma(D);
    const int lane = (int)qh_lane();
    const int g = lane >> 4, c = lane & 15;
    const bool qfn = p.q_fmt == QH_FN, kfn = p.k_fmt == QH_FN;
    const bool qal = (p.flags & QH_MQA_ALIGNED4) != 0;
    mqa_staged<D, STRIDE>(p, [&](int32_t i, const uint8_t *kt, const float *kts, float *val) {
        /* B fragments: column cb*16 + c, dims 32ks + 8g... Up to D = 128 the
         * whole tile's fragments stay in registers for all rows and head
         * blocks; at D = 256 that would exceed the 168 VGPRs of 3 waves per
         * SIMD, so they are re-read from LDS per head block instead. */
        constexpr bool cache_k = KS <= 4;
        uint64_t kf[4][cache_k ? KS : 1];
        float ksc[4];
        const uint8_t *kbase = kt + c * STRIDE + 8 * g;
        auto kfrag = [&](int cb, int ks, int koff) -> uint64_t {
            const uint64_t w = *(const uint64_t *)(kbase + koff + cb * 16 * STRIDE + 32 * ks);
            return mfma_operand((uint32_t)w, (uint32_t)(w >> 32), kfn);
        };
        for (int cb = 0; cb < 4; ++cb) {
            if constexpr (cache_k)
                for (int ks = 0; ks < KS; ++ks) kf[cb][ks] = kfrag(cb, ks, 0);
            ksc[cb] = kts[cb * 16 + c];
        }
        const uint8_t *qrow = p.q + (uint32_t)i * (uint32_t)p.q_s[0];
        const float *wrow = p.weights + (uint32_t)i * (uint32_t)p.w_s[0];
        float part[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        for (int h0 = 0; h0 < p.H; h0 += 16) {
            /* an opaque zero: keeps the uncached LDS reads inside this loop
             * (hoisted out they would again need all 64 registers) */
            const int koff = cache_k ? 0 : qh_as_vector(0);
            const int h = h0 + c; /* this lane's A row */
            /* Heads past H (H not a multiple of 16) read head H-1 and are
             * zeroed by select: no divergent branch, no saved exec masks. */
            const bool hvalid = h < p.H;
            const uint8_t *qh = qrow + (uint32_t)qh_min(h, p.H - 1) * (uint32_t)p.q_s[1] + 8 * g;
            uint64_t qf[KS];
            for (int ks = 0; ks < KS; ++ks) {
                const uint64_t v = mfma_operand(mqa_ld4(qh + 32 * ks, qal), mqa_ld4(qh + 32 * ks + 4, qal), qfn);
                qf[ks] = hvalid ? v : 0;
            }
            float wv[4];
            for (int v = 0; v < 4; ++v) {
                const int hv = h0 + 4 * g + v; /* C row v of this lane */
                const float wt = wrow[(uint32_t)qh_min(hv, p.H - 1) * (uint32_t)p.w_s[1]];
                wv[v] = hv < p.H ? wt : 0.0f;
            }
            for (int cb = 0; cb < 4; ++cb) {
                float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
                for (int ks = 0; ks < KS; ++ks)
                    qh_mfma_fp8(qf[ks], cache_k ? kf[cb][cache_k ? ks : 0] : kfrag(cb, ks, koff), acc);
                for (int v = 0; v < 4; ++v) part[cb] += wv[v] * qh_fmaxf(0.0f, ksc[cb] * acc[v]);
            }
        }
        /* reduce-scatter over lane groups: xor 32 then xor 16 */
        const bool lo_half = g < 2;
        float a0 = lo_half ? part[0] : part[2], a1 = lo_half ? part[1] : part[3];
        const float s0 = lo_half ? part[2] : part[0], s1 = lo_half ? part[3] : part[1];
        a0 += qh_shfl_xor_f32(s0, 32u);
        a1 += qh_shfl_xor_f32(s1, 32u);
        const bool odd = (g & 1) != 0;
        float keep = odd ? a1 : a0;
        keep += qh_shfl_xor_f32(odd ? a0 : a1, 16u);
        val[0] = keep; /* column lane of the tile */
    });
}
#endif

/* ======================================================================
 * Coopmat kernels: keys on M, (row, head) pairs on N
 * ======================================================================
 * The HIP twin of shaders/mqa_logits_coopmat.comp, one design in two
 * languages: the same workgroup (RB rows' q staged once as f16 in LDS in the
 * dimension order the fragments need, their weights and windows), the same
 * launch (grid_x strides over row blocks, grid_y slices of kv_tile steps
 * dealt as mqa_slice_tiles does), the same step (a wave loads its own
 * bytes of its keys one step ahead, builds their fragments in registers,
 * meets every n-tile of every row with them, ReLU x weight on the
 * accumulator into per-key partial sums, a reduce-scatter, one coalesced
 * store per row), no barrier after staging.
 *
 * Fragment layouts per target (qh_matrix.h has the AMD ones):
 *
 * NVIDIA twin (QH_NVIDIA; the wave32 host simulation runs it with
 *   QATTN_HOSTSIM_MQA_TWIN=1): mma.sync m16n8k16 f16 -> f32, two per
 *   16x16x16 product, the shader's layout register for register. Keys on M:
 *   lane l, g = l / 4, t = l % 4 holds keys g and g + 8 of each 16-key
 *   m-tile, k 2t, 2t+1, 2t+8, 2t+9 of every 16-dim block j. It reads bytes
 *   [t D/4, (t+1) D/4) of each of its keys; word j is block j, whose codes
 *   c0..c3 decode to (c0, c2) = A register a0/a1 (keys g / g+8) and
 *   (c1, c3) = a2/a3: physical dim t D/4 + 4j + c is logical k = 16j + 2t
 *   + (c >> 1) + 8 (c & 1). B (q of 8 pairs x 16 dims) comes from LDS by
 *   ldmatrix.x4 (two n8 halves, two k8 halves). The accumulator holds keys
 *   g, g+8 x pairs 2t, 2t+1 of each n8 half: four weights per lane and
 *   n-tile, partial sums per key, a reduce-scatter over t (xor 1, 2).
 *
 * gfx12 (WMMA f32_16x16x16_f16, wave32; lane l, g = l / 16, c = l % 16):
 *   the accumulator holds one column per lane, so the product is the
 *   transpose, pairs on M and keys on N, with the same reuse: a lane's K
 *   fragment (B, key c of the 16-key tile) meets every n-tile (now the M
 *   side) of every row, each q fragment (A, from LDS) meets MT key tiles.
 *   B slot e of block j is k = 8 (e/4) + 4g + e%4; lane (g, c) reads bytes
 *   [g D/2, (g+1) D/2) of key c, words 2j, 2j+1 for block j, each decoded
 *   to (c0, c2), (c1, c3) into consecutive slots: physical dim g D/2 +
 *   4 (2j + u) + c is logical k = 16j + 8u + 4g + (c >> 1) + 2 (c & 1).
 *   The accumulator holds key c x pairs 8g .. 8g+7: eight weights per lane
 *   and n-tile, one partial per key tile, a reduce-scatter over g (xor 16).
 *
 * Keys past S_kv load the last key and are never stored. NaN codes decode
 * to finite values (as in the shader).
 */
#if defined(QH_NVIDIA) || defined(QH_GFX12)
#define QH_MQA_CM_BUILT 1
#else
#define QH_MQA_CM_BUILT 0
#endif
#if defined(QH_NVIDIA) || (defined(QH_HOSTSIM) && QH_WAVE == 32)
#define QH_MQA_CM_NVL 1
#else
#define QH_MQA_CM_NVL 0
#endif

/* A counting build (docs/perf_mqa_notes.md, never part of the library):
 * -DQH_MQA_CM_COUNT_H=64 -DQH_MQA_CM_COUNT_RB=2 fix the heads, the rows
 * per workgroup and the 16-byte loads at compile time, as the Vulkan
 * pipeline's specialization constants fix them for the driver's compiler,
 * so the twin's SASS is the code the shader's specialization gets. */
#if defined(QH_MQA_CM_COUNT_H)
#define CM_UNROLL_HEADS _Pragma("unroll") /* the shader unrolls the n-tiles of a row */
#define CM_H(p) QH_MQA_CM_COUNT_H
#define CM_RB(p) QH_MQA_CM_COUNT_RB
#define CM_FLAGS(p) ((p).flags | QH_MQA_ALIGNED16)
#else
#define CM_UNROLL_HEADS
#define CM_H(p) ((p).H)
#define CM_RB(p) ((p).rows_per_wave)
#define CM_FLAGS(p) ((p).flags)
#endif

#if QH_MQA_CM_BUILT
/* Four codes -> the f16 pairs (c0, c2) and (c1, c3), exactly (the value
 * times 2^-8 fn, 2^-7 fnuz). */
QH_DEV void cm_decode(uint32_t x, uint32_t &lo, uint32_t &hi) {
    lo = ((x << 7) & 0x3F803F80u) | ((x << 8) & 0x80008000u);
    hi = ((x >> 1) & 0x3F803F80u) | (x & 0x80008000u);
}

/* 16 bytes at p: one load when aligned16, else words (aligned4) or bytes. */
QH_DEV qh_u32x4 cm_load16(const uint8_t *p, int flags) {
    if (flags & QH_MQA_ALIGNED16) return *(const qh_u32x4 *)p;
    const bool al = (flags & QH_MQA_ALIGNED4) != 0;
    qh_u32x4 r;
    r.x = mqa_ld4(p, al);
    r.y = mqa_ld4(p + 4, al);
    r.z = mqa_ld4(p + 8, al);
    r.w = mqa_ld4(p + 12, al);
    return r;
}
QH_DEV uint32_t cm_word(const qh_u32x4 &v, int i) { return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w; }

/* -inf over columns [a, b) of row i, the workgroup's threads striding
 * (64-bit row base: logits may pass 2^32 elements). */
QH_DEV void cm_fill_ninf(const qh_mqa_params &p, int32_t i, int32_t a, int32_t b, int tid, int nth) {
    float *o = p.logits + (int64_t)i * p.lg_s;
    for (int32_t j = a + tid; j < b; j += nth) o[j] = qh_neg_inf();
}

/* Tiles [first, end) of slice y of `slices` (mqa_logits_common.glsl's
 * mqa_slice_tiles): T tiles dealt out evenly, the first T mod slices one
 * longer. */
QH_DEV void cm_slice_tiles(int32_t y, int32_t slices, int32_t T, int32_t *first, int32_t *end) {
    const int32_t q = T / slices, r = T % slices;
    *first = y * q + qh_min(y, r);
    *end = *first + q + (y < r ? 1 : 0);
}

#if QH_MQA_CM_NVL
/* D = A B + C, m16n8k16 f16 -> f32. */
QH_DEV void cm_mma(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
#if defined(QH_NVIDIA)
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
    /* Emulation from the PTX layout: lane 4g + t computes D[g + 8 (i/2)]
     * [2t + i%2], i < 4; A[row][k] is in lane 4 (row%8) + (k%8)/2, register
     * row/8 + 2 (k/8), half k%2; B[k][n] in lane 4n + (k%8)/2, register k/8,
     * half k%2. */
    uint64_t a01[32], a23[32], bw[32];
    qhsim_wave_gather_u64((uint64_t)a[0] | ((uint64_t)a[1] << 32), a01);
    qhsim_wave_gather_u64((uint64_t)a[2] | ((uint64_t)a[3] << 32), a23);
    qhsim_wave_gather_u64((uint64_t)b0 | ((uint64_t)b1 << 32), bw);
    const uint32_t lane = qh_lane(), g = lane >> 2, t = lane & 3u;
    for (uint32_t i = 0; i < 4; ++i) {
        const uint32_t row = g + 8u * (i >> 1), col = 2u * t + (i & 1u);
        float acc = c[i];
        for (uint32_t k = 0; k < 16; ++k) {
            const uint32_t al = 4u * (row % 8u) + (k % 8u) / 2u, ar = row / 8u + 2u * (k / 8u);
            const uint32_t areg = (uint32_t)((ar < 2 ? a01[al] : a23[al]) >> (32u * (ar & 1u)));
            const uint32_t breg = (uint32_t)(bw[4u * col + (k % 8u) / 2u] >> (32u * (k / 8u)));
            acc += qh_f16_to_f32((uint16_t)(areg >> (16u * (k % 2u)))) *
                   qh_f16_to_f32((uint16_t)(breg >> (16u * (k % 2u))));
        }
        c[i] = acc;
    }
#endif
}

/* ldmatrix.x4 of the 16 pairs x 16 dims at LDS u32 word `w0` (pair rows
 * `rw` words apart): register m of lane (g, t) is pair 8 (m >> 1) + g, dims
 * 8 (m & 1) + 2t, +1: b0, b1 of pairs 0..7, then of pairs 8..15. */
QH_DEV void cm_ldsm_x4(const uint32_t *lds, int w0, int rw, uint32_t b[4]) {
    const uint32_t lane = qh_lane();
#if defined(QH_NVIDIA)
    /* lane l gives the row address of matrix l / 8, row l % 8 */
    const uint32_t m = lane >> 3, r = lane & 7u;
    const uint32_t *at = lds + w0 + (int)(8u * (m >> 1) + r) * rw + 4 * (int)(m & 1u);
    const uint32_t sa = (uint32_t)__cvta_generic_to_shared(at);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3])
                 : "r"(sa));
#else
    const uint32_t g = lane >> 2, t = lane & 3u;
    for (int m = 0; m < 4; ++m) b[m] = lds[w0 + (int)(8 * (m >> 1) + g) * rw + 4 * (m & 1) + (int)t];
#endif
}
#endif

template <int D, bool NVL> QH_DEV void mqa_coopmat(const qh_mqa_params &p) {
    constexpr int MT = D <= 128 ? 2 : 1; /* 16-key tiles per step */
    constexpr int KS = 16 * MT;          /* keys per step (the plan's kv_tile) */
    constexpr int KB = D / 16;           /* 16-dim blocks */
    constexpr int NPMAX = D == 64 ? 288 : D == 128 ? 160 : 80; /* as the shader */
    constexpr int QROW = D + 8; /* halves per staged pair (as the shader) */
    constexpr int QW = QROW / 2;
    /* A lane's bytes per key: D/4 (NVIDIA: 4 lanes per key) or D/2 (gfx12:
     * 2 lanes per key); keys per lane per step: 2 MT or MT. */
    constexpr int LB = NVL ? D / 4 : D / 2;
    constexpr int LV = LB / 16; /* 16-byte loads per key */
    constexpr int NK = NVL ? 2 * MT : MT;
    __shared__ uint32_t qs[NPMAX * QW] __attribute__((aligned(16)));
    __shared__ float wsp[NPMAX] __attribute__((aligned(16)));
    __shared__ int32_t swin[NPMAX / 16][2];

    const int RB = CM_RB(p), H = CM_H(p), HT = H / 16, NSG = p.waves;
    const int flags = CM_FLAGS(p);
    const int nth = NSG * QH_WAVE;
    const int tid = (int)qh_tid(), lane = (int)qh_lane(), sub = qh_uniform(tid / QH_WAVE);
    /* NVIDIA: g = lane / 4, t = lane % 4; gfx12: g = lane / 16, c = lane % 16 */
    const int g = NVL ? lane >> 2 : lane >> 4, t = NVL ? lane & 3 : lane & 15;
    const bool clean = (p.flags & QH_MQA_CLEAN) != 0;
    int32_t sf, se;
    cm_slice_tiles((int32_t)qh_bid_y(), p.grid_y, p.kv_tiles, &sf, &se);
    const int32_t c_lo = sf * KS, c_hi = qh_min(se * KS, p.Skv);
    /* The key this lane stores after the reduce-scatter, and whether it
     * stores one (MT 1: half the lanes). */
    int skey;
    bool slane;
    if constexpr (NVL) {
        skey = MT == 2 ? 16 * (t & 1) + g + 8 * (t >> 1) : g + 8 * (t & 1);
        slane = MT == 2 || t < 2;
    } else {
        skey = MT == 2 ? 16 * g + t : t;
        slane = MT == 2 || g == 0;
    }
    const float unshift = (p.q_fmt == QH_FNUZ ? 128.0f : 256.0f) * (p.k_fmt == QH_FNUZ ? 128.0f : 256.0f);

    for (int32_t rb = (int32_t)qh_bid_x(); rb < p.row_blocks; rb += p.grid_x) {
        const int32_t row0 = rb * RB;
        qh_barrier(); /* the previous block's readers of qs, wsp and swin are done */
        for (int r = tid; r < RB; r += nth) {
            int32_t lo = 0, hi = 0;
            if (row0 + r < p.S) mqa_window(p, row0 + r, &lo, &hi);
            swin[r][0] = lo;
            swin[r][1] = hi;
        }
        for (int x = tid; x < RB * H; x += nth) {
            const int32_t row = row0 + x / H;
            const int h = x % H;
            const float w = row < p.S ? p.weights[(int64_t)row * p.w_s[0] + (int64_t)h * p.w_s[1]] : 0.0f;
            if constexpr (NVL) { /* column c of n-tile x / 16 is 2t' + e % 2 + 8 (e / 2) */
                const int c = x & 15;
                wsp[(x >> 4) * 16 + ((c & 7) >> 1) * 4 + (c & 1) + 2 * (c >> 3)] = w;
            } else {
                wsp[x] = w;
            }
        }
        /* q: 16 codes per thread and pass, decoded into logical order */
        for (int x = tid; x < RB * H * (D / 16); x += nth) {
            const int n = x / (D / 16), c16 = x % (D / 16);
            const int32_t row = row0 + n / H;
            const int h = n % H;
            qh_u32x4 w = {0u, 0u, 0u, 0u};
            if (row < p.S) w = cm_load16(p.q + (int64_t)row * p.q_s[0] + (int64_t)h * p.q_s[1] + 16 * c16, flags);
            for (int e = 0; e < 4; ++e) {
                const int pd = 16 * c16 + 4 * e; /* physical dim of the word's first code */
                uint32_t lo, hi;
                cm_decode(cm_word(w, e), lo, hi);
                if constexpr (NVL) {
                    const int tt = pd / (D / 4), j = (pd % (D / 4)) >> 2;
                    const int o = (n * QROW + 16 * j + 2 * tt) >> 1;
                    qs[o] = lo;
                    qs[o + 4] = hi;
                } else {
                    const int gg = pd / (D / 2), wd = (pd % (D / 2)) >> 2, j = wd >> 1, u = wd & 1;
                    const int o = (n * QROW + 16 * j + 8 * u + 4 * gg) >> 1;
                    qs[o] = lo;
                    qs[o + 1] = hi;
                }
            }
        }
        qh_barrier();
        /* steps meeting the union of the rows' windows; -inf around them */
        int32_t ulo = p.Skv, uhi = 0;
        for (int r = 0; r < RB; ++r)
            if (swin[r][0] < swin[r][1]) {
                ulo = qh_min(ulo, swin[r][0]);
                uhi = qh_max(uhi, swin[r][1]);
            }
        int32_t tf = sf, tl = sf;
        if (ulo < uhi) {
            tf = qh_max(sf, ulo / KS);
            tl = qh_max(tf, qh_min(se, (uhi + KS - 1) / KS));
        }
        if (clean)
            for (int r = 0; r < RB && row0 + r < p.S; ++r) {
                cm_fill_ninf(p, row0 + r, c_lo, qh_min(tf * KS, c_hi), tid, nth);
                cm_fill_ninf(p, row0 + r, qh_max(tl * KS, c_lo), c_hi, tid, nth);
            }

        /* The raw words and scales of one step, loaded one step ahead. Key
         * x of the lane: NVIDIA (mt, a) = (x / 2, x % 2), key 16 mt + g + 8a;
         * gfx12 mt = x, key 16 mt + c. */
        qh_u32x4 rk[NK][LV];
        float rs[NK];
        /* Their offsets inside a step (int32: the planner checks kv_tile x
         * the k and k_scale row strides); a step past S_kv (the last)
         * reads the last key instead. */
        uint32_t koff[NK], soff[NK];
#pragma unroll
        for (int x = 0; x < NK; ++x) {
            const int kr = NVL ? 16 * (x >> 1) + g + 8 * (x & 1) : 16 * x + t;
            koff[x] = (uint32_t)(kr * p.k_s + (NVL ? t : g) * LB);
            soff[x] = (uint32_t)(kr * p.ksc_s);
        }
        auto load_step = [&](int32_t k0) {
            const uint8_t *kb = p.k + (int64_t)k0 * p.k_s;
            const float *sb = p.k_scale + (int64_t)k0 * p.ksc_s;
            if (k0 + KS <= p.Skv) {
#pragma unroll
                for (int x = 0; x < NK; ++x) {
#pragma unroll
                    for (int v = 0; v < LV; ++v) rk[x][v] = cm_load16(kb + koff[x] + 16 * v, flags);
                    rs[x] = sb[soff[x]];
                }
            } else {
#pragma unroll
                for (int x = 0; x < NK; ++x) {
                    const int kr = NVL ? 16 * (x >> 1) + g + 8 * (x & 1) : 16 * x + t;
                    const int key = qh_min(kr, p.Skv - 1 - k0);
                    const uint8_t *at = kb + (uint32_t)(key * p.k_s + (NVL ? t : g) * LB);
#pragma unroll
                    for (int v = 0; v < LV; ++v) rk[x][v] = cm_load16(at + 16 * v, flags);
                    rs[x] = sb[(uint32_t)(key * p.ksc_s)];
                }
            }
        };
        int32_t s = tf + sub;
        if (s < tl) load_step(s * KS);
        for (; s < tl; s += NSG) {
            const int32_t k0 = s * KS;
            /* 1. fragments from the loaded words (their first read), the
             * sign of k_scale folded into the codes */
            uint32_t ka[MT][KB][4];
#pragma unroll
            for (int x = 0; x < NK; ++x) {
                const uint32_t neg = rs[x] < 0.0f ? 0x80808080u : 0u;
#pragma unroll
                for (int j = 0; j < KB; ++j) {
                    if constexpr (NVL) { /* A: a0/a1 lo of keys g / g+8, a2/a3 hi */
                        uint32_t lo, hi;
                        cm_decode(cm_word(rk[x][j >> 2], j & 3) ^ neg, lo, hi);
                        ka[x >> 1][j][x & 1] = lo;
                        ka[x >> 1][j][2 + (x & 1)] = hi;
                    } else { /* B: words 2j, 2j+1 -> slots 0-3, 4-7 */
#pragma unroll
                        for (int u = 0; u < 2; ++u) {
                            const int wd = 2 * j + u;
                            uint32_t lo, hi;
                            cm_decode(cm_word(rk[x][wd >> 2], wd & 3) ^ neg, lo, hi);
                            ka[x][j][2 * u] = lo;
                            ka[x][j][2 * u + 1] = hi;
                        }
                    }
                }
            }
            /* |k_scale| of the key this lane stores, with the decode's powers */
            const int xs = NVL ? (MT == 2 ? 2 * (t & 1) + (t >> 1) : t & 1) : (MT == 2 ? g : 0);
            float ssc = rs[0];
#pragma unroll
            for (int x = 1; x < NK; ++x) ssc = xs == x ? rs[x] : ssc;
            ssc = qh_fabsf(ssc) * unshift;
            /* 3. per row: products, ReLU x weight, the head sum, the store.
             * Kept a loop: unrolled, the compiler re-derives the fragments
             * per row instead of holding them (twice the decode). */
#pragma unroll 1
            for (int r = 0; r < RB; ++r) {
                /* 2. the next step's loads, in flight while this one
                 * computes; issued inside the row loop so the compiler
                 * cannot hoist them above the decode (it would then keep
                 * both steps' words and copy them at the step's end) */
                if (r == 0 && s + NSG < tl) load_step((s + NSG) * KS);
                const int32_t row = row0 + r;
                if (row >= p.S) break;
                const int32_t wlo = swin[r][0], whi = swin[r][1];
                float val = 0.0f;
                if (qh_max(wlo, k0) < qh_min(whi, k0 + KS)) {
                    float part[2 * MT];
#pragma unroll
                    for (int x = 0; x < 2 * MT; ++x) part[x] = 0.0f;
                    CM_UNROLL_HEADS
                    for (int u = 0; u < HT; ++u) {
                        const int nt = r * HT + u;
                        if constexpr (NVL) {
#if QH_MQA_CM_NVL
                            float acc[MT][2][4];
#pragma unroll
                            for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                                for (int i = 0; i < 8; ++i) acc[mt][i >> 2][i & 3] = 0.0f;
#pragma unroll
                            for (int j = 0; j < KB; ++j) {
                                uint32_t b[4];
                                cm_ldsm_x4(qs, nt * 16 * QW + 8 * j, QW, b);
#pragma unroll
                                for (int mt = 0; mt < MT; ++mt) {
                                    cm_mma(acc[mt][0], ka[mt][j], b[0], b[1]);
                                    cm_mma(acc[mt][1], ka[mt][j], b[2], b[3]);
                                }
                            }
                            /* acc[mt][h][i]: key g + 8 (i/2), pair 8h + 2t + i%2, whose
                             * weight is wv[2h + i%2] */
                            const float *wv = &wsp[nt * 16 + 4 * t];
#pragma unroll
                            for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                                for (int h = 0; h < 2; ++h)
#pragma unroll
                                    for (int i = 0; i < 4; ++i)
                                        part[2 * mt + (i >> 1)] += wv[2 * h + (i & 1)] * qh_fmaxf(acc[mt][h][i], 0.0f);
#endif
                        } else {
#if defined(QH_GFX12)
                            float acc[MT][8];
#pragma unroll
                            for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                                for (int v = 0; v < 8; ++v) acc[mt][v] = 0.0f;
#pragma unroll
                            for (int j = 0; j < KB; ++j) {
                                /* A: pair 16 nt + c, k 16j + 4g .. +3 and 16j + 8 + 4g .. +3 */
                                const int o = (nt * 16 + t) * QW + 8 * j + 2 * g;
                                const qh_u32x2 lo = *(const qh_u32x2 *)&qs[o];
                                const qh_u32x2 hi = *(const qh_u32x2 *)&qs[o + 4];
                                const uint32_t a[4] = {lo.x, lo.y, hi.x, hi.y};
#pragma unroll
                                for (int mt = 0; mt < MT; ++mt) qh_wmma_f16(a, ka[mt][j], acc[mt]);
                            }
                            /* acc[mt][v]: pair 16 nt + 8g + v, key 16 mt + c */
                            const float *wv = &wsp[nt * 16 + 8 * g];
#pragma unroll
                            for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                                for (int v = 0; v < 8; ++v) part[mt] += wv[v] * qh_fmaxf(acc[mt][v], 0.0f);
#endif
                        }
                    }
                    if constexpr (NVL) {
                        /* reduce-scatter over the key's four lanes (t): lane t
                         * ends with part[2 (t & 1) + (t >> 1)] (MT 1: part[t & 1]) */
                        const bool odd = (t & 1) != 0;
                        if constexpr (MT == 2) {
                            float k0v = odd ? part[2] : part[0], k1v = odd ? part[3] : part[1];
                            k0v += qh_shfl_xor_f32(odd ? part[0] : part[2], 1u);
                            k1v += qh_shfl_xor_f32(odd ? part[1] : part[3], 1u);
                            const bool hi2 = (t & 2) != 0;
                            val = (hi2 ? k1v : k0v) + qh_shfl_xor_f32(hi2 ? k0v : k1v, 2u);
                        } else {
                            val = (odd ? part[1] : part[0]) + qh_shfl_xor_f32(odd ? part[0] : part[1], 1u);
                            val += qh_shfl_xor_f32(val, 2u);
                        }
                    } else {
                        /* over the two lane groups (g): lane g keeps key tile g */
                        if constexpr (MT == 2)
                            val = (g ? part[1] : part[0]) + qh_shfl_xor_f32(g ? part[0] : part[1], 16u);
                        else
                            val = part[0] + qh_shfl_xor_f32(part[0], 16u);
                    }
                }
                const int32_t j = k0 + skey;
                if (slane && j < c_hi) {
                    const bool seen = j >= wlo && j < whi;
                    if (seen || clean) p.logits[(int64_t)row * p.lg_s + j] = seen ? val * ssc : qh_neg_inf();
                }
            }
        }
    }
}
#endif /* QH_MQA_CM_BUILT */

/* ======================================================================
 * Instantiations
 * ====================================================================== */
QH_KERNEL QH_LAUNCH_BOUNDS(8 * QH_WAVE) void qattn_mqa_direct(qh_mqa_params p) { mqa_direct(p); }

QH_KERNEL QH_LAUNCH_BOUNDS(QH_MQA_WAVES * QH_WAVE) void qattn_mqa_staged_fma(qh_mqa_params p) {
    mqa_staged_fma<256>(p);
}

#if QH_MQA_CM_BUILT
#if defined(QH_NVIDIA)
#define QH_MQA_CM_RUN(d, p) mqa_coopmat<d, true>(p)
#elif QH_MQA_CM_NVL
/* The wave32 host simulation runs the NVIDIA path instead of gfx12's when
 * QATTN_HOSTSIM_MQA_TWIN=1 (hip_hostsim_gfx12_parity_mqa_logits_twin): the
 * twin's logic, bounds and layouts checked on the CPU, mma.sync and
 * ldmatrix emulated from the PTX layouts. */
#include <stdlib.h>
static bool cm_sim_twin(void) {
    static int v = -1;
    if (v < 0) {
        const char *e = getenv("QATTN_HOSTSIM_MQA_TWIN");
        v = e && e[0] == '1';
    }
    return v != 0;
}
#define QH_MQA_CM_RUN(d, p) (cm_sim_twin() ? mqa_coopmat<d, true>(p) : mqa_coopmat<d, false>(p))
#else
#define QH_MQA_CM_RUN(d, p) mqa_coopmat<d, false>(p)
#endif
#define QH_MQA_CM(d) \
    QH_KERNEL QH_LAUNCH_BOUNDS(4 * QH_WAVE) void qattn_mqa_coopmat_d##d(qh_mqa_params p) { QH_MQA_CM_RUN(d, p); }
QH_MQA_CM(64)
QH_MQA_CM(128)
QH_MQA_CM(256)
#endif

#if defined(QH_GFX942)
#define QH_MQA_MFMA(d)                                                                     \
    QH_KERNEL QH_LAUNCH_BOUNDS(QH_MQA_WAVES * QH_WAVE)                                     \
    QH_WAVES_PER_SIMD(3) void qattn_mqa_staged_mfma_d##d(qh_mqa_params p) {                \
        mqa_staged_mfma<d>(p);                                                             \
    }
QH_MQA_MFMA(64)
QH_MQA_MFMA(128)
QH_MQA_MFMA(256)
#endif
