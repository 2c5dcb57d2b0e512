/*
 * Decode attention, stage 1: the register-resident design (docs/design.md,
 * "Decode"), the HIP twin of shaders/decode_regs.comp: one design in two
 * languages, the same stages in the same order (load, convert, S, softmax,
 * PV, store), the same partials (o [slot][split][D] f32 in dim order, so
 * the merge's perm is 0; (m, l) [slot][split][2]) and the same bounds rules.
 * The split merge is decode.hip's qattn_decode_merge.
 *
 * qattn_decode_regs_<fn|fnuz|i8|e5m2>_d<64|128>
 *   One workgroup is one wave and handles one (split, kv head, block of QH
 *   query heads, request), grid (num_splits, kv heads x head blocks, batch),
 *   as the tiled kernel. Keys go through in tiles of 16 that lie in one page
 *   (the planner gives this kernel page_size % 16 == 0 only), so a tile is
 *   rows crow .. crow + 15 of page kv_indices[ip0 + t0 / P]: one page id per
 *   tile, a 64-bit page base (page * page stride in 64 bits, offsets inside
 *   the page in 32), so caches of any size work. Every lane loads its own K
 *   and V bytes and builds its fragments from them in registers (exact fp8 /
 *   int8 -> f16, two integer operations per pair of codes; the power of two
 *   fp8 leaves, 2^8 fn / 2^7 fnuz, is folded into the k scales and the
 *   merge's vf), S's accumulator is where the softmax runs and P goes to the
 *   P V product without leaving registers: no shared memory at all, no
 *   barrier. The next tile's loads (and the page id of the one after) are
 *   issued before this tile's products. The running output is rescaled only
 *   in tiles where some row's maximum grew (one wave vote).
 *
 * Fragment layouts, per target (from the ISA; qh_matrix.h for AMD):
 *
 * NVIDIA twin (QH_NVIDIA, wave32): mma.sync m16n8k16 row.col f32.f16.f16.f32,
 *   two per 16x16x16 product (columns 0..7, 8..15). Lane l, g = l / 4,
 *   t = l % 4, element i of 8:
 *     A, accumulator: row g + 8 ((i / 2) % 2), column 2t + i % 2 + 8 (i / 4)
 *     B: k 2t + i % 2 + 8 ((i / 2) % 2), n g + 8 (i / 4)
 *   exactly decode_regs.comp's layout, so this path is the shader stage by
 *   stage: S = Q K^T with the block's rows on M (rows g, g + 8 per lane) and
 *   the tile's keys on N; K bytes [t D/4, (t+1) D/4) of keys g and g + 8
 *   straight into B (word j of them is block j: physical dim t D/4 + 4j + c
 *   is k 2t + (c >> 1) + 8 (c & 1), q loaded by the same rule); the
 *   accumulator is P's A fragment (keys 2t, 2t+1, 2t+8, 2t+9); V bytes
 *   [g D/8, (g+1) D/8) of those four keys paired into (key, key) f16 words
 *   (byte permutes) are B of O += P V, output column n of block j being
 *   physical dim (n % 8) D/8 + 2j + n / 8.
 *
 * gfx942 (MFMA f32_16x16x16_f16, wave64) and gfx12 (WMMA f32_16x16x16_f16,
 *   wave32): lane l, g = l / 16 (NG = wave / 16 groups), c = l % 16; C holds
 *   column c, rows KPL g + v (KPL = 16 / NG = 4 on gfx942, 8 on gfx12, v <
 *   KPL); A (B) hold row (column) c and KPL k slots per lane, slot e of lane
 *   group g. A and B share the slot-to-k map, so what a slot means is the
 *   kernel's choice, the same for both operands. The accumulator holds
 *   columns per lane, so the products are transposed:
 *     S^T = K Q^T: keys on M, the block's rows on N. A = K: lane (g, c)
 *       loads key c's bytes [g D/NG, (g+1) D/NG) with 16-byte loads; block
 *       j takes words KPL/4 j .. KPL/4 (j+1) - 1 of them, each decoded to
 *       the pairs (c0, c2), (c1, c3) into consecutive slots: slot 4s + 2h +
 *       u of block j is physical dim g D/NG + 4 (KPL/4 j + s) + 2u + h. B =
 *       Q^T: lane (g, c) holds query row c at the same dims, so S is exact
 *       whatever the order. C: lane (g, c) holds S of row c and keys KPL g +
 *       v: one softmax row per lane, its maximum and sum over the lanes c,
 *       c + 16, ... (xor 16, 32).
 *     O^T = V^T P^T: dims on M, rows on N, keys on K. B = P^T: the slot e
 *       of lane (g, c) is key KPL g + e, which is exactly S^T's C element
 *       v = e of the same lane: P is packed in place. A = V^T: row c of
 *       block j is physical dim c D/16 + j and slot e key KPL g + e, so lane
 *       (g, c) loads bytes [c D/16, (c+1) D/16) of its KPL keys (4- or
 *       8-byte loads) and byte j of four keys' words makes the f16 pairs
 *       (key, key) of block j. C: lane (g, c) holds row c, dims (KPL g + v)
 *       D/16 + j: D/16 consecutive dims per v, stored in dim order.
 *
 * Indices read from memory are bounded as in decode.hip: a key exists only
 * where its kv_indices entry lies in the request's entries and in the
 * table, its page id is >= 0 and its slot inside the cache; a key that does
 * not exist loads its head's first row (inside the cache) and gets no
 * weight.
 */
#include "qh_device.h"
#include "qh_matrix.h"
#include "qh_params.h"

#define RTK 16 /* keys per tile: the fragments' keys */
#define RLOG2E 1.4426950408889634f

/* Whether this build has the regs kernels (qh_kernels.def: QH_T_REGS). */
#if defined(QH_NVIDIA) || defined(QH_GFX942) || defined(QH_GFX12)
#define QH_REGS_BUILT 1
#else
#define QH_REGS_BUILT 0
#endif

#if QH_REGS_BUILT

/* Which paths this build compiles: the NVIDIA layout's (mma.sync) on the
 * twin, and on the wave32 host simulation too, where its mma.sync is
 * emulated from the PTX layout (QATTN_HOSTSIM_REGS_TWIN=1 runs it, see the
 * instantiations); the AMD one (MFMA / WMMA) on gfx942 and gfx12. */
#if defined(QH_NVIDIA) || (defined(QH_HOSTSIM) && QH_WAVE == 32)
#define QH_REGS_NVL 1
#else
#define QH_REGS_NVL 0
#endif
#if defined(QH_GFX942) || defined(QH_GFX12)
#define QH_REGS_AMDL 1
#else
#define QH_REGS_AMDL 0
#endif

QH_DEV float rg_pow2(int k) { return qh_bits_f32((uint32_t)(k + 127) << 23); }
QH_DEV float rg_ldexp(float x, int e) {
    const int e1 = e / 2;
    return x * rg_pow2(e1) * rg_pow2(e - e1);
}
QH_DEV int rg_frexp_exp(float x) {
    uint32_t u = qh_f32_bits(x);
    int bias = 126;
    if (((u >> 23) & 0xFFu) == 0u) {
        u = qh_f32_bits(x * 0x1p64f);
        bias += 64;
    }
    return (int)((u >> 23) & 0xFFu) - bias;
}
QH_DEV float rg_tanh(float x) { /* overflow-safe, as common_tiled.glsl's */
    const float e = qh_exp2f(-2.0f * RLOG2E * qh_fabsf(x));
    const float t = (1.0f - e) / (1.0f + e);
    return x < 0.0f ? -t : t;
}

/* Whether any lane of the wave passes true (a uniform branch follows). */
QH_DEV bool rg_any(bool x) {
#if defined(QH_NVIDIA)
    return __any_sync(0xffffffffu, x) != 0;
#elif defined(QH_AMD)
#if QH_WAVE == 64
    return __builtin_amdgcn_ballot_w64(x) != 0;
#else
    return __builtin_amdgcn_ballot_w32(x) != 0;
#endif
#else
    uint64_t all[64];
    qhsim_wave_gather_u64(x ? 1u : 0u, all);
    bool r = false;
    for (int i = 0; i < QH_WAVE; ++i) r = r || all[i] != 0u;
    return r;
#endif
}

/* CUDA's __byte_perm: byte i of the result is byte (s >> 4i) & 7 of the
 * eight bytes y:x (x the low four). */
QH_DEV uint32_t rg_perm(uint32_t x, uint32_t y, uint32_t s) {
#if defined(QH_NVIDIA)
    return __byte_perm(x, y, s);
#else
    const uint64_t v = (uint64_t)x | ((uint64_t)y << 32);
    uint32_t r = 0;
    for (int i = 0; i < 4; ++i) r |= (uint32_t)((v >> (8 * ((s >> (4 * i)) & 7u))) & 0xFFu) << (8 * i);
    return r;
#endif
}

/* Four codes -> the f16 pairs (c0, c2) and (c1, c3), exactly (e4m3: the
 * value times 2^-8 or 2^-7, the power of two is KF; e5m2: the code is the
 * top byte of its f16). decode_word. */
template <int FMT> QH_DEV void rg_decode(uint32_t x, uint32_t &lo, uint32_t &hi) {
    if constexpr (FMT == QH_E5M2) {
        lo = (x << 8) & 0xFF00FF00u;
        hi = x & 0xFF00FF00u;
    } else if constexpr (FMT == QH_I8) {
        lo = qh_f16x2_sub(((x & 0x00FF00FFu) ^ 0x00800080u) | 0x64006400u, 1152.0f);
        hi = qh_f16x2_sub((((x >> 8) & 0x00FF00FFu) ^ 0x00800080u) | 0x64006400u, 1152.0f);
    } else {
        lo = ((x << 7) & 0x3F803F80u) | ((x << 8) & 0x80008000u);
        hi = ((x >> 1) & 0x3F803F80u) | (x & 0x80008000u);
    }
}

QH_DEV uint32_t rg_pack(float a, float b) {
    return (uint32_t)qh_f32_to_f16(a) | ((uint32_t)qh_f32_to_f16(b) << 16);
}

#if !defined(QH_NVIDIA)
/* Byte b of four keys' words -> x = (k0, k2, k1, k3), which decodes to the
 * (key, key) pairs (k0, k1) and (k2, k3). */
QH_DEV uint32_t rg_gather4(uint32_t w0, uint32_t w1, uint32_t w2, uint32_t w3, int b) {
    const uint32_t s = (uint32_t)b | ((uint32_t)(b + 4) << 4);
    const uint32_t t02 = rg_perm(w0, w2, s), t13 = rg_perm(w1, w3, s); /* (w0_b, w2_b, ..) */
    return rg_perm(t02, t13, 0x5410u);
}
#endif

#if QH_REGS_NVL
/* D = A B + C, m16n8k16 f16 -> f32 (layouts at the top of the file). */
QH_DEV void rg_mma(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
#if defined(QH_NVIDIA)
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
    /* Emulation (host simulation), from the PTX layout: lane l = 4g + t
     * computes D[g + 8 (i / 2)][2t + i % 2], i < 4. A[row][k] is in lane
     * 4 (row % 8) + (k % 8) / 2, register row / 8 + 2 (k / 8), half k % 2;
     * B[k][n] in lane 4n + (k % 8) / 2, register k / 8, half k % 2. */
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
#endif

/* The request's keys and the tile walk, the same on every target. */
struct rg_keys {
    int32_t ip0, ip1;
    int64_t L, cap, kfirst;
    int32_t kb, ke; /* [kb, ke): positions that may be computed */
};

QH_DEV rg_keys rg_keys_of(const qh_decode_params &p, int b, int split, int R) {
    rg_keys k;
    k.L = p.t.lens[(int64_t)b * p.t.lens_s];
    k.ip0 = p.t.indptr[(int64_t)b * p.t.indptr_s];
    k.ip1 = qh_min(p.t.indptr[(int64_t)(b + 1) * p.t.indptr_s], p.t.n_indices);
    k.cap = p.t.n_slots > 0 ? qh_min(qh_max((int64_t)k.ip1 - k.ip0, (int64_t)0) * p.t.page_size, (int64_t)INT32_MAX)
                            : 0;
    k.kfirst = k.ip0 < 0 ? -(int64_t)k.ip0 * p.t.page_size : 0;
    int64_t lo_all = INT64_MAX, hi_all = -1;
    for (int r = 0; r < R; ++r) {
        const int64_t t = k.L - R + r;
        const int64_t lo = p.t.window_left >= 0 && t - p.t.window_left > 0 ? t - p.t.window_left : 0;
        lo_all = qh_min(lo_all, qh_max(lo, k.kfirst));
        hi_all = qh_max(hi_all, qh_min(t, k.cap - 1));
    }
    const int64_t s0 = (int64_t)split * p.t.keys_per_split;
    const int64_t s1 = split == p.t.num_splits - 1 ? INT64_MAX : s0 + p.t.keys_per_split;
    k.kb = (int32_t)qh_min(qh_max(s0, lo_all), (int64_t)INT32_MAX);
    k.ke = (int32_t)qh_min(s1, hi_all + 1);
    return k;
}

/* Row r (of the block) sees positions [lo, hi] (empty for a padding row). */
QH_DEV void rg_visible(const qh_decode_params &p, const rg_keys &k, int R, bool real, int r, int64_t &lo,
                       int64_t &hi) {
    lo = 0;
    hi = -1;
    if (real) {
        const int64_t t = k.L - R + r % R;
        lo = p.t.window_left >= 0 && t - p.t.window_left > 0 ? t - p.t.window_left : 0;
        lo = qh_max(lo, k.kfirst);
        hi = qh_min(t, k.cap - 1);
    }
}

/* The page walk: entry pe and row prow of the tile page_of reads next. */
struct rg_walk {
    uint32_t pe, prow, psz;
    int32_t npage, nrow;
};
QH_DEV void rg_page_of(const qh_decode_params &p, const rg_keys &k, rg_walk &w) {
    const int64_t ent = qh_min(qh_max((int64_t)k.ip0 + w.pe, (int64_t)qh_max(k.ip0, 0)), (int64_t)qh_max(k.ip1 - 1, 0));
    w.npage = p.t.indices[(uint64_t)ent * (uint32_t)p.t.indices_s];
    w.nrow = (int32_t)w.prow;
    w.prow += RTK;
    if (w.prow >= w.psz) {
        w.prow = 0;
        w.pe += 1;
    }
}

/* ======================================================================
 * Stage 1
 * ====================================================================== */
/* NVL: the NVIDIA layout's path (mma.sync), else the AMD one. */
template <int FMT, int D, bool NVL> QH_DEV void decode_regs(const qh_decode_params &p) {
    constexpr float KF = FMT == QH_FNUZ ? 128.0f : FMT == QH_FN ? 256.0f : 1.0f;
    /* e5m2: P = p * v_scale * PSF, the partials times 1 / PSF (decode.hip's
     * reason: e5m2's v scales sit 2^7 below fn's, f16's subnormals) */
    constexpr float PSF = FMT == QH_E5M2 ? 256.0f : 1.0f;
    /* q is bf16 or f16 (read once, before the tile loop) */
    const bool q_f16 = (p.t.flags & QATTN_DECODE_TILE_Q_F16) != 0;
    constexpr int NB = D / 16; /* 16-dim blocks */
    const int R = p.m.R, QH = p.m.QH, ROWS = QH * R;
    const int lane = (int)qh_lane();
    const int split = (int)qh_bid_x();
    const int G = p.t.hq / p.t.hkv;
    const int nrb = G / QH;
    const int kvh = (int)qh_bid_y() / nrb, rb = (int)qh_bid_y() % nrb;
    const int h0 = kvh * G + rb * QH;
    const int b = (int)qh_bid_z();

    /* ---- the request's keys, bounded ---- */
    const rg_keys K = rg_keys_of(p, b, split, R);
    const int32_t kb = K.kb, ke = K.ke;
    const uint32_t ta = (uint32_t)(kb - kb % RTK); /* the first tile (kb >= 0) */
    rg_walk W;
    W.psz = (uint32_t)p.t.page_size;
    W.pe = ta / W.psz;
    W.prow = ta % W.psz;
    W.npage = -1;
    W.nrow = 0;
    int32_t nklo = 0, nkhi = 0; /* keys of the loaded tile that exist */

    const uint8_t *kbase = p.t.k + (uint64_t)kvh * (uint64_t)p.t.k_hs;
    const uint8_t *vbase = p.t.v + (uint64_t)kvh * (uint64_t)p.t.v_hs;
    /* one scale per lane: lanes 16 l' .. with l' even the k scale of key
     * lane % 16, odd the v scale */
    const bool sk = (lane & 16) == 0;
    const float *sbase = sk ? p.t.ks + (uint64_t)kvh * (uint64_t)p.t.ks_hs : p.t.vs + (uint64_t)kvh * (uint64_t)p.t.vs_hs;
    const int64_t s_ps = sk ? p.t.ks_ps : p.t.vs_ps;
    const uint32_t s_rs = sk ? p.t.ks_rs : p.t.vs_rs;
    const int skey = lane & 15;
    float rs = 0.0f;

    /* the bounds of the tile the walk points at, for the loads */
    auto tile_bounds = [&](uint32_t t0) {
        const int64_t sl0 = (int64_t)W.npage * p.t.page_size + W.nrow;
        const int rows_ok = W.npage < 0 ? 0 : (int)qh_min(qh_max(p.t.n_slots - sl0, (int64_t)0), (int64_t)RTK);
        nklo = qh_max(kb - (int32_t)t0, 0);
        nkhi = qh_min(qh_min(ke - (int32_t)t0, RTK), rows_ok);
    };
    auto load_scale = [&]() {
        const bool ok = skey >= nklo && skey < nkhi;
        const uint64_t pg = (uint64_t)qh_max(W.npage, 0);
        const uint64_t so = ok ? pg * (uint64_t)s_ps + (uint32_t)(W.nrow + skey) * s_rs : 0u;
        rs = sbase[so];
    };

    if constexpr (NVL) {
#if QH_REGS_NVL
    /* ================= NVIDIA: decode_regs.comp, stage by stage ========= */
    constexpr int KW = D / 16; /* K words (4 codes) a lane reads per key */
    constexpr int VW = D / 32; /* V words a lane reads per key */
    const int g = lane >> 2, t = lane & 3;

    /* this lane's two rows (g, g + 8): visibility and q */
    int64_t lo_r[2], hi_r[2];
    bool real[2];
    for (int h = 0; h < 2; ++h) {
        real[h] = g + 8 * h < ROWS;
        rg_visible(p, K, R, real[h], g + 8 * h, lo_r[h], hi_r[h]);
    }
    /* q -> f16 A fragments with a per-row power of two; the four lanes of a
     * row group hold the whole row */
    uint32_t qa[NB][4];
    float cq[2];
    {
        float qv[2][D / 4];
        float mx[2];
        for (int h = 0; h < 2; ++h) {
            const int rc = qh_min(g + 8 * h, ROWS - 1);
            const uint16_t *qr = p.t.q + (int64_t)b * p.t.q_sb + (int64_t)(rc % R) * p.t.q_sr +
                                 (int64_t)(h0 + rc / R) * p.t.q_sh + t * (D / 4);
            mx[h] = 0.0f;
#pragma unroll
            for (int d = 0; d < D / 4; ++d) {
                qv[h][d] = q_f16 ? qh_f16_to_f32(qr[d]) : qh_bf16_to_f32(qr[d]);
                mx[h] = qh_fmaxf(mx[h], qh_fabsf(qv[h][d]));
            }
        }
        float sc[2];
        for (int h = 0; h < 2; ++h) {
            mx[h] = qh_fmaxf(mx[h], qh_shfl_xor_f32(mx[h], 1u));
            mx[h] = qh_fmaxf(mx[h], qh_shfl_xor_f32(mx[h], 2u));
            const int e = mx[h] > 0.0f ? 15 - rg_frexp_exp(mx[h]) : 0; /* mx 2^e in [2^14, 2^15) */
            sc[h] = real[h] ? rg_ldexp(1.0f, e) : 0.0f;
            cq[h] = rg_ldexp(1.0f, -e) * p.t.sm_scale;
        }
        /* register r = elements 2r, 2r + 1: row h = r % 2, codes (0, 2) for
         * r < 2, (1, 3) above */
#pragma unroll
        for (int j = 0; j < NB; ++j)
#pragma unroll
            for (int r = 0; r < 4; ++r) {
                const int h = r & 1, c = r >> 1;
                qa[j][r] = rg_pack(qv[h][4 * j + c] * sc[h], qv[h][4 * j + c + 2] * sc[h]);
            }
    }

    float oacc[NB][8];
#pragma unroll
    for (int j = 0; j < NB; ++j)
#pragma unroll
        for (int i = 0; i < 8; ++i) oacc[j][i] = 0.0f;
    float m[2] = {qh_neg_inf(), qh_neg_inf()}, l[2] = {0.0f, 0.0f};

    /* loads: K of keys g and g + 8 (bytes t D/4 ..), V of keys 2t, 2t+1,
     * 2t+8, 2t+9 (bytes g D/8 ..), one scale */
    int vkey[4];
    for (int a = 0; a < 4; ++a) vkey[a] = 2 * t + (a & 1) + 8 * (a >> 1);
    const uint32_t koff = (uint32_t)(t * (D / 4)), voff = (uint32_t)(g * (D / 8));
    uint32_t rk[2][KW], rv[4][VW];
    auto load_tile = [&](uint32_t t0) {
        tile_bounds(t0);
        const uint64_t pg = (uint64_t)qh_max(W.npage, 0);
        const uint8_t *kt = kbase + pg * (uint64_t)p.t.k_ps;
        const uint8_t *vt = vbase + pg * (uint64_t)p.t.v_ps;
#pragma unroll
        for (int a = 0; a < 2; ++a) {
            const int key = g + 8 * a;
            const bool ok = key >= nklo && key < nkhi;
            const uint8_t *at = ok ? kt + ((uint32_t)(W.nrow + key) * p.t.k_rs + koff) : kbase;
#pragma unroll
            for (int w = 0; w < KW; w += 4) {
                const qh_u32x4 x = *(const qh_u32x4 *)(at + 4 * w);
                rk[a][w] = x.x;
                rk[a][w + 1] = x.y;
                rk[a][w + 2] = x.z;
                rk[a][w + 3] = x.w;
            }
        }
#pragma unroll
        for (int a = 0; a < 4; ++a) {
            const bool ok = vkey[a] >= nklo && vkey[a] < nkhi;
            const uint8_t *at = ok ? vt + ((uint32_t)(W.nrow + vkey[a]) * p.t.v_rs + voff) : vbase;
            if constexpr (VW == 4) {
                const qh_u32x4 x = *(const qh_u32x4 *)at;
                rv[a][0] = x.x;
                rv[a][1] = x.y;
                rv[a][2 % VW] = x.z;
                rv[a][3 % VW] = x.w;
            } else {
                const qh_u32x2 x = *(const qh_u32x2 *)at;
                rv[a][0] = x.x;
                rv[a][1 % VW] = x.y;
            }
        }
        load_scale();
    };

    if (kb < ke) {
        rg_page_of(p, K, W);
        load_tile(ta);
        rg_page_of(p, K, W);
    }
    for (uint32_t t0 = ta; t0 < (uint32_t)ke; t0 += RTK) {
        const int32_t klo = nklo, khi = nkhi;
        /* 1. K fragments from the loaded words; V's words and the scales
         * are kept for later in this tile */
        uint32_t kf[NB][4];
#pragma unroll
        for (int j = 0; j < NB; ++j)
#pragma unroll
            for (int a = 0; a < 2; ++a) rg_decode<FMT>(rk[a][j], kf[j][2 * a], kf[j][2 * a + 1]);
        uint32_t cv[4][VW];
#pragma unroll
        for (int a = 0; a < 4; ++a)
#pragma unroll
            for (int w = 0; w < VW; ++w) cv[a][w] = rv[a][w];
        float ksc[4], vsc[4];
        bool kex[4];
#pragma unroll
        for (int a = 0; a < 4; ++a) {
            const float k_ = qh_shfl_f32(rs, (uint32_t)vkey[a]);
            const float v_ = qh_shfl_f32(rs, (uint32_t)(16 + vkey[a]));
            kex[a] = vkey[a] >= klo && vkey[a] < khi;
            ksc[a] = kex[a] ? k_ * KF : 0.0f;
            vsc[a] = kex[a] ? v_ * PSF : 0.0f;
        }
        /* 2. the next tile's loads and the page id of the one after */
        if (t0 + RTK < (uint32_t)ke) {
            load_tile(t0 + RTK);
            rg_page_of(p, K, W);
        }
        /* 3. S = Q K^T (two m16n8k16: columns g, then g + 8) */
        float s[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
        for (int j = 0; j < NB; ++j) {
            rg_mma(&s[0], qa[j], kf[j][0], kf[j][1]);
            rg_mma(&s[4], qa[j], kf[j][2], kf[j][3]);
        }
        /* 4. online softmax on the accumulator: element i is row g + 8 ((i /
         * 2) % 2), key vkey[i % 2 + 2 (i / 4)] */
        float x[8];
        float tmax[2] = {qh_neg_inf(), qh_neg_inf()};
#pragma unroll
        for (int i = 0; i < 8; ++i) {
            const int h = (i >> 1) & 1, a = (i & 1) + 2 * (i >> 2);
            float v = s[i] * cq[h] * ksc[a];
            if (p.t.softcap > 0.0f) v = p.t.softcap * rg_tanh(v / p.t.softcap);
            const int64_t pos = (int64_t)t0 + vkey[a];
            const bool vis = real[h] && kex[a] && pos >= lo_r[h] && pos <= hi_r[h];
            x[i] = vis ? v * RLOG2E : qh_neg_inf();
            tmax[h] = qh_fmaxf(tmax[h], x[i]);
        }
        float alpha[2];
        bool grew = false;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            tmax[h] = qh_fmaxf(tmax[h], qh_shfl_xor_f32(tmax[h], 1u));
            tmax[h] = qh_fmaxf(tmax[h], qh_shfl_xor_f32(tmax[h], 2u));
            const float mn = qh_fmaxf(m[h], tmax[h]);
            alpha[h] = mn == qh_neg_inf() ? 1.0f : qh_exp2f(m[h] - mn);
            grew = grew || alpha[h] != 1.0f;
            m[h] = mn;
        }
        if (rg_any(grew)) {
#pragma unroll
            for (int j = 0; j < NB; ++j)
#pragma unroll
                for (int i = 0; i < 8; ++i) oacc[j][i] *= alpha[(i >> 1) & 1];
            l[0] *= alpha[0];
            l[1] *= alpha[1];
        }
        uint32_t pa[4];
#pragma unroll
        for (int r = 0; r < 4; ++r) {
            float pr[2];
            for (int u = 0; u < 2; ++u) {
                const int i = 2 * r + u, h = (i >> 1) & 1, a = (i & 1) + 2 * (i >> 2);
                const float e = x[i] == qh_neg_inf() ? 0.0f : qh_exp2f(x[i] - m[h]);
                l[h] += e;
                pr[u] = e * vsc[a];
            }
            pa[r] = rg_pack(pr[0], pr[1]);
        }
        /* 5. O += P V: dims 2j, 2j + 1 of the lane's chunk (byte pair j % 2
         * of word j / 2) of keys (2t, 2t+1) and (2t+8, 2t+9) pair up into
         * (key, key) words: column g from the low codes, g + 8 the high */
#pragma unroll
        for (int j = 0; j < NB; ++j) {
            uint32_t vf[4];
#pragma unroll
            for (int a = 0; a < 2; ++a) {
                const uint32_t w0 = cv[2 * a][j / 2], w1 = cv[2 * a + 1][j / 2];
                const uint32_t xw = rg_perm(w0, w1, (j & 1) == 0 ? 0x5410u : 0x7632u);
                rg_decode<FMT>(xw, vf[a], vf[2 + a]);
            }
            rg_mma(&oacc[j][0], pa, vf[0], vf[1]);
            rg_mma(&oacc[j][4], pa, vf[2], vf[3]);
        }
    }

    /* ---- partials: unnormalised O (dim order), m and l per row ---- */
    const int S = p.t.num_splits;
    const int64_t slot0 = (((int64_t)b * p.t.hkv + kvh) * nrb + rb) * 16;
    float *ws_o = p.t.ws_o;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        if (!real[h]) continue;
        float *wo = ws_o + ((slot0 + g + 8 * h) * S + split) * D;
#pragma unroll
        for (int j = 0; j < NB; ++j)
#pragma unroll
            for (int u = 0; u < 2; ++u)
#pragma unroll
                for (int q = 0; q < 2; ++q) {
                    const int i = 2 * h + u + 4 * q; /* element: row h, column n = 2t + u + 8q */
                    const int n = 2 * t + u + 8 * q;
                    wo[(n & 7) * (D / 8) + 2 * j + (n >> 3)] = oacc[j][i] * (1.0f / PSF);
                }
    }
    float *ws_ml = p.t.ws_ml;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        float lt = l[h];
        lt += qh_shfl_xor_f32(lt, 1u);
        lt += qh_shfl_xor_f32(lt, 2u);
        if (t == 0 && real[h]) {
            float *at = ws_ml + ((slot0 + g + 8 * h) * S + split) * 2;
            at[0] = m[h];
            at[1] = lt;
        }
    }
#endif
    } else {
#if QH_REGS_AMDL
    /* ================= AMD: S^T = K Q^T, O^T = V^T P^T ================== */
    constexpr int NG = QH_WAVE / 16;      /* lane groups: 4 (gfx942), 2 (gfx12) */
    constexpr int KPL = 16 / NG;          /* k slots per lane per block = keys per lane */
    constexpr int KWB = KPL / 4;          /* K words per block per lane */
    constexpr int KWL = NB * KWB;         /* K words a lane loads (of one key) */
    constexpr int VWL = D / 64;           /* V words a lane loads per key */
    constexpr int NA = KPL / 2;           /* operand registers per fragment */
    static_assert(KWL % 4 == 0, "16-byte K loads");
    const int g = lane >> 4, c = lane & 15;
    const bool real = c < ROWS;
    int64_t lo_r, hi_r;
    rg_visible(p, K, R, real, c, lo_r, hi_r);

    /* q (B of S^T): row c at dims g D/NG + 4w + {0, 2}, {1, 3} per word w */
    uint32_t qb[KWL][2];
    float cq;
    {
        const int rc = qh_min(c, ROWS - 1);
        const uint16_t *qr = p.t.q + (int64_t)b * p.t.q_sb + (int64_t)(rc % R) * p.t.q_sr +
                             (int64_t)(h0 + rc / R) * p.t.q_sh + g * (D / NG);
        float qv[D / NG];
        float mx = 0.0f;
#pragma unroll
        for (int d = 0; d < D / NG; ++d) {
            qv[d] = q_f16 ? qh_f16_to_f32(qr[d]) : qh_bf16_to_f32(qr[d]);
            mx = qh_fmaxf(mx, qh_fabsf(qv[d]));
        }
        for (int o = 16; o < QH_WAVE; o <<= 1) mx = qh_fmaxf(mx, qh_shfl_xor_f32(mx, (uint32_t)o));
        const int e = mx > 0.0f ? 15 - rg_frexp_exp(mx) : 0;
        const float sc = real ? rg_ldexp(1.0f, e) : 0.0f;
        cq = rg_ldexp(1.0f, -e) * p.t.sm_scale;
#pragma unroll
        for (int w = 0; w < KWL; ++w) {
            qb[w][0] = rg_pack(qv[4 * w] * sc, qv[4 * w + 2] * sc);
            qb[w][1] = rg_pack(qv[4 * w + 1] * sc, qv[4 * w + 3] * sc);
        }
    }

    float oacc[NB][KPL];
#pragma unroll
    for (int j = 0; j < NB; ++j)
#pragma unroll
        for (int v = 0; v < KPL; ++v) oacc[j][v] = 0.0f;
    float m = qh_neg_inf(), l = 0.0f;

    /* loads: K of key c (bytes g D/NG ..), V of keys KPL g + v (bytes c D/16
     * ..), one scale */
    const uint32_t koff = (uint32_t)(g * (D / NG)), voff = (uint32_t)(c * (D / 16));
    uint32_t rk[KWL], rv[KPL][VWL];
    auto load_tile = [&](uint32_t t0) {
        tile_bounds(t0);
        const uint64_t pg = (uint64_t)qh_max(W.npage, 0);
        const uint8_t *kt = kbase + pg * (uint64_t)p.t.k_ps;
        const uint8_t *vt = vbase + pg * (uint64_t)p.t.v_ps;
        {
            const bool ok = c >= nklo && c < nkhi;
            const uint8_t *at = ok ? kt + ((uint32_t)(W.nrow + c) * p.t.k_rs + koff) : kbase;
#pragma unroll
            for (int w = 0; w < KWL; w += 4) {
                const qh_u32x4 x = *(const qh_u32x4 *)(at + 4 * w);
                rk[w] = x.x;
                rk[w + 1] = x.y;
                rk[w + 2] = x.z;
                rk[w + 3] = x.w;
            }
        }
#pragma unroll
        for (int v = 0; v < KPL; ++v) {
            const int key = KPL * g + v;
            const bool ok = key >= nklo && key < nkhi;
            const uint8_t *at = ok ? vt + ((uint32_t)(W.nrow + key) * p.t.v_rs + voff) : vbase;
            if constexpr (VWL == 2) {
                const qh_u32x2 x = *(const qh_u32x2 *)at;
                rv[v][0] = x.x;
                rv[v][1 % VWL] = x.y;
            } else {
                rv[v][0] = *(const uint32_t *)at;
            }
        }
        load_scale();
    };

    if (kb < ke) {
        rg_page_of(p, K, W);
        load_tile(ta);
        rg_page_of(p, K, W);
    }
    for (uint32_t t0 = ta; t0 < (uint32_t)ke; t0 += RTK) {
        const int32_t klo = nklo, khi = nkhi;
        /* 1. K fragments (A of S^T) from the loaded words: block j is words
         * KWB j .., each two consecutive registers */
        uint32_t kf[NB][NA];
#pragma unroll
        for (int j = 0; j < NB; ++j)
#pragma unroll
            for (int s = 0; s < KWB; ++s) rg_decode<FMT>(rk[KWB * j + s], kf[j][2 * s], kf[j][2 * s + 1]);
        /* V: (k0, k2, k1, k3) byte words of each four keys, per block */
        uint32_t cv[NB][KPL / 4];
#pragma unroll
        for (int j = 0; j < NB; ++j)
#pragma unroll
            for (int q = 0; q < KPL / 4; ++q)
                cv[j][q] = rg_gather4(rv[4 * q][j / 4], rv[4 * q + 1][j / 4], rv[4 * q + 2][j / 4],
                                      rv[4 * q + 3][j / 4], j % 4);
        float ksc[KPL], vsc[KPL];
        bool kex[KPL];
#pragma unroll
        for (int v = 0; v < KPL; ++v) {
            const int key = KPL * g + v;
            const float k_ = qh_shfl_f32(rs, (uint32_t)key);
            const float v_ = qh_shfl_f32(rs, (uint32_t)(16 + key));
            kex[v] = key >= klo && key < khi;
            ksc[v] = kex[v] ? k_ * KF : 0.0f;
            vsc[v] = kex[v] ? v_ * PSF : 0.0f;
        }
        /* 2. the next tile's loads and the page id of the one after */
        if (t0 + RTK < (uint32_t)ke) {
            load_tile(t0 + RTK);
            rg_page_of(p, K, W);
        }
        /* 3. S^T = K Q^T: lane (g, c) gets row c, keys KPL g + v */
        float s[KPL];
#pragma unroll
        for (int v = 0; v < KPL; ++v) s[v] = 0.0f;
#pragma unroll
        for (int j = 0; j < NB; ++j) {
            uint32_t bq[NA];
#pragma unroll
            for (int w = 0; w < KWB; ++w) {
                bq[2 * w] = qb[KWB * j + w][0];
                bq[2 * w + 1] = qb[KWB * j + w][1];
            }
#if defined(QH_GFX942)
            qh_mfma_f16(kf[j], bq, s);
#else
            qh_wmma_f16(kf[j], bq, s);
#endif
        }
        /* 4. online softmax on the accumulator: one row per lane */
        float x[KPL];
        float tmax = qh_neg_inf();
#pragma unroll
        for (int v = 0; v < KPL; ++v) {
            float y = s[v] * cq * ksc[v];
            if (p.t.softcap > 0.0f) y = p.t.softcap * rg_tanh(y / p.t.softcap);
            const int64_t pos = (int64_t)t0 + KPL * g + v;
            const bool vis = real && kex[v] && pos >= lo_r && pos <= hi_r;
            x[v] = vis ? y * RLOG2E : qh_neg_inf();
            tmax = qh_fmaxf(tmax, x[v]);
        }
        for (int o = 16; o < QH_WAVE; o <<= 1) tmax = qh_fmaxf(tmax, qh_shfl_xor_f32(tmax, (uint32_t)o));
        const float mn = qh_fmaxf(m, tmax);
        const float alpha = mn == qh_neg_inf() ? 1.0f : qh_exp2f(m - mn);
        m = mn;
        if (rg_any(alpha != 1.0f)) {
#pragma unroll
            for (int j = 0; j < NB; ++j)
#pragma unroll
                for (int v = 0; v < KPL; ++v) oacc[j][v] *= alpha;
            l *= alpha;
        }
        /* P^T (B of O^T): slot e = key KPL g + e, the accumulator's element */
        uint32_t pb[NA];
#pragma unroll
        for (int r = 0; r < NA; ++r) {
            float pr[2];
            for (int u = 0; u < 2; ++u) {
                const int v = 2 * r + u;
                const float e = x[v] == qh_neg_inf() ? 0.0f : qh_exp2f(x[v] - m);
                l += e;
                pr[u] = e * vsc[v];
            }
            pb[r] = rg_pack(pr[0], pr[1]);
        }
        /* 5. O^T += V^T P^T: row c of block j is dim c D/16 + j */
#pragma unroll
        for (int j = 0; j < NB; ++j) {
            uint32_t va[NA];
#pragma unroll
            for (int q = 0; q < KPL / 4; ++q) rg_decode<FMT>(cv[j][q], va[2 * q], va[2 * q + 1]);
#if defined(QH_GFX942)
            qh_mfma_f16(va, pb, oacc[j]);
#else
            qh_wmma_f16(va, pb, oacc[j]);
#endif
        }
    }

    /* ---- partials: unnormalised O (dim order), m and l per row ---- */
    const int S = p.t.num_splits;
    const int64_t slot0 = (((int64_t)b * p.t.hkv + kvh) * nrb + rb) * 16;
    if (real) {
        float *wo = QH_LATE(p, t.ws_o) + ((slot0 + c) * S + split) * D;
#pragma unroll
        for (int v = 0; v < KPL; ++v)
#pragma unroll
            for (int j = 0; j < NB; ++j) wo[(KPL * g + v) * (D / 16) + j] = oacc[j][v] * (1.0f / PSF);
    }
    for (int o = 16; o < QH_WAVE; o <<= 1) l += qh_shfl_xor_f32(l, (uint32_t)o);
    if (g == 0 && real) {
        float *at = QH_LATE(p, t.ws_ml) + ((slot0 + c) * S + split) * 2;
        at[0] = m;
        at[1] = l;
    }
#endif
    }
}

/* ======================================================================
 * Instantiations: the names the runtime looks up (qh_kernels.def)
 * ====================================================================== */
#if defined(QH_NVIDIA)
#define QH_REGS_RUN(fmt, d, p) decode_regs<fmt, d, true>(p)
#elif QH_REGS_NVL
/* The wave32 host simulation runs the NVIDIA path instead of gfx12's when
 * QATTN_HOSTSIM_REGS_TWIN=1 (hip_hostsim_gfx12_parity_decode_regs_twin):
 * the twin's logic, bounds and layouts checked on the CPU, its mma.sync
 * emulated from the PTX layout. */
#include <stdlib.h>
static bool rg_sim_twin(void) {
    static int v = -1;
    if (v < 0) {
        const char *e = getenv("QATTN_HOSTSIM_REGS_TWIN");
        v = e && e[0] == '1';
    }
    return v != 0;
}
#define QH_REGS_RUN(fmt, d, p) \
    (rg_sim_twin() ? decode_regs<fmt, d, true>(p) : decode_regs<fmt, d, false>(p))
#else
#define QH_REGS_RUN(fmt, d, p) decode_regs<fmt, d, false>(p)
#endif
#define QH_DEC_REGS(name, fmt, d)                                                                      \
    QH_KERNEL QH_LAUNCH_BOUNDS(QH_WAVE) void qattn_decode_regs_##name##_d##d(qh_decode_params p) { \
        QH_REGS_RUN(fmt, d, p);                                                                        \
    }
#define QH_DEC_REGS_D(name, fmt) \
    QH_DEC_REGS(name, fmt, 64)   \
    QH_DEC_REGS(name, fmt, 128)

QH_DEC_REGS_D(i8, QH_I8)
QH_DEC_REGS_D(fn, QH_FN)
QH_DEC_REGS_D(fnuz, QH_FNUZ)
QH_DEC_REGS_D(e5m2, QH_E5M2)

#endif /* QH_REGS_BUILT */
