#version 450
// Decode attention, stage 1, scalar kernels (generic / packed_fp8 /
// multirow): runs on any Vulkan 1.3 device. See core/src/plan_decode.c for
// the geometry the planner picks.
//
// One workgroup = one (split, kv head, block of QH query heads, block of RB
// query rows, request). Lanes form key groups of LPK lanes; a group reads
// one key row at a time (DPL = D / LPK elements per lane), so K and V are
// read once for all QH*RB query rows of the workgroup. Each group takes U
// keys per tile and keeps two tiles in flight: the loads of tile t+1 (page
// table, then K/V rows and scales) are issued before tile t is computed, so
// memory latency overlaps the arithmetic. Codes stay raw in registers until
// used and are decoded on the fly. Per row an online softmax in the log2
// domain; per-token-head scales apply after the dot product (K) and to the
// probability (V). Groups are merged with subgroup shuffles, then
// subgroups through shared memory.
//
// Defines: KV_BF16 | KV_FP8FN | KV_FP8FNUZ | KV_I8 (cache dtype);
//          PACKED: fp8 codes read as 32-bit words (4 at a time) with 16-,
//          8- or 4-byte loads per lane (the planner's packed_fp8 gate
//          guarantees the alignment);
//          FIX_LPK/FIX_QH/FIX_U: a precompiled packed specialization (D 128,
//          one row) whose sizes are compile-time constants, so per-lane
//          arrays stay in registers without relying on the driver to unroll
//          after specialization.
// The multirow variant is this kernel with RB = R (all query rows of a
// request in one workgroup, sharing each K/V load); generic runs RB = 1.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "common_decode.glsl"

layout(local_size_x_id = 0) in;
#if defined(FIX_QH)
const int D = 128;
const int LPK = FIX_LPK;
const int R = 1;
const int QH = FIX_QH;
const int U = FIX_U;
const int RB = 1;
#else
layout(constant_id = 1) const int D = 128; // = Dv
layout(constant_id = 2) const int LPK = 8; // lanes per key group (divides the subgroup size)
layout(constant_id = 3) const int R = 1;   // query rows per request
layout(constant_id = 4) const int QH = 1;  // query heads per workgroup
layout(constant_id = 5) const int U = 4;   // keys per group per tile
layout(constant_id = 7) const int RB = 1;  // query rows per workgroup (divides R)
#endif
layout(constant_id = 6) const int NSG = 4; // shared slots: workgroup size / min subgroup size
const int DPL = D / LPK;
const int ROWS = QH * RB;
#if defined(PACKED)
const int NW = DPL / 4; // 32-bit words of codes per lane and key
#else
// The generic reader loads element by element and packs the raw bits into
// words (2 bf16 or 4 byte codes each) to keep two tiles in few registers.
#if defined(KV_BF16)
const int EPW = 2;
#else
const int EPW = 4;
#endif
const int EBITS = 32 / EPW;
const int NW = (DPL + EPW - 1) / EPW;
#endif

shared float sh_m[NSG * ROWS];
shared float sh_l[NSG * ROWS];
shared float sh_o[NSG * ROWS * D];

#if defined(KV_FP8FNUZ)
const bool FNUZ = true;
#else
const bool FNUZ = false;
#endif
#if defined(PACKED) || !defined(KV_BF16)
const uint KV_ESIZE = 1;
#else
const uint KV_ESIZE = 2;
#endif

// Per-invocation state, shared by the helpers below (which the driver
// inlines with constant buffer indices).
float q[ROWS][DPL], acc[ROWS][DPL], m[ROWS], l[ROWS];
uint kraw[2][U][NW], vraw[2][U][NW]; // two tiles in flight
float ksc[2][U], vsc[2][U];
int kpos[2][U];
int g_first, g_kend, g_g, g_kg, g_li, g_nkg, g_L, g_r0;

// Dimension held by element j of lane li. The packed reader gives each lane
// a contiguous run (one vector load); the generic reader interleaves lanes
// so each element-sized load instruction of a group is contiguous.
int dim_of(int li, int j) {
#if defined(PACKED)
    return li * DPL + j;
#else
    return j * LPK + li;
#endif
}

#if defined(PACKED)
// Four fp8 codes of a word -> f32 values times 2^-8 (fn) or 2^-7 (fnuz)
// (common_decode.glsl); the power of two is folded into the scale.
vec4 unpack4(uint w) { return qa_fp8x4_f16trick(w); }
const float PACK_SCALE = FNUZ ? 128.0 : 256.0;
#else
// A raw element (its bits, zero-extended) -> its exact value.
float decode_raw(uint x) {
#if defined(KV_BF16)
    return qa_bf16_to_f32(x);
#elif defined(KV_I8)
    return float(int(x << 24) >> 24);
#else
    return qa_fp8_to_f32(x, FNUZ);
#endif
}
uint load_raw(uint64_t row, int d) {
#if defined(KV_BF16)
    return uint(RefU16(row).v[d]);
#else
    return uint(RefU8(row).v[d]);
#endif
}
#endif

float kv_scale(uint64_t base, int ss_, int sh, int slot, int g) {
#if defined(KV_BF16)
    return 1.0;
#else
    float s = RefF32(qa_at(base, int64_t(slot) * ss_ + int64_t(g) * sh, 4)).v[0];
#if defined(PACKED)
    s *= PACK_SCALE;
#endif
    return s;
#endif
}

// Issues the loads of the group's U keys of the tile starting at t0 into
// buffer `buf`. Keys past the range read slot 0 (always valid memory) and
// are zeroed or masked, so every lane runs the same loads.
void load_tile(const int buf, int t0) {
    [[unroll]] for (int u = 0; u < U; ++u) {
        const int p = t0 + u * g_nkg + g_kg;
        const bool in_range = p < g_kend;
        kpos[buf][u] = p;
        const int slot = in_range ? qa_slot(g_first, p) : 0;
        const uint64_t krow = qa_at(pc.k, int64_t(slot) * pc.k_ss + int64_t(g_g) * pc.k_sh, KV_ESIZE);
        const uint64_t vrow = qa_at(pc.v, int64_t(slot) * pc.v_ss + int64_t(g_g) * pc.v_sh, KV_ESIZE);
#if defined(PACKED)
        // One 16- or 8-byte load per lane and row where the run allows it.
#define QA_LOAD_W4()                                                                            \
        {                                                                                         \
            uvec4 a = RefU32x4(krow + uint64_t(g_li * 16)).v[0];                                  \
            uvec4 c = RefU32x4(vrow + uint64_t(g_li * 16)).v[0];                                  \
            [[unroll]] for (int w = 0; w < 4; ++w) { kraw[buf][u][w] = a[w]; vraw[buf][u][w] = c[w]; } \
        }
#define QA_LOAD_W2()                                                                            \
        {                                                                                         \
            uvec2 a = RefU32x2(krow + uint64_t(g_li * 8)).v[0];                                   \
            uvec2 c = RefU32x2(vrow + uint64_t(g_li * 8)).v[0];                                   \
            [[unroll]] for (int w = 0; w < 2; ++w) { kraw[buf][u][w] = a[w]; vraw[buf][u][w] = c[w]; } \
        }
#define QA_LOAD_WN()                                                                            \
        [[unroll]] for (int w = 0; w < NW; ++w) {                                                 \
            kraw[buf][u][w] = RefU32(krow + uint64_t(g_li * DPL + 4 * w)).v[0];                   \
            vraw[buf][u][w] = RefU32(vrow + uint64_t(g_li * DPL + 4 * w)).v[0];                   \
        }
#if defined(FIX_QH)
#if FIX_LPK == 8
        QA_LOAD_W4()
#elif FIX_LPK == 16
        QA_LOAD_W2()
#else
        QA_LOAD_WN()
#endif
#else
        if (NW == 4) QA_LOAD_W4()
        else if (NW == 2) QA_LOAD_W2()
        else QA_LOAD_WN()
#endif
#else
        // Zero codes for a key past the range: slot 0 may hold NaN codes.
        [[unroll]] for (int w = 0; w < NW; ++w) {
            uint kw = 0u, vw = 0u;
            [[unroll]] for (int e = 0; e < EPW; ++e) {
                const int j = w * EPW + e;
                if (j < DPL) {
                    const int d = dim_of(g_li, j);
                    kw |= load_raw(krow, d) << uint(e * EBITS);
                    vw |= load_raw(vrow, d) << uint(e * EBITS);
                }
            }
            kraw[buf][u][w] = in_range ? kw : 0u;
            vraw[buf][u][w] = in_range ? vw : 0u;
        }
#endif
        // Zero scales past the range: slot 0's may be anything (0 * inf).
        const float ks0 = kv_scale(pc.ks, pc.ks_ss, pc.ks_sh, slot, g_g);
        const float vs0 = kv_scale(pc.vs, pc.vs_ss, pc.vs_sh, slot, g_g);
        ksc[buf][u] = in_range ? ks0 : 0.0;
        vsc[buf][u] = in_range ? vs0 : 0.0;
    }
}

// Scores, online softmax and V accumulation for buffer `buf`.
void compute_tile(const int buf) {
    // Dot products of every row with every key, decoding K on the fly.
    float s[U][ROWS];
    [[unroll]] for (int u = 0; u < U; ++u) {
        [[unroll]] for (int row = 0; row < ROWS; ++row) s[u][row] = 0.0;
#if defined(PACKED)
        [[unroll]] for (int w = 0; w < NW; ++w) {
            const vec4 k4 = unpack4(kraw[buf][u][w]);
            [[unroll]] for (int row = 0; row < ROWS; ++row)
                s[u][row] += q[row][4 * w] * k4.x + q[row][4 * w + 1] * k4.y + q[row][4 * w + 2] * k4.z +
                             q[row][4 * w + 3] * k4.w;
        }
#else
        [[unroll]] for (int j = 0; j < DPL; ++j) {
            const float kx = decode_raw(bitfieldExtract(kraw[buf][u][j / EPW], (j % EPW) * EBITS, EBITS));
            [[unroll]] for (int row = 0; row < ROWS; ++row) s[u][row] += q[row][j] * kx;
        }
#endif
        // Sum over the key group (every lane stays active here).
        [[unroll]] for (int row = 0; row < ROWS; ++row)
            [[unroll]] for (int off = LPK / 2; off >= 1; off /= 2)
                s[u][row] += subgroupShuffleXor(s[u][row], uint(off));
    }
    // Masks, scale factors, online softmax; p overwrites s.
    [[unroll]] for (int row = 0; row < ROWS; ++row) {
        int lo, hi;
        qa_visible(g_L, R, g_r0 + row % RB, lo, hi);
        float mt = QA_NEG_INF;
        [[unroll]] for (int u = 0; u < U; ++u) {
            const int p = kpos[buf][u];
            const bool vis = p < g_kend && p >= lo && p <= hi;
            s[u][row] = vis ? qa_score2(s[u][row] * ksc[buf][u]) : QA_NEG_INF;
            mt = max(mt, s[u][row]);
        }
        const float mnew = max(m[row], mt);
        const float alpha = qa_exp2_diff(m[row], mnew);
        float lsum = 0.0;
        [[unroll]] for (int u = 0; u < U; ++u) {
            // mnew is -inf only when nothing was visible yet: then p = 0.
            const float p = mnew == QA_NEG_INF ? 0.0 : qa_exp2_diff(s[u][row], mnew);
            lsum += p;
            s[u][row] = p * vsc[buf][u];
        }
        if (mnew != QA_NEG_INF) {
            l[row] = l[row] * alpha + lsum;
            if (alpha != 1.0)
                [[unroll]] for (int j = 0; j < DPL; ++j) acc[row][j] *= alpha;
            m[row] = mnew;
        }
    }
    // V accumulation, decoding V on the fly.
    [[unroll]] for (int u = 0; u < U; ++u) {
#if defined(PACKED)
        [[unroll]] for (int w = 0; w < NW; ++w) {
            const vec4 v4 = unpack4(vraw[buf][u][w]);
            [[unroll]] for (int row = 0; row < ROWS; ++row) {
                const float pv = s[u][row];
                acc[row][4 * w] += pv * v4.x;
                acc[row][4 * w + 1] += pv * v4.y;
                acc[row][4 * w + 2] += pv * v4.z;
                acc[row][4 * w + 3] += pv * v4.w;
            }
        }
#else
        [[unroll]] for (int j = 0; j < DPL; ++j) {
            const float vx = decode_raw(bitfieldExtract(vraw[buf][u][j / EPW], (j % EPW) * EBITS, EBITS));
            [[unroll]] for (int row = 0; row < ROWS; ++row) acc[row][j] += s[u][row] * vx;
        }
#endif
    }
}

void main() {
    const int split = int(gl_WorkGroupID.x);
    const int G = pc.hq / pc.hkv;
    const int nqb = G / QH;
    g_g = int(gl_WorkGroupID.y) / nqb;
    const int h0 = g_g * G + (int(gl_WorkGroupID.y) % nqb) * QH;
    const int b = int(gl_WorkGroupID.z) / (R / RB);
    g_r0 = (int(gl_WorkGroupID.z) % (R / RB)) * RB; // first query row of this workgroup
    const int tid = int(gl_LocalInvocationID.x);
    g_nkg = int(gl_WorkGroupSize.x) / LPK;
    g_kg = tid / LPK;
    g_li = tid % LPK;

    g_L = RefI32(qa_at(pc.lens, int64_t(b) * pc.lens_s, 4)).v[0];
    g_first = qa_first_page(b);
    // Keys any row of this workgroup can see, within this split.
    int lo0, hi0, loR, hiR;
    qa_visible(g_L, R, g_r0, lo0, hi0);
    qa_visible(g_L, R, g_r0 + RB - 1, loR, hiR);
    const int k_begin = max(split * pc.keys_per_split, lo0);
    g_kend = min(min(split * pc.keys_per_split + pc.keys_per_split, g_L), hiR + 1);

    // This lane's slice of q, one row per (query head, query row).
    [[unroll]] for (int row = 0; row < ROWS; ++row) {
        const int h = h0 + row / RB, r = g_r0 + row % RB;
        const int64_t base = int64_t(b) * pc.q_sb + int64_t(r) * pc.q_sr + int64_t(h) * pc.q_sh;
        [[unroll]] for (int j = 0; j < DPL; ++j)
            q[row][j] = qa_bf16_to_f32(uint(RefU16(qa_at(pc.q, base + dim_of(g_li, j), 2)).v[0]));
        m[row] = QA_NEG_INF;
        l[row] = 0.0;
        [[unroll]] for (int j = 0; j < DPL; ++j) acc[row][j] = 0.0;
    }

    // Two tiles in flight: load t+1 while computing t.
    const int step = g_nkg * U;
    if (k_begin < g_kend) load_tile(0, k_begin);
    for (int t0 = k_begin; t0 < g_kend; t0 += 2 * step) {
        if (t0 + step < g_kend) load_tile(1, t0 + step);
        compute_tile(0);
        if (t0 + step >= g_kend) break;
        if (t0 + 2 * step < g_kend) load_tile(0, t0 + 2 * step);
        compute_tile(1);
    }

    // Merge the key groups of a subgroup (same li, different kg).
    for (uint off = uint(LPK); off < gl_SubgroupSize; off *= 2u) {
        [[unroll]] for (int row = 0; row < ROWS; ++row) {
            const float mo = subgroupShuffleXor(m[row], off);
            const float lo_ = subgroupShuffleXor(l[row], off);
            const float mn = max(m[row], mo);
            const float a1 = qa_exp2_diff(m[row], mn), a2 = qa_exp2_diff(mo, mn);
            l[row] = l[row] * a1 + lo_ * a2;
            [[unroll]] for (int j = 0; j < DPL; ++j) {
                const float ao = subgroupShuffleXor(acc[row][j], off);
                acc[row][j] = acc[row][j] * a1 + ao * a2;
            }
            m[row] = mn;
        }
    }
    const int sg = int(gl_SubgroupID);
    if (int(gl_SubgroupInvocationID) < LPK) {
        [[unroll]] for (int row = 0; row < ROWS; ++row) {
            if (g_li == 0) {
                sh_m[sg * ROWS + row] = m[row];
                sh_l[sg * ROWS + row] = l[row];
            }
            [[unroll]] for (int j = 0; j < DPL; ++j) sh_o[(sg * ROWS + row) * D + dim_of(g_li, j)] = acc[row][j];
        }
    }
    barrier();

    // Merge the subgroups and write this workgroup's rows.
    const int nsg = int(gl_NumSubgroups);
    for (int idx = tid; idx < ROWS * D; idx += int(gl_WorkGroupSize.x)) {
        const int row = idx / D, d = idx % D;
        float mm = QA_NEG_INF;
        for (int i = 0; i < nsg; ++i) mm = max(mm, sh_m[i * ROWS + row]);
        float ll = 0.0, oo = 0.0;
        for (int i = 0; i < nsg; ++i) {
            const float w = qa_exp2_diff(sh_m[i * ROWS + row], mm);
            ll += sh_l[i * ROWS + row] * w;
            oo += sh_o[(i * ROWS + row) * D + d] * w;
        }
        qa_epilogue(b, g_r0 + row % RB, h0 + row / RB, R, split, d, D, mm, ll, oo, d == 0);
    }
}
