#version 450
// Decode attention, split merge of the tiled kernel (decode_tiled.comp): one
// workgroup per output row (query row of one head of one request) and chunk
// of DCH staged dims combines the S partials (unnormalised O^T in staged dim
// order, m in log2 units, l) with the sink, writes its dims of o in bf16 or
// f16 (flag O_F16, one uniform branch at the store; dims back in order) and, the first chunk, the LSE. Chunks of dims give a
// row's splits to more threads (a request of few heads has few rows).
//   M = max(m_s, sink), Z = sum_s l_s 2^(m_s - M) + 2^(sink - M),
//   o = vf * sum_s 2^(m_s - M) O_s / Z.
// Spec constants: 0 workgroup size (a power of two, 64..256), 1 dims per
// workgroup.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#define QA_NO_STAGE1_PUSH
#include "common_tiled.glsl"

layout(local_size_x_id = 0) in;

// qattn_decode_merge_args (qattn/kernel_args.h), field for field.
layout(push_constant, std430) uniform Push {
    uint64_t ws_o, ws_ml, sinks, o, lse;
    int o_sb, o_sr, o_sh;
    int lse_sb, lse_sr, lse_sh;
    int sinks_s, hkv, R, QH, NR, S;
    int D, perm, flags;
    float vf;
} pc;

#define FLAG_SINKS 1 // QATTN_DECODE_MERGE_SINKS
#define FLAG_LSE 2 // QATTN_DECODE_MERGE_LSE
#define FLAG_O_F16 4 // QATTN_DECODE_MERGE_O_F16
#define MAX_S 256 // QATTN_MAX_SPLITS
layout(constant_id = 1) const int DCH = 32; // staged dims per workgroup (plan.merge_dims, a multiple of 4)

// Workgroup of NT threads (spec constant 0, a power of two >= 64): first
// every thread reads at most one split's (m, l) (S <= 256 = 4 * 64, so a
// thread takes up to MAX_S / NT of them), then groups of DCH / 4 threads sum
// disjoint sets of splits in vec4s, and the groups' sums are added.
shared float sw[MAX_S];
shared float sred[256];
shared vec4 sacc[256];   // one per thread: groups x D/4

void main() {
    const int nch = pc.D / DCH;
    const int row = int(gl_WorkGroupID.x) / nch; // (head within the group, r)
    const int d0 = (int(gl_WorkGroupID.x) % nch) * DCH;
    const int g = int(gl_WorkGroupID.y), b = int(gl_WorkGroupID.z);
    const int tid = int(gl_LocalInvocationID.x), nt = int(gl_WorkGroupSize.x);
    const int hl = row / pc.R, r = row % pc.R;
    const int G = int(gl_NumWorkGroups.x) / (nch * pc.R);
    const int h = g * G + hl;
    const int rb = hl / pc.QH, n = (hl % pc.QH) * pc.R + r;
    const int64_t slot = ((int64_t(b) * pc.hkv + g) * (G / pc.QH) + rb) * pc.NR + n;
    const int S = pc.S;
    const float sink = (pc.flags & FLAG_SINKS) != 0
                           ? RefF32(qa_at(pc.sinks, int64_t(h) * pc.sinks_s, 4)).v[0] * float(QA_LOG2E)
                           : QA_NEG_INF;
    // M = max(m_s, sink): per thread, then a tree over shared memory.
    float mloc = sink;
    for (int s = tid; s < S; s += nt) {
        const float ms = RefF32(qa_at(pc.ws_ml, (slot * S + s) * 2, 4)).v[0];
        sw[s] = ms;
        mloc = max(mloc, ms);
    }
    sred[tid] = mloc;
    barrier();
    for (int w = nt / 2; w > 0; w /= 2) {
        if (tid < w) sred[tid] = max(sred[tid], sred[tid + w]);
        barrier();
    }
    const float M = sred[0];
    barrier();
    float zloc = 0.0;
    for (int s = tid; s < S; s += nt) {
        const float ms = sw[s];
        const float ls = RefF32(qa_at(pc.ws_ml, (slot * S + s) * 2 + 1, 4)).v[0];
        const float e = ms == QA_NEG_INF ? 0.0 : exp2(ms - M);
        sw[s] = e;
        zloc += ls * e;
    }
    sred[tid] = zloc;
    barrier();
    for (int w = nt / 2; w > 0; w /= 2) {
        if (tid < w) sred[tid] += sred[tid + w];
        barrier();
    }
    const float Z = sred[0] + (sink == QA_NEG_INF ? 0.0 : exp2(sink - M));
    const float wz = Z > 0.0 ? pc.vf / Z : 0.0;
    // Output: groups of D/4 threads, each group a strided set of splits.
    const int gd = DCH / 4, ng = nt / gd;
    const int q4 = tid % gd, grp = tid / gd;
    vec4 acc = vec4(0.0);
    if (grp < ng) {
        for (int s = grp; s < S; s += ng) {
            const uint64_t at = qa_at(pc.ws_o, (slot * S + s) * pc.D + d0 + q4 * 4, 4);
            acc += sw[s] * uintBitsToFloat(RefU32x4(at).v[0]);
        }
        sacc[tid] = acc;
    }
    barrier();
    const bool of16 = (pc.flags & FLAG_O_F16) != 0;
    if (tid < gd) {
        vec4 t = vec4(0.0);
        for (int k = 0; k < ng; ++k) t += sacc[k * gd + tid];
        t *= wz;
        [[unroll]] for (int u = 0; u < 4; ++u) {
            const int dp = d0 + tid * 4 + u;
            // Staged position dp holds dim dp with positions 1 and 2 of each
            // group of four swapped when perm is set.
            const int d = pc.perm != 0 ? ((dp & ~3) | ((dp & 1) << 1) | ((dp >> 1) & 1)) : dp;
            const int64_t oi = int64_t(b) * pc.o_sb + int64_t(r) * pc.o_sr + int64_t(h) * pc.o_sh + d;
            RefU16(qa_at(pc.o, oi, 2)).v[0] = uint16_t(of16 ? qa_f32_to_f16(t[u]) : qa_f32_to_bf16(t[u]));
        }
    }
    if (tid == 0 && d0 == 0 && (pc.flags & FLAG_LSE) != 0) {
        const float lse = Z > 0.0 ? (M + log2(Z)) * float(QA_LN2) : QA_NEG_INF;
        RefF32(qa_at(pc.lse, int64_t(b) * pc.lse_sb + int64_t(r) * pc.lse_sr + int64_t(h) * pc.lse_sh, 4)).v[0] = lse;
    }
}
