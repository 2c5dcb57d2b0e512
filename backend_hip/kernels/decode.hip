/*
 * Decode attention over a paged, quantized KV cache (spec section 2): the
 * tiled design of docs/design.md ("Decode"), the same tiling, workspace
 * layout and index rules as shaders/decode_tiled.comp and
 * shaders/decode_merge.comp, launched from the same plan
 * (core/src/plan_decode.c; src/hip_decode_launch.c maps it).
 *
 * Unlike the Vulkan kernel, every key looks up its own page here, also
 * for plans whose tiles are rows of one page (plan.page_tiled): that path
 * is correct for any page size, and the Vulkan kernel's one-page-id path
 * cost gfx942's matrix kernels one or two spilled SGPRs and gfx12's simt
 * D 256 kernels a VGPR (hip_qualify_code_objects), and it buys no speed
 * through Vulkan either (docs/perf_decode_notes.md).
 *
 * qattn_decode_tiled_<simt|matrix>_<kv>_<d<D>|g<M>>  (stage 1)
 *   _d<D>: head dims D = Dv = D compiled in (64, 128, 256); _g<M>: the
 *   generic kernel for any other D (q, K) and Dv (V, o), multiples of 16
 *   with max(D, Dv) <= M, read from the parameter block. q is bf16 or f16
 *   (t.flags); kv formats bf16, int8, fp8 e4m3fn / e4m3fnuz / e5m2.
 *   One workgroup is one wave (QH_WAVE lanes = plan.workgroup_size) and
 *   handles one (split, kv head, block of QH query heads, request): grid
 *   (num_splits, kv heads x head blocks, batch). Its ROWS = QH * R query rows
 *   are the N columns of S^T = K Q^T and O^T = V^T P^T (NR = row_slots >=
 *   ROWS; padding columns are computed and never read). Keys go through in
 *   tiles of TK = 16:
 *     1. the tile's K and V rows (loads of plan.load_bytes, issued one tile
 *        ahead and page ids two tiles ahead where the registers allow, see
 *        PREF below) are decoded to f16 in LDS: fp8 by
 *        shifts and masks, two codes per integer operation, exact (the power
 *        of two left over, 2^8 fn / 2^7 fnuz, is folded into the per-key
 *        scales and the merge's vf; an e5m2 code is its f16's top byte);
 *        int8 by the 1024 + c trick, exact; bf16 stays raw (simt only);
 *     2. S^T (16 keys x NR rows) on the matrix unit (matrix: MFMA f16 on
 *        gfx942, WMMA f16 on gfx12, nvcuda::wmma on the NVIDIA twin) or by
 *        lanes (simt), q held as f16 with a per-row power of two;
 *     3. online softmax by lanes (log2 units; lane l owns row l % 16 and
 *        TK / (wave / 16) keys, so each lane keeps one running max and sum):
 *        per-key scales, soft cap,
 *        masks, running max m and partial sums l, P^T = p * v_scale in f16
 *        (e5m2: times 2^8, taken back from the partials: PSF below) and
 *        per row the factor alpha;
 *     4. O^T = O^T * alpha + V^T P^T.
 *   Every workgroup writes its unnormalised O^T (staged dim order), m and l
 *   for all NR row slots to the workspace: o [slot][split][Dv] f32 at
 *   plan.partial_o_offset, (m, l) [slot][split][2] at partial_ml_offset.
 *   LDS is dynamic: exactly plan.shared_bytes (QH_DEC_LDS_BYTES).
 *
 * qattn_decode_merge
 *   One workgroup of plan.merge_workgroup_size threads per output row and
 *   chunk of plan.merge_dims staged dims (grid: G * R * Dv / merge_dims, kv
 *   heads, batch) combines the splits with the sink, writes its dims of o in
 *   bf16 or f16 (m.flags; dims back in order) and, the first chunk, the LSE.
 *
 * Indices read from memory are bounded before anything is addressed (spec 2,
 * as the reference's visible_slots): key p of request b exists only where
 * its kv_indices entry kv_indptr[b] + p / P lies in [kv_indptr[b],
 * min(kv_indptr[b + 1], n_indices)) and is >= 0, its page id is >= 0 and its
 * slot < n_slots; the last split runs to the request's end, so kv_lens
 * beyond max_kv_len is computed exactly.
 *
 * Layout convention (PERM, fp8 and int8): a word of four codes decodes to
 * the f16 pairs (c0, c2) and (c1, c3), so positions 1 and 2 of every four
 * dims are swapped in LDS; q is staged with the same swap and the merge
 * swaps the output back.
 */
#include "qh_device.h"
#include "qh_matrix.h"
#include "qh_params.h"
#if defined(QH_NVIDIA)
#include <mma.h>
#endif

#define TK QH_DEC_TK
#define SG QH_WAVE
static_assert(SG >= TK, "a tile's keys are one lane each");

#define LOG2E 1.4426950408889634f
#define LN2 0.6931471805599453f

/* wave64 (gfx942) and the simt loops run out of scalar registers first,
 * the wave32 matrix kernel out of vector ones: uniform values that may live
 * in either go to vector registers where scalar ones are scarcer. */
template <bool V> QH_DEV int32_t dec_vreg(int32_t v) { return V ? qh_as_vector(v) : v; }
template <bool V> QH_DEV float dec_vregf(float v) { return V ? qh_bits_f32((uint32_t)qh_as_vector((int32_t)qh_f32_bits(v))) : v; }

/* Staged position sp of a PERM row holds dim dim_of(sp) (an involution). */
QH_DEV int dec_perm(int sp) { return (sp & ~3) | ((sp & 1) << 1) | ((sp >> 1) & 1); }

/* 2^k for k in [-126, 127]. */
QH_DEV float dec_pow2(int k) { return qh_bits_f32((uint32_t)(k + 127) << 23); }
/* x * 2^e for e in [-252, 254], exact where the result is a normal f32. */
QH_DEV float dec_ldexp(float x, int e) {
    const int e1 = e / 2;
    return x * dec_pow2(e1) * dec_pow2(e - e1);
}
/* The exponent ex of frexp (x = f 2^ex, f in [0.5, 1)) of a finite x > 0. */
QH_DEV int dec_frexp_exp(float x) {
    uint32_t u = qh_f32_bits(x);
    int bias = 126;
    if (((u >> 23) & 0xFFu) == 0u) { /* subnormal: scale into the normal range */
        u = qh_f32_bits(x * 0x1p64f);
        bias += 64;
    }
    return (int)((u >> 23) & 0xFFu) - bias;
}

QH_DEV float dec_tanh(float x) { /* overflow-safe, as common_tiled.glsl's */
    const float e = qh_exp2f(-2.0f * LOG2E * qh_fabsf(x));
    const float t = (1.0f - e) / (1.0f + e);
    return x < 0.0f ? -t : t;
}

/* 16 bytes of a K/V row (16-byte aligned when vec is 16) in loads of vec
 * bytes. */
QH_DEV qh_u32x4 dec_load16(const uint8_t *a, int vec) {
    if (vec >= 16) return *(const qh_u32x4 *)a;
    if (vec == 8) {
        const qh_u32x2 x = ((const qh_u32x2 *)a)[0], y = ((const qh_u32x2 *)a)[1];
        return qh_u32x4{x.x, x.y, y.x, y.y};
    }
    if (vec == 4) {
        const uint32_t *w = (const uint32_t *)a;
        return qh_u32x4{w[0], w[1], w[2], w[3]};
    }
    uint32_t w[4];
    for (int j = 0; j < 4; ++j) {
        if (vec == 2) {
            const uint16_t *h = (const uint16_t *)(a + 4 * j);
            w[j] = (uint32_t)h[0] | ((uint32_t)h[1] << 16);
        } else {
            const uint8_t *c = a + 4 * j;
            w[j] = (uint32_t)c[0] | ((uint32_t)c[1] << 8) | ((uint32_t)c[2] << 16) | ((uint32_t)c[3] << 24);
        }
    }
    return qh_u32x4{w[0], w[1], w[2], w[3]};
}

/* 16 cache bytes -> 8 words of f16 pairs in the PERM order (fp8, int8). */
template <int FMT> QH_DEV void dec_decode16(const qh_u32x4 &w4, uint32_t o[8]) {
    const uint32_t w[4] = {w4.x, w4.y, w4.z, w4.w};
    for (int j = 0; j < 4; ++j) {
        const uint32_t x = w[j];
        if constexpr (FMT == QH_E5M2) {
            /* an e5m2 code is the top byte of its f16: exact, no factor */
            o[2 * j] = (x << 8) & 0xFF00FF00u; /* codes 0, 2 */
            o[2 * j + 1] = x & 0xFF00FF00u;    /* codes 1, 3 */
        } else if constexpr (FMT == QH_I8) {
            /* (c ^ 0x80) | 0x6400 is the f16 1024 + c + 128: exact; 1152 is
             * subtracted in f16 (exact too) */
            o[2 * j] = qh_f16x2_sub(((x & 0x00FF00FFu) ^ 0x00800080u) | 0x64006400u, 1152.0f);
            o[2 * j + 1] = qh_f16x2_sub((((x >> 8) & 0x00FF00FFu) ^ 0x00800080u) | 0x64006400u, 1152.0f);
        } else {
            o[2 * j] = ((x << 7) & 0x3F803F80u) | ((x << 8) & 0x80008000u); /* codes 0, 2 */
            o[2 * j + 1] = ((x >> 1) & 0x3F803F80u) | (x & 0x80008000u);    /* codes 1, 3 */
        }
    }
}

/* Two staged elements of a word as f32 (f16 pairs, or raw bf16 pairs). */
template <int FMT> QH_DEV void dec_unpack2(uint32_t w, float *x, float *y) {
    if constexpr (FMT == QH_BF16) {
        *x = qh_bits_f32(w << 16);
        *y = qh_bits_f32(w & 0xFFFF0000u);
    } else {
        *x = qh_f16_to_f32((uint16_t)(w & 0xFFFFu));
        *y = qh_f16_to_f32((uint16_t)(w >> 16));
    }
}

/* Max / sum over the lanes of one softmax row: lanes n, n + 16, ... (xor
 * offsets 16, 32 keep the exchange inside the row). Every lane calls. */
QH_DEV float dec_row_max(float x) {
    for (int o = 16; o < SG; o <<= 1) x = qh_fmaxf(x, qh_shfl_xor_f32(x, (uint32_t)o));
    return x;
}
QH_DEV float dec_row_sum(float x) {
    for (int o = 16; o < SG; o <<= 1) x += qh_shfl_xor_f32(x, (uint32_t)o);
    return x;
}

/* Whether this build has a matrix path for the tiled kernel. */
#if defined(QH_GFX942) || defined(QH_GFX12) || defined(QH_NVIDIA)
#define QH_DEC_HAVE_MATRIX 1
#else
#define QH_DEC_HAVE_MATRIX 0
#endif

/* ======================================================================
 * Stage 1
 * ====================================================================== */
/* DKM, DVM: the head dims of q/K and of V/o, exactly (GEN false), or the
 * bounds of the run-time dims p.head_dim, p.head_dim_v (GEN true: the
 * generic kernels). Every loop over dims runs to the bound with a uniform
 * guard, so the exact kernels fold to their constants. */
template <int FMT, int DKM, int DVM, int MAT, bool GEN>
QH_DEV void decode_tiled(const qh_decode_params &p) {
    constexpr int ES = FMT == QH_BF16 ? 2 : 1;
    constexpr bool PERM = FMT != QH_BF16;
    constexpr float KF = FMT == QH_FNUZ ? 128.0f : FMT == QH_FN ? 256.0f : 1.0f;
    /* e5m2's v scales (amax / 57344 from the KV store) are 2^7 below fn's:
     * P^T = p * v_scale * PSF keeps them in f16's normal range as fn's are,
     * and the partials take 1 / PSF back (exact powers of two). */
    constexpr float PSF = FMT == QH_E5M2 ? 256.0f : 1.0f;
    /* Generic kernels on wave64: the run-time dims and everything formed
     * from them (LDS offsets, row lengths) live in vector registers, where
     * the wave has room, not in the scalar ones the loop's addresses need
     * (they spill otherwise). Wave32 runs out of vector registers first. */
    constexpr bool GVEC = GEN && QH_WAVE == 64;
    const int D = GEN ? dec_vreg<GVEC>(p.head_dim) : DKM, DV = GEN ? dec_vreg<GVEC>(p.head_dim_v) : DVM;
    const int NKF = D / 16, NVF = DV / 16; /* 16-dim fragments of q/K and of V */
    const int CPKK = dec_vreg<GVEC>(D * ES / 16), CPKV = dec_vreg<GVEC>(DV * ES / 16); /* 16-byte chunks per K / V row */
    constexpr int NCHK = (TK * (DKM * ES / 16) + SG - 1) / SG; /* chunks per lane per tile, at most */
    constexpr int NCHV = (TK * (DVM * ES / 16) + SG - 1) / SG;
    constexpr int NCH = NCHK > NCHV ? NCHK : NCHV;
    const int LD4K = dec_vreg<GVEC>(QH_DEC_LD4(D)), LD4V = dec_vreg<GVEC>(QH_DEC_LD4(DV)); /* 16-byte words per staged row */
    const int LWK = LD4K * 4, LWV = LD4V * 4;              /* 32-bit words per staged row */
    (void)LWV; /* the AMD paths index V by it */
    constexpr int LDP = QH_DEC_LDP;                 /* f16 per row of P^T */
    /* softmax: lane l owns row l % 16 and keys KPL (l / 16) .. + KPL - 1 */
    constexpr int LPR = SG / QH_DEC_MAX_NR;         /* lanes per softmax row */
    constexpr int KPL = TK / LPR;                   /* keys per lane in the softmax */
    static_assert(KPL * LPR == TK && KPL % 2 == 0, "softmax mapping");
    constexpr bool HAS_SCALES = FMT != QH_BF16;
    constexpr bool VREG = QH_WAVE == 64 || MAT == 0 || GEN; /* dec_vreg: the views' strides */
    constexpr bool VREG2 = QH_WAVE == 64 || (MAT == 0 && DKM < 256) || GEN; /* the softmax's scalars */
    static_assert(MAT == 0 || FMT != QH_BF16, "bf16 caches stay simt");

    /* matrix: 16 row slots (the shape the kernels issue; the host checks
     * the plan), a constant, so every LDS offset below is one too */
    const int NR = MAT ? 16 : p.m.NR, R = p.m.R, QH = p.m.QH, ROWS = QH * R;

    QH_DYN_LDS(lds_);
    /* simt: the offsets depend on the run-time row count; held in vector
     * registers, the scalar ones are what the loop's addresses need */
    unsigned char *lds = lds_ + (MAT && !GEN ? 0 : qh_as_vector(0));
    qh_u32x4 *sq4 = (qh_u32x4 *)lds;                             /* q rows, f16 * 2^e */
    uint32_t *sq = (uint32_t *)lds;
    qh_u32x4 *skt4 = (qh_u32x4 *)(lds + QH_DEC_OFF_SKT(D, DV, NR)); /* K tile */
    uint32_t *skt = (uint32_t *)skt4;
    qh_u32x4 *svt4 = (qh_u32x4 *)(lds + QH_DEC_OFF_SVT(D, DV, NR)); /* V tile */
    uint32_t *svt = (uint32_t *)svt4;
    float *ss = (float *)(lds + QH_DEC_OFF_SS(D, DV, NR));          /* S^T [key][row], then alpha */
    float *sqf = (float *)(lds + QH_DEC_OFF_SQF(D, DV, NR));        /* 2^-e of each row */
    float *sks = (float *)(lds + QH_DEC_OFF_SKS(D, DV, NR));        /* k scale * KF (0: no key) */
    float *svs = (float *)(lds + QH_DEC_OFF_SVS(D, DV, NR));        /* v scale */
    int32_t *spos = (int32_t *)(lds + QH_DEC_OFF_SPOS(D, DV, NR));  /* key position, -1: none */
    uint16_t *sp = (uint16_t *)(lds + QH_DEC_OFF_SP(D, DV, NR));    /* P^T [row][key] f16 */

    const int lane = (int)qh_lane();
    const int split = (int)qh_bid_x();
    const int G = p.t.hq / p.t.hkv;
    const int nrb = G / QH;
    const int g = (int)qh_bid_y() / nrb, rb = (int)qh_bid_y() % nrb;
    const int h0 = g * G + rb * QH;
    const int b = (int)qh_bid_z();

    /* ---- the request's keys, bounded ---- */
    const int64_t L = p.t.lens[(int64_t)b * p.t.lens_s];
    const int32_t ip0 = p.t.indptr[(int64_t)b * p.t.indptr_s];
    const int32_t ip1 = qh_min(p.t.indptr[(int64_t)(b + 1) * p.t.indptr_s], p.t.n_indices);
    /* keys below the capacity of the request's entries may exist (an empty
     * cache holds none) */
    const int64_t cap = (int32_t)QH_LOW32(p, t.n_slots) > 0 ? qh_min(qh_max((int64_t)ip1 - ip0, (int64_t)0) * p.t.page_size,
                                               (int64_t)INT32_MAX)
                                      : 0;
    /* keys whose entry would precede kv_indices[0] do not exist */
    const int64_t kfirst = ip0 < 0 ? -(int64_t)ip0 * p.t.page_size : 0;
    int64_t lo_all = INT64_MAX, hi_all = -1;
    for (int r = 0; r < R; ++r) {
        const int64_t t = L - R + r;
        const int64_t lo = p.t.window_left >= 0 && t - p.t.window_left > 0 ? t - p.t.window_left : 0;
        lo_all = qh_min(lo_all, qh_max(lo, kfirst));
        hi_all = qh_max(hi_all, qh_min(t, cap - 1));
    }
    const int64_t s0 = (int64_t)split * p.t.keys_per_split;
    const int64_t s1 = split == p.t.num_splits - 1 ? INT64_MAX : s0 + p.t.keys_per_split;
    /* [kb, ke): positions fit int32 (ke <= cap <= INT32_MAX) */
    const int32_t kb = (int32_t)qh_min(qh_max(s0, lo_all), (int64_t)INT32_MAX);
    const int32_t ke = (int32_t)qh_min(s1, hi_all + 1);

    /* ---- q rows (bf16 or f16) -> f16 with a per-row power of two ---- */
    const bool q_f16 = (p.t.flags & QATTN_DECODE_TILE_Q_F16) != 0;
    auto q_at = [&](const uint16_t *qr, int d) { return q_f16 ? qh_f16_to_f32(qr[d]) : qh_bf16_to_f32(qr[d]); };
    for (int n = 0; n < NR; ++n) {
        const bool real = n < ROWS;
        const int h = h0 + n / R, r = n % R;
        const uint16_t *qr = p.t.q + (int64_t)b * p.t.q_sb + (int64_t)r * p.t.q_sr + (int64_t)h * p.t.q_sh;
        float mx = 0.0f;
        for (int d = lane; d < D && real; d += SG) mx = qh_fmaxf(mx, qh_fabsf(q_at(qr, d)));
        mx = qh_wave_max(mx);
        const int e = mx > 0.0f ? 15 - dec_frexp_exp(mx) : 0; /* mx * 2^e in [2^14, 2^15) */
        if (lane == 0) sqf[n] = real ? dec_ldexp(1.0f, -e) : 0.0f;
        for (int c = lane; c < D / 8; c += SG) {
            uint32_t wq[4];
            for (int j = 0; j < 4; ++j) {
                uint32_t hv[2];
                for (int u = 0; u < 2; ++u) {
                    const int spo = c * 8 + 2 * j + u;
                    const int dm = PERM ? dec_perm(spo) : spo;
                    hv[u] = real ? qh_f32_to_f16(dec_ldexp(q_at(qr, dm), e)) : 0u;
                }
                wq[j] = hv[0] | (hv[1] << 16);
            }
            sq4[n * LD4K + c] = qh_u32x4{wq[0], wq[1], wq[2], wq[3]};
        }
    }

    /* this lane's softmax row: running max (log2 units), partial sum */
    const int sn = lane % QH_DEC_MAX_NR, sk0 = (lane / QH_DEC_MAX_NR) * KPL;
    float m_run = qh_neg_inf(), l_run = 0.0f;
    /* Row r sees position pos iff d = pos - (L - R) <= r and, with a window,
     * d >= r - window_left; every staged key lies in [kfirst, cap) already
     * (kb and ke bound the loop). */
    const int64_t tbase = (int64_t)dec_vreg<VREG2>((int32_t)L) - R;
    const int64_t wl = dec_vreg<VREG2>(p.t.window_left);
    const float softcap = dec_vregf<VREG2>(p.t.softcap), sm_scale = dec_vregf<VREG2>(p.t.sm_scale);

    /* output accumulators */
#if QH_DEC_HAVE_MATRIX && defined(QH_NVIDIA)
    nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> oacc_nv[MAT ? DVM / 16 : 1];
    if constexpr (MAT)
        for (int j = 0; j < DVM / 16; ++j) nvcuda::wmma::fill_fragment(oacc_nv[j], 0.0f);
#endif
#if QH_DEC_HAVE_MATRIX && defined(QH_GFX942)
    constexpr int AV = 4; /* accumulator values per lane per fragment */
#else
    constexpr int AV = 8;
#endif
    constexpr int OG = (DVM / 8) * QH_DEC_MAX_NR;
    constexpr int OPLM = (OG + SG - 1) / SG;
    /* simt: lanes own groups of 8 output dims of one row (group e = lane +
     * SG * i); matrix (AMD): the fragments' accumulators */
    constexpr int NACC = MAT ? (DVM / 16) * AV : OPLM * 8;
    float oacc[NACC];
#pragma unroll
    for (int i = 0; i < NACC; ++i) oacc[i] = 0.0f;
    /* simt output groups: row n, 8 dims c; the generic kernels lay them out
     * by the bound (a compile-time divisor: a run-time one per group would
     * hold registers across the loop) and skip the groups past Dv */
    const int GPR = GEN ? DVM / 8 : DV / 8; /* groups per row */
    const int og = GPR * NR, opl = (og + SG - 1) / SG;

    /* ---- the tile loop. Loads are software-pipelined: the page ids of
     * tile t + 2 and the data of tile t + 1 are in flight while tile t is
     * computed, when a tile's chunks fit 4 registers of 16 bytes per
     * lane (PREF); larger rows (D 256 on wave32, bf16 D >= 128) would hold
     * more registers than the accumulators leave, so their data is loaded
     * and staged at the top of the iteration, one or two chunks at a time (page ids
     * still one tile ahead). Every address is formed from bounded indices
     * (a select, not a branch). ---- */
    /* (the generic simt kernels load at the top of each tile: their
     * run-time row lengths leave no scalar registers for loads in flight) */
    constexpr bool PREF = NCH <= 4 && !(GEN && MAT == 0);
    constexpr int NB = PREF ? NCH : (DKM > DVM ? DKM : DVM) * ES >= 512 ? 1 : 2; /* chunks per lane held in registers */
    constexpr int NBATCH = (NCH + NB - 1) / NB; /* at most; batches past the dims load nothing new */
    int32_t npage = 0, nrow = 0, nok = 0;     /* key `lane` of the next tile (page ids) */
    int32_t kp = 0, kr = 0, kk = 0;           /* key `lane` of the tile being loaded */
    qh_u32x4 rk[NB], rv[NB];
    uint32_t rok[NB];                         /* a chunk's key exists: its words are kept at staging */
    uint32_t rokv[NB];                        /* the same for V's chunks (generic kernels) */
    float rks = 0.0f, rvs = 0.0f;             /* raw scales of key `lane` */
    int32_t rpos = -1;
    const int vec = p.load_bytes;
    /* the views' strides in vector registers: they multiply per-lane page
     * ids anyway, and the loop's scalar registers are needed elsewhere */
    const uint32_t k_ps = (uint32_t)dec_vreg<VREG>((int32_t)QH_LOW32(p, t.k_ps)), k_rs = (uint32_t)dec_vreg<VREG>((int32_t)p.t.k_rs);
    const uint32_t v_ps = (uint32_t)dec_vreg<VREG>((int32_t)QH_LOW32(p, t.v_ps)), v_rs = (uint32_t)dec_vreg<VREG>((int32_t)p.t.v_rs);
    const uint32_t ks_ps = (uint32_t)dec_vreg<VREG>((int32_t)QH_LOW32(p, t.ks_ps)), ks_rs = (uint32_t)dec_vreg<VREG>((int32_t)p.t.ks_rs);
    const uint32_t vs_ps = (uint32_t)dec_vreg<VREG>((int32_t)QH_LOW32(p, t.vs_ps)), vs_rs = (uint32_t)dec_vreg<VREG>((int32_t)p.t.vs_rs);
    const int32_t n_slots = dec_vreg<VREG>((int32_t)QH_LOW32(p, t.n_slots)), psz = dec_vreg<VREG>(p.t.page_size), ip0v = dec_vreg<VREG>(ip0);
    const uint8_t *kbase = p.t.k + (uint64_t)((uint32_t)g * QH_LOW32(p, t.k_hs)) * ES;
    const uint8_t *vbase = p.t.v + (uint64_t)((uint32_t)g * QH_LOW32(p, t.v_hs)) * ES;
    const float *ksb = HAS_SCALES ? p.t.ks + (uint32_t)g * QH_LOW32(p, t.ks_hs) : nullptr;
    const float *vsb = HAS_SCALES ? p.t.vs + (uint32_t)g * QH_LOW32(p, t.vs_hs) : nullptr;

    /* t0: a tile's first position, unsigned (t0 + 2 TK may pass INT32_MAX) */
    auto keys_of = [&](uint32_t t0) {
        const uint32_t pos = t0 + (uint32_t)lane;
        const int32_t pc = (int32_t)qh_min(pos, (uint32_t)ke - 1u);
        const int64_t ent = (int64_t)ip0v + pc / psz;
        npage = p.t.indices[(uint32_t)qh_max(ent, (int64_t)0) * (uint32_t)p.t.indices_s];
        nrow = pc % psz;
        nok = (lane < TK && pos < (uint32_t)ke && ent >= 0) ? 1 : 0;
    };
    /* The keys keys_of described become the tile being loaded: existence,
     * position and raw scales (applied at staging, the first read of the
     * loaded registers). */
    auto tile_keys = [&](uint32_t t0) {
        kp = npage;
        kr = nrow;
        kk = (nok != 0 && kp >= 0 && (int64_t)kp * psz + kr < n_slots) ? 1 : 0;
        rpos = kk ? (int32_t)(t0 + (uint32_t)lane) : -1;
        if constexpr (HAS_SCALES) {
            const uint32_t so = kk ? (uint32_t)kp * ks_ps + (uint32_t)kr * ks_rs : 0u;
            const uint32_t vo = kk ? (uint32_t)kp * vs_ps + (uint32_t)kr * vs_rs : 0u;
            rks = ksb[so];
            rvs = vsb[vo];
        }
    };
    /* Issues the loads of chunks lane + SG * (NB * bt + i), i < NB; a chunk
     * whose key does not exist loads its head's first row. */
    auto load_batch = [&](int bt) {
#pragma unroll
        for (int i = 0; i < NB; ++i) {
            const int c = lane + SG * (NB * bt + i);
            if constexpr (!GEN) { /* K and V rows of one length: chunk c is one key's in both */
                const int key = qh_min(c / CPKK, TK - 1);
                const int32_t page = (int32_t)qh_shfl_u32((uint32_t)kp, (uint32_t)key);
                const int32_t row = (int32_t)qh_shfl_u32((uint32_t)kr, (uint32_t)key);
                const bool ok = qh_shfl_u32((uint32_t)kk, (uint32_t)key) != 0u && c < TK * CPKK;
                const uint32_t part = (uint32_t)(c % CPKK) * 16u;
                /* the element offset from the head's base fits 32 bits (caches
                 * below 2^32 elements); its bytes need not (bf16 past 4 GiB) */
                const uint64_t ko = ok ? (uint64_t)((uint32_t)page * k_ps + (uint32_t)row * k_rs) * ES + part : 0u;
                const uint64_t vo = ok ? (uint64_t)((uint32_t)page * v_ps + (uint32_t)row * v_rs) * ES + part : 0u;
                rk[i] = dec_load16(kbase + ko, vec);
                rv[i] = dec_load16(vbase + vo, vec);
                rok[i] = ok ? 0xFFFFFFFFu : 0u;
            } else { /* D and Dv may differ: each tensor's chunk c has its own key */
                const int keyk = qh_min(c / CPKK, TK - 1), keyv = qh_min(c / CPKV, TK - 1);
                const int32_t pagek = (int32_t)qh_shfl_u32((uint32_t)kp, (uint32_t)keyk);
                const int32_t rowk = (int32_t)qh_shfl_u32((uint32_t)kr, (uint32_t)keyk);
                const bool okk = qh_shfl_u32((uint32_t)kk, (uint32_t)keyk) != 0u && c < TK * CPKK;
                const int32_t pagev = (int32_t)qh_shfl_u32((uint32_t)kp, (uint32_t)keyv);
                const int32_t rowv = (int32_t)qh_shfl_u32((uint32_t)kr, (uint32_t)keyv);
                const bool okv = qh_shfl_u32((uint32_t)kk, (uint32_t)keyv) != 0u && c < TK * CPKV;
                const uint64_t ko =
                    okk ? (uint64_t)((uint32_t)pagek * k_ps + (uint32_t)rowk * k_rs) * ES + (uint32_t)(c % CPKK) * 16u : 0u;
                const uint64_t vo =
                    okv ? (uint64_t)((uint32_t)pagev * v_ps + (uint32_t)rowv * v_rs) * ES + (uint32_t)(c % CPKV) * 16u : 0u;
                rk[i] = dec_load16(kbase + ko, vec);
                rv[i] = dec_load16(vbase + vo, vec);
                rok[i] = okk ? 0xFFFFFFFFu : 0u;
                rokv[i] = okv ? 0xFFFFFFFFu : 0u;
            }
        }
    };
    /* One decoded chunk (16 cache bytes, masked) into row `key`, chunk
     * `part` of a staged tile. */
    auto stage_chunk = [&](qh_u32x4 *dst4, int ld4, int key, int part, const qh_u32x4 &w, uint32_t mk) {
        /* per component: a select of whole structs goes through scratch */
        const qh_u32x4 wm = qh_u32x4{w.x & mk, w.y & mk, w.z & mk, w.w & mk};
        if constexpr (FMT == QH_BF16) {
            dst4[key * ld4 + part] = wm;
        } else {
            uint32_t o[8];
            dec_decode16<FMT>(wm, o);
            dst4[key * ld4 + 2 * part] = qh_u32x4{o[0], o[1], o[2], o[3]};
            dst4[key * ld4 + 2 * part + 1] = qh_u32x4{o[4], o[5], o[6], o[7]};
        }
    };
    /* Decodes the loaded chunks of batch bt into the K and V tiles; the
     * words of chunks whose key does not exist become zeros here. */
    auto stage_batch = [&](int bt) {
#pragma unroll
        for (int i = 0; i < NB; ++i) {
            const int c = lane + SG * (NB * bt + i);
            if constexpr (!GEN) {
                if (c < TK * CPKK) {
                    const int key = c / CPKK, part = c % CPKK;
                    stage_chunk(skt4, LD4K, key, part, rk[i], rok[i]);
                    stage_chunk(svt4, LD4V, key, part, rv[i], rok[i]);
                }
            } else {
                if (c < TK * CPKK) stage_chunk(skt4, LD4K, c / CPKK, c % CPKK, rk[i], rok[i]);
                if (c < TK * CPKV) stage_chunk(svt4, LD4V, c / CPKV, c % CPKV, rv[i], rokv[i]);
            }
        }
    };

    if (kb < ke) {
        keys_of((uint32_t)kb);
        if constexpr (PREF) {
            tile_keys((uint32_t)kb);
            load_batch(0);
            keys_of((uint32_t)kb + TK);
        }
    }
    for (uint32_t t0 = (uint32_t)kb; t0 < (uint32_t)ke; t0 += TK) {
        /* 1. stage the tile */
        if constexpr (PREF) {
            stage_batch(0);
        } else {
            tile_keys(t0);
            /* generic kernels: the batches the run-time dims need */
            const int nbatch = GEN ? ((CPKK > CPKV ? CPKK : CPKV) * TK + SG * NB - 1) / (SG * NB) : NBATCH;
#pragma unroll 1
            for (int bt = 0; bt < nbatch; ++bt) {
                load_batch(bt);
                stage_batch(bt);
            }
        }
        if (lane < TK) {
            sks[lane] = kk ? (HAS_SCALES ? KF * rks : KF) : 0.0f;
            svs[lane] = kk ? (HAS_SCALES ? rvs * PSF : 1.0f) : 0.0f;
            spos[lane] = rpos;
        }
        qh_wave_sync();
        /* what is in flight while this tile is computed */
        if (t0 + TK < (uint32_t)ke) {
            if constexpr (PREF) {
                tile_keys(t0 + TK);
                load_batch(0);
                keys_of(t0 + 2 * TK);
            } else {
                keys_of(t0 + TK);
            }
        }

        /* 2. S^T = K Q^T */
        /* generic kernels: the fragment count read here, each tile (a
         * volatile kernel-argument read on AMD): hoisted out of the loop,
         * its per-fragment conditions would hold scalar registers all along */
        const int nkf = GEN ? (int)QH_LATE(p, head_dim) / 16 : NKF;
        if constexpr (MAT) {
#if QH_DEC_HAVE_MATRIX && defined(QH_GFX942)
            const int gq = lane >> 4, cq = lane & 15;
            /* q is the same every tile: an opaque offset makes the compiler
             * re-read it from LDS instead of holding D / 8 words across the
             * loop */
            const uint32_t *sqv = sq + qh_as_vector(0);
            float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
            for (int j = 0; j < DKM / 16; ++j) {
                if (j >= nkf) continue;
                const uint32_t a[2] = {skt[cq * LWK + 8 * j + 2 * gq], skt[cq * LWK + 8 * j + 2 * gq + 1]};
                const uint32_t bq[2] = {sqv[cq * LWK + 8 * j + 2 * gq], sqv[cq * LWK + 8 * j + 2 * gq + 1]};
                qh_mfma_f16(a, bq, acc);
                qh_sched_barrier(); /* one fragment's LDS reads at a time */
            }
            for (int v = 0; v < 4; ++v) ss[(4 * gq + v) * NR + cq] = acc[v];
#elif QH_DEC_HAVE_MATRIX && defined(QH_GFX12)
            const int gq = lane >> 4, cq = lane & 15;
            const uint32_t *sqv = sq + qh_as_vector(0); /* re-read q each tile, as above */
            float acc[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
            for (int j = 0; j < DKM / 16; ++j) {
                if (j >= nkf) continue;
                const int w0 = 8 * j + 2 * gq;
                const uint32_t a[4] = {skt[cq * LWK + w0], skt[cq * LWK + w0 + 1], skt[cq * LWK + w0 + 4],
                                       skt[cq * LWK + w0 + 5]};
                const uint32_t bq[4] = {sqv[cq * LWK + w0], sqv[cq * LWK + w0 + 1], sqv[cq * LWK + w0 + 4],
                                        sqv[cq * LWK + w0 + 5]};
                qh_wmma_f16(a, bq, acc);
                qh_sched_barrier();
            }
            for (int v = 0; v < 8; ++v) ss[(8 * gq + v) * NR + cq] = acc[v];
#elif QH_DEC_HAVE_MATRIX && defined(QH_NVIDIA)
            using namespace nvcuda;
            wmma::fragment<wmma::accumulator, 16, 16, 16, float> sacc;
            wmma::fill_fragment(sacc, 0.0f);
#pragma unroll
            for (int j = 0; j < DKM / 16; ++j) {
                if (j >= nkf) continue;
                wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> ka;
                wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> qb;
                wmma::load_matrix_sync(ka, (const __half *)skt + 16 * j, LD4K * 8);
                wmma::load_matrix_sync(qb, (const __half *)sq + 16 * j, LD4K * 8);
                wmma::mma_sync(sacc, ka, qb, sacc);
            }
            wmma::store_matrix_sync(ss, sacc, NR, wmma::mem_row_major);
#endif
        } else {
            for (int e = lane; e < TK * NR; e += SG) {
                const int key = e / NR, n = e % NR;
                float acc = 0.0f;
                if (n < ROWS) {
#pragma unroll 2
                    for (int w = 0; w < nkf * 8; ++w) { /* D / 2 words, a scalar bound */
                        float kx, ky, qx, qy;
                        dec_unpack2<FMT>(skt[key * LWK + w], &kx, &ky);
                        dec_unpack2<QH_FN>(sq[n * LWK + w], &qx, &qy); /* q is f16 */
                        acc += kx * qx + ky * qy;
                    }
                }
                ss[key * NR + n] = acc;
            }
        }
        qh_wave_sync();

        /* 3. online softmax; lane: row sn, keys sk0 .. sk0 + KPL - 1. Every
         * lane runs every step (the row reductions are wave-wide exchanges);
         * padding rows only write nothing. */
        {
            const int n = sn;
            const bool act = n < ROWS;
            const int r = act ? n % R : 0;
            const float qs = act ? sqf[n] * sm_scale : 0.0f;
            float sv[KPL];
            float tmax = qh_neg_inf();
#pragma unroll
            for (int j = 0; j < KPL; ++j) {
                const int key = sk0 + j;
                const int32_t pos = spos[key];
                const int64_t d = (int64_t)pos - tbase;
                float x = qh_neg_inf();
                if (act && pos >= 0 && d <= r && (wl < 0 || d >= r - wl)) {
                    x = ss[key * NR + n] * qs * sks[key];
                    if (softcap > 0.0f) x = softcap * dec_tanh(x / softcap);
                    x *= LOG2E;
                }
                sv[j] = x;
                tmax = qh_fmaxf(tmax, x);
            }
            tmax = dec_row_max(tmax);
            const float mn = qh_fmaxf(m_run, tmax);
            const float alpha = mn == qh_neg_inf() ? 1.0f : qh_exp2f(m_run - mn);
            m_run = mn;
            float ps = 0.0f;
            uint32_t pw[KPL / 2];
#pragma unroll
            for (int j = 0; j < KPL; ++j) {
                const int key = sk0 + j;
                const float pr = sv[j] == qh_neg_inf() ? 0.0f : qh_exp2f(sv[j] - mn);
                ps += pr;
                const uint32_t h = qh_f32_to_f16(pr * svs[key]);
                if (j % 2 == 0) pw[j / 2] = h;
                else pw[j / 2] |= h << 16;
            }
            if (act) {
                /* P^T row n, keys sk0..: whole words (sk0 and LDP are even) */
                uint32_t *sp32 = (uint32_t *)(sp + n * LDP + sk0);
#pragma unroll
                for (int j = 0; j < KPL / 2; ++j) sp32[j] = pw[j];
#pragma unroll
                for (int j = 0; j < KPL; ++j) ss[(sk0 + j) * NR + n] = alpha;
            }
            l_run = l_run * alpha + ps;
        }
        qh_wave_sync();

        /* 4. O^T = O^T * alpha + V^T P^T */
        const int nvf = GEN ? (int)QH_LATE(p, head_dim_v) / 16 : NVF; /* as nkf */
        if constexpr (MAT) {
#if QH_DEC_HAVE_MATRIX && defined(QH_GFX942)
            const int gq = lane >> 4, cq = lane & 15;
            const float am = ss[cq];
#pragma unroll
            for (int i = 0; i < NACC; ++i) oacc[i] *= am;
            const uint32_t *sp32 = (const uint32_t *)sp;
            const uint32_t bp[2] = {sp32[(cq * LDP + 4 * gq) / 2], sp32[(cq * LDP + 4 * gq) / 2 + 1]};
            const uint16_t *sv16 = (const uint16_t *)svt;
#pragma unroll
            for (int j = 0; j < DVM / 16; ++j) {
                if (j >= nvf) continue;
                uint32_t a[2];
                for (int t = 0; t < 2; ++t) {
                    const int k0 = 4 * gq + 2 * t;
                    a[t] = (uint32_t)sv16[k0 * LWV * 2 + 16 * j + cq] |
                           ((uint32_t)sv16[(k0 + 1) * LWV * 2 + 16 * j + cq] << 16);
                }
                qh_mfma_f16(a, bp, &oacc[4 * j]);
                qh_sched_barrier();
            }
#elif QH_DEC_HAVE_MATRIX && defined(QH_GFX12)
            const int gq = lane >> 4, cq = lane & 15;
            const float am = ss[cq];
#pragma unroll
            for (int i = 0; i < NACC; ++i) oacc[i] *= am;
            const uint32_t *sp32 = (const uint32_t *)sp;
            const int pw = (cq * LDP + 4 * gq) / 2;
            const uint32_t bp[4] = {sp32[pw], sp32[pw + 1], sp32[pw + 4], sp32[pw + 5]};
            const uint16_t *sv16 = (const uint16_t *)svt;
#pragma unroll
            for (int j = 0; j < DVM / 16; ++j) {
                if (j >= nvf) continue;
                uint32_t a[4];
                for (int t = 0; t < 4; ++t) {
                    const int k0 = 8 * (t / 2) + 4 * gq + 2 * (t % 2);
                    a[t] = (uint32_t)sv16[k0 * LWV * 2 + 16 * j + cq] |
                           ((uint32_t)sv16[(k0 + 1) * LWV * 2 + 16 * j + cq] << 16);
                }
                qh_wmma_f16(a, bp, &oacc[8 * j]);
                qh_sched_barrier();
            }
#elif QH_DEC_HAVE_MATRIX && defined(QH_NVIDIA)
            using namespace nvcuda;
            /* alpha as a 16 x 16 accumulator: the same fragment type has the
             * same layout, so the rescale is element-wise */
            wmma::fragment<wmma::accumulator, 16, 16, 16, float> am;
            wmma::load_matrix_sync(am, ss, NR, wmma::mem_row_major);
            wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> pb;
            wmma::load_matrix_sync(pb, (const __half *)sp, LDP);
#pragma unroll
            for (int j = 0; j < DVM / 16; ++j) {
                if (j >= nvf) continue;
                for (int t = 0; t < oacc_nv[j].num_elements; ++t) oacc_nv[j].x[t] *= am.x[t];
                wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::col_major> va;
                wmma::load_matrix_sync(va, (const __half *)svt + 16 * j, LD4V * 8);
                wmma::mma_sync(oacc_nv[j], va, pb, oacc_nv[j]);
            }
#endif
        } else {
#pragma unroll
            for (int i = 0; i < OPLM; ++i) {
                if (i >= opl) continue;
                const int e = lane + SG * i;
                /* Dv / 8: on wave64 read per tile (nvf), as its vector copy's
                 * conditions would hold scalar registers across the loop */
                if (e < og && (!GEN || e % GPR < (GVEC ? nvf * 2 : DV / 8))) {
                    const int n = e / GPR, c = e % GPR;
                    const float alpha = ss[n];
                    float *a = &oacc[i * 8];
                    for (int u = 0; u < 8; ++u) a[u] *= alpha;
#pragma unroll 1
                    for (int key = 0; key < TK; ++key) {
                        const float pr = qh_f16_to_f32(sp[n * LDP + key]);
                        const qh_u32x4 vw = svt4[key * LD4V + c];
                        const uint32_t w4[4] = {vw.x, vw.y, vw.z, vw.w};
                        for (int j = 0; j < 4; ++j) {
                            float vx, vy;
                            dec_unpack2<FMT>(w4[j], &vx, &vy);
                            a[2 * j] += pr * vx;
                            a[2 * j + 1] += pr * vy;
                        }
                    }
                }
            }
        }
        qh_wave_sync();
    }

    /* ---- partials: unnormalised O^T (staged dims), m and l per row slot ---- */
    const int dvl = GEN ? (int)QH_LATE(p, head_dim_v) : DV, nvfl = dvl / 16; /* read late, as nkf */
    const int S = p.t.num_splits;
    const int64_t slot0 = (((int64_t)b * p.t.hkv + g) * nrb + rb) * NR; /* first row slot */
    float *ws_o = QH_LATE(p, t.ws_o);
    if constexpr (MAT) {
#if QH_DEC_HAVE_MATRIX && (defined(QH_GFX942) || defined(QH_GFX12))
        const int gq = lane >> 4, cq = lane & 15;
        float *wo = ws_o + ((slot0 + cq) * S + split) * dvl;
#pragma unroll
        for (int j = 0; j < DVM / 16; ++j) {
            if (j >= nvfl) continue;
            for (int v = 0; v < AV; ++v) wo[16 * j + AV * gq + v] = oacc[AV * j + v] * (1.0f / PSF);
        }
#elif QH_DEC_HAVE_MATRIX && defined(QH_NVIDIA)
        /* through the S^T area (16 x 16 f32, free now): the fragment's layout
         * is the compiler's */
        for (int j = 0; j < DVM / 16; ++j) {
            if (j >= nvfl) continue;
            nvcuda::wmma::store_matrix_sync(ss, oacc_nv[j], 16, nvcuda::wmma::mem_col_major);
            __syncwarp();
            for (int e = lane; e < 256; e += SG) {
                const int n = e / 16, d = e % 16;
                ws_o[((slot0 + n) * S + split) * dvl + 16 * j + d] = ss[e] * (1.0f / PSF);
            }
            __syncwarp();
        }
#endif
    } else {
#pragma unroll
        for (int i = 0; i < OPLM; ++i) {
            if (i >= opl) continue;
            const int e = lane + SG * i;
            if (e < og && (!GEN || e % GPR < dvl / 8)) {
                const int n = e / GPR, c = e % GPR;
                float *wo = ws_o + ((slot0 + n) * S + split) * dvl + c * 8;
                for (int u = 0; u < 8; ++u) wo[u] = oacc[i * 8 + u] * (1.0f / PSF);
            }
        }
    }
    float *ws_ml = QH_LATE(p, t.ws_ml);
    {
        const float lt = dec_row_sum(l_run);
        if (sn < NR && lane < QH_DEC_MAX_NR) {
            float *at = ws_ml + ((slot0 + sn) * S + split) * 2;
            at[0] = m_run;
            at[1] = lt;
        }
    }
}

/* ======================================================================
 * Split merge: one workgroup per output row; M = max(m_s, sink),
 * Z = sum_s l_s 2^(m_s - M) + 2^(sink - M), o = vf sum_s 2^(m_s - M) O_s / Z
 * ====================================================================== */
QH_DEV void decode_merge(const qh_decode_params &p) {
    __shared__ float sw[QH_DEC_MAX_SPLITS];
    __shared__ float sred[QH_DEC_MERGE_MAX_WG];
    __shared__ float sacc[QH_DEC_MERGE_MAX_WG * 4];
    const int D = p.m.D, DCH = p.merge_dims, nch = D / DCH;
    const int row = (int)qh_bid_x() / nch; /* (head within the group, r) */
    const int d0 = ((int)qh_bid_x() % nch) * DCH; /* this workgroup's staged dims: d0 .. d0 + DCH - 1 */
    const int g = (int)qh_bid_y(), b = (int)qh_bid_z();
    const int tid = (int)qh_tid(), nt = p.merge_wg;
    const int R = p.m.R, G = p.t.hq / p.m.hkv;
    const int hl = row / R, r = row % R;
    const int h = g * G + hl;
    const int rb = hl / p.m.QH, n = (hl % p.m.QH) * R + r;
    const int64_t slot = (((int64_t)b * p.m.hkv + g) * (G / p.m.QH) + rb) * p.m.NR + n;
    const int S = p.m.S;
    const bool has_sink = (p.m.flags & QATTN_DECODE_MERGE_SINKS) != 0;
    const float sink = has_sink ? p.m.sinks[(int64_t)h * p.m.sinks_s] * LOG2E : qh_neg_inf();
    /* M: per thread, then a tree over LDS */
    float mloc = sink;
    for (int s = tid; s < S; s += nt) {
        const float ms = p.m.ws_ml[(slot * S + s) * 2];
        sw[s] = ms;
        mloc = qh_fmaxf(mloc, ms);
    }
    sred[tid] = mloc;
    qh_barrier();
    for (int w = nt / 2; w > 0; w /= 2) {
        if (tid < w) sred[tid] = qh_fmaxf(sred[tid], sred[tid + w]);
        qh_barrier();
    }
    const float M = sred[0];
    qh_barrier();
    float zloc = 0.0f;
    for (int s = tid; s < S; s += nt) {
        const float ms = sw[s];
        const float ls = p.m.ws_ml[(slot * S + s) * 2 + 1];
        const float e = ms == qh_neg_inf() ? 0.0f : qh_exp2f(ms - M);
        sw[s] = e;
        zloc += ls * e;
    }
    sred[tid] = zloc;
    qh_barrier();
    for (int w = nt / 2; w > 0; w /= 2) {
        if (tid < w) sred[tid] += sred[tid + w];
        qh_barrier();
    }
    const float Z = sred[0] + (sink == qh_neg_inf() ? 0.0f : qh_exp2f(sink - M));
    const float wz = Z > 0.0f ? p.m.vf / Z : 0.0f;
    /* output: groups of DCH / 4 threads, each group a strided set of splits */
    const int gd = DCH / 4, ng = nt / gd;
    const int q4 = tid % gd, grp = tid / gd;
    if (grp < ng) {
        float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        for (int s = grp; s < S; s += ng) {
            const float *at = p.m.ws_o + (slot * S + s) * D + d0 + q4 * 4;
            for (int u = 0; u < 4; ++u) acc[u] += sw[s] * at[u];
        }
        for (int u = 0; u < 4; ++u) sacc[tid * 4 + u] = acc[u];
    }
    qh_barrier();
    if (tid < gd) {
        float t[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        for (int k = 0; k < ng; ++k)
            for (int u = 0; u < 4; ++u) t[u] += sacc[(k * gd + tid) * 4 + u];
        uint16_t *o = p.m.o + (int64_t)b * p.m.o_sb + (int64_t)r * p.m.o_sr + (int64_t)h * p.m.o_sh;
        const bool o_f16 = (p.m.flags & QATTN_DECODE_MERGE_O_F16) != 0;
        for (int u = 0; u < 4; ++u) {
            const int dp = d0 + tid * 4 + u;
            const float x = t[u] * wz;
            o[p.m.perm ? dec_perm(dp) : dp] = o_f16 ? qh_f32_to_f16(x) : qh_f32_to_bf16(x);
        }
    }
    if (tid == 0 && d0 == 0 && (p.m.flags & QATTN_DECODE_MERGE_LSE) != 0)
        p.m.lse[(int64_t)b * p.m.lse_sb + (int64_t)r * p.m.lse_sr + (int64_t)h * p.m.lse_sh] =
            Z > 0.0f ? (M + qh_log2f(Z)) * LN2 : qh_neg_inf();
}

/* ======================================================================
 * Instantiations: the names the runtime looks up (qh_kernels.def)
 * ====================================================================== */
/* One wave per workgroup: the launch bound is the wave. _d<D>: D = Dv = D
 * exactly; _g<M>: the generic kernel, run-time D and Dv up to M. */
#define QH_DEC_TILED(var, mat, name, fmt, d)                                                          \
    QH_KERNEL QH_LAUNCH_BOUNDS(QH_WAVE) void qattn_decode_tiled_##var##_##name##_d##d(qh_decode_params p) { \
        decode_tiled<fmt, d, d, mat, false>(p);                                                        \
    }
#define QH_DEC_TILED_G(var, mat, name, fmt, m)                                                        \
    QH_KERNEL QH_LAUNCH_BOUNDS(QH_WAVE) void qattn_decode_tiled_##var##_##name##_g##m(qh_decode_params p) { \
        decode_tiled<fmt, m, m, mat, true>(p);                                                         \
    }
#define QH_DEC_TILED_D(var, mat, name, fmt) \
    QH_DEC_TILED(var, mat, name, fmt, 64)   \
    QH_DEC_TILED(var, mat, name, fmt, 128)  \
    QH_DEC_TILED(var, mat, name, fmt, 256)  \
    QH_DEC_TILED_G(var, mat, name, fmt, 128) \
    QH_DEC_TILED_G(var, mat, name, fmt, 256)

/* simt: bf16 caches (f16 cannot hold bf16's range); 8-bit caches where a
 * plan pins simt (QATTN_DECODE_VARIANT=simt), on wave32 targets only: on
 * gfx942 those kernels spill scalar registers, and AUTO never plans them on
 * any HIP target (every one has the matrix kernel). */
QH_DEC_TILED_D(simt, 0, bf16, QH_BF16)
#if QH_WAVE == 32
QH_DEC_TILED_D(simt, 0, i8, QH_I8)
QH_DEC_TILED_D(simt, 0, fn, QH_FN)
QH_DEC_TILED_D(simt, 0, fnuz, QH_FNUZ)
QH_DEC_TILED_D(simt, 0, e5m2, QH_E5M2)
#endif
#if QH_DEC_HAVE_MATRIX
QH_DEC_TILED_D(matrix, 1, i8, QH_I8)
QH_DEC_TILED_D(matrix, 1, fn, QH_FN)
QH_DEC_TILED_D(matrix, 1, fnuz, QH_FNUZ)
QH_DEC_TILED_D(matrix, 1, e5m2, QH_E5M2)
#endif
QH_KERNEL QH_LAUNCH_BOUNDS(QH_DEC_MERGE_MAX_WG) void qattn_decode_merge(qh_decode_params p) { decode_merge(p); }
