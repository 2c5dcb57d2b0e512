/*
 * qattn_hip_twin_plans: runs plans made for the AMD targets on whatever HIP
 * device this build reaches, against the CPU reference.
 *
 * The parity suite plans for the device it runs on, so on the H200 (NVIDIA
 * platform) it never selects the AMD-only variants. Plans are pure data,
 * though: this test computes them with qattn_*_plan_compute from gfx1201 and
 * gfx942 capabilities and runs them through qattn_decode_run /
 * qattn_mqa_logits_run on the HIP context, so the portable twins of those
 * kernels run with exactly the geometry an AMD device would get:
 *   AMD decode plan     -> the register-resident kernel (AUTO: the AMD
 *                          targets know their fragment layouts) and the
 *                          tiled matrix kernel (pinned), each with the AMD
 *                          target's geometry (splits for its compute units):
 *                          the gfx1201 plan on a wave32 device (gfx12, the
 *                          NVIDIA twin), the gfx942 plan on a wave64 one (a
 *                          plan's one-wave workgroup is the device's wave)
 *   AMD MQA plan        -> staged (4 waves sharing each LDS tile), chosen
 *                          as decode's by the device's wave: the gfx942
 *                          plan (which names the fp8 MFMA shape, so its
 *                          kernel) on a wave64 device, the gfx1201 plan (the
 *                          FMA form) on a wave32 one; the backend runs the
 *                          kernel a plan names or refuses it, so a gfx942
 *                          plan is never run in another form
 * Exit 0: every case within the spec-4 tolerances; 1: a failure (seed
 * printed); 77: no HIP device (skipped, never passed).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../backend_hip/src/qh_target_caps.h"
#include "qattn/convert.h"
#include "qattn/hip.h"
#include "qattn/qattn.h"
#include "test_rng.h"
#include "tolerance.h"

#define SKIP 77

static qattn_context *dev, *ref;

/* A device buffer on each context with the same bytes. */
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

static qattn_device_caps amd_caps(int gfx12) {
    qattn_device_caps c;
    memset(&c, 0, sizeof c);
    snprintf(c.arch, sizeof c.arch, "%s", gfx12 ? "gfx1201" : "gfx942");
    snprintf(c.device_name, sizeof c.device_name, "%s capabilities, for planning only", gfx12 ? "gfx1201" : "gfx942");
    c.compute_units = gfx12 ? 64 : 304;
    c.subgroup_size_min = c.subgroup_size_max = gfx12 ? 32 : 64;
    c.max_shared_bytes = 65536;
    c.max_workgroup_size = 1024;
    /* the features and shapes hip_runtime.c reports (one description) */
    qh_target_caps(gfx12 ? QH_T_GFX12 : QH_T_GFX942, &c);
    return c;
}

/* ---- decode: an AMD target's tiled plan ---- */
static int dev_wave = 32;

static int decode_case(int idx, qattn_dtype fmt, int G, int splits, int window, float cap, int sinks,
                       qattn_decode_variant pin) {
    char name[128];
    snprintf(name, sizeof name, "twin/decode/%s_G%d_s%d_w%d_cap%g_sink%d_%s", qattn_dtype_name(fmt), G,
             splits, window, cap, sinks, qattn_decode_variant_name(pin));
    qt_rng rng = qt_rng_for(name);
    qt_rng_case(&rng, (uint64_t)idx);
    const int64_t B = 3, R = 1, Hkv = 4, Hq = Hkv * G, D = 128, P = 16;
    int32_t lens[3], indptr[4] = {0};
    int32_t max_len = 0;
    for (int b = 0; b < B; ++b) {
        lens[b] = (int32_t)qt_int(&rng, b == 0 ? 1 : 0, 700);
        if (lens[b] > max_len) max_len = lens[b];
        indptr[b + 1] = indptr[b] + (lens[b] + (int32_t)P - 1) / (int32_t)P;
    }
    const int64_t n_pages = indptr[B] + 3, n_slots = n_pages * P;
    int32_t *pages = malloc((size_t)n_pages * 4);
    for (int64_t i = 0; i < n_pages; ++i) pages[i] = (int32_t)i;
    qt_shuffle_i32(&rng, pages, (size_t)n_pages);
    const size_t nq = (size_t)(B * R * Hq * D), nkv = (size_t)(n_slots * Hkv * D), ns = (size_t)(n_slots * Hkv);
    uint16_t *q = malloc(nq * 2);
    uint8_t *k = malloc(nkv), *v = malloc(nkv);
    float *ks = malloc(ns * 4), *vs = malloc(ns * 4), sink[64];
    qt_fill_bf16(&rng, q, nq, 1.0f);
    qt_fill_fp8_codes(&rng, k, nkv, fmt);
    qt_fill_fp8_codes(&rng, v, nkv, fmt);
    qt_fill_f32_pos(&rng, ks, ns, 0.002f, 0.02f);
    qt_fill_f32_pos(&rng, vs, ns, 0.002f, 0.02f);
    qt_fill_f32(&rng, sink, (size_t)Hq, 2.0f);
    const size_t no = nq * 2, nl = (size_t)(B * R * Hq) * 4;
    unsigned char *poison = malloc(no > nl ? no : nl);
    memset(poison, 0xFF, no > nl ? no : nl);

    pair bq = up(q, nq * 2), bk = up(k, nkv), bv = up(v, nkv), bks = up(ks, ns * 4), bvs = up(vs, ns * 4);
    pair bip = up(indptr, sizeof indptr), bpg = up(pages, (size_t)n_pages * 4), bln = up(lens, sizeof lens);
    pair bsk = up(sink, (size_t)Hq * 4), bo = up(poison, no), bl = up(poison, nl);
    const int64_t sq[4] = {B, R, Hq, D}, sc[3] = {n_slots, Hkv, D}, ss[2] = {n_slots, Hkv};
    const int64_t s1[1] = {B + 1}, sp[1] = {n_pages}, sb[1] = {B}, sh[1] = {Hq}, sl[3] = {B, R, Hq};
    qattn_decode_args a[2];
    for (int w = 0; w < 2; ++w) {
        const int d = w == 0;
        memset(&a[w], 0, sizeof a[w]);
        a[w].q = dense(d ? bq.d : bq.r, QATTN_BF16, 4, sq);
        a[w].k_cache = dense(d ? bk.d : bk.r, fmt, 3, sc);
        a[w].v_cache = dense(d ? bv.d : bv.r, fmt, 3, sc);
        a[w].k_scale = dense(d ? bks.d : bks.r, QATTN_F32, 2, ss);
        a[w].v_scale = dense(d ? bvs.d : bvs.r, QATTN_F32, 2, ss);
        a[w].kv_indptr = dense(d ? bip.d : bip.r, QATTN_I32, 1, s1);
        a[w].kv_indices = dense(d ? bpg.d : bpg.r, QATTN_I32, 1, sp);
        a[w].kv_lens = dense(d ? bln.d : bln.r, QATTN_I32, 1, sb);
        if (sinks) a[w].sinks = dense(d ? bsk.d : bsk.r, QATTN_F32, 1, sh);
        a[w].o = dense(d ? bo.d : bo.r, QATTN_BF16, 4, sq);
        a[w].lse = dense(d ? bl.d : bl.r, QATTN_F32, 3, sl);
        a[w].page_size = (int32_t)P;
        a[w].max_kv_len = max_len;
        a[w].sm_scale = 1.0f / sqrtf((float)D);
        a[w].window_left = window;
        a[w].logit_softcap = cap;
    }
    const qattn_device_caps camd = amd_caps(dev_wave == 32);
    qattn_decode_options opt = QATTN_DECODE_OPTIONS_INIT;
    opt.num_splits = splits;
    opt.variant = pin;
    /* AUTO: regs (fp8, D 128, pages of 16); pinned matrix: matrix */
    const qattn_decode_variant want = pin == QATTN_DECODE_AUTO ? QATTN_DECODE_REGS : pin;
    qattn_decode_plan plan, rplan;
    char err[512] = "";
    int ok = 1;
    if (qattn_decode_plan_compute(&camd, &a[0], &opt, &plan, err, sizeof err) != QATTN_OK) {
        printf("FAIL %s: no %s plan (%s)\n", name, camd.arch, err);
        ok = 0;
    } else if (plan.variant != want) {
        printf("FAIL %s: the %s plan is %s, not %s (%s)\n", name, camd.arch,
               qattn_decode_variant_name(plan.variant), qattn_decode_variant_name(want), plan.reason);
        ok = 0;
    }
    qattn_buffer *ws = NULL, *rws = NULL;
    if (ok && plan.workspace_bytes) qattn_buffer_alloc(dev, plan.workspace_bytes, &ws);
    if (ok && qattn_decode_run(dev, &plan, &a[0], ws, 0) != QATTN_OK) {
        printf("FAIL %s: run: %s\n", name, qattn_last_error(dev));
        ok = 0;
    }
    if (ok && (qattn_decode_plan_create(ref, &a[1], NULL, &rplan) != QATTN_OK ||
               (rplan.workspace_bytes && qattn_buffer_alloc(ref, rplan.workspace_bytes, &rws) != QATTN_OK) ||
               qattn_decode_run(ref, &rplan, &a[1], rws, 0) != QATTN_OK)) {
        printf("FAIL %s: reference: %s\n", name, qattn_last_error(ref));
        ok = 0;
    }
    if (ok) {
        uint16_t *o_d = malloc(no), *o_r = malloc(no);
        float *l_d = malloc(nl), *l_r = malloc(nl);
        down(bo, o_d, o_r, no);
        down(bl, l_d, l_r, nl);
        for (size_t i = 0; i < nq && ok; ++i) {
            const double g = qattn_bf16_to_f32(o_d[i]), r = qattn_bf16_to_f32(o_r[i]);
            if (!qt_tol_decode_o(g, r)) {
                char seed[160];
                printf("FAIL %s: o[%zu] = %g, reference %g %s\n", name, i, g, r,
                       qt_rng_describe(&rng, seed, sizeof seed));
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
    if (ok)
        printf("ok   %s (%s plan: %s, %d splits)\n", name, camd.arch, qattn_decode_variant_name(plan.variant),
               (int)plan.num_splits);
    qattn_buffer_free(dev, ws);
    qattn_buffer_free(ref, rws);
    drop(bq), drop(bk), drop(bv), drop(bks), drop(bvs), drop(bip), drop(bpg), drop(bln), drop(bsk),
        drop(bo), drop(bl);
    free(pages), free(q), free(k), free(v), free(ks), free(vs), free(poison);
    return ok;
}

/* ---- MQA logits: gfx942's staged kernel ---- */
static int mqa_case(int idx, int64_t S, int64_t H, int64_t D, int64_t Skv, qattn_dtype qf, qattn_dtype kf,
                    int clean) {
    char name[128];
    snprintf(name, sizeof name, "twin/mqa/S%d_H%d_D%d_kv%d_%s_%s_%s", (int)S, (int)H, (int)D, (int)Skv,
             qattn_dtype_name(qf), qattn_dtype_name(kf), clean ? "clean" : "dirty");
    qt_rng rng = qt_rng_for(name);
    qt_rng_case(&rng, (uint64_t)idx);
    const size_t nq = (size_t)(S * H * D), nk = (size_t)(Skv * D), nl = (size_t)(S * Skv);
    uint8_t *q = malloc(nq), *k = malloc(nk);
    float *ksc = malloc((size_t)Skv * 4), *w = malloc((size_t)(S * H) * 4), *lg = malloc(nl * 4);
    int32_t *ks = malloc((size_t)S * 4), *ke = malloc((size_t)S * 4);
    qt_fill_fp8_codes(&rng, q, nq, qf);
    qt_fill_fp8_codes(&rng, k, nk, kf);
    qt_fill_f32_pos(&rng, ksc, (size_t)Skv, 0.001f, 0.01f);
    qt_fill_f32(&rng, w, (size_t)(S * H), 1.0f);
    for (int64_t i = 0; i < S; ++i) { /* windows of every kind, empty ones too */
        ks[i] = (int32_t)qt_int(&rng, -3, Skv);
        ke[i] = (int32_t)qt_int(&rng, ks[i] - 2, Skv + 3);
    }
    memset(lg, 0xFF, nl * 4); /* poison */
    pair bq = up(q, nq), bk = up(k, nk), bks = up(ksc, (size_t)Skv * 4), bw = up(w, (size_t)(S * H) * 4);
    pair bs = up(ks, (size_t)S * 4), be = up(ke, (size_t)S * 4), bl = up(lg, nl * 4);
    const int64_t sq[3] = {S, H, D}, sk[2] = {Skv, D}, s1[1] = {Skv}, sw[2] = {S, H}, sr[1] = {S},
                  sl[2] = {S, Skv};
    qattn_mqa_logits_args a[2];
    for (int x = 0; x < 2; ++x) {
        const int d = x == 0;
        memset(&a[x], 0, sizeof a[x]);
        a[x].q = dense(d ? bq.d : bq.r, qf, 3, sq);
        a[x].k = dense(d ? bk.d : bk.r, kf, 2, sk);
        a[x].k_scale = dense(d ? bks.d : bks.r, QATTN_F32, 1, s1);
        a[x].weights = dense(d ? bw.d : bw.r, QATTN_F32, 2, sw);
        a[x].ks = dense(d ? bs.d : bs.r, QATTN_I32, 1, sr);
        a[x].ke = dense(d ? be.d : be.r, QATTN_I32, 1, sr);
        a[x].logits = dense(d ? bl.d : bl.r, QATTN_F32, 2, sl);
        a[x].clean_logits = clean;
    }
    const qattn_device_caps camd = amd_caps(dev_wave == 32);
    qattn_mqa_logits_options opt = QATTN_MQA_LOGITS_OPTIONS_INIT;
    opt.variant = QATTN_MQA_STAGED;
    qattn_mqa_logits_plan plan, rplan;
    char err[512] = "";
    int ok = 1;
    if (qattn_mqa_logits_plan_compute(&camd, &a[0], &opt, &plan, err, sizeof err) != QATTN_OK) {
        printf("FAIL %s: %s staged plan: %s\n", name, camd.arch, err);
        ok = 0;
    }
    if (ok && qattn_mqa_logits_run(dev, &plan, &a[0], NULL, 0) != QATTN_OK) {
        printf("FAIL %s: run: %s\n", name, qattn_last_error(dev));
        ok = 0;
    }
    if (ok && (qattn_mqa_logits_plan_create(ref, &a[1], NULL, &rplan) != QATTN_OK ||
               qattn_mqa_logits_run(ref, &rplan, &a[1], NULL, 0) != QATTN_OK)) {
        printf("FAIL %s: reference: %s\n", name, qattn_last_error(ref));
        ok = 0;
    }
    if (ok) {
        float *g = malloc(nl * 4), *r = malloc(nl * 4);
        down(bl, g, r, nl * 4);
        for (int64_t i = 0; i < S && ok; ++i) {
            const int64_t lo = ks[i] < 0 ? 0 : ks[i] > Skv ? Skv : ks[i];
            const int64_t hi = ke[i] < 0 ? 0 : ke[i] > Skv ? Skv : ke[i];
            for (int64_t j = 0; j < Skv && ok; ++j) {
                const size_t at = (size_t)(i * Skv + j);
                const int in = j >= lo && j < hi;
                if (!in && !clean) continue; /* unspecified */
                double A = 0.0;
                if (in)
                    for (int64_t h = 0; h < H; ++h) {
                        double sum = 0.0;
                        for (int64_t d = 0; d < D; ++d)
                            sum += fabs((double)qattn_fp8_to_f32(q[(i * H + h) * D + d], qf) *
                                        qattn_fp8_to_f32(k[j * D + d], kf));
                        A += qt_tol_mqa_a_term(w[i * H + h], ksc[j], sum);
                    }
                if (!qt_tol_mqa_logit(g[at], r[at], A)) {
                    char seed[160];
                    printf("FAIL %s: logits[%d, %d] = %g, reference %g %s\n", name, (int)i, (int)j, g[at],
                           r[at], qt_rng_describe(&rng, seed, sizeof seed));
                    ok = 0;
                }
            }
        }
        free(g), free(r);
    }
    if (ok)
        printf("ok   %s (%s plan, %s, %d rows/subgroup, %d slices)\n", name, camd.arch,
               plan.matrix_shape.m ? "fp8 MFMA" : "FMA", (int)plan.rows_per_subgroup, (int)plan.kv_slices);
    drop(bq), drop(bk), drop(bks), drop(bw), drop(bs), drop(be), drop(bl);
    free(q), free(k), free(ksc), free(w), free(lg), free(ks), free(ke);
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
    printf("twin plans on %s (%s), seed 0x%016llx\n", caps.arch, caps.device_name,
           (unsigned long long)qt_base_seed());
    int ok = 1, idx = 0;
    const qattn_dtype fmts[2] = {QATTN_FP8_E4M3FN, QATTN_FP8_E4M3FNUZ};
    for (int f = 0; f < 2; ++f)
        for (int G = 4; G <= 8; G += 4)
            for (int v = 0; v < 2; ++v) {
                const qattn_decode_variant pin = v ? QATTN_DECODE_MATRIX : QATTN_DECODE_AUTO;
                ok &= decode_case(idx++, fmts[f], G, 0, -1, 0.0f, 0, pin);
                ok &= decode_case(idx++, fmts[f], G, 4, 100, 0.0f, 1, pin);
                ok &= decode_case(idx++, fmts[f], G, 1, -1, 30.0f, 1, pin);
            }
    ok &= mqa_case(idx++, 37, 64, 128, 300, QATTN_FP8_E4M3FN, QATTN_FP8_E4M3FN, 1);
    ok &= mqa_case(idx++, 17, 32, 64, 129, QATTN_FP8_E4M3FNUZ, QATTN_FP8_E4M3FN, 0);
    ok &= mqa_case(idx++, 40, 16, 256, 200, QATTN_FP8_E4M3FN, QATTN_FP8_E4M3FNUZ, 1);
    qattn_context_free(dev);
    qattn_context_free(ref);
    printf("%s\n", ok ? "all twin-plan cases passed" : "twin-plan FAILURES");
    return ok ? 0 : 1;
}
