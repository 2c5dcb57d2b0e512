#version 450
// Decode attention, split-KV merge: combines the per-split partial outputs
// and LSEs of stage 1 into the final bf16 output (and LSE), folding in the
// sink. One workgroup per (query head, query row, request).
//
// The split weights are computed once into shared memory (one thread per
// split), then every output element sums its splits with eight independent
// loads in flight per step, so the merge costs a few memory latencies, not
// one per split. Spec constants: 0 = workgroup size (>= 64, the largest
// split count).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x_id = 0) in;

layout(push_constant, std430) uniform Push {
    uint64_t ws_o, ws_lse, sinks, o, lse;
    int o_sb, o_sr, o_sh;
    int lse_sb, lse_sr, lse_sh;
    int sinks_s, hq, rows, num_splits, dv, flags;
} pc;

#define QA_FLAG_SINKS 1
#define QA_FLAG_LSE 2
#define QA_NEG_INF (-1.0 / 0.0)
#define MAX_SPLITS 64

shared float sh_lse[MAX_SPLITS];
shared float sh_w[MAX_SPLITS];

void main() {
    const int h = int(gl_WorkGroupID.x), r = int(gl_WorkGroupID.y), b = int(gl_WorkGroupID.z);
    const int tid = int(gl_LocalInvocationID.x);
    const int S = pc.num_splits;
    const int64_t row = ((int64_t(b) * pc.rows + r) * pc.hq + h) * S;
    if (tid < S) sh_lse[tid] = RefF32(qa_at(pc.ws_lse, row + tid, 4)).v[0];
    barrier();
    // Natural-log domain, as stage 1 wrote it. Every thread computes the
    // same max and sum from shared memory (S <= 64 reads).
    float mm = QA_NEG_INF;
    for (int s = 0; s < S; ++s) mm = max(mm, sh_lse[s]);
    float sink = QA_NEG_INF;
    if ((pc.flags & QA_FLAG_SINKS) != 0) {
        sink = RefF32(qa_at(pc.sinks, int64_t(h) * pc.sinks_s, 4)).v[0];
        mm = max(mm, sink);
    }
    float z = 0.0;
    for (int s = 0; s < S; ++s) z += sh_lse[s] == QA_NEG_INF ? 0.0 : exp(sh_lse[s] - mm);
    const float zs = z + (sink == QA_NEG_INF ? 0.0 : exp(sink - mm));
    if (tid < S) sh_w[tid] = (sh_lse[tid] == QA_NEG_INF || zs == 0.0) ? 0.0 : exp(sh_lse[tid] - mm) / zs;
    barrier();
    for (int d = tid; d < pc.dv; d += int(gl_WorkGroupSize.x)) {
        float acc = 0.0;
        int s = 0;
        for (; s + 8 <= S; s += 8) {
            float x[8];
            [[unroll]] for (int i = 0; i < 8; ++i) x[i] = RefF32(qa_at(pc.ws_o, (row + s + i) * pc.dv + d, 4)).v[0];
            [[unroll]] for (int i = 0; i < 8; ++i) acc += sh_w[s + i] * x[i];
        }
        for (; s < S; ++s) acc += sh_w[s] * RefF32(qa_at(pc.ws_o, (row + s) * pc.dv + d, 4)).v[0];
        const int64_t oi = int64_t(b) * pc.o_sb + int64_t(r) * pc.o_sr + int64_t(h) * pc.o_sh + d;
        RefU16(qa_at(pc.o, oi, 2)).v[0] = uint16_t(qa_f32_to_bf16(acc));
    }
    if (tid == 0 && (pc.flags & QA_FLAG_LSE) != 0) {
        const float lse = zs > 0.0 ? mm + log(zs) : QA_NEG_INF;
        RefF32(qa_at(pc.lse, int64_t(b) * pc.lse_sb + int64_t(r) * pc.lse_sr + int64_t(h) * pc.lse_sh, 4)).v[0] = lse;
    }
}
