#version 450
// KV store (spec 2): writes new bf16 or f16 tokens (flag SRC_F16) into the
// cache in its format, bit-identical to the CPU reference. One workgroup per
// (token, kv head, K-or-V); threads stride over the row, D dims for K and Dv
// for V (head_dim[w]). Source elements become f32 bit patterns in integer
// arithmetic (exact, f16 subnormals included); nothing here touches float
// arithmetic.
//
// Caches and scales are addressed through their views
// (qattn_cache_kernel_view, qattn/backend.h): slot s is page s / page_rows,
// row s % page_rows; the bases of the page and of the kv head are formed in
// 64 bits once per workgroup (a cache may span any number of elements), the
// offset inside the page in 32 bits. A slot outside [0, n_slots) (-1 is padding) is
// skipped before anything is addressed; QATTN_CHECK_INDICES=1 makes the
// core refuse such a call instead.
//
// Variants (defines): KV_BF16 | KV_FP8FN | KV_FP8FNUZ | KV_FP8E5M2 | KV_I8.
// Spec constants: 0 = workgroup size.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "common_encode.glsl"

layout(local_size_x_id = 0) in;

layout(push_constant, std430) uniform Push {
    uint64_t src[2];      // k_new [T, Hkv, D], v_new [T, Hkv, Dv], bf16 or f16
    uint64_t cache[2];    // k_cache, v_cache, rank 3 or 4
    uint64_t scale[2];    // k_scale, v_scale f32, rank 2 or 3 (0 for bf16)
    uint64_t slots;       // [T] i32
    int64_t page_stride[4]; // k_cache, v_cache, k_scale, v_scale (elements)
    int64_t head_stride[4];
    uint page_rows[4];
    uint row_stride[4];
    int src_stride[4];    // (k_new t, k_new h, v_new t, v_new h)
    int slots_stride;
    int n_slots;
    int head_dim[2];      // D (K), Dv (V)
    int flags;            // FLAG_SRC_F16
    int pad_;
} pc;

#define FLAG_SRC_F16 1    // k_new and v_new are f16 (else bf16)

// Source element d of the row as f32 bits (flag uniform, read once).
uint src_bits(uint64_t src, int d, bool f16) {
    const uint h = uint(RefU16(src).v[d]);
    return f16 ? qa_f16_bits_to_f32_bits(h) : h << 16;
}

// Element offset of (slot, head g) in view i: page and head bases in 64
// bits, the row inside the page in 32.
int64_t view_offset(int i, uint slot, uint g) {
    const uint rows = pc.page_rows[i];
    return int64_t(slot / rows) * pc.page_stride[i] + int64_t(g) * pc.head_stride[i] +
           int64_t((slot % rows) * pc.row_stride[i]);
}

shared uint red[64];

void main() {
    const int t = int(gl_WorkGroupID.x), g = int(gl_WorkGroupID.y), w = int(gl_WorkGroupID.z);
    const int tid = int(gl_LocalInvocationID.x), nt = int(gl_WorkGroupSize.x);
    const int slot = RefI32(qa_at(pc.slots, int64_t(t) * pc.slots_stride, 4)).v[0];
    if (slot < 0 || slot >= pc.n_slots) return; // -1 padding, or outside the cache: skipped
    const uint64_t src = qa_at(pc.src[w], int64_t(t) * pc.src_stride[2 * w] +
                                              int64_t(g) * pc.src_stride[2 * w + 1], 2);
    const int64_t crow = view_offset(w, uint(slot), uint(g));
    const int n = pc.head_dim[w];
    const bool f16 = (pc.flags & FLAG_SRC_F16) != 0;
#if defined(KV_BF16)
    const uint64_t dst = qa_at(pc.cache[w], crow, 2);
    if (f16) {
        for (int d = tid; d < n; d += nt) RefU16(dst).v[d] = uint16_t(qa_f32_to_bf16(uintBitsToFloat(src_bits(src, d, true))));
    } else {
        for (int d = tid; d < n; d += nt) RefU16(dst).v[d] = RefU16(src).v[d];
    }
#else
    // amax over the row on f32 bit patterns: |x| compares like its bits.
    // NaN is skipped, as the reference's comparison skips it.
    uint amax = 0u;
    for (int d = tid; d < n; d += nt) {
        uint mag = src_bits(src, d, f16) & 0x7FFFFFFFu;
        if (mag <= 0x7F800000u) amax = max(amax, mag);
    }
    amax = subgroupMax(amax);
    if (subgroupElect()) red[gl_SubgroupID] = amax;
    barrier();
    amax = 0u;
    for (uint i = 0u; i < gl_NumSubgroups; ++i) amax = max(amax, red[i]);
#if defined(KV_I8)
    const uint fmax_bits = 0x42FE0000u; // 127
#elif defined(KV_FP8FNUZ)
    const uint fmax_bits = 0x43700000u; // 240
#elif defined(KV_FP8E5M2)
    const uint fmax_bits = 0x47600000u; // 57344
#else
    const uint fmax_bits = 0x43E00000u; // 448
#endif
    const uint scale = amax == 0u ? 0x3F800000u : qa_div_rn(amax, fmax_bits);
    const uint64_t dst = qa_at(pc.cache[w], crow, 1);
    for (int d = tid; d < n; d += nt) {
        uint y = qa_div_rn(src_bits(src, d, f16), scale);
#if defined(KV_I8)
        uint code = qa_f32_to_i8(y);
#elif defined(KV_FP8E5M2)
        uint code = qa_f32_to_e5m2(y);
#else
        uint code = qa_f32_to_fp8(y, QA_FNUZ);
#endif
        RefU8(dst).v[d] = uint8_t(code);
    }
    if (tid == 0) {
        const int64_t s = view_offset(2 + w, uint(slot), uint(g));
        RefU32(qa_at(pc.scale[w], s, 4)).v[0] = scale;
    }
#endif
}
