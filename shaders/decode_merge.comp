#version 450
// Decode attention, split merge of the tiled kernel (decode_tiled.comp): one
// workgroup per output row (query row of one head of one request) combines
// the S partials (unnormalised O^T in staged dim order, m in log2 units, l)
// with the sink, writes o in bf16 (dims back in order) and the LSE.
//   M = max(m_s, sink), Z = sum_s l_s 2^(m_s - M) + 2^(sink - M),
//   o = vf * sum_s 2^(m_s - M) O_s / Z.
// Spec constant 0: workgroup size.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#define QA_NO_STAGE1_PUSH
#include "common_tiled.glsl"

layout(local_size_x_id = 0) in;

layout(push_constant, std430) uniform Push {
    uint64_t ws_o, ws_ml, sinks, o, lse;
    int o_sb, o_sr, o_sh;
    int lse_sb, lse_sr, lse_sh;
    int sinks_s, hkv, R, QH, NR, S;
    int D, perm, flags, pad0;
    float vf;
} pc;

#define FLAG_SINKS 1
#define FLAG_LSE 2
#define MAX_S 256

shared float sw[MAX_S];
shared float sred[2];

void main() {
    const int row = int(gl_WorkGroupID.x); // (head within the group, r)
    const int g = int(gl_WorkGroupID.y), b = int(gl_WorkGroupID.z);
    const int tid = int(gl_LocalInvocationID.x), nt = int(gl_WorkGroupSize.x);
    const int hl = row / pc.R, r = row % pc.R;
    const int G = int(gl_NumWorkGroups.x) / pc.R;
    const int h = g * G + hl;
    const int rb = hl / pc.QH, n = (hl % pc.QH) * pc.R + r;
    const int64_t slot = ((int64_t(b) * pc.hkv + g) * (G / pc.QH) + rb) * pc.NR + n;
    const int S = pc.S;
    const float sink = (pc.flags & FLAG_SINKS) != 0
                           ? RefF32(qa_at(pc.sinks, int64_t(h) * pc.sinks_s, 4)).v[0] * float(QA_LOG2E)
                           : QA_NEG_INF;
    if (tid == 0) {
        float M = sink;
        for (int s = 0; s < S; ++s) M = max(M, RefF32(qa_at(pc.ws_ml, (slot * S + s) * 2, 4)).v[0]);
        float Z = sink == QA_NEG_INF ? 0.0 : exp2(sink - M);
        for (int s = 0; s < S; ++s) {
            const float ms = RefF32(qa_at(pc.ws_ml, (slot * S + s) * 2, 4)).v[0];
            const float ls = RefF32(qa_at(pc.ws_ml, (slot * S + s) * 2 + 1, 4)).v[0];
            Z += ms == QA_NEG_INF ? 0.0 : ls * exp2(ms - M);
        }
        sred[0] = M;
        sred[1] = Z;
    }
    barrier();
    const float M = sred[0], Z = sred[1];
    for (int s = tid; s < S; s += nt) {
        const float ms = RefF32(qa_at(pc.ws_ml, (slot * S + s) * 2, 4)).v[0];
        sw[s] = (ms == QA_NEG_INF || Z == 0.0) ? 0.0 : pc.vf * exp2(ms - M) / Z;
    }
    barrier();
    for (int dp = tid; dp < pc.D; dp += nt) {
        float acc = 0.0;
        int s = 0;
        for (; s + 4 <= S; s += 4) {
            float x[4];
            [[unroll]] for (int i = 0; i < 4; ++i) x[i] = RefF32(qa_at(pc.ws_o, (slot * S + s + i) * pc.D + dp, 4)).v[0];
            [[unroll]] for (int i = 0; i < 4; ++i) acc += sw[s + i] * x[i];
        }
        for (; s < S; ++s) acc += sw[s] * RefF32(qa_at(pc.ws_o, (slot * S + s) * pc.D + dp, 4)).v[0];
        // Staged position dp holds dim dp with positions 1 and 2 of each
        // group of four swapped when perm is set.
        const int d = pc.perm != 0 ? ((dp & ~3) | ((dp & 1) << 1) | ((dp >> 1) & 1)) : dp;
        const int64_t oi = int64_t(b) * pc.o_sb + int64_t(r) * pc.o_sr + int64_t(h) * pc.o_sh + d;
        RefU16(qa_at(pc.o, oi, 2)).v[0] = uint16_t(qa_f32_to_bf16(acc));
    }
    if (tid == 0 && (pc.flags & FLAG_LSE) != 0) {
        const float lse = Z > 0.0 ? (M + log2(Z)) * float(QA_LN2) : QA_NEG_INF;
        RefF32(qa_at(pc.lse, int64_t(b) * pc.lse_sb + int64_t(r) * pc.lse_sr + int64_t(h) * pc.lse_sh, 4)).v[0] = lse;
    }
}
