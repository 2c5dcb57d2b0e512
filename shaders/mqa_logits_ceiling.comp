#version 450
// The matrix ceiling of the coopmat MQA logits kernel: the same
// cooperative-matrix f16 x f16 -> f32 products with the same tile shape
// (NSG subgroups, 16*MT q rows per subgroup held as A fragments in
// registers, 16*NT-column B tiles of D halves in shared memory, TM x TN x TK
// hardware tiles), and nothing else: no global traffic in the loop, no
// barrier, no epilogue. What it sustains is the rate the device gives this
// tile shape through Vulkan, the bound the op's kernel is measured against.
//
// The operands are small integers times 2^-6 (exact in f16, bounded sums),
// and each subgroup stores the element-wise sum of its accumulators, so the
// products cannot be removed as dead code.
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const int SG = 32;
layout(constant_id = 3) const int NSG = 4;
layout(constant_id = 5) const int D = 128;
layout(constant_id = 10) const int MT = 4;
layout(constant_id = 11) const int NT = 2;
layout(constant_id = 13) const int TM = 16;
layout(constant_id = 14) const int TN = 16;
layout(constant_id = 15) const int TK = 16;

layout(push_constant, std430) uniform Push {
    uint64_t dst; // [workgroups * NSG][TM * TN] f32
    int iters;    // passes over the two B tiles
} pc;

const int NTH = NSG * SG;
const int BN = 16 * NT;
const int KROW = D + 8;
const int KB = BN * KROW;
const int MH = 16 * MT / TM;
const int NH = BN / TN;
const int KH = D / TK;

shared f16vec4 kbuf[2 * KB / 4];

#define ACC coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator>
#define MATA coopmat<float16_t, gl_ScopeSubgroup, TM, TK, gl_MatrixUseA>
#define MATB coopmat<float16_t, gl_ScopeSubgroup, TK, TN, gl_MatrixUseB>

void main() {
    const int tid = int(gl_LocalInvocationID.x), sub = int(gl_SubgroupID);
    for (int i = tid; i < 2 * KB / 4; i += NTH) {
        const int b = (i * 5 + int(gl_WorkGroupID.x)) & 15;
        kbuf[i] = f16vec4(float16_t(b - 8), float16_t(7 - b), float16_t((b & 3) - 1), float16_t(b >> 2)) *
                  float16_t(0.015625);
    }
    barrier();
    MATA qa[MH * KH];
    [[unroll]] for (int mh = 0; mh < MH; ++mh)
        [[unroll]] for (int kh = 0; kh < KH; ++kh)
            coopMatLoad(qa[mh * KH + kh], kbuf, ((sub * MH + mh) % (2 * BN / TM) * TM * KROW + kh * TK) / 4,
                        KROW / 4, gl_CooperativeMatrixLayoutRowMajor);
    ACC acc[MH * NH];
    [[unroll]] for (int x = 0; x < MH * NH; ++x) acc[x] = ACC(0.0);
    for (int it = 0; it < pc.iters; ++it) {
        const int kb = (it & 1) * KB;
        [[unroll]] for (int kh = 0; kh < KH; ++kh) {
            MATB b[NH];
            [[unroll]] for (int nh = 0; nh < NH; ++nh)
                coopMatLoad(b[nh], kbuf, (kb + nh * TN * KROW + kh * TK) / 4, KROW / 4,
                            gl_CooperativeMatrixLayoutColumnMajor);
            [[unroll]] for (int mh = 0; mh < MH; ++mh)
                [[unroll]] for (int nh = 0; nh < NH; ++nh)
                    acc[mh * NH + nh] = coopMatMulAdd(qa[mh * KH + kh], b[nh], acc[mh * NH + nh]);
        }
    }
    [[unroll]] for (int x = 1; x < MH * NH; ++x)
        [[unroll]] for (int e = 0; e < acc[0].length(); ++e) acc[0][e] += acc[x][e];
    const uint idx = gl_WorkGroupID.x * uint(NSG) + uint(sub);
    coopMatStore(acc[0], RefF32(pc.dst + uint64_t(idx) * uint64_t(TM * TN * 4)).v, 0, TN,
                 gl_CooperativeMatrixLayoutRowMajor);
}
