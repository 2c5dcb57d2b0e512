/*
 * The paged MQA logits planner (spec 5), launch-free: plans for the
 * capabilities of real devices (fake caps, tests/common/fake_devices.h) and
 * of small made-up ones, over a table of shapes, each checked against the
 * launch contract qattn.h states for qattn_paged_mqa_logits_plan and
 * against the device's limits; the properties hold for any variant the
 * planner may choose:
 * - the plan describes the shape it was given;
 * - workgroup size and shared memory within the device's limits, every
 *   grid dimension within Vulkan's guaranteed 65535;
 * - the splits cover max_kv_len (none starts past it) and every position
 *   a kernel forms stays within int32;
 * - the launch fills the device when there is work for it;
 * - the plan is a function of shapes, strides and caps alone (no page
 *   table), identical from plan_create and from plan_compute with the
 *   context's caps;
 * - options are honoured or refused naming the option; a device that
 *   cannot run the op is refused naming the limit; every reason and
 *   message is a terminated, printable string.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "qattn/backend.h"
#include "qattn/qattn.h"

#include "fake_devices.h"

#define MAX_GRID 65535

/* A small made-up device: 16 KiB of shared memory, workgroups of at most
 * 64 lanes, 8 compute units. */
static qattn_device_caps caps_small(void) {
    qattn_device_caps c = caps_lavapipe();
    strcpy(c.arch, "fake:small");
    c.compute_units = 8;
    c.max_shared_bytes = 16384;
    c.max_workgroup_size = 64;
    return c;
}

/* One compute unit reported as 0 (some drivers), 32 KiB. */
static qattn_device_caps caps_no_cu(void) {
    qattn_device_caps c = caps_lavapipe();
    strcpy(c.arch, "fake:no-cu-count");
    c.compute_units = 0;
    return c;
}

typedef qattn_device_caps (*caps_fn)(void);
static const struct {
    const char *name;
    caps_fn caps;
} DEVICES[] = {
    {"lavapipe", caps_lavapipe}, {"h200", caps_h200},   {"rdna4", caps_rdna4},
    {"gfx942", caps_gfx942},     {"small", caps_small}, {"no-cu", caps_no_cu},
};
#define N_DEVICES ((int)(sizeof DEVICES / sizeof DEVICES[0]))

/* ---- argument descriptors (no buffers: the planner is pure) ------------ */
typedef struct pm_shape {
    int64_t B, N, H, D, max_kv_len, P;
    int rank3;    /* k_cache [N_pages, P, D] rather than [N_slots, D] */
    int n_pages;  /* kv_indices' length */
} pm_shape;

static qattn_paged_mqa_logits_args make_args(pm_shape s, qattn_dtype qt, qattn_dtype kt) {
    qattn_paged_mqa_logits_args a;
    memset(&a, 0, sizeof a);
    const int64_t pages = 1000;
    const int64_t q[4] = {s.B, s.N, s.H, s.D}, w[3] = {s.B, s.N, s.H};
    a.q = qattn_tensor_contiguous(NULL, 0, qt, 4, q);
    if (s.rank3) {
        const int64_t k[3] = {pages, s.P, s.D}, ks[2] = {pages, s.P};
        a.k_cache = qattn_tensor_contiguous(NULL, 0, kt, 3, k);
        a.k_scale = qattn_tensor_contiguous(NULL, 0, QATTN_F32, 2, ks);
    } else {
        const int64_t k[2] = {pages * s.P, s.D}, ks[1] = {pages * s.P};
        a.k_cache = qattn_tensor_contiguous(NULL, 0, kt, 2, k);
        a.k_scale = qattn_tensor_contiguous(NULL, 0, QATTN_F32, 1, ks);
    }
    a.weights = qattn_tensor_contiguous(NULL, 0, QATTN_F32, 3, w);
    const int64_t ip[1] = {s.B + 1}, ix[1] = {s.n_pages > 0 ? s.n_pages : 1}, ln[1] = {s.B};
    a.kv_indptr = qattn_tensor_contiguous(NULL, 0, QATTN_I32, 1, ip);
    a.kv_indices = qattn_tensor_contiguous(NULL, 0, QATTN_I32, 1, ix);
    a.kv_lens = qattn_tensor_contiguous(NULL, 0, QATTN_I32, 1, ln);
    const int64_t l[3] = {s.B, s.N, s.max_kv_len};
    a.logits = qattn_tensor_contiguous(NULL, 0, QATTN_F32, 3, l);
    a.page_size = (int32_t)s.P;
    a.max_kv_len = (int32_t)s.max_kv_len;
    a.clean_logits = 1;
    return a;
}

static qattn_status plan_with(const qattn_device_caps *c, const qattn_paged_mqa_logits_args *a,
                              qattn_paged_mqa_variant v, int32_t keys_per_split,
                              qattn_paged_mqa_logits_plan *p, char *err, size_t n) {
    qattn_paged_mqa_logits_options o = QATTN_PAGED_MQA_LOGITS_OPTIONS_INIT;
    o.variant = v;
    o.keys_per_split = keys_per_split;
    memset(p, 0x5A, sizeof *p);
    err[0] = '\0';
    return qattn_paged_mqa_logits_plan_compute(c, a, &o, p, err, n);
}

/* A string of at most `cap` bytes, terminated inside them, all printable. */
static int printable(const char *s, size_t cap) {
    const char *end = memchr(s, '\0', cap);
    if (!end) return 0;
    for (const char *c = s; c < end; ++c)
        if (*c < 0x20 || *c > 0x7E) return 0;
    return 1;
}

static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* ---- the launch contract ------------------------------------------------ */
/* Checks every property above that one plan must have; fails naming the
 * device and shape. */
static void check_contract(const qattn_device_caps *c, const qattn_paged_mqa_logits_args *a,
                           const qattn_paged_mqa_logits_plan *p, int pinned_split) {
    const int64_t B = a->q.shape[0], N = a->q.shape[1], H = a->q.shape[2], D = a->q.shape[3];
    const int64_t M = a->max_kv_len;
    char what[320];
    snprintf(what, sizeof what, "%.96s B=%lld N=%lld H=%lld D=%lld max_kv_len=%lld P=%d variant %s", c->arch,
             (long long)B, (long long)N, (long long)H, (long long)D, (long long)M, (int)a->page_size,
             qattn_paged_mqa_variant_name(p->variant));
#define EXPECT(cond, ...)                                                   \
    do {                                                                    \
        if (!(cond)) {                                                      \
            char detail_[200];                                              \
            snprintf(detail_, sizeof detail_, __VA_ARGS__);                 \
            fail_msg("%s: %s fails: %s", what, #cond, detail_);             \
        }                                                                   \
    } while (0)
    EXPECT(p->batch == B && p->rows == N && p->heads == H && p->head_dim == D, "shape %d %d %d %d",
           (int)p->batch, (int)p->rows, (int)p->heads, (int)p->head_dim);
    EXPECT(p->q_dtype == a->q.dtype && p->k_dtype == a->k_cache.dtype, "dtypes");
    EXPECT(p->page_size == a->page_size && p->max_kv_len == a->max_kv_len, "page_size %d max_kv_len %d",
           (int)p->page_size, (int)p->max_kv_len);
    EXPECT(p->variant > QATTN_PAGED_MQA_AUTO && p->variant < QATTN_PAGED_MQA_VARIANT_COUNT, "%d",
           (int)p->variant);
    EXPECT(strcmp(qattn_paged_mqa_variant_name(p->variant), "invalid") != 0, "unnamed variant");
    /* Device limits. */
    EXPECT(p->workgroup_size >= 1 && (uint32_t)p->workgroup_size <= c->max_workgroup_size, "workgroup %d of %u",
           (int)p->workgroup_size, (unsigned)c->max_workgroup_size);
    EXPECT(p->shared_bytes >= 1 && p->shared_bytes <= c->max_shared_bytes, "%u shared bytes of %u",
           (unsigned)p->shared_bytes, (unsigned)c->max_shared_bytes);
    EXPECT(p->q_stage_bytes >= 0 && (uint32_t)p->q_stage_bytes <= p->shared_bytes, "q stage %d of %u",
           (int)p->q_stage_bytes, (unsigned)p->shared_bytes);
    EXPECT(p->q_staged == (p->q_stage_bytes > 0), "q_staged %d with %d bytes", (int)p->q_staged,
           (int)p->q_stage_bytes);
    for (int i = 0; i < 3; ++i)
        EXPECT(p->grid[i] >= 1 && p->grid[i] <= MAX_GRID, "grid[%d] = %u", i, (unsigned)p->grid[i]);
    /* qattn.h: grid[0] = num_splits ranges of keys_per_split positions
     * covering max_kv_len, grid[1] walks the requests (grid-stride past
     * 65535), grid[2] = 1; no workspace. */
    EXPECT(p->kv_tile >= 1 && p->keys_per_split >= p->kv_tile && p->keys_per_split % p->kv_tile == 0,
           "%d keys per split, tile %d", (int)p->keys_per_split, (int)p->kv_tile);
    EXPECT(p->num_splits >= 1 && (int64_t)p->num_splits * p->keys_per_split >= M, "%d x %d keys for %lld",
           (int)p->num_splits, (int)p->keys_per_split, (long long)M);
    EXPECT((int64_t)(p->num_splits - 1) * p->keys_per_split < M, "split %d starts past max_kv_len",
           (int)p->num_splits - 1);
    EXPECT((int64_t)p->num_splits * p->keys_per_split <= INT32_MAX, "positions past int32");
    EXPECT(p->grid[0] == (uint32_t)p->num_splits, "grid[0] %u, %d splits", (unsigned)p->grid[0],
           (int)p->num_splits);
    EXPECT(p->grid[1] == (uint32_t)(B < MAX_GRID ? B : MAX_GRID), "grid[1] %u for %lld requests",
           (unsigned)p->grid[1], (long long)B);
    EXPECT(p->grid[2] == 1, "grid[2] %u", (unsigned)p->grid[2]);
    EXPECT(p->workspace_bytes == 0, "%llu", (unsigned long long)p->workspace_bytes);
    /* Loads: a width the row starts allow (contiguous, offset 0 here). */
    EXPECT(p->load_bytes == 1 || p->load_bytes == 2 || p->load_bytes == 4 || p->load_bytes == 8 ||
               p->load_bytes == 16,
           "load_bytes %d", (int)p->load_bytes);
    /* Occupancy (the planner's own split length): at least as many
     * workgroups as compute units, or one per 1024 keys of work where there
     * is less. */
    const int64_t cus = c->compute_units > 0 ? c->compute_units : 1;
    const int64_t work = (B < MAX_GRID ? B : MAX_GRID) * cdiv(M, 1024);
    const int64_t wgs = (int64_t)p->grid[0] * p->grid[1] * p->grid[2];
    EXPECT(pinned_split || wgs >= (work < cus ? work : cus), "%lld workgroups on %lld compute units", (long long)wgs,
           (long long)cus);
    EXPECT(printable(p->reason, sizeof p->reason), "reason not a terminated printable string");
#undef EXPECT
}

static const int64_t MAXLEN[] = {1, 63, 256, 4097, 32768, 131072, 1 << 20};
static const int64_t BATCH[] = {1, 4, 64, 70000};
static const int64_t ROWS[] = {1, 2, 8};
static const int64_t HEADS[] = {1, 16, 64};
static const int64_t PAGES[] = {1, 16, 64};
#define COUNT(x) ((int)(sizeof x / sizeof x[0]))

/* Every device x a table of shapes, AUTO: each plan keeps the contract;
 * a refusal is allowed only where the device's shared memory cannot hold
 * one tile of the head dim, and then it names the limit. */
static void test_contract_table(void **state) {
    (void)state;
    int planned = 0;
    for (int di = 0; di < N_DEVICES; ++di) {
        const qattn_device_caps c = DEVICES[di].caps();
        for (int dd = 0; dd < 4; ++dd)
            for (int mi = 0; mi < COUNT(MAXLEN); ++mi)
                for (int bi = 0; bi < COUNT(BATCH); ++bi)
                    for (int ri = 0; ri < COUNT(ROWS); ++ri) {
                        const int hi = (mi + bi + ri + dd) % COUNT(HEADS);
                        const int pi = (mi + 2 * bi + ri) % COUNT(PAGES);
                        pm_shape s = {BATCH[bi], ROWS[ri], HEADS[hi], 64 << dd, MAXLEN[mi], PAGES[pi],
                                      (mi + ri) % 2, 7};
                        if (s.B > 65535) s.N = 1, s.H = 4; /* B x N x H x D within int32 */
                        const qattn_dtype qt = (mi % 2) ? QATTN_FP8_E4M3FNUZ : QATTN_FP8_E4M3FN;
                        const qattn_dtype kt = (bi % 2) ? QATTN_FP8_E4M3FNUZ : QATTN_FP8_E4M3FN;
                        qattn_paged_mqa_logits_args a = make_args(s, qt, kt);
                        qattn_paged_mqa_logits_plan p;
                        char err[512];
                        qattn_status st = plan_with(&c, &a, QATTN_PAGED_MQA_AUTO, 0, &p, err, sizeof err);
                        if (st != QATTN_OK) {
                            if (!(st == QATTN_ERR_VARIANT_GATE && strstr(err, "shared memory") &&
                                  c.max_shared_bytes < 32768 && s.D == 512))
                                fail_msg("%s B=%lld N=%lld H=%lld D=%lld max_kv_len=%lld: %s (%s)",
                                         DEVICES[di].name, (long long)s.B, (long long)s.N, (long long)s.H,
                                         (long long)s.D, (long long)s.max_kv_len, qattn_status_name(st), err);
                            assert_true(printable(err, sizeof err));
                            continue;
                        }
                        check_contract(&c, &a, &p, 0);
                        ++planned;
                    }
    }
    print_message("%d plans checked\n", planned);
    assert_true(planned > 1000);
}

/* The plan never sees the page table or the lengths: another kv_indices
 * length gives the same bytes, and so does another call; the plan of a
 * context is the pure planner's for the context's caps. */
static void test_function_of_shape(void **state) {
    (void)state;
    for (int di = 0; di < N_DEVICES; ++di) {
        const qattn_device_caps c = DEVICES[di].caps();
        pm_shape s = {16, 2, 64, 128, 32768, 64, 1, 7};
        qattn_paged_mqa_logits_args a = make_args(s, QATTN_FP8_E4M3FN, QATTN_FP8_E4M3FN);
        qattn_paged_mqa_logits_plan p1, p2, p3;
        char err[512];
        assert_int_equal(plan_with(&c, &a, QATTN_PAGED_MQA_AUTO, 0, &p1, err, sizeof err), QATTN_OK);
        assert_int_equal(plan_with(&c, &a, QATTN_PAGED_MQA_AUTO, 0, &p2, err, sizeof err), QATTN_OK);
        assert_memory_equal(&p1, &p2, sizeof p1);
        s.n_pages = 9000;
        a = make_args(s, QATTN_FP8_E4M3FN, QATTN_FP8_E4M3FN);
        assert_int_equal(plan_with(&c, &a, QATTN_PAGED_MQA_AUTO, 0, &p3, err, sizeof err), QATTN_OK);
        assert_memory_equal(&p1, &p3, sizeof p1);
        /* NULL options are AUTO's defaults */
        memset(&p3, 0, sizeof p3);
        assert_int_equal(qattn_paged_mqa_logits_plan_compute(&c, &a, NULL, &p3, err, sizeof err), QATTN_OK);
        assert_memory_equal(&p1, &p3, sizeof p1);
        /* ...and a plan for another max_kv_len differs (the digest, at least) */
        s.max_kv_len = 32769;
        a = make_args(s, QATTN_FP8_E4M3FN, QATTN_FP8_E4M3FN);
        assert_int_equal(plan_with(&c, &a, QATTN_PAGED_MQA_AUTO, 0, &p3, err, sizeof err), QATTN_OK);
        assert_int_equal(p3.max_kv_len, 32769);
        assert_true(memcmp(&p1, &p3, sizeof p1) != 0);
    }
    /* plan_create on a context = plan_compute with its caps */
    qattn_context *ctx = NULL;
    char err[512];
    assert_int_equal(qattn_context_create(qattn_backend_cpu(), NULL, &ctx, err, sizeof err), QATTN_OK);
    qattn_device_caps caps;
    assert_int_equal(qattn_get_caps(ctx, &caps), QATTN_OK);
    pm_shape s = {2, 2, 4, 64, 1000, 16, 0, 8};
    qattn_paged_mqa_logits_args a = make_args(s, QATTN_FP8_E4M3FN, QATTN_FP8_E4M3FN);
    qattn_tensor *ts[] = {&a.q,         &a.k_cache,    &a.k_scale, &a.weights,
                          &a.kv_indptr, &a.kv_indices, &a.kv_lens, &a.logits};
    qattn_buffer *bufs[8];
    for (int i = 0; i < 8; ++i) { /* a buffer per operand, of its size */
        uint64_t elems = 1;
        for (int d = 0; d < ts[i]->rank; ++d) elems *= (uint64_t)ts[i]->shape[d];
        assert_int_equal(qattn_buffer_alloc(ctx, elems * qattn_dtype_size(ts[i]->dtype), &bufs[i]), QATTN_OK);
        ts[i]->buffer = bufs[i];
    }
    qattn_paged_mqa_logits_plan pc, pp;
    qattn_status st = qattn_paged_mqa_logits_plan_create(ctx, &a, NULL, &pc);
    if (st != QATTN_OK) fail_msg("plan_create: %s", qattn_last_error(ctx));
    assert_int_equal(qattn_paged_mqa_logits_plan_compute(&caps, &a, NULL, &pp, err, sizeof err), QATTN_OK);
    assert_memory_equal(&pc, &pp, sizeof pc);
    check_contract(&caps, &a, &pc, 0);
    for (int i = 0; i < 8; ++i) qattn_buffer_free(ctx, bufs[i]);
    qattn_context_free(ctx);
}

/* Options: each variant pinned is planned as that variant or refused with
 * QATTN_ERR_VARIANT_GATE naming it; a split length of k key tiles gives
 * ceil(max_kv_len / (k x tile)) splits of exactly that length, or (past
 * the grid) a refusal naming the option; bad values are refused naming
 * the option, with nothing written to the plan. */
static void test_options(void **state) {
    (void)state;
    char err[512];
    for (int di = 0; di < N_DEVICES; ++di) {
        const qattn_device_caps c = DEVICES[di].caps();
        pm_shape s = {4, 2, 16, 128, 100000, 16, 0, 7};
        qattn_paged_mqa_logits_args a = make_args(s, QATTN_FP8_E4M3FN, QATTN_FP8_E4M3FN);
        qattn_paged_mqa_logits_plan auto_p, p;
        assert_int_equal(plan_with(&c, &a, QATTN_PAGED_MQA_AUTO, 0, &auto_p, err, sizeof err), QATTN_OK);
        for (int v = QATTN_PAGED_MQA_AUTO + 1; v < QATTN_PAGED_MQA_VARIANT_COUNT; ++v) {
            qattn_status st = plan_with(&c, &a, (qattn_paged_mqa_variant)v, 0, &p, err, sizeof err);
            if (st == QATTN_OK) {
                assert_int_equal(p.variant, v);
                check_contract(&c, &a, &p, 0);
            } else {
                assert_int_equal(st, QATTN_ERR_VARIANT_GATE);
                assert_non_null(strstr(err, qattn_paged_mqa_variant_name((qattn_paged_mqa_variant)v)));
            }
        }
        assert_int_equal(plan_with(&c, &a, auto_p.variant, 0, &p, err, sizeof err), QATTN_OK);
        assert_int_equal(p.variant, auto_p.variant);
        const int32_t tile = auto_p.kv_tile;
        for (int k = 1; k <= 1024; k *= 4) {
            const int64_t kps = (int64_t)k * tile;
            if (kps > INT32_MAX) break;
            qattn_status st = plan_with(&c, &a, auto_p.variant, (int32_t)kps, &p, err, sizeof err);
            if (st != QATTN_OK) {
                assert_int_equal(st, QATTN_ERR_INVALID_ARGUMENT);
                assert_non_null(strstr(err, "options.keys_per_split"));
                assert_true(cdiv(s.max_kv_len, kps) > MAX_GRID);
                continue;
            }
            assert_int_equal(p.keys_per_split, kps);
            assert_int_equal(p.num_splits, cdiv(s.max_kv_len, kps));
            check_contract(&c, &a, &p, 1);
        }
        /* a pinned split of one tile over a long context: past the grid */
        qattn_paged_mqa_logits_args longa = a;
        longa.max_kv_len = INT32_MAX / 2;
        longa.logits.shape[2] = longa.max_kv_len;
        qattn_status st = plan_with(&c, &longa, auto_p.variant, tile, &p, err, sizeof err);
        if (st == QATTN_OK) check_contract(&c, &longa, &p, 1);
        else assert_non_null(strstr(err, "options.keys_per_split"));
        /* refused values */
        const struct {
            int variant;
            int32_t kps;
            const char *names;
        } bad[] = {
            {QATTN_PAGED_MQA_VARIANT_COUNT, 0, "options.variant"},
            {-1, 0, "options.variant"},
            {1 << 20, 0, "options.variant"},
            {QATTN_PAGED_MQA_AUTO, -1, "options.keys_per_split"},
            {QATTN_PAGED_MQA_AUTO, INT32_MIN, "options.keys_per_split"},
            {QATTN_PAGED_MQA_AUTO, tile + 1, "options.keys_per_split"},
        };
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
            if (bad[i].kps == tile + 1 && tile == 1) continue;
            st = plan_with(&c, &a, (qattn_paged_mqa_variant)bad[i].variant, bad[i].kps, &p, err, sizeof err);
            if (st != QATTN_ERR_INVALID_ARGUMENT || !strstr(err, bad[i].names))
                fail_msg("%s: variant %d keys_per_split %d: %s (%s), want INVALID_ARGUMENT naming %s",
                         DEVICES[di].name, bad[i].variant, (int)bad[i].kps, qattn_status_name(st), err,
                         bad[i].names);
            assert_true(printable(err, sizeof err));
            const unsigned char *b = (const unsigned char *)&p;
            for (size_t j = 0; j < sizeof p; ++j) assert_int_equal(b[j], 0x5A);
        }
    }
}

/* A device whose shared memory holds no tile of the head dim is refused
 * naming shared memory and the device's bytes; one that holds less than
 * the largest tile gets a smaller one (within the limit, contract kept);
 * a device with workgroups of 16 lanes gets workgroups of at most 16. */
static void test_device_limits(void **state) {
    (void)state;
    char err[512];
    pm_shape s = {2, 4, 64, 512, 5000, 16, 1, 7};
    qattn_paged_mqa_logits_args a = make_args(s, QATTN_FP8_E4M3FN, QATTN_FP8_E4M3FN);
    qattn_paged_mqa_logits_plan p;
    qattn_device_caps c = caps_lavapipe();
    c.max_shared_bytes = 1024;
    qattn_status st = plan_with(&c, &a, QATTN_PAGED_MQA_AUTO, 0, &p, err, sizeof err);
    assert_int_equal(st, QATTN_ERR_VARIANT_GATE);
    assert_non_null(strstr(err, "shared memory"));
    assert_non_null(strstr(err, "1024"));
    assert_true(printable(err, sizeof err));
    /* shrinking shared memory never raises the plan's use above it */
    uint32_t prev_tile = UINT32_MAX;
    for (uint32_t bytes = 65536; bytes >= 8192; bytes /= 2) {
        c = caps_rdna4();
        c.max_shared_bytes = bytes;
        for (int64_t D = 64; D <= 512; D *= 2) {
            s.D = D;
            a = make_args(s, QATTN_FP8_E4M3FN, QATTN_FP8_E4M3FN);
            st = plan_with(&c, &a, QATTN_PAGED_MQA_AUTO, 0, &p, err, sizeof err);
            if (st != QATTN_OK) {
                assert_int_equal(st, QATTN_ERR_VARIANT_GATE);
                assert_non_null(strstr(err, "shared memory"));
                continue;
            }
            check_contract(&c, &a, &p, 0);
            if (D == 512) {
                assert_true((uint32_t)p.kv_tile <= prev_tile);
                prev_tile = (uint32_t)p.kv_tile;
            }
        }
    }
    c = caps_lavapipe();
    c.max_workgroup_size = 16;
    s.D = 128;
    a = make_args(s, QATTN_FP8_E4M3FN, QATTN_FP8_E4M3FN);
    assert_int_equal(plan_with(&c, &a, QATTN_PAGED_MQA_AUTO, 0, &p, err, sizeof err), QATTN_OK);
    assert_true(p.workgroup_size <= 16);
    check_contract(&c, &a, &p, 0);
}

/* More compute units never mean fewer workgroups for one long request. */
static void test_occupancy_grows_with_the_device(void **state) {
    (void)state;
    char err[512];
    pm_shape s = {1, 1, 64, 128, 131072, 64, 1, 7};
    qattn_paged_mqa_logits_args a = make_args(s, QATTN_FP8_E4M3FN, QATTN_FP8_E4M3FN);
    int64_t prev = 0;
    for (int cus = 1; cus <= 512; cus *= 2) {
        qattn_device_caps c = caps_h200();
        c.compute_units = cus;
        qattn_paged_mqa_logits_plan p;
        assert_int_equal(plan_with(&c, &a, QATTN_PAGED_MQA_AUTO, 0, &p, err, sizeof err), QATTN_OK);
        check_contract(&c, &a, &p, 0);
        const int64_t wgs = (int64_t)p.grid[0] * p.grid[1] * p.grid[2];
        if (wgs < prev) fail_msg("%d compute units: %lld workgroups, fewer than %lld", cus, (long long)wgs,
                                 (long long)prev);
        prev = wgs;
    }
    assert_true(prev >= 128); /* 131072 keys on 512 units: at least one workgroup per 1024 keys */
}

/* Load width: 16-byte loads where every q and key row start is 16-byte
 * aligned; a misaligned offset or row stride gives a width every start
 * allows. */
static void test_load_bytes(void **state) {
    (void)state;
    char err[512];
    const qattn_device_caps c = caps_h200();
    pm_shape s = {3, 2, 8, 128, 4096, 16, 0, 7};
    qattn_paged_mqa_logits_args a = make_args(s, QATTN_FP8_E4M3FN, QATTN_FP8_E4M3FN);
    qattn_paged_mqa_logits_plan p;
    assert_int_equal(plan_with(&c, &a, QATTN_PAGED_MQA_AUTO, 0, &p, err, sizeof err), QATTN_OK);
    assert_int_equal(p.load_bytes, 16);
    const struct {
        int which; /* 0: q offset, 1: k_cache offset, 2: k_cache row stride, 3: q batch stride */
        int64_t value;
    } cases[] = {{0, 1}, {0, 8}, {1, 4}, {2, 136}, {3, 2 * 8 * 128 + 2}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
        qattn_paged_mqa_logits_args b = a;
        int64_t start = 0;
        switch (cases[i].which) {
        case 0: b.q.offset = (uint64_t)cases[i].value; start = cases[i].value; break;
        case 1: b.k_cache.offset = (uint64_t)cases[i].value; start = cases[i].value; break;
        case 2: b.k_cache.strides[0] = cases[i].value; start = cases[i].value; break;
        default: b.q.strides[0] = cases[i].value; start = cases[i].value; break;
        }
        assert_int_equal(plan_with(&c, &b, QATTN_PAGED_MQA_AUTO, 0, &p, err, sizeof err), QATTN_OK);
        check_contract(&c, &b, &p, 0);
        if (start % p.load_bytes != 0)
            fail_msg("case %zu: load_bytes %d but a row starts at byte %lld", i, (int)p.load_bytes,
                     (long long)start);
        assert_true(p.load_bytes < 16);
        assert_true(printable(p.reason, sizeof p.reason));
    }
}

/* Shapes past what kernels index are refused naming the operand, and the
 * caps the planner divides by are checked first. */
static void test_bounds(void **state) {
    (void)state;
    char err[512];
    const qattn_device_caps c = caps_h200();
    qattn_paged_mqa_logits_plan p;
    pm_shape s = {65536, 8, 64, 512, 1024, 16, 0, 7}; /* B x N x H x D = 2^34 */
    qattn_paged_mqa_logits_args a = make_args(s, QATTN_FP8_E4M3FN, QATTN_FP8_E4M3FN);
    assert_int_equal(plan_with(&c, &a, QATTN_PAGED_MQA_AUTO, 0, &p, err, sizeof err), QATTN_ERR_OVERFLOW);
    assert_non_null(strstr(err, "q"));
    /* max_kv_len at int32's end: planned within int32, or refused naming it */
    s = (pm_shape){1, 1, 4, 64, INT32_MAX, 16, 0, 7};
    a = make_args(s, QATTN_FP8_E4M3FN, QATTN_FP8_E4M3FN);
    qattn_status st = plan_with(&c, &a, QATTN_PAGED_MQA_AUTO, 0, &p, err, sizeof err);
    if (st == QATTN_OK) check_contract(&c, &a, &p, 0);
    else {
        assert_int_equal(st, QATTN_ERR_OVERFLOW);
        assert_non_null(strstr(err, "max_kv_len"));
    }
    /* the scalars and the dtypes */
    a = make_args((pm_shape){1, 1, 4, 64, 100, 16, 0, 7}, QATTN_FP8_E4M3FN, QATTN_FP8_E4M3FN);
    qattn_paged_mqa_logits_args b = a;
    b.max_kv_len = 0;
    assert_int_not_equal(plan_with(&c, &b, QATTN_PAGED_MQA_AUTO, 0, &p, err, sizeof err), QATTN_OK);
    assert_non_null(strstr(err, "max_kv_len"));
    b = a;
    b.page_size = 0;
    assert_int_not_equal(plan_with(&c, &b, QATTN_PAGED_MQA_AUTO, 0, &p, err, sizeof err), QATTN_OK);
    assert_non_null(strstr(err, "page_size"));
    b = a;
    b.k_cache.dtype = QATTN_BF16;
    assert_int_equal(plan_with(&c, &b, QATTN_PAGED_MQA_AUTO, 0, &p, err, sizeof err), QATTN_ERR_DTYPE);
    assert_non_null(strstr(err, "k_cache"));
    b = a;
    b.q.shape[1] = 9;
    b.weights.shape[1] = b.logits.shape[1] = 9;
    assert_int_not_equal(plan_with(&c, &b, QATTN_PAGED_MQA_AUTO, 0, &p, err, sizeof err), QATTN_OK);
    assert_non_null(strstr(err, "q"));
    /* caps */
    qattn_device_caps bc = caps_h200();
    bc.subgroup_size_min = bc.subgroup_size_max = 0xFFFFFF01u;
    assert_int_equal(plan_with(&bc, &a, QATTN_PAGED_MQA_AUTO, 0, &p, err, sizeof err),
                     QATTN_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "caps.subgroup_size"));
    bc = caps_h200();
    bc.max_workgroup_size = 0;
    assert_int_equal(plan_with(&bc, &a, QATTN_PAGED_MQA_AUTO, 0, &p, err, sizeof err),
                     QATTN_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "caps.max_workgroup_size"));
    assert_int_equal(qattn_paged_mqa_logits_plan_compute(NULL, &a, NULL, &p, err, sizeof err),
                     QATTN_ERR_INVALID_ARGUMENT);
    assert_int_equal(qattn_paged_mqa_logits_plan_compute(&c, NULL, NULL, &p, err, sizeof err),
                     QATTN_ERR_INVALID_ARGUMENT);
    assert_int_equal(qattn_paged_mqa_logits_plan_compute(&c, &a, NULL, NULL, err, sizeof err),
                     QATTN_ERR_INVALID_ARGUMENT);
    /* err may be NULL */
    assert_int_equal(qattn_paged_mqa_logits_plan_compute(&c, &b, NULL, &p, NULL, 0), QATTN_ERR_SHAPE);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_contract_table),
        cmocka_unit_test(test_function_of_shape),
        cmocka_unit_test(test_options),
        cmocka_unit_test(test_device_limits),
        cmocka_unit_test(test_occupancy_grows_with_the_device),
        cmocka_unit_test(test_load_bytes),
        cmocka_unit_test(test_bounds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
