/* Issue 18, item 1: outputs may not share bytes with inputs (docs/ops.md,
 * "Memory"). On the cpu backend:
 *  - decode with o over kv_indices, lse over kv_lens, the workspace over o,
 *    the KV store with a cache over k_new, MQA logits over ks, and two
 *    wraps of one host array: each refused naming both tensors, nothing
 *    written;
 *  - tensors in disjoint ranges of one buffer still run, with the same
 *    result as in separate buffers;
 *  - the reference itself (ref_decode.c compiled into this test), called on
 *    an aliased call that validation would refuse, stays inside its own
 *    arrays (under the sanitizer build an overflow is an ASan report) and
 *    leaves the guard bytes around o alone.
 * Random data is seeded (test_rng.h prints the seed on failure). */
#include <stdio.h>

#include "internal.h" /* struct qattn_buffer, qattn__ref_decode */
#include "decode_fixture.h"

enum { O_BYTES = B * R * HQ * D * 2, LSE_BYTES = B * R * HQ * 4 };

/* The plan of f->a (with lse), made once per test. */
static qattn_decode_plan g_plan;

static int setup(void **state) {
    fix *f = qf_setup("alias");
    f->lse = qt_buf(f->ctx, NULL, LSE_BYTES);
    f->a.lse = qattn_tensor_contiguous(f->lse, 0, QATTN_F32, 3, (int64_t[]){B, R, HQ});
    assert_int_equal(qattn_decode_plan_create(f->ctx, &f->a, NULL, &g_plan), QATTN_OK);
    *state = f;
    return 0;
}

static int teardown(void **state) { return qf_teardown(state); }

/* The call was refused, naming both tensors and the rule. */
static void refused(qattn_context *ctx, qattn_status s, const char *out, const char *in) {
    const char *msg = qattn_last_error(ctx);
    if (s != QATTN_ERR_INVALID_ARGUMENT || !strstr(msg, out) || !strstr(msg, in) ||
        !strstr(msg, "overlap")) {
        print_error("status %s, message \"%s\": want INVALID_ARGUMENT naming %s, %s and the overlap\n",
                    qattn_status_name(s), msg, out, in);
        fail();
    }
}

/* Bytes of b, for comparing before and after a refused call. */
static unsigned char *snapshot(qattn_context *ctx, const qattn_buffer *b) {
    const uint64_t n = qattn_buffer_size(b);
    unsigned char *p = malloc(n);
    assert_int_equal(qattn_buffer_download(ctx, b, 0, p, n), QATTN_OK);
    return p;
}

static void unchanged(qattn_context *ctx, const qattn_buffer *b, const unsigned char *before) {
    unsigned char *now = snapshot(ctx, b);
    assert_memory_equal(now, before, qattn_buffer_size(b));
    free(now);
}

/* The case: o over the bytes of kv_indices (and the first request's
 * kv_indptr entries), lse over kv_lens, each refused. Before the rule the
 * cpu backend wrote past a heap array (ASan) and returned OK. */
static void test_decode_outputs_over_inputs(void **state) {
    fix *f = *state;
    /* one buffer: [kv_indices | kv_lens | rest of o], o and lse from 0 */
    qattn_buffer *shared = qt_buf(f->ctx, NULL, O_BYTES);
    assert_int_equal(qattn_buffer_upload(f->ctx, shared, 0, QF_PAGES, sizeof QF_PAGES), QATTN_OK);
    assert_int_equal(qattn_buffer_upload(f->ctx, shared, sizeof QF_PAGES, QF_LENS, sizeof QF_LENS), QATTN_OK);
    unsigned char *before = snapshot(f->ctx, shared);

    qattn_decode_args a = f->a;
    a.kv_indices = qattn_tensor_contiguous(shared, 0, QATTN_I32, 1, (int64_t[]){NPAGES});
    a.o = qattn_tensor_contiguous(shared, 0, QATTN_BF16, 4, (int64_t[]){B, R, HQ, D});
    qattn_decode_args pa = a;
    pa.o = f->a.o; /* plan for o's layout only; the run gets the aliased call */
    qattn_decode_plan plan;
    assert_int_equal(qattn_decode_plan_create(f->ctx, &pa, NULL, &plan), QATTN_OK);
    refused(f->ctx, qattn_decode_run(f->ctx, &plan, &a, f->ws, 0), "o", "kv_indices");
    unchanged(f->ctx, shared, before);
    assert_true(qt_buf_all(f->ctx, f->lse, QT_POISON));

    /* kv_indices in the last bytes of o: still an overlap */
    a = f->a;
    a.kv_indices = qattn_tensor_contiguous(shared, O_BYTES - 8 * 4 - 0, QATTN_I32, 1, (int64_t[]){8});
    a.o = qattn_tensor_contiguous(shared, 0, QATTN_BF16, 4, (int64_t[]){B, R, HQ, D});
    refused(f->ctx, qattn_decode_run(f->ctx, &plan, &a, f->ws, 0), "o", "kv_indices");
    unchanged(f->ctx, shared, before);

    /* lse (bytes 0..31) over kv_lens (24..31) */
    a = f->a;
    a.kv_lens = qattn_tensor_contiguous(shared, LSE_BYTES - 8, QATTN_I32, 1, (int64_t[]){B});
    a.lse = qattn_tensor_contiguous(shared, 0, QATTN_F32, 3, (int64_t[]){B, R, HQ});
    refused(f->ctx, qattn_decode_run(f->ctx, &g_plan, &a, f->ws, 0), "lse", "kv_lens");
    unchanged(f->ctx, shared, before);
    assert_true(qt_buf_all(f->ctx, f->o, QT_POISON));

    /* o over q, over a cache, over sinks; o over lse (two outputs) */
    const struct {
        qattn_tensor *t;
        const char *name;
    } over[] = {{&a.q, "q"}, {&a.k_cache, "k_cache"}, {&a.v_cache, "v_cache"}};
    for (size_t i = 0; i < sizeof over / sizeof over[0]; ++i) {
        a = f->a;
        a.o = qattn_tensor_contiguous(over[i].t->buffer, 0, QATTN_BF16, 4, (int64_t[]){B, R, HQ, D});
        unsigned char *in = snapshot(f->ctx, over[i].t->buffer);
        qattn_decode_plan p;
        qattn_decode_args ok = a;
        ok.o = f->a.o;
        assert_int_equal(qattn_decode_plan_create(f->ctx, &ok, NULL, &p), QATTN_OK);
        refused(f->ctx, qattn_decode_run(f->ctx, &p, &a, f->ws, 0), "o", over[i].name);
        unchanged(f->ctx, over[i].t->buffer, in);
        free(in);
    }
    a = f->a;
    a.lse = qattn_tensor_contiguous(f->o, 0, QATTN_F32, 3, (int64_t[]){B, R, HQ});
    refused(f->ctx, qattn_decode_run(f->ctx, &g_plan, &a, f->ws, 0), "lse", "o");
    assert_true(qt_buf_all(f->ctx, f->o, QT_POISON));
    free(before);
    qattn_buffer_free(f->ctx, shared);
}

/* The workspace is written by the run: it may not overlap any tensor. */
static void test_workspace_over_tensors(void **state) {
    fix *f = *state;
    const uint64_t wsb = g_plan.workspace_bytes;
    assert_true(wsb > 0); /* decode always merges through the workspace */
    qattn_buffer *big = qt_buf(f->ctx, NULL, wsb + O_BYTES + 64);
    qattn_decode_args a = f->a;
    a.o = qattn_tensor_contiguous(big, (wsb - 16) / 16 * 16, QATTN_BF16, 4, (int64_t[]){B, R, HQ, D});
    qattn_decode_plan plan;
    assert_int_equal(qattn_decode_plan_create(f->ctx, &a, NULL, &plan), QATTN_OK);
    refused(f->ctx, qattn_decode_run(f->ctx, &plan, &a, big, 0), "workspace", "o");
    assert_true(qt_buf_all(f->ctx, big, QT_POISON));
    assert_true(qt_buf_all(f->ctx, f->lse, QT_POISON));
    /* the workspace after o in the same buffer runs */
    a.o = qattn_tensor_contiguous(big, 0, QATTN_BF16, 4, (int64_t[]){B, R, HQ, D});
    assert_int_equal(qattn_decode_plan_create(f->ctx, &a, NULL, &plan), QATTN_OK);
    assert_int_equal(qattn_decode_run(f->ctx, &plan, &a, big, (O_BYTES + 15) / 16 * 16), QATTN_OK);
    qattn_buffer_free(f->ctx, big);
}

/* Disjoint ranges of one buffer are not an overlap: o and lse behind the
 * page table in one buffer give the same answer as separate buffers. */
static void test_disjoint_ranges_run(void **state) {
    fix *f = *state;
    assert_int_equal(qattn_decode_run(f->ctx, &g_plan, &f->a, f->ws, 0), QATTN_OK);
    unsigned char *want_o = snapshot(f->ctx, f->o), *want_lse = snapshot(f->ctx, f->lse);
    const uint64_t o_at = 64, lse_at = 64 + O_BYTES;
    qattn_buffer *one = qt_buf(f->ctx, NULL, lse_at + LSE_BYTES);
    assert_int_equal(qattn_buffer_upload(f->ctx, one, 0, QF_INDPTR, sizeof QF_INDPTR), QATTN_OK);
    assert_int_equal(qattn_buffer_upload(f->ctx, one, 16, QF_PAGES, sizeof QF_PAGES), QATTN_OK);
    assert_int_equal(qattn_buffer_upload(f->ctx, one, 48, QF_LENS, sizeof QF_LENS), QATTN_OK);
    qattn_decode_args a = f->a;
    a.kv_indptr = qattn_tensor_contiguous(one, 0, QATTN_I32, 1, (int64_t[]){B + 1});
    a.kv_indices = qattn_tensor_contiguous(one, 16, QATTN_I32, 1, (int64_t[]){NPAGES});
    a.kv_lens = qattn_tensor_contiguous(one, 48, QATTN_I32, 1, (int64_t[]){B});
    a.o = qattn_tensor_contiguous(one, o_at, QATTN_BF16, 4, (int64_t[]){B, R, HQ, D});
    a.lse = qattn_tensor_contiguous(one, lse_at, QATTN_F32, 3, (int64_t[]){B, R, HQ});
    qattn_decode_plan plan;
    assert_int_equal(qattn_decode_plan_create(f->ctx, &a, NULL, &plan), QATTN_OK);
    assert_int_equal(qattn_decode_run(f->ctx, &plan, &a, f->ws, 0), QATTN_OK);
    unsigned char *got = snapshot(f->ctx, one);
    assert_memory_equal(got + o_at, want_o, O_BYTES);
    assert_memory_equal(got + lse_at, want_lse, LSE_BYTES);
    free(got);
    free(want_o);
    free(want_lse);
    qattn_buffer_free(f->ctx, one);
}

/* Two wraps of one host array are the same memory on the cpu backend. */
static void test_wraps_of_one_array(void **state) {
    fix *f = *state;
    static unsigned char host[O_BYTES + 64];
    memset(host, QT_POISON, sizeof host);
    memcpy(host + 32, QF_PAGES, sizeof QF_PAGES);
    qattn_buffer *wo = NULL, *wi = NULL;
    assert_int_equal(qattn_buffer_wrap(f->ctx, host, O_BYTES, &wo), QATTN_OK);
    assert_int_equal(qattn_buffer_wrap(f->ctx, host + 32, sizeof QF_PAGES, &wi), QATTN_OK);
    qattn_decode_args a = f->a;
    a.o = qattn_tensor_contiguous(wo, 0, QATTN_BF16, 4, (int64_t[]){B, R, HQ, D});
    a.kv_indices = qattn_tensor_contiguous(wi, 0, QATTN_I32, 1, (int64_t[]){NPAGES});
    refused(f->ctx, qattn_decode_run(f->ctx, &g_plan, &a, f->ws, 0), "o", "kv_indices");
    assert_memory_equal(host + 32, QF_PAGES, sizeof QF_PAGES);
    qattn_buffer_free(f->ctx, wo);
    qattn_buffer_free(f->ctx, wi);
}

/* The KV store: a cache or scale over a new token or the slot mapping. */
static void test_kv_store_outputs_over_inputs(void **state) {
    (void)state;
    enum { T = 2, SD = 64, SH = 1, SS = 8 };
    qattn_context *ctx = qt_cpu_ctx();
    qt_rng rng = qt_rng_for("alias_store");
    uint16_t kn[T * SH * SD];
    qt_fill_bf16(&rng, kn, T * SH * SD, 1.0f);
    const int32_t slots[T] = {3, 5};
    qattn_buffer *bk = qt_buf(ctx, kn, sizeof kn), *bv = qt_buf(ctx, kn, sizeof kn);
    qattn_buffer *bs = qt_buf(ctx, slots, sizeof slots);
    qattn_buffer *kc = qt_buf(ctx, NULL, SS * SH * SD), *vc = qt_buf(ctx, NULL, SS * SH * SD);
    qattn_buffer *ksc = qt_buf(ctx, NULL, SS * SH * 4), *vsc = qt_buf(ctx, NULL, SS * SH * 4);
    qattn_kv_store_args a;
    memset(&a, 0, sizeof a);
    a.k_new = qattn_tensor_contiguous(bk, 0, QATTN_BF16, 3, (int64_t[]){T, SH, SD});
    a.v_new = qattn_tensor_contiguous(bv, 0, QATTN_BF16, 3, (int64_t[]){T, SH, SD});
    a.slot_mapping = qattn_tensor_contiguous(bs, 0, QATTN_I32, 1, (int64_t[]){T});
    a.k_cache = qattn_tensor_contiguous(kc, 0, QATTN_FP8_E4M3FN, 3, (int64_t[]){SS, SH, SD});
    a.v_cache = qattn_tensor_contiguous(vc, 0, QATTN_FP8_E4M3FN, 3, (int64_t[]){SS, SH, SD});
    a.k_scale = qattn_tensor_contiguous(ksc, 0, QATTN_F32, 2, (int64_t[]){SS, SH});
    a.v_scale = qattn_tensor_contiguous(vsc, 0, QATTN_F32, 2, (int64_t[]){SS, SH});
    qattn_kv_store_args bad = a;
    bad.k_cache = qattn_tensor_contiguous(bk, 0, QATTN_FP8_E4M3FN, 3, (int64_t[]){T * 2, SH, SD});
    bad.v_cache = qattn_tensor_contiguous(vc, 0, QATTN_FP8_E4M3FN, 3, (int64_t[]){T * 2, SH, SD});
    bad.k_scale = qattn_tensor_contiguous(ksc, 0, QATTN_F32, 2, (int64_t[]){T * 2, SH});
    bad.v_scale = qattn_tensor_contiguous(vsc, 0, QATTN_F32, 2, (int64_t[]){T * 2, SH});
    unsigned char *before = snapshot(ctx, bk);
    refused(ctx, qattn_kv_store(ctx, &bad), "k_cache", "k_new");
    unchanged(ctx, bk, before);
    free(before);
    bad = a;
    qattn_buffer *wide = qt_buf(ctx, NULL, SS * SH * 4);
    assert_int_equal(qattn_buffer_upload(ctx, wide, 0, slots, sizeof slots), QATTN_OK);
    bad.slot_mapping = qattn_tensor_contiguous(wide, 0, QATTN_I32, 1, (int64_t[]){T});
    bad.v_scale = qattn_tensor_contiguous(wide, 0, QATTN_F32, 2, (int64_t[]){SS, SH});
    before = snapshot(ctx, wide);
    refused(ctx, qattn_kv_store(ctx, &bad), "v_scale", "slot_mapping");
    unchanged(ctx, wide, before);
    free(before);
    /* K and V interleaved in one allocation (spec 2) are two outputs, not
     * an output over an input: still accepted. */
    qattn_buffer *kv = qt_buf(ctx, NULL, SS * SH * SD * 2);
    qattn_kv_store_args inter = a;
    inter.k_cache = qattn_tensor_contiguous(kv, 0, QATTN_FP8_E4M3FN, 3, (int64_t[]){SS, SH, SD});
    inter.v_cache = inter.k_cache;
    inter.k_cache.strides[0] = inter.v_cache.strides[0] = 2 * SH * SD;
    inter.v_cache.offset = SH * SD;
    assert_int_equal(qattn_kv_store(ctx, &inter), QATTN_OK);
    qattn_buffer *all[] = {bk, bv, bs, kc, vc, ksc, vsc, wide, kv};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) qattn_buffer_free(ctx, all[i]);
    qattn_context_free(ctx);
}

/* A buffer of n seeded random fp8 codes, or f32 values in [0.5, 1). */
static qattn_buffer *rand_buf(qattn_context *ctx, qt_rng *rng, qattn_dtype dt, size_t n) {
    const size_t bytes = n * qattn_dtype_size(dt);
    void *host = malloc(bytes);
    if (dt == QATTN_F32) qt_fill_f32_pos(rng, host, n, 0.5f, 1.0f);
    else qt_fill_fp8(rng, host, n, dt, 2.0f);
    qattn_buffer *b = qt_buf(ctx, host, bytes);
    free(host);
    return b;
}

/* MQA logits: the output over ks. */
static void test_mqa_logits_over_input(void **state) {
    (void)state;
    enum { S = 4, H = 4, MD = 64, SKV = 8 };
    qattn_context *ctx = qt_cpu_ctx();
    qt_rng rng = qt_rng_for("alias_mqa");
    const int32_t ks[S] = {0, 1, 2, 3}, ke[S] = {8, 8, 8, 8};
    qattn_buffer *bq = rand_buf(ctx, &rng, QATTN_FP8_E4M3FN, S * H * MD);
    qattn_buffer *bk = rand_buf(ctx, &rng, QATTN_FP8_E4M3FN, SKV * MD);
    qattn_buffer *bks = rand_buf(ctx, &rng, QATTN_F32, SKV), *bw = rand_buf(ctx, &rng, QATTN_F32, S * H);
    qattn_buffer *be = qt_buf(ctx, ke, sizeof ke);
    qattn_buffer *bl = qt_buf(ctx, NULL, S * SKV * 4);
    assert_int_equal(qattn_buffer_upload(ctx, bl, 4 * SKV * 4 - sizeof ks, ks, sizeof ks), QATTN_OK);
    qattn_mqa_logits_args a;
    memset(&a, 0, sizeof a);
    a.q = qattn_tensor_contiguous(bq, 0, QATTN_FP8_E4M3FN, 3, (int64_t[]){S, H, MD});
    a.k = qattn_tensor_contiguous(bk, 0, QATTN_FP8_E4M3FN, 2, (int64_t[]){SKV, MD});
    a.k_scale = qattn_tensor_contiguous(bks, 0, QATTN_F32, 1, (int64_t[]){SKV});
    a.weights = qattn_tensor_contiguous(bw, 0, QATTN_F32, 2, (int64_t[]){S, H});
    a.ks = qattn_tensor_contiguous(bl, 4 * SKV * 4 - sizeof ks, QATTN_I32, 1, (int64_t[]){S});
    a.ke = qattn_tensor_contiguous(be, 0, QATTN_I32, 1, (int64_t[]){S});
    a.logits = qattn_tensor_contiguous(bl, 0, QATTN_F32, 2, (int64_t[]){S, SKV});
    a.clean_logits = 1;
    qattn_mqa_logits_plan plan;
    assert_int_equal(qattn_mqa_logits_plan_create(ctx, &a, NULL, &plan), QATTN_OK);
    unsigned char *before = snapshot(ctx, bl);
    qattn_buffer *ws = plan.workspace_bytes ? qt_buf(ctx, NULL, plan.workspace_bytes) : NULL;
    refused(ctx, qattn_mqa_logits_run(ctx, &plan, &a, ws, 0), "logits", "ks");
    unchanged(ctx, bl, before);
    free(before);
    qattn_buffer *all[] = {bq, bk, bks, bw, be, bl, ws};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) qattn_buffer_free(ctx, all[i]);
    qattn_context_free(ctx);
}

/* The reference on its own, given what validation refuses: o over the page
 * table. The first request's o rows rewrite the second request's page
 * entries (v is 0 there, so o is 0, and entry 0 is a page inside the cache),
 * so a second look at the table finds 32 visible keys where the first found
 * none; the reference must not size anything from the first look and write
 * with the second. Guard bytes around o must survive. */
static void test_reference_stays_inside(void **state) {
    (void)state;
    enum { RB = 2, RHQ = 1, RD = 64, RNS = 64, GUARD = 64 };
    qt_rng rng = qt_rng_for("alias_ref");
    static uint16_t q[RB * RHQ * RD], k[RNS * RD], v[RNS * RD];
    qt_fill_bf16(&rng, q, RB * RHQ * RD, 1.0f);
    qt_fill_bf16(&rng, k, RNS * RD, 1.0f);
    memset(v, 0, sizeof v); /* o = 0 makes the rewritten page entries 0 */
    static unsigned char obuf[GUARD + RB * RHQ * RD * 2 + GUARD];
    memset(obuf, QT_POISON, sizeof obuf);
    int32_t *table = (int32_t *)(obuf + GUARD);
    table[0] = 0;                                /* request 0: one key, page 0 */
    for (int e = 1; e <= 32; ++e) table[e] = -1; /* request 1: hidden pages */
    const int32_t indptr[RB + 1] = {0, 1, 33}, lens[RB] = {1, 32};
    qattn_buffer bq = {NULL, q, sizeof q, 1}, bk = {NULL, k, sizeof k, 1}, bv = {NULL, v, sizeof v, 1};
    qattn_buffer bo = {NULL, obuf + GUARD, RB * RHQ * RD * 2, 1};
    qattn_buffer bi = {NULL, (void *)indptr, sizeof indptr, 1}, bl = {NULL, (void *)lens, sizeof lens, 1};
    qattn_decode_args a;
    memset(&a, 0, sizeof a);
    a.q = qattn_tensor_contiguous(&bq, 0, QATTN_BF16, 4, (int64_t[]){RB, 1, RHQ, RD});
    a.k_cache = qattn_tensor_contiguous(&bk, 0, QATTN_BF16, 3, (int64_t[]){RNS, 1, RD});
    a.v_cache = qattn_tensor_contiguous(&bv, 0, QATTN_BF16, 3, (int64_t[]){RNS, 1, RD});
    a.kv_indptr = qattn_tensor_contiguous(&bi, 0, QATTN_I32, 1, (int64_t[]){RB + 1});
    a.kv_indices = qattn_tensor_contiguous(&bo, 0, QATTN_I32, 1, (int64_t[]){33});
    a.kv_lens = qattn_tensor_contiguous(&bl, 0, QATTN_I32, 1, (int64_t[]){RB});
    a.o = qattn_tensor_contiguous(&bo, 0, QATTN_BF16, 4, (int64_t[]){RB, 1, RHQ, RD});
    a.page_size = 1;
    a.max_kv_len = 32;
    a.sm_scale = 0.125f;
    a.window_left = -1;
    assert_int_equal(qattn__ref_decode(&a), QATTN_OK);
    for (int i = 0; i < GUARD; ++i) {
        assert_int_equal(obuf[i], QT_POISON);
        assert_int_equal(obuf[sizeof obuf - 1 - i], QT_POISON);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_decode_outputs_over_inputs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_workspace_over_tensors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_disjoint_ranges_run, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wraps_of_one_array, setup, teardown),
        cmocka_unit_test(test_kv_store_outputs_over_inputs),
        cmocka_unit_test(test_mqa_logits_over_input),
        cmocka_unit_test(test_reference_stays_inside),
    };
    return cmocka_run_group_tests_name("alias", tests, NULL, NULL);
}
