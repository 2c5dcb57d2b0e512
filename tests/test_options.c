/* Options structs carry their size (qattn.h, "option structs"): every call
 * that takes one accepts NULL and the sizeof of each version, refuses any
 * other size with QATTN_ERR_INVALID_ARGUMENT naming options.size and the
 * struct, writes nothing when it refuses, and reads no byte past the
 * caller's size. The reader itself (qattn_struct_read/_write of
 * qattn/backend.h) is also driven with a table of two versions, since this
 * release has only one. */
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
#include "qt_sizes.h"
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

/* Whether all n bytes at p are `byte`. */
static int bytes_are(const void *p, size_t n, unsigned char byte) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; ++i)
        if (b[i] != byte) return 0;
    return 1;
}

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
    const qattn_paged_mqa_logits_options pm = QATTN_PAGED_MQA_LOGITS_OPTIONS_INIT;
    assert_int_equal(pm.size, sizeof pm);
    assert_int_equal(pm.variant, QATTN_PAGED_MQA_AUTO);
    assert_int_equal(pm.keys_per_split, 0);
    /* size is the first member, so it is where every version puts it */
    assert_int_equal(offsetof(qattn_context_options, size), 0);
    assert_int_equal(offsetof(qattn_decode_options, size), 0);
    assert_int_equal(offsetof(qattn_mqa_logits_options, size), 0);
    assert_int_equal(offsetof(qattn_paged_mqa_logits_options, size), 0);
}

/* ---- the reader, with two versions of a made-up struct ------------------- */
/* v2 puts a field in v1's tail padding: a v1 caller's padding must be
 * neither read as it nor written. */
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
static const qattn_struct_version VERSIONS[] = {
    {sizeof(opts_v1), QATTN_STRUCT_END(opts_v1, a)},
    {sizeof(opts_v2), QATTN_STRUCT_END(opts_v2, c)},
};

/* Sizes the reader refuses, with the words of their message. */
static const struct {
    size_t size;
    const char *says;
} REFUSED[] = {
    {0, "opts->size is 0: set it to sizeof(opts_v2)"},
    {sizeof(size_t), "opts->size: 8 is below the first opts_v2's 16 bytes: set it to sizeof(opts_v2)"},
    {sizeof(opts_v1) - 1, "opts->size: 15 is below the first opts_v2's 16 bytes"},
    {sizeof(opts_v1) + 4, "opts->size: 20 is the sizeof of no version of opts_v2: set it to sizeof(opts_v2)"},
    {sizeof(opts_v2) + 1, "opts->size: 25 is above this library's sizeof(opts_v2) = 24"},
    {SIZE_MAX, "is above this library's sizeof(opts_v2) = 24 (a header newer than the library?)"},
};
_Static_assert(sizeof(size_t) == 8 && sizeof(opts_v1) == 16 && sizeof(opts_v2) == 24,
               "REFUSED's messages name the sizes of a 64-bit build");
#define N_REFUSED ((int)(sizeof REFUSED / sizeof REFUSED[0]))

static qattn_status read_opts(opts_v2 *dst, const void *src, const char *init, char *err) {
    return qattn_struct_read(dst, src, VERSIONS, 2, "opts->size", "opts_v2", init, err, 256);
}

static qattn_status write_opts(void *dst, const opts_v2 *src, const char *init, char *err) {
    return qattn_struct_write(dst, src, VERSIONS, 2, "opts->size", "opts_v2", init, err, 256);
}

static void test_struct_read(void **state) {
    (void)state;
    guarded g = guarded_map();
    opts_v2 out;
    char err[256];

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
    assert_int_equal(read_opts(&out, src, "OPTS_INIT", err), QATTN_OK);
    assert_int_equal(out.size, sizeof(opts_v2));
    assert_int_equal(out.a, 7);
    assert_int_equal(out.b, 0);
    assert_int_equal(out.c, 0);

    /* A v2 caller: every field. */
    opts_v2 in2 = {sizeof(opts_v2), 1, 2, 3};
    src = guarded_put(&g, &in2, sizeof in2);
    assert_int_equal(read_opts(&out, src, "OPTS_INIT", err), QATTN_OK);
    assert_int_equal(out.a, 1);
    assert_int_equal(out.b, 2);
    assert_int_equal(out.c, 3);

    /* NULL: the defaults, with the newest size. */
    memset(&out, 0x5A, sizeof out);
    assert_int_equal(read_opts(&out, NULL, "OPTS_INIT", err), QATTN_OK);
    assert_int_equal(out.size, sizeof(opts_v2));
    assert_int_equal(out.a | out.b, 0);
    assert_int_equal(out.c, 0);

    /* Refused sizes, read from a lone size_t at the end of the page: only
     * the size is read, the output holds the defaults, and the message
     * names the size, the struct and what sets it (the INIT macro when
     * there is one, sizeof alone otherwise). */
    for (int i = 0; i < N_REFUSED; ++i) {
        src = guarded_put(&g, &REFUSED[i].size, sizeof(size_t));
        for (int with_init = 0; with_init < 2; ++with_init) {
            memset(&out, 0x5A, sizeof out);
            err[0] = '\0';
            assert_int_equal(read_opts(&out, src, with_init ? "OPTS_INIT" : NULL, err),
                             QATTN_ERR_INVALID_ARGUMENT);
            assert_true(has(err, REFUSED[i].says));
            assert_int_equal(has(err, "(OPTS_INIT does)"), with_init);
            assert_int_equal(out.size, sizeof(opts_v2));
            assert_int_equal(out.a | out.b, 0);
            assert_int_equal(out.c, 0);
        }
    }
    guarded_unmap(&g);
}

static void test_struct_write(void **state) {
    (void)state;
    guarded g = guarded_map();
    const opts_v2 full = {sizeof(opts_v2), 1, 2, 3};
    char err[256];

    /* A v1 caller's struct ends where writable memory ends: its field is
     * written, its size and padding (where v2 has b) are not. */
    unsigned char v1[sizeof(opts_v1)];
    memset(v1, 0xEE, sizeof v1);
    const size_t s1 = sizeof(opts_v1);
    memcpy(v1, &s1, sizeof s1);
    unsigned char *dst = guarded_put(&g, v1, sizeof v1);
    assert_int_equal(write_opts(dst, &full, NULL, err), QATTN_OK);
    int32_t a = 0;
    memcpy(&a, dst + offsetof(opts_v1, a), sizeof a);
    assert_int_equal(a, 1);
    assert_memory_equal(dst, &s1, sizeof s1);
    for (size_t i = QATTN_STRUCT_END(opts_v1, a); i < sizeof(opts_v1); ++i) assert_int_equal(dst[i], 0xEE);

    /* A v2 caller: every field, its size kept. */
    opts_v2 o2;
    memset(&o2, 0, sizeof o2);
    o2.size = sizeof o2;
    opts_v2 *at = guarded_put(&g, &o2, sizeof o2);
    assert_int_equal(write_opts(at, &full, NULL, err), QATTN_OK);
    assert_int_equal(at->size, sizeof(opts_v2));
    assert_int_equal(at->a, 1);
    assert_int_equal(at->b, 2);
    assert_int_equal(at->c, 3);

    /* Refused sizes, in a lone size_t at the end of the page: the same
     * messages as the read, and nothing written (a write past the size
     * faults; the size itself is compared). */
    for (int i = 0; i < N_REFUSED; ++i) {
        size_t *lone = guarded_put(&g, &REFUSED[i].size, sizeof(size_t));
        err[0] = '\0';
        assert_int_equal(write_opts(lone, &full, "OPTS_INIT", err), QATTN_ERR_INVALID_ARGUMENT);
        assert_true(has(err, REFUSED[i].says));
        assert_true(has(err, "(OPTS_INIT does)"));
        assert_true(*lone == REFUSED[i].size);
    }
    /* No source: refused, nothing written. */
    o2.a = 9;
    at = guarded_put(&g, &o2, sizeof o2);
    assert_int_equal(write_opts(at, NULL, NULL, err), QATTN_ERR_INVALID_ARGUMENT);
    assert_true(has(err, "src: NULL"));
    assert_int_equal(at->a, 9);
    guarded_unmap(&g);
}

/* The reader's own arguments: each broken one is named, and nothing is
 * written to dst. */
static void test_struct_arguments(void **state) {
    (void)state;
    const opts_v2 in = {sizeof(opts_v2), 1, 2, 3};
    opts_v2 out;
    char err[256];
    const qattn_struct_version unordered[] = {VERSIONS[1], VERSIONS[0]};
    const qattn_struct_version past_size[] = {{sizeof(opts_v1), sizeof(opts_v1) + 1}};
    const qattn_struct_version no_size[] = {{sizeof(opts_v1), sizeof(size_t) - 1}};
    const struct {
        void *dst;
        const qattn_struct_version *v;
        int n;
        const char *size_arg, *type, *says;
    } bad[] = {
        {NULL, VERSIONS, 2, "o.size", "opts_v2", "dst: NULL"},
        {&out, NULL, 2, "o.size", "opts_v2", "versions: NULL"},
        {&out, VERSIONS, 0, "o.size", "opts_v2", "n_versions: 0"},
        {&out, VERSIONS, 2, NULL, "opts_v2", "size_arg: NULL"},
        {&out, VERSIONS, 2, "o.size", NULL, "type: NULL"},
        {&out, unordered, 2, "o.size", "opts_v2", "versions[1].size: 16 does not grow past versions[0]'s 24"},
        {&out, past_size, 1, "o.size", "opts_v2", "versions[0].bytes: 17 is outside"},
        {&out, no_size, 1, "o.size", "opts_v2", "versions[0].bytes: 7 is outside"},
    };
    qattn_status (*const call[2])(void *, const void *, const qattn_struct_version *, int, const char *,
                                  const char *, const char *, char *, size_t) = {qattn_struct_read,
                                                                                 qattn_struct_write};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i)
        for (int c = 0; c < 2; ++c) {
            memset(&out, 0x5A, sizeof out);
            err[0] = '\0';
            assert_int_equal(call[c](bad[i].dst, &in, bad[i].v, bad[i].n, bad[i].size_arg, bad[i].type, NULL, err,
                                     sizeof err),
                             QATTN_ERR_INVALID_ARGUMENT);
            assert_true(has(err, bad[i].says));
            assert_true(bytes_are(&out, sizeof out, 0x5A));
        }
    /* err may be NULL. */
    assert_int_equal(qattn_struct_read(NULL, &in, VERSIONS, 2, "o.size", "opts_v2", NULL, NULL, 0),
                     QATTN_ERR_INVALID_ARGUMENT);
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

typedef struct paged_case {
    qattn_paged_mqa_logits_args a;
    qattn_buffer *b[8];
    int n;
} paged_case;

/* B 1, N 1, H 4, D 64, 512 fp8 slots in pages of 16, max_kv_len 512. */
static void paged_case_make(qattn_context *ctx, paged_case *c) {
    memset(c, 0, sizeof *c);
    qattn_paged_mqa_logits_args *a = &c->a;
    a->q = contig(ctx, c->b, &c->n, QATTN_FP8_E4M3FN, 4, (int64_t[]){1, 1, 4, 64});
    a->k_cache = contig(ctx, c->b, &c->n, QATTN_FP8_E4M3FN, 2, (int64_t[]){512, 64});
    a->k_scale = contig(ctx, c->b, &c->n, QATTN_F32, 1, (int64_t[]){512});
    a->weights = contig(ctx, c->b, &c->n, QATTN_F32, 3, (int64_t[]){1, 1, 4});
    a->kv_indptr = contig(ctx, c->b, &c->n, QATTN_I32, 1, (int64_t[]){2});
    a->kv_indices = contig(ctx, c->b, &c->n, QATTN_I32, 1, (int64_t[]){32});
    a->kv_lens = contig(ctx, c->b, &c->n, QATTN_I32, 1, (int64_t[]){1});
    a->logits = contig(ctx, c->b, &c->n, QATTN_F32, 3, (int64_t[]){1, 1, 512});
    a->page_size = 16;
    a->max_kv_len = 512;
    a->clean_logits = 1;
}

static void paged_case_free(qattn_context *ctx, paged_case *c) {
    for (int i = 0; i < c->n; ++i) qattn_buffer_free(ctx, c->b[i]);
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

    qt_refused_size bad[QT_REFUSED_SIZES];
    const int n = qt_refused_sizes(sizeof o, bad);
    for (int i = 0; i < n; ++i) {
        o.size = bad[i].size;
        ctx = (qattn_context *)1;
        err[0] = '\0';
        assert_int_equal(qattn_context_create(qattn_backend_cpu(), &o, &ctx, err, sizeof err),
                         QATTN_ERR_INVALID_ARGUMENT);
        assert_null(ctx);
        assert_true(has(err, bad[i].says));
        assert_true(has(err, "options.size"));
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

static int plan_untouched(const void *p, size_t n) { return bytes_are(p, n, QT_POISON); }

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

    qt_refused_size bad[QT_REFUSED_SIZES];
    const int n = qt_refused_sizes(sizeof o, bad);
    for (int i = 0; i < n; ++i) {
        o.size = bad[i].size;
        memset(&p, QT_POISON, sizeof p);
        assert_int_equal(qattn_decode_plan_create(ctx, &c.a, &o, &p), QATTN_ERR_INVALID_ARGUMENT);
        const char *e = qattn_last_error(ctx);
        assert_true(has(e, bad[i].says));
        assert_true(has(e, "options.size"));
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

    qt_refused_size bad[QT_REFUSED_SIZES];
    const int n = qt_refused_sizes(sizeof o, bad);
    for (int i = 0; i < n; ++i) {
        o.size = bad[i].size;
        memset(&p, QT_POISON, sizeof p);
        assert_int_equal(qattn_mqa_logits_plan_create(ctx, &c.a, &o, &p), QATTN_ERR_INVALID_ARGUMENT);
        const char *e = qattn_last_error(ctx);
        assert_true(has(e, bad[i].says));
        assert_true(has(e, "options.size"));
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

static void test_paged_mqa_logits_options(void **state) {
    (void)state;
    qattn_context *ctx = qt_cpu_ctx();
    qattn_device_caps caps = caps_lavapipe();
    paged_case c;
    paged_case_make(ctx, &c);
    qattn_paged_mqa_logits_plan p, auto_dev;
    char err[512];

    assert_int_equal(qattn_paged_mqa_logits_plan_create(ctx, &c.a, NULL, &auto_dev), QATTN_OK);
    assert_int_equal(qattn_paged_mqa_logits_plan_compute(&caps, &c.a, NULL, &p, err, sizeof err), QATTN_OK);
    /* The current (first) version, ending where readable memory ends, and
     * its fields are read: a split length of one key tile (the public rule:
     * 0 or a multiple of the tile), and the variant the planner chose,
     * pinned. */
    qattn_paged_mqa_logits_options o = QATTN_PAGED_MQA_LOGITS_OPTIONS_INIT;
    o.keys_per_split = auto_dev.kv_tile;
    o.variant = auto_dev.variant;
    guarded g = guarded_map();
    const qattn_paged_mqa_logits_options *at = guarded_put(&g, &o, sizeof o);
    assert_int_equal(qattn_paged_mqa_logits_plan_create(ctx, &c.a, at, &p), QATTN_OK);
    assert_int_equal(p.keys_per_split, auto_dev.kv_tile);
    assert_int_equal(p.num_splits, (512 + auto_dev.kv_tile - 1) / auto_dev.kv_tile);
    assert_int_equal(p.variant, auto_dev.variant);
    qattn_paged_mqa_logits_plan lp;
    assert_int_equal(qattn_paged_mqa_logits_plan_compute(&caps, &c.a, NULL, &lp, err, sizeof err), QATTN_OK);
    o.keys_per_split = lp.kv_tile;
    o.variant = lp.variant;
    at = guarded_put(&g, &o, sizeof o);
    assert_int_equal(qattn_paged_mqa_logits_plan_compute(&caps, &c.a, at, &p, err, sizeof err), QATTN_OK);
    assert_int_equal(p.keys_per_split, lp.kv_tile);
    /* A field the rule refuses shows that it was read: a split of the
     * tile plus one key. */
    o.keys_per_split = lp.kv_tile + 1;
    at = guarded_put(&g, &o, sizeof o);
    assert_int_equal(qattn_paged_mqa_logits_plan_compute(&caps, &c.a, at, &p, err, sizeof err),
                     QATTN_ERR_INVALID_ARGUMENT);
    assert_true(has(err, "options.keys_per_split"));
    o.keys_per_split = 0;

    qt_refused_size bad[QT_REFUSED_SIZES];
    const int n = qt_refused_sizes(sizeof o, bad);
    for (int i = 0; i < n; ++i) {
        o.size = bad[i].size;
        memset(&p, QT_POISON, sizeof p);
        assert_int_equal(qattn_paged_mqa_logits_plan_create(ctx, &c.a, &o, &p), QATTN_ERR_INVALID_ARGUMENT);
        const char *e = qattn_last_error(ctx);
        assert_true(has(e, bad[i].says));
        assert_true(has(e, "options.size"));
        assert_true(has(e, "qattn_paged_mqa_logits_options"));
        assert_true(has(e, "QATTN_PAGED_MQA_LOGITS_OPTIONS_INIT"));
        assert_true(plan_untouched(&p, sizeof p));
        err[0] = '\0';
        assert_int_equal(qattn_paged_mqa_logits_plan_compute(&caps, &c.a, &o, &p, err, sizeof err),
                         QATTN_ERR_INVALID_ARGUMENT);
        assert_true(has(err, bad[i].says));
        assert_true(has(err, "qattn_paged_mqa_logits_options"));
        assert_true(plan_untouched(&p, sizeof p));
    }
    /* Refused whatever the other fields say, and before reading them. */
    const size_t lone = sizeof(size_t);
    at = guarded_put(&g, &lone, sizeof lone);
    assert_int_equal(qattn_paged_mqa_logits_plan_create(ctx, &c.a, at, &p), QATTN_ERR_INVALID_ARGUMENT);
    assert_int_equal(qattn_paged_mqa_logits_plan_compute(&caps, &c.a, at, &p, err, sizeof err),
                     QATTN_ERR_INVALID_ARGUMENT);
    guarded_unmap(&g);
    paged_case_free(ctx, &c);
    qattn_context_free(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_init_macros),      cmocka_unit_test(test_struct_read),
        cmocka_unit_test(test_struct_write),     cmocka_unit_test(test_struct_arguments),
        cmocka_unit_test(test_context_options),  cmocka_unit_test(test_decode_options),
        cmocka_unit_test(test_mqa_logits_options), cmocka_unit_test(test_paged_mqa_logits_options),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
