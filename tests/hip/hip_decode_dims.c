/*
 * qattn_hip_decode_dims: the HIP decode kernels over every head dim issue 27
 * allows, against the CPU reference with the spec-4 tolerances.
 *
 * D and Dv each take every multiple of 16 in [16, 256] (paired so that each
 * value appears on both sides, Dv != D mostly), plus the exact kernels'
 * pairs (64, 128, 256) and the engines' 80/80, 96/96, 192/128, 128/192;
 * the cache format rotates through bf16, fp8 e4m3fn / e4m3fnuz / e5m2 and
 * int8, q and o through bf16 and f16. Each case runs the device's AUTO plan
 * and, for 8-bit caches, the plan pinned to matrix and (where the kernel
 * exists: wave32 targets) to simt, so the exact (_d) and generic (_g128,
 * _g256) kernels of both variants all run. Scales are those a KV store
 * writes (amax / fmax, amax 0.3..3), e5m2's 2^7 below fn's. o and lse are
 * poisoned before each run. Exit 0: all within tolerance; 1: a failure
 * (case and seed printed); 77: no HIP device (skipped, never passed).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qattn/convert.h"
#include "qattn/hip.h"
#include "qattn/qattn.h"
#include "test_rng.h"
#include "tolerance.h"

#define SKIP 77

static qattn_context *dev, *ref;
static int dev_wave = 32;

typedef struct pair {
    qattn_buffer *d, *r;
} pair;

static pair up(const void *data, size_t bytes) {
    pair p = {NULL, NULL};
    if (qattn_buffer_alloc(dev, bytes, &p.d) != QATTN_OK || qattn_buffer_alloc(ref, bytes, &p.r) != QATTN_OK ||
        qattn_buffer_upload(dev, p.d, 0, data, bytes) != QATTN_OK ||
        qattn_buffer_upload(ref, p.r, 0, data, bytes) != QATTN_OK) {
        fprintf(stderr, "buffer setup failed: %s %s\n", qattn_last_error(dev), qattn_last_error(ref));
        exit(1);
    }
    return p;
}
static void down(pair p, void *dst_dev, void *dst_ref, size_t bytes) {
    if (qattn_buffer_download(dev, p.d, 0, dst_dev, bytes) != QATTN_OK ||
        qattn_buffer_download(ref, p.r, 0, dst_ref, bytes) != QATTN_OK) {
        fprintf(stderr, "download failed: %s\n", qattn_last_error(dev));
        exit(1);
    }
}
static void drop(pair p) {
    qattn_buffer_free(dev, p.d);
    qattn_buffer_free(ref, p.r);
}
static qattn_tensor dense(qattn_buffer *b, qattn_dtype dt, int rank, const int64_t *shape) {
    return qattn_tensor_contiguous(b, 0, dt, rank, shape);
}
static double half_value(uint16_t b, qattn_dtype dt) {
    return dt == QATTN_F16 ? qattn_f16_to_f32(b) : qattn_bf16_to_f32(b);
}

static int n_run, n_refused;
/* The largest |o - ref| / bound seen per cache format (the margin left). */
static double worst[QATTN_DTYPE_COUNT];

/* One case; returns 0 on a failure. A pinned simt plan for an 8-bit cache
 * on a wave64 device is refused (QATTN_ERR_VARIANT_GATE: the backend has no
 * such kernel there) and counted, not run. */
static int dims_case(int idx, qattn_dtype fmt, int D, int Dv, qattn_dtype qdt, qattn_dtype odt,
                     qattn_decode_variant pin) {
    char name[160];
    snprintf(name, sizeof name, "hip_decode_dims/%s_D%d_Dv%d_q%s_o%s_%s", qattn_dtype_name(fmt), D, Dv,
             qattn_dtype_name(qdt), qattn_dtype_name(odt), qattn_decode_variant_name(pin));
    qt_rng rng = qt_rng_for(name);
    qt_rng_case(&rng, (uint64_t)idx);
    const int64_t B = 2, R = 1 + idx % 2, Hkv = 2, G = 4, Hq = Hkv * G, P = idx % 3 == 2 ? 1 : 16;
    int32_t lens[2], indptr[3] = {0};
    int32_t max_len = 0;
    for (int b = 0; b < B; ++b) {
        lens[b] = (int32_t)qt_int(&rng, 1, 300);
        if (lens[b] > max_len) max_len = lens[b];
        indptr[b + 1] = indptr[b] + (lens[b] + (int32_t)P - 1) / (int32_t)P;
    }
    const int64_t n_pages = indptr[B] + 2, n_slots = n_pages * P;
    int32_t *pages = malloc((size_t)n_pages * 4);
    for (int64_t i = 0; i < n_pages; ++i) pages[i] = (int32_t)i;
    qt_shuffle_i32(&rng, pages, (size_t)n_pages);
    const size_t es = qattn_dtype_size(fmt);
    const size_t nq = (size_t)(B * R * Hq * D), no = (size_t)(B * R * Hq * Dv), ns = (size_t)(n_slots * Hkv);
    const size_t nk = ns * (size_t)D, nv = ns * (size_t)Dv;
    uint16_t *q = malloc(nq * 2);
    unsigned char *k = malloc(nk * es), *v = malloc(nv * es);
    float *ks = malloc(ns * 4), *vs = malloc(ns * 4);
    for (size_t i = 0; i < nq; ++i) {
        const float x = qt_signed(&rng, 0.05f, 2.0f);
        q[i] = qdt == QATTN_F16 ? qattn_f32_to_f16(x) : qattn_f32_to_bf16(x);
    }
    if (fmt == QATTN_BF16) {
        uint16_t *k16 = (uint16_t *)k, *v16 = (uint16_t *)v;
        for (size_t i = 0; i < nk; ++i) k16[i] = qattn_f32_to_bf16(qt_signed(&rng, 0.05f, 2.0f));
        for (size_t i = 0; i < nv; ++i) v16[i] = qattn_f32_to_bf16(qt_signed(&rng, 0.05f, 2.0f));
    } else if (fmt == QATTN_I8) {
        qt_fill_i8(&rng, (int8_t *)k, nk);
        qt_fill_i8(&rng, (int8_t *)v, nv);
    } else {
        qt_fill_fp8_codes(&rng, k, nk, fmt);
        qt_fill_fp8_codes(&rng, v, nv, fmt);
    }
    /* the scales a KV store writes: amax / fmax */
    const float fmax = fmt == QATTN_I8 ? 127.0f : fmt == QATTN_BF16 ? 1.0f : qattn_fp8_max(fmt);
    for (size_t i = 0; i < ns; ++i) {
        ks[i] = qt_uniform(&rng, 0.3f, 3.0f) / fmax;
        vs[i] = qt_uniform(&rng, 0.3f, 3.0f) / fmax;
    }
    const size_t nl = (size_t)(B * R * Hq) * 4;
    unsigned char *poison = malloc(no * 2 > nl ? no * 2 : nl);
    memset(poison, 0xFF, no * 2 > nl ? no * 2 : nl);

    pair bq = up(q, nq * 2), bk = up(k, nk * es), bv = up(v, nv * es), bks = up(ks, ns * 4), bvs = up(vs, ns * 4);
    pair bip = up(indptr, sizeof indptr), bpg = up(pages, (size_t)n_pages * 4), bln = up(lens, sizeof lens);
    pair bo = up(poison, no * 2), bl = up(poison, nl);
    const int64_t sq[4] = {B, R, Hq, D}, so[4] = {B, R, Hq, Dv}, sk[3] = {n_slots, Hkv, D}, sv[3] = {n_slots, Hkv, Dv};
    const int64_t ss[2] = {n_slots, Hkv}, s1[1] = {B + 1}, sp[1] = {n_pages}, sb[1] = {B}, sl[3] = {B, R, Hq};
    qattn_decode_args a[2];
    for (int w = 0; w < 2; ++w) {
        const int d = w == 0;
        memset(&a[w], 0, sizeof a[w]);
        a[w].q = dense(d ? bq.d : bq.r, qdt, 4, sq);
        a[w].k_cache = dense(d ? bk.d : bk.r, fmt, 3, sk);
        a[w].v_cache = dense(d ? bv.d : bv.r, fmt, 3, sv);
        if (fmt != QATTN_BF16) {
            a[w].k_scale = dense(d ? bks.d : bks.r, QATTN_F32, 2, ss);
            a[w].v_scale = dense(d ? bvs.d : bvs.r, QATTN_F32, 2, ss);
        }
        a[w].kv_indptr = dense(d ? bip.d : bip.r, QATTN_I32, 1, s1);
        a[w].kv_indices = dense(d ? bpg.d : bpg.r, QATTN_I32, 1, sp);
        a[w].kv_lens = dense(d ? bln.d : bln.r, QATTN_I32, 1, sb);
        a[w].o = dense(d ? bo.d : bo.r, odt, 4, so);
        a[w].lse = dense(d ? bl.d : bl.r, QATTN_F32, 3, sl);
        a[w].page_size = (int32_t)P;
        a[w].max_kv_len = max_len;
        a[w].sm_scale = 1.0f / sqrtf((float)D);
        a[w].window_left = idx % 4 == 1 ? 37 : -1;
        a[w].logit_softcap = idx % 5 == 3 ? 30.0f : 0.0f;
    }
    qattn_decode_options opt = QATTN_DECODE_OPTIONS_INIT;
    opt.variant = pin;
    opt.num_splits = idx % 3 == 0 ? 0 : 1 + idx % 7;
    qattn_decode_plan plan, rplan;
    int ok = 1, refused = 0;
    const qattn_status ps = qattn_decode_plan_create(dev, &a[0], &opt, &plan);
    if (ps != QATTN_OK) {
        refused = pin == QATTN_DECODE_SIMT && fmt != QATTN_BF16 && dev_wave == 64 && ps == QATTN_ERR_VARIANT_GATE;
        if (!refused) printf("FAIL %s: no plan (%s): %s\n", name, qattn_status_name(ps), qattn_last_error(dev));
        ok = refused;
    } else if (pin != QATTN_DECODE_AUTO && plan.variant != pin) {
        printf("FAIL %s: the plan is %s\n", name, qattn_decode_variant_name(plan.variant));
        ok = 0;
    }
    qattn_buffer *ws = NULL, *rws = NULL;
    const int run = ok && !refused;
    if (run && plan.workspace_bytes) qattn_buffer_alloc(dev, plan.workspace_bytes, &ws);
    if (run && qattn_decode_run(dev, &plan, &a[0], ws, 0) != QATTN_OK) {
        printf("FAIL %s: run: %s\n", name, qattn_last_error(dev));
        ok = 0;
    }
    if (run && ok &&
        (qattn_decode_plan_create(ref, &a[1], NULL, &rplan) != QATTN_OK ||
         (rplan.workspace_bytes && qattn_buffer_alloc(ref, rplan.workspace_bytes, &rws) != QATTN_OK) ||
         qattn_decode_run(ref, &rplan, &a[1], rws, 0) != QATTN_OK)) {
        printf("FAIL %s: reference: %s\n", name, qattn_last_error(ref));
        ok = 0;
    }
    if (run && ok) {
        uint16_t *o_d = malloc(no * 2), *o_r = malloc(no * 2);
        float *l_d = malloc(nl), *l_r = malloc(nl);
        down(bo, o_d, o_r, no * 2);
        down(bl, l_d, l_r, nl);
        for (size_t i = 0; i < no && ok; ++i) {
            const double g = half_value(o_d[i], odt), r = half_value(o_r[i], odt);
            const double e = fabs(g - r) / qt_tol_decode_o_bound(r);
            if (e > worst[fmt]) worst[fmt] = e;
            if (!qt_tol_decode_o(g, r)) {
                char seed[160];
                printf("FAIL %s: o[%zu] = %g, reference %g (%s plan) %s\n", name, i, g, r,
                       qattn_decode_variant_name(plan.variant), qt_rng_describe(&rng, seed, sizeof seed));
                ok = 0;
            }
        }
        for (size_t i = 0; i < nl / 4 && ok; ++i)
            if (!qt_tol_decode_lse(l_d[i], l_r[i])) {
                char seed[160];
                printf("FAIL %s: lse[%zu] = %g, reference %g %s\n", name, i, l_d[i], l_r[i],
                       qt_rng_describe(&rng, seed, sizeof seed));
                ok = 0;
            }
        free(o_d), free(o_r), free(l_d), free(l_r);
    }
    if (run && ok) {
        ++n_run;
        printf("ok   %s (%s, %d splits)\n", name, qattn_decode_variant_name(plan.variant), (int)plan.num_splits);
    }
    if (refused) {
        ++n_refused;
        printf("refused %s (no 8-bit simt kernel on a wave64 target)\n", name);
    }
    qattn_buffer_free(dev, ws);
    qattn_buffer_free(ref, rws);
    drop(bq), drop(bk), drop(bv), drop(bks), drop(bvs), drop(bip), drop(bpg), drop(bln), drop(bo), drop(bl);
    free(pages), free(q), free(k), free(v), free(ks), free(vs), free(poison);
    return ok;
}

int main(void) {
    char err[1024] = "";
    qattn_status s = qattn_context_create(qattn_backend_hip(), NULL, &dev, err, sizeof err);
    if (s == QATTN_ERR_BACKEND_UNAVAILABLE) {
        printf("SKIP: %s\n", err);
        return SKIP;
    }
    if (s != QATTN_OK || qattn_context_create(qattn_backend_cpu(), NULL, &ref, err, sizeof err) != QATTN_OK) {
        fprintf(stderr, "context: %s: %s\n", qattn_status_name(s), err);
        return 1;
    }
    qattn_device_caps caps;
    qattn_get_caps(dev, &caps);
    dev_wave = (int)caps.subgroup_size_max;
    printf("hip decode dims on %s (%s), seed 0x%016llx\n", caps.arch, caps.device_name,
           (unsigned long long)qt_base_seed());
    int pairs[32][2], np = 0;
    for (int i = 0; i < 16; ++i) { /* every D and every Dv once, Dv != D but for one */
        pairs[np][0] = 16 * (i + 1);
        pairs[np][1] = 16 * ((i * 5 + 3) % 16 + 1);
        ++np;
    }
    static const int extra[][2] = {{64, 64}, {128, 128}, {256, 256}, {80, 80}, {96, 96}, {192, 128}, {128, 192}};
    for (size_t i = 0; i < sizeof extra / sizeof extra[0]; ++i) {
        pairs[np][0] = extra[i][0];
        pairs[np][1] = extra[i][1];
        ++np;
    }
    static const qattn_dtype fmts[] = {QATTN_FP8_E5M2, QATTN_FP8_E4M3FN, QATTN_BF16, QATTN_I8, QATTN_FP8_E4M3FNUZ};
    int ok = 1, idx = 0;
    for (int p = 0; p < np; ++p) {
        const qattn_dtype fmt = fmts[p % 5];
        const qattn_dtype qdt = p % 3 == 1 ? QATTN_F16 : QATTN_BF16;
        const qattn_dtype odt = p % 4 == 2 ? (qdt == QATTN_F16 ? QATTN_BF16 : QATTN_F16) : qdt;
        ok &= dims_case(idx++, fmt, pairs[p][0], pairs[p][1], qdt, odt, QATTN_DECODE_AUTO);
        if (fmt != QATTN_BF16) {
            ok &= dims_case(idx++, fmt, pairs[p][0], pairs[p][1], qdt, odt, QATTN_DECODE_MATRIX);
            ok &= dims_case(idx++, fmt, pairs[p][0], pairs[p][1], qdt, odt, QATTN_DECODE_SIMT);
        }
    }
    for (size_t f = 0; f < sizeof fmts / sizeof fmts[0]; ++f)
        printf("hip decode dims: %-14s worst |o - ref| / bound %.3f\n", qattn_dtype_name(fmts[f]), worst[fmts[f]]);
    qattn_context_free(dev);
    qattn_context_free(ref);
    printf("hip decode dims: %d cases run and within tolerance, %d refused as expected, of %d: %s\n", n_run, n_refused,
           idx, ok ? "all passed" : "FAILURES");
    return ok ? 0 : 1;
}
