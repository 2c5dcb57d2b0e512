/* Every descriptor rule of every op, one bad field at a time: the call must
 * return the rule's status, name the argument in the last error, and write
 * nothing (outputs are poisoned and checked afterwards). A valid baseline
 * call runs first so a fixture mistake cannot make the table pass vacuously. */
#define _POSIX_C_SOURCE 200809L /* setenv for QATTN_CHECK_INDICES */
#include <stdio.h>

#include "test_ctx.h"
#include "test_rng.h"

/* ---- decode fixture: B=2 R=2 Hq=4 Hkv=2 D=64 fp8 fn, 32 slots, P=4 ---- */
enum { B = 2, R = 2, HQ = 4, HKV = 2, D = 64, NS = 32, P = 4, NPAGES = 8 };

typedef struct decode_fix {
    qattn_context *ctx, *other;
    qattn_buffer *q, *kc, *vc, *ks, *vs, *indptr, *indices, *lens, *o, *lse, *ws, *foreign;
    qattn_buffer *big; /* over 2^31 bytes, never written (the cpu backend does not touch it) */
    qattn_decode_args a;
} decode_fix;

/* Row stride of a rank-4 cache whose rows of one page reach past 2^31
 * elements: (P - 1) x BIG_ROW + D - 1 > INT32_MAX. */
#define BIG_ROW ((int64_t)715827862)
#define BIG_BYTES ((uint64_t)((P - 1) * BIG_ROW + HKV * D))

static int decode_setup(void **state) {
    decode_fix *f = calloc(1, sizeof *f);
    qt_rng rng = qt_rng_for("validate_decode");
    f->ctx = qt_cpu_ctx();
    f->other = qt_cpu_ctx();
    uint16_t q[B * R * HQ * D];
    uint8_t kv[NS * HKV * D];
    float sc[NS * HKV];
    qt_fill_bf16(&rng, q, B * R * HQ * D, 1.0f);
    f->q = qt_buf(f->ctx, q, sizeof q);
    qt_fill_fp8(&rng, kv, sizeof kv, QATTN_FP8_E4M3FN, 4.0f);
    f->kc = qt_buf(f->ctx, kv, sizeof kv);
    qt_fill_fp8(&rng, kv, sizeof kv, QATTN_FP8_E4M3FN, 4.0f);
    f->vc = qt_buf(f->ctx, kv, sizeof kv);
    qt_fill_f32_pos(&rng, sc, NS * HKV, 0.01f, 0.1f);
    f->ks = qt_buf(f->ctx, sc, sizeof sc);
    f->vs = qt_buf(f->ctx, sc, sizeof sc);
    int32_t indptr[B + 1] = {0, 4, 8}, lens[B] = {13, 16}, pages[NPAGES] = {7, 1, 2, 3, 4, 5, 6, 0};
    f->indptr = qt_buf(f->ctx, indptr, sizeof indptr);
    f->indices = qt_buf(f->ctx, pages, sizeof pages);
    f->lens = qt_buf(f->ctx, lens, sizeof lens);
    f->o = qt_buf(f->ctx, NULL, B * R * HQ * D * 2);
    f->lse = qt_buf(f->ctx, NULL, B * R * HQ * 4);
    f->ws = qt_buf(f->ctx, NULL, 1 << 20);
    f->foreign = qt_buf(f->other, NULL, sizeof kv);
    assert_int_equal(qattn_buffer_alloc(f->ctx, BIG_BYTES, &f->big), QATTN_OK);
    qattn_decode_args *a = &f->a;
    a->q = qattn_tensor_contiguous(f->q, 0, QATTN_BF16, 4, (int64_t[]){B, R, HQ, D});
    a->k_cache = qattn_tensor_contiguous(f->kc, 0, QATTN_FP8_E4M3FN, 3, (int64_t[]){NS, HKV, D});
    a->v_cache = qattn_tensor_contiguous(f->vc, 0, QATTN_FP8_E4M3FN, 3, (int64_t[]){NS, HKV, D});
    a->k_scale = qattn_tensor_contiguous(f->ks, 0, QATTN_F32, 2, (int64_t[]){NS, HKV});
    a->v_scale = qattn_tensor_contiguous(f->vs, 0, QATTN_F32, 2, (int64_t[]){NS, HKV});
    a->kv_indptr = qattn_tensor_contiguous(f->indptr, 0, QATTN_I32, 1, (int64_t[]){B + 1});
    a->kv_indices = qattn_tensor_contiguous(f->indices, 0, QATTN_I32, 1, (int64_t[]){NPAGES});
    a->kv_lens = qattn_tensor_contiguous(f->lens, 0, QATTN_I32, 1, (int64_t[]){B});
    a->o = qattn_tensor_contiguous(f->o, 0, QATTN_BF16, 4, (int64_t[]){B, R, HQ, D});
    a->lse = qattn_tensor_contiguous(f->lse, 0, QATTN_F32, 3, (int64_t[]){B, R, HQ});
    a->page_size = P;
    a->max_kv_len = 16;
    a->sm_scale = 0.125f;
    a->window_left = -1;
    *state = f;
    return 0;
}

static int decode_teardown(void **state) {
    decode_fix *f = *state;
    qattn_buffer *bs[] = {f->q, f->kc, f->vc, f->ks, f->vs, f->indptr, f->indices, f->lens,
                          f->o, f->lse, f->ws, f->big};
    for (size_t i = 0; i < sizeof bs / sizeof bs[0]; ++i) qattn_buffer_free(f->ctx, bs[i]);
    qattn_buffer_free(f->other, f->foreign);
    qattn_context_free(f->ctx);
    qattn_context_free(f->other);
    free(f);
    return 0;
}

typedef struct decode_case {
    const char *what;
    qattn_status want;
    const char *names; /* substring the last error must contain */
    void (*mutate)(decode_fix *f, qattn_decode_args *a);
    int run_only; /* a rule of running (buffer ownership), not of planning */
} decode_case;

static void m_q_dtype(decode_fix *f, qattn_decode_args *a) { a->q.dtype = QATTN_F32; }
static void m_v_slots(decode_fix *f, qattn_decode_args *a) { a->v_cache.shape[0] = NS - 1; }
static void m_kv_dtype_mix(decode_fix *f, qattn_decode_args *a) { a->v_cache.dtype = QATTN_FP8_E4M3FNUZ; }
static void m_o_misaligned(decode_fix *f, qattn_decode_args *a) { a->o.offset = 1; }
static void m_k_noncontig(decode_fix *f, qattn_decode_args *a) { a->k_cache.strides[2] = 2; }
static void m_q_negative(decode_fix *f, qattn_decode_args *a) { a->q.shape[0] = -1; }
static void m_k_overflow(decode_fix *f, qattn_decode_args *a) { a->k_cache.strides[0] = INT64_MAX / 4; }
/* A cache may span any number of elements, but not past its buffer. */
static void m_k_span(decode_fix *f, qattn_decode_args *a) { a->k_cache.strides[0] = (int64_t)1 << 27; }
/* Offsets inside a page must stay below 2^31 (kernels form them in 32
 * bits): a rank-4 cache [8, P, Hkv, D] whose rows are BIG_ROW apart, in a
 * buffer that holds it. */
static void m_k_in_page(decode_fix *f, qattn_decode_args *a) {
    a->k_cache = qattn_tensor_contiguous(f->big, 0, QATTN_FP8_E4M3FN, 4, (int64_t[]){NS / P, P, HKV, D});
    a->k_cache.strides[0] = 0; /* pages may alias for reading: keeps the extent small */
    a->k_cache.strides[1] = BIG_ROW;
}
static void m_k_huge_dim(decode_fix *f, qattn_decode_args *a) { a->k_cache.shape[0] = (int64_t)1 << 32; }
static void m_scale_null(decode_fix *f, qattn_decode_args *a) { a->k_scale.buffer = NULL; }
static void m_indices_oob(decode_fix *f, qattn_decode_args *a) { a->kv_indices.shape[0] = NPAGES + 1; }
static void m_gqa(decode_fix *f, qattn_decode_args *a) {
    a->q.shape[2] = 3;
    a->o.shape[2] = 3;
}
/* Stride 0 keeps the extent inside the buffer, so the row rule is what fails. */
static void m_rows(decode_fix *f, qattn_decode_args *a) {
    a->q.shape[1] = 9;
    a->q.strides[1] = 0;
}
static void m_head_dim(decode_fix *f, qattn_decode_args *a) { a->q.shape[3] = 32; }
static void m_page(decode_fix *f, qattn_decode_args *a) { a->page_size = 0; }
static void m_window(decode_fix *f, qattn_decode_args *a) { a->window_left = -2; }
static void m_softcap(decode_fix *f, qattn_decode_args *a) { a->logit_softcap = -1.0f; }
static void m_scale_nan(decode_fix *f, qattn_decode_args *a) { a->sm_scale = NAN; }
static void m_lse_dtype(decode_fix *f, qattn_decode_args *a) { a->lse.dtype = QATTN_BF16; }
static void m_lse_shape(decode_fix *f, qattn_decode_args *a) { a->lse.shape[2] = HQ - 1; }
static void m_o_shape(decode_fix *f, qattn_decode_args *a) { a->o.shape[1] = R - 1; }
static void m_indptr_shape(decode_fix *f, qattn_decode_args *a) { a->kv_indptr.shape[0] = B; }
static void m_sinks_shape(decode_fix *f, qattn_decode_args *a) {
    a->sinks = qattn_tensor_contiguous(f->ks, 0, QATTN_F32, 1, (int64_t[]){HQ + 2});
}
static void m_bf16_with_scales(decode_fix *f, qattn_decode_args *a) {
    a->k_cache.dtype = a->v_cache.dtype = QATTN_BF16;
    a->k_cache.shape[0] = a->v_cache.shape[0] = NS / 2;
}
static void m_foreign(decode_fix *f, qattn_decode_args *a) { a->k_cache.buffer = f->foreign; }
/* Issue 27's rules: q and o bf16 or f16; D and Dv multiples of 16 in [16,
 * 256], q's last dim D and o's Dv. Fewer slots keep the wider caches inside
 * their buffers (the head dim is checked before the slot counts of the
 * scales). */
static void m_q_f32(decode_fix *f, qattn_decode_args *a) { a->q.dtype = QATTN_F32; }
static void m_o_f32(decode_fix *f, qattn_decode_args *a) { a->o.dtype = QATTN_F32; }
static void m_o_fp8(decode_fix *f, qattn_decode_args *a) { a->o.dtype = QATTN_FP8_E5M2; }
static void m_kv_heads_dim(qattn_decode_args *a, int64_t slots, int64_t dk, int64_t dv) {
    a->k_cache = qattn_tensor_contiguous(a->k_cache.buffer, 0, a->k_cache.dtype, 3, (int64_t[]){slots, HKV, dk});
    a->v_cache = qattn_tensor_contiguous(a->v_cache.buffer, 0, a->v_cache.dtype, 3, (int64_t[]){slots, HKV, dv});
}
static void m_d88(decode_fix *f, qattn_decode_args *a) { m_kv_heads_dim(a, 16, 88, 88); }
static void m_d272(decode_fix *f, qattn_decode_args *a) { m_kv_heads_dim(a, 4, 272, 64); }
static void m_dv8(decode_fix *f, qattn_decode_args *a) { m_kv_heads_dim(a, NS, 64, 8); }
static void m_dv264(decode_fix *f, qattn_decode_args *a) { m_kv_heads_dim(a, 4, 64, 264); }
static void m_o_not_dv(decode_fix *f, qattn_decode_args *a) {
    m_kv_heads_dim(a, NS, 64, 32);
    a->o.shape[3] = 64; /* Dv is 32 */
}
static void m_q_not_d(decode_fix *f, qattn_decode_args *a) { m_kv_heads_dim(a, NS, 48, 64); }
static void m_max_len(decode_fix *f, qattn_decode_args *a) { a->max_kv_len = -1; }

/* The fixture's cache as rank 4: NPAGES pages of P rows (the same memory). */
static qattn_tensor paged(qattn_tensor t, int64_t pages, int64_t rows) {
    const int64_t h = t.shape[1], d = t.shape[2];
    t.rank = 4;
    t.shape[0] = pages;
    t.shape[1] = rows;
    t.shape[2] = h;
    t.shape[3] = d;
    t.strides[0] = rows * h * d;
    t.strides[1] = h * d;
    t.strides[2] = d;
    t.strides[3] = 1;
    return t;
}
static void m_k_rows_per_page(decode_fix *f, qattn_decode_args *a) {
    a->k_cache = paged(a->k_cache, NS / (2 * P), 2 * P);
    a->v_cache = paged(a->v_cache, NS / (2 * P), 2 * P);
}
static void m_k_rank2(decode_fix *f, qattn_decode_args *a) { a->k_cache.rank = 2; }
static void m_v4_slots(decode_fix *f, qattn_decode_args *a) {
    a->k_cache = paged(a->k_cache, NPAGES, P);
    a->v_cache = paged(a->v_cache, NPAGES - 1, P);
}
static void m_scale3_rows(decode_fix *f, qattn_decode_args *a) {
    a->k_scale.rank = 3;
    a->k_scale.shape[0] = NS / 8;
    a->k_scale.shape[1] = 8;
    a->k_scale.shape[2] = HKV;
    a->k_scale.strides[0] = 8 * HKV;
    a->k_scale.strides[1] = HKV;
    a->k_scale.strides[2] = 1;
}
static void m_scale_rank1(decode_fix *f, qattn_decode_args *a) { a->k_scale.rank = 1; }
static void m_scale_last_stride(decode_fix *f, qattn_decode_args *a) {
    a->k_scale.strides[1] = 3;
    a->k_scale.shape[0] = 4;
}

static const decode_case DECODE_CASES[] = {
    {"rank-4 cache, P != page_size", QATTN_ERR_SHAPE, "k_cache: rank 4 with 8 rows per page", m_k_rows_per_page, 0},
    {"cache rank 2", QATTN_ERR_SHAPE, "k_cache: rank 2", m_k_rank2, 0},
    {"rank-4 v_cache slot count", QATTN_ERR_SHAPE, "v_cache: 28 slots", m_v4_slots, 0},
    {"rank-3 scale, P != page_size", QATTN_ERR_SHAPE, "k_scale: rank 3", m_scale3_rows, 0},
    {"scale rank 1", QATTN_ERR_SHAPE, "k_scale: rank 1", m_scale_rank1, 0},
    {"scale head stride 3", QATTN_ERR_STRIDE, "k_scale", m_scale_last_stride, 0},
    {"q dtype", QATTN_ERR_DTYPE, "q:", m_q_dtype, 0},
    {"v_cache slot count", QATTN_ERR_SHAPE, "v_cache", m_v_slots, 0},
    {"k/v dtypes differ", QATTN_ERR_DTYPE, "v_cache", m_kv_dtype_mix, 0},
    {"misaligned o base", QATTN_ERR_ALIGNMENT, "o:", m_o_misaligned, 0},
    {"non-contiguous k last dim", QATTN_ERR_STRIDE, "k_cache", m_k_noncontig, 0},
    {"negative batch", QATTN_ERR_SHAPE, "q:", m_q_negative, 0},
    {"int64 overflow", QATTN_ERR_OVERFLOW, "k_cache", m_k_overflow, 0},
    {"cache span past its buffer", QATTN_ERR_OUT_OF_BOUNDS, "k_cache", m_k_span, 0},
    {"offset inside a page over int32", QATTN_ERR_OVERFLOW, "k_cache", m_k_in_page, 0},
    {"dim over int32", QATTN_ERR_OVERFLOW, "k_cache", m_k_huge_dim, 0},
    {"null k_scale", QATTN_ERR_NULL_BUFFER, "k_scale", m_scale_null, 0},
    {"kv_indices past buffer", QATTN_ERR_OUT_OF_BOUNDS, "kv_indices", m_indices_oob, 0},
    {"Hq not multiple of Hkv", QATTN_ERR_SHAPE, "q:", m_gqa, 0},
    {"9 query rows", QATTN_ERR_SHAPE, "q:", m_rows, 0},
    {"head dim 32", QATTN_ERR_SHAPE, "q:", m_head_dim, 0},
    {"page size 0", QATTN_ERR_INVALID_ARGUMENT, "page_size", m_page, 0},
    {"window -2", QATTN_ERR_INVALID_ARGUMENT, "window_left", m_window, 0},
    {"negative softcap", QATTN_ERR_INVALID_ARGUMENT, "logit_softcap", m_softcap, 0},
    {"NaN sm_scale", QATTN_ERR_INVALID_ARGUMENT, "sm_scale", m_scale_nan, 0},
    {"lse dtype", QATTN_ERR_DTYPE, "lse", m_lse_dtype, 0},
    {"lse heads", QATTN_ERR_SHAPE, "lse", m_lse_shape, 0},
    {"o rows", QATTN_ERR_SHAPE, "o:", m_o_shape, 0},
    {"kv_indptr length", QATTN_ERR_SHAPE, "kv_indptr", m_indptr_shape, 0},
    {"sinks length", QATTN_ERR_SHAPE, "sinks", m_sinks_shape, 0},
    {"bf16 cache with scales", QATTN_ERR_INVALID_ARGUMENT, "k_scale", m_bf16_with_scales, 0},
    {"buffer of another context", QATTN_ERR_INVALID_ARGUMENT, "k_cache", m_foreign, 1},
    {"negative max_kv_len", QATTN_ERR_INVALID_ARGUMENT, "max_kv_len", m_max_len, 0},
    {"q f32", QATTN_ERR_DTYPE, "q: dtype f32 not allowed (expected bf16|f16)", m_q_f32, 0},
    {"o f32", QATTN_ERR_DTYPE, "o: dtype f32 not allowed (expected bf16|f16)", m_o_f32, 0},
    {"o e5m2", QATTN_ERR_DTYPE, "o: dtype fp8_e5m2 not allowed (expected bf16|f16)", m_o_fp8, 0},
    {"head dim 88", QATTN_ERR_SHAPE, "k_cache: head dim 88 is not a multiple of 16 in [16, 256]", m_d88, 0},
    {"head dim 272", QATTN_ERR_SHAPE, "k_cache: head dim 272 is not a multiple of 16 in [16, 256]", m_d272, 0},
    {"Dv 8", QATTN_ERR_SHAPE, "v_cache: head dim 8 is not a multiple of 16 in [16, 256]", m_dv8, 0},
    {"Dv 264", QATTN_ERR_SHAPE, "v_cache: head dim 264 is not a multiple of 16 in [16, 256]", m_dv264, 0},
    {"o's last dim not Dv", QATTN_ERR_SHAPE, "o: shape[3] = 64 but v_cache's head dim is 32", m_o_not_dv, 0},
    {"q's last dim not D", QATTN_ERR_SHAPE, "q: shape[3] = 64 but k_cache's head dim is 48", m_q_not_d, 0},
};

static int decode_outputs_untouched(decode_fix *f) {
    return qt_buf_all(f->ctx, f->o, QT_POISON) && qt_buf_all(f->ctx, f->lse, QT_POISON);
}

static void test_decode_rules(void **state) {
    decode_fix *f = *state;
    qattn_decode_plan plan;
    for (size_t i = 0; i < sizeof DECODE_CASES / sizeof DECODE_CASES[0]; ++i) {
        const decode_case *c = &DECODE_CASES[i];
        qattn_decode_args a = f->a;
        c->mutate(f, &a);
        /* The planner and the run entry both refuse it. */
        memset(&plan, 0, sizeof plan);
        qattn_status sp = qattn_decode_plan_create(f->ctx, &a, NULL, &plan);
        qattn_status sr = qattn_decode_run(f->ctx, &plan, &a, f->ws, 0);
        const char *msg = qattn_last_error(f->ctx);
        qattn_status plan_want = c->run_only ? QATTN_OK : c->want;
        if (sp != plan_want || sr != c->want || !strstr(msg, c->names)) {
            print_error("case '%s': plan %s, run %s, want %s; message \"%s\" should name %s\n", c->what,
                        qattn_status_name(sp), qattn_status_name(sr), qattn_status_name(c->want), msg,
                        c->names);
            fail();
        }
        assert_true(decode_outputs_untouched(f));
    }
}

static void test_decode_baseline_and_plan_rules(void **state) {
    decode_fix *f = *state;
    qattn_decode_plan plan;
    qattn_decode_options opt = QATTN_DECODE_OPTIONS_INIT;
    opt.num_splits = 4;
    assert_int_equal(qattn_decode_plan_create(f->ctx, &f->a, &opt, &plan), QATTN_OK);
    assert_int_equal(plan.num_splits, 4);
    /* A plan for another shape is refused. */
    qattn_decode_plan wrong = plan;
    wrong.batch = B + 1;
    assert_int_equal(qattn_decode_run(f->ctx, &wrong, &f->a, f->ws, 0), QATTN_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(qattn_last_error(f->ctx), "plan"));
    /* A plan edited after planning is refused before any field is used. */
    wrong = plan;
    wrong.shared_bytes = 1u << 30;
    assert_int_equal(qattn_decode_run(f->ctx, &wrong, &f->a, f->ws, 0), QATTN_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(qattn_last_error(f->ctx), "changed after planning"));
    /* ops.c also refuses a plan whose shared_bytes exceed the device's; the
     * tiled planner's need does not grow with a device's limit, so no plan it
     * makes reaches that rule from here (edited plans are refused above). */
    /* Missing, short or misaligned workspace. */
    if (plan.workspace_bytes > 0) {
        assert_int_equal(qattn_decode_run(f->ctx, &plan, &f->a, NULL, 0), QATTN_ERR_WORKSPACE);
        assert_int_equal(qattn_decode_run(f->ctx, &plan, &f->a, f->ws, (1 << 20) - 16), QATTN_ERR_WORKSPACE);
        assert_int_equal(qattn_decode_run(f->ctx, &plan, &f->a, f->ws, 8), QATTN_ERR_ALIGNMENT);
    }
    assert_true(decode_outputs_untouched(f));
    /* The valid call runs and writes both outputs. */
    assert_int_equal(qattn_decode_run(f->ctx, &plan, &f->a, f->ws, 0), QATTN_OK);
    assert_false(qt_buf_all(f->ctx, f->o, QT_POISON));
    assert_false(qt_buf_all(f->ctx, f->lse, QT_POISON));
}

/* The cache forms of spec 2 over the same memory give the same bytes: the
 * fixture's caches as rank 4 (NPAGES pages of P rows) and their scales as
 * rank 3; and broadcast scales (per token: head stride 0; per tensor: every
 * stride 0) are accepted for reading. */
static void test_decode_forms(void **state) {
    decode_fix *f = *state;
    qattn_decode_plan plan;
    uint8_t o3[B * R * HQ * D * 2], o4[sizeof o3];
    assert_int_equal(qattn_decode_plan_create(f->ctx, &f->a, NULL, &plan), QATTN_OK);
    assert_int_equal(qattn_decode_run(f->ctx, &plan, &f->a, f->ws, 0), QATTN_OK);
    assert_int_equal(qattn_buffer_download(f->ctx, f->o, 0, o3, sizeof o3), QATTN_OK);
    qattn_decode_args a = f->a;
    a.k_cache = paged(a.k_cache, NPAGES, P);
    a.v_cache = paged(a.v_cache, NPAGES, P);
    a.k_scale = qattn_tensor_contiguous(f->ks, 0, QATTN_F32, 3, (int64_t[]){NPAGES, P, HKV});
    a.v_scale = qattn_tensor_contiguous(f->vs, 0, QATTN_F32, 3, (int64_t[]){NPAGES, P, HKV});
    qattn_status s = qattn_decode_plan_create(f->ctx, &a, NULL, &plan);
    if (s == QATTN_OK) s = qattn_decode_run(f->ctx, &plan, &a, f->ws, 0);
    if (s != QATTN_OK) fail_msg("rank-4 cache: %s: %s", qattn_status_name(s), qattn_last_error(f->ctx));
    assert_int_equal(qattn_buffer_download(f->ctx, f->o, 0, o4, sizeof o4), QATTN_OK);
    assert_memory_equal(o3, o4, sizeof o3);
    for (int tensor = 0; tensor < 2; ++tensor) {
        a = f->a;
        a.k_scale.strides[1] = 0; /* per token */
        if (tensor) a.k_scale.strides[0] = a.v_scale.strides[0] = a.v_scale.strides[1] = 0;
        s = qattn_decode_plan_create(f->ctx, &a, NULL, &plan);
        if (s == QATTN_OK) s = qattn_decode_run(f->ctx, &plan, &a, f->ws, 0);
        if (s != QATTN_OK)
            fail_msg("%s scales: %s: %s", tensor ? "per-tensor" : "per-token", qattn_status_name(s),
                     qattn_last_error(f->ctx));
    }
}

/* The other side of issue 27's rules: what they let through plans and runs
 * and writes o (so the refusals above are of the rule, not of the fixture):
 * f16 q and o together and each alone, an e5m2 cache, Dv != D both ways,
 * D 48 and Dv 16 (the fixture's bytes read through the other shapes). */
static void test_decode_new_axes_accepted(void **state) {
    decode_fix *f = *state;
    uint8_t poison[B * R * HQ * D * 2];
    memset(poison, QT_POISON, sizeof poison);
    for (int i = 0; i < 6; ++i) {
        qattn_decode_args a = f->a;
        const char *what = "";
        switch (i) {
        case 0: what = "f16 q and o"; a.q.dtype = a.o.dtype = QATTN_F16; break;
        case 1: what = "f16 q, bf16 o"; a.q.dtype = QATTN_F16; break;
        case 2: what = "bf16 q, f16 o"; a.o.dtype = QATTN_F16; break;
        case 3: what = "e5m2 cache"; a.k_cache.dtype = a.v_cache.dtype = QATTN_FP8_E5M2; break;
        case 4:
            what = "D 48, Dv 16";
            m_kv_heads_dim(&a, NS, 48, 16);
            a.q = qattn_tensor_contiguous(f->q, 0, QATTN_BF16, 4, (int64_t[]){B, R, HQ, 48});
            a.o = qattn_tensor_contiguous(f->o, 0, QATTN_F16, 4, (int64_t[]){B, R, HQ, 16});
            break;
        default:
            what = "D 32, Dv 64";
            m_kv_heads_dim(&a, NS, 32, 64);
            a.q = qattn_tensor_contiguous(f->q, 0, QATTN_F16, 4, (int64_t[]){B, R, HQ, 32});
            break;
        }
        assert_int_equal(qattn_buffer_upload(f->ctx, f->o, 0, poison, sizeof poison), QATTN_OK);
        qattn_decode_plan plan;
        qattn_status s = qattn_decode_plan_create(f->ctx, &a, NULL, &plan);
        if (s == QATTN_OK) s = qattn_decode_run(f->ctx, &plan, &a, f->ws, 0);
        if (s != QATTN_OK) fail_msg("%s: %s: %s", what, qattn_status_name(s), qattn_last_error(f->ctx));
        if (qt_buf_all(f->ctx, f->o, QT_POISON)) fail_msg("%s: o not written", what);
    }
}

/* QATTN_CHECK_INDICES=1 verifies pages, lengths and indptr before launching. */
static void test_decode_index_check(void **state) {
    decode_fix *f = *state;
    qattn_decode_plan plan;
    assert_int_equal(qattn_decode_plan_create(f->ctx, &f->a, NULL, &plan), QATTN_OK);
    setenv("QATTN_CHECK_INDICES", "1", 1);
    struct { int32_t pages[NPAGES]; int32_t lens[B]; const char *names; } bad[] = {
        {{7, 1, 2, 3, 4, 5, 6, 8}, {13, 16}, "kv_indices[7]"}, /* page 8 = slots 32..35 */
        {{7, 1, 2, 3, 4, 5, 6, -1}, {13, 16}, "kv_indices[7]"},
        {{7, 1, 2, 3, 4, 5, 6, 0}, {13, 17}, "kv_lens"},          /* over max_kv_len 16 */
        {{7, 1, 2, 3, 4, 5, 6, 0}, {-1, 16}, "kv_lens"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
        qattn_buffer *pg = qt_buf(f->ctx, bad[i].pages, sizeof bad[i].pages);
        qattn_buffer *ln = qt_buf(f->ctx, bad[i].lens, sizeof bad[i].lens);
        qattn_decode_args a = f->a;
        a.kv_indices.buffer = pg;
        a.kv_lens.buffer = ln;
        assert_int_equal(qattn_decode_run(f->ctx, &plan, &a, f->ws, 0), QATTN_ERR_INDEX_OUT_OF_RANGE);
        assert_non_null(strstr(qattn_last_error(f->ctx), bad[i].names));
        assert_true(decode_outputs_untouched(f));
        qattn_buffer_free(f->ctx, pg);
        qattn_buffer_free(f->ctx, ln);
    }
    int32_t short_indptr[B + 1] = {0, 3, 8}; /* request 0 needs 4 pages of 4 for 13 keys */
    qattn_buffer *ip = qt_buf(f->ctx, short_indptr, sizeof short_indptr);
    qattn_decode_args a = f->a;
    a.kv_indptr.buffer = ip;
    assert_int_equal(qattn_decode_run(f->ctx, &plan, &a, f->ws, 0), QATTN_ERR_INDEX_OUT_OF_RANGE);
    assert_non_null(strstr(qattn_last_error(f->ctx), "kv_indptr"));
    qattn_buffer_free(f->ctx, ip);
    assert_int_equal(qattn_decode_run(f->ctx, &plan, &f->a, f->ws, 0), QATTN_OK);
    unsetenv("QATTN_CHECK_INDICES");
}

/* ---- KV store: the caches are the outputs ---- */
static void test_kv_store_rules(void **state) {
    (void)state;
    qattn_context *ctx = qt_cpu_ctx();
    qt_rng rng = qt_rng_for("validate_kv_store");
    enum { T = 3 };
    uint16_t kn[T * HKV * D];
    qt_fill_bf16(&rng, kn, T * HKV * D, 2.0f);
    qattn_buffer *k = qt_buf(ctx, kn, sizeof kn), *v = qt_buf(ctx, kn, sizeof kn);
    int32_t slots[T] = {5, -1, 31};
    qattn_buffer *sm = qt_buf(ctx, slots, sizeof slots);
    qattn_buffer *kc = qt_buf(ctx, NULL, NS * HKV * D), *vc = qt_buf(ctx, NULL, NS * HKV * D);
    qattn_buffer *ks = qt_buf(ctx, NULL, NS * HKV * 4), *vs = qt_buf(ctx, NULL, NS * HKV * 4);
    qattn_kv_store_args good = {
        .k_new = qattn_tensor_contiguous(k, 0, QATTN_BF16, 3, (int64_t[]){T, HKV, D}),
        .v_new = qattn_tensor_contiguous(v, 0, QATTN_BF16, 3, (int64_t[]){T, HKV, D}),
        .slot_mapping = qattn_tensor_contiguous(sm, 0, QATTN_I32, 1, (int64_t[]){T}),
        .k_cache = qattn_tensor_contiguous(kc, 0, QATTN_I8, 3, (int64_t[]){NS, HKV, D}),
        .v_cache = qattn_tensor_contiguous(vc, 0, QATTN_I8, 3, (int64_t[]){NS, HKV, D}),
        .k_scale = qattn_tensor_contiguous(ks, 0, QATTN_F32, 2, (int64_t[]){NS, HKV}),
        .v_scale = qattn_tensor_contiguous(vs, 0, QATTN_F32, 2, (int64_t[]){NS, HKV}),
    };
    struct { const char *what; qattn_status want; const char *names; qattn_kv_store_args a; } cases[24];
    int n = 0;
    cases[n] = (__typeof__(cases[0])){"k_new dtype", QATTN_ERR_DTYPE,
        "k_new: dtype f32 not allowed (expected bf16|f16)", good};
    cases[n++].a.k_new.dtype = QATTN_F32;
    cases[n] = (__typeof__(cases[0])){"v_new f32", QATTN_ERR_DTYPE,
        "v_new: dtype f32 not allowed (expected bf16|f16)", good};
    cases[n++].a.v_new.dtype = QATTN_F32;
    /* k_new and v_new bf16 or f16, but the same */
    cases[n] = (__typeof__(cases[0])){"k_new f16, v_new bf16", QATTN_ERR_DTYPE,
        "v_new: dtype bf16 differs from k_new's f16", good};
    cases[n++].a.k_new.dtype = QATTN_F16;
    cases[n] = (__typeof__(cases[0])){"v_new head dim", QATTN_ERR_SHAPE,
        "v_new: shape[2] = 64 but v_cache's head dim is 32", good};
    cases[n].a.v_cache.shape[2] = 32;
    cases[n++].a.v_cache.strides[1] = 32;
    cases[n] = (__typeof__(cases[0])){"cache head dim 88", QATTN_ERR_SHAPE,
        "k_cache: head dim 88 is not a multiple of 16 in [16, 256]", good};
    cases[n].a.k_cache = qattn_tensor_contiguous(kc, 0, QATTN_I8, 3, (int64_t[]){NS / 2, HKV, 88});
    cases[n++].a.v_cache = qattn_tensor_contiguous(vc, 0, QATTN_I8, 3, (int64_t[]){NS / 2, HKV, 88});
    cases[n] = (__typeof__(cases[0])){"v_new tokens", QATTN_ERR_SHAPE, "v_new", good};
    cases[n++].a.v_new.shape[0] = T - 1;
    cases[n] = (__typeof__(cases[0])){"slot_mapping dtype", QATTN_ERR_DTYPE, "slot_mapping", good};
    cases[n++].a.slot_mapping.dtype = QATTN_F32;
    cases[n] = (__typeof__(cases[0])){"v_scale missing", QATTN_ERR_NULL_BUFFER, "v_scale", good};
    cases[n++].a.v_scale.buffer = NULL;
    cases[n] = (__typeof__(cases[0])){"k_cache heads", QATTN_ERR_SHAPE, "v_cache", good};
    cases[n++].a.k_cache.shape[1] = 1;
    cases[n] = (__typeof__(cases[0])){"k_new non-contiguous", QATTN_ERR_STRIDE, "k_new", good};
    cases[n++].a.k_new.strides[2] = 3;
    /* the KV store writes its caches and scales: no broadcast */
    cases[n] = (__typeof__(cases[0])){"k_scale per token", QATTN_ERR_STRIDE, "k_scale", good};
    cases[n++].a.k_scale.strides[1] = 0;
    cases[n] = (__typeof__(cases[0])){"v_scale per slot only", QATTN_ERR_STRIDE, "v_scale: stride[0] is 0", good};
    cases[n++].a.v_scale.strides[0] = 0;
    cases[n] = (__typeof__(cases[0])){"k_cache slots aliased", QATTN_ERR_STRIDE, "k_cache: stride[0] is 0", good};
    cases[n++].a.k_cache.strides[0] = 0;
    cases[n] = (__typeof__(cases[0])){"rank-4 cache, 0 rows per page", QATTN_ERR_SHAPE, "k_cache: shape[1] = 0", good};
    cases[n].a.k_cache = paged(good.k_cache, NS, 1);
    cases[n++].a.k_cache.shape[1] = 0;
    cases[n] = (__typeof__(cases[0])){"rank-4 cache, scales of fewer slots", QATTN_ERR_SHAPE, "k_scale", good};
    cases[n].a.k_cache = paged(good.k_cache, NS / 4, 4);
    cases[n].a.v_cache = paged(good.v_cache, NS / 4, 4);
    cases[n++].a.k_scale.shape[0] = NS - 4;
    for (int i = 0; i < n; ++i) {
        qattn_status s = qattn_kv_store(ctx, &cases[i].a);
        if (s != cases[i].want || !strstr(qattn_last_error(ctx), cases[i].names)) {
            print_error("case '%s': got %s (%s)\n", cases[i].what, qattn_status_name(s), qattn_last_error(ctx));
            fail();
        }
    }
    setenv("QATTN_CHECK_INDICES", "1", 1);
    int32_t bad_slots[T] = {5, -2, 32};
    qattn_buffer *bsm = qt_buf(ctx, bad_slots, sizeof bad_slots);
    qattn_kv_store_args bad = good;
    bad.slot_mapping.buffer = bsm;
    assert_int_equal(qattn_kv_store(ctx, &bad), QATTN_ERR_INDEX_OUT_OF_RANGE);
    assert_non_null(strstr(qattn_last_error(ctx), "slot_mapping[1]"));
    unsetenv("QATTN_CHECK_INDICES");
    assert_true(qt_buf_all(ctx, kc, QT_POISON) && qt_buf_all(ctx, vc, QT_POISON) &&
                qt_buf_all(ctx, ks, QT_POISON) && qt_buf_all(ctx, vs, QT_POISON));
    assert_int_equal(qattn_kv_store(ctx, &good), QATTN_OK);
    assert_false(qt_buf_all(ctx, kc, QT_POISON));
    /* rank-4 caches with rank-3 scales, P = 8 (slot 31: page 3, row 7) */
    qattn_kv_store_args paged4 = good;
    paged4.k_cache = paged(good.k_cache, NS / 8, 8);
    paged4.v_cache = paged(good.v_cache, NS / 8, 8);
    paged4.k_scale = qattn_tensor_contiguous(ks, 0, QATTN_F32, 3, (int64_t[]){NS / 8, 8, HKV});
    assert_int_equal(qattn_kv_store(ctx, &paged4), QATTN_OK);
    /* Issue 27: f16 inputs (both), an e5m2 cache, Dv != D are accepted and
     * write the cache. */
    for (int i = 0; i < 3; ++i) {
        qattn_kv_store_args a = good;
        if (i == 0) a.k_new.dtype = a.v_new.dtype = QATTN_F16;
        if (i == 1) a.k_cache.dtype = a.v_cache.dtype = QATTN_FP8_E5M2;
        if (i == 2) {
            a.v_new = qattn_tensor_contiguous(v, 0, QATTN_BF16, 3, (int64_t[]){T, HKV, 32});
            a.v_cache = qattn_tensor_contiguous(vc, 0, QATTN_I8, 3, (int64_t[]){NS, HKV, 32});
        }
        uint8_t poison[NS * HKV * D];
        memset(poison, QT_POISON, sizeof poison);
        assert_int_equal(qattn_buffer_upload(ctx, kc, 0, poison, sizeof poison), QATTN_OK);
        assert_int_equal(qattn_buffer_upload(ctx, vc, 0, poison, sizeof poison), QATTN_OK);
        qattn_status s = qattn_kv_store(ctx, &a);
        if (s != QATTN_OK) fail_msg("kv_store case %d: %s: %s", i, qattn_status_name(s), qattn_last_error(ctx));
        assert_false(qt_buf_all(ctx, kc, QT_POISON));
        assert_false(qt_buf_all(ctx, vc, QT_POISON));
    }
    qattn_buffer *all[] = {k, v, sm, kc, vc, ks, vs, bsm};
    for (size_t i = 0; i < 8; ++i) qattn_buffer_free(ctx, all[i]);
    qattn_context_free(ctx);
}

/* ---- MQA logits ---- */
static void test_mqa_rules(void **state) {
    (void)state;
    qattn_context *ctx = qt_cpu_ctx();
    qt_rng rng = qt_rng_for("validate_mqa");
    enum { S = 5, H = 4, MD = 64, SKV = 37, STRIDE = 40 };
    uint8_t q[S * H * MD], k[SKV * MD];
    float ksc[SKV], w[S * H];
    int32_t ks[S] = {0, 3, 10, 37, 5}, ke[S] = {37, 9, 10, 37, 90};
    qt_fill_fp8(&rng, q, sizeof q, QATTN_FP8_E4M3FN, 2.0f);
    qt_fill_fp8(&rng, k, sizeof k, QATTN_FP8_E4M3FNUZ, 2.0f);
    qt_fill_f32_pos(&rng, ksc, SKV, 0.5f, 1.0f);
    qt_fill_f32(&rng, w, S * H, 1.0f);
    qattn_buffer *bq = qt_buf(ctx, q, sizeof q), *bk = qt_buf(ctx, k, sizeof k);
    qattn_buffer *bks = qt_buf(ctx, ksc, sizeof ksc), *bw = qt_buf(ctx, w, sizeof w);
    qattn_buffer *bs = qt_buf(ctx, ks, sizeof ks), *be = qt_buf(ctx, ke, sizeof ke);
    qattn_buffer *bl = qt_buf(ctx, NULL, S * STRIDE * 4);
    qattn_mqa_logits_args good = {
        .q = qattn_tensor_contiguous(bq, 0, QATTN_FP8_E4M3FN, 3, (int64_t[]){S, H, MD}),
        .k = qattn_tensor_contiguous(bk, 0, QATTN_FP8_E4M3FNUZ, 2, (int64_t[]){SKV, MD}),
        .k_scale = qattn_tensor_contiguous(bks, 0, QATTN_F32, 1, (int64_t[]){SKV}),
        .weights = qattn_tensor_contiguous(bw, 0, QATTN_F32, 2, (int64_t[]){S, H}),
        .ks = qattn_tensor_contiguous(bs, 0, QATTN_I32, 1, (int64_t[]){S}),
        .ke = qattn_tensor_contiguous(be, 0, QATTN_I32, 1, (int64_t[]){S}),
        .logits = qattn_tensor_contiguous(bl, 0, QATTN_F32, 2, (int64_t[]){S, SKV}),
        .clean_logits = 1,
    };
    good.logits.strides[0] = STRIDE;
    struct { const char *what; qattn_status want; const char *names; qattn_mqa_logits_args a; } cases[8];
    int n = 0;
    cases[n] = (__typeof__(cases[0])){"logits row stride < S_kv", QATTN_ERR_STRIDE, "logits", good};
    cases[n++].a.logits.strides[0] = SKV - 1;
    cases[n] = (__typeof__(cases[0])){"q bf16", QATTN_ERR_DTYPE, "q:", good};
    cases[n++].a.q.dtype = QATTN_BF16;
    cases[n] = (__typeof__(cases[0])){"k head dim", QATTN_ERR_SHAPE, "k:", good};
    cases[n++].a.k.shape[1] = 32;
    cases[n] = (__typeof__(cases[0])){"weights heads", QATTN_ERR_SHAPE, "weights", good};
    cases[n].a.weights.shape[1] = H + 1;
    cases[n++].a.weights.strides[0] = 0; /* extent stays inside the buffer */
    cases[n] = (__typeof__(cases[0])){"ke length", QATTN_ERR_SHAPE, "ke", good};
    cases[n++].a.ke.shape[0] = S - 1;
    cases[n] = (__typeof__(cases[0])){"logits past buffer", QATTN_ERR_OUT_OF_BOUNDS, "logits", good};
    cases[n++].a.logits.offset = 64;
    cases[n] = (__typeof__(cases[0])){"k_scale missing", QATTN_ERR_NULL_BUFFER, "k_scale", good};
    cases[n++].a.k_scale.buffer = NULL;
    qattn_mqa_logits_plan plan;
    for (int i = 0; i < n; ++i) {
        memset(&plan, 0, sizeof plan);
        qattn_status sp = qattn_mqa_logits_plan_create(ctx, &cases[i].a, NULL, &plan);
        qattn_status sr = qattn_mqa_logits_run(ctx, &plan, &cases[i].a, NULL, 0);
        if (sp != cases[i].want || sr != cases[i].want || !strstr(qattn_last_error(ctx), cases[i].names)) {
            print_error("case '%s': plan %s run %s (%s)\n", cases[i].what, qattn_status_name(sp),
                        qattn_status_name(sr), qattn_last_error(ctx));
            fail();
        }
        assert_true(qt_buf_all(ctx, bl, QT_POISON));
    }
    assert_int_equal(qattn_mqa_logits_plan_create(ctx, &good, NULL, &plan), QATTN_OK);
    qattn_mqa_logits_plan wrong = plan;
    wrong.kv_len = SKV + 1;
    assert_int_equal(qattn_mqa_logits_run(ctx, &wrong, &good, NULL, 0), QATTN_ERR_INVALID_ARGUMENT);
    assert_true(qt_buf_all(ctx, bl, QT_POISON));
    qattn_buffer *ws = plan.workspace_bytes ? qt_buf(ctx, NULL, plan.workspace_bytes) : NULL;
    assert_int_equal(qattn_mqa_logits_run(ctx, &plan, &good, ws, 0), QATTN_OK);
    assert_false(qt_buf_all(ctx, bl, QT_POISON));
    qattn_buffer *all[] = {bq, bk, bks, bw, bs, be, bl, ws};
    for (size_t i = 0; i < 8; ++i) qattn_buffer_free(ctx, all[i]);
    qattn_context_free(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_decode_rules, decode_setup, decode_teardown),
        cmocka_unit_test_setup_teardown(test_decode_baseline_and_plan_rules, decode_setup, decode_teardown),
        cmocka_unit_test_setup_teardown(test_decode_index_check, decode_setup, decode_teardown),
        cmocka_unit_test_setup_teardown(test_decode_forms, decode_setup, decode_teardown),
        cmocka_unit_test_setup_teardown(test_decode_new_axes_accepted, decode_setup, decode_teardown),
        cmocka_unit_test(test_kv_store_rules),
        cmocka_unit_test(test_mqa_rules),
    };
    return cmocka_run_group_tests_name("validate", tests, NULL, NULL);
}
