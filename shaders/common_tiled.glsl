// Shared by the tiled decode kernels (decode_tiled.comp, decode_merge.comp):
// the stage-1 push block (qattn_decode_tile_args, qattn/kernel_args.h),
// bounded loads, visibility and softcap.
#ifndef QATTN_COMMON_TILED_GLSL
#define QATTN_COMMON_TILED_GLSL

#define QA_LOG2E 1.4426950408889634
#define QA_LN2 0.6931471805599453
#define QA_NEG_INF (-1.0 / 0.0)

// Read-only views of the inputs, for the loads of stage 1: nothing writes
// them during the dispatch, and saying so (NonWritable, Restrict) leaves a
// driver free to use its non-coherent load path. The NVIDIA driver emits
// every load of a plain reference as LDG.E.STRONG.SM under the Vulkan memory
// model, which the cooperative-matrix variant is compiled with; its CUDA
// twin's loads are weak.
layout(buffer_reference, std430, buffer_reference_align = 1) readonly restrict buffer RoU8 { uint8_t v[]; };
layout(buffer_reference, std430, buffer_reference_align = 2) readonly restrict buffer RoU16 { uint16_t v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) readonly restrict buffer RoU32 { uint v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) readonly restrict buffer RoI32 { int v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) readonly restrict buffer RoF32 { float v[]; };
layout(buffer_reference, std430, buffer_reference_align = 8) readonly restrict buffer RoU32x2 { uvec2 v[]; };
layout(buffer_reference, std430, buffer_reference_align = 16) readonly restrict buffer RoU32x4 { uvec4 v[]; };

#ifndef QA_NO_STAGE1_PUSH
// qattn_decode_tile_args (qattn/kernel_args.h), field for field.
layout(push_constant, std430) uniform Push {
    uint64_t q, k, v, ks, vs;            // tensors (ks/vs 0 for bf16 caches)
    uint64_t indptr, indices, lens;      // paging
    uint64_t ws_o, ws_ml;                // partial O^T and (m, l) of every split
    // The caches' views (qattn_cache_kernel_view, qattn/backend.h): key row
    // `row` of page `page` of kv head g starts at g * hs + page * ps (64-bit
    // bases: a cache may span more than 2^32 elements) + row * rs (32-bit:
    // the core keeps offsets inside a page below 2^31) elements.
    int64_t k_ps, v_ps, ks_ps, vs_ps;    // page strides (elements)
    int64_t k_hs, v_hs, ks_hs, vs_hs;    // head strides
    int64_t n_slots;                     // slots inside all four tensors
    uint k_rs, v_rs, ks_rs, vs_rs;       // row-in-page strides
    int q_sb, q_sr, q_sh;
    int indptr_s, indices_s, lens_s, n_indices;
    int hq, hkv, page_size, window_left;
    int num_splits, keys_per_split;
    float sm_scale, softcap;
    int flags;                           // QATTN_DECODE_TILE_*
} pc;

#define QA_TILE_Q_F16 1 // QATTN_DECODE_TILE_Q_F16: q is f16 (else bf16)

// Element i of q as f32; qf16 is the uniform (pc.flags & QA_TILE_Q_F16) != 0,
// read once by the caller. Both conversions and a select, no branch (q is
// read once per workgroup, before the tile loop).
float qa_ld_q(int64_t i, bool qf16) {
    const uint h = uint(RoU16(qa_at(pc.q, i, 2)).v[0]);
    const float f = unpackHalf2x16(h).x, b = uintBitsToFloat(h << 16);
    return qf16 ? f : b;
}

int qa_ld_i32(uint64_t base, int64_t i) { return RoI32(qa_at(base, i, 4)).v[0]; }

// Visible keys of row r of a request with L keys and R rows: [lo, hi].
void qa_visible(int L, int R_, int r, out int lo, out int hi) {
    int t = L - R_ + r;
    lo = pc.window_left >= 0 ? max(0, t - pc.window_left) : 0;
    hi = t;
}
#endif

// Overflow-safe tanh (GLSL's may form inf/inf for large arguments).
float qa_tanh(float x) {
    float e = exp(-2.0 * abs(x));
    float t = (1.0 - e) / (1.0 + e);
    return x < 0.0 ? -t : t;
}

#endif
