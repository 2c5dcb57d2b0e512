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
 * Instantiations
 * ====================================================================== */
QH_KERNEL QH_LAUNCH_BOUNDS(8 * QH_WAVE) void qattn_mqa_direct(qh_mqa_params p) { mqa_direct(p); }

QH_KERNEL QH_LAUNCH_BOUNDS(QH_MQA_WAVES * QH_WAVE) void qattn_mqa_staged_fma(qh_mqa_params p) {
    mqa_staged_fma<256>(p);
}

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
