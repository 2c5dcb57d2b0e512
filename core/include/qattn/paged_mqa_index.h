/*
 * The index and bounds arithmetic of paged MQA logits (spec 5), written
 * once in the subset of GLSL 4.50 (with the explicit arithmetic types) and
 * C++ that both accept, and included by the Vulkan shaders
 * (shaders/paged_mqa_*.comp) and the HIP kernels
 * (backend_hip/kernels/paged_mqa_logits.hip), so the two backends decide
 * which position exists, which row sees it and where its key lives with
 * the same expressions. The values come from qattn_paged_mqa_kernel_args
 * (qattn/kernel_args.h) and the page table.
 *
 * The includer defines QATTN_PMI_FN, the qualifiers of a device function
 * (GLSL: nothing; HIP: `static __device__ inline`), and in GLSL includes
 * this after the int64 types are enabled; no other header is needed.
 *
 * Rules (spec 2 and 5), for request b with L = kv_lens[b] keys and N rows:
 * - its page table entries are [begin, end), begin = kv_indptr[b], end =
 *   min(kv_indptr[b + 1], n_indices); position p's entry is begin + p / P,
 *   valid only when >= 0 (an entry past the request's or the table's end is
 *   never formed: positions stop at pmi_limit);
 * - the position exists when that entry's page id is >= 0 and its slot
 *   page * P + p % P lies below n_slots;
 * - row t sees positions p <= pmi_last(L, N, t);
 * - key row `row` of page `page` is pmi_elem(page, row, page stride, row
 *   stride) elements from the cache's element 0 (the page's base in 64
 *   bits, the offset inside the page in 32: caches of any size).
 */
#ifndef QATTN_PAGED_MQA_INDEX_H
#define QATTN_PAGED_MQA_INDEX_H

#ifndef QATTN_PMI_FN
#error "define QATTN_PMI_FN (the qualifiers of a device function) before including qattn/paged_mqa_index.h"
#endif

QATTN_PMI_FN int64_t pmi_min64(int64_t a, int64_t b) { return a < b ? a : b; }
QATTN_PMI_FN int64_t pmi_max64(int64_t a, int64_t b) { return a > b ? a : b; }

/* Split x covers positions [pmi_split_begin, pmi_split_end) of the M
 * logits columns (an empty range past M). */
QATTN_PMI_FN int32_t pmi_split_begin(int32_t x, int32_t kps, int32_t M) {
    return int32_t(pmi_min64(int64_t(x) * int64_t(kps), int64_t(M)));
}
QATTN_PMI_FN int32_t pmi_split_end(int32_t c0, int32_t kps, int32_t M) {
    return int32_t(pmi_min64(int64_t(c0) + int64_t(kps), int64_t(M)));
}

/* Positions any row of the request may see: below L (the last row's bound)
 * and inside the request's pages. */
QATTN_PMI_FN int32_t pmi_limit(int32_t L, int32_t begin, int32_t end, int32_t P) {
    const int64_t cap = end > begin ? (int64_t(end) - int64_t(begin)) * int64_t(P) : int64_t(0);
    return int32_t(pmi_min64(pmi_max64(int64_t(L), int64_t(0)), cap));
}

/* The last position row t of N sees (< 0: none). */
QATTN_PMI_FN int32_t pmi_last(int32_t L, int32_t N, int32_t t) {
    return int32_t(pmi_max64(int64_t(L) - int64_t(N) + int64_t(t), int64_t(-1)));
}

/* The page table entry of position p < pmi_limit (so below end). */
QATTN_PMI_FN int32_t pmi_entry(int32_t begin, int32_t p, int32_t P) { return begin + p / P; }

/* Whether row `row` of page `page` is a slot inside the cache. */
QATTN_PMI_FN bool pmi_slot_ok(int32_t page, int32_t row, int32_t P, int32_t n_slots) {
    return page >= 0 && int64_t(page) * int64_t(P) + int64_t(row) < int64_t(n_slots);
}

/* Elements from element 0 of a cache (or scale) view to key row `row` of
 * page `page` (page >= 0). */
QATTN_PMI_FN uint64_t pmi_elem(int32_t page, int32_t row, int64_t page_stride, uint32_t row_stride) {
    return uint64_t(page) * uint64_t(page_stride) + uint64_t(uint32_t(row) * row_stride);
}

#endif /* QATTN_PAGED_MQA_INDEX_H */
