#version 450
// Decode's own access pattern (qattn_decode_read): reads what decode reads
// for a call, and nothing else, and adds the wrapping sum of its 32-bit
// words to one u32. It exists to be timed: its time is the floor of any
// decode kernel over this cache and page table, finer than the streaming
// read's because it pays the same page-table indirection, row granularity
// and scale loads.
//
// A workgroup takes (split, kv head g, request b): the keys
// [lo + split * keys_per_split, ...) of the request's visible range, each
// through the page table (spec 2) and bounded as decode bounds them (pages
// the request's kv_indptr row gives, slots inside the cache). Lanes split a
// key's K and V rows into 16-byte chunks (row_words per row); a step covers
// WG / row_words keys, and each lane issues LOADS steps' K and V loads
// before consuming any. Lanes holding chunk 0 also read the key's two
// scales. The first split of each (g, b) reads that head group's q rows.
// Page and head bases in 64 bits, the row inside the page in 32
// (qattn_cache_kernel_view).
//
// Spec constants: 0 = workgroup size (a power of two, <= 1024).
#extension GL_GOOGLE_include_directive : require
#define QA_NO_STAGE1_PUSH
#include "common.glsl"
#include "common_tiled.glsl"

#define LOADS 4

layout(constant_id = 0) const uint WG = 256;
layout(local_size_x_id = 0) in;

// qattn_decode_read_args (qattn/kernel_args.h), field for field.
layout(push_constant, std430) uniform Push {
    uint64_t q, k, v, ks, vs, indptr, indices, lens, sum;
    // the caches' views (qattn_cache_kernel_view), in the order k_cache,
    // v_cache, k_scale, v_scale
    int64_t page_stride[4], head_stride[4];
    int64_t n_slots;                     // slots inside all four tensors
    uint row_stride[4];
    int q_sb, q_sr, q_sh;
    int indptr_s, indices_s, lens_s, n_indices;
    int page_size, window_left, R, G;    // G: q heads per kv head
    int D, row_words, es;                // head dim, 16-byte chunks per row, element bytes
    int keys_per_split, num_splits, scaled;
} pc;

shared uint red[32];

void main() {
    const uint tid = gl_LocalInvocationID.x;
    const int split = int(gl_WorkGroupID.x), g = int(gl_WorkGroupID.y), b = int(gl_WorkGroupID.z);
    const int ip0 = RoI32(qa_at(pc.indptr, int64_t(b) * pc.indptr_s, 4)).v[0];
    const int ip1 = min(RoI32(qa_at(pc.indptr, int64_t(b + 1) * pc.indptr_s, 4)).v[0], pc.n_indices);
    const int64_t cap = max(int64_t(ip1) - int64_t(ip0), int64_t(0)) * pc.page_size;
    // Visible keys [lo, kv_lens[b]) as decode sees them, bounded by the
    // pages the request's row of kv_indptr gives (entries below 0 skipped).
    const int Lraw = RoI32(qa_at(pc.lens, int64_t(b) * pc.lens_s, 4)).v[0];
    const int L = int(clamp(int64_t(Lraw), int64_t(0), cap));
    const int64_t lw = pc.window_left >= 0 ? int64_t(Lraw) - pc.R - pc.window_left : int64_t(0);
    const int64_t skip = ip0 < 0 ? -int64_t(ip0) * pc.page_size : int64_t(0);
    const int lo = int(min(max(max(lw, skip), int64_t(0)), int64_t(0x7FFFFFFF)));
    const int k0 = int(min(int64_t(lo) + int64_t(split) * pc.keys_per_split, int64_t(L)));
    const int k1 = split == pc.num_splits - 1 ? L : int(min(int64_t(L), int64_t(k0) + pc.keys_per_split));

    const uint rw = uint(pc.row_words), kps = WG / rw;
    const uint key = tid / rw, chunk = tid % rw;
    const bool lane_on = key < kps;
    const uint64_t kh = pc.k + uint64_t(int64_t(g) * pc.head_stride[0]) * uint(pc.es) + chunk * 16u;
    const uint64_t vh = pc.v + uint64_t(int64_t(g) * pc.head_stride[1]) * uint(pc.es) + chunk * 16u;
    const uint64_t ksh = pc.ks + uint64_t(int64_t(g) * pc.head_stride[2]) * 4u;
    const uint64_t vsh = pc.vs + uint64_t(int64_t(g) * pc.head_stride[3]) * 4u;
    const bool scales = pc.scaled != 0 && chunk == 0u;
    uvec4 acc = uvec4(0u);
    for (int base = k0; base < k1; base += int(kps) * LOADS) {
        uvec4 rk[LOADS], rv[LOADS];
        uint sk[LOADS], sv[LOADS];
        bool on[LOADS];
        [[unroll]] for (int j = 0; j < LOADS; ++j) {
            const int p = base + j * int(kps) + int(key);
            on[j] = lane_on && p < k1;
            int page = -1, row = 0;
            if (on[j]) {
                page = RoI32(qa_at(pc.indices, int64_t(ip0 + p / pc.page_size) * pc.indices_s, 4)).v[0];
                row = p % pc.page_size;
            }
            on[j] = on[j] && page >= 0 && int64_t(page) * pc.page_size + row < pc.n_slots;
            const int64_t pg = on[j] ? int64_t(page) : 0;
            const uint r = on[j] ? uint(row) : 0u;
            rk[j] = RoU32x4(kh + uint64_t(pg * pc.page_stride[0] + int64_t(r * pc.row_stride[0])) * uint(pc.es)).v[0];
            rv[j] = RoU32x4(vh + uint64_t(pg * pc.page_stride[1] + int64_t(r * pc.row_stride[1])) * uint(pc.es)).v[0];
            sk[j] = sv[j] = 0u;
            if (scales) {
                sk[j] = RoU32(ksh + uint64_t(pg * pc.page_stride[2] + int64_t(r * pc.row_stride[2])) * 4u).v[0];
                sv[j] = RoU32(vsh + uint64_t(pg * pc.page_stride[3] + int64_t(r * pc.row_stride[3])) * 4u).v[0];
            }
        }
        [[unroll]] for (int j = 0; j < LOADS; ++j)
            if (on[j]) acc += rk[j] + rv[j] + uvec4(sk[j] + sv[j], 0u, 0u, 0u);
    }
    // q: the head group's R x G rows, once per (g, b), element by element
    // (bf16 rows need not be 4-byte aligned; q is a few KB).
    if (split == 0) {
        const int n = pc.R * pc.G * pc.D;
        for (int i = int(tid); i < n; i += int(WG)) {
            const int row = i / pc.D, r = row / pc.G, h = g * pc.G + row % pc.G;
            const int64_t e = int64_t(b) * pc.q_sb + int64_t(r) * pc.q_sr + int64_t(h) * pc.q_sh + i % pc.D;
            acc.x += uint(RoU16(qa_at(pc.q, e, 2)).v[0]);
        }
    }
    uint s = subgroupAdd(acc.x + acc.y + acc.z + acc.w);
    if (subgroupElect()) red[gl_SubgroupID] = s;
    barrier();
    if (tid == 0u) {
        uint t = 0u;
        for (uint i = 0u; i < gl_NumSubgroups; ++i) t += red[i];
        atomicAdd(RefU32(pc.sum).v[0], t);
    }
}
