/*
 * qattn_hip_decode_launch: the HIP backend launches exactly what a decode
 * plan says, checked without a device. Plans are computed with
 * qattn_decode_plan_compute for the capabilities the HIP runtime reports
 * (backend_hip/src/hip_runtime.c fill_caps: gfx942 wave64 MFMA f16, gfx1201
 * wave32 WMMA f16, the NVIDIA twin wave32 wmma) over a sweep of shapes,
 * dtypes, splits and pins; for each, qh_decode_launch_of
 * (backend_hip/src/hip_decode_launch.c, the function hip_decode.c launches
 * through) must give the plan's grid, workgroup size, dynamic LDS, merge
 * grid and merge workgroup, and the kernel its variant and dtype name; the
 * plan's shared bytes must be the kernel's LDS layout (0 for the
 * register-resident regs kernel, which every target has and AUTO plans for
 * 8-bit caches of D 64 and 128). Then plans the
 * kernels were not built for (edited fields) must be refused with the field
 * named. Exit 0: all held; 1: a failure (the case is printed).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qattn/qattn.h"
#include "qh_decode_launch.h"
#include "qh_kernels.def" /* QH_T_* */
#include "qh_params.h"
#include "qh_target_caps.h"

static int g_fail, g_checked, g_regs;
static char g_case[256];

#define EXPECT(cond)                                                                  \
    do {                                                                              \
        if (!(cond)) {                                                                \
            if (g_fail++ < 20) printf("FAIL %s: %s (line %d)\n", g_case, #cond, __LINE__); \
        }                                                                             \
    } while (0)

typedef struct target {
    const char *name;
    int bit, wave;
    qattn_device_caps caps;
} target;

/* What hip_runtime.c's fill_caps reports for each target (the features
 * and shapes from the same qh_target_caps). */
static target target_of(int which) {
    target t;
    memset(&t, 0, sizeof t);
    qattn_device_caps *c = &t.caps;
    c->max_shared_bytes = which == 2 ? 49152 : 65536;
    c->max_workgroup_size = 1024;
    if (which == 0) {
        t.name = "gfx942";
        t.bit = QH_T_GFX942;
        t.wave = 64;
        c->compute_units = 304;
    } else if (which == 1) {
        t.name = "gfx1201";
        t.bit = QH_T_GFX12;
        t.wave = 32;
        c->compute_units = 64;
    } else {
        t.name = "cuda";
        t.bit = QH_T_NV;
        t.wave = 32;
        c->compute_units = 132;
    }
    snprintf(c->arch, sizeof c->arch, "%s", t.name);
    qh_target_caps(t.bit, c);
    c->subgroup_size_min = c->subgroup_size_max = (uint32_t)t.wave;
    return t;
}

static qattn_buffer *const FAKE = (qattn_buffer *)(uintptr_t)0x1000;

static qattn_tensor tc(qattn_dtype dt, int rank, int64_t a, int64_t b, int64_t c, int64_t d) {
    const int64_t s[4] = {a, b, c, d};
    return qattn_tensor_contiguous(FAKE, 0, dt, rank, s);
}

static qattn_decode_args args_of(int B, int R, int Hq, int Hkv, int D, int Dv, int L, qattn_dtype dt,
                                 qattn_dtype qdt) {
    qattn_decode_args a;
    memset(&a, 0, sizeof a);
    const int64_t slots = (int64_t)B * (((int64_t)L + 15) / 16 + 1) * 16;
    a.q = tc(qdt, 4, B, R, Hq, D);
    a.k_cache = tc(dt, 3, slots, Hkv, D, 0);
    a.v_cache = tc(dt, 3, slots, Hkv, Dv, 0);
    if (dt != QATTN_BF16) {
        a.k_scale = tc(QATTN_F32, 2, slots, Hkv, 0, 0);
        a.v_scale = tc(QATTN_F32, 2, slots, Hkv, 0, 0);
    }
    a.kv_indptr = tc(QATTN_I32, 1, B + 1, 0, 0, 0);
    a.kv_indices = tc(QATTN_I32, 1, slots / 16, 0, 0, 0);
    a.kv_lens = tc(QATTN_I32, 1, B, 0, 0, 0);
    a.o = tc(qdt, 4, B, R, Hq, Dv);
    a.page_size = 16;
    a.max_kv_len = L;
    a.sm_scale = 0.088f;
    a.window_left = -1;
    return a;
}

static const char *dt_tag(qattn_dtype dt) {
    switch (dt) {
    case QATTN_BF16: return "bf16";
    case QATTN_I8: return "i8";
    case QATTN_FP8_E4M3FN: return "fn";
    case QATTN_FP8_E4M3FNUZ: return "fnuz";
    case QATTN_FP8_E5M2: return "e5m2";
    default: return "?";
    }
}

/* The launch of plan p on t is exactly p. */
static void check_launch(const target *t, const qattn_decode_plan *p) {
    qh_decode_launch l;
    char why[192] = "";
    memset(&l, 0x5A, sizeof l);
    const int ok = qh_decode_launch_of(p, t->bit, t->wave, &l, why, sizeof why);
    if (!ok) printf("  refused: %s\n", why);
    EXPECT(ok);
    if (!ok) return;
    char name[64];
    /* exact kernels for D = Dv in {64, 128, 256}, the generic ones (bound
     * 128 or 256) for every other pair */
    const int d = p->head_dim, dv = p->head_dim_v, dmax = d > dv ? d : dv;
    const int exact = d == dv && (d == 64 || d == 128 || d == 256);
    if (p->variant == QATTN_DECODE_REGS)
        snprintf(name, sizeof name, "qattn_decode_regs_%s_d%d", dt_tag(p->kv_dtype), d);
    else
        snprintf(name, sizeof name, "qattn_decode_tiled_%s_%s_%c%d", qattn_decode_variant_name(p->variant),
                 dt_tag(p->kv_dtype), exact ? 'd' : 'g', exact ? d : dmax <= 128 ? 128 : 256);
    if (strcmp(qh_kernel_name(l.kernel), name) != 0) printf("  kernel %s, expected %s\n", qh_kernel_name(l.kernel), name);
    EXPECT(strcmp(qh_kernel_name(l.kernel), name) == 0);
    for (int i = 0; i < 3; ++i) {
        EXPECT(l.grid[i] == p->grid[i]);
        EXPECT(l.merge_grid[i] == p->merge_grid[i]);
    }
    EXPECT(l.block == (unsigned)p->workgroup_size);
    EXPECT(l.block == (unsigned)t->wave);
    EXPECT(l.shared == p->shared_bytes);
    if (p->variant == QATTN_DECODE_REGS) {
        /* the register-resident kernel: the plan's q staging (unused here),
         * one page id per tile, whole 16-byte chunks, 16 row slots of a
         * 16x16x16 f16 fragment */
        EXPECT(p->shared_bytes == QATTN_DECODE_REGS_SHARED_BYTES(p->head_dim));
        EXPECT(p->page_tiled && p->load_bytes == 16 && p->row_slots == 16);
        EXPECT(p->kv_dtype != QATTN_BF16 && (p->head_dim == 64 || p->head_dim == 128) &&
               p->head_dim_v == p->head_dim);
        ++g_regs;
    } else {
        EXPECT(p->shared_bytes == (uint32_t)QH_DEC_LDS_BYTES(p->head_dim, p->head_dim_v, p->row_slots));
    }
    EXPECT(l.merge_block == (unsigned)p->merge_workgroup_size);
    /* the matrix kernels issue 16x16x16 f16 with 16 row slots; bf16 stays simt */
    if (p->variant == QATTN_DECODE_MATRIX) EXPECT(p->row_slots == 16 && p->kv_dtype != QATTN_BF16);
    ++g_checked;
}

/* An edited plan is refused and the reason names `field`. */
static void expect_refused(const target *t, const qattn_decode_plan *p, const char *field) {
    qh_decode_launch l;
    char why[192] = "";
    const int ok = qh_decode_launch_of(p, t->bit, t->wave, &l, why, sizeof why);
    snprintf(g_case, sizeof g_case, "%s: edited %s", t->name, field);
    EXPECT(!ok);
    if (!strstr(why, field)) printf("FAIL %s: reason \"%s\" does not name %s\n", g_case, why, field), ++g_fail;
}

int main(void) {
    static const qattn_dtype dts[] = {QATTN_BF16, QATTN_FP8_E4M3FN, QATTN_FP8_E4M3FNUZ, QATTN_I8, QATTN_FP8_E5M2};
    enum { NDT = sizeof dts / sizeof dts[0] };
    /* (D, Dv): the exact kernels' dims, then generic ones of both bounds */
    static const int dims[][2] = {{64, 64}, {128, 128}, {256, 256}, {96, 96}, {192, 128}, {16, 48}, {256, 80}};
    enum { ND = sizeof dims / sizeof dims[0] };
    static const int rs[] = {1, 2, 3, 8}, gs[] = {1, 3, 4, 8, 16};
    static const int hkvs[] = {1, 8}, bs[] = {1, 16}, ls[] = {1, 129, 4099, 32768}, splits[] = {0, 1, 7, 256};
    static const qattn_decode_variant pins[] = {QATTN_DECODE_AUTO, QATTN_DECODE_SIMT, QATTN_DECODE_MATRIX,
                                                QATTN_DECODE_REGS};
    int refused_by_gate = 0;
    for (int ti = 0; ti < 3; ++ti) {
        const target t = target_of(ti);
        for (size_t a = 0; a < NDT; ++a)
            for (size_t d = 0; d < ND; ++d)
                for (size_t r = 0; r < 4; ++r)
                    for (size_t g = 0; g < 5; ++g)
                        for (size_t h = 0; h < 2; ++h)
                            for (size_t b = 0; b < 2; ++b)
                                for (size_t li = 0; li < 4; ++li)
                                    for (size_t si = 0; si < 4; ++si)
                                        for (size_t pi = 0; pi < 4; ++pi) {
                                            const int D = dims[d][0], Dv = dims[d][1];
                                            /* q (and o) f16 on every other case */
                                            const qattn_dtype qdt = (r + g + li) % 2 ? QATTN_F16 : QATTN_BF16;
                                            const qattn_decode_args args = args_of(bs[b], rs[r], gs[g] * hkvs[h],
                                                                                   hkvs[h], D, Dv, ls[li], dts[a], qdt);
                                            qattn_decode_options o = QATTN_DECODE_OPTIONS_INIT;
                                            o.variant = pins[pi];
                                            o.num_splits = splits[si];
                                            qattn_decode_plan p;
                                            char err[256] = "";
                                            snprintf(g_case, sizeof g_case,
                                                     "%s B %d R %d G %d Hkv %d D %d Dv %d L %d %s q %s splits %d pin %s",
                                                     t.name, bs[b], rs[r], gs[g], hkvs[h], D, Dv, ls[li],
                                                     qattn_dtype_name(dts[a]), qattn_dtype_name(qdt), splits[si],
                                                     qattn_decode_variant_name(pins[pi]));
                                            const qattn_status s = qattn_decode_plan_compute(&t.caps, &args, &o, &p, err, sizeof err);
                                            /* regs: 8-bit caches of D 64 and 128 (pages of
                                             * 16 and 16-byte rows: every case here) */
                                            const int regs_fits = dts[a] != QATTN_BF16 && D == Dv && (D == 64 || D == 128) &&
                                                                  (t.caps.features & QATTN_FEAT_FRAGMENT_LAYOUT);
                                            if (s == QATTN_ERR_VARIANT_GATE) {
                                                /* pinned matrix for bf16, pinned regs outside its gate */
                                                ++refused_by_gate;
                                                EXPECT((dts[a] == QATTN_BF16 && pins[pi] == QATTN_DECODE_MATRIX) ||
                                                       (pins[pi] == QATTN_DECODE_REGS && !regs_fits));
                                                continue;
                                            }
                                            EXPECT(s == QATTN_OK);
                                            if (s != QATTN_OK) {
                                                printf("  planner: %s\n", err);
                                                continue;
                                            }
                                            /* a pinned simt plan for an 8-bit cache: no such
                                             * kernel on gfx942 (the matrix one runs them there) */
                                            if (p.variant == QATTN_DECODE_SIMT && p.kv_dtype != QATTN_BF16 &&
                                                t.bit == QH_T_GFX942) {
                                                qh_decode_launch l;
                                                char why[192] = "";
                                                EXPECT(pins[pi] == QATTN_DECODE_SIMT);
                                                EXPECT(!qh_decode_launch_of(&p, t.bit, t.wave, &l, why, sizeof why));
                                                continue;
                                            }
                                            /* AUTO on these targets: regs for 8-bit caches of
                                             * D 64 and 128 where the target reports
                                             * QATTN_FEAT_FRAGMENT_LAYOUT (all three do),
                                             * matrix for the rest of them, simt for bf16 */
                                            if (pins[pi] == QATTN_DECODE_AUTO) {
                                                EXPECT((p.variant == QATTN_DECODE_REGS) == regs_fits);
                                                EXPECT((p.variant == QATTN_DECODE_MATRIX) ==
                                                       (dts[a] != QATTN_BF16 && !regs_fits));
                                            }
                                            check_launch(&t, &p);
                                        }
        /* edited plans: each field the kernels were built for */
        const qattn_decode_args args = args_of(1, 1, 32, 8, 128, 128, 4099, QATTN_FP8_E4M3FN, QATTN_BF16);
        qattn_decode_plan p0, p;
        char err[256];
        if (qattn_decode_plan_compute(&t.caps, &args, NULL, &p0, err, sizeof err) != QATTN_OK) {
            printf("FAIL %s: no plan: %s\n", t.name, err);
            return 1;
        }
        if (p0.variant != QATTN_DECODE_REGS || !(t.caps.features & QATTN_FEAT_FRAGMENT_LAYOUT)) {
            printf("FAIL %s: AUTO planned %s for an fp8 D 128 cache, not regs\n", t.name,
                   qattn_decode_variant_name(p0.variant));
            ++g_fail;
        }
        /* the regs plan's own fields */
        p = p0;
        p.shared_bytes = 16;
        expect_refused(&t, &p, "shared_bytes");
        p = p0;
        p.page_tiled = 0;
        expect_refused(&t, &p, "page_tiled");
        p = p0;
        p.load_bytes = 8;
        expect_refused(&t, &p, "load_bytes");
        p = p0;
        p.head_dim = p.head_dim_v = 256;
        expect_refused(&t, &p, "regs decode kernel");
        p = p0;
        p.head_dim_v = 64;
        expect_refused(&t, &p, "regs decode kernel");
        p = p0;
        p.row_slots = 8;
        expect_refused(&t, &p, "matrix shape");
        p = p0;
        p.subgroup_size = p.workgroup_size = t.wave == 64 ? 32 : 64;
        expect_refused(&t, &p, "subgroup");
        /* the rest on the matrix plan */
        qattn_decode_options om = QATTN_DECODE_OPTIONS_INIT;
        om.variant = QATTN_DECODE_MATRIX;
        if (qattn_decode_plan_compute(&t.caps, &args, &om, &p0, err, sizeof err) != QATTN_OK) {
            printf("FAIL %s: no matrix plan: %s\n", t.name, err);
            return 1;
        }
        p = p0;
        p.keys_per_tile = 32;
        expect_refused(&t, &p, "keys_per_tile");
        p = p0;
        p.shared_bytes += 16;
        expect_refused(&t, &p, "shared_bytes");
        p = p0;
        p.subgroup_size = p.workgroup_size = t.wave == 64 ? 32 : 64;
        expect_refused(&t, &p, "subgroup");
        p = p0;
        p.matrix_shape.n = 8;
        p.row_slots = 8;
        p.shared_bytes = (uint32_t)QH_DEC_LDS_BYTES(p.head_dim, p.head_dim_v, 8);
        expect_refused(&t, &p, "matrix shape");
        p = p0;
        p.head_dim_v = 80; /* the generic kernel's LDS differs from the exact one's */
        expect_refused(&t, &p, "shared_bytes");
        p = p0;
        p.head_dim = 72;
        expect_refused(&t, &p, "decode kernel");
        p = p0;
        p.merge_workgroup_size = 96;
        expect_refused(&t, &p, "merge_workgroup_size");
        p = p0;
        p.grid[0] = (uint32_t)p.num_splits + 1;
        expect_refused(&t, &p, "splits");
        p = p0;
        p.variant = QATTN_DECODE_AUTO;
        expect_refused(&t, &p, "variant");
    }
    printf("%d launches checked against their plans (3 targets; %d of them regs), %d pinned plans refused by "
           "the gate (matrix for bf16, regs outside its gate), %d failure(s)\n",
           g_checked, g_regs, refused_by_gate, g_fail);
    if (g_regs < 1000) {
        printf("FAIL: too few regs plans checked\n");
        return 1;
    }
    if (g_checked < 5000) {
        printf("FAIL: too few plans checked\n");
        return 1;
    }
    return g_fail ? 1 : 0;
}
