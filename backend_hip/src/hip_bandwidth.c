/*
 * qattn_read_stream and qattn_decode_read on the HIP backend: one launch
 * each of kernels/read_bandwidth.hip's streaming read, whose time gives the
 * device's read bandwidth through this backend, and of its decode-pattern
 * read. Arguments are checked by the core; like every op they only enqueue
 * on the caller's stream.
 */
#include <string.h>

#include "qh_backend.h"
#include "qh_read_params.h"

/* Workgroups per CU: enough resident waves to keep every memory channel
 * busy (on the H200 8 workgroups of 256 per SM stream at the rate the
 * Vulkan shader of the same design reaches; shared/notes/anchors.md). */
#define READ_GROUPS_PER_CU 8u
/* CUs assumed when the runtime reports none. */
#define READ_DEFAULT_CUS 16u

qattn_status qh_read_stream(void *vbe, void *src, uint64_t offset, uint64_t bytes, void *sum,
                            uint64_t sum_offset) {
    qh_backend *be = vbe;
    qh_read_params p;
    memset(&p, 0, sizeof p);
    p.src = (uint64_t)(uintptr_t)src + offset;
    p.sum = (uint64_t)(uintptr_t)sum + sum_offset;
    p.words = (uint32_t)(bytes / 16);
    const uint32_t cus = be->caps.compute_units > 0 ? (uint32_t)be->caps.compute_units : READ_DEFAULT_CUS;
    uint32_t groups = cus * READ_GROUPS_PER_CU;
    const uint32_t need = (p.words + QH_READ_WG - 1) / QH_READ_WG;
    if (need < groups) groups = need;
    p.groups = groups;
    qattn_status s = qh_op_begin(be);
    if (s == QATTN_OK) s = qh_launch(be, QH_K_qattn_read_bandwidth, groups, 1, 1, QH_READ_WG, &p, "read_stream");
    if (s == QATTN_OK) s = qh_op_end(be);
    return s;
}

qattn_status qh_decode_read(void *vbe, const qattn_decode_args *a, void *sum, uint64_t sum_offset) {
    qh_backend *be = vbe;
    qh_read_params p;
    memset(&p, 0, sizeof p);
    p.sum = (uint64_t)(uintptr_t)sum + sum_offset;
    p.q = qh_addr(&a->q);
    p.k = qh_addr(&a->k_cache);
    p.v = qh_addr(&a->v_cache);
    p.ks = qh_addr(&a->k_scale);
    p.vs = qh_addr(&a->v_scale);
    if ((p.k | p.v) % 16 != 0)
        return qh_fail(be, QATTN_ERR_ALIGNMENT, "decode_read: k_cache/v_cache device addresses are not 16-byte aligned");
    p.indptr = qh_addr(&a->kv_indptr);
    p.indices = qh_addr(&a->kv_indices);
    p.lens = qh_addr(&a->kv_lens);
    const qattn_decode_cache_views cv = qattn_decode_cache_views_of(a);
    qattn_decode_cache_views_arrays(&cv, p.page_stride, p.head_stride, p.row_stride);
    p.n_slots = cv.n_slots;
    p.q_sb = qattn_stride32(&a->q, 0);
    p.q_sr = qattn_stride32(&a->q, 1);
    p.q_sh = qattn_stride32(&a->q, 2);
    p.indptr_s = qattn_stride32(&a->kv_indptr, 0);
    p.indices_s = qattn_stride32(&a->kv_indices, 0);
    p.lens_s = qattn_stride32(&a->kv_lens, 0);
    p.n_indices = (int32_t)a->kv_indices.shape[0];
    const uint32_t cus = be->caps.compute_units > 0 ? (uint32_t)be->caps.compute_units : READ_DEFAULT_CUS;
    const qattn_decode_read_launch l = qattn_decode_read_launch_of(a, cus, QH_READ_WG, QH_DREAD_LOADS,
                                                                   READ_GROUPS_PER_CU);
    const unsigned B = (unsigned)a->q.shape[0], Hkv = (unsigned)a->k_cache.shape[a->k_cache.rank - 2];
    p.page_size = a->page_size;
    p.window_left = a->window_left;
    p.R = (int32_t)a->q.shape[1];
    p.G = l.q_heads_per_kv;
    p.D = (int32_t)a->q.shape[3];
    p.es = (int32_t)qattn_dtype_size(a->k_cache.dtype);
    p.row_words = l.row_words;
    p.keys_per_split = l.keys_per_split;
    p.num_splits = l.splits;
    p.scaled = qattn_tensor_present(&a->k_scale);
    qattn_status s = qh_op_begin(be);
    if (s == QATTN_OK)
        s = qh_launch(be, QH_K_qattn_decode_pattern_read, (unsigned)l.splits, Hkv, B, QH_READ_WG, &p, "decode_read");
    if (s == QATTN_OK) s = qh_op_end(be);
    return s;
}
