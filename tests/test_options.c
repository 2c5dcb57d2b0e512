/* Options structs carry their size (qattn.h, "option structs"): every call
 * that takes one accepts NULL and the sizeof of each version, refuses any
 * other size with QATTN_ERR_INVALID_ARGUMENT naming options.size and the
 * struct, writes nothing when it refuses, and reads no byte past the
 * caller's size. The reading itself (core/src/options.h) is also driven
 * with layouts of two versions, since this release has only one. */
#define _DEFAULT_SOURCE /* mmap's MAP_ANONYMOUS, sysconf, setenv */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "qattn/backend.h"
#include "qattn/qattn.h"

#include "fake_devices.h"
#include "options.h" /* core/src: the reading, header-only */
#include "test_ctx.h"

/* ---- memory whose end is followed by a page that faults ---------------- */
/* A struct placed at the end of the first page: reading one byte past it
 * crashes the test. */
typedef struct guarded {
    unsigned char *base;
    size_t page;
} guarded;

static guarded guarded_map(void) {
    guarded g;
    g.page = (size_t)sysconf(_SC_PAGESIZE);
    void *p = mmap(NULL, 2 * g.page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(p != MAP_FAILED);
    g.base = p;
    assert_int_equal(mprotect(g.base + g.page, g.page, PROT_NONE), 0);
    return g;
}

/* `bytes` of `src` copied so they end where the readable page ends. */
static void *guarded_put(guarded *g, const void *src, size_t bytes) {
    unsigned char *at = g->base + g->page - bytes;
    memcpy(at, src, bytes);
    return at;
}

static void guarded_unmap(guarded *g) { munmap(g->base, 2 * g->page); }

static int has(const char *text, const char *part) { return strstr(text, part) != NULL; }

/* ---- the macros ----------------------------------------------------------- */

static void test_init_macros(void **state) {
    (void)state;
    const qattn_context_options c = QATTN_CONTEXT_OPTIONS_INIT;
    assert_int_equal(c.size, sizeof c);
    assert_null(c.device);
    assert_int_equal(c.debug_validation, 0);
    assert_null(c.stream);
    const qattn_decode_options d = QATTN_DECODE_OPTIONS_INIT;
    assert_int_equal(d.size, sizeof d);
    assert_int_equal(d.variant, QATTN_DECODE_AUTO);
    assert_int_equal(d.num_splits, 0);
    const qattn_mqa_logits_options m = QATTN_MQA_LOGITS_OPTIONS_INIT;
    assert_int_equal(m.size, sizeof m);
    assert_int_equal(m.variant, QATTN_MQA_AUTO);
    assert_int_equal(m.rows_per_subgroup, 0);
    assert_int_equal(m.kv_slices, 0);
    /* size is the first member, so it is where every version puts it */
    assert_int_equal(offsetof(qattn_context_options, size), 0);
    assert_int_equal(offsetof(qattn_decode_options, size), 0);
    assert_int_equal(offsetof(qattn_mqa_logits_options, size), 0);
}

/* ---- the reading, with two versions of a made-up struct ------------------ */
/* v2 puts a field in v1's tail padding: a v1 caller's padding must not be
 * read as it. */
typedef struct opts_v1 {
    size_t size;
    int32_t a;
} opts_v1;
typedef struct opts_v2 {
    size_t size;
    int32_t a;
    int32_t b; /* where v1 has padding */
    int64_t c;
} opts_v2;
static const qattn__options_layout LAYOUTS[] = {
    {sizeof(opts_v1), offsetof(opts_v1, a) + sizeof(int32_t)},
    {sizeof(opts_v2), sizeof(opts_v2)},
};

static void test_copy_versions(void **state) {
    (void)state;
    assert_true(sizeof(opts_v1) > offsetof(opts_v1, a) + sizeof(int32_t)); /* v1 has tail padding */
    guarded g = guarded_map();
    opts_v2 out;
    size_t got = 0;

    /* A v1 caller: its field is read, v2's are zero, its padding is not
     * read (poisoned here), and nothing past its size (the guard page). */
    unsigned char v1[sizeof(opts_v1)];
    memset(v1, 0xEE, sizeof v1);
    const size_t s1 = sizeof(opts_v1);
    const int32_t a = 7;
    memcpy(v1, &s1, sizeof s1);
    memcpy(v1 + offsetof(opts_v1, a), &a, sizeof a);
    const void *src = guarded_put(&g, v1, sizeof v1);
    memset(&out, 0x5A, sizeof out);
    assert_int_equal(qattn__options_copy(&out, src, LAYOUTS, 2, &got), QATTN__OPTIONS_OK);
    assert_int_equal(out.size, sizeof(opts_v2));
    assert_int_equal(out.a, 7);
    assert_int_equal(out.b, 0);
    assert_int_equal(out.c, 0);

    /* A v2 caller: every field. */
    opts_v2 in2 = {sizeof(opts_v2), 1, 2, 3};
    src = guarded_put(&g, &in2, sizeof in2);
    assert_int_equal(qattn__options_copy(&out, src, LAYOUTS, 2, &got), QATTN__OPTIONS_OK);
    assert_int_equal(out.a, 1);
    assert_int_equal(out.b, 2);
    assert_int_equal(out.c, 3);

    /* NULL: the defaults, with the newest size. */
    memset(&out, 0x5A, sizeof out);
    assert_int_equal(qattn__options_copy(&out, NULL, LAYOUTS, 2, &got), QATTN__OPTIONS_OK);
    assert_int_equal(out.size, sizeof(opts_v2));
    assert_int_equal(out.a | out.b, 0);
    assert_int_equal(out.c, 0);

    /* Refused sizes, read from a lone size_t at the end of the page: only
     * the size is read, and the output holds the defaults. */
    const struct {
        size_t size;
        qattn__options_size want;
    } bad[] = {
        {0, QATTN__OPTIONS_ZERO},
        {sizeof(size_t), QATTN__OPTIONS_SMALL},
        {sizeof(opts_v1) - 1, QATTN__OPTIONS_SMALL},
        {sizeof(opts_v1) + 4, QATTN__OPTIONS_BETWEEN},
        {sizeof(opts_v2) + 1, QATTN__OPTIONS_LARGE},
        {SIZE_MAX, QATTN__OPTIONS_LARGE},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
        src = guarded_put(&g, &bad[i].size, sizeof(size_t));
        memset(&out, 0x5A, sizeof out);
        assert_int_equal(qattn__options_copy(&out, src, LAYOUTS, 2, &got), bad[i].want);
        assert_int_equal(got, bad[i].size);
        assert_int_equal(out.size, sizeof(opts_v2));
        assert_int_equal(out.a | out.b, 0);
        assert_int_equal(out.c, 0);
    }
    guarded_unmap(&g);
}

/* ---- the public calls ------------------------------------------------------ */

/* A buffer of `bytes` for one tensor. */
static qattn_buffer *buf(qattn_context *ctx, uint64_t bytes) {
    qattn_buffer *b = NULL;
    assert_int_equal(qattn_buffer_alloc(ctx, bytes, &b), QATTN_OK);
    return b;
}

static qattn_tensor contig(qattn_context *ctx, qattn_buffer **keep, int *n, qattn_dtype dt, int rank,
                           const int64_t *shape) {
    uint64_t elems = 1;
    for (int i = 0; i < rank; ++i) elems *= (uint64_t)shape[i];
    keep[*n] = buf(ctx, elems * qattn_dtype_size(dt));
    return qattn_tensor_contiguous(keep[(*n)++], 0, dt, rank, shape);
}

typedef struct decode_case {
    qattn_decode_args a;
    qattn_buffer *b[16];
    int n;
} decode_case;

/* B 1, R 1, Hq 4, Hkv 1, D 64, 64 slots of bf16 in pages of 16. */
static void decode_case_make(qattn_context *ctx, decode_case *c) {
    memset(c, 0, sizeof *c);
    qattn_decode_args *a = &c->a;
    a->q = contig(ctx, c->b, &c->n, QATTN_BF16, 4, (int64_t[]){1, 1, 4, 64});
    a->k_cache = contig(ctx, c->b, &c->n, QATTN_BF16, 3, (int64_t[]){64, 1, 64});
    a->v_cache = contig(ctx, c->b, &c->n, QATTN_BF16, 3, (int64_t[]){64, 1, 64});
    a->kv_indptr = contig(ctx, c->b, &c->n, QATTN_I32, 1, (int64_t[]){2});
    a->kv_indices = contig(ctx, c->b, &c->n, QATTN_I32, 1, (int64_t[]){4});
    a->kv_lens = contig(ctx, c->b, &c->n, QATTN_I32, 1, (int64_t[]){1});
    a->o = contig(ctx, c->b, &c->n, QATTN_BF16, 4, (int64_t[]){1, 1, 4, 64});
    a->page_size = 16;
    a->max_kv_len = 64;
    a->sm_scale = 0.125f;
    a->window_left = -1;
}

static void decode_case_free(qattn_context *ctx, decode_case *c) {
    for (int i = 0; i < c->n; ++i) qattn_buffer_free(ctx, c->b[i]);
}

typedef struct mqa_case {
    qattn_mqa_logits_args a;
    qattn_buffer *b[8];
    int n;
} mqa_case;

/* S 8, H 4, D 64, S_kv 32, fp8. */
static void mqa_case_make(qattn_context *ctx, mqa_case *c) {
    memset(c, 0, sizeof *c);
    qattn_mqa_logits_args *a = &c->a;
    a->q = contig(ctx, c->b, &c->n, QATTN_FP8_E4M3FN, 3, (int64_t[]){8, 4, 64});
    a->k = contig(ctx, c->b, &c->n, QATTN_FP8_E4M3FN, 2, (int64_t[]){32, 64});
    a->k_scale = contig(ctx, c->b, &c->n, QATTN_F32, 1, (int64_t[]){32});
    a->weights = contig(ctx, c->b, &c->n, QATTN_F32, 2, (int64_t[]){8, 4});
    a->ks = contig(ctx, c->b, &c->n, QATTN_I32, 1, (int64_t[]){8});
    a->ke = contig(ctx, c->b, &c->n, QATTN_I32, 1, (int64_t[]){8});
    a->logits = contig(ctx, c->b, &c->n, QATTN_F32, 2, (int64_t[]){8, 32});
}

static void mqa_case_free(qattn_context *ctx, mqa_case *c) {
    for (int i = 0; i < c->n; ++i) qattn_buffer_free(ctx, c->b[i]);
}

/* The sizes every call must refuse, given the struct's sizeof: 0, one that
 * covers only the size member, one byte short, and larger ones. */
typedef struct bad_size {
    size_t size;
    const char *says; /* in the message */
} bad_size;

static int bad_sizes(size_t full, bad_size *out) {
    int n = 0;
    out[n++] = (bad_size){0, "options.size is 0: set it to sizeof("};
    out[n++] = (bad_size){sizeof(size_t), "is below the first"};
    out[n++] = (bad_size){full - 1, "is below the first"};
    out[n++] = (bad_size){full + 8, "is above this library's sizeof("};
    out[n++] = (bad_size){SIZE_MAX, "is above this library's sizeof("};
    return n;
}

static void test_context_options(void **state) {
    (void)state;
    char err[512];
    qattn_context *ctx = (qattn_context *)1;
    /* NULL and the current (first) version are accepted. */
    assert_int_equal(qattn_context_create(qattn_backend_cpu(), NULL, &ctx, err, sizeof err), QATTN_OK);
    qattn_context_free(ctx);
    qattn_context_options o = QATTN_CONTEXT_OPTIONS_INIT;
    guarded g = guarded_map();
    const qattn_context_options *at = guarded_put(&g, &o, sizeof o);
    assert_int_equal(qattn_context_create(qattn_backend_cpu(), at, &ctx, err, sizeof err), QATTN_OK);
    qattn_context_free(ctx);
    /* The fields are read: a device the cpu backend does not have. */
    o.device = "7";
    assert_int_equal(qattn_context_create(qattn_backend_cpu(), &o, &ctx, err, sizeof err),
                     QATTN_ERR_BACKEND_UNAVAILABLE);
    o.device = NULL;

    bad_size bad[8];
    const int n = bad_sizes(sizeof o, bad);
    for (int i = 0; i < n; ++i) {
        o.size = bad[i].size;
        ctx = (qattn_context *)1;
        err[0] = '\0';
        assert_int_equal(qattn_context_create(qattn_backend_cpu(), &o, &ctx, err, sizeof err),
                         QATTN_ERR_INVALID_ARGUMENT);
        assert_null(ctx);
        assert_true(has(err, bad[i].says));
        assert_true(has(err, "qattn_context_options"));
        assert_true(has(err, "QATTN_CONTEXT_OPTIONS_INIT"));
    }
    /* A lone size member that is too small: refused without reading on. */
    const size_t lone = sizeof(size_t);
    at = guarded_put(&g, &lone, sizeof lone);
    assert_int_equal(qattn_context_create(qattn_backend_cpu(), at, &ctx, err, sizeof err),
                     QATTN_ERR_INVALID_ARGUMENT);
    assert_true(has(err, "options.size: "));

    /* The backends' copy (qattn/backend.h): NULL gives the defaults. */
    qattn_context_options full;
    memset(&full, 0x5A, sizeof full);
    assert_int_equal(qattn_context_options_copy(NULL, &full, err, sizeof err), QATTN_OK);
    assert_int_equal(full.size, sizeof full);
    assert_null(full.device);
    assert_int_equal(full.debug_validation, 0);
    assert_null(full.stream);
    o = (qattn_context_options)QATTN_CONTEXT_OPTIONS_INIT;
    o.debug_validation = 1;
    o.device = "x";
    assert_int_equal(qattn_context_options_copy(&o, &full, err, sizeof err), QATTN_OK);
    assert_int_equal(full.debug_validation, 1);
    assert_string_equal(full.device, "x");
    o.size = 0;
    assert_int_equal(qattn_context_options_copy(&o, &full, err, sizeof err), QATTN_ERR_INVALID_ARGUMENT);
    assert_true(has(err, "options.size is 0"));
    assert_int_equal(qattn_context_options_copy(&o, NULL, err, sizeof err), QATTN_ERR_INVALID_ARGUMENT);
    assert_true(has(err, "out"));
    guarded_unmap(&g);
}

static int plan_untouched(const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; ++i)
        if (b[i] != QT_POISON) return 0;
    return 1;
}

static void test_decode_options(void **state) {
    (void)state;
    qattn_context *ctx = qt_cpu_ctx();
    qattn_device_caps caps = caps_lavapipe();
    decode_case c;
    decode_case_make(ctx, &c);
    qattn_decode_plan p;
    char err[512];
    unsetenv("QATTN_DECODE_VARIANT");

    assert_int_equal(qattn_decode_plan_create(ctx, &c.a, NULL, &p), QATTN_OK);
    assert_int_equal(qattn_decode_plan_compute(&caps, &c.a, NULL, &p, err, sizeof err), QATTN_OK);
    /* The current (first) version, ending where readable memory ends, and
     * its fields are read. */
    qattn_decode_options o = QATTN_DECODE_OPTIONS_INIT;
    o.num_splits = 3;
    guarded g = guarded_map();
    const qattn_decode_options *at = guarded_put(&g, &o, sizeof o);
    assert_int_equal(qattn_decode_plan_create(ctx, &c.a, at, &p), QATTN_OK);
    assert_int_equal(p.num_splits, 3);
    assert_int_equal(qattn_decode_plan_compute(&caps, &c.a, at, &p, err, sizeof err), QATTN_OK);
    assert_int_equal(p.num_splits, 3);

    bad_size bad[8];
    const int n = bad_sizes(sizeof o, bad);
    for (int i = 0; i < n; ++i) {
        o.size = bad[i].size;
        memset(&p, QT_POISON, sizeof p);
        assert_int_equal(qattn_decode_plan_create(ctx, &c.a, &o, &p), QATTN_ERR_INVALID_ARGUMENT);
        const char *e = qattn_last_error(ctx);
        assert_true(has(e, bad[i].says));
        assert_true(has(e, "qattn_decode_options"));
        assert_true(has(e, "QATTN_DECODE_OPTIONS_INIT"));
        assert_true(plan_untouched(&p, sizeof p));
        err[0] = '\0';
        assert_int_equal(qattn_decode_plan_compute(&caps, &c.a, &o, &p, err, sizeof err),
                         QATTN_ERR_INVALID_ARGUMENT);
        assert_true(has(err, bad[i].says));
        assert_true(has(err, "qattn_decode_options"));
        assert_true(plan_untouched(&p, sizeof p));
    }
    /* Refused whatever the other fields say, and before reading them. */
    const size_t lone = sizeof(size_t);
    at = guarded_put(&g, &lone, sizeof lone);
    assert_int_equal(qattn_decode_plan_create(ctx, &c.a, at, &p), QATTN_ERR_INVALID_ARGUMENT);
    assert_int_equal(qattn_decode_plan_compute(&caps, &c.a, at, &p, err, sizeof err),
                     QATTN_ERR_INVALID_ARGUMENT);
    guarded_unmap(&g);
    decode_case_free(ctx, &c);
    qattn_context_free(ctx);
}

static void test_mqa_logits_options(void **state) {
    (void)state;
    qattn_context *ctx = qt_cpu_ctx();
    qattn_device_caps caps = caps_lavapipe();
    mqa_case c;
    mqa_case_make(ctx, &c);
    qattn_mqa_logits_plan p;
    char err[512];
    unsetenv("QATTN_MQA_VARIANT");
    unsetenv("QATTN_MQA_MTILES");
    unsetenv("QATTN_MQA_NTILES");

    assert_int_equal(qattn_mqa_logits_plan_create(ctx, &c.a, NULL, &p), QATTN_OK);
    assert_int_equal(qattn_mqa_logits_plan_compute(&caps, &c.a, NULL, &p, err, sizeof err), QATTN_OK);
    qattn_mqa_logits_options o = QATTN_MQA_LOGITS_OPTIONS_INIT;
    o.variant = QATTN_MQA_DIRECT;
    o.kv_slices = 2;
    guarded g = guarded_map();
    const qattn_mqa_logits_options *at = guarded_put(&g, &o, sizeof o);
    assert_int_equal(qattn_mqa_logits_plan_create(ctx, &c.a, at, &p), QATTN_OK);
    assert_int_equal(p.variant, QATTN_MQA_DIRECT);
    assert_int_equal(qattn_mqa_logits_plan_compute(&caps, &c.a, at, &p, err, sizeof err), QATTN_OK);
    assert_int_equal(p.variant, QATTN_MQA_DIRECT);

    bad_size bad[8];
    const int n = bad_sizes(sizeof o, bad);
    for (int i = 0; i < n; ++i) {
        o.size = bad[i].size;
        memset(&p, QT_POISON, sizeof p);
        assert_int_equal(qattn_mqa_logits_plan_create(ctx, &c.a, &o, &p), QATTN_ERR_INVALID_ARGUMENT);
        const char *e = qattn_last_error(ctx);
        assert_true(has(e, bad[i].says));
        assert_true(has(e, "qattn_mqa_logits_options"));
        assert_true(has(e, "QATTN_MQA_LOGITS_OPTIONS_INIT"));
        assert_true(plan_untouched(&p, sizeof p));
        err[0] = '\0';
        assert_int_equal(qattn_mqa_logits_plan_compute(&caps, &c.a, &o, &p, err, sizeof err),
                         QATTN_ERR_INVALID_ARGUMENT);
        assert_true(has(err, bad[i].says));
        assert_true(plan_untouched(&p, sizeof p));
    }
    const size_t lone = sizeof(size_t);
    at = guarded_put(&g, &lone, sizeof lone);
    assert_int_equal(qattn_mqa_logits_plan_create(ctx, &c.a, at, &p), QATTN_ERR_INVALID_ARGUMENT);
    assert_int_equal(qattn_mqa_logits_plan_compute(&caps, &c.a, at, &p, err, sizeof err),
                     QATTN_ERR_INVALID_ARGUMENT);
    guarded_unmap(&g);
    mqa_case_free(ctx, &c);
    qattn_context_free(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_init_macros),      cmocka_unit_test(test_copy_versions),
        cmocka_unit_test(test_context_options),  cmocka_unit_test(test_decode_options),
        cmocka_unit_test(test_mqa_logits_options),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
