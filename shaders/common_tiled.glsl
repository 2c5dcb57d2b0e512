// Shared by the tiled decode kernels (decode_tiled.comp, decode_merge.comp):
// the stage-1 push block, bounded loads, visibility and softcap. Mirrors
// backend_vulkan/vk_decode.c's tiled_push.
#ifndef QATTN_COMMON_TILED_GLSL
#define QATTN_COMMON_TILED_GLSL

#define QA_LOG2E 1.4426950408889634
#define QA_LN2 0.6931471805599453
#define QA_NEG_INF (-1.0 / 0.0)

#ifndef QA_NO_STAGE1_PUSH
layout(push_constant, std430) uniform Push {
    uint64_t q, k, v, ks, vs;            // tensors (ks/vs 0 for bf16 caches)
    uint64_t indptr, indices, lens;      // paging
    uint64_t ws_o, ws_ml;                // partial O^T and (m, l) of every split
    int64_t k_ps, v_ps, ks_ps, vs_ps;    // page strides (elements)
    int64_t n_slots;                     // slots of the cache (pages x rows)
    int k_rs, k_hs, v_rs, v_hs;          // row-in-page and head strides
    int ks_rs, ks_hs, vs_rs, vs_hs;
    int q_sb, q_sr, q_sh;
    int indptr_s, indices_s, lens_s, n_indices;
    int hq, hkv, page_size, window_left;
    int num_splits, keys_per_split;
    float sm_scale, softcap;
} pc;

int qa_ld_i32(uint64_t base, int64_t i) { return RefI32(qa_at(base, i, 4)).v[0]; }
float qa_ld_f32(uint64_t base, int64_t i) { return RefF32(qa_at(base, i, 4)).v[0]; }

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
