/* MQA-logits preset: S rows at the end of an S_kv-token context (causal
 * windows [0, S_kv - S + i + 1)), clean_logits on. Verifies four sampled
 * rows against the cpu reference with the spec's per-element bound. A
 * coopmat plan also gets its matrix ceiling (qattn_mqa_matrix_ceiling),
 * printed before the first preset that uses it; main.c prints each
 * preset's share of it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "qattn/experimental.h"
#include "test_rng.h"
#include "tolerance.h"

typedef struct mqa_launch {
    qattn_context *ctx;
    qattn_mqa_logits_plan plan;
    qattn_mqa_logits_args args;
    qattn_buffer *ws;
} mqa_launch;

/* The matrix ceiling of each coopmat geometry measured so far (the tile
 * shape decides it, not the preset's rows or KV length). */
typedef struct ceiling_entry {
    int32_t mt, kv_tile, nsg, d, sg;
    qattn_matrix_shape shape;
    double tflops;
} ceiling_entry;

/* The plan's matrix ceiling (TFLOP/s), measured once per tile shape and
 * printed when first measured, so it precedes the presets that use it; 0
 * when the plan is not coopmat or the backend has no ceiling kernel. */
static double plan_ceiling(qattn_context *ctx, const qattn_mqa_logits_plan *pl) {
    static ceiling_entry seen[16];
    static int n_seen;
    if (pl->variant != QATTN_MQA_COOPMAT) return 0.0;
    const int32_t mt = pl->m_tiles;
    for (int i = 0; i < n_seen; ++i) {
        const ceiling_entry *e = &seen[i];
        if (e->mt == mt && e->kv_tile == pl->kv_tile && e->nsg == pl->subgroups_per_workgroup &&
            e->d == pl->head_dim && e->sg == pl->subgroup_size && !memcmp(&e->shape, &pl->matrix_shape, sizeof e->shape))
            return e->tflops;
    }
    double tf = 0.0;
    if (qattn_mqa_matrix_ceiling(ctx, pl, &tf) != QATTN_OK) {
        printf("matrix ceiling: not measured: %s\n", qattn_last_error(ctx));
        tf = 0.0;
    } else {
        printf("matrix ceiling (f16 cooperative-matrix GEMM of the kernel's tile: %d subgroups x %d lanes, "
               "%d q rows each, %d-column KV tile, D %d, %ux%ux%u): %.1f TFLOP/s\n",
               (int)pl->subgroups_per_workgroup, (int)pl->subgroup_size, 16 * (int)mt, (int)pl->kv_tile,
               (int)pl->head_dim, (unsigned)pl->matrix_shape.m, (unsigned)pl->matrix_shape.n,
               (unsigned)pl->matrix_shape.k, tf);
    }
    fflush(stdout);
    if (n_seen < 16)
        seen[n_seen++] = (ceiling_entry){mt, pl->kv_tile, pl->subgroups_per_workgroup, pl->head_dim,
                                         pl->subgroup_size, pl->matrix_shape, tf};
    return tf;
}

static qattn_status launch(void *p) {
    mqa_launch *l = p;
    return qattn_mqa_logits_run(l->ctx, &l->plan, &l->args, l->ws, 0);
}

/* Reference logits of rows `rows` (n of them), written densely [n, S_kv]. */
static int reference(const bench_preset *p, const uint8_t *q, const uint8_t *k, const float *ksc,
                     const float *w, const int32_t *ks, const int32_t *ke, const int *rows, int n,
                     float *out) {
    const int H = p->heads, D = p->mqa_dim, Skv = p->S_kv;
    qattn_context *cpu = NULL;
    char err[256];
    if (qattn_context_create(qattn_backend_cpu(), NULL, &cpu, err, sizeof err) != QATTN_OK) return -1;
    uint8_t *qs = malloc((size_t)n * H * D);
    float *ws = malloc((size_t)n * H * 4);
    int32_t *kss = malloc(n * 4), *kes = malloc(n * 4);
    for (int i = 0; i < n; ++i) {
        memcpy(qs + (size_t)i * H * D, q + (size_t)rows[i] * H * D, (size_t)H * D);
        memcpy(ws + (size_t)i * H, w + (size_t)rows[i] * H, (size_t)H * 4);
        kss[i] = ks[rows[i]];
        kes[i] = ke[rows[i]];
    }
    qattn_buffer *b[7];
    qattn_buffer_wrap(cpu, qs, (size_t)n * H * D, &b[0]);
    qattn_buffer_wrap(cpu, (void *)k, (size_t)Skv * D, &b[1]);
    qattn_buffer_wrap(cpu, (void *)ksc, (size_t)Skv * 4, &b[2]);
    qattn_buffer_wrap(cpu, ws, (size_t)n * H * 4, &b[3]);
    qattn_buffer_wrap(cpu, kss, n * 4, &b[4]);
    qattn_buffer_wrap(cpu, kes, n * 4, &b[5]);
    qattn_buffer_wrap(cpu, out, (size_t)n * Skv * 4, &b[6]);
    qattn_mqa_logits_args a = {
        .q = qattn_tensor_contiguous(b[0], 0, QATTN_FP8_E4M3FN, 3, (int64_t[]){n, H, D}),
        .k = qattn_tensor_contiguous(b[1], 0, QATTN_FP8_E4M3FN, 2, (int64_t[]){Skv, D}),
        .k_scale = qattn_tensor_contiguous(b[2], 0, QATTN_F32, 1, (int64_t[]){Skv}),
        .weights = qattn_tensor_contiguous(b[3], 0, QATTN_F32, 2, (int64_t[]){n, H}),
        .ks = qattn_tensor_contiguous(b[4], 0, QATTN_I32, 1, (int64_t[]){n}),
        .ke = qattn_tensor_contiguous(b[5], 0, QATTN_I32, 1, (int64_t[]){n}),
        .logits = qattn_tensor_contiguous(b[6], 0, QATTN_F32, 2, (int64_t[]){n, Skv}),
        .clean_logits = 1,
    };
    /* As for decode: QATTN_MQA_VARIANT is for the measured backend. */
    qattn_mqa_logits_options ref_opt = QATTN_MQA_LOGITS_OPTIONS_INIT;
    ref_opt.variant = QATTN_MQA_DIRECT;
    qattn_mqa_logits_plan plan;
    int rc = (qattn_mqa_logits_plan_create(cpu, &a, &ref_opt, &plan) == QATTN_OK &&
              qattn_mqa_logits_run(cpu, &plan, &a, NULL, 0) == QATTN_OK) ? 0 : -1;
    for (int i = 0; i < 7; ++i) qattn_buffer_free(cpu, b[i]);
    qattn_context_free(cpu);
    free(qs); free(ws); free(kss); free(kes);
    return rc;
}

int bench_mqa_logits(qattn_context *ctx, const bench_preset *p, const bench_config *cfg, bench_result *res) {
    const int S = p->S, Skv = p->S_kv, H = p->heads, D = p->mqa_dim;
    const int64_t stride = ((int64_t)Skv + 255) / 256 * 256; /* the spec's recommendation */
    qt_rng rng = qt_rng_for(p->name);
    rng.state ^= cfg->seed;
    uint8_t *q = malloc((size_t)S * H * D), *k = malloc((size_t)Skv * D);
    float *ksc = malloc((size_t)Skv * 4), *w = malloc((size_t)S * H * 4);
    int32_t *ks = malloc((size_t)S * 4), *ke = malloc((size_t)S * 4);
    float *logits = malloc((size_t)S * stride * 4);
    qt_fill_fp8(&rng, q, (size_t)S * H * D, QATTN_FP8_E4M3FN, 4.0f);
    qt_fill_fp8(&rng, k, (size_t)Skv * D, QATTN_FP8_E4M3FN, 4.0f);
    qt_fill_f32_pos(&rng, ksc, (size_t)Skv, 0.01f, 0.02f);
    qt_fill_f32(&rng, w, (size_t)S * H, 1.0f);
    double pairs = 0;
    for (int i = 0; i < S; ++i) {
        ks[i] = 0;
        ke[i] = Skv - S + i + 1;
        pairs += ke[i];
    }
    mqa_launch l = {.ctx = ctx};
    qattn_mqa_logits_args *a = &l.args;
    qattn_buffer *bufs[8] = {0};
    int rc = -1;
    if (!(bufs[0] = bench_upload(ctx, q, (size_t)S * H * D, res)) ||
        !(bufs[1] = bench_upload(ctx, k, (size_t)Skv * D, res)) ||
        !(bufs[2] = bench_upload(ctx, ksc, (size_t)Skv * 4, res)) ||
        !(bufs[3] = bench_upload(ctx, w, (size_t)S * H * 4, res)) ||
        !(bufs[4] = bench_upload(ctx, ks, (size_t)S * 4, res)) ||
        !(bufs[5] = bench_upload(ctx, ke, (size_t)S * 4, res)) ||
        !(bufs[6] = bench_upload(ctx, NULL, (size_t)S * stride * 4, res)))
        goto done;
    a->q = qattn_tensor_contiguous(bufs[0], 0, QATTN_FP8_E4M3FN, 3, (int64_t[]){S, H, D});
    a->k = qattn_tensor_contiguous(bufs[1], 0, QATTN_FP8_E4M3FN, 2, (int64_t[]){Skv, D});
    a->k_scale = qattn_tensor_contiguous(bufs[2], 0, QATTN_F32, 1, (int64_t[]){Skv});
    a->weights = qattn_tensor_contiguous(bufs[3], 0, QATTN_F32, 2, (int64_t[]){S, H});
    a->ks = qattn_tensor_contiguous(bufs[4], 0, QATTN_I32, 1, (int64_t[]){S});
    a->ke = qattn_tensor_contiguous(bufs[5], 0, QATTN_I32, 1, (int64_t[]){S});
    a->logits = qattn_tensor_contiguous(bufs[6], 0, QATTN_F32, 2, (int64_t[]){S, Skv});
    a->logits.strides[0] = stride;
    a->clean_logits = 1;
    if (qattn_mqa_logits_plan_create(ctx, a, NULL, &l.plan) != QATTN_OK) {
        snprintf(res->error, sizeof res->error, "plan: %s", qattn_last_error(ctx));
        goto done;
    }
    snprintf(res->variant, sizeof res->variant, "%s/r%d", qattn_mqa_variant_name(l.plan.variant),
             l.plan.rows_per_subgroup);
    res->splits = l.plan.kv_slices;
    res->ceiling_tflops = plan_ceiling(ctx, &l.plan);
    if (l.plan.workspace_bytes && !(bufs[7] = l.ws = bench_upload(ctx, NULL, l.plan.workspace_bytes, res)))
        goto done;
    if (launch(&l) != QATTN_OK ||
        qattn_buffer_download(ctx, bufs[6], 0, logits, (size_t)S * stride * 4) != QATTN_OK) {
        snprintf(res->error, sizeof res->error, "run: %s", qattn_last_error(ctx));
        goto done;
    }
    int rows[4] = {0, S / 3, (2 * S) / 3, S - 1};
    float *ref = malloc((size_t)4 * Skv * 4);
    if (reference(p, q, k, ksc, w, ks, ke, rows, 4, ref) != 0) {
        snprintf(res->error, sizeof res->error, "reference failed");
        free(ref);
        goto done;
    }
    res->verified = 1;
    res->worst_ratio = 0;
    /* |q| and |k| decoded once: the bound's A term costs as much as the
     * reference itself otherwise. */
    float *kf = malloc((size_t)Skv * D * 4), *qf = malloc((size_t)H * D * 4);
    for (size_t e = 0; e < (size_t)Skv * D; ++e) kf[e] = fabsf(qattn_fp8_to_f32(k[e], QATTN_FP8_E4M3FN));
    for (int r = 0; r < 4; ++r) {
        const int i = rows[r];
        for (int e = 0; e < H * D; ++e)
            qf[e] = fabsf(qattn_fp8_to_f32(q[(size_t)i * H * D + e], QATTN_FP8_E4M3FN));
        for (int j = 0; j < Skv; ++j) {
            double A = 0;
            if (j < ke[i]) {
                for (int h = 0; h < H; ++h) {
                    float s = 0; /* exact products of fp8 values; sum error is far below the bound */
                    for (int d = 0; d < D; ++d) s += qf[h * D + d] * kf[(size_t)j * D + d];
                    A += qt_tol_mqa_a_term(w[(size_t)i * H + h], ksc[j], s);
                }
            }
            double got = logits[(size_t)i * stride + j], want = ref[(size_t)r * Skv + j];
            if (!qt_tol_mqa_logit(got, want, A)) res->verified = 0;
            double ratio = isinf(want) ? (got == want ? 0 : 1e9) : fabs(got - want) / qt_tol_mqa_bound(A);
            if (ratio > res->worst_ratio || isnan(ratio)) res->worst_ratio = ratio;
        }
    }
    free(ref);
    free(kf);
    free(qf);
    res->flops = 2.0 * H * D * pairs;
    res->bytes = (double)S * H * D + (double)Skv * (D + 4) + (double)S * H * 4 + (double)S * Skv * 4;
    rc = bench_time(ctx, launch, &l, cfg, res);
done:
    for (int i = 0; i < 8; ++i) qattn_buffer_free(ctx, bufs[i]);
    free(q); free(k); free(ksc); free(w); free(ks); free(ke); free(logits);
    return rc;
}
