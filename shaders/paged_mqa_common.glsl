// Shared by the paged MQA logits shaders (spec 5): the push block, which
// is qattn_paged_mqa_kernel_args (qattn/kernel_args.h) field for field and
// is built by the core (qattn_paged_mqa_kernel_args_of), and the index and
// bounds arithmetic the HIP kernels share (qattn/paged_mqa_index.h).
#ifndef QATTN_PAGED_MQA_COMMON_GLSL
#define QATTN_PAGED_MQA_COMMON_GLSL

#extension GL_EXT_shader_explicit_arithmetic_types_int32 : require

layout(push_constant, std430) uniform Push {
    uint64_t q, k, ks, w, indptr, indices, lens, logits;
    int64_t k_ps, ks_ps;   // page strides (elements)
    uint k_rs, ks_rs;      // row-in-page strides (elements)
    int q_sb, q_sr, q_sh;  // q: request, row, head
    int w_sb, w_sr;        // weights: request, row
    int l_sb, l_sr;        // logits: request, row
    int n_slots, n_indices;
    int B, N, H, D, P;     // plan (the shaders take the ones they need as constants)
    int M;                 // max_kv_len
    int num_splits, keys_per_split;
    int grid_y;
    int clean;
    int kv_tile, q_staged, load16;
    int head_slots, pass_rows, passes;
    int key_tiles, subgroups;
    int fragment_layout, q_row_halves;
    int q_fnuz, k_fnuz;
    float unshift;
} pc;

#define QATTN_PMI_FN
#include "qattn/paged_mqa_index.h"

// The request's page-table range and the positions any of its rows sees.
struct pm_request {
    int L, begin, lim;
};
pm_request pm_request_of(int b) {
    pm_request r;
    r.L = RefI32(pc.lens).v[b];
    r.begin = RefI32(pc.indptr).v[b];
    const int end = min(RefI32(pc.indptr).v[b + 1], pc.n_indices);
    r.lim = pmi_limit(r.L, r.begin, end, pc.P);
    return r;
}

// Position p's (p < lim) page id and row, or page -1 when it has no slot.
ivec2 pm_slot(pm_request r, int p) {
    const int e = pmi_entry(r.begin, p, pc.P);
    int page = -1;
    const int row = p % pc.P;
    if (e >= 0) {
        page = RefI32(pc.indices).v[e];
        if (!pmi_slot_ok(page, row, pc.P, pc.n_slots)) page = -1;
    }
    return ivec2(page, row);
}

const uint PM_NEG_INF = 0xFF800000u;

#endif
