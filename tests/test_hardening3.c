/* Regression tests of issue 24 (round three) that the core owns, on the
 * cpu backend:
 * - item 2: every tensor an op writes keeps distinct elements at distinct
 *   addresses (decode o and lse, the KV store's caches and scales, MQA
 *   logits); a batch stride of 0 on decode's o or lse was accepted;
 * - item 3: paged MQA logits with a row stride below max_kv_len (or a
 *   batch stride below N rows) was accepted;
 * - items 5 and 10: the output-over-input rule applies before any backend
 *   runs, for every op: qattn_decode_read wrote its sum over its inputs.
 * Every refused call names the operand and leaves its outputs poisoned. */
#include <stdio.h>

#include "decode_fixture.h"
#include "qattn/experimental.h"

static int setup(void **state) {
    *state = qf_setup("hardening3");
    return 0;
}

static int teardown(void **state) { return qf_teardown(state); }

/* A refusal with `status` whose message names `names` (and, when given,
 * says `rule`). */
static void expect_refused(qattn_status got, qattn_status status, qattn_context *ctx, const char *names,
                           const char *rule, const char *what) {
    const char *msg = qattn_last_error(ctx);
    if (got != status || !strstr(msg, names) || (rule && !strstr(msg, rule))) {
        print_error("%s: status %s (want %s), message \"%s\" should name %s%s%s\n", what, qattn_status_name(got),
                    qattn_status_name(status), msg, names, rule ? " and say " : "", rule ? rule : "");
        fail();
    }
}

static qattn_status decode_call(fix *f, const qattn_decode_args *a) {
    qattn_decode_plan plan;
    qattn_status s = qattn_decode_plan_create(f->ctx, a, NULL, &plan);
    if (s == QATTN_OK) s = qattn_decode_run(f->ctx, &plan, a, f->ws, 0);
    return s;
}

/* Item 2: decode's o and lse. */
static void test_item2_decode_outputs_distinct(void **state) {
    fix *f = *state;
    f->lse = qt_buf(f->ctx, NULL, B * R * HQ * 4);
    qattn_decode_args a = f->a;
    a.lse = qattn_tensor_contiguous(f->lse, 0, QATTN_F32, 3, (int64_t[]){B, R, HQ});
    assert_int_equal(decode_call(f, &a), QATTN_OK); /* the baseline */
    assert_false(qt_buf_all(f->ctx, f->o, QT_POISON));
    qattn_buffer *o2 = qt_buf(f->ctx, NULL, B * R * HQ * D * 2), *l2 = qt_buf(f->ctx, NULL, B * R * HQ * 4);
    a.o.buffer = o2;
    a.lse.buffer = l2;
    const struct {
        const char *what, *names;
        int lse, dim;
        int64_t stride;
    } cases[] = {
        {"o batch stride 0 (the issue's case)", "o: stride[0] is 0", 0, 0, 0},
        {"lse batch stride 0", "lse: stride[0] is 0", 1, 0, 0},
        {"o head stride D / 2: heads overlap", "o: stride[2]", 0, 2, D / 2},
        {"o batch stride one head short", "o: stride[0]", 0, 0, R * HQ * D - D},
        {"lse batch stride 1: requests interleave heads", "lse: stride[", 1, 0, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
        qattn_decode_args bad = a;
        (cases[i].lse ? &bad.lse : &bad.o)->strides[cases[i].dim] = cases[i].stride;
        expect_refused(decode_call(f, &bad), QATTN_ERR_STRIDE, f->ctx, cases[i].names, "output", cases[i].what);
        assert_true(qt_buf_all(f->ctx, o2, QT_POISON));
        assert_true(qt_buf_all(f->ctx, l2, QT_POISON));
    }
    /* padded rows and a transposed-but-distinct layout stay valid */
    qattn_buffer *big = qt_buf(f->ctx, NULL, 4 * B * R * HQ * D * 2);
    qattn_decode_args ok = a;
    ok.o = qattn_tensor_contiguous(big, 0, QATTN_BF16, 4, (int64_t[]){B, R, HQ, D});
    ok.o.strides[0] = 2 * R * HQ * D; /* padded batch rows */
    assert_int_equal(decode_call(f, &ok), QATTN_OK);
    ok.o.strides[0] = D;              /* batch inner, heads outer: distinct */
    ok.o.strides[2] = B * D;
    assert_int_equal(decode_call(f, &ok), QATTN_OK);
    qattn_buffer_free(f->ctx, big);
    qattn_buffer_free(f->ctx, o2);
    qattn_buffer_free(f->ctx, l2);
}

/* Item 2: the KV store's caches and scales (it refused stride 0 only). */
static void test_item2_kv_store_outputs_distinct(void **state) {
    (void)state;
    qattn_context *ctx = qt_cpu_ctx();
    qt_rng rng = qt_rng_for("hardening3_store");
    enum { T = 4, SH = 2, SD = 64, SLOTS = 16 };
    uint16_t kn[T * SH * SD];
    int32_t slots[T] = {1, 5, 9, 14};
    qt_fill_bf16(&rng, kn, T * SH * SD, 1.0f);
    qattn_buffer *bk = qt_buf(ctx, kn, sizeof kn), *bs = qt_buf(ctx, slots, sizeof slots);
    qattn_buffer *kc = qt_buf(ctx, NULL, SLOTS * SH * SD), *vc = qt_buf(ctx, NULL, SLOTS * SH * SD);
    qattn_buffer *ks = qt_buf(ctx, NULL, SLOTS * SH * 4), *vs = qt_buf(ctx, NULL, SLOTS * SH * 4);
    qattn_kv_store_args a;
    memset(&a, 0, sizeof a);
    a.k_new = a.v_new = qattn_tensor_contiguous(bk, 0, QATTN_BF16, 3, (int64_t[]){T, SH, SD});
    a.slot_mapping = qattn_tensor_contiguous(bs, 0, QATTN_I32, 1, (int64_t[]){T});
    a.k_cache = qattn_tensor_contiguous(kc, 0, QATTN_FP8_E4M3FN, 3, (int64_t[]){SLOTS, SH, SD});
    a.v_cache = qattn_tensor_contiguous(vc, 0, QATTN_FP8_E4M3FN, 3, (int64_t[]){SLOTS, SH, SD});
    a.k_scale = qattn_tensor_contiguous(ks, 0, QATTN_F32, 2, (int64_t[]){SLOTS, SH});
    a.v_scale = qattn_tensor_contiguous(vs, 0, QATTN_F32, 2, (int64_t[]){SLOTS, SH});
    qattn_kv_store_args bad = a;
    bad.k_cache.strides[1] = SD / 2; /* the two heads of a slot overlap */
    expect_refused(qattn_kv_store(ctx, &bad), QATTN_ERR_STRIDE, ctx, "k_cache: stride[1]", "output",
                   "k_cache heads overlapping");
    bad = a;
    bad.v_cache.strides[0] = SD; /* slot s's head 1 is slot s + 1's head 0 */
    expect_refused(qattn_kv_store(ctx, &bad), QATTN_ERR_STRIDE, ctx, "v_cache: stride[", "output",
                   "v_cache slots overlapping");
    bad = a;
    bad.v_scale.strides[0] = 1; /* slot s's head 1 is slot s + 1's head 0 */
    expect_refused(qattn_kv_store(ctx, &bad), QATTN_ERR_STRIDE, ctx, "v_scale: stride[", "output",
                   "v_scale slots overlapping");
    bad = a;
    bad.k_cache.strides[0] = 0;
    expect_refused(qattn_kv_store(ctx, &bad), QATTN_ERR_STRIDE, ctx, "k_cache: stride[0] is 0", "output",
                   "k_cache slot stride 0");
    qattn_buffer *all[] = {kc, vc, ks, vs};
    for (size_t i = 0; i < 4; ++i) assert_true(qt_buf_all(ctx, all[i], QT_POISON));
    assert_int_equal(qattn_kv_store(ctx, &a), QATTN_OK);
    qattn_buffer *more[] = {bk, bs, kc, vc, ks, vs};
    for (size_t i = 0; i < 6; ++i) qattn_buffer_free(ctx, more[i]);
    qattn_context_free(ctx);
}

/* Item 2: MQA logits (the op checked the row stride; the rule now covers
 * it with every other output). */
static void test_item2_mqa_logits_distinct(void **state) {
    (void)state;
    enum { S = 3, H = 2, MD = 64, SKV = 8 };
    qattn_context *ctx = qt_cpu_ctx();
    qt_rng rng = qt_rng_for("hardening3_mqa");
    uint8_t q[S * H * MD], k[SKV * MD];
    float ksc[SKV], w[S * H];
    int32_t ks[S] = {0, 0, 0}, ke[S] = {8, 8, 8};
    qt_fill_fp8(&rng, q, sizeof q, QATTN_FP8_E4M3FN, 2.0f);
    qt_fill_fp8(&rng, k, sizeof k, QATTN_FP8_E4M3FN, 2.0f);
    qt_fill_f32_pos(&rng, ksc, SKV, 0.5f, 1.0f);
    qt_fill_f32_pos(&rng, w, S * H, 0.5f, 1.0f);
    qattn_buffer *bq = qt_buf(ctx, q, sizeof q), *bk = qt_buf(ctx, k, sizeof k);
    qattn_buffer *bks = qt_buf(ctx, ksc, sizeof ksc), *bw = qt_buf(ctx, w, sizeof w);
    qattn_buffer *bs = qt_buf(ctx, ks, sizeof ks), *be = qt_buf(ctx, ke, sizeof ke);
    qattn_buffer *bl = qt_buf(ctx, NULL, S * SKV * 4);
    qattn_mqa_logits_args a;
    memset(&a, 0, sizeof a);
    a.q = qattn_tensor_contiguous(bq, 0, QATTN_FP8_E4M3FN, 3, (int64_t[]){S, H, MD});
    a.k = qattn_tensor_contiguous(bk, 0, QATTN_FP8_E4M3FN, 2, (int64_t[]){SKV, MD});
    a.k_scale = qattn_tensor_contiguous(bks, 0, QATTN_F32, 1, (int64_t[]){SKV});
    a.weights = qattn_tensor_contiguous(bw, 0, QATTN_F32, 2, (int64_t[]){S, H});
    a.ks = qattn_tensor_contiguous(bs, 0, QATTN_I32, 1, (int64_t[]){S});
    a.ke = qattn_tensor_contiguous(be, 0, QATTN_I32, 1, (int64_t[]){S});
    a.logits = qattn_tensor_contiguous(bl, 0, QATTN_F32, 2, (int64_t[]){S, SKV});
    qattn_mqa_logits_plan plan;
    qattn_mqa_logits_args bad = a;
    bad.logits.strides[0] = 0;
    expect_refused(qattn_mqa_logits_plan_create(ctx, &bad, NULL, &plan), QATTN_ERR_STRIDE, ctx, "logits",
                   NULL, "mqa logits row stride 0");
    bad.logits.strides[0] = SKV - 1;
    expect_refused(qattn_mqa_logits_plan_create(ctx, &bad, NULL, &plan), QATTN_ERR_STRIDE, ctx, "logits",
                   NULL, "mqa logits row stride S_kv - 1");
    assert_true(qt_buf_all(ctx, bl, QT_POISON));
    qattn_buffer *all[] = {bq, bk, bks, bw, bs, be, bl};
    for (size_t i = 0; i < 7; ++i) qattn_buffer_free(ctx, all[i]);
    qattn_context_free(ctx);
}

/* Item 3: paged MQA logits [B, N, max_kv_len] whose rows or requests
 * overwrite each other. */
static void test_item3_paged_mqa_logits_distinct(void **state) {
    (void)state;
    enum { PB = 2, PN = 2, PH = 2, PD = 64, PP = 4, PM = 8, PSLOTS = 16 };
    qattn_context *ctx = qt_cpu_ctx();
    qt_rng rng = qt_rng_for("hardening3_paged_mqa");
    uint8_t q[PB * PN * PH * PD], k[PSLOTS * PD];
    float ksc[PSLOTS], w[PB * PN * PH];
    const int32_t indptr[PB + 1] = {0, 2, 4}, indices[4] = {3, 0, 1, 2}, lens[PB] = {8, 6};
    qt_fill_fp8(&rng, q, sizeof q, QATTN_FP8_E4M3FN, 2.0f);
    qt_fill_fp8(&rng, k, sizeof k, QATTN_FP8_E4M3FN, 2.0f);
    qt_fill_f32_pos(&rng, ksc, PSLOTS, 0.5f, 1.0f);
    qt_fill_f32_pos(&rng, w, PB * PN * PH, 0.5f, 1.0f);
    qattn_buffer *bq = qt_buf(ctx, q, sizeof q), *bk = qt_buf(ctx, k, sizeof k);
    qattn_buffer *bks = qt_buf(ctx, ksc, sizeof ksc), *bw = qt_buf(ctx, w, sizeof w);
    qattn_buffer *bip = qt_buf(ctx, indptr, sizeof indptr), *bix = qt_buf(ctx, indices, sizeof indices);
    qattn_buffer *bln = qt_buf(ctx, lens, sizeof lens), *bl = qt_buf(ctx, NULL, PB * PN * PM * 4);
    qattn_paged_mqa_logits_args a;
    memset(&a, 0, sizeof a);
    a.q = qattn_tensor_contiguous(bq, 0, QATTN_FP8_E4M3FN, 4, (int64_t[]){PB, PN, PH, PD});
    a.k_cache = qattn_tensor_contiguous(bk, 0, QATTN_FP8_E4M3FN, 2, (int64_t[]){PSLOTS, PD});
    a.k_scale = qattn_tensor_contiguous(bks, 0, QATTN_F32, 1, (int64_t[]){PSLOTS});
    a.weights = qattn_tensor_contiguous(bw, 0, QATTN_F32, 3, (int64_t[]){PB, PN, PH});
    a.kv_indptr = qattn_tensor_contiguous(bip, 0, QATTN_I32, 1, (int64_t[]){PB + 1});
    a.kv_indices = qattn_tensor_contiguous(bix, 0, QATTN_I32, 1, (int64_t[]){4});
    a.kv_lens = qattn_tensor_contiguous(bln, 0, QATTN_I32, 1, (int64_t[]){PB});
    a.logits = qattn_tensor_contiguous(bl, 0, QATTN_F32, 3, (int64_t[]){PB, PN, PM});
    a.page_size = PP;
    a.max_kv_len = PM;
    const struct {
        const char *what, *names;
        int dim;
        int64_t stride;
    } cases[] = {
        {"row stride max_kv_len - 1 (the issue's case)", "logits: stride[1]", 1, PM - 1},
        {"row stride 0", "logits: stride[1] is 0", 1, 0},
        {"batch stride one row (requests overlap)", "logits: stride[", 0, PM},
        {"batch stride 0", "logits: stride[0] is 0", 0, 0},
    };
    qattn_paged_mqa_logits_plan plan;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
        qattn_paged_mqa_logits_args bad = a;
        bad.logits.strides[cases[i].dim] = cases[i].stride;
        expect_refused(qattn_paged_mqa_logits_plan_create(ctx, &bad, NULL, &plan), QATTN_ERR_STRIDE, ctx,
                       cases[i].names, "output", cases[i].what);
        assert_true(qt_buf_all(ctx, bl, QT_POISON));
    }
    assert_int_equal(qattn_paged_mqa_logits_plan_create(ctx, &a, NULL, &plan), QATTN_OK);
    /* a plan made for valid logits, run with overlapping ones: refused too */
    qattn_paged_mqa_logits_args bad = a;
    bad.logits.strides[1] = PM - 1;
    expect_refused(qattn_paged_mqa_logits_run(ctx, &plan, &bad, NULL, 0), QATTN_ERR_STRIDE, ctx,
                   "logits: stride[1]", "output", "run with row stride max_kv_len - 1");
    assert_true(qt_buf_all(ctx, bl, QT_POISON));
    assert_int_equal(qattn_paged_mqa_logits_run(ctx, &plan, &a, NULL, 0), QATTN_OK);
    assert_false(qt_buf_all(ctx, bl, QT_POISON));
    qattn_buffer *all[] = {bq, bk, bks, bw, bip, bix, bln, bl};
    for (size_t i = 0; i < 8; ++i) qattn_buffer_free(ctx, all[i]);
    qattn_context_free(ctx);
}

/* Items 5 and 10: the output-over-input rule, checked by the core before
 * any backend runs, for every op; out = q is refused the same way for
 * decode (which had it) and for the experimental decode_read (which wrote
 * its sum over q). */
static void test_item5_alias_every_op(void **state) {
    fix *f = *state;
    qattn_decode_args a = f->a;
    a.o = a.q; /* out = q: one buffer, the same bytes */
    expect_refused(decode_call(f, &a), QATTN_ERR_INVALID_ARGUMENT, f->ctx, "o: its bytes overlap q's", NULL,
                   "decode out = q");
    uint16_t q0[B * R * HQ * D], q1[B * R * HQ * D];
    assert_int_equal(qattn_buffer_download(f->ctx, f->q, 0, q0, sizeof q0), QATTN_OK);
    qattn_status s = qattn_decode_read(f->ctx, &f->a, f->q, 0);
    expect_refused(s, QATTN_ERR_INVALID_ARGUMENT, f->ctx, "sum: its bytes overlap q's", NULL,
                   "decode_read sum over q");
    assert_int_equal(qattn_buffer_download(f->ctx, f->q, 0, q1, sizeof q1), QATTN_OK);
    assert_memory_equal(q0, q1, sizeof q0);
    /* a host array wrapped twice: two buffers, one memory */
    void *host = NULL;
    assert_int_equal(qattn_buffer_download(f->ctx, f->indices, 0, (host = malloc(64)), 32), QATTN_OK);
    qattn_buffer *w1 = NULL, *w2 = NULL;
    assert_int_equal(qattn_buffer_wrap(f->ctx, host, 64, &w1), QATTN_OK);
    assert_int_equal(qattn_buffer_wrap(f->ctx, host, 64, &w2), QATTN_OK);
    qattn_decode_args b = f->a;
    b.kv_indices = qattn_tensor_contiguous(w1, 0, QATTN_I32, 1, (int64_t[]){NPAGES});
    assert_int_equal(qattn_decode_read(f->ctx, &b, w2, 40), QATTN_OK); /* past kv_indices: fine */
    s = qattn_decode_read(f->ctx, &b, w2, 4);
    expect_refused(s, QATTN_ERR_INVALID_ARGUMENT, f->ctx, "sum: its bytes overlap kv_indices's", NULL,
                   "decode_read sum over a second wrap of kv_indices");
    qattn_buffer_free(f->ctx, w1);
    qattn_buffer_free(f->ctx, w2);
    free(host);
}

/* decode_read reads V rows of K's length: a v_cache of another head dim
 * (legal for decode since Dv may differ from D) is refused, and the sum is
 * not written. Before the rule both its kernels and its reference read past
 * each shorter V row. */
static void test_decode_read_one_head_dim(void **state) {
    fix *f = *state;
    qattn_decode_args a = f->a;
    a.v_cache.shape[a.v_cache.rank - 1] = D / 2;
    a.o.shape[3] = D / 2;
    uint32_t before = 0x5A5A5A5Au, after = 0;
    qattn_buffer *sum = qt_buf(f->ctx, &before, sizeof before);
    expect_refused(qattn_decode_read(f->ctx, &a, sum, 0), QATTN_ERR_SHAPE, f->ctx, "v_cache",
                   "decode_read reads K and V rows of one length", "decode_read with Dv != D");
    assert_int_equal(qattn_buffer_download(f->ctx, sum, 0, &after, sizeof after), QATTN_OK);
    assert_int_equal(after, before);
    qattn_buffer_free(f->ctx, sum);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_item2_decode_outputs_distinct, setup, teardown),
        cmocka_unit_test(test_item2_kv_store_outputs_distinct),
        cmocka_unit_test(test_item2_mqa_logits_distinct),
        cmocka_unit_test(test_item3_paged_mqa_logits_distinct),
        cmocka_unit_test_setup_teardown(test_item5_alias_every_op, setup, teardown),
        cmocka_unit_test_setup_teardown(test_decode_read_one_head_dim, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
