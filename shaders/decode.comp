#version 450
// Decode attention, stage 1, scalar kernels (generic / packed_fp8 /
// multirow): runs on any Vulkan 1.3 device. See core/src/plan_decode.c for
// the geometry the planner picks.
//
// One workgroup = one (split, kv head, block of QH query heads, request).
// Lanes form key groups of LPK lanes; a group reads one key row at a time
// (DPL = D / LPK elements per lane), so K and V are read once for all QH*R
// query rows of the workgroup. Each group keeps U keys in flight per tile,
// an online softmax per row (log2 domain), and its share of the output;
// groups are merged with subgroup shuffles, then subgroups through shared
// memory. Per-token-head scales are applied after the dot product (K) and
// to the probability (V).
//
// Defines: KV_BF16 | KV_FP8FN | KV_FP8FNUZ | KV_I8 (cache dtype);
//          PACKED: fp8 codes read as 32-bit words (4 at a time) with 8- or
//          16-byte loads per lane (planner's packed_fp8 gate guarantees the
//          alignment).
// The multirow variant is this kernel with RB = R (all query rows of a
// request in one workgroup, sharing each K/V load); generic runs RB = 1
// (one workgroup per row), packed_fp8 has R = 1.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "common_decode.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const int D = 128; // = Dv
layout(constant_id = 2) const int LPK = 8; // lanes per key group (divides the subgroup size)
layout(constant_id = 3) const int R = 1;   // query rows per request
layout(constant_id = 7) const int RB = 1;  // query rows per workgroup (divides R)
layout(constant_id = 4) const int QH = 1;  // query heads per workgroup
layout(constant_id = 5) const int U = 4;   // keys per group per tile
layout(constant_id = 6) const int NSG = 4; // shared slots: workgroup size / min subgroup size
const int DPL = D / LPK;
const int ROWS = QH * RB;

shared float sh_m[NSG * ROWS];
shared float sh_l[NSG * ROWS];
shared float sh_o[NSG * ROWS * D];

#if defined(KV_FP8FNUZ)
const bool FNUZ = true;
#else
const bool FNUZ = false;
#endif

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
// Four fp8 codes of a word -> f32 values times 2^-8 (fn) or 2^-7 (fnuz):
// each code's sign/exponent/mantissa bits placed into an f16 (bias 15), so
// the conversion is exact; the power of two is folded into the scale.
void unpack4(uint w, out float x0, out float x1, out float x2, out float x3) {
    vec2 a = unpackHalf2x16(((w << 7) & 0x3F803F80u) | ((w << 8) & 0x80008000u)); // bytes 0, 2
    vec2 b = unpackHalf2x16(((w >> 1) & 0x3F803F80u) | (w & 0x80008000u));        // bytes 1, 3
    x0 = a.x; x1 = b.x; x2 = a.y; x3 = b.y;
}
const float PACK_SCALE = FNUZ ? 128.0 : 256.0;

#else
// Element j of lane li of the row at byte address `row`, decoded exactly.
float load_elem(uint64_t row, int li, int j) {
    int d = dim_of(li, j);
#if defined(KV_BF16)
    return qa_bf16_to_f32(uint(RefU16(row).v[d]));
#elif defined(KV_I8)
    return float(int(RefI8(row).v[d]));
#else
    return qa_fp8_to_f32(uint(RefU8(row).v[d]), FNUZ);
#endif
}
#endif

#if defined(KV_BF16)
float kv_scale(uint64_t base, int ss, int sh, int slot, int g) { return 1.0; }
#else
float kv_scale(uint64_t base, int ss, int sh, int slot, int g) {
    float s = RefF32(qa_at(base, int64_t(slot) * ss + int64_t(g) * sh, 4)).v[0];
#if defined(PACKED)
    s *= PACK_SCALE;
#endif
    return s;
}
#endif

#if defined(PACKED) || !defined(KV_BF16)
const uint KV_ESIZE = 1;
#else
const uint KV_ESIZE = 2;
#endif

void main() {
    const int split = int(gl_WorkGroupID.x);
    const int G = pc.hq / pc.hkv;
    const int nqb = G / QH;
    const int g = int(gl_WorkGroupID.y) / nqb;
    const int h0 = g * G + (int(gl_WorkGroupID.y) % nqb) * QH;
    const int b = int(gl_WorkGroupID.z) / (R / RB);
    const int r0 = (int(gl_WorkGroupID.z) % (R / RB)) * RB; // first query row of this workgroup
    const int tid = int(gl_LocalInvocationID.x);
    const int NKG = int(gl_WorkGroupSize.x) / LPK;
    const int kg = tid / LPK;
    const int li = tid % LPK;

    const int L = RefI32(qa_at(pc.lens, int64_t(b) * pc.lens_s, 4)).v[0];
    const int first = qa_first_page(b);
    // Keys any row of this workgroup can see, within this split.
    int lo0, hi0, loR, hiR;
    qa_visible(L, R, r0, lo0, hi0);
    qa_visible(L, R, r0 + RB - 1, loR, hiR);
    const int k_begin = max(split * pc.keys_per_split, lo0);
    const int k_end = min(min(split * pc.keys_per_split + pc.keys_per_split, L), hiR + 1);

    // This lane's slice of q, one row per (query head, query row).
    float q[ROWS][DPL];
    [[unroll]] for (int row = 0; row < ROWS; ++row) {
        int h = h0 + row / RB, r = r0 + row % RB;
        int64_t base = int64_t(b) * pc.q_sb + int64_t(r) * pc.q_sr + int64_t(h) * pc.q_sh;
        [[unroll]] for (int j = 0; j < DPL; ++j)
            q[row][j] = qa_bf16_to_f32(uint(RefU16(qa_at(pc.q, base + dim_of(li, j), 2)).v[0]));
    }

    float m[ROWS], l[ROWS], acc[ROWS][DPL];
    [[unroll]] for (int row = 0; row < ROWS; ++row) {
        m[row] = QA_NEG_INF;
        l[row] = 0.0;
        [[unroll]] for (int j = 0; j < DPL; ++j) acc[row][j] = 0.0;
    }

    // Slots of this group's keys in the first tile; inside the loop the next
    // tile's slots are fetched while this tile's K/V loads are in flight,
    // so the page-table read is off the critical path.
    int next_slot[U];
    [[unroll]] for (int u = 0; u < U; ++u) {
        int p = k_begin + u * NKG + kg;
        next_slot[u] = p < k_end ? qa_slot(first, p) : 0;
    }
    for (int t0 = k_begin; t0 < k_end; t0 += NKG * U) {
        int pos[U];
        float kx[U][DPL], vx[U][DPL], ksc[U], vsc[U];
#if defined(PACKED)
        uint kw[U][DPL / 4], vw[U][DPL / 4];
#endif
        // Issue every load of the tile before using any.
        [[unroll]] for (int u = 0; u < U; ++u) {
            pos[u] = t0 + u * NKG + kg;
            // An invisible key reads slot 0 of the cache (always valid) and
            // gets weight 0, so every lane runs the same loads.
            int slot = next_slot[u];
            uint64_t krow = qa_at(pc.k, int64_t(slot) * pc.k_ss + int64_t(g) * pc.k_sh, KV_ESIZE);
            uint64_t vrow = qa_at(pc.v, int64_t(slot) * pc.v_ss + int64_t(g) * pc.v_sh, KV_ESIZE);
#if defined(PACKED)
            if (DPL == 16) {
                uvec4 a = RefU32x4(krow + uint64_t(li * 16)).v[0];
                uvec4 c = RefU32x4(vrow + uint64_t(li * 16)).v[0];
                kw[u][0] = a.x; kw[u][1] = a.y; kw[u][2] = a.z; kw[u][3] = a.w;
                vw[u][0] = c.x; vw[u][1] = c.y; vw[u][2] = c.z; vw[u][3] = c.w;
            } else if (DPL == 8) {
                uvec2 a = RefU32x2(krow + uint64_t(li * 8)).v[0];
                uvec2 c = RefU32x2(vrow + uint64_t(li * 8)).v[0];
                kw[u][0] = a.x; kw[u][1] = a.y;
                vw[u][0] = c.x; vw[u][1] = c.y;
            } else {
                [[unroll]] for (int w = 0; w < DPL / 4; ++w) {
                    kw[u][w] = RefU32(krow + uint64_t(li * DPL + 4 * w)).v[0];
                    vw[u][w] = RefU32(vrow + uint64_t(li * DPL + 4 * w)).v[0];
                }
            }
#else
            // Zeros for a key past the range: slot 0 may hold NaN codes.
            const bool in_range = pos[u] < k_end;
            [[unroll]] for (int j = 0; j < DPL; ++j) {
                float kv0 = load_elem(krow, li, j), kv1 = load_elem(vrow, li, j);
                kx[u][j] = in_range ? kv0 : 0.0;
                vx[u][j] = in_range ? kv1 : 0.0;
            }
#endif
            ksc[u] = kv_scale(pc.ks, pc.ks_ss, pc.ks_sh, slot, g);
            vsc[u] = kv_scale(pc.vs, pc.vs_ss, pc.vs_sh, slot, g);
        }
        [[unroll]] for (int u = 0; u < U; ++u) {
            int p = t0 + NKG * U + u * NKG + kg;
            next_slot[u] = p < k_end ? qa_slot(first, p) : 0;
        }
#if defined(PACKED)
        [[unroll]] for (int u = 0; u < U; ++u) {
            [[unroll]] for (int w = 0; w < DPL / 4; ++w) {
                unpack4(kw[u][w], kx[u][4 * w], kx[u][4 * w + 1], kx[u][4 * w + 2], kx[u][4 * w + 3]);
                unpack4(vw[u][w], vx[u][4 * w], vx[u][4 * w + 1], vx[u][4 * w + 2], vx[u][4 * w + 3]);
            }
        }
#endif
        [[unroll]] for (int row = 0; row < ROWS; ++row) {
            int r = r0 + row % RB;
            int lo, hi;
            qa_visible(L, R, r, lo, hi);
            float s[U];
            float mt = QA_NEG_INF;
            [[unroll]] for (int u = 0; u < U; ++u) {
                float dot = 0.0;
                [[unroll]] for (int j = 0; j < DPL; ++j) dot += q[row][j] * kx[u][j];
                // Sum over the key group (every lane stays active here).
                [[unroll]] for (int off = LPK / 2; off >= 1; off /= 2)
                    dot += subgroupShuffleXor(dot, uint(off));
                bool vis = pos[u] < k_end && pos[u] >= lo && pos[u] <= hi;
                s[u] = vis ? qa_score2(dot * ksc[u]) : QA_NEG_INF;
                mt = max(mt, s[u]);
            }
            float mnew = max(m[row], mt);
            if (mnew != QA_NEG_INF) { // else nothing visible yet in this group
                float alpha = qa_exp2_diff(m[row], mnew);
                l[row] *= alpha;
                [[unroll]] for (int j = 0; j < DPL; ++j) acc[row][j] *= alpha;
                [[unroll]] for (int u = 0; u < U; ++u) {
                    float p = qa_exp2_diff(s[u], mnew);
                    l[row] += p;
                    float pv = p * vsc[u];
                    [[unroll]] for (int j = 0; j < DPL; ++j) acc[row][j] += pv * vx[u][j];
                }
                m[row] = mnew;
            }
        }
    }

    // Merge the key groups of a subgroup (same li, different kg).
    for (uint off = uint(LPK); off < gl_SubgroupSize; off *= 2u) {
        [[unroll]] for (int row = 0; row < ROWS; ++row) {
            float mo = subgroupShuffleXor(m[row], off);
            float lo_ = subgroupShuffleXor(l[row], off);
            float mn = max(m[row], mo);
            float a1 = qa_exp2_diff(m[row], mn), a2 = qa_exp2_diff(mo, mn);
            l[row] = l[row] * a1 + lo_ * a2;
            [[unroll]] for (int j = 0; j < DPL; ++j) {
                float ao = subgroupShuffleXor(acc[row][j], off);
                acc[row][j] = acc[row][j] * a1 + ao * a2;
            }
            m[row] = mn;
        }
    }
    const int sg = int(gl_SubgroupID);
    if (int(gl_SubgroupInvocationID) < LPK) {
        [[unroll]] for (int row = 0; row < ROWS; ++row) {
            if (li == 0) {
                sh_m[sg * ROWS + row] = m[row];
                sh_l[sg * ROWS + row] = l[row];
            }
            [[unroll]] for (int j = 0; j < DPL; ++j) sh_o[(sg * ROWS + row) * D + dim_of(li, j)] = acc[row][j];
        }
    }
    barrier();

    // Merge the subgroups and write this workgroup's rows.
    const int nsg = int(gl_NumSubgroups);
    for (int idx = tid; idx < ROWS * D; idx += int(gl_WorkGroupSize.x)) {
        int row = idx / D, d = idx % D;
        float mm = QA_NEG_INF;
        for (int i = 0; i < nsg; ++i) mm = max(mm, sh_m[i * ROWS + row]);
        float ll = 0.0, oo = 0.0;
        for (int i = 0; i < nsg; ++i) {
            float w = qa_exp2_diff(sh_m[i * ROWS + row], mm);
            ll += sh_l[i * ROWS + row] * w;
            oo += sh_o[(i * ROWS + row) * D + d] * w;
        }
        qa_epilogue(b, r0 + row % RB, h0 + row / RB, R, split, d, D, mm, ll, oo, d == 0);
    }
}
