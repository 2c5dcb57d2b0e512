#version 450
// Decode attention, stage 1, on the matrix unit (VK_KHR_cooperative_matrix,
// f16 x f16 -> f32, 16x16x16). Same workgroup mapping as decode.comp: one
// (split, kv head, block of QH query heads, request); its QH*R <= 16 query
// rows form the 16 rows of the A operand.
//
// Each of the NS subgroups streams its own tiles of NK keys:
//   1. K and V rows of the tile -> f16 in shared memory (fp8 codes become
//      f16 bit patterns, exact, times 2^-8 (fn) or 2^-7 (fnuz); int8 exact);
//   2. S = Q K^T on the matrix unit (Q pre-scaled per row by a power of two
//      into f16 range), then per-row scale factors, softcap and masks;
//   3. P = exp2(s - m_ref) * v_scale in f16 with a per-row reference m_ref
//      that only moves when a score exceeds it by 2^8 (then the accumulators
//      are rescaled through shared memory, rarely), so P <= 256 * v_scale;
//   4. O += P V on the matrix unit.
// The subgroups' (m_ref, l, O) are merged at the end as in decode.comp.
// Shared-memory layout must match coopmat_shared() in core/src/plan_decode.c.
//
// Defines: KV_FP8FN | KV_FP8FNUZ | KV_I8 (a bf16 cache needs bf16 operands).
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_vote : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#include "common.glsl"
#include "common_decode.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const int D = 128; // = Dv
layout(constant_id = 2) const int R = 1;   // query rows per request
layout(constant_id = 3) const int QH = 1;  // query heads per workgroup (QH * R <= 16)
layout(constant_id = 4) const int NS = 1;  // subgroups
layout(constant_id = 5) const int NK = 32; // keys per subgroup tile (multiple of 16)
layout(constant_id = 6) const int SG = 32; // subgroup size (pinned)
layout(constant_id = 7) const int VEC = 1; // bytes per K/V load: 16 or 4 when every row allows it, else 1

const int M = 16;           // matrix rows
const int ROWS = QH * R;    // real query rows
const int LD = D + 8;       // f16 row stride of Q, K, V tiles (16-byte multiple)
const int PLD = NK + 8;     // f16 row stride of P
const int SLD = NK > D ? NK : D; // f32 row stride of scores / O scratch
const float THRESH = 8.0;   // log2 of the largest p before the reference moves

#if defined(KV_FP8FNUZ)
const float VF = 128.0; // decoded value = f16 pattern * 2^7
#elif defined(KV_I8)
const float VF = 1.0;
#else
const float VF = 256.0;
#endif

shared float16_t sq[M * LD];
shared float sqs[M];                 // per-row scale applied to q
shared float16_t skv[NS * 2 * NK * LD]; // per subgroup: K tile, then V tile
shared float ss[NS * M * SLD];       // per subgroup: scores, O scratch, final O
shared float16_t sp[NS * M * PLD];   // per subgroup: P
shared float sks[NS * NK];           // per subgroup: k scales of the tile
shared float svs[NS * NK];           // v scales
shared int sslot[NS * NK];           // slots
shared float sm[NS * M];             // per subgroup: m_ref per row (log2)
shared float sl[NS * M];             // l per row

// Cache element -> f16 (see header): exact.
float16_t to_f16(uint64_t row, int d) {
#if defined(KV_I8)
    return float16_t(int(RefI8(row).v[d]));
#else
    uint c = uint(RefU8(row).v[d]);
    return uint16BitsToFloat16(uint16_t(((c & 0x80u) << 8) | ((c & 0x7Fu) << 7)));
#endif
}

// Four cache codes of a word -> f16 at sh[at .. at + 3], exactly as to_f16.
void store4(uint w, int at) {
#if defined(KV_I8)
    skv[at] = float16_t(bitfieldExtract(int(w), 0, 8));
    skv[at + 1] = float16_t(bitfieldExtract(int(w), 8, 8));
    skv[at + 2] = float16_t(bitfieldExtract(int(w), 16, 8));
    skv[at + 3] = float16_t(bitfieldExtract(int(w), 24, 8));
#else
    f16vec2 a = unpackFloat2x16(((w << 7) & 0x3F803F80u) | ((w << 8) & 0x80008000u)); // bytes 0, 2
    f16vec2 c = unpackFloat2x16(((w >> 1) & 0x3F803F80u) | (w & 0x80008000u));        // bytes 1, 3
    skv[at] = a.x;
    skv[at + 1] = c.x;
    skv[at + 2] = a.y;
    skv[at + 3] = c.y;
#endif
}

float kv_scale(uint64_t base, int ss_, int sh, int slot, int g) {
    return RefF32(qa_at(base, int64_t(slot) * ss_ + int64_t(g) * sh, 4)).v[0];
}

void main() {
    const int split = int(gl_WorkGroupID.x);
    const int G = pc.hq / pc.hkv;
    const int nqb = G / QH;
    const int g = int(gl_WorkGroupID.y) / nqb;
    const int h0 = g * G + (int(gl_WorkGroupID.y) % nqb) * QH;
    const int b = int(gl_WorkGroupID.z);
    const int tid = int(gl_LocalInvocationID.x);
    const int sgid = int(gl_SubgroupID);
    const int lane = int(gl_SubgroupInvocationID);

    const int L = RefI32(qa_at(pc.lens, int64_t(b) * pc.lens_s, 4)).v[0];
    const int first = qa_first_page(b);
    int lo0, hi0, loR, hiR;
    qa_visible(L, R, 0, lo0, hi0);
    qa_visible(L, R, R - 1, loR, hiR);
    const int k_begin = max(split * pc.keys_per_split, lo0);
    const int k_end = min(min(split * pc.keys_per_split + pc.keys_per_split, L), hiR + 1);

    // Q rows into f16, each scaled by a power of two that puts its largest
    // magnitude in [2^14, 2^15): bf16's range does not fit f16, its
    // precision does.
    if (tid < M) {
        float mx = 0.0;
        if (tid < ROWS) {
            int h = h0 + tid / R, r = tid % R;
            int64_t base = int64_t(b) * pc.q_sb + int64_t(r) * pc.q_sr + int64_t(h) * pc.q_sh;
            for (int d = 0; d < D; ++d)
                mx = max(mx, abs(qa_bf16_to_f32(uint(RefU16(qa_at(pc.q, base + d, 2)).v[0]))));
        }
        sqs[tid] = mx > 0.0 ? exp2(14.0 - floor(log2(mx))) : 1.0;
    }
    barrier();
    for (int idx = tid; idx < M * D; idx += int(gl_WorkGroupSize.x)) {
        int row = idx / D, d = idx % D;
        float x = 0.0;
        if (row < ROWS) {
            int h = h0 + row / R, r = row % R;
            int64_t base = int64_t(b) * pc.q_sb + int64_t(r) * pc.q_sr + int64_t(h) * pc.q_sh;
            x = qa_bf16_to_f32(uint(RefU16(qa_at(pc.q, base + d, 2)).v[0])) * sqs[row];
        }
        sq[row * LD + d] = float16_t(x);
    }
    barrier();

    coopmat<float16_t, gl_ScopeSubgroup, M, 16, gl_MatrixUseA> qa[D / 16];
    [[unroll]] for (int kk = 0; kk < D / 16; ++kk)
        coopMatLoad(qa[kk], sq, kk * 16, LD, gl_CooperativeMatrixLayoutRowMajor);
    coopmat<float, gl_ScopeSubgroup, M, 16, gl_MatrixUseAccumulator> o[D / 16];
    [[unroll]] for (int dv = 0; dv < D / 16; ++dv)
        o[dv] = coopmat<float, gl_ScopeSubgroup, M, 16, gl_MatrixUseAccumulator>(0.0);

    const int kvb = sgid * 2 * NK * LD; // this subgroup's K tile; V follows at + NK * LD
    const int sb = sgid * M * SLD;
    const int pb = sgid * M * PLD;
    const int cb = sgid * NK;
    if (lane < M) {
        sm[sgid * M + lane] = QA_NEG_INF;
        sl[sgid * M + lane] = 0.0;
    }

    for (int t0 = k_begin + sgid * NK; t0 < k_end; t0 += NS * NK) {
        // 1. The tile's slots and scales, then its K and V rows as f16.
        for (int c = lane; c < NK; c += SG) {
            int p = t0 + c;
            int slot = p < k_end ? qa_slot(first, p) : -1;
            sslot[cb + c] = slot;
            sks[cb + c] = slot >= 0 ? kv_scale(pc.ks, pc.ks_ss, pc.ks_sh, slot, g) : 0.0;
            svs[cb + c] = slot >= 0 ? kv_scale(pc.vs, pc.vs_ss, pc.vs_sh, slot, g) : 0.0;
        }
        subgroupMemoryBarrierShared();
        subgroupBarrier();
        const int NV = D / VEC; // loads per row
        for (int idx = lane; idx < NK * NV; idx += SG) {
            int c = idx / NV, d0 = (idx % NV) * VEC;
            int slot = sslot[cb + c];
            int at = kvb + c * LD + d0;
            // Keys past the range become zeros (their slot may hold NaN codes).
            uint64_t krow = qa_at(pc.k, int64_t(max(slot, 0)) * pc.k_ss + int64_t(g) * pc.k_sh, 1);
            uint64_t vrow = qa_at(pc.v, int64_t(max(slot, 0)) * pc.v_ss + int64_t(g) * pc.v_sh, 1);
            if (VEC == 16) {
                uvec4 kw = slot >= 0 ? RefU32x4(krow + uint64_t(d0)).v[0] : uvec4(0u);
                uvec4 vw = slot >= 0 ? RefU32x4(vrow + uint64_t(d0)).v[0] : uvec4(0u);
                store4(kw.x, at); store4(kw.y, at + 4); store4(kw.z, at + 8); store4(kw.w, at + 12);
                at += NK * LD;
                store4(vw.x, at); store4(vw.y, at + 4); store4(vw.z, at + 8); store4(vw.w, at + 12);
            } else if (VEC == 4) {
                uint kw = slot >= 0 ? RefU32(krow + uint64_t(d0)).v[0] : 0u;
                uint vw = slot >= 0 ? RefU32(vrow + uint64_t(d0)).v[0] : 0u;
                store4(kw, at);
                store4(vw, at + NK * LD);
            } else {
                skv[at] = slot >= 0 ? to_f16(krow, d0) : float16_t(0.0);
                skv[at + NK * LD] = slot >= 0 ? to_f16(vrow, d0) : float16_t(0.0);
            }
        }
        subgroupMemoryBarrierShared();
        subgroupBarrier();

        // 2. S = Q K^T, 16 keys at a time.
        [[unroll]] for (int n0 = 0; n0 < NK; n0 += 16) {
            coopmat<float, gl_ScopeSubgroup, M, 16, gl_MatrixUseAccumulator> s =
                coopmat<float, gl_ScopeSubgroup, M, 16, gl_MatrixUseAccumulator>(0.0);
            [[unroll]] for (int kk = 0; kk < D / 16; ++kk) {
                coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB> kb;
                coopMatLoad(kb, skv, kvb + n0 * LD + kk * 16, LD, gl_CooperativeMatrixLayoutColumnMajor);
                s = coopMatMulAdd(qa[kk], kb, s);
            }
            coopMatStore(s, ss, sb + n0, SLD, gl_CooperativeMatrixLayoutRowMajor);
        }
        subgroupMemoryBarrierShared();
        subgroupBarrier();

        // 3. One lane per row: scores, masks, reference, P.
        bool rescale = false;
        float alpha = 1.0;
        if (lane < M) {
            const int row = lane;
            float mt = QA_NEG_INF;
            if (row < ROWS) {
                int lo, hi;
                qa_visible(L, R, row % R, lo, hi);
                const float kf = VF / sqs[row];
                for (int c = 0; c < NK; ++c) {
                    int p = t0 + c;
                    bool vis = p < k_end && p >= lo && p <= hi;
                    float s2 = vis ? qa_score2(ss[sb + row * SLD + c] * sks[cb + c] * kf) : QA_NEG_INF;
                    ss[sb + row * SLD + c] = s2;
                    mt = max(mt, s2);
                }
            }
            float mref = sm[sgid * M + row];
            if (mt != QA_NEG_INF && (mref == QA_NEG_INF || mt > mref + THRESH)) {
                // New reference: the accumulators (zero while mref is -inf)
                // shrink by alpha.
                alpha = qa_exp2_diff(mref, mt);
                rescale = mref != QA_NEG_INF;
                mref = mt;
                sm[sgid * M + row] = mref;
                sl[sgid * M + row] *= alpha;
            }
            float lsum = 0.0;
            for (int c = 0; c < NK; ++c) {
                float pr = qa_exp2_diff(ss[sb + row * SLD + c], mref);
                lsum += pr;
                sp[pb + row * PLD + c] = float16_t(pr * svs[cb + c]);
            }
            sl[sgid * M + row] += lsum;
        }
        subgroupMemoryBarrierShared();
        subgroupBarrier();
        if (subgroupAny(rescale)) {
            // Rare: scale the accumulators' rows through shared memory.
            [[unroll]] for (int dv = 0; dv < D / 16; ++dv)
                coopMatStore(o[dv], ss, sb + dv * 16, SLD, gl_CooperativeMatrixLayoutRowMajor);
            subgroupMemoryBarrierShared();
            subgroupBarrier();
            if (lane < M)
                for (int d = 0; d < D; ++d) ss[sb + lane * SLD + d] *= alpha;
            subgroupMemoryBarrierShared();
            subgroupBarrier();
            [[unroll]] for (int dv = 0; dv < D / 16; ++dv)
                coopMatLoad(o[dv], ss, sb + dv * 16, SLD, gl_CooperativeMatrixLayoutRowMajor);
        }

        // 4. O += P V.
        [[unroll]] for (int k0 = 0; k0 < NK; k0 += 16) {
            coopmat<float16_t, gl_ScopeSubgroup, M, 16, gl_MatrixUseA> pa;
            coopMatLoad(pa, sp, pb + k0, PLD, gl_CooperativeMatrixLayoutRowMajor);
            [[unroll]] for (int dv = 0; dv < D / 16; ++dv) {
                coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB> vb;
                coopMatLoad(vb, skv, kvb + NK * LD + k0 * LD + dv * 16, LD, gl_CooperativeMatrixLayoutRowMajor);
                o[dv] = coopMatMulAdd(pa, vb, o[dv]);
            }
        }
        subgroupMemoryBarrierShared();
        subgroupBarrier();
    }

    // Each subgroup's O into its scratch, then merge the subgroups.
    [[unroll]] for (int dv = 0; dv < D / 16; ++dv)
        coopMatStore(o[dv], ss, sb + dv * 16, SLD, gl_CooperativeMatrixLayoutRowMajor);
    barrier();
    for (int idx = tid; idx < ROWS * D; idx += int(gl_WorkGroupSize.x)) {
        int row = idx / D, d = idx % D;
        float mm = QA_NEG_INF;
        for (int i = 0; i < NS; ++i) mm = max(mm, sm[i * M + row]);
        float ll = 0.0, oo = 0.0;
        for (int i = 0; i < NS; ++i) {
            float w = qa_exp2_diff(sm[i * M + row], mm);
            ll += sl[i * M + row] * w;
            oo += ss[i * M * SLD + row * SLD + d] * w;
        }
        qa_epilogue(b, row % R, h0 + row / R, R, split, d, D, mm, ll, oo * VF, d == 0);
    }
}
