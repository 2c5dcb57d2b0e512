/*
 * The decode planner, launch-free: its decisions for the capabilities of
 * real devices (as fake caps: lavapipe, the H200 through Vulkan, RDNA4,
 * gfx942), every condition of the packed_fp8, coopmat and stream gates
 * failing one at a time (the plan names it; a pinned variant fails naming
 * it), the stream kernel's geometry, the
 * shared-memory bound for a table of shapes, the split policy and the
 * workspace, and the pin through QATTN_DECODE_VARIANT.
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

#include "qattn/qattn.h"

#include "fake_devices.h"

/* ---- shapes -------------------------------------------------------------- */
/* Descriptors only: the pure planner reads shapes, strides, offsets and
 * whether optional tensors are present, never the buffers. */
static qattn_buffer *const FAKE = (qattn_buffer *)(uintptr_t)0x1000;

typedef struct shape {
    int B, R, Hq, Hkv, D, L;
    qattn_dtype dt;
} shape;

static qattn_tensor t_contig(qattn_dtype dt, int rank, int64_t a, int64_t b, int64_t c, int64_t d) {
    const int64_t s[4] = {a, b, c, d};
    return qattn_tensor_contiguous(FAKE, 0, dt, rank, s);
}

/* A token-major, contiguous, 16-byte aligned decode: what the packed gate
 * accepts when the rest fits. */
static qattn_decode_args args_of(shape s) {
    qattn_decode_args a;
    memset(&a, 0, sizeof a);
    const int64_t slots = (int64_t)s.B * (s.L + 16);
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

static const shape TARGET = {1, 1, 32, 8, 128, 32768, QATTN_FP8_E4M3FN}; /* GQA 4 */

static qattn_status plan_of(const qattn_device_caps *c, const qattn_decode_args *a,
                            qattn_decode_variant pin, int splits, qattn_decode_plan *p, char *err) {
    qattn_decode_options o;
    memset(&o, 0, sizeof o);
    o.variant = pin;
    o.num_splits = splits;
    err[0] = '\0';
    memset(p, 0, sizeof *p);
    return qattn_decode_plan_compute(c, a, &o, p, err, 256);
}

static void assert_contains(const char *hay, const char *needle) {
    if (!strstr(hay, needle)) {
        print_error("expected \"%s\" in \"%s\"\n", needle, hay);
        fail();
    }
}

/* Scalar kernels: shared = (workgroup / min subgroup) * rows * (Dv + 2) * 4. */
static uint64_t scalar_shared(const qattn_device_caps *c, const qattn_decode_plan *p) {
    const uint64_t rb = p->variant == QATTN_DECODE_GENERIC ? 1 : (uint64_t)p->rows;
    return (uint64_t)(p->workgroup_size / (int)c->subgroup_size_min) * (uint64_t)p->q_heads_per_workgroup *
           rb * (uint64_t)(p->head_dim_v + 2) * 4u;
}

/* Stream kernel: q rows (rows rounded up to a power of two, f32), two score
 * tiles [tile][max(rows, 4)], v scales, 3 floats per row, two slot tiles
 * (shaders/decode_stream.comp's declarations). */
static uint64_t stream_shared(const qattn_decode_plan *p) {
    uint64_t np = 1;
    while (np < (uint64_t)(p->q_heads_per_workgroup * p->rows)) np *= 2;
    const uint64_t rp = np < 4 ? 4 : np, tk = (uint64_t)p->keys_per_tile;
    return np * (uint64_t)p->head_dim * 4u + 2u * tk * rp * 4u + tk * 4u + 3u * np * 4u + 2u * tk * 4u;
}

/* ---- variant choice ------------------------------------------------------- */
static void test_choices(void **state) {
    (void)state;
    const qattn_device_caps devs[4] = {caps_lavapipe(), caps_h200(), caps_rdna4(), caps_gfx942()};
    for (int i = 0; i < 4; ++i) {
        qattn_decode_plan p;
        char err[256];
        qattn_decode_args a = args_of(TARGET);
        assert_int_equal(plan_of(&devs[i], &a, QATTN_DECODE_AUTO, 0, &p, err), QATTN_OK);
        assert_int_equal(p.variant, QATTN_DECODE_PACKED_FP8);
        assert_int_equal(p.batch, 1);
        assert_int_equal(p.q_heads, 32);
        assert_int_equal(p.kv_dtype, QATTN_FP8_E4M3FN);

        shape s = TARGET;
        s.R = 3;
        a = args_of(s);
        assert_int_equal(plan_of(&devs[i], &a, QATTN_DECODE_AUTO, 0, &p, err), QATTN_OK);
        assert_int_equal(p.variant, QATTN_DECODE_MULTIROW);

        s = TARGET;
        s.dt = QATTN_BF16;
        a = args_of(s);
        assert_int_equal(plan_of(&devs[i], &a, QATTN_DECODE_AUTO, 0, &p, err), QATTN_OK);
        assert_int_equal(p.variant, QATTN_DECODE_GENERIC);
        assert_contains(p.reason, "packed_fp8 gate: kv dtype bf16 is not fp8");

        s = TARGET;
        s.D = 64;
        a = args_of(s);
        assert_int_equal(plan_of(&devs[i], &a, QATTN_DECODE_AUTO, 0, &p, err), QATTN_OK);
        assert_int_equal(p.variant, QATTN_DECODE_GENERIC);
        assert_contains(p.reason, "head dim 64 is not 128");
    }
}

/* ---- packed_fp8 gate, one condition at a time ----------------------------- */
typedef void (*breaker)(qattn_decode_args *a, qattn_device_caps *c);
static void b_dtype(qattn_decode_args *a, qattn_device_caps *c) { (void)c; a->k_cache.dtype = a->v_cache.dtype = QATTN_I8; }
static void b_scales(qattn_decode_args *a, qattn_device_caps *c) { (void)c; memset(&a->k_scale, 0, sizeof a->k_scale); }
static void b_qdtype(qattn_decode_args *a, qattn_device_caps *c) { (void)c; a->q.dtype = QATTN_F16; }
static void b_dim(qattn_decode_args *a, qattn_device_caps *c) {
    (void)c;
    a->q.shape[3] = a->k_cache.shape[2] = a->v_cache.shape[2] = a->o.shape[3] = 256;
}
static void b_gqa(qattn_decode_args *a, qattn_device_caps *c) { (void)c; a->q.shape[2] = a->o.shape[2] = 16; }
static void b_rows(qattn_decode_args *a, qattn_device_caps *c) { (void)c; a->q.shape[1] = a->o.shape[1] = 2; }
static void b_kbase(qattn_decode_args *a, qattn_device_caps *c) { (void)c; a->k_cache.offset = 8; }
static void b_krow(qattn_decode_args *a, qattn_device_caps *c) { (void)c; a->k_cache.strides[0] += 8; }
static void b_khead(qattn_decode_args *a, qattn_device_caps *c) {
    (void)c;
    a->k_cache.strides[1] = 136;
    a->k_cache.strides[0] = 136 * 8;
}
static void b_vbase(qattn_decode_args *a, qattn_device_caps *c) { (void)c; a->v_cache.offset = 4; }
static void b_vrow(qattn_decode_args *a, qattn_device_caps *c) { (void)c; a->v_cache.strides[0] += 4; }
static void b_sbase(qattn_decode_args *a, qattn_device_caps *c) { (void)c; a->v_scale.offset = 4; }
static void b_srow(qattn_decode_args *a, qattn_device_caps *c) { (void)c; a->k_scale.strides[0] = 9; }
static void b_shead(qattn_decode_args *a, qattn_device_caps *c) {
    (void)c;
    a->k_scale.strides[1] = 2;
    a->k_scale.strides[0] = 16;
}
static void b_cvt(qattn_decode_args *a, qattn_device_caps *c) { (void)a; c->features &= ~(uint32_t)QATTN_FEAT_PACKED_FP8_CVT; }
static void b_sg(qattn_decode_args *a, qattn_device_caps *c) { (void)a; c->subgroup_size_min = c->subgroup_size_max = 4; }

static void test_packed_gate(void **state) {
    (void)state;
    static const struct {
        breaker f;
        const char *why;
    } conds[] = {
        {b_dtype, "kv dtype i8 is not fp8"},
        {b_scales, "needs per-token-head f32 scales"},
        {b_qdtype, "q dtype f16 is not bf16"},
        {b_dim, "head dim 256 is not 128"},
        {b_gqa, "GQA ratio 16/8 is not 4 or 8"},
        {b_rows, "2 query rows, needs 1"},
        {b_kbase, "k_cache base offset 8 B not 16-byte aligned"},
        {b_krow, "k_cache row stride 1032 B not 16-byte aligned"},
        {b_khead, "k_cache head stride 136 B not 16-byte aligned"},
        {b_vbase, "v_cache base offset 4 B not 16-byte aligned"},
        {b_vrow, "v_cache row stride 1028 B not 16-byte aligned"},
        {b_sbase, "v_scale base offset 4 B not 16-byte aligned"},
        {b_srow, "k_scale row stride 36 B not 16-byte aligned"},
        {b_shead, "k_scale heads not contiguous"},
        {b_cvt, "has no packed fp8 conversion"},
        {b_sg, "subgroup size 4 < 8 lanes per key"},
    };
    for (size_t i = 0; i < sizeof conds / sizeof conds[0]; ++i) {
        qattn_device_caps c = caps_h200();
        qattn_decode_args a = args_of(TARGET);
        qattn_decode_plan p;
        char err[256];
        /* It passes untouched... */
        assert_int_equal(plan_of(&c, &a, QATTN_DECODE_PACKED_FP8, 0, &p, err), QATTN_OK);
        /* ...and fails for exactly this condition. */
        conds[i].f(&a, &c);
        assert_int_equal(plan_of(&c, &a, QATTN_DECODE_AUTO, 0, &p, err), QATTN_OK);
        assert_int_not_equal(p.variant, QATTN_DECODE_PACKED_FP8);
        if (p.rows == 1) assert_contains(p.reason, conds[i].why);
        assert_int_equal(plan_of(&c, &a, QATTN_DECODE_PACKED_FP8, 0, &p, err), QATTN_ERR_VARIANT_GATE);
        assert_contains(err, "packed_fp8 gate");
        assert_contains(err, conds[i].why);
    }
}

/* ---- coopmat gate, one condition at a time -------------------------------- */
static void c_nofeat(qattn_decode_args *a, qattn_device_caps *c) { (void)a; c->features &= ~(uint32_t)QATTN_FEAT_COOPMAT; }
static void c_noshape(qattn_decode_args *a, qattn_device_caps *c) {
    (void)a;
    c->matrix_shapes[0] = mshape(16, 16, 16, QATTN_BF16, QATTN_F32);
    c->n_matrix_shapes = 1;
}
static void c_bf16(qattn_decode_args *a, qattn_device_caps *c) {
    (void)c;
    a->k_cache.dtype = a->v_cache.dtype = QATTN_BF16;
    memset(&a->k_scale, 0, sizeof a->k_scale);
    memset(&a->v_scale, 0, sizeof a->v_scale);
}
static void c_sg(qattn_decode_args *a, qattn_device_caps *c) { (void)a; c->subgroup_size_min = c->subgroup_size_max = 8; }
static void c_vary(qattn_decode_args *a, qattn_device_caps *c) {
    (void)a;
    c->subgroup_size_max = 64;
    c->features &= ~(uint32_t)QATTN_FEAT_SUBGROUP_SIZE_CONTROL;
}
static void c_shared(qattn_decode_args *a, qattn_device_caps *c) { (void)a; c->max_shared_bytes = 16384; }

static void test_coopmat_gate(void **state) {
    (void)state;
    static const struct {
        breaker f;
        const char *why;
    } conds[] = {
        {c_nofeat, "has no cooperative matrix"},
        {c_noshape, "no 16x16x16 f16->f32 matrix shape"},
        {c_bf16, "bf16 cache needs bf16 operands"},
        {c_sg, "subgroup size 8 < 16"},
        {c_vary, "subgroup size varies (32..64) and cannot be pinned"},
        {c_shared, "B of shared memory > 16384"},
    };
    for (size_t i = 0; i < sizeof conds / sizeof conds[0]; ++i) {
        qattn_device_caps c = caps_h200();
        qattn_decode_args a = args_of(TARGET);
        qattn_decode_plan p;
        char err[256];
        assert_int_equal(plan_of(&c, &a, QATTN_DECODE_COOPMAT, 0, &p, err), QATTN_OK);
        assert_int_equal(p.variant, QATTN_DECODE_COOPMAT);
        conds[i].f(&a, &c);
        assert_int_equal(plan_of(&c, &a, QATTN_DECODE_COOPMAT, 0, &p, err), QATTN_ERR_VARIANT_GATE);
        assert_contains(err, "coopmat gate");
        assert_contains(err, conds[i].why);
    }
    /* No coopmat on lavapipe; generic and multirow always plan. */
    qattn_device_caps lvp = caps_lavapipe();
    qattn_decode_args a = args_of(TARGET);
    qattn_decode_plan p;
    char err[256];
    assert_int_equal(plan_of(&lvp, &a, QATTN_DECODE_COOPMAT, 0, &p, err), QATTN_ERR_VARIANT_GATE);
    assert_int_equal(plan_of(&lvp, &a, QATTN_DECODE_GENERIC, 0, &p, err), QATTN_OK);
    assert_int_equal(p.variant, QATTN_DECODE_GENERIC);
    assert_contains(p.reason, "pinned");
    assert_int_equal(plan_of(&lvp, &a, QATTN_DECODE_MULTIROW, 0, &p, err), QATTN_OK);
    assert_int_equal(p.variant, QATTN_DECODE_MULTIROW);
}

/* ---- stream gate, one condition at a time; its geometry ------------------- */
static void s_sg(qattn_decode_args *a, qattn_device_caps *c) { (void)a; c->subgroup_size_min = c->subgroup_size_max = 4; }
static void s_wg(qattn_decode_args *a, qattn_device_caps *c) { (void)a; c->max_workgroup_size = 64; }
static void s_shared(qattn_decode_args *a, qattn_device_caps *c) { (void)a; c->max_shared_bytes = 1024; }

static void test_stream_gate(void **state) {
    (void)state;
    static const struct {
        breaker f;
        const char *why;
    } conds[] = {
        {s_sg, "subgroup size 4 < 8 lanes per key"},
        {s_wg, "workgroups of 64 threads < 128"},
        {s_shared, "B of shared memory > 1024"},
    };
    for (size_t i = 0; i < sizeof conds / sizeof conds[0]; ++i) {
        qattn_device_caps c = caps_h200();
        qattn_decode_args a = args_of(TARGET);
        qattn_decode_plan p;
        char err[256];
        assert_int_equal(plan_of(&c, &a, QATTN_DECODE_STREAM, 0, &p, err), QATTN_OK);
        assert_int_equal(p.variant, QATTN_DECODE_STREAM);
        conds[i].f(&a, &c);
        assert_int_equal(plan_of(&c, &a, QATTN_DECODE_STREAM, 0, &p, err), QATTN_ERR_VARIANT_GATE);
        assert_contains(err, "stream gate");
        assert_contains(err, conds[i].why);
        /* AUTO still plans (another variant). */
        assert_int_equal(plan_of(&c, &a, QATTN_DECODE_AUTO, 0, &p, err), QATTN_OK);
    }
    /* Geometry: every kv dtype, D and row count on every device; all rows
     * of as many heads as fit 16 rows, 8 KiB of K codes per tile. */
    const qattn_device_caps devs[4] = {caps_lavapipe(), caps_h200(), caps_rdna4(), caps_gfx942()};
    static const int dims[] = {64, 128, 256}, rows[] = {1, 2, 3, 8}, gqa[] = {1, 4, 8, 16};
    static const qattn_dtype dts[] = {QATTN_BF16, QATTN_FP8_E4M3FN, QATTN_I8};
    for (int i = 0; i < 4; ++i)
        for (int di = 0; di < 3; ++di)
            for (int ri = 0; ri < 4; ++ri)
                for (int gi = 0; gi < 4; ++gi)
                    for (int ti = 0; ti < 3; ++ti) {
                        shape s = {1, rows[ri], 2 * gqa[gi], 2, dims[di], 32768, dts[ti]};
                        qattn_decode_args a = args_of(s);
                        qattn_decode_plan p;
                        char err[256];
                        assert_int_equal(plan_of(&devs[i], &a, QATTN_DECODE_STREAM, 0, &p, err), QATTN_OK);
                        assert_int_equal(p.variant, QATTN_DECODE_STREAM);
                        assert_int_equal(p.workgroup_size, 128);
                        const int qh = p.q_heads_per_workgroup;
                        assert_int_equal(gqa[gi] % qh, 0);
                        assert_true(qh * rows[ri] <= 16);
                        /* the largest such divisor */
                        for (int q2 = qh + 1; q2 <= gqa[gi]; ++q2)
                            assert_true(gqa[gi] % q2 != 0 || q2 * rows[ri] > 16);
                        const int es = (int)qattn_dtype_size(dts[ti]);
                        assert_int_equal(p.keys_per_tile, 16 * p.pipeline_depth);
                        assert_int_equal((int64_t)p.keys_per_tile * dims[di] * es, 8192);
                        assert_int_equal(p.shared_bytes, stream_shared(&p));
                        assert_true(p.shared_bytes <= devs[i].max_shared_bytes);
                    }
    /* A small shared memory shrinks the tile, then the heads, and says so. */
    qattn_device_caps c = caps_lavapipe();
    c.max_shared_bytes = 12288;
    shape s = {1, 2, 16, 2, 256, 4096, QATTN_BF16};
    qattn_decode_args a = args_of(s);
    qattn_decode_plan p;
    char err[256];
    assert_int_equal(plan_of(&c, &a, QATTN_DECODE_STREAM, 0, &p, err), QATTN_OK);
    assert_true(p.shared_bytes <= 12288);
    assert_int_equal(p.shared_bytes, stream_shared(&p));
    assert_true(p.q_heads_per_workgroup < 8);
    assert_contains(p.reason, "shared memory: stream tile");
    /* B 1 at 32k keys on the H200: the 64-split cap, whole tiles per split;
     * a batch of 16 takes fewer splits. */
    qattn_device_caps h = caps_h200();
    a = args_of(TARGET);
    assert_int_equal(plan_of(&h, &a, QATTN_DECODE_STREAM, 0, &p, err), QATTN_OK);
    assert_int_equal(p.num_splits, 64);
    assert_int_equal(p.keys_per_split % p.keys_per_tile, 0);
    shape big = TARGET;
    big.B = 16;
    a = args_of(big);
    assert_int_equal(plan_of(&h, &a, QATTN_DECODE_STREAM, 0, &p, err), QATTN_OK);
    assert_true(p.num_splits > 1 && p.num_splits < 64);
    assert_true((int64_t)p.num_splits * 16 * 8 >= 132 * 8);
}

/* ---- shared memory: exact, never above the device's limit ----------------- */
static void test_shared_bound(void **state) {
    (void)state;
    const qattn_device_caps devs[4] = {caps_lavapipe(), caps_h200(), caps_rdna4(), caps_gfx942()};
    static const int dims[] = {64, 128, 256}, rows[] = {1, 3, 8}, gqa[] = {1, 4, 8};
    static const qattn_dtype dts[] = {QATTN_BF16, QATTN_FP8_E4M3FN, QATTN_I8};
    int shrunk = 0, n = 0;
    for (int i = 0; i < 4; ++i)
        for (int di = 0; di < 3; ++di)
            for (int ri = 0; ri < 3; ++ri)
                for (int gi = 0; gi < 3; ++gi)
                    for (int ti = 0; ti < 3; ++ti)
                        for (int v = QATTN_DECODE_AUTO; v < QATTN_DECODE_VARIANT_COUNT; ++v) {
                            shape s = {2, rows[ri], 8 * gqa[gi], 8, dims[di], 4099, dts[ti]};
                            qattn_decode_args a = args_of(s);
                            qattn_decode_plan p;
                            char err[256];
                            qattn_status st = plan_of(&devs[i], &a, (qattn_decode_variant)v, 0, &p, err);
                            if (st == QATTN_ERR_VARIANT_GATE) continue;
                            assert_int_equal(st, QATTN_OK);
                            ++n;
                            assert_true(p.shared_bytes <= devs[i].max_shared_bytes);
                            assert_true(p.workgroup_size <= (int)devs[i].max_workgroup_size);
                            assert_int_equal(p.workgroup_size % (int)devs[i].subgroup_size_min, 0);
                            assert_int_equal((p.q_heads / p.kv_heads) % p.q_heads_per_workgroup, 0);
                            if (p.variant == QATTN_DECODE_STREAM)
                                assert_int_equal(p.shared_bytes, stream_shared(&p));
                            else if (p.variant != QATTN_DECODE_COOPMAT)
                                assert_int_equal(p.shared_bytes, scalar_shared(&devs[i], &p));
                            if (strstr(p.reason, "shared memory")) ++shrunk;
                        }
    assert_true(n > 500);
    /* Large rows x D on 32 KiB lavapipe must shrink, and say so. */
    assert_true(shrunk > 0);
    /* A device where nothing fits: an error, not a launch that cannot run. */
    qattn_device_caps tiny = caps_lavapipe();
    tiny.max_shared_bytes = 1024;
    shape s = {1, 8, 8, 1, 256, 100, QATTN_BF16};
    qattn_decode_args a = args_of(s);
    qattn_decode_plan p;
    char err[256];
    assert_int_equal(plan_of(&tiny, &a, QATTN_DECODE_AUTO, 0, &p, err), QATTN_ERR_UNSUPPORTED);
    assert_contains(err, "shared memory");
    /* 64 KiB exactly: the budget is the device's own number. */
    qattn_device_caps rd = caps_rdna4();
    s = (shape){1, 8, 64, 8, 256, 4096, QATTN_FP8_E4M3FN};
    a = args_of(s);
    assert_int_equal(plan_of(&rd, &a, QATTN_DECODE_MULTIROW, 0, &p, err), QATTN_OK);
    assert_true(p.shared_bytes <= 65536);
}

/* ---- split-KV and workspace ----------------------------------------------- */
static void test_splits(void **state) {
    (void)state;
    qattn_device_caps c = caps_h200();
    qattn_decode_plan p;
    char err[256];
    static const int forced[] = {1, 8, 64};
    for (int i = 0; i < 3; ++i) {
        shape s = {5, 3, 16, 4, 128, 4099, QATTN_FP8_E4M3FNUZ};
        qattn_decode_args a = args_of(s);
        assert_int_equal(plan_of(&c, &a, QATTN_DECODE_AUTO, forced[i], &p, err), QATTN_OK);
        assert_int_equal(p.num_splits, forced[i]);
        assert_true((int64_t)p.num_splits * p.keys_per_split >= 4099);
        const uint64_t part = 5ull * 3 * 16 * (uint64_t)forced[i];
        assert_int_equal(p.workspace_bytes, forced[i] == 1 ? 0 : part * 128 * 4 + (part * 4 + 15) / 16 * 16);
    }
    /* The planner's own choice: at most 64 splits, none empty for the
     * longest request, more for a lone long request than for a big batch. */
    qattn_decode_args a = args_of(TARGET);
    assert_int_equal(plan_of(&c, &a, QATTN_DECODE_AUTO, 0, &p, err), QATTN_OK);
    assert_true(p.num_splits > 1 && p.num_splits <= QATTN_MAX_SPLITS);
    assert_true((int64_t)(p.num_splits - 1) * p.keys_per_split < 32768);
    const int lone = p.num_splits;
    shape big = TARGET;
    big.B = 16;
    a = args_of(big);
    assert_int_equal(plan_of(&c, &a, QATTN_DECODE_AUTO, 0, &p, err), QATTN_OK);
    assert_true(p.num_splits < lone);
    /* Short or empty caches get one split and no workspace. */
    shape shortc = TARGET;
    shortc.L = 0;
    a = args_of(shortc);
    assert_int_equal(plan_of(&c, &a, QATTN_DECODE_AUTO, 0, &p, err), QATTN_OK);
    assert_int_equal(p.num_splits, 1);
    assert_int_equal(p.workspace_bytes, 0);
    /* Out of range requests are errors naming the option. */
    a = args_of(TARGET);
    assert_int_equal(plan_of(&c, &a, QATTN_DECODE_AUTO, 65, &p, err), QATTN_ERR_INVALID_ARGUMENT);
    assert_contains(err, "num_splits");
    assert_int_equal(plan_of(&c, &a, QATTN_DECODE_AUTO, -1, &p, err), QATTN_ERR_INVALID_ARGUMENT);
}

/* ---- names and the environment pin ---------------------------------------- */
static void test_names(void **state) {
    (void)state;
    assert_string_equal(qattn_decode_variant_name(QATTN_DECODE_AUTO), "auto");
    assert_string_equal(qattn_decode_variant_name(QATTN_DECODE_GENERIC), "generic");
    assert_string_equal(qattn_decode_variant_name(QATTN_DECODE_PACKED_FP8), "packed_fp8");
    assert_string_equal(qattn_decode_variant_name(QATTN_DECODE_MULTIROW), "multirow");
    assert_string_equal(qattn_decode_variant_name(QATTN_DECODE_COOPMAT), "coopmat");
    assert_string_equal(qattn_decode_variant_name(QATTN_DECODE_STREAM), "stream");
    assert_string_equal(qattn_decode_variant_name(QATTN_DECODE_VARIANT_COUNT), "invalid");
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
    qattn_decode_plan p;
    unsetenv("QATTN_DECODE_TUNE");
    setenv("QATTN_DECODE_VARIANT", "generic", 1);
    assert_int_equal(qattn_decode_plan_create(ctx, &a, NULL, &p), QATTN_OK);
    assert_int_equal(p.variant, QATTN_DECODE_GENERIC);
    /* The cpu reference has no matrix unit: a pin to coopmat names the gate. */
    setenv("QATTN_DECODE_VARIANT", "coopmat", 1);
    assert_int_equal(qattn_decode_plan_create(ctx, &a, NULL, &p), QATTN_ERR_VARIANT_GATE);
    assert_contains(qattn_last_error(ctx), "coopmat gate");
    /* ...and stream needs 8-lane subgroups (the cpu reports 1). */
    setenv("QATTN_DECODE_VARIANT", "stream", 1);
    assert_int_equal(qattn_decode_plan_create(ctx, &a, NULL, &p), QATTN_ERR_VARIANT_GATE);
    assert_contains(qattn_last_error(ctx), "stream gate: subgroup size 1 < 8");
    /* Options win over the environment. */
    qattn_decode_options o;
    memset(&o, 0, sizeof o);
    o.variant = QATTN_DECODE_MULTIROW;
    assert_int_equal(qattn_decode_plan_create(ctx, &a, &o, &p), QATTN_OK);
    assert_int_equal(p.variant, QATTN_DECODE_MULTIROW);
    setenv("QATTN_DECODE_VARIANT", "fastest", 1);
    assert_int_equal(qattn_decode_plan_create(ctx, &a, NULL, &p), QATTN_ERR_INVALID_ARGUMENT);
    assert_contains(qattn_last_error(ctx), "QATTN_DECODE_VARIANT=fastest");
    unsetenv("QATTN_DECODE_VARIANT");
    /* The measurement knob: malformed or impossible values are errors. */
    setenv("QATTN_DECODE_TUNE", "wg=128,bogus=1", 1);
    assert_int_equal(qattn_decode_plan_create(ctx, &a, NULL, &p), QATTN_ERR_INVALID_ARGUMENT);
    setenv("QATTN_DECODE_TUNE", "qh=3", 1);
    assert_int_equal(qattn_decode_plan_create(ctx, &a, NULL, &p), QATTN_ERR_INVALID_ARGUMENT);
    assert_contains(qattn_last_error(ctx), "qh=3");
    unsetenv("QATTN_DECODE_TUNE");
    /* Validation runs first: a bad descriptor never reaches the planner. */
    a.q.dtype = QATTN_F32;
    assert_int_equal(qattn_decode_plan_create(ctx, &a, NULL, &p), QATTN_ERR_DTYPE);
    for (int i = 0; i < 9; ++i) qattn_buffer_free(ctx, bufs[i]);
    qattn_context_free(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_choices),     cmocka_unit_test(test_packed_gate),
        cmocka_unit_test(test_coopmat_gate), cmocka_unit_test(test_stream_gate),
        cmocka_unit_test(test_shared_bound),
        cmocka_unit_test(test_splits),      cmocka_unit_test(test_names),
        cmocka_unit_test(test_env_pin),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
