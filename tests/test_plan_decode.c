/*
 * The decode planner, launch-free: its decisions for the capabilities of
 * real devices (fake caps: lavapipe, the H200 through Vulkan, RDNA4,
 * gfx942) over a sweep of shapes, dtypes and pins, each checked against
 * rules written here independently of core/src/plan_decode.c: the variant
 * and matrix shape, the block of query heads, one subgroup per workgroup,
 * the exact shared memory of shaders/decode_tiled.comp's declarations, the
 * split policy, the grids and the workspace layout. Then every condition of
 * the matrix gate failing alone, subgroup and layout refusals, rank-4
 * caches, the QATTN_DECODE_VARIANT pin through qattn_decode_plan_create, and
 * (when the Vulkan backend is built) that the backend's launch of a plan is
 * exactly the plan (qattn_vk_decode_launch_of, no device needed).
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

#include "qattn/backend.h" /* the kernel-argument builders */
#include "qattn/qattn.h"

#include "fake_devices.h"


#ifdef QATTN_TEST_VK_LAUNCH
#include "vk_internal.h"
#endif

/* ---- reporting ------------------------------------------------------------- */
/* The case being checked, printed with any failed expectation so a sweep
 * failure says which shape on which device. */
static char g_case[320];

#define EXPECT(cond)                                                                      \
    do {                                                                                  \
        if (!(cond)) {                                                                    \
            print_error("%s:%d: expected %s\n  case: %s\n", __FILE__, __LINE__, #cond, g_case); \
            fail();                                                                       \
        }                                                                                 \
    } while (0)

#define EXPECT_EQ(got, want)                                                              \
    do {                                                                                  \
        const long long g_ = (long long)(got), w_ = (long long)(want);                    \
        if (g_ != w_) {                                                                   \
            print_error("%s:%d: %s = %lld, expected %s = %lld\n  case: %s\n", __FILE__, __LINE__, \
                        #got, g_, #want, w_, g_case);                                     \
            fail();                                                                       \
        }                                                                                 \
    } while (0)

static void expect_contains(const char *hay, const char *needle) {
    if (!strstr(hay, needle)) {
        print_error("expected \"%s\" in \"%s\"\n  case: %s\n", needle, hay, g_case);
        fail();
    }
}

/* ---- shapes -------------------------------------------------------------- */
/* Descriptors only: the pure planner reads shapes, strides and offsets,
 * never the buffers. */
static qattn_buffer *const FAKE = (qattn_buffer *)(uintptr_t)0x1000;

typedef struct shape {
    int B, R, Hq, Hkv, D, L;
    qattn_dtype dt;
} shape;

static qattn_tensor t_contig(qattn_dtype dt, int rank, int64_t a, int64_t b, int64_t c, int64_t d) {
    const int64_t s[4] = {a, b, c, d};
    return qattn_tensor_contiguous(FAKE, 0, dt, rank, s);
}

static int64_t slots_of(shape s) { return (int64_t)s.B * (((int64_t)s.L + 15) / 16 + 1) * 16; }

/* A contiguous rank-3 cache [slots, Hkv, D] (scales [slots, Hkv]). */
static qattn_decode_args args_of(shape s) {
    qattn_decode_args a;
    memset(&a, 0, sizeof a);
    const int64_t slots = slots_of(s);
    a.q = t_contig(QATTN_BF16, 4, s.B, s.R, s.Hq, s.D);
    a.k_cache = t_contig(s.dt, 3, slots, s.Hkv, s.D, 0);
    a.v_cache = t_contig(s.dt, 3, slots, s.Hkv, s.D, 0);
    if (s.dt != QATTN_BF16) {
        a.k_scale = t_contig(QATTN_F32, 2, slots, s.Hkv, 0, 0);
        a.v_scale = t_contig(QATTN_F32, 2, slots, s.Hkv, 0, 0);
    }
    a.kv_indptr = t_contig(QATTN_I32, 1, s.B + 1, 0, 0, 0);
    a.kv_indices = t_contig(QATTN_I32, 1, slots / 16, 0, 0, 0);
    a.kv_lens = t_contig(QATTN_I32, 1, s.B, 0, 0, 0);
    a.o = t_contig(QATTN_BF16, 4, s.B, s.R, s.Hq, s.D);
    a.page_size = 16;
    a.max_kv_len = s.L;
    a.sm_scale = 0.088f;
    a.window_left = -1;
    return a;
}

/* The same decode over a rank-4 cache [N_pages, P, Hkv, D] (scales
 * [N_pages, P, Hkv]) with P = 16. */
static qattn_decode_args args_paged(shape s) {
    qattn_decode_args a = args_of(s);
    const int64_t pages = slots_of(s) / 16;
    a.k_cache = t_contig(s.dt, 4, pages, 16, s.Hkv, s.D);
    a.v_cache = t_contig(s.dt, 4, pages, 16, s.Hkv, s.D);
    if (s.dt != QATTN_BF16) {
        a.k_scale = t_contig(QATTN_F32, 3, pages, 16, s.Hkv, 0);
        a.v_scale = t_contig(QATTN_F32, 3, pages, 16, s.Hkv, 0);
    }
    return a;
}

static const shape TARGET = {1, 1, 32, 8, 128, 32768, QATTN_FP8_E4M3FN}; /* GQA 4 */

static void describe(const qattn_device_caps *c, shape s, int rank, qattn_decode_variant pin, int splits) {
    snprintf(g_case, sizeof g_case, "%.95s: B %d R %d Hq %d Hkv %d D %d L %d %s rank %d, pin %s, splits %d",
             c->arch, s.B, s.R, s.Hq, s.Hkv, s.D, s.L, qattn_dtype_name(s.dt), rank,
             qattn_decode_variant_name(pin), splits);
}

static qattn_status plan_of(const qattn_device_caps *c, const qattn_decode_args *a,
                            qattn_decode_variant pin, int splits, qattn_decode_plan *p, char *err) {
    qattn_decode_options o = QATTN_DECODE_OPTIONS_INIT;
    o.variant = pin;
    o.num_splits = splits;
    err[0] = '\0';
    memset(p, 0, sizeof *p);
    return qattn_decode_plan_compute(c, a, &o, p, err, 256);
}

/* Plans shape s on c (rank-3 cache), describing the case first. */
static qattn_status plan_shape(const qattn_device_caps *c, shape s, qattn_decode_variant pin, int splits,
                               qattn_decode_plan *p, char *err) {
    describe(c, s, 3, pin, splits);
    qattn_decode_args a = args_of(s);
    return plan_of(c, &a, pin, splits, p, err);
}

/* ---- the rules, written from the shader and the design --------------------- */

/* Lanes per subgroup the kernel is built for: 32, or the nearest size the
 * device runs. */
static int expected_subgroup(const qattn_device_caps *c) {
    int s = 32;
    if (s < (int)c->subgroup_size_min) s = (int)c->subgroup_size_min;
    if (s > (int)c->subgroup_size_max) s = (int)c->subgroup_size_max;
    return s;
}

/* The largest divisor qh of G with qh * R <= 16. */
static int expected_qh(int G, int R) {
    int best = 1;
    for (int d = 1; d <= G; ++d)
        if (G % d == 0 && d * R <= 16) best = d;
    return best;
}

static int has_f16_shape(const qattn_device_caps *c, int n) {
    for (int i = 0; i < c->n_matrix_shapes; ++i) {
        const qattn_matrix_shape *s = &c->matrix_shapes[i];
        if (s->m == 16 && s->n == n && s->k == 16 && s->a_type == QATTN_F16 && s->c_type == QATTN_F32) return 1;
    }
    return 0;
}

/* Whether the regs gate takes shape s on c: a known fragment layout and a
 * shape its gate takes (page_size is the shapes' 16 here), in subgroups of
 * 32 or, on the HIP backend's gfx942 (the only fake device whose layout is
 * known from its ISA, qh_target_caps.h), waves of 64. */
static int expected_subgroup(const qattn_device_caps *c);
static int expected_regs(const qattn_device_caps *c, shape s) {
    const int sg = expected_subgroup(c);
    return (c->features & QATTN_FEAT_FRAGMENT_LAYOUT) && has_f16_shape(c, 16) && s.dt != QATTN_BF16 &&
           (s.D == 64 || s.D == 128) && (sg == 32 || (sg == 64 && strcmp(c->arch, "gfx942") == 0));
}

/* Matrix N the matrix variant uses for a block of `rows` query rows, or 0
 * when its gate fails: fp8 / int8 caches, a matrix unit, 16x8x16 f16 -> f32
 * for at most 8 rows where the device has it, else 16x16x16. */
static int expected_matrix_n(const qattn_device_caps *c, qattn_dtype dt, int rows) {
    if (dt == QATTN_BF16 || !(c->features & QATTN_FEAT_COOPMAT)) return 0;
    if (rows <= 8 && has_f16_shape(c, 8)) return 8;
    return has_f16_shape(c, 16) ? 16 : 0;
}

/* Shared memory of shaders/decode_tiled.comp, array by array as declared
 * there, for head dim D and NR row slots (TK = 16 keys per tile, staged rows
 * of LD4 = D/8 + 1 uvec4, P^T rows of LDP = TK + 8 f16). */
static uint64_t shader_shared_bytes(int D, int NR) {
    const uint64_t TK = 16, LD4 = (uint64_t)D / 8 + 1, LDP = TK + 8, nr = (uint64_t)NR;
    const uint64_t UVEC4 = 16, F32 = 4, F16 = 2, I32 = 4;
    const uint64_t sq = nr * LD4 * UVEC4, sqf = nr * F32;
    const uint64_t skt = TK * LD4 * UVEC4, svt = TK * LD4 * UVEC4;
    const uint64_t ss = TK * nr * F32, sp = nr * LDP * F16;
    const uint64_t sks = TK * F32, svs = TK * F32, spos = TK * I32;
    return sq + sqf + skt + svt + ss + sp + sks + svs + spos;
}

/* Every rule a successful plan obeys for its shape on its device. `pin` is
 * what was asked for, `forced` the requested split count (0: planner). */
static void check_plan(const qattn_device_caps *c, shape s, qattn_decode_variant pin, int forced,
                       const qattn_decode_plan *p) {
    const int G = s.Hq / s.Hkv;
    /* what it was made for */
    EXPECT_EQ(p->batch, s.B);
    EXPECT_EQ(p->rows, s.R);
    EXPECT_EQ(p->q_heads, s.Hq);
    EXPECT_EQ(p->kv_heads, s.Hkv);
    EXPECT_EQ(p->head_dim, s.D);
    EXPECT_EQ(p->head_dim_v, s.D);
    EXPECT_EQ(p->kv_dtype, s.dt);
    EXPECT_EQ(p->max_kv_len, s.L);
    /* one subgroup per workgroup */
    EXPECT_EQ(p->subgroup_size, expected_subgroup(c));
    EXPECT_EQ(p->workgroup_size, p->subgroup_size);
    EXPECT(p->workgroup_size <= (int)c->max_workgroup_size);
    EXPECT_EQ(p->keys_per_tile, 16);
    /* the block of query heads */
    const int qh = expected_qh(G, s.R), rows = qh * s.R;
    EXPECT_EQ(p->q_heads_per_workgroup, qh);
    /* variant and row slots */
    const int mn = expected_matrix_n(c, s.dt, rows);
    const int regs = expected_regs(c, s);
    const qattn_decode_variant want = pin != QATTN_DECODE_AUTO ? pin
                                      : regs                   ? QATTN_DECODE_REGS
                                      : mn                     ? QATTN_DECODE_MATRIX
                                                               : QATTN_DECODE_SIMT;
    EXPECT_EQ(p->variant, want);
    if (p->variant == QATTN_DECODE_MATRIX) {
        EXPECT(mn != 0);
        EXPECT_EQ(p->matrix_shape.m, 16);
        EXPECT_EQ(p->matrix_shape.n, mn);
        EXPECT_EQ(p->matrix_shape.k, 16);
        EXPECT_EQ(p->matrix_shape.a_type, QATTN_F16);
        EXPECT_EQ(p->matrix_shape.c_type, QATTN_F32);
        EXPECT_EQ(p->row_slots, mn);
        EXPECT(p->row_slots >= rows);
        /* the fake devices' fragment layouts are unknown, or the shape is one regs refuses */
        if (pin == QATTN_DECODE_AUTO) expect_contains(p->reason, "regs gate");
    } else if (p->variant == QATTN_DECODE_REGS) {
        EXPECT_EQ(p->row_slots, 16);
        EXPECT_EQ(p->matrix_shape.n, 16);
        EXPECT_EQ(p->page_tiled, 1);
        EXPECT_EQ(p->load_bytes, 16);
        EXPECT(s.D == 64 || s.D == 128);
        EXPECT(s.dt != QATTN_BF16);
        if (pin == QATTN_DECODE_AUTO) EXPECT_EQ(p->reason[0], '\0');
    } else {
        EXPECT_EQ(p->row_slots, rows);
        EXPECT_EQ(p->matrix_shape.m, 0);
        EXPECT_EQ(p->matrix_shape.n, 0);
        EXPECT_EQ(p->matrix_shape.k, 0);
        if (pin == QATTN_DECODE_AUTO) expect_contains(p->reason, "matrix gate");
    }
    if (pin != QATTN_DECODE_AUTO) expect_contains(p->reason, "pinned");
    /* shared memory: exactly the shader's, within the device */
    /* regs: q's 16 rows of D + 8 f16 (shaders/decode_regs.comp, sq) */
    EXPECT_EQ(p->shared_bytes,
              p->variant == QATTN_DECODE_REGS ? 32u * (uint64_t)(s.D + 8) : shader_shared_bytes(s.D, p->row_slots));
    EXPECT(p->shared_bytes <= c->max_shared_bytes);
    /* splits */
    const int64_t S = p->num_splits, K = p->keys_per_split;
    EXPECT(S >= 1 && S <= QATTN_MAX_SPLITS);
    EXPECT(K >= 16);
    EXPECT_EQ(K % 16, 0);
    /* The last split runs to the request's end: K is clamped below INT32_MAX. */
    EXPECT(S * K >= s.L || K == INT32_MAX / 16 * 16);
    if (forced) {
        EXPECT_EQ(S, forced);
    } else {
        /* no split starts at or past the longest request's end */
        if (s.L == 0) EXPECT_EQ(S, 1);
        else EXPECT((S - 1) * K < s.L);
    }
    /* grids */
    EXPECT_EQ(p->grid[0], S);
    EXPECT_EQ(p->grid[1], (int64_t)s.Hkv * (G / qh));
    EXPECT_EQ(p->grid[2], s.B);
    EXPECT_EQ(p->merge_grid[0], (int64_t)G * s.R * (s.D / p->merge_dims));
    EXPECT(p->merge_dims % 4 == 0 && s.D % p->merge_dims == 0);
    EXPECT_EQ(p->page_tiled, 1); /* args_of: pages of 16 rows */
    EXPECT_EQ(p->merge_grid[1], s.Hkv);
    EXPECT_EQ(p->merge_grid[2], s.B);
    EXPECT(p->merge_workgroup_size >= 1 && p->merge_workgroup_size <= (int)c->max_workgroup_size);
    for (int i = 0; i < 3; ++i) EXPECT(p->grid[i] <= 65535 && p->merge_grid[i] <= 65535);
    /* workspace: [slot][split][Dv] f32 partial outputs, then [slot][split][2] f32 */
    const uint64_t slots = (uint64_t)s.B * (uint64_t)s.Hkv * (uint64_t)(G / qh) * (uint64_t)p->row_slots;
    const uint64_t o_bytes = slots * (uint64_t)S * (uint64_t)s.D * 4u;
    EXPECT_EQ(p->partial_o_offset % 256u, 0);
    EXPECT(p->partial_o_offset + o_bytes <= p->partial_ml_offset);
    EXPECT_EQ(p->partial_ml_offset % 256u, 0);
    EXPECT(p->partial_ml_offset >= o_bytes);
    EXPECT(p->partial_ml_offset < p->partial_o_offset + o_bytes + 256u); /* no gap beyond the alignment */
    EXPECT_EQ(p->workspace_bytes, p->partial_ml_offset + slots * (uint64_t)S * 8u);
}

/* ---- the sweep ------------------------------------------------------------ */
typedef void (*plan_visitor)(const qattn_device_caps *c, shape s, qattn_decode_variant pin, int forced,
                             const qattn_decode_plan *p);

/* Plans every shape of the tables on every device with every pin (and a
 * few forced split counts), checks each outcome against the rules and
 * hands each successful plan to `visit`. Returns the number of plans. */
static int sweep(plan_visitor visit) {
    const qattn_device_caps devs[4] = {caps_lavapipe(), caps_h200(), caps_rdna4(), caps_gfx942()};
    static const qattn_dtype dts[] = {QATTN_BF16, QATTN_FP8_E4M3FN, QATTN_FP8_E4M3FNUZ, QATTN_I8};
    static const int dims[] = {64, 128, 256}, rs[] = {1, 2, 3, 5, 8}, gs[] = {1, 2, 3, 4, 6, 8, 16};
    static const int hkvs[] = {1, 8}, bs[] = {1, 3}, ls[] = {0, 1, 129, 4099, 32768};
    static const int forced[] = {0, 1, 7, 256}; /* forced counts: AUTO at the longest length only */
    /* one index over the product of the tables, innermost first */
    enum { NF = 4, NP = QATTN_DECODE_VARIANT_COUNT, NL = 5, NB = 2, NH = 2, NG = 7, NR = 5, NX = 3, NT = 4, ND = 4 };
    int n = 0;
    for (long i = 0; i < (long)NF * NP * NL * NB * NH * NG * NR * NX * NT * ND; ++i) {
        long k = i;
        const int fi = (int)(k % NF), pin = (int)((k /= NF) % NP), li = (int)((k /= NP) % NL);
        const int bi = (int)((k /= NL) % NB), hi = (int)((k /= NB) % NH), gi = (int)((k /= NH) % NG);
        const int ri = (int)((k /= NG) % NR), xi = (int)((k /= NR) % NX), ti = (int)((k /= NX) % NT);
        const int di = (int)((k /= NT) % ND);
        if (fi > 0 && (pin != QATTN_DECODE_AUTO || li != NL - 1)) continue;
        const qattn_device_caps *c = &devs[di];
        const qattn_decode_variant v = (qattn_decode_variant)pin;
        const shape s = {bs[bi], rs[ri], gs[gi] * hkvs[hi], hkvs[hi], dims[xi], ls[li], dts[ti]};
        qattn_decode_plan p;
        char err[256];
        const qattn_status st = plan_shape(c, s, v, forced[fi], &p, err);
        const int rows = expected_qh(gs[gi], rs[ri]) * rs[ri];
        if (v == QATTN_DECODE_MATRIX && !expected_matrix_n(c, s.dt, rows)) {
            EXPECT_EQ(st, QATTN_ERR_VARIANT_GATE);
            expect_contains(err, "matrix gate");
            continue;
        }
        if (v == QATTN_DECODE_REGS && !expected_regs(c, s)) { /* only gfx942 knows its fragment layout */
            EXPECT_EQ(st, QATTN_ERR_VARIANT_GATE);
            expect_contains(err, "regs gate");
            continue;
        }
        if (st != QATTN_OK) print_error("refused: %s\n", err);
        EXPECT_EQ(st, QATTN_OK);
        check_plan(c, s, v, forced[fi], &p);
        if (visit) visit(c, s, v, forced[fi], &p);
        ++n;
    }
    return n;
}

static void test_sweep(void **state) {
    (void)state;
    const int n = sweep(NULL);
    print_message("sweep: %d plans\n", n);
    assert_true(n > 20000);
}

/* ---- decisions for the devices ---------------------------------------------- */
static void test_devices(void **state) {
    (void)state;
    const qattn_device_caps h = caps_h200(), lvp = caps_lavapipe(), rd = caps_rdna4(), mi = caps_gfx942();
    qattn_decode_plan p;
    char err[256];
    /* H200: matrix for fp8 fn / fnuz and int8; 8 rows take 16x8x16. */
    static const qattn_dtype mat[] = {QATTN_FP8_E4M3FN, QATTN_FP8_E4M3FNUZ, QATTN_I8};
    for (int i = 0; i < 3; ++i) {
        shape s = TARGET;
        s.dt = mat[i];
        s.Hq = 64; /* G 8: 8 rows */
        assert_int_equal(plan_shape(&h, s, QATTN_DECODE_AUTO, 0, &p, err), QATTN_OK);
        EXPECT_EQ(p.variant, QATTN_DECODE_MATRIX);
        EXPECT_EQ(p.q_heads_per_workgroup, 8);
        EXPECT_EQ(p.matrix_shape.n, 8);
        EXPECT_EQ(p.row_slots, 8);
        EXPECT_EQ(p.subgroup_size, 32);
        EXPECT_EQ(p.workgroup_size, 32);
        expect_contains(p.reason, "regs gate: the fragment layout");
        /* 16 rows (G 8, R 2) take 16x16x16 */
        s.R = 2;
        assert_int_equal(plan_shape(&h, s, QATTN_DECODE_AUTO, 0, &p, err), QATTN_OK);
        EXPECT_EQ(p.variant, QATTN_DECODE_MATRIX);
        EXPECT_EQ(p.matrix_shape.n, 16);
        EXPECT_EQ(p.row_slots, 16);
        /* 12 rows (G 8, R 3: 4 heads) too */
        s.R = 3;
        assert_int_equal(plan_shape(&h, s, QATTN_DECODE_AUTO, 0, &p, err), QATTN_OK);
        EXPECT_EQ(p.q_heads_per_workgroup, 4);
        EXPECT_EQ(p.matrix_shape.n, 16);
        EXPECT_EQ(p.row_slots, 16);
    }
    /* GQA 4, one row: 4 rows in 8 slots */
    assert_int_equal(plan_shape(&h, TARGET, QATTN_DECODE_AUTO, 0, &p, err), QATTN_OK);
    EXPECT_EQ(p.variant, QATTN_DECODE_MATRIX);
    EXPECT_EQ(p.q_heads_per_workgroup, 4);
    EXPECT_EQ(p.row_slots, 8);
    /* bf16: simt, the reason names the matrix gate's rule */
    shape b = TARGET;
    b.dt = QATTN_BF16;
    assert_int_equal(plan_shape(&h, b, QATTN_DECODE_AUTO, 0, &p, err), QATTN_OK);
    EXPECT_EQ(p.variant, QATTN_DECODE_SIMT);
    expect_contains(p.reason, "matrix gate: a bf16 cache");
    EXPECT_EQ(p.row_slots, 4);
    /* ...and a pinned matrix on bf16 is an error naming that rule */
    assert_int_equal(plan_shape(&h, b, QATTN_DECODE_MATRIX, 0, &p, err), QATTN_ERR_VARIANT_GATE);
    expect_contains(err, "matrix gate: a bf16 cache");
    /* pinned simt where matrix would be chosen */
    assert_int_equal(plan_shape(&h, TARGET, QATTN_DECODE_SIMT, 0, &p, err), QATTN_OK);
    EXPECT_EQ(p.variant, QATTN_DECODE_SIMT);
    EXPECT_EQ(p.row_slots, 4);
    expect_contains(p.reason, "pinned");
    /* lavapipe: no matrix unit, 8-lane subgroups */
    assert_int_equal(plan_shape(&lvp, TARGET, QATTN_DECODE_AUTO, 0, &p, err), QATTN_OK);
    EXPECT_EQ(p.variant, QATTN_DECODE_SIMT);
    expect_contains(p.reason, "matrix gate: device vulkan:llvmpipe has no matrix unit");
    EXPECT_EQ(p.subgroup_size, 8);
    EXPECT_EQ(p.workgroup_size, 8);
    assert_int_equal(plan_shape(&lvp, TARGET, QATTN_DECODE_MATRIX, 0, &p, err), QATTN_ERR_VARIANT_GATE);
    expect_contains(err, "has no matrix unit");
    /* RDNA4 has no 16x8x16: 4 rows take 16x16x16; subgroups pinned to 32 */
    assert_int_equal(plan_shape(&rd, TARGET, QATTN_DECODE_AUTO, 0, &p, err), QATTN_OK);
    EXPECT_EQ(p.variant, QATTN_DECODE_MATRIX);
    EXPECT_EQ(p.matrix_shape.n, 16);
    EXPECT_EQ(p.row_slots, 16);
    EXPECT_EQ(p.subgroup_size, 32);
    /* gfx942: waves of 64; the HIP backend knows its fragment layout: regs */
    assert_int_equal(plan_shape(&mi, TARGET, QATTN_DECODE_AUTO, 0, &p, err), QATTN_OK);
    EXPECT_EQ(p.variant, QATTN_DECODE_REGS);
    EXPECT_EQ(p.subgroup_size, 64);
    EXPECT_EQ(p.workgroup_size, 64);
    /* D 256 with 16 rows fits lavapipe's 32 KiB, for every dtype */
    static const qattn_dtype all[] = {QATTN_BF16, QATTN_FP8_E4M3FN, QATTN_FP8_E4M3FNUZ, QATTN_I8};
    for (int i = 0; i < 4; ++i) {
        shape s = {2, 2, 64, 8, 256, 4099, all[i]};
        assert_int_equal(plan_shape(&lvp, s, QATTN_DECODE_AUTO, 0, &p, err), QATTN_OK);
        EXPECT_EQ(p.row_slots, 16);
        EXPECT_EQ(p.shared_bytes, shader_shared_bytes(256, 16));
        EXPECT(p.shared_bytes <= 32768);
        check_plan(&lvp, s, QATTN_DECODE_AUTO, 0, &p);
    }
}

/* ---- the matrix gate, one condition at a time ------------------------------ */
typedef void (*breaker)(shape *s, qattn_device_caps *c);
static void m_bf16(shape *s, qattn_device_caps *c) { (void)c; s->dt = QATTN_BF16; }
static void m_nofeat(shape *s, qattn_device_caps *c) { (void)s; c->features &= ~(uint32_t)QATTN_FEAT_COOPMAT; }
/* only shapes that are not 16xNx16 f16 -> f32 */
static void m_noshape(shape *s, qattn_device_caps *c) {
    (void)s;
    c->matrix_shapes[0] = mshape(16, 16, 16, QATTN_F16, QATTN_F16);
    c->matrix_shapes[1] = mshape(16, 8, 16, QATTN_F16, QATTN_F16);
    c->matrix_shapes[2] = mshape(16, 16, 16, QATTN_BF16, QATTN_F32);
    c->matrix_shapes[3] = mshape(32, 8, 16, QATTN_F16, QATTN_F32);
    c->matrix_shapes[4] = mshape(16, 8, 8, QATTN_F16, QATTN_F32);
    c->n_matrix_shapes = 5;
}
/* 16 rows with only 16x8x16 */
static void m_no16(shape *s, qattn_device_caps *c) {
    s->R = 4; /* G 4: 16 rows */
    c->matrix_shapes[0] = mshape(16, 8, 16, QATTN_F16, QATTN_F32);
    c->n_matrix_shapes = 1;
}
/* a shape the device lists past its count does not exist */
static void m_count(shape *s, qattn_device_caps *c) {
    (void)s;
    c->matrix_shapes[0] = mshape(16, 16, 16, QATTN_F16, QATTN_F16);
    c->matrix_shapes[1] = mshape(16, 16, 16, QATTN_F16, QATTN_F32);
    c->n_matrix_shapes = 1;
}

static void test_matrix_gate(void **state) {
    (void)state;
    static const struct {
        breaker f;
        const char *why;
    } conds[] = {
        {m_bf16, "matrix gate: a bf16 cache needs bf16 matrix operands"},
        {m_nofeat, "matrix gate: device vulkan:NVIDIA H200 has no matrix unit"},
        {m_noshape, "matrix gate: device vulkan:NVIDIA H200 offers no 16x"},
        {m_no16, "offers no 16x16x16 f16 -> f32 shape"},
        {m_count, "offers no 16x"},
    };
    for (size_t i = 0; i < sizeof conds / sizeof conds[0]; ++i) {
        qattn_device_caps c = caps_h200();
        shape s = TARGET;
        qattn_decode_plan p;
        char err[256];
        /* It passes untouched (the row count of the broken case too)... */
        if (conds[i].f == m_no16) s.R = 4;
        assert_int_equal(plan_shape(&c, s, QATTN_DECODE_AUTO, 0, &p, err), QATTN_OK);
        EXPECT_EQ(p.variant, QATTN_DECODE_MATRIX);
        /* ...and with exactly this condition broken AUTO takes simt, saying
         * why, and a pinned matrix is an error naming it. */
        conds[i].f(&s, &c);
        assert_int_equal(plan_shape(&c, s, QATTN_DECODE_AUTO, 0, &p, err), QATTN_OK);
        EXPECT_EQ(p.variant, QATTN_DECODE_SIMT);
        expect_contains(p.reason, conds[i].why);
        check_plan(&c, s, QATTN_DECODE_AUTO, 0, &p);
        assert_int_equal(plan_shape(&c, s, QATTN_DECODE_MATRIX, 0, &p, err), QATTN_ERR_VARIANT_GATE);
        expect_contains(err, conds[i].why);
    }
    /* Where 16x8x16 is missing, few rows still take 16x16x16. */
    qattn_device_caps c = caps_h200();
    c.matrix_shapes[2] = mshape(16, 16, 16, QATTN_BF16, QATTN_F32);
    qattn_decode_plan p;
    char err[256];
    assert_int_equal(plan_shape(&c, TARGET, QATTN_DECODE_AUTO, 0, &p, err), QATTN_OK);
    EXPECT_EQ(p.variant, QATTN_DECODE_MATRIX);
    EXPECT_EQ(p.matrix_shape.n, 16);
}

/* ---- subgroups -------------------------------------------------------------- */
static void test_subgroups(void **state) {
    (void)state;
    qattn_decode_plan p;
    char err[256];
    /* a size range with control: 32 where allowed, else the nearest */
    static const struct {
        uint32_t lo, hi;
        int want;
    } ok[] = {{4, 128, 32}, {32, 64, 32}, {64, 128, 64}, {8, 16, 16}, {16, 16, 16}};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; ++i) {
        qattn_device_caps c = caps_rdna4();
        c.subgroup_size_min = ok[i].lo;
        c.subgroup_size_max = ok[i].hi;
        assert_int_equal(plan_shape(&c, TARGET, QATTN_DECODE_AUTO, 0, &p, err), QATTN_OK);
        EXPECT_EQ(p.subgroup_size, ok[i].want);
        EXPECT_EQ(p.workgroup_size, ok[i].want);
    }
    /* varying sizes and no way to pin one: refused */
    qattn_device_caps c = caps_rdna4();
    c.features &= ~(uint32_t)QATTN_FEAT_SUBGROUP_SIZE_CONTROL;
    assert_int_equal(plan_shape(&c, TARGET, QATTN_DECODE_AUTO, 0, &p, err), QATTN_ERR_UNSUPPORTED);
    expect_contains(err, "32..64");
    expect_contains(err, "cannot pin");
    /* a fixed size needs no control */
    c.subgroup_size_max = 32;
    assert_int_equal(plan_shape(&c, TARGET, QATTN_DECODE_AUTO, 0, &p, err), QATTN_OK);
    EXPECT_EQ(p.subgroup_size, 32);
    /* no size reported */
    c = caps_h200();
    c.subgroup_size_min = c.subgroup_size_max = 0;
    /* caps that cannot describe a device are refused before planning */
    assert_int_equal(plan_shape(&c, TARGET, QATTN_DECODE_AUTO, 0, &p, err), QATTN_ERR_INVALID_ARGUMENT);
    expect_contains(err, "subgroup");
    /* a subgroup larger than a workgroup describes no device: refused */
    c = caps_gfx942();
    c.max_workgroup_size = 32;
    assert_int_equal(plan_shape(&c, TARGET, QATTN_DECODE_AUTO, 0, &p, err), QATTN_ERR_INVALID_ARGUMENT);
    expect_contains(err, "max_workgroup_size");
}

/* ---- the shader's f16 arithmetic --------------------------------------------- */
/* decode_tiled.comp requires GL_EXT_shader_explicit_arithmetic_types_float16
 * in both variants (f16 P^T, f16 int8 decoding), so a device without f16
 * arithmetic cannot run any decode plan. */
static void test_needs_f16(void **state) {
    (void)state;
    qattn_device_caps c = caps_lavapipe();
    c.features &= ~(uint32_t)QATTN_FEAT_SHADER_F16;
    qattn_decode_plan p;
    char err[256];
    const qattn_status st = plan_shape(&c, TARGET, QATTN_DECODE_AUTO, 0, &p, err);
    if (st == QATTN_OK) print_error("planned %s on a device without f16 arithmetic\n", qattn_decode_variant_name(p.variant));
    assert_int_equal(st, QATTN_ERR_UNSUPPORTED);
    expect_contains(err, "f16");
}

/* ---- shared memory ------------------------------------------------------------ */
static void test_shared(void **state) {
    (void)state;
    /* The formula against hand-computed sums of the declarations. */
    assert_int_equal(shader_shared_bytes(256, 16), 8448 + 64 + 2 * 8448 + 1024 + 768 + 192);
    assert_int_equal(shader_shared_bytes(128, 8), 8 * 17 * 16 + 32 + 2 * 16 * 17 * 16 + 512 + 384 + 192);
    /* One byte short of the need is refused, the exact need plans. */
    qattn_device_caps c = caps_lavapipe();
    shape s = {1, 8, 2, 1, 256, 100, QATTN_BF16}; /* 16 rows */
    qattn_decode_plan p;
    char err[256];
    c.max_shared_bytes = (uint32_t)shader_shared_bytes(256, 16);
    assert_int_equal(plan_shape(&c, s, QATTN_DECODE_AUTO, 0, &p, err), QATTN_OK);
    EXPECT_EQ(p.shared_bytes, c.max_shared_bytes);
    c.max_shared_bytes -= 1;
    assert_int_equal(plan_shape(&c, s, QATTN_DECODE_AUTO, 0, &p, err), QATTN_ERR_UNSUPPORTED);
    expect_contains(err, "shared memory");
    /* The matrix variant's padded slots count: 4 rows in 16 slots on RDNA4. */
    qattn_device_caps rd = caps_rdna4();
    rd.max_shared_bytes = (uint32_t)shader_shared_bytes(128, 16) - 1;
    assert_int_equal(plan_shape(&rd, TARGET, QATTN_DECODE_MATRIX, 0, &p, err), QATTN_ERR_VARIANT_GATE);
    expect_contains(err, "shared memory");
    assert_int_equal(plan_shape(&rd, TARGET, QATTN_DECODE_SIMT, 0, &p, err), QATTN_OK);
    EXPECT_EQ(p.shared_bytes, shader_shared_bytes(128, 4));
}

/* AUTO plans a variant that fits where one does: the matrix variant's
 * padded slots not fitting leaves simt, which does. */
static void test_auto_fits(void **state) {
    (void)state;
    qattn_device_caps rd = caps_rdna4();
    rd.max_shared_bytes = (uint32_t)shader_shared_bytes(128, 16) - 1;
    qattn_decode_plan p;
    char err[256];
    const qattn_status st = plan_shape(&rd, TARGET, QATTN_DECODE_AUTO, 0, &p, err);
    if (st != QATTN_OK) print_error("refused: %s\n", err);
    assert_int_equal(st, QATTN_OK);
    EXPECT_EQ(p.variant, QATTN_DECODE_SIMT);
    EXPECT(p.reason[0] != '\0');
    EXPECT(p.shared_bytes <= rd.max_shared_bytes);
}

/* ---- splits ------------------------------------------------------------------- */
static void test_splits(void **state) {
    (void)state;
    const qattn_device_caps h = caps_h200(), lvp = caps_lavapipe();
    qattn_decode_plan p;
    char err[256];
    /* options.num_splits honoured across the range */
    static const int forced[] = {1, 2, 3, 8, 64, 255, 256};
    for (size_t i = 0; i < sizeof forced / sizeof forced[0]; ++i) {
        shape s = {5, 3, 16, 4, 128, 4099, QATTN_FP8_E4M3FNUZ};
        assert_int_equal(plan_shape(&h, s, QATTN_DECODE_AUTO, forced[i], &p, err), QATTN_OK);
        EXPECT_EQ(p.num_splits, forced[i]);
        check_plan(&h, s, QATTN_DECODE_AUTO, forced[i], &p);
    }
    /* ...and validated: 0 is the planner's, else 1..256 */
    static const int bad[] = {-1, 257, 1000, INT32_MIN};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
        assert_int_equal(plan_shape(&h, TARGET, QATTN_DECODE_AUTO, bad[i], &p, err), QATTN_ERR_INVALID_ARGUMENT);
        expect_contains(err, "options.num_splits");
    }
    /* A lone long request is split to fill the device; a big batch less. */
    assert_int_equal(plan_shape(&h, TARGET, QATTN_DECODE_AUTO, 0, &p, err), QATTN_OK);
    EXPECT(p.num_splits > 16);
    const int lone = p.num_splits;
    /* ...but not past splits of 256 keys once the H200's 132 SMs have 4
     * workgroups each (8 here per split: 128 splits, 1024 workgroups) */
    EXPECT_EQ(p.keys_per_split, 256);
    EXPECT_EQ(p.num_splits, 128);
    /* 16 requests: 32 workgroups per SM decide (4224 / 128 units) */
    shape b16 = TARGET;
    b16.B = 16;
    assert_int_equal(plan_shape(&h, b16, QATTN_DECODE_AUTO, 0, &p, err), QATTN_OK);
    EXPECT_EQ(p.num_splits, 33);
    shape big = TARGET;
    big.B = 64;
    assert_int_equal(plan_shape(&h, big, QATTN_DECODE_AUTO, 0, &p, err), QATTN_OK);
    EXPECT(p.num_splits < lone);
    /* max_kv_len 0: one split; a forced count still plans */
    shape z = TARGET;
    z.L = 0;
    assert_int_equal(plan_shape(&h, z, QATTN_DECODE_AUTO, 0, &p, err), QATTN_OK);
    EXPECT_EQ(p.num_splits, 1);
    check_plan(&h, z, QATTN_DECODE_AUTO, 0, &p);
    assert_int_equal(plan_shape(&h, z, QATTN_DECODE_AUTO, 4, &p, err), QATTN_OK);
    check_plan(&h, z, QATTN_DECODE_AUTO, 4, &p);
    /* The planner's choice for every length up to 5000 and some long ones,
     * alone and in a batch, on a large and a small device. */
    const qattn_device_caps *devs[2] = {&h, &lvp};
    for (int d = 0; d < 2; ++d)
        for (int B = 1; B <= 64; B *= 64)
            for (int L = 0; L <= 5000; ++L) {
                shape s = TARGET;
                s.B = B;
                s.L = L;
                assert_int_equal(plan_shape(devs[d], s, QATTN_DECODE_AUTO, 0, &p, err), QATTN_OK);
                check_plan(devs[d], s, QATTN_DECODE_AUTO, 0, &p);
            }
}

/* The planner's splits hold at least 128 keys each (a workgroup's fixed
 * costs stay small against its reading) unless max_kv_len is smaller. */
static void test_split_min_keys(void **state) {
    (void)state;
    const qattn_device_caps h = caps_h200();
    qattn_decode_plan p;
    char err[256];
    for (int L = 0; L <= 5000; ++L) {
        shape s = TARGET;
        s.L = L;
        assert_int_equal(plan_shape(&h, s, QATTN_DECODE_AUTO, 0, &p, err), QATTN_OK);
        const int want = L < 128 ? L : 128;
        if (p.keys_per_split < want)
            print_error("L %d: %d splits of %d keys\n", L, p.num_splits, p.keys_per_split);
        EXPECT(p.keys_per_split >= want);
    }
}

/* Lengths up to INT32_MAX, in one split (a big batch on a small device,
 * or forced) or many: keys_per_split stays a positive int32 and the splits
 * cover max_kv_len. */
static void test_split_long(void **state) {
    (void)state;
    const qattn_device_caps h = caps_h200(), lvp = caps_lavapipe();
    static const int longs[] = {8191, 8192, 8193, 65535, 100000, 1 << 20, 2147483632, 2147483633, INT32_MAX};
    const qattn_device_caps *devs[2] = {&h, &lvp};
    qattn_decode_plan p;
    char err[256];
    for (int d = 0; d < 2; ++d)
        for (int B = 1; B <= 64; B *= 64)
            for (size_t i = 0; i < sizeof longs / sizeof longs[0]; ++i)
                for (int forced = 0; forced <= 3; ++forced) {
                    shape s = TARGET;
                    s.B = B;
                    s.L = longs[i];
                    const qattn_status st = plan_shape(devs[d], s, QATTN_DECODE_AUTO, forced, &p, err);
                    /* a planner may refuse lengths whose one split would
                     * need more than INT32_MAX keys, naming max_kv_len */
                    /* a cache of more than INT32_MAX elements is refused
                     * before planning: kernels index them in int32 */
                    if (st == QATTN_ERR_OVERFLOW && (double)s.B * s.L * s.Hkv * s.D > (double)INT32_MAX) continue;
                    if (st != QATTN_OK && s.L > 2147483632) {
                        expect_contains(err, "max_kv_len");
                        continue;
                    }
                    assert_int_equal(st, QATTN_OK);
                    if (p.keys_per_split < 16)
                        print_error("%d splits of %d keys\n", p.num_splits, p.keys_per_split);
                    check_plan(devs[d], s, QATTN_DECODE_AUTO, forced, &p);
                }
}

/* ---- workspace ------------------------------------------------------------------ */
static void test_workspace(void **state) {
    (void)state;
    const qattn_device_caps h = caps_h200();
    qattn_decode_plan p;
    char err[256];
    /* a worked case: B 2 x Hkv 8 x one block of G 4 heads x 8 matrix slots
     * = 128 slots, 10 splits of D 128 */
    shape s = {2, 1, 32, 8, 128, 4096, QATTN_I8};
    assert_int_equal(plan_shape(&h, s, QATTN_DECODE_AUTO, 10, &p, err), QATTN_OK);
    EXPECT_EQ(p.row_slots, 8);
    EXPECT_EQ(p.partial_ml_offset, 128 * 10 * 128 * 4);
    EXPECT_EQ(p.workspace_bytes, 128 * 10 * 128 * 4 + 128 * 10 * 8);
    /* simt slots are the real rows: 3 (R 3, G 1), 3 splits of D 64. (The
     * partial outputs always end 256-aligned, D * 4 being a multiple of
     * 256; check_plan holds the alignment rule in general.) */
    shape t = {1, 3, 1, 1, 64, 100, QATTN_BF16};
    assert_int_equal(plan_shape(&h, t, QATTN_DECODE_AUTO, 3, &p, err), QATTN_OK);
    EXPECT_EQ(p.partial_ml_offset, 3 * 3 * 64 * 4);
    EXPECT_EQ(p.workspace_bytes, 3 * 3 * 64 * 4 + 3 * 3 * 8);
    /* partial outputs past 32-bit element offsets: refused */
    shape huge = {4096, 1, 64, 8, 256, 32768, QATTN_FP8_E4M3FN};
    assert_int_equal(plan_shape(&h, huge, QATTN_DECODE_AUTO, 256, &p, err), QATTN_ERR_OVERFLOW);
    expect_contains(err, "32-bit");
    assert_int_equal(plan_shape(&h, huge, QATTN_DECODE_AUTO, 0, &p, err), QATTN_OK);
    check_plan(&h, huge, QATTN_DECODE_AUTO, 0, &p);
}

/* ---- layouts, ranks and limits ----------------------------------------------- */
static void test_layout(void **state) {
    (void)state;
    static const qattn_dtype dts[] = {QATTN_BF16, QATTN_FP8_E4M3FN};
    for (int ti = 0; ti < 2; ++ti) {
        const qattn_device_caps c = caps_h200();
        shape s = TARGET;
        s.dt = dts[ti];
        const int64_t es = (int64_t)qattn_dtype_size(s.dt);
        const int64_t e8 = 8 / es; /* elements in 8 bytes */
        qattn_decode_plan p;
        char err[256];
        for (int which = 0; which < 2; ++which)
            for (int how = 0; how < 3; ++how) {
                describe(&c, s, 3, QATTN_DECODE_AUTO, 0);
                qattn_decode_args a = args_of(s);
                qattn_tensor *t = which ? &a.v_cache : &a.k_cache;
                if (how == 0) t->offset = 8;
                if (how == 1) t->strides[0] += e8; /* slot stride */
                if (how == 2) {                    /* head stride */
                    t->strides[1] = s.D + e8;
                    t->strides[0] = (s.D + e8) * s.Hkv;
                }
                /* rows that start 8-byte aligned are read in 8-byte loads */
                assert_int_equal(plan_of(&c, &a, QATTN_DECODE_AUTO, 0, &p, err), QATTN_OK);
                assert_int_equal(p.load_bytes, 8);
                expect_contains(p.reason, "8-byte loads");
                /* an odd element offset of a 1-byte cache: 1-byte loads */
                if (es == 1 && how == 0) {
                    t->offset = 9;
                    assert_int_equal(plan_of(&c, &a, QATTN_DECODE_AUTO, 0, &p, err), QATTN_OK);
                    assert_int_equal(p.load_bytes, 1);
                }
                /* 16-byte multiples plan */
                if (how == 0) t->offset = 16;
                if (how == 1) t->strides[0] += e8;
                if (how == 2) {
                    t->strides[1] = s.D + 2 * e8;
                    t->strides[0] = (s.D + 2 * e8) * s.Hkv;
                }
                assert_int_equal(plan_of(&c, &a, QATTN_DECODE_AUTO, 0, &p, err), QATTN_OK);
                assert_int_equal(p.load_bytes, 16);
            }
        /* the stride of a dimension of extent 1 is never used */
        shape one = s;
        one.Hkv = 1;
        one.Hq = 4;
        describe(&c, one, 3, QATTN_DECODE_AUTO, 0);
        qattn_decode_args a = args_of(one);
        a.k_cache.strides[1] = 3;
        assert_int_equal(plan_of(&c, &a, QATTN_DECODE_AUTO, 0, &p, err), QATTN_OK);
    }
}

static int plans_equal(const qattn_decode_plan *x, const qattn_decode_plan *y) {
    return x->variant == y->variant && x->batch == y->batch && x->rows == y->rows && x->q_heads == y->q_heads &&
           x->kv_heads == y->kv_heads && x->head_dim == y->head_dim && x->head_dim_v == y->head_dim_v &&
           x->kv_dtype == y->kv_dtype && x->max_kv_len == y->max_kv_len && x->subgroup_size == y->subgroup_size &&
           x->workgroup_size == y->workgroup_size && x->keys_per_tile == y->keys_per_tile && x->load_bytes == y->load_bytes &&
           x->q_heads_per_workgroup == y->q_heads_per_workgroup && x->row_slots == y->row_slots &&
           memcmp(&x->matrix_shape, &y->matrix_shape, sizeof x->matrix_shape) == 0 &&
           x->shared_bytes == y->shared_bytes && memcmp(x->grid, y->grid, sizeof x->grid) == 0 &&
           x->num_splits == y->num_splits && x->keys_per_split == y->keys_per_split &&
           memcmp(x->merge_grid, y->merge_grid, sizeof x->merge_grid) == 0 &&
           x->merge_workgroup_size == y->merge_workgroup_size && x->partial_o_offset == y->partial_o_offset &&
           x->partial_ml_offset == y->partial_ml_offset && x->workspace_bytes == y->workspace_bytes &&
           strcmp(x->reason, y->reason) == 0;
}

static void test_rank4(void **state) {
    (void)state;
    const qattn_device_caps devs[2] = {caps_h200(), caps_lavapipe()};
    static const qattn_dtype dts[] = {QATTN_BF16, QATTN_FP8_E4M3FN, QATTN_I8};
    int n = 0;
    for (int d = 0; d < 2; ++d)
        for (int ti = 0; ti < 3; ++ti)
            for (int R = 1; R <= 8; R *= 2) {
                shape s = {3, R, 16, 2, 128, 1000, dts[ti]};
                qattn_decode_plan p3, p4;
                char err[256];
                describe(&devs[d], s, 4, QATTN_DECODE_AUTO, 0);
                qattn_decode_args a3 = args_of(s), a4 = args_paged(s);
                assert_int_equal(plan_of(&devs[d], &a3, QATTN_DECODE_AUTO, 0, &p3, err), QATTN_OK);
                assert_int_equal(plan_of(&devs[d], &a4, QATTN_DECODE_AUTO, 0, &p4, err), QATTN_OK);
                EXPECT(plans_equal(&p3, &p4));
                check_plan(&devs[d], s, QATTN_DECODE_AUTO, 0, &p4);
                /* padded pages (16-byte multiples) plan the same */
                a4.k_cache.strides[0] += 64;
                a4.v_cache.strides[0] += 128;
                assert_int_equal(plan_of(&devs[d], &a4, QATTN_DECODE_AUTO, 0, &p4, err), QATTN_OK);
                EXPECT(plans_equal(&p3, &p4));
                /* a 4-byte-aligned page stride narrows the loads */
                a4.v_cache.strides[0] += 4 / (int64_t)qattn_dtype_size(s.dt);
                assert_int_equal(plan_of(&devs[d], &a4, QATTN_DECODE_AUTO, 0, &p4, err), QATTN_OK);
                assert_int_equal(p4.load_bytes, 4);
                ++n;
            }
    assert_int_equal(n, 24);
}

/* A rank-4 cache brings its page length P; the kernels find key p at row
 * p % page_size of its page, so P must be page_size (else rows past P read
 * the next page, or rows past page_size are never read). */
static void test_rank4_page_size(void **state) {
    (void)state;
    const qattn_device_caps h = caps_h200();
    shape s = {3, 1, 16, 2, 128, 1000, QATTN_FP8_E4M3FN};
    qattn_decode_plan p;
    char err[256];
    static const int sizes[] = {8, 32};
    for (int i = 0; i < 2; ++i) {
        describe(&h, s, 4, QATTN_DECODE_AUTO, 0);
        qattn_decode_args a = args_paged(s); /* P = 16 */
        a.page_size = sizes[i];
        const qattn_status st = plan_of(&h, &a, QATTN_DECODE_AUTO, 0, &p, err);
        if (st == QATTN_OK) print_error("planned a rank-4 cache of 16-row pages with page_size %d\n", sizes[i]);
        EXPECT(st != QATTN_OK);
        expect_contains(err, "page_size");
    }
}

/* A tile is rows of one page exactly when the page holds whole tiles. */
static void test_page_tiled(void **state) {
    (void)state;
    const qattn_device_caps h = caps_h200();
    shape s = {3, 1, 16, 2, 128, 1000, QATTN_FP8_E4M3FN};
    static const int sizes[] = {1, 2, 8, 15, 16, 24, 32, 48, 64, 256};
    for (int i = 0; i < (int)(sizeof sizes / sizeof sizes[0]); ++i) {
        qattn_decode_plan p;
        char err[256];
        qattn_decode_args a = args_of(s);
        a.page_size = sizes[i];
        const qattn_status st = plan_of(&h, &a, QATTN_DECODE_AUTO, 0, &p, err);
        if (st != QATTN_OK) print_error("page_size %d: %s\n", sizes[i], err);
        EXPECT_EQ(st, QATTN_OK);
        if (st == QATTN_OK) EXPECT_EQ(p.page_tiled, sizes[i] % 16 == 0);
    }
}

/* ---- the kernel arguments the core builds for every GPU backend ---------- */
/* Device addresses: the descriptors' byte offsets above a fixed base. */
#define ADDR_BASE 0x7f0000000000ull
static uint64_t fake_address(const qattn_tensor *t) { return t->buffer ? ADDR_BASE + t->offset : 0; }

static void test_kernel_args(void **state) {
    (void)state;
    const qattn_device_caps h = caps_h200();
    const qattn_dtype dts[2] = {QATTN_FP8_E4M3FN, QATTN_BF16};
    for (int di = 0; di < 2; ++di) {
        const shape s = {3, 2, 16, 2, 128, 1000, dts[di]};
        describe(&h, s, 4, QATTN_DECODE_AUTO, 0);
        qattn_decode_args a = args_paged(s);
        if (di == 1) { /* bf16: with sinks and lse */
            a.sinks = t_contig(QATTN_F32, 1, s.Hq, 0, 0, 0);
            a.lse = t_contig(QATTN_F32, 3, s.B, s.R, s.Hq, 0);
        }
        qattn_decode_plan p;
        char err[256], why[256];
        assert_int_equal(plan_of(&h, &a, QATTN_DECODE_AUTO, 0, &p, err), QATTN_OK);
        /* distinct addresses per tensor, each aligned as the plan reads */
        qattn_tensor *ts[] = {&a.q, &a.k_cache, &a.v_cache, &a.k_scale, &a.v_scale, &a.kv_indptr,
                              &a.kv_indices, &a.kv_lens, &a.sinks, &a.lse, &a.o};
        for (int i = 0; i < (int)(sizeof ts / sizeof ts[0]); ++i) ts[i]->offset = (uint64_t)(i + 1) << 20;
        const uint64_t ws = ADDR_BASE + (64u << 20);
        qattn_decode_tile_args t;
        qattn_decode_merge_args m;
        assert_int_equal(qattn_decode_kernel_args_of(&p, &a, fake_address, ws, &t, &m, why, sizeof why), QATTN_OK);
        const int64_t pages = slots_of(s) / 16;
        EXPECT_EQ(t.q, ADDR_BASE + (1u << 20));
        EXPECT_EQ(t.k, ADDR_BASE + (2u << 20));
        EXPECT_EQ(t.v, ADDR_BASE + (3u << 20));
        EXPECT_EQ(t.ks, di == 0 ? ADDR_BASE + (4u << 20) : 0);
        EXPECT_EQ(t.lens, ADDR_BASE + (8u << 20));
        EXPECT_EQ(t.ws_o, ws + p.partial_o_offset);
        EXPECT_EQ(t.ws_ml, ws + p.partial_ml_offset);
        /* [pages, 16, Hkv, D] caches, [pages, 16, Hkv] scales, in elements */
        EXPECT_EQ(t.k_ps, 16 * s.Hkv * s.D);
        EXPECT_EQ(t.v_rs, s.Hkv * s.D);
        EXPECT_EQ(t.k_hs, s.D);
        EXPECT_EQ(t.ks_ps, di == 0 ? 16 * s.Hkv : 0);
        EXPECT_EQ(t.vs_rs, di == 0 ? s.Hkv : 0);
        EXPECT_EQ(t.vs_hs, di == 0 ? 1 : 0);
        EXPECT_EQ(t.n_slots, pages * 16);
        EXPECT_EQ(t.q_sb, s.R * s.Hq * s.D);
        EXPECT_EQ(t.q_sr, s.Hq * s.D);
        EXPECT_EQ(t.q_sh, s.D);
        EXPECT_EQ(t.indptr_s, 1);
        EXPECT_EQ(t.n_indices, pages);
        EXPECT_EQ(t.hq, s.Hq);
        EXPECT_EQ(t.hkv, s.Hkv);
        EXPECT_EQ(t.page_size, 16);
        EXPECT_EQ(t.window_left, -1);
        EXPECT_EQ(t.num_splits, p.num_splits);
        EXPECT_EQ(t.keys_per_split, p.keys_per_split);
        EXPECT(t.sm_scale == a.sm_scale);
        EXPECT_EQ(m.ws_o, t.ws_o);
        EXPECT_EQ(m.sinks, di == 1 ? ADDR_BASE + (9u << 20) : 0);
        EXPECT_EQ(m.o, ADDR_BASE + (11u << 20));
        EXPECT_EQ(m.o_sh, s.D);
        EXPECT_EQ(m.lse_sb, di == 1 ? s.R * s.Hq : 0);
        EXPECT_EQ(m.sinks_s, di == 1 ? 1 : 0);
        EXPECT_EQ(m.R, p.rows);
        EXPECT_EQ(m.QH, p.q_heads_per_workgroup);
        EXPECT_EQ(m.NR, p.row_slots);
        EXPECT_EQ(m.S, p.num_splits);
        EXPECT_EQ(m.D, s.D);
        EXPECT_EQ(m.perm, di == 0);
        EXPECT_EQ(m.flags, di == 1 ? QATTN_DECODE_MERGE_SINKS | QATTN_DECODE_MERGE_LSE : 0);
        EXPECT(m.vf == (di == 0 ? 256.0f : 1.0f));

        /* a cache address off the plan's load width: refused, nothing written */
        if (p.load_bytes > 1) {
            a.v_cache.offset += (uint64_t)p.load_bytes / 2;
            qattn_decode_tile_args t2;
            qattn_decode_merge_args m2;
            memset(&t2, 0xAB, sizeof t2);
            memset(&m2, 0xAB, sizeof m2);
            const qattn_decode_tile_args t0 = t2;
            const qattn_decode_merge_args m0 = m2;
            why[0] = '\0';
            EXPECT_EQ(qattn_decode_kernel_args_of(&p, &a, fake_address, ws, &t2, &m2, why, sizeof why),
                      QATTN_ERR_ALIGNMENT);
            expect_contains(why, "k_cache/v_cache");
            EXPECT(memcmp(&t2, &t0, sizeof t0) == 0 && memcmp(&m2, &m0, sizeof m0) == 0);
            a.v_cache.offset -= (uint64_t)p.load_bytes / 2;
        }

        /* the decode-pattern read over the same call */
        qattn_decode_read_args r;
        uint32_t grid[3];
        const uint64_t sum = ADDR_BASE + (80u << 20);
        assert_int_equal(qattn_decode_read_args_of(&a, fake_address, sum, 132, 256, 4, &r, grid, why, sizeof why),
                         QATTN_OK);
        EXPECT_EQ(r.sum, sum);
        EXPECT_EQ(r.k, t.k);
        EXPECT_EQ(r.page_stride[0], t.k_ps);
        EXPECT_EQ(r.head_stride[3], t.vs_hs);
        EXPECT_EQ(r.row_stride[2], t.ks_rs);
        EXPECT_EQ(r.n_slots, t.n_slots);
        EXPECT_EQ(r.G, s.Hq / s.Hkv);
        EXPECT_EQ(r.row_words, s.D * (s.dt == QATTN_BF16 ? 2 : 1) / 16);
        EXPECT_EQ(r.scaled, di == 0);
        EXPECT_EQ(grid[0], r.num_splits);
        EXPECT_EQ(grid[1], s.Hkv);
        EXPECT_EQ(grid[2], s.B);
        /* splits cover the visible keys in whole steps (256 lanes / row_words keys, 4 in flight) */
        const int64_t step = (256 / r.row_words) * 4;
        EXPECT_EQ(r.keys_per_split % step, 0);
        EXPECT((int64_t)r.keys_per_split * r.num_splits >= s.L);
        a.k_cache.offset += 8;
        EXPECT_EQ(qattn_decode_read_args_of(&a, fake_address, sum, 132, 256, 4, &r, grid, why, sizeof why),
                  QATTN_ERR_ALIGNMENT);
    }
}

static void test_limits(void **state) {
    (void)state;
    const qattn_device_caps h = caps_h200();
    qattn_decode_plan p;
    char err[256];
    /* batch: 65535 requests per launch */
    shape s = {65535, 1, 1, 1, 64, 16, QATTN_FP8_E4M3FN};
    assert_int_equal(plan_shape(&h, s, QATTN_DECODE_AUTO, 0, &p, err), QATTN_OK);
    EXPECT_EQ(p.grid[2], 65535);
    EXPECT_EQ(p.merge_grid[2], 65535);
    check_plan(&h, s, QATTN_DECODE_AUTO, 0, &p);
    s.B = 65536;
    assert_int_equal(plan_shape(&h, s, QATTN_DECODE_AUTO, 0, &p, err), QATTN_ERR_UNSUPPORTED);
    expect_contains(err, "batch");
    /* kv heads x head blocks per launch */
    shape w = {1, 1, 65536, 65536, 64, 16, QATTN_FP8_E4M3FN};
    assert_int_equal(plan_shape(&h, w, QATTN_DECODE_AUTO, 0, &p, err), QATTN_ERR_UNSUPPORTED);
    expect_contains(err, "65535");
}

/* Every grid dimension of a plan is one a Vulkan device must accept (65535,
 * the rule that refuses larger batches), the merge's rows included. */
static void test_merge_grid_limit(void **state) {
    (void)state;
    const qattn_device_caps h = caps_h200();
    qattn_decode_plan p;
    char err[256];
    shape s = {1, 8, 16384, 1, 64, 16, QATTN_FP8_E4M3FN}; /* G * R = 131072 merge rows */
    const qattn_status st = plan_shape(&h, s, QATTN_DECODE_AUTO, 0, &p, err);
    if (st == QATTN_OK)
        print_error("planned merge_grid %ux%ux%u\n", p.merge_grid[0], p.merge_grid[1], p.merge_grid[2]);
    assert_int_equal(st, QATTN_ERR_UNSUPPORTED);
}

typedef struct refusal {
    const char *what;
    qattn_decode_args a;
    qattn_status want;
    const char *why;
} refusal;

static void set_refusal(refusal *r, const char *what, qattn_status want, const char *why) {
    r->what = what;
    r->want = want;
    r->why = why;
}

/* Inputs the planner refuses; a failed call leaves the plan untouched. */
static void test_refusals(void **state) {
    (void)state;
    const qattn_device_caps h = caps_h200();
    qattn_decode_args a = args_of(TARGET);
    qattn_decode_plan p, poison;
    char err[256];
    memset(&poison, 0xA5, sizeof poison);
    refusal cases[8];
    int n = 0;
    for (int i = 0; i < 8; ++i) cases[i].a = a;
    cases[n].a.q.shape[1] = 9;
    set_refusal(&cases[n++], "R 9", QATTN_ERR_SHAPE, "R in 1..8");
    cases[n].a.q.shape[3] = cases[n].a.k_cache.shape[2] = cases[n].a.v_cache.shape[2] = 88;
    set_refusal(&cases[n++], "D 88", QATTN_ERR_SHAPE, "multiples of 16");
    cases[n].a.q.shape[2] = 30;
    set_refusal(&cases[n++], "Hq 30 over 8 kv heads", QATTN_ERR_SHAPE, "multiple of Hkv");
    cases[n].a.max_kv_len = -1;
    set_refusal(&cases[n++], "max_kv_len -1", QATTN_ERR_INVALID_ARGUMENT, "max_kv_len");
    cases[n].a.page_size = 0;
    set_refusal(&cases[n++], "page_size 0", QATTN_ERR_INVALID_ARGUMENT, "page_size");
    cases[n].a.k_cache.rank = cases[n].a.v_cache.rank = 2;
    set_refusal(&cases[n++], "rank-2 caches", QATTN_ERR_SHAPE, "rank");
    cases[n].a.v_cache.rank = 4;
    set_refusal(&cases[n++], "rank-3 k_cache, rank-4 v_cache", QATTN_ERR_SHAPE, "rank");
    for (int i = 0; i < n; ++i) {
        snprintf(g_case, sizeof g_case, "%s", cases[i].what);
        p = poison;
        err[0] = '\0';
        EXPECT_EQ(qattn_decode_plan_compute(&h, &cases[i].a, NULL, &p, err, sizeof err), cases[i].want);
        expect_contains(err, cases[i].why);
        EXPECT(memcmp(&p, &poison, sizeof p) == 0);
        /* err may be NULL */
        EXPECT_EQ(qattn_decode_plan_compute(&h, &cases[i].a, NULL, &p, NULL, 0), cases[i].want);
    }
    snprintf(g_case, sizeof g_case, "NULL arguments");
    EXPECT_EQ(qattn_decode_plan_compute(NULL, &a, NULL, &p, err, sizeof err), QATTN_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(qattn_decode_plan_compute(&h, NULL, NULL, &p, err, sizeof err), QATTN_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(qattn_decode_plan_compute(&h, &a, NULL, NULL, err, sizeof err), QATTN_ERR_INVALID_ARGUMENT);
    /* an unknown variant in the options */
    qattn_decode_options o = QATTN_DECODE_OPTIONS_INIT;
    o.variant = (qattn_decode_variant)QATTN_DECODE_VARIANT_COUNT;
    p = poison;
    EXPECT_EQ(qattn_decode_plan_compute(&h, &a, &o, &p, err, sizeof err), QATTN_ERR_INVALID_ARGUMENT);
    expect_contains(err, "options.variant");
    EXPECT(memcmp(&p, &poison, sizeof p) == 0);
    /* options may be NULL: the planner's choice */
    EXPECT_EQ(qattn_decode_plan_compute(&h, &a, NULL, &p, err, sizeof err), QATTN_OK);
    EXPECT_EQ(p.variant, QATTN_DECODE_MATRIX);
}

/* ---- names and the environment pin ---------------------------------------- */
static void test_names(void **state) {
    (void)state;
    assert_string_equal(qattn_decode_variant_name(QATTN_DECODE_AUTO), "auto");
    assert_string_equal(qattn_decode_variant_name(QATTN_DECODE_SIMT), "simt");
    assert_string_equal(qattn_decode_variant_name(QATTN_DECODE_MATRIX), "matrix");
    assert_string_equal(qattn_decode_variant_name(QATTN_DECODE_VARIANT_COUNT), "invalid");
    assert_string_equal(qattn_decode_variant_name((qattn_decode_variant)-1), "invalid");
}

/* plan_create on the cpu backend with real (small) buffers: the env pin. */
static void test_env_pin(void **state) {
    (void)state;
    qattn_context *ctx = NULL;
    char e[256];
    assert_int_equal(qattn_context_create(qattn_backend_cpu(), NULL, &ctx, e, sizeof e), QATTN_OK);
    shape s = {1, 1, 8, 2, 64, 16, QATTN_FP8_E4M3FN};
    qattn_decode_args a = args_of(s);
    qattn_tensor *ts[] = {&a.q, &a.k_cache, &a.v_cache, &a.k_scale, &a.v_scale,
                          &a.kv_indptr, &a.kv_indices, &a.kv_lens, &a.o};
    qattn_buffer *bufs[9];
    for (int i = 0; i < 9; ++i) {
        uint64_t bytes = qattn_dtype_size(ts[i]->dtype);
        for (int k = 0; k < ts[i]->rank; ++k) bytes *= (uint64_t)ts[i]->shape[k];
        assert_int_equal(qattn_buffer_alloc(ctx, bytes, &bufs[i]), QATTN_OK);
        ts[i]->buffer = bufs[i];
    }
    snprintf(g_case, sizeof g_case, "cpu backend, QATTN_DECODE_VARIANT");
    qattn_decode_plan p;
    /* unset or empty: the planner's choice (simt on the cpu's caps, which
     * have no matrix unit) */
    unsetenv("QATTN_DECODE_VARIANT");
    assert_int_equal(qattn_decode_plan_create(ctx, &a, NULL, &p), QATTN_OK);
    EXPECT_EQ(p.variant, QATTN_DECODE_SIMT);
    expect_contains(p.reason, "matrix gate");
    setenv("QATTN_DECODE_VARIANT", "", 1);
    assert_int_equal(qattn_decode_plan_create(ctx, &a, NULL, &p), QATTN_OK);
    EXPECT_EQ(p.variant, QATTN_DECODE_SIMT);
    expect_contains(p.reason, "matrix gate");
    /* names in any case */
    static const char *simt[] = {"simt", "SIMT", "Simt"};
    for (int i = 0; i < 3; ++i) {
        setenv("QATTN_DECODE_VARIANT", simt[i], 1);
        assert_int_equal(qattn_decode_plan_create(ctx, &a, NULL, &p), QATTN_OK);
        EXPECT_EQ(p.variant, QATTN_DECODE_SIMT);
        expect_contains(p.reason, "pinned");
    }
    setenv("QATTN_DECODE_VARIANT", "AUTO", 1);
    assert_int_equal(qattn_decode_plan_create(ctx, &a, NULL, &p), QATTN_OK);
    expect_contains(p.reason, "matrix gate");
    /* a pinned matrix on a device without one names the gate */
    static const char *matrix[] = {"matrix", "MATRIX", "mAtRiX"};
    for (int i = 0; i < 3; ++i) {
        setenv("QATTN_DECODE_VARIANT", matrix[i], 1);
        assert_int_equal(qattn_decode_plan_create(ctx, &a, NULL, &p), QATTN_ERR_VARIANT_GATE);
        expect_contains(qattn_last_error(ctx), "matrix gate: device cpu has no matrix unit");
    }
    /* options win over the environment */
    qattn_decode_options o = QATTN_DECODE_OPTIONS_INIT;
    o.variant = QATTN_DECODE_SIMT;
    assert_int_equal(qattn_decode_plan_create(ctx, &a, &o, &p), QATTN_OK);
    EXPECT_EQ(p.variant, QATTN_DECODE_SIMT);
    /* unknown names are errors naming the variable and the choices */
    static const char *bad[] = {"fastest", "sim", "simt ", "matrixx", "generic", "stream"};
    for (int i = 0; i < 6; ++i) {
        setenv("QATTN_DECODE_VARIANT", bad[i], 1);
        assert_int_equal(qattn_decode_plan_create(ctx, &a, NULL, &p), QATTN_ERR_INVALID_ARGUMENT);
        char want[64];
        snprintf(want, sizeof want, "QATTN_DECODE_VARIANT=%s:", bad[i]);
        expect_contains(qattn_last_error(ctx), want);
        expect_contains(qattn_last_error(ctx), "auto, simt, matrix");
    }
    unsetenv("QATTN_DECODE_VARIANT");
    /* planner errors come through plan_create */
    o.variant = QATTN_DECODE_AUTO;
    o.num_splits = 300;
    assert_int_equal(qattn_decode_plan_create(ctx, &a, &o, &p), QATTN_ERR_INVALID_ARGUMENT);
    expect_contains(qattn_last_error(ctx), "options.num_splits");
    /* validation runs first: a bad descriptor never reaches the planner */
    a.q.dtype = QATTN_F32;
    assert_int_equal(qattn_decode_plan_create(ctx, &a, NULL, &p), QATTN_ERR_DTYPE);
    for (int i = 0; i < 9; ++i) qattn_buffer_free(ctx, bufs[i]);
    qattn_context_free(ctx);
}

/* ---- the Vulkan backend launches the plan ------------------------------------ */
#ifdef QATTN_TEST_VK_LAUNCH
static const char *dtype_tag(qattn_dtype dt) {
    switch (dt) {
    case QATTN_BF16: return "bf16";
    case QATTN_FP8_E4M3FN: return "fp8fn";
    case QATTN_FP8_E4M3FNUZ: return "fp8fnuz";
    case QATTN_FP8_E5M2: return "fp8e5m2";
    case QATTN_I8: return "i8";
    default: return "?";
    }
}

static int g_launches;

static void check_launch(const qattn_device_caps *c, shape s, qattn_decode_variant pin, int forced,
                         const qattn_decode_plan *p) {
    (void)c;
    (void)s;
    (void)pin;
    (void)forced;
    qattn_vk_decode_launch l;
    char why[160] = "";
    memset(&l, 0x5A, sizeof l);
    const int ok = qattn_vk_decode_launch_of(p, &l, why, sizeof why);
    if (!ok) print_error("no launch: %s\n", why);
    EXPECT(ok);
    char name[48];
    if (p->variant == QATTN_DECODE_REGS)
        snprintf(name, sizeof name, "decode_regs_%s_d%d", dtype_tag(p->kv_dtype), (int)p->head_dim);
    else
        snprintf(name, sizeof name, "decode_%s_%s", p->variant == QATTN_DECODE_MATRIX ? "matrix" : "simt",
                 dtype_tag(p->kv_dtype));
    if (strcmp(l.shader, name) != 0) print_error("shader %s, expected %s\n", l.shader, name);
    EXPECT(strcmp(l.shader, name) == 0);
    EXPECT(qattn_vk_has_shader(l.shader));
    /* spec constants by constant_id: local_size_x, D, R, QH, NR, SG, load
     * bytes, keys per tile, page_tiled, Dv */
    EXPECT_EQ(l.n_spec, 10);
    EXPECT_EQ(l.spec[0], p->workgroup_size);
    EXPECT_EQ(l.spec[1], p->head_dim);
    EXPECT_EQ(l.spec[2], p->rows);
    EXPECT_EQ(l.spec[3], p->q_heads_per_workgroup);
    EXPECT_EQ(l.spec[4], p->row_slots);
    EXPECT_EQ(l.spec[5], p->subgroup_size);
    EXPECT_EQ(l.spec[6], p->load_bytes);
    EXPECT_EQ(l.spec[7], p->keys_per_tile);
    EXPECT_EQ(l.spec[8], p->page_tiled);
    EXPECT_EQ(l.spec[9], p->head_dim_v);
    EXPECT_EQ(l.subgroup_size, p->subgroup_size);
    for (int i = 0; i < 3; ++i) {
        EXPECT_EQ(l.grid[i], p->grid[i]);
        EXPECT_EQ(l.merge_grid[i], p->merge_grid[i]);
    }
    EXPECT_EQ(l.merge_spec[0], p->merge_workgroup_size);
    EXPECT_EQ(l.merge_spec[1], p->merge_dims);
    ++g_launches;
}

static void test_vk_launch(void **state) {
    (void)state;
    g_launches = 0;
    const int n = sweep(check_launch);
    assert_int_equal(g_launches, n);
    assert_true(n > 20000);
    EXPECT(qattn_vk_has_shader("decode_merge"));
    /* Plans no tiled kernel runs are refused with a reason. */
    qattn_decode_plan p;
    char err[256], why[160];
    const qattn_device_caps h = caps_h200();
    assert_int_equal(plan_shape(&h, TARGET, QATTN_DECODE_AUTO, 0, &p, err), QATTN_OK);
    qattn_vk_decode_launch l;
    p.variant = QATTN_DECODE_AUTO;
    why[0] = '\0';
    EXPECT(!qattn_vk_decode_launch_of(&p, &l, why, sizeof why));
    expect_contains(why, "auto");
    p.variant = QATTN_DECODE_SIMT;
    p.kv_dtype = QATTN_F32;
    why[0] = '\0';
    EXPECT(!qattn_vk_decode_launch_of(&p, &l, why, sizeof why));
    expect_contains(why, "f32");
}
#endif

/* ---- the register-resident variant ----
 * The H200 with its fragment layout probed: AUTO takes regs for fp8 and
 * int8 caches of D 64 / 128 in pages of a multiple of 16 rows, and steps to
 * matrix (saying why) for anything else; a pin outside the gate fails.
 * Waves of 64 pass only on the HIP backend's gfx942. */
static void test_regs_gate(void **state) {
    (void)state;
    qattn_device_caps h = caps_h200();
    h.features |= QATTN_FEAT_FRAGMENT_LAYOUT;
    qattn_decode_plan p;
    char err[256];
    static const qattn_dtype dts[] = {QATTN_FP8_E4M3FN, QATTN_FP8_E4M3FNUZ, QATTN_I8};
    static const int dims[] = {64, 128};
    for (int i = 0; i < 3; ++i)
        for (int d = 0; d < 2; ++d)
            for (int r = 1; r <= 8; r *= 2) {
                shape s = TARGET;
                s.dt = dts[i];
                s.D = dims[d];
                s.R = r;
                assert_int_equal(plan_shape(&h, s, QATTN_DECODE_AUTO, 0, &p, err), QATTN_OK);
                EXPECT_EQ(p.variant, QATTN_DECODE_REGS);
                check_plan(&h, s, QATTN_DECODE_AUTO, 0, &p);
                EXPECT_EQ(p.q_heads_per_workgroup, expected_qh(4, r));
                /* the partials are written in dim order: the merge swaps nothing */
                qattn_decode_tile_args t;
                qattn_decode_merge_args m;
                qattn_decode_args a = args_of(s);
                char why[160];
                assert_int_equal(qattn_decode_kernel_args_of(&p, &a, fake_address, 0x10000, &t, &m, why, sizeof why),
                                 QATTN_OK);
                EXPECT_EQ(m.perm, 0);
            }
    /* outside the gate: matrix, with the reason */
    struct {
        qattn_dtype dt;
        int D, page;
        const char *why;
    } out[] = {{QATTN_FP8_E4M3FN, 256, 16, "head dims 256/256"}, {QATTN_I8, 128, 1, "page_size 1"},
               {QATTN_FP8_E4M3FN, 128, 8, "page_size 8"}, {QATTN_BF16, 128, 16, "bf16"}};
    for (size_t i = 0; i < sizeof out / sizeof out[0]; ++i) {
        shape s = TARGET;
        s.dt = out[i].dt;
        s.D = out[i].D;
        qattn_decode_args a = args_of(s);
        a.page_size = out[i].page;
        assert_int_equal(plan_of(&h, &a, QATTN_DECODE_AUTO, 0, &p, err), QATTN_OK);
        EXPECT(p.variant != QATTN_DECODE_REGS);
        if (out[i].dt != QATTN_BF16) {
            EXPECT_EQ(p.variant, QATTN_DECODE_MATRIX);
            expect_contains(p.reason, out[i].why);
        }
        assert_int_equal(plan_of(&h, &a, QATTN_DECODE_REGS, 0, &p, err), QATTN_ERR_VARIANT_GATE);
        expect_contains(err, out[i].why);
    }
    /* a device without the layout: matrix, and the reason names the layout */
    shape s = TARGET;
    const qattn_device_caps plain = caps_h200();
    assert_int_equal(plan_shape(&plain, s, QATTN_DECODE_AUTO, 0, &p, err), QATTN_OK);
    EXPECT_EQ(p.variant, QATTN_DECODE_MATRIX);
    expect_contains(p.reason, "fragment layout");
    /* waves of 64: the HIP backend's gfx942 (its MFMA kernel's fragments
     * span the wave, layout from the ISA) takes regs... */
    const qattn_device_caps mi = caps_gfx942();
    EXPECT(mi.features & QATTN_FEAT_FRAGMENT_LAYOUT);
    for (int d = 0; d < 2; ++d) {
        shape m = TARGET;
        m.D = dims[d];
        assert_int_equal(plan_shape(&mi, m, QATTN_DECODE_AUTO, 0, &p, err), QATTN_OK);
        EXPECT_EQ(p.variant, QATTN_DECODE_REGS);
        EXPECT_EQ(p.subgroup_size, 64);
        EXPECT_EQ(p.shared_bytes, QATTN_DECODE_REGS_SHARED_BYTES(m.D));
        check_plan(&mi, m, QATTN_DECODE_AUTO, 0, &p);
    }
    /* ...a Vulkan device whose subgroups are 64 does not, whatever it
     * reports (the shader's fragments are those of 32 lanes) */
    qattn_device_caps v64 = caps_rdna4();
    v64.subgroup_size_min = v64.subgroup_size_max = 64;
    v64.features |= QATTN_FEAT_FRAGMENT_LAYOUT;
    assert_int_equal(plan_shape(&v64, s, QATTN_DECODE_AUTO, 0, &p, err), QATTN_OK);
    EXPECT_EQ(p.variant, QATTN_DECODE_MATRIX);
    expect_contains(p.reason, "subgroups of 64");
    assert_int_equal(plan_shape(&v64, s, QATTN_DECODE_REGS, 0, &p, err), QATTN_ERR_VARIANT_GATE);
    expect_contains(err, "subgroups of 64");
}


int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sweep),
        cmocka_unit_test(test_devices),
        cmocka_unit_test(test_matrix_gate),
        cmocka_unit_test(test_subgroups),
        cmocka_unit_test(test_needs_f16),
        cmocka_unit_test(test_shared),
        cmocka_unit_test(test_auto_fits),
        cmocka_unit_test(test_splits),
        cmocka_unit_test(test_split_min_keys),
        cmocka_unit_test(test_split_long),
        cmocka_unit_test(test_workspace),
        cmocka_unit_test(test_layout),
        cmocka_unit_test(test_rank4),
        cmocka_unit_test(test_rank4_page_size),
        cmocka_unit_test(test_kernel_args),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_merge_grid_limit),
        cmocka_unit_test(test_page_tiled),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_env_pin),
        cmocka_unit_test(test_regs_gate),
#ifdef QATTN_TEST_VK_LAUNCH
        cmocka_unit_test(test_vk_launch),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
