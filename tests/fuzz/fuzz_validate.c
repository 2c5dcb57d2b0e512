/* libFuzzer harness: the descriptor validators of every op, on descriptors
 * mutated around a valid call (buffers are fakes: validators never touch
 * memory). Beyond "no crash, no UB": whatever a validator accepts must keep
 * every tensor inside its buffer, every shape within int32, every stride
 * within int32 except a K/V cache's or its scales' (kernels form their page
 * and head bases in 64 bits), and the planners' own bounds
 * (qattn__check_*_shapes) must agree. */
#include "fuzz_common.h"
#include "internal.h"

static struct qattn_buffer g_buf[12];

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
    const int op = fz_pick(&f, 3);
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
