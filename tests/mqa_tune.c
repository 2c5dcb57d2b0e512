/*
 * qattn_mqa_tune: times FP8 MQA logits on a device for the presets
 * and a few geometry alternatives of the planner's plan (not a test: timing
 * never decides pass/fail). Each timed configuration is also spot-checked
 * against the cpu reference on two rows x 256 columns, so a fast but wrong
 * geometry is never reported as a result.
 *
 *   qattn_mqa_tune [--quick] [--sweep] [--geometry MT,NT,RPW]... [--device SEL] [--runs N]
 *
 * --sweep also times geometry alternatives (m-tiles, tile width, slices,
 * pinned through the planner so shared memory is always sized by it)
 * and the staged SIMT path on the first preset, the target shape.
 * --geometry (up to four) times each preset also with that coopmat geometry
 * pinned (m-tiles, n-tiles, rows per workgroup; 0 = planner's).
 *
 * Windows are a prefill chunk at the end of a cached prefix: row i sees
 * [0, S_kv - S + i + 1). TFLOP/s counts 2 x H x D per valid (row, column)
 * pair, the q.k product only (as DeepGEMM counts). Device time comes from
 * the backend's timestamps (qattn_last_op_time_ms); the median of N runs.
 * Exits 1 when any timed configuration failed its spot check.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qattn/convert.h"
#include "qattn/experimental.h"
#include "qattn/qattn.h"
#include "qattn/vulkan.h"
#include "test_rng.h"
#include "tolerance.h"

typedef struct preset {
    int S, S_kv, H, D;
} preset;

static const preset PRESETS[] = {
    {2048, 65536, 64, 128}, {1024, 131072, 64, 128}, {1024, 131072, 32, 128},
    {4096, 32768, 64, 128}, {4096, 4096, 64, 128},
};

typedef struct bufs {
    qattn_buffer *q, *k, *sc, *w, *ks, *ke, *l;
    uint8_t *hq, *hk;
    float *hsc, *hw;
    int32_t *hks, *hke;
    int64_t lrow;
} bufs;

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static qattn_buffer *up(qattn_context *ctx, const void *src, size_t n) {
    qattn_buffer *b = NULL;
    if (qattn_buffer_alloc(ctx, n, &b) != QATTN_OK) return NULL;
    if (src && qattn_buffer_upload(ctx, b, 0, src, n) != QATTN_OK) return NULL;
    return b;
}

static qattn_mqa_logits_args make_args(const preset *p, const bufs *b, int64_t S, int64_t kv_n) {
    qattn_mqa_logits_args a;
    memset(&a, 0, sizeof a);
    const int64_t qs[3] = {S, p->H, p->D}, kss[2] = {kv_n, p->D}, ws[2] = {S, p->H}, ls[2] = {S, kv_n};
    a.q = qattn_tensor_contiguous(b->q, 0, QATTN_FP8_E4M3FN, 3, qs);
    a.k = qattn_tensor_contiguous(b->k, 0, QATTN_FP8_E4M3FN, 2, kss);
    a.k_scale = qattn_tensor_contiguous(b->sc, 0, QATTN_F32, 1, &kv_n);
    a.weights = qattn_tensor_contiguous(b->w, 0, QATTN_F32, 2, ws);
    a.ks = qattn_tensor_contiguous(b->ks, 0, QATTN_I32, 1, &S);
    a.ke = qattn_tensor_contiguous(b->ke, 0, QATTN_I32, 1, &S);
    a.logits = qattn_tensor_contiguous(b->l, 0, QATTN_F32, 2, ls);
    a.logits.strides[0] = b->lrow;
    a.clean_logits = 1;
    return a;
}

/* Spot check: rows 0 and S-1, the last 256 columns of each window, against
 * the reference on a (1 row x 256 column) sub-problem. Returns bad count. */
static int spot_check(qattn_context *dev, qattn_context *cpu, const preset *p, bufs *b) {
    int bad = 0;
    const int rows[2] = {0, p->S - 1};
    float *got = malloc((size_t)b->lrow * 4), ref[256];
    for (int r = 0; r < 2; ++r) {
        const int i = rows[r];
        const int32_t hi = b->hke[i] < p->S_kv ? b->hke[i] : p->S_kv;
        const int32_t c0 = hi >= 256 ? hi - 256 : 0;
        const int32_t n = hi - c0;
        if (n <= 0) continue;
        qattn_buffer_download(dev, b->l, (uint64_t)i * b->lrow * 4, got, (uint64_t)b->lrow * 4);
        bufs s;
        memset(&s, 0, sizeof s);
        int32_t zero = 0, nn = n;
        s.q = up(cpu, b->hq + (size_t)i * p->H * p->D, (size_t)p->H * p->D);
        s.k = up(cpu, b->hk + (size_t)c0 * p->D, (size_t)n * p->D);
        s.sc = up(cpu, b->hsc + c0, (size_t)n * 4);
        s.w = up(cpu, b->hw + (size_t)i * p->H, (size_t)p->H * 4);
        s.ks = up(cpu, &zero, 4);
        s.ke = up(cpu, &nn, 4);
        s.l = up(cpu, NULL, (size_t)n * 4);
        s.lrow = n;
        qattn_mqa_logits_args a = make_args(p, &s, 1, n);
        qattn_mqa_logits_plan pl;
        if (qattn_mqa_logits_plan_create(cpu, &a, NULL, &pl) != QATTN_OK ||
            qattn_mqa_logits_run(cpu, &pl, &a, NULL, 0) != QATTN_OK) {
            ++bad;
        } else {
            qattn_buffer_download(cpu, s.l, 0, ref, (uint64_t)n * 4);
            for (int32_t j = 0; j < n; ++j) {
                const int32_t col = c0 + j;
                double A = 0.0;
                for (int h = 0; h < p->H; ++h) {
                    double sa = 0.0;
                    for (int e = 0; e < p->D; ++e)
                        sa += fabs((double)qattn_fp8_to_f32(b->hq[((size_t)i * p->H + h) * p->D + e], QATTN_FP8_E4M3FN) *
                                   qattn_fp8_to_f32(b->hk[(size_t)col * p->D + e], QATTN_FP8_E4M3FN));
                    A += qt_tol_mqa_a_term(b->hw[(size_t)i * p->H + h], b->hsc[col], sa);
                }
                if (!qt_tol_mqa_logit(got[col], ref[j], A)) {
                    if (bad < 3)
                        printf("    mismatch row %d col %d: got %.9g ref %.9g\n", i, col, got[col], ref[j]);
                    ++bad;
                }
            }
            /* The column right after the window must be -inf (clean). */
            if (hi < p->S_kv && !(isinf(got[hi]) && got[hi] < 0)) ++bad;
        }
        qattn_buffer *all[7] = {s.q, s.k, s.sc, s.w, s.ks, s.ke, s.l};
        for (int x = 0; x < 7; ++x) qattn_buffer_free(cpu, all[x]);
    }
    free(got);
    return bad;
}

static int n_spot_failed; /* configurations whose spot check failed: the exit status */

static void time_plan(qattn_context *dev, qattn_context *cpu, const preset *p, bufs *b,
                      qattn_mqa_logits_plan *plan, const char *label, int runs, double pairs) {
    qattn_mqa_logits_args a = make_args(p, b, p->S, p->S_kv);
    double t[64];
    if (runs > 64) runs = 64;
    /* Warm-up (compiles; then >= 500 ms of device time, so the clocks are
     * up after the host-only spot check of the previous configuration). */
    qattn_status s = qattn_mqa_logits_run(dev, plan, &a, NULL, 0);
    for (double warm = 0.0; s == QATTN_OK && warm < 500.0;) {
        double ms = 0.0;
        s = qattn_mqa_logits_run(dev, plan, &a, NULL, 0);
        if (s == QATTN_OK) s = qattn_last_op_time_ms(dev, &ms);
        warm += ms > 0.01 ? ms : 0.01;
    }
    for (int r = 0; r < runs && s == QATTN_OK; ++r) {
        s = qattn_mqa_logits_run(dev, plan, &a, NULL, 0);
        if (s == QATTN_OK) s = qattn_last_op_time_ms(dev, &t[r]);
    }
    if (s != QATTN_OK) {
        printf("  %-28s FAILED %s: %s\n", label, qattn_status_name(s), qattn_last_error(dev));
        return;
    }
    qsort(t, (size_t)runs, sizeof t[0], cmp_d);
    const double ms = t[runs / 2];
    const double tflops = 2.0 * p->H * p->D * pairs / (ms * 1e-3) / 1e12;
    const double gbytes = ((double)p->S * p->H * p->D + (double)p->S_kv * p->D + 4.0 * p->S_kv +
                           4.0 * p->S * p->H + 8.0 * p->S + 4.0 * (double)p->S * p->S_kv) / 1e9;
    const int bad = spot_check(dev, cpu, p, b);
    if (bad) ++n_spot_failed;
    printf("  %-28s %-7s mt=%d rpw=%d tile=%3d slices=%4d grid=%dx%d %9.3f ms (min %.3f) %7.1f TFLOP/s %6.1f GB/s %s\n",
           label, qattn_mqa_variant_name(plan->variant),
           plan->m_tiles,
           plan->rows_per_workgroup, plan->kv_tile, plan->kv_slices, plan->grid_x, plan->grid_y, ms, t[0], tflops,
           gbytes / (ms * 1e-3), bad ? "SPOT-CHECK FAILED" : "spot-check ok");
    fflush(stdout);
}

/* The planner's coopmat plan with MT m-groups per subgroup and NT n-groups
 * per tile pinned (the experimental geometry pins, so the planner sizes
 * shared memory and refuses what does not fit) and G slices (0 =
 * planner's). */
static int pinned_plan(qattn_context *dev, const qattn_mqa_logits_args *a, int mt, int nt, int rpw, int g,
                       qattn_mqa_logits_plan *out) {
    const qattn_mqa_logits_geometry geo = {mt, nt, rpw};
    qattn_mqa_logits_options o = QATTN_MQA_LOGITS_OPTIONS_INIT;
    o.variant = QATTN_MQA_COOPMAT;
    o.kv_slices = g;
    const qattn_status s = qattn_experimental_mqa_logits_plan_create(dev, a, &o, &geo, out);
    if (s != QATTN_OK) printf("  mt%d nt%d rpw%d: %s\n", mt, nt, rpw, qattn_last_error(dev));
    return s == QATTN_OK;
}

int main(int argc, char **argv) {
    int quick = 0, sweep = 0, runs = 7, n_geo = 0, geo[4][3];
    const char *device = NULL;
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--quick")) quick = 1;
        else if (!strcmp(argv[i], "--sweep")) sweep = 1;
        else if (!strcmp(argv[i], "--geometry") && i + 1 < argc && n_geo < 4 &&
                 sscanf(argv[i + 1], "%d,%d,%d", &geo[n_geo][0], &geo[n_geo][1], &geo[n_geo][2]) == 3) {
            ++n_geo;
            ++i;
        }
        else if (!strcmp(argv[i], "--runs") && i + 1 < argc) runs = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--device") && i + 1 < argc) device = argv[++i];
        else {
            fprintf(stderr,
                    "usage: qattn_mqa_tune [--quick] [--sweep] [--geometry MT,NT,RPW]... [--runs N] [--device SEL]\n");
            return 2;
        }
    }
    qattn_context *dev = NULL, *cpu = NULL;
    char err[512];
    qattn_context_options o = QATTN_CONTEXT_OPTIONS_INIT;
    o.device = device;
    if (qattn_context_create(qattn_backend_vulkan(), &o, &dev, err, sizeof err) != QATTN_OK) {
        printf("SKIP: %s\n", err);
        return 77;
    }
    qattn_context_create(qattn_backend_cpu(), NULL, &cpu, err, sizeof err);
    qattn_device_caps caps;
    qattn_get_caps(dev, &caps);
    printf("device: %s, %d CUs, subgroup %u..%u, %u B shared\n", caps.device_name, caps.compute_units,
           caps.subgroup_size_min, caps.subgroup_size_max, caps.max_shared_bytes);
    const size_t n_presets = quick ? 1 : sizeof PRESETS / sizeof PRESETS[0];
    for (size_t pi = 0; pi < n_presets; ++pi) {
        preset p = PRESETS[pi];
        if (quick) p = (preset){256, 8192, 64, 128};
        qt_rng rng = qt_rng_for("mqa_tune");
        bufs b;
        memset(&b, 0, sizeof b);
        b.lrow = (p.S_kv + 255) / 256 * 256;
        const size_t nq = (size_t)p.S * p.H * p.D, nk = (size_t)p.S_kv * p.D;
        b.hq = malloc(nq);
        b.hk = malloc(nk);
        b.hsc = malloc((size_t)p.S_kv * 4);
        b.hw = malloc((size_t)p.S * p.H * 4);
        b.hks = malloc((size_t)p.S * 4);
        b.hke = malloc((size_t)p.S * 4);
        qt_fill_fp8_codes(&rng, b.hq, nq, QATTN_FP8_E4M3FN);
        qt_fill_fp8_codes(&rng, b.hk, nk, QATTN_FP8_E4M3FN);
        qt_fill_f32_pos(&rng, b.hsc, (size_t)p.S_kv, 0.001f, 0.05f);
        qt_fill_f32(&rng, b.hw, (size_t)p.S * p.H, 1.0f);
        double pairs = 0;
        for (int i = 0; i < p.S; ++i) {
            b.hks[i] = 0;
            b.hke[i] = p.S_kv - p.S + i + 1;
            pairs += b.hke[i] > 0 ? b.hke[i] : 0;
        }
        b.q = up(dev, b.hq, nq);
        b.k = up(dev, b.hk, nk);
        b.sc = up(dev, b.hsc, (size_t)p.S_kv * 4);
        b.w = up(dev, b.hw, (size_t)p.S * p.H * 4);
        b.ks = up(dev, b.hks, (size_t)p.S * 4);
        b.ke = up(dev, b.hke, (size_t)p.S * 4);
        b.l = up(dev, NULL, (size_t)p.S * b.lrow * 4);
        if (!b.q || !b.k || !b.sc || !b.w || !b.ks || !b.ke || !b.l) {
            printf("%dx%d: allocation failed\n", p.S, p.S_kv);
            return 1;
        }
        printf("preset S=%d S_kv=%d H=%d D=%d (causal chunk after a %d-token prefix, %.0f valid pairs)\n", p.S,
               p.S_kv, p.H, p.D, p.S_kv - p.S, pairs);
        qattn_mqa_logits_args a = make_args(&p, &b, p.S, p.S_kv);
        qattn_mqa_logits_plan plan;
        if (qattn_mqa_logits_plan_create(dev, &a, NULL, &plan) != QATTN_OK) {
            printf("  plan failed: %s\n", qattn_last_error(dev));
            continue;
        }
        time_plan(dev, cpu, &p, &b, &plan, "planner", runs, pairs);
        for (int x = 0; x < n_geo; ++x) {
            qattn_mqa_logits_plan q;
            char label[64];
            if (!pinned_plan(dev, &a, geo[x][0], geo[x][1], geo[x][2], 0, &q)) continue;
            snprintf(label, sizeof label, "mt%d nt%d rpw%d", geo[x][0], geo[x][1], geo[x][2]);
            time_plan(dev, cpu, &p, &b, &q, label, runs, pairs);
        }
        if (sweep && (pi == 0 || pi == 2) && plan.variant == QATTN_MQA_COOPMAT) {
            /* {m-tiles, n-tiles, slices (0 = planner's; -k = k x planner's)}
             * on the target and on the H 32 preset: the KV split and the
             * tile width around the planner's choice. */
            static const int cfg[][3] = {{4, 1, 0}, {4, 1, -2}, {4, 1, -3}, {4, 1, -4},
                                         {4, 2, 0}, {4, 2, -2}, {2, 1, 0}};
            for (size_t x = 0; x < sizeof cfg / sizeof cfg[0]; ++x) {
                qattn_mqa_logits_plan q;
                char label[64];
                const int g = cfg[x][2] < 0 ? -cfg[x][2] * plan.kv_slices : cfg[x][2];
                if (!pinned_plan(dev, &a, cfg[x][0], cfg[x][1], 0, g, &q)) continue;
                snprintf(label, sizeof label, "mt%d nt%d%s", cfg[x][0], cfg[x][1], g ? " slices" : "");
                time_plan(dev, cpu, &p, &b, &q, label, runs, pairs);
            }
        }
        qattn_buffer *all[7] = {b.q, b.k, b.sc, b.w, b.ks, b.ke, b.l};
        for (int x = 0; x < 7; ++x) qattn_buffer_free(dev, all[x]);
        free(b.hq);
        free(b.hk);
        free(b.hsc);
        free(b.hw);
        free(b.hks);
        free(b.hke);
    }
    qattn_context_free(dev);
    qattn_context_free(cpu);
    if (n_spot_failed) printf("%d configurations failed their spot check\n", n_spot_failed);
    return n_spot_failed ? 1 : 0;
}
