/* libFuzzer harness: the descriptor validators of every op, on descriptors
 * mutated around a valid call (buffers are fakes: validators never touch
 * memory). Beyond "no crash, no UB": whatever a validator accepts must keep
 * every tensor inside its buffer, every shape within int32, every stride
 * within int32 except a K/V cache's or its scales' (kernels form their page
 * and head bases in 64 bits), and the planners' own bounds
 * (qattn__check_*_shapes) must agree. For paged MQA logits also spec 5's
 * forms: the shapes agree with each other and with the scalars, and no two
 * logits share an address (issue 26 item 6: a row stride below max_kv_len
 * made rows overwrite each other). */
#include "fuzz_common.h"
#include "internal.h"

static struct qattn_buffer g_buf[12];

/* Distinct elements of t at distinct addresses: its dimensions of extent
 * > 1, by increasing stride, each stride past every element the smaller
 * ones reach (docs/ops.md, "Memory"). */
static int no_overlap(const qattn_tensor *t) {
    int idx[QATTN_MAX_RANK], n = 0;
    for (int i = 0; i < t->rank; ++i)
        if (t->shape[i] > 1) idx[n++] = i;
    for (int i = 1; i < n; ++i) /* insertion sort by stride */
        for (int j = i; j > 0 && t->strides[idx[j]] < t->strides[idx[j - 1]]; --j) {
            const int x = idx[j];
            idx[j] = idx[j - 1];
            idx[j - 1] = x;
        }
    int64_t reach = 0; /* the farthest element offset the smaller dimensions reach */
    for (int i = 0; i < n; ++i) {
        const int64_t st = t->strides[idx[i]];
        if (st <= reach) return 0;
        reach += (t->shape[idx[i]] - 1) * st;
    }
    return 1;
}

static qattn_tensor mk(fz *f, int i, qattn_dtype dt, int32_t rank, int64_t a, int64_t b, int64_t c,
                       int64_t d) {
    const int64_t s[4] = {a, b, c, d};
    g_buf[i].bytes = fz_u64v(f, 1u << 22);
    qattn_tensor t = qattn_tensor_contiguous(&g_buf[i], 0, dt, rank, s);
    if (fz_u8(f) >= 192) fz_tensor(f, &t);
    if (fz_u8(f) >= 250) t.buffer = NULL;
    return t;
}

/* What an accepted descriptor promises (cache: a K/V cache or its scales). */
static void accepted(const qattn_tensor *t, const char *name, int cache) {
    if (!t->buffer) return;
    for (int i = 0; i < t->rank; ++i)
        if (t->shape[i] < 0 || t->shape[i] > INT32_MAX || t->strides[i] < 0 ||
            (t->strides[i] > INT32_MAX && !cache))
            fz_fail("%s accepted with shape[%d] %lld stride %lld", name, i, (long long)t->shape[i],
                    (long long)t->strides[i]);
    uint64_t first, end;
    if (qattn__tensor_extent(t, &first, &end) != QATTN_OK || end > t->buffer->bytes)
        fz_fail("%s accepted past its %llu-byte buffer", name, (unsigned long long)t->buffer->bytes);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz f = {data, size};
    char err[512];
    const int op = fz_pick(&f, 4);
    if (op == 0) {
        const fz_decode_shape s = fz_decode_shape_of(&f);
        qattn_decode_args a;
        memset(&a, 0, sizeof a);
        a.q = mk(&f, 0, QATTN_BF16, 4, s.B, s.R, s.Hq, s.D);
        a.k_cache = mk(&f, 1, s.kv, 3, s.slots, s.Hkv, s.D, 0);
        a.v_cache = mk(&f, 2, s.kv, 3, s.slots, s.Hkv, s.D, 0);
        if (s.kv != QATTN_BF16) {
            a.k_scale = mk(&f, 3, QATTN_F32, 2, s.slots, s.Hkv, 0, 0);
            a.v_scale = mk(&f, 4, QATTN_F32, 2, s.slots, s.Hkv, 0, 0);
        }
        a.kv_indptr = mk(&f, 5, QATTN_I32, 1, s.B + 1, 0, 0, 0);
        a.kv_indices = mk(&f, 6, QATTN_I32, 1, s.pages, 0, 0, 0);
        a.kv_lens = mk(&f, 7, QATTN_I32, 1, s.B, 0, 0, 0);
        if (fz_u8(&f) & 1) a.sinks = mk(&f, 8, QATTN_F32, 1, s.Hq, 0, 0, 0);
        a.o = mk(&f, 9, QATTN_BF16, 4, s.B, s.R, s.Hq, s.D);
        if (fz_u8(&f) & 1) a.lse = mk(&f, 10, QATTN_F32, 3, s.B, s.R, s.Hq, 0);
        a.page_size = fz_i32(&f, (int32_t)s.P);
        a.max_kv_len = fz_i32(&f, 64);
        a.sm_scale = fz_f32(&f, 0.125f);
        a.window_left = fz_i32(&f, -1);
        a.logit_softcap = fz_f32(&f, 0.0f);
        err[0] = '\0';
        qattn_status st = qattn__validate_decode(&a, err, sizeof err);
        fz_check_status(st, err, "validate_decode");
        if (st == QATTN_OK) {
            const qattn_tensor *ts[] = {&a.q, &a.k_cache, &a.v_cache, &a.k_scale, &a.v_scale, &a.kv_indptr,
                                        &a.kv_indices, &a.kv_lens, &a.sinks, &a.o, &a.lse};
            for (int i = 0; i < 11; ++i) accepted(ts[i], "decode tensor", i >= 1 && i <= 4);
            if (qattn__check_decode_shapes(&a, err, sizeof err) != QATTN_OK)
                fz_fail("validation accepted what the planner's bounds refuse: %s", err);
        }
    } else if (op == 1) {
        const fz_decode_shape s = fz_decode_shape_of(&f);
        const int64_t T = 1 + fz_pick(&f, 4);
        qattn_kv_store_args a;
        memset(&a, 0, sizeof a);
        a.k_new = mk(&f, 0, QATTN_BF16, 3, T, s.Hkv, s.D, 0);
        a.v_new = mk(&f, 1, QATTN_BF16, 3, T, s.Hkv, s.D, 0);
        a.slot_mapping = mk(&f, 2, QATTN_I32, 1, T, 0, 0, 0);
        a.k_cache = mk(&f, 3, s.kv, 3, s.slots, s.Hkv, s.D, 0);
        a.v_cache = mk(&f, 4, s.kv, 3, s.slots, s.Hkv, s.D, 0);
        if (s.kv != QATTN_BF16) {
            a.k_scale = mk(&f, 5, QATTN_F32, 2, s.slots, s.Hkv, 0, 0);
            a.v_scale = mk(&f, 6, QATTN_F32, 2, s.slots, s.Hkv, 0, 0);
        }
        err[0] = '\0';
        qattn_status st = qattn__validate_kv_store(&a, err, sizeof err);
        fz_check_status(st, err, "validate_kv_store");
        if (st == QATTN_OK) {
            const qattn_tensor *ts[] = {&a.k_new, &a.v_new, &a.slot_mapping, &a.k_cache, &a.v_cache,
                                        &a.k_scale, &a.v_scale};
            for (int i = 0; i < 7; ++i) accepted(ts[i], "kv_store tensor", i >= 3);
        }
    } else if (op == 3) {
        static const int64_t DIMS[4] = {64, 128, 256, 512};
        const int64_t B = 1 + fz_pick(&f, 4), N = 1 + fz_pick(&f, 8), H = 1 + fz_pick(&f, 64);
        const int64_t D = DIMS[fz_pick(&f, 4)], P = 1 + fz_pick(&f, 16), pages = 1 + fz_pick(&f, 8);
        const int64_t M = 1 + fz_pick(&f, 100);
        const int rank3 = fz_u8(&f) & 1;
        const qattn_dtype qt = fz_u8(&f) & 1 ? QATTN_FP8_E4M3FN : QATTN_FP8_E4M3FNUZ;
        const qattn_dtype kt = fz_u8(&f) & 1 ? QATTN_FP8_E4M3FN : QATTN_FP8_E4M3FNUZ;
        qattn_paged_mqa_logits_args a;
        memset(&a, 0, sizeof a);
        a.q = mk(&f, 0, qt, 4, B, N, H, D);
        if (rank3) {
            a.k_cache = mk(&f, 1, kt, 3, pages, P, D, 0);
            a.k_scale = mk(&f, 2, QATTN_F32, 2, pages, P, 0, 0);
        } else {
            a.k_cache = mk(&f, 1, kt, 2, pages * P, D, 0, 0);
            a.k_scale = mk(&f, 2, QATTN_F32, 1, pages * P, 0, 0, 0);
        }
        a.weights = mk(&f, 3, QATTN_F32, 3, B, N, H, 0);
        a.kv_indptr = mk(&f, 4, QATTN_I32, 1, B + 1, 0, 0, 0);
        a.kv_indices = mk(&f, 5, QATTN_I32, 1, pages, 0, 0, 0);
        a.kv_lens = mk(&f, 6, QATTN_I32, 1, B, 0, 0, 0);
        a.logits = mk(&f, 7, QATTN_F32, 3, B, N, M, 0);
        a.page_size = fz_i32(&f, (int32_t)P);
        a.max_kv_len = fz_i32(&f, (int32_t)M);
        a.clean_logits = fz_u8(&f) & 1;
        err[0] = '\0';
        qattn_status st = qattn__validate_paged_mqa_logits(&a, err, sizeof err);
        fz_check_status(st, err, "validate_paged_mqa_logits");
        if (st == QATTN_OK) {
            const qattn_tensor *ts[] = {&a.q,         &a.k_cache,    &a.k_scale, &a.weights,
                                        &a.kv_indptr, &a.kv_indices, &a.kv_lens, &a.logits};
            for (int i = 0; i < 8; ++i) accepted(ts[i], "paged mqa tensor", i == 1 || i == 2);
            if (qattn__check_paged_mqa_logits_shapes(&a, err, sizeof err) != QATTN_OK)
                fz_fail("validation accepted what the planner's bounds refuse: %s", err);
            /* spec 5's forms */
            const int64_t b = a.q.shape[0], n = a.q.shape[1], h = a.q.shape[2], d = a.q.shape[3];
            const int kr = a.k_cache.rank, sr = a.k_scale.rank;
            if (a.q.rank != 4 || b < 1 || n < 1 || n > 8 || h < 1 || (d != 64 && d != 128 && d != 256 && d != 512))
                fz_fail("paged mqa: q accepted with rank %d shape %lld %lld %lld %lld", (int)a.q.rank,
                        (long long)b, (long long)n, (long long)h, (long long)d);
            if (a.page_size < 1 || a.max_kv_len < 1)
                fz_fail("paged mqa: page_size %d max_kv_len %d accepted", (int)a.page_size, (int)a.max_kv_len);
            if ((kr != 2 && kr != 3) || a.k_cache.shape[kr - 1] != d || (kr == 3 && a.k_cache.shape[1] != a.page_size))
                fz_fail("paged mqa: k_cache accepted with rank %d", kr);
            if ((sr != 1 && sr != 2) || (sr == 2 && a.k_scale.shape[1] != a.page_size) ||
                qattn__paged_mqa_slots(&a.k_scale, 1) != qattn__paged_mqa_slots(&a.k_cache, 0))
                fz_fail("paged mqa: k_scale accepted with rank %d, another slot count than k_cache", sr);
            if (a.weights.rank != 3 || a.weights.shape[0] != b || a.weights.shape[1] != n || a.weights.shape[2] != h)
                fz_fail("paged mqa: weights of another shape accepted");
            if (a.kv_indptr.rank != 1 || a.kv_indptr.shape[0] != b + 1 || a.kv_lens.rank != 1 ||
                a.kv_lens.shape[0] != b || a.kv_indices.rank != 1)
                fz_fail("paged mqa: a page table of another shape accepted");
            if (a.logits.rank != 3 || a.logits.shape[0] != b || a.logits.shape[1] != n ||
                a.logits.shape[2] != a.max_kv_len)
                fz_fail("paged mqa: logits of another shape accepted");
            if (!no_overlap(&a.logits))
                fz_fail("paged mqa: logits accepted whose elements overlap (strides %lld %lld %lld)",
                        (long long)a.logits.strides[0], (long long)a.logits.strides[1],
                        (long long)a.logits.strides[2]);
        }
    } else {
        static const int64_t DIMS[4] = {64, 128, 256, 512};
        const int64_t S = 1 + fz_pick(&f, 20), H = 1 + fz_pick(&f, 64), D = DIMS[fz_pick(&f, 4)];
        const int64_t Skv = 1 + fz_pick(&f, 100);
        const qattn_dtype qt = fz_u8(&f) & 1 ? QATTN_FP8_E4M3FN : QATTN_FP8_E4M3FNUZ;
        qattn_mqa_logits_args a;
        memset(&a, 0, sizeof a);
        a.q = mk(&f, 0, qt, 3, S, H, D, 0);
        a.k = mk(&f, 1, qt, 2, Skv, D, 0, 0);
        a.k_scale = mk(&f, 2, QATTN_F32, 1, Skv, 0, 0, 0);
        a.weights = mk(&f, 3, QATTN_F32, 2, S, H, 0, 0);
        a.ks = mk(&f, 4, QATTN_I32, 1, S, 0, 0, 0);
        a.ke = mk(&f, 5, QATTN_I32, 1, S, 0, 0, 0);
        a.logits = mk(&f, 6, QATTN_F32, 2, S, Skv, 0, 0);
        a.clean_logits = fz_u8(&f) & 1;
        err[0] = '\0';
        qattn_status st = qattn__validate_mqa_logits(&a, err, sizeof err);
        fz_check_status(st, err, "validate_mqa_logits");
        if (st == QATTN_OK) {
            const qattn_tensor *ts[] = {&a.q, &a.k, &a.k_scale, &a.weights, &a.ks, &a.ke, &a.logits};
            for (int i = 0; i < 7; ++i) accepted(ts[i], "mqa tensor", 0);
            if (qattn__check_mqa_logits_shapes(&a, err, sizeof err) != QATTN_OK)
                fz_fail("validation accepted what the planner's bounds refuse: %s", err);
        }
    }
    return 0;
}
