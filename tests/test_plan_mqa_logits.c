/*
 * The MQA logits planner, launch-free: its decisions for the capabilities of
 * real devices (as fake caps), and the launcher contract every plan must
 * keep for a table of shapes: rows are never padded and nothing is copied,
 * every quantity the kernels compute in int32 fits, slices tile the KV
 * range exactly with the last-starting ones the smallest, and the shared
 * memory stays within the device's limit.
 */
#define _POSIX_C_SOURCE 200809L /* setenv, unsetenv */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "qattn/backend.h"
#include "qattn/experimental.h"
#include "qattn/qattn.h"

#include "fake_devices.h"

/* A device without matrix units (RDNA4 caps minus coopmat). */
static qattn_device_caps caps_no_matrix(qattn_device_caps c) {
    c.features &= ~(uint32_t)QATTN_FEAT_COOPMAT;
    c.n_matrix_shapes = 0;
    return c;
}

/* ---- argument descriptors (no buffers: the planner is pure) ------------ */
typedef struct mqa_shape {
    int64_t S, S_kv, H, D;
} mqa_shape;

static int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

/* Contiguous descriptors; the logits row stride is S_kv rounded up to 256
 * elements, as the spec recommends. */
static qattn_mqa_logits_args make_args(mqa_shape s, qattn_dtype qt, qattn_dtype kt) {
    qattn_mqa_logits_args a;
    memset(&a, 0, sizeof a);
    const int64_t q[3] = {s.S, s.H, s.D}, k[2] = {s.S_kv, s.D}, w[2] = {s.S, s.H};
    a.q = qattn_tensor_contiguous(NULL, 0, qt, 3, q);
    a.k = qattn_tensor_contiguous(NULL, 0, kt, 2, k);
    a.k_scale = qattn_tensor_contiguous(NULL, 0, QATTN_F32, 1, &s.S_kv);
    a.weights = qattn_tensor_contiguous(NULL, 0, QATTN_F32, 2, w);
    a.ks = qattn_tensor_contiguous(NULL, 0, QATTN_I32, 1, &s.S);
    a.ke = qattn_tensor_contiguous(NULL, 0, QATTN_I32, 1, &s.S);
    const int64_t l[2] = {s.S, s.S_kv};
    a.logits = qattn_tensor_contiguous(NULL, 0, QATTN_F32, 2, l);
    a.logits.strides[0] = round_up(s.S_kv, 256);
    a.clean_logits = 1;
    return a;
}

static qattn_status plan_for(const qattn_device_caps *c, mqa_shape s, qattn_mqa_variant v,
                             int32_t rows, int32_t slices, qattn_mqa_logits_plan *p, char *err,
                             size_t n) {
    qattn_mqa_logits_args a = make_args(s, QATTN_FP8_E4M3FN, QATTN_FP8_E4M3FN);
    qattn_mqa_logits_options o = QATTN_MQA_LOGITS_OPTIONS_INIT;
    o.variant = v;
    o.rows_per_subgroup = rows;
    o.kv_slices = slices;
    memset(p, 0x5A, sizeof *p);
    return qattn_mqa_logits_plan_compute(c, &a, &o, p, err, n);
}

static qattn_mqa_logits_plan auto_plan(const qattn_device_caps *c, mqa_shape s) {
    qattn_mqa_logits_plan p;
    char err[256] = "";
    qattn_status st = plan_for(c, s, QATTN_MQA_AUTO, 0, 0, &p, err, sizeof err);
    if (st != QATTN_OK)
        fail_msg("plan S=%lld S_kv=%lld H=%lld D=%lld on %s: %s (%s)", (long long)s.S,
                 (long long)s.S_kv, (long long)s.H, (long long)s.D, c->arch, qattn_status_name(st),
                 err);
    return p;
}

/* ---- the launcher contract ------------------------------------------- */
static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* Checks every rule a launcher relies on; fails with the shape named. */
static void check_contract(const qattn_device_caps *c, const qattn_mqa_logits_args *a,
                           const qattn_mqa_logits_plan *p) {
    const int64_t S = a->q.shape[0], H = a->q.shape[1], D = a->q.shape[2], S_kv = a->k.shape[0];
    char what[320];
    snprintf(what, sizeof what, "%.96s S=%lld S_kv=%lld H=%lld D=%lld variant %s", c->arch,
             (long long)S, (long long)S_kv, (long long)H, (long long)D,
             qattn_mqa_variant_name(p->variant));
#define EXPECT(cond, ...)                                                   \
    do {                                                                    \
        if (!(cond)) {                                                      \
            char detail_[160];                                              \
            snprintf(detail_, sizeof detail_, __VA_ARGS__);                 \
            fail_msg("%s: %s fails: %s", what, #cond, detail_);             \
        }                                                                   \
    } while (0)
    EXPECT(p->rows == S && p->kv_len == S_kv && p->heads == H && p->head_dim == D, "shape");
    EXPECT(p->variant > QATTN_MQA_AUTO && p->variant < QATTN_MQA_VARIANT_COUNT, "%d",
           (int)p->variant);
    /* No host padding and no copies: the op takes no workspace, and the row
     * blocks overshoot S by less than one block (the kernel masks the rest). */
    EXPECT(p->workspace_bytes == 0, "%llu", (unsigned long long)p->workspace_bytes);
    EXPECT(p->rows_per_workgroup >= 1 && p->rows_per_subgroup >= 1, "rows %d/%d",
           (int)p->rows_per_workgroup, (int)p->rows_per_subgroup);
    EXPECT(p->rows_per_subgroup == 1 || p->rows_per_subgroup == 2 || p->rows_per_subgroup == 4,
           "%d", (int)p->rows_per_subgroup);
    const int64_t blocks = cdiv(S, p->rows_per_workgroup);
    EXPECT(blocks * p->rows_per_workgroup - S < p->rows_per_workgroup, "padding");
    EXPECT(blocks * p->rows_per_workgroup <= INT32_MAX, "row blocks x rows");
    /* Grid: within Vulkan's guaranteed 65535 per dimension; the x range
     * covers every row block through the kernel's grid-stride loop. */
    EXPECT(p->grid_x >= 1 && p->grid_x <= 65535 && p->grid_x == (blocks < 65535 ? blocks : 65535),
           "grid_x %d for %lld blocks", (int)p->grid_x, (long long)blocks);
    EXPECT(p->grid_y == p->kv_slices && p->kv_slices >= 1 && p->kv_slices <= 65535, "slices %d",
           (int)p->kv_slices);
    EXPECT((int64_t)p->grid_x * p->rows_per_workgroup <= INT32_MAX, "grid_x x rows");
    /* Slices: the kernel deals T tiles out as the planner does; they must
     * tile [0, S_kv) exactly, each within kv_per_slice, non-increasing. */
    EXPECT(p->kv_tile >= 1 && p->kv_tile % 16 == 0, "kv_tile %d", (int)p->kv_tile);
    const int64_t T = cdiv(S_kv, p->kv_tile);
    EXPECT(T * p->kv_tile <= INT32_MAX, "tile ends");
    EXPECT(p->kv_slices <= T, "more slices than tiles");
    int64_t q = T / p->kv_slices, r = T % p->kv_slices, end = 0, prev = INT64_MAX;
    for (int64_t y = 0; y < p->kv_slices; ++y) {
        int64_t start = (y * q + (y < r ? y : r)) * p->kv_tile; /* int64 here... */
        int64_t len = (q + (y < r ? 1 : 0)) * p->kv_tile;
        EXPECT(start == end, "slice %lld starts at %lld, previous ended at %lld", (long long)y,
               (long long)start, (long long)end);
        EXPECT(len >= p->kv_tile && len <= p->kv_per_slice, "slice %lld has %lld columns",
               (long long)y, (long long)len);
        EXPECT(len <= prev, "slice %lld is longer than the one before", (long long)y);
        EXPECT(start + len <= INT32_MAX, "slice end");
        /* ...and the kernel's int32 form gives the same numbers. */
        EXPECT(y * q + (y < r ? y : r) <= INT32_MAX, "slice start tile");
        prev = len;
        end = start + len;
    }
    EXPECT(end >= S_kv && end - S_kv < p->kv_tile, "slices cover %lld of %lld", (long long)end,
           (long long)S_kv);
    /* Shared memory within the device's real limit. */
    EXPECT(p->shared_bytes <= c->max_shared_bytes, "%u > %u", (unsigned)p->shared_bytes,
           (unsigned)c->max_shared_bytes);
    /* Threads within the workgroup limit. */
    EXPECT(p->subgroup_size >= 1 &&
               (int64_t)p->subgroup_size * p->subgroups_per_workgroup <= c->max_workgroup_size,
           "%d x %d threads", (int)p->subgroup_size, (int)p->subgroups_per_workgroup);
    if (p->variant == QATTN_MQA_COOPMAT) {
        EXPECT(p->subgroup_size >= (int32_t)c->subgroup_size_min &&
                   p->subgroup_size <= (int32_t)c->subgroup_size_max,
               "coopmat subgroup %d", (int)p->subgroup_size);
        /* A subgroup holds whole m-tiles of one row or whole rows. */
        int64_t pairs = H * p->rows_per_workgroup / p->subgroups_per_workgroup;
        EXPECT(pairs % 16 == 0 && pairs >= 16 && pairs <= 64, "%lld (row, head) pairs per subgroup",
               (long long)pairs);
        EXPECT(H * p->rows_per_workgroup % p->subgroups_per_workgroup == 0, "uneven pairs");
        /* The backend runs the plan's matrix shape: one the device lists. */
        int listed = 0;
        for (int32_t i = 0; i < c->n_matrix_shapes; ++i) {
            const qattn_matrix_shape *m = &c->matrix_shapes[i], *w = &p->matrix_shape;
            listed |= m->m == w->m && m->n == w->n && m->k == w->k && m->a_type == w->a_type &&
                      m->c_type == w->c_type;
        }
        EXPECT(listed, "matrix shape %ux%ux%u not listed", (unsigned)p->matrix_shape.m,
               (unsigned)p->matrix_shape.n, (unsigned)p->matrix_shape.k);
        /* Never one row spread over a whole workgroup (see the planner). */
        EXPECT(p->rows_per_workgroup >= 2, "%d rows per workgroup", (int)p->rows_per_workgroup);
        /* The geometry fields the backends launch: consistent with the
         * pairs each subgroup holds. */
        const int64_t units = H / 16;
        EXPECT(p->m_tiles * 16 == pairs, "m_tiles %d for %lld pairs", (int)p->m_tiles, (long long)pairs);
        EXPECT(p->subgroups_per_row == (units > p->m_tiles ? units / p->m_tiles : 1), "subgroups_per_row %d",
               (int)p->subgroups_per_row);
        EXPECT(p->kv_tile == 16 * p->n_tiles && p->n_tiles >= 1 && p->n_tiles <= 4, "n_tiles %d",
               (int)p->n_tiles);
    } else {
        EXPECT(p->m_tiles == 0 && p->n_tiles == 0 && p->subgroups_per_row == 0, "coopmat fields on %s",
               qattn_mqa_variant_name(p->variant));
        /* Only a staged plan names a matrix shape: gfx942's fp8 MFMA. */
        const int mfma = p->variant == QATTN_MQA_STAGED && p->matrix_shape.m == 16 && p->matrix_shape.n == 16 &&
                         p->matrix_shape.k == 32 && p->matrix_shape.a_type == QATTN_FP8_E4M3FNUZ && D <= 256;
        EXPECT(p->matrix_shape.m == 0 || mfma, "a matrix shape on a %s plan", qattn_mqa_variant_name(p->variant));
    }
    EXPECT(p->row_blocks == blocks, "row_blocks %d, expected %lld", (int)p->row_blocks, (long long)blocks);
    EXPECT(p->kv_tiles == cdiv(S_kv, p->kv_tile), "kv_tiles %d", (int)p->kv_tiles);
    EXPECT(p->load_bytes == 16, "load_bytes %d for contiguous rows", (int)p->load_bytes);
    /* The int32 products the kernels form inside a row or a tile. */
    EXPECT((H - 1) * a->q.strides[1] + D <= INT32_MAX, "q row");
    EXPECT((int64_t)p->kv_tile * a->k.strides[0] + D <= INT32_MAX, "k tile");
    EXPECT(S_kv <= INT32_MAX, "column index");
    /* Row bases: int32 unless the plan says 64-bit. */
    const int64_t lrow = (S - 1) * a->logits.strides[0] + S_kv;
    const int64_t qrow = (S - 1) * a->q.strides[0] + H * D;
    const int64_t krow = (S_kv - 1) * a->k.strides[0] + D;
    if (lrow > INT32_MAX || qrow > INT32_MAX || krow > INT32_MAX)
        EXPECT(p->index64 == 1, "row offsets up to %lld/%lld/%lld need 64 bits", (long long)lrow,
               (long long)qrow, (long long)krow);
    else
        EXPECT(p->index64 == 0, "needlessly 64-bit");
    EXPECT(memchr(p->reason, '\0', sizeof p->reason) != NULL, "reason unterminated");
#undef EXPECT
}

static void test_launcher_contract(void **state) {
    (void)state;
    const qattn_device_caps devs[] = {caps_lavapipe(), caps_h200(), caps_rdna4(), caps_gfx942(),
                                      caps_no_matrix(caps_rdna4())};
    /* S x S_kv: the shapes plus long-KV, many-row and int32-edge ones. */
    static const int64_t sizes[][2] = {
        {1, 1},       {1023, 1023},   {7, 20007},      {16, 1500000},   {1, 1048576},
        {17, 257},    {2048, 65536},  {4096, 32768},   {1024, 131072},  {2048, 1000000},
        {4096, 1048576}, {1000003, 3}, {15, 255},      {4096, 4096},    {3, 16384},
    };
    static const int64_t heads[] = {16, 32, 64, 128}, dims[] = {64, 128, 256, 512};
    static const int32_t pins[] = {0, 1, 2, 4};
    int checked = 0;
    for (size_t di = 0; di < sizeof devs / sizeof devs[0]; ++di)
        for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; ++si)
            for (size_t hi = 0; hi < 4; ++hi)
                for (size_t ki = 0; ki < 4; ++ki)
                    for (int v = QATTN_MQA_AUTO; v < QATTN_MQA_VARIANT_COUNT; ++v)
                        for (size_t pi = 0; pi < 4; ++pi) {
                            mqa_shape s = {sizes[si][0], sizes[si][1], heads[hi], dims[ki]};
                            qattn_mqa_logits_args a =
                                make_args(s, QATTN_FP8_E4M3FNUZ, QATTN_FP8_E4M3FN);
                            qattn_mqa_logits_options o = QATTN_MQA_LOGITS_OPTIONS_INIT;
                            o.variant = (qattn_mqa_variant)v;
                            o.rows_per_subgroup = pins[pi];
                            qattn_mqa_logits_plan p;
                            char err[256] = "";
                            qattn_status st = qattn_mqa_logits_plan_compute(&devs[di], &a, &o, &p,
                                                                             err, sizeof err);
                            if (st == QATTN_ERR_VARIANT_GATE && v != QATTN_MQA_AUTO) {
                                /* Only pinned variants may refuse, and say why. */
                                assert_true(strlen(err) > 10);
                                continue;
                            }
                            if (st != QATTN_OK)
                                fail_msg("%s S=%lld S_kv=%lld H=%lld D=%lld v=%d pin=%d: %s %s",
                                         devs[di].arch, (long long)s.S, (long long)s.S_kv,
                                         (long long)s.H, (long long)s.D, v, (int)pins[pi],
                                         qattn_status_name(st), err);
                            if (v != QATTN_MQA_AUTO) assert_int_equal(p.variant, v);
                            if (pins[pi] && p.variant != QATTN_MQA_COOPMAT)
                                assert_int_equal(p.rows_per_subgroup, pins[pi]);
                            check_contract(&devs[di], &a, &p);
                            ++checked;
                        }
    assert_true(checked > 2000);
}

/* The same plan for the same shape however often it is asked (a captured
 * graph and an eager call must agree), and pinned slices respected. */
static void test_split_is_a_function_of_shape(void **state) {
    (void)state;
    const qattn_device_caps c = caps_h200();
    mqa_shape s = {2048, 65536, 64, 128};
    qattn_mqa_logits_plan a = auto_plan(&c, s), b = auto_plan(&c, s);
    assert_memory_equal(&a, &b, sizeof a);
    qattn_mqa_logits_plan p;
    char err[256];
    assert_int_equal(plan_for(&c, s, QATTN_MQA_AUTO, 0, 5, &p, err, sizeof err), QATTN_OK);
    assert_int_equal(p.kv_slices, 5);
    /* More slices than tiles are clamped, and the reason says so. */
    mqa_shape small = {64, 100, 64, 128};
    assert_int_equal(plan_for(&c, small, QATTN_MQA_AUTO, 0, 1000, &p, err, sizeof err), QATTN_OK);
    assert_true(p.kv_slices <= (100 + p.kv_tile - 1) / p.kv_tile);
    assert_non_null(strstr(p.reason, "clamped"));
}

/* ---- decisions on each device ----------------------------------------- */
static void test_lavapipe_decisions(void **state) {
    (void)state;
    const qattn_device_caps c = caps_lavapipe();
    qattn_mqa_logits_plan p = auto_plan(&c, (mqa_shape){1023, 1023, 64, 128});
    /* No matrix unit; the 64-column f16 tile of D = 128 fits 32 KiB. */
    assert_int_equal(p.variant, QATTN_MQA_STAGED);
    assert_non_null(strstr(p.reason, "coopmat"));
    assert_int_equal(p.subgroup_size, 8);
    assert_true(p.shared_bytes <= 32768);
    /* D = 256: the staged tile needs 33024 B > 32768 -> direct. */
    p = auto_plan(&c, (mqa_shape){1023, 1023, 64, 256});
    assert_int_equal(p.variant, QATTN_MQA_DIRECT);
    assert_non_null(strstr(p.reason, "staged: needs 33024 B"));
    assert_int_equal(p.shared_bytes, 0);
    /* Fewer than 16 rows keep direct. */
    p = auto_plan(&c, (mqa_shape){15, 20007, 64, 64});
    assert_int_equal(p.variant, QATTN_MQA_DIRECT);
    assert_non_null(strstr(p.reason, "15 rows < 16"));
    p = auto_plan(&c, (mqa_shape){16, 255, 64, 64});
    assert_int_equal(p.variant, QATTN_MQA_STAGED);
    /* Pinning coopmat here is a gate failure naming the reason. */
    char err[256] = "";
    assert_int_equal(plan_for(&c, (mqa_shape){64, 64, 64, 128}, QATTN_MQA_COOPMAT, 0, 0, &p, err,
                              sizeof err),
                     QATTN_ERR_VARIANT_GATE);
    assert_non_null(strstr(err, "no cooperative matrices"));
    /* Pinned staged for D = 512 cannot fit 32 KiB. */
    assert_int_equal(plan_for(&c, (mqa_shape){64, 64, 64, 512}, QATTN_MQA_STAGED, 0, 0, &p, err,
                              sizeof err),
                     QATTN_ERR_VARIANT_GATE);
    assert_non_null(strstr(err, "65792 B"));
    /* Pinned staged for a handful of rows is allowed (a preference, not a gate). */
    assert_int_equal(plan_for(&c, (mqa_shape){3, 64, 16, 64}, QATTN_MQA_STAGED, 0, 0, &p, err,
                              sizeof err),
                     QATTN_OK);
    assert_int_equal(p.variant, QATTN_MQA_STAGED);
}

static void test_h200_decisions(void **state) {
    (void)state;
    const qattn_device_caps c = caps_h200();
    /* The target preset: coopmat, four m-tiles of q per subgroup at D = 128
     * (128 registers of q: one whole row of 64 heads per subgroup), 16-column
     * tiles (32 accumulator registers), and the KV range split so 132 SMs
     * see many waves. */
    qattn_mqa_logits_plan p = auto_plan(&c, (mqa_shape){2048, 65536, 64, 128});
    assert_int_equal(p.variant, QATTN_MQA_COOPMAT);
    assert_string_equal(p.reason, "");
    assert_int_equal(p.subgroup_size, 32);
    assert_int_equal(p.subgroups_per_workgroup, 4);
    assert_int_equal(p.rows_per_workgroup, 4);
    assert_int_equal(p.rows_per_subgroup, 1);
    assert_int_equal(p.kv_tile, 16);
    assert_int_equal(p.matrix_shape.m, 16);
    assert_int_equal(p.matrix_shape.n, 16);
    assert_int_equal(p.matrix_shape.k, 16);
    assert_true(p.kv_slices > 1);
    assert_true((int64_t)p.grid_x * p.grid_y >= 16 * 132);
    assert_true(p.shared_bytes <= 49152);
    /* H = 16: one m-tile per row, so a subgroup keeps four rows. */
    p = auto_plan(&c, (mqa_shape){4096, 32768, 16, 128});
    assert_int_equal(p.variant, QATTN_MQA_COOPMAT);
    assert_int_equal(p.rows_per_subgroup, 4);
    /* D = 512: one m-tile of q per subgroup; H = 32 spreads a row over two
     * subgroups and a 32-column tile keeps the 520-half key rows in 48 KiB.
     * H = 64 spreads a row over four subgroups: eight subgroups for two rows,
     * whose partials leave room for a 16-column tile. */
    p = auto_plan(&c, (mqa_shape){1024, 4096, 32, 512});
    assert_int_equal(p.variant, QATTN_MQA_COOPMAT);
    assert_int_equal(p.rows_per_workgroup, 2);
    assert_int_equal(p.kv_tile, 32);
    assert_true(p.shared_bytes <= 49152);
    p = auto_plan(&c, (mqa_shape){1024, 4096, 64, 512});
    assert_int_equal(p.variant, QATTN_MQA_COOPMAT);
    assert_int_equal(p.subgroups_per_workgroup, 8);
    assert_int_equal(p.rows_per_workgroup, 2);
    assert_int_equal(p.kv_tile, 16);
    assert_true(p.shared_bytes <= 49152);
    /* D = 256: two m-tiles (the same 128 registers of q as D = 128). */
    p = auto_plan(&c, (mqa_shape){1024, 4096, 128, 256});
    assert_int_equal(p.variant, QATTN_MQA_COOPMAT);
    assert_int_equal(p.rows_per_workgroup, 2);
    assert_true(p.shared_bytes <= 49152);
    /* H = 20 cannot tile by 16 heads: staged, with the reason. */
    p = auto_plan(&c, (mqa_shape){1024, 4096, 20, 128});
    assert_int_equal(p.variant, QATTN_MQA_STAGED);
    assert_non_null(strstr(p.reason, "H = 20 is not a multiple of 16"));
    /* ... and D = 512 with H = 20: staged needs 65792 B > 48 KiB -> direct. */
    p = auto_plan(&c, (mqa_shape){1024, 4096, 20, 512});
    assert_int_equal(p.variant, QATTN_MQA_DIRECT);
    assert_non_null(strstr(p.reason, "staged: needs 65792 B"));
    /* Short rows keep direct even with a matrix unit. */
    p = auto_plan(&c, (mqa_shape){7, 20007, 64, 128});
    assert_int_equal(p.variant, QATTN_MQA_DIRECT);
    assert_true(p.kv_slices > 1); /* 20007 >= 16k columns are split */
    /* coopmat pinned with rows_per_subgroup 2 at H = 64 is impossible. */
    char err[256] = "";
    assert_int_equal(plan_for(&c, (mqa_shape){64, 64, 64, 128}, QATTN_MQA_COOPMAT, 2, 0, &p, err,
                              sizeof err),
                     QATTN_ERR_VARIANT_GATE);
    assert_non_null(strstr(err, "rows_per_subgroup 2 of H = 64 needs 8 m-tiles"));
    /* ... but fine at H = 32 (two rows of two m-tiles each). */
    assert_int_equal(plan_for(&c, (mqa_shape){64, 64, 32, 128}, QATTN_MQA_COOPMAT, 2, 0, &p, err,
                              sizeof err),
                     QATTN_OK);
    assert_int_equal(p.rows_per_subgroup, 2);
}

static void test_rdna4_decisions(void **state) {
    (void)state;
    const qattn_device_caps c = caps_rdna4();
    qattn_mqa_logits_plan p = auto_plan(&c, (mqa_shape){2048, 65536, 64, 128});
    assert_int_equal(p.variant, QATTN_MQA_COOPMAT);
    assert_int_equal(p.subgroup_size, 32); /* wave32 pinned for the matrix shapes */
    /* Without the matrix unit: staged up to D = 256 on 64 KiB ... */
    const qattn_device_caps n = caps_no_matrix(c);
    p = auto_plan(&n, (mqa_shape){2048, 65536, 64, 256});
    assert_int_equal(p.variant, QATTN_MQA_STAGED);
    assert_int_equal(p.subgroup_size, 64);
    assert_int_equal(p.kv_tile, 64);
    /* ... and D = 512 falls back to direct (65792 B > 65536). */
    p = auto_plan(&n, (mqa_shape){2048, 65536, 64, 512});
    assert_int_equal(p.variant, QATTN_MQA_DIRECT);
    assert_non_null(strstr(p.reason, "staged: needs 65792 B of shared memory for D = 512, device allows 65536"));
}

static void test_gfx942_decisions(void **state) {
    (void)state;
    const qattn_device_caps c = caps_gfx942();
    /* Wave 64: the same register budget holds twice the q pairs per lane. */
    qattn_mqa_logits_plan p = auto_plan(&c, (mqa_shape){2048, 65536, 64, 128});
    assert_int_equal(p.variant, QATTN_MQA_COOPMAT);
    assert_int_equal(p.subgroup_size, 64);
    assert_int_equal(p.rows_per_workgroup, 4); /* one row of 64 heads per subgroup */
    assert_true(p.shared_bytes <= 65536);
    p = auto_plan(&c, (mqa_shape){2048, 65536, 20, 512});
    assert_int_equal(p.variant, QATTN_MQA_DIRECT);
    assert_int_equal(p.matrix_shape.m, 0);
    /* Staged names the fp8 16x16x32 MFMA shape the device lists, so the
     * HIP backend launches the MFMA kernel because the plan says so. */
    p = auto_plan(&c, (mqa_shape){2048, 65536, 20, 128});
    assert_int_equal(p.variant, QATTN_MQA_STAGED);
    assert_int_equal(p.matrix_shape.k, 32);
    assert_int_equal(p.matrix_shape.a_type, QATTN_FP8_E4M3FNUZ);
}

/* The load width comes from offsets and strides at plan time. */
static void test_load_bytes(void **state) {
    (void)state;
    const qattn_device_caps c = caps_h200();
    qattn_mqa_logits_args a = make_args((mqa_shape){64, 4096, 64, 128}, QATTN_FP8_E4M3FN, QATTN_FP8_E4M3FN);
    qattn_mqa_logits_plan p;
    char err[256] = "";
    assert_int_equal(qattn_mqa_logits_plan_compute(&c, &a, NULL, &p, err, sizeof err), QATTN_OK);
    assert_int_equal(p.load_bytes, 16);
    a.k.offset = 4;
    assert_int_equal(qattn_mqa_logits_plan_compute(&c, &a, NULL, &p, err, sizeof err), QATTN_OK);
    assert_int_equal(p.load_bytes, 4);
    assert_non_null(strstr(p.reason, "4-byte loads"));
    a.k.offset = 0;
    a.q.strides[1] = 130; /* heads 130 bytes apart */
    a.q.strides[0] = 64 * 130;
    assert_int_equal(qattn_mqa_logits_plan_compute(&c, &a, NULL, &p, err, sizeof err), QATTN_OK);
    assert_int_equal(p.load_bytes, 2);
}

/* Rows per subgroup of the SIMT variants from heads, rows and KV length. */
static void test_rows_per_subgroup_rules(void **state) {
    (void)state;
    const qattn_device_caps c = caps_lavapipe();
    /* Cached prefix (S_kv >= 2 S): the head-count budget decides. */
    assert_int_equal(auto_plan(&c, (mqa_shape){1024, 65536, 16, 64}).rows_per_subgroup, 4);
    assert_int_equal(auto_plan(&c, (mqa_shape){1024, 65536, 32, 64}).rows_per_subgroup, 4);
    assert_int_equal(auto_plan(&c, (mqa_shape){1024, 65536, 64, 64}).rows_per_subgroup, 2);
    assert_int_equal(auto_plan(&c, (mqa_shape){1024, 65536, 128, 64}).rows_per_subgroup, 1);
    /* Causal prefill without prefix: 2 rows from 4096 rows, 1 below. */
    assert_int_equal(auto_plan(&c, (mqa_shape){4096, 4096, 64, 64}).rows_per_subgroup, 2);
    assert_int_equal(auto_plan(&c, (mqa_shape){4096, 4096, 16, 64}).rows_per_subgroup, 2);
    assert_int_equal(auto_plan(&c, (mqa_shape){2048, 2048, 16, 64}).rows_per_subgroup, 1);
    assert_int_equal(auto_plan(&c, (mqa_shape){4096, 4096, 128, 64}).rows_per_subgroup, 1);
    /* Packed sequences (S_kv < S): 1. */
    assert_int_equal(auto_plan(&c, (mqa_shape){8192, 4096, 16, 64}).rows_per_subgroup, 1);
    /* Staged keeps rows per subgroup x 4 subgroups per workgroup. */
    qattn_mqa_logits_plan p = auto_plan(&c, (mqa_shape){1024, 65536, 16, 64});
    assert_int_equal(p.variant, QATTN_MQA_STAGED);
    assert_int_equal(p.rows_per_workgroup, 16);
}

/* Slices: none below 16k columns, many for few rows over long KV, and the
 * 16 x 1.5M-column case plans with int32-safe bounds. */
static void test_slices(void **state) {
    (void)state;
    const qattn_device_caps c = caps_h200();
    assert_int_equal(auto_plan(&c, (mqa_shape){64, 16383, 64, 128}).kv_slices, 1);
    qattn_mqa_logits_plan p = auto_plan(&c, (mqa_shape){64, 16384, 64, 128});
    assert_true(p.kv_slices > 1);
    p = auto_plan(&c, (mqa_shape){16, 1500000, 64, 128});
    assert_true(p.kv_slices > 100);
    assert_true((int64_t)p.kv_slices * p.kv_per_slice >= 1500000);
    assert_true((int64_t)p.kv_per_slice >= 4096); /* slices stay >= 4096 columns */
    assert_int_equal(p.index64, 0);
    /* 4096 rows x 1M columns: logits row bases pass int32 -> 64-bit. */
    p = auto_plan(&c, (mqa_shape){4096, 1048576, 64, 128});
    assert_int_equal(p.index64, 1);
    /* Long KV with many rows: fewer slices (row blocks already fill the GPU). */
    qattn_mqa_logits_plan many = auto_plan(&c, (mqa_shape){8192, 65536, 64, 128});
    qattn_mqa_logits_plan few = auto_plan(&c, (mqa_shape){256, 65536, 64, 128});
    assert_true(many.kv_slices < few.kv_slices);
}

/* Bad options are argument errors; int32-edge shapes are refused by name. */
static void test_bad_options(void **state) {
    (void)state;
    const qattn_device_caps c = caps_h200();
    qattn_mqa_logits_plan p;
    char err[256] = "";
    assert_int_equal(plan_for(&c, (mqa_shape){64, 64, 64, 128}, QATTN_MQA_AUTO, 3, 0, &p, err,
                              sizeof err),
                     QATTN_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "rows_per_subgroup"));
    assert_int_equal(plan_for(&c, (mqa_shape){64, 64, 64, 128}, QATTN_MQA_AUTO, 0, -1, &p, err,
                              sizeof err),
                     QATTN_ERR_INVALID_ARGUMENT);
    assert_int_equal(plan_for(&c, (mqa_shape){64, 64, 64, 128}, (qattn_mqa_variant)9, 0, 0, &p,
                              err, sizeof err),
                     QATTN_ERR_INVALID_ARGUMENT);
    assert_int_equal(plan_for(&c, (mqa_shape){64, 64, 64, 96}, QATTN_MQA_AUTO, 0, 0, &p, err,
                              sizeof err),
                     QATTN_ERR_SHAPE);
    /* S_kv one short of INT32_MAX: its last tile would end past int32
     * (logits' row stride left at S_kv: one rounded up would pass int32). */
    qattn_mqa_logits_args big = make_args((mqa_shape){1, INT32_MAX - 1, 16, 64}, QATTN_FP8_E4M3FN,
                                          QATTN_FP8_E4M3FN);
    big.logits.strides[0] = INT32_MAX - 1;
    assert_int_equal(qattn_mqa_logits_plan_compute(&c, &big, NULL, &p, err, sizeof err),
                     QATTN_ERR_OVERFLOW);
    assert_non_null(strstr(err, "S_kv"));
    assert_int_equal(qattn_mqa_logits_plan_compute(NULL, NULL, NULL, &p, err, sizeof err),
                     QATTN_ERR_INVALID_ARGUMENT);
    assert_string_equal(qattn_mqa_variant_name(QATTN_MQA_COOPMAT), "coopmat");
    assert_string_equal(qattn_mqa_variant_name(QATTN_MQA_AUTO), "auto");
}

/* plan_create: validation first, then QATTN_MQA_VARIANT when options do not
 * pin (on the cpu backend, whose caps have no matrix unit). */
static qattn_buffer *alloc_buf(qattn_context *ctx, uint64_t bytes) {
    qattn_buffer *b = NULL;
    assert_int_equal(qattn_buffer_alloc(ctx, bytes, &b), QATTN_OK);
    return b;
}

/* The cpu backend with the H200's capabilities and no kernels: what
 * plan_create decides for that device (nothing is run). */
static qattn_status h200_caps(void *be, qattn_device_caps *caps) {
    (void)be;
    *caps = caps_h200();
    return QATTN_OK;
}

static void test_geometry_pins(void **state) {
    (void)state;
    qattn_backend_iface fake = *qattn_backend_cpu();
    fake.get_caps = h200_caps;
    fake.supports_op = NULL;
    qattn_context *ctx = NULL;
    char err[256];
    assert_int_equal(qattn_context_create(&fake, NULL, &ctx, err, sizeof err), QATTN_OK);
    mqa_shape s = {64, 4096, 64, 128};
    qattn_mqa_logits_args a = make_args(s, QATTN_FP8_E4M3FN, QATTN_FP8_E4M3FN);
    qattn_buffer *b = alloc_buf(ctx, 1 << 20);
    qattn_tensor *ts[] = {&a.q, &a.k, &a.k_scale, &a.weights, &a.ks, &a.ke, &a.logits};
    for (size_t i = 0; i < 7; ++i) ts[i]->buffer = b; /* overlap is fine for planning */
    a.logits.strides[0] = s.S_kv;
    qattn_mqa_logits_plan p, q;
    assert_int_equal(qattn_mqa_logits_plan_create(ctx, &a, NULL, &p), QATTN_OK);
    assert_int_equal(p.variant, QATTN_MQA_COOPMAT);
    assert_int_equal(p.m_tiles, 4);
    /* No pin = the planner's plan, byte for byte. */
    qattn_mqa_logits_geometry g = {0, 0, 0};
    assert_int_equal(qattn_experimental_mqa_logits_plan_create(ctx, &a, NULL, &g, &q), QATTN_OK);
    assert_memory_equal(&p, &q, sizeof p);
    /* One m-tile per subgroup: a row over four subgroups, two rows by the
     * planner's rule; one row is refused (wrong results on the H200). */
    g.m_tiles = 1;
    assert_int_equal(qattn_experimental_mqa_logits_plan_create(ctx, &a, NULL, &g, &q), QATTN_OK);
    assert_int_equal(q.m_tiles, 1);
    assert_int_equal(q.subgroups_per_row, 4);
    assert_int_equal(q.rows_per_workgroup, 2);
    assert_int_equal(q.subgroups_per_workgroup, 8);
    g.rows_per_workgroup = 1;
    assert_int_equal(qattn_experimental_mqa_logits_plan_create(ctx, &a, NULL, &g, &q), QATTN_OK);
    assert_int_not_equal(q.variant, QATTN_MQA_COOPMAT); /* AUTO steps down */
    assert_non_null(strstr(q.reason, "rows_per_workgroup 1"));
    {
        qattn_mqa_logits_options pin = QATTN_MQA_LOGITS_OPTIONS_INIT;
        pin.variant = QATTN_MQA_COOPMAT;
        assert_int_equal(qattn_experimental_mqa_logits_plan_create(ctx, &a, &pin, &g, &q),
                         QATTN_ERR_VARIANT_GATE);
        assert_non_null(strstr(qattn_last_error(ctx), "rows_per_workgroup 1"));
    }
    g.rows_per_workgroup = 0;
    g.n_tiles = 2;
    assert_int_equal(qattn_experimental_mqa_logits_plan_create(ctx, &a, NULL, &g, &q), QATTN_OK);
    assert_int_equal(q.kv_tile, 32);
    assert_int_equal(q.n_tiles, 2);
    /* With coopmat pinned, pins the device or the layout cannot hold are
     * gate failures naming the pin. */
    qattn_mqa_logits_options cm = QATTN_MQA_LOGITS_OPTIONS_INIT;
    cm.variant = QATTN_MQA_COOPMAT;
    g = (qattn_mqa_logits_geometry){3, 0, 0};
    assert_int_equal(qattn_experimental_mqa_logits_plan_create(ctx, &a, &cm, &g, &q), QATTN_ERR_VARIANT_GATE);
    assert_non_null(strstr(qattn_last_error(ctx), "m_tiles 3"));
    g = (qattn_mqa_logits_geometry){0, 5, 0};
    assert_int_equal(qattn_experimental_mqa_logits_plan_create(ctx, &a, &cm, &g, &q), QATTN_ERR_VARIANT_GATE);
    assert_non_null(strstr(qattn_last_error(ctx), "n_tiles 5"));
    g = (qattn_mqa_logits_geometry){1, 4, 16}; /* 64 subgroups: past 1024 threads */
    assert_int_equal(qattn_experimental_mqa_logits_plan_create(ctx, &a, &cm, &g, &q), QATTN_ERR_VARIANT_GATE);
    g = (qattn_mqa_logits_geometry){1, 4, 8}; /* 32 subgroups x 64-column partials: past 48 KiB */
    assert_int_equal(qattn_experimental_mqa_logits_plan_create(ctx, &a, &cm, &g, &q), QATTN_ERR_VARIANT_GATE);
    assert_non_null(strstr(qattn_last_error(ctx), "shared memory"));
    /* Under AUTO such a pin steps down like any failed gate, saying why. */
    assert_int_equal(qattn_experimental_mqa_logits_plan_create(ctx, &a, NULL, &g, &q), QATTN_OK);
    assert_int_equal(q.variant, QATTN_MQA_STAGED);
    assert_non_null(strstr(q.reason, "shared memory"));
    assert_int_equal(qattn_experimental_mqa_logits_plan_create(ctx, &a, NULL, NULL, &q),
                     QATTN_ERR_INVALID_ARGUMENT);
    /* The product planner reads no geometry from the environment. */
    setenv("QATTN_MQA_MTILES", "1", 1);
    setenv("QATTN_MQA_NTILES", "x", 1);
    assert_int_equal(qattn_mqa_logits_plan_create(ctx, &a, NULL, &q), QATTN_OK);
    assert_memory_equal(&p, &q, sizeof p);
    unsetenv("QATTN_MQA_MTILES");
    unsetenv("QATTN_MQA_NTILES");
    qattn_buffer_free(ctx, b);
    qattn_context_free(ctx);
}

static void test_plan_create_env(void **state) {
    (void)state;
    qattn_context *ctx = NULL;
    char err[256];
    assert_int_equal(qattn_context_create(qattn_backend_cpu(), NULL, &ctx, err, sizeof err),
                     QATTN_OK);
    mqa_shape s = {32, 300, 16, 64};
    qattn_mqa_logits_args a = make_args(s, QATTN_FP8_E4M3FN, QATTN_FP8_E4M3FNUZ);
    qattn_buffer *b = alloc_buf(ctx, 1 << 20);
    qattn_tensor *ts[] = {&a.q, &a.k, &a.k_scale, &a.weights, &a.ks, &a.ke, &a.logits};
    for (size_t i = 0; i < 7; ++i) ts[i]->buffer = b; /* overlap is fine for planning */
    qattn_mqa_logits_plan p;

    unsetenv("QATTN_MQA_VARIANT");
    assert_int_equal(qattn_mqa_logits_plan_create(ctx, &a, NULL, &p), QATTN_OK);
    assert_int_equal(p.variant, QATTN_MQA_STAGED);
    setenv("QATTN_MQA_VARIANT", "Direct", 1);
    assert_int_equal(qattn_mqa_logits_plan_create(ctx, &a, NULL, &p), QATTN_OK);
    assert_int_equal(p.variant, QATTN_MQA_DIRECT);
    /* Options win over the environment. */
    qattn_mqa_logits_options o = QATTN_MQA_LOGITS_OPTIONS_INIT;
    o.variant = QATTN_MQA_STAGED;
    assert_int_equal(qattn_mqa_logits_plan_create(ctx, &a, &o, &p), QATTN_OK);
    assert_int_equal(p.variant, QATTN_MQA_STAGED);
    setenv("QATTN_MQA_VARIANT", "coopmat", 1);
    assert_int_equal(qattn_mqa_logits_plan_create(ctx, &a, NULL, &p), QATTN_ERR_VARIANT_GATE);
    assert_non_null(strstr(qattn_last_error(ctx), "coopmat"));
    setenv("QATTN_MQA_VARIANT", "fast", 1);
    assert_int_equal(qattn_mqa_logits_plan_create(ctx, &a, NULL, &p), QATTN_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(qattn_last_error(ctx), "QATTN_MQA_VARIANT=fast"));
    unsetenv("QATTN_MQA_VARIANT");
    /* Geometry pins leave the other variants alone (no matrix unit here). */
    const qattn_mqa_logits_geometry g = {2, 1, 0};
    assert_int_equal(qattn_experimental_mqa_logits_plan_create(ctx, &a, NULL, &g, &p), QATTN_OK);
    assert_int_equal(p.variant, QATTN_MQA_STAGED);
    /* Validation runs first: a logits row stride below S_kv is refused. */
    a.logits.strides[0] = s.S_kv - 1;
    assert_int_equal(qattn_mqa_logits_plan_create(ctx, &a, NULL, &p), QATTN_ERR_STRIDE);
    assert_non_null(strstr(qattn_last_error(ctx), "logits"));
    qattn_buffer_free(ctx, b);
    qattn_context_free(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lavapipe_decisions),
        cmocka_unit_test(test_h200_decisions),
        cmocka_unit_test(test_rdna4_decisions),
        cmocka_unit_test(test_gfx942_decisions),
        cmocka_unit_test(test_rows_per_subgroup_rules),
        cmocka_unit_test(test_slices),
        cmocka_unit_test(test_split_is_a_function_of_shape),
        cmocka_unit_test(test_bad_options),
        cmocka_unit_test(test_launcher_contract),
        cmocka_unit_test(test_load_bytes),
        cmocka_unit_test(test_geometry_pins),
        cmocka_unit_test(test_plan_create_env),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
