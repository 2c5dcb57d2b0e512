// Shared by the FP8 MQA logits kernels (spec 3): the push block, the
// specialization constants every variant takes, exact fp8 decoding of four
// codes at a time, and the slice/window arithmetic. The planner
// (core/src/plan_mqa_logits.c) computes the same geometry on the host.
#ifndef QATTN_MQA_LOGITS_COMMON_GLSL
#define QATTN_MQA_LOGITS_COMMON_GLSL

// Mirrored by mqa_push in backend_vulkan/vk_mqa_logits.c (std430).
layout(push_constant, std430) uniform Push {
    uint64_t q;        // [S, H, D] fp8
    uint64_t k;        // [S_kv, D] fp8
    uint64_t k_scale;  // [S_kv] f32
    uint64_t weights;  // [S, H] f32
    uint64_t ks, ke;   // [S] i32
    uint64_t logits;   // [S, S_kv] f32
    int q_row, q_head; // strides in elements (bytes for fp8)
    int k_row;
    int scale_stride;
    int w_row, w_head;
    int ks_stride, ke_stride;
    int l_row;
    int S, S_kv, H;
    int row_blocks;    // ceil(S / rows per workgroup)
    int tiles;         // ceil(S_kv / KT)
    int clean;         // non-zero: -inf outside each row's window
} pc;

layout(constant_id = 1) const int SG = 32;          // lanes per subgroup of the layout
layout(constant_id = 2) const int RPS = 1;          // rows per subgroup
layout(constant_id = 3) const int NSG = 4;          // subgroups per workgroup
layout(constant_id = 4) const int KT = 64;          // KV columns per tile
layout(constant_id = 5) const int D = 128;          // head dim
layout(constant_id = 6) const bool Q_FNUZ = false;  // q codes are e4m3fnuz
layout(constant_id = 7) const bool K_FNUZ = false;  // k codes are e4m3fnuz
layout(constant_id = 8) const bool INDEX64 = false; // row bases need 64 bits
layout(constant_id = 9) const bool ALIGN16 = true;  // q, k rows start 16-byte aligned

// Byte address of row `row` of a tensor with row stride `stride` elements:
// the product is int32 unless the plan said it can pass int32.
uint64_t mqa_row(uint64_t base, int row, int stride, uint esize) {
    int64_t e = INDEX64 ? int64_t(row) * int64_t(stride) : int64_t(row * stride);
    return base + uint64_t(e) * uint64_t(esize);
}

// 16 fp8 codes from a byte address; 16-byte loads when the plan's alignment
// allows, byte loads otherwise (any element offset is legal).
uvec4 mqa_load16(uint64_t a) {
    if (ALIGN16) return RefU32x4(a).v[0];
    uvec4 r = uvec4(0u);
    [[unroll]] for (int i = 0; i < 16; ++i) r[i >> 2] |= uint(RefU8(a).v[i]) << (8 * (i & 3));
    return r;
}

// Four codes of one word to their exact values (spec 1), integer-only so no
// denormal handling is relied on: normal codes re-bias the exponent into an
// f32 pattern, subnormal ones are m * 2^(1 - bias - 3). NaN codes give NaN.
vec4 mqa_decode4(uint w, bool fnuz) {
    const uvec4 c = (uvec4(w) >> uvec4(0u, 8u, 16u, 24u)) & 0xFFu;
    const uvec4 mag = c & 0x7Fu;
    const vec4 nrm = uintBitsToFloat((mag << 20) + ((fnuz ? 119u : 120u) << 23));
    const vec4 sub = vec4(mag) * (fnuz ? 0.0009765625 : 0.001953125);
    vec4 v = mix(sub, nrm, greaterThanEqual(mag, uvec4(8u)));
    v = uintBitsToFloat(floatBitsToUint(v) | ((c & 0x80u) << 24));
    const bvec4 nan = fnuz ? equal(c, uvec4(0x80u)) : equal(mag, uvec4(0x7Fu));
    return mix(v, vec4(uintBitsToFloat(0x7FC00000u)), nan);
}

// Tiles [first, end) of KV slice y of `slices`: T tiles dealt out evenly,
// the first (T mod slices) one tile longer, so the slices that start last
// are the smallest. int32-safe: y * (T / slices) <= T.
ivec2 mqa_slice_tiles(int y, int slices, int T) {
    const int q = T / slices, r = T % slices;
    const int first = y * q + min(y, r);
    return ivec2(first, first + q + (y < r ? 1 : 0));
}

// Row i's window [ks, ke) clamped to [0, S_kv]; empty when ks >= ke.
ivec2 mqa_window(int i) {
    int a = RefI32(mqa_row(pc.ks, i, pc.ks_stride, 4u)).v[0];
    int b = RefI32(mqa_row(pc.ke, i, pc.ke_stride, 4u)).v[0];
    a = clamp(a, 0, pc.S_kv);
    b = clamp(b, 0, pc.S_kv);
    return ivec2(a, max(a, b));
}

// Writes -inf to columns [from, to) of row i, threads striding.
void mqa_fill_neg_inf(int i, int from, int to, int tid, int nthreads) {
    const uint64_t row = mqa_row(pc.logits, i, pc.l_row, 4u);
    for (int j = from + tid; j < to; j += nthreads) RefF32(row).v[j] = uintBitsToFloat(0xFF800000u);
}

#endif
