/* Paged MQA logits preset (spec 5): B requests, each at the full context
 * with its N new rows, over a cache in the fused page layout ([pages, 64,
 * D] codes, each page's 64 f32 scales after its codes) with a shuffled page
 * table; clean_logits on. Checks 64 sampled (request, row, position)
 * logits of every preset against an f64 loop over the same bytes with the
 * spec's bound (the cpu backend over whole 128K contexts would take
 * minutes), and every other sampled column of the last request for -inf
 * or a finite value.
 *
 * The floors it reports against (main.c): the K codes and scales read once
 * (res->floor_bytes) at the read rate the bench measured, and the FLOPs at
 * the matrix ceiling qattn_mqa_matrix_ceiling measures for the prefill
 * op's coopmat plan of the same H and D (the device's f16 matrix rate for
 * this head shape), measured once per run. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qattn/experimental.h"

#include "bench.h"
#include "test_rng.h"
#include "tolerance.h"

typedef struct pm_launch {
    qattn_context *ctx;
    qattn_paged_mqa_logits_plan plan;
    qattn_paged_mqa_logits_args args;
} pm_launch;

static qattn_status launch(void *p) {
    pm_launch *l = p;
    return qattn_paged_mqa_logits_run(l->ctx, &l->plan, &l->args, NULL, 0);
}

/* The f16 matrix rate for heads x D, from the prefill op's coopmat plan of
 * a long shape; 0 when the device or backend has none. Measured once. */
static double matrix_ceiling(qattn_context *ctx, int H, int D) {
    static int done_h, done_d;
    static double tf;
    if (done_h == H && done_d == D) return tf;
    done_h = H;
    done_d = D;
    tf = 0.0;
    qattn_device_caps caps;
    if (qattn_get_caps(ctx, &caps) != QATTN_OK) return 0.0;
    qattn_mqa_logits_args a;
    memset(&a, 0, sizeof a);
    a.q = qattn_tensor_contiguous(NULL, 0, QATTN_FP8_E4M3FN, 3, (int64_t[]){1024, H, D});
    a.k = qattn_tensor_contiguous(NULL, 0, QATTN_FP8_E4M3FN, 2, (int64_t[]){32768, D});
    a.weights = qattn_tensor_contiguous(NULL, 0, QATTN_F32, 2, (int64_t[]){1024, H});
    qattn_mqa_logits_options o = QATTN_MQA_LOGITS_OPTIONS_INIT;
    o.variant = QATTN_MQA_COOPMAT;
    qattn_mqa_logits_plan plan;
    char err[256];
    if (qattn_mqa_logits_plan_compute(&caps, &a, &o, &plan, err, sizeof err) != QATTN_OK) {
        printf("matrix ceiling for paged MQA: none (%s)\n", err);
    } else if (qattn_mqa_matrix_ceiling(ctx, &plan, &tf) != QATTN_OK) {
        printf("matrix ceiling for paged MQA: not measured: %s\n", qattn_last_error(ctx));
        tf = 0.0;
    } else {
        printf("matrix ceiling for paged MQA (the H%d D%d coopmat tile of the prefill op): %.1f TFLOP/s\n", H, D, tf);
    }
    fflush(stdout);
    return tf;
}

int bench_paged_mqa_logits(qattn_context *ctx, const bench_preset *p, const bench_config *cfg,
                           bench_result *res) {
    const int B = p->batch, N = p->rows, H = p->heads, D = p->mqa_dim, P = p->page_size, ctxlen = p->keys;
    const qattn_dtype FN = QATTN_FP8_E4M3FN;
    const int64_t pages_per = (ctxlen + P - 1) / P, n_pages = (int64_t)B * pages_per;
    const int64_t page_bytes = (int64_t)P * (D + 4);
    const int64_t M = ctxlen, lrow = (M + 255) / 256 * 256;
    qt_rng rng = qt_rng_for(p->name);
    rng.state ^= cfg->seed;
    uint8_t *kv = malloc((size_t)(n_pages * page_bytes)), *q = malloc((size_t)B * N * H * D);
    float *w = malloc((size_t)B * N * H * 4);
    int32_t *indptr = malloc((size_t)(B + 1) * 4), *indices = malloc((size_t)n_pages * 4), *lens = malloc((size_t)B * 4);
    float *logits = NULL;
    qattn_buffer *bufs[7] = {0};
    int rc = -1;
    if (!kv || !q || !w || !indptr || !indices || !lens) {
        snprintf(res->error, sizeof res->error, "host memory");
        goto done;
    }
    /* A pool of random pages, copied over the cache (random bytes for every
     * one of 277 MB would take longer than the preset itself). */
    {
        const int64_t pool = n_pages < 64 ? n_pages : 64;
        for (int64_t g = 0; g < pool; ++g) {
            uint8_t *pg = kv + g * page_bytes;
            qt_fill_fp8(&rng, pg, (size_t)P * D, FN, 4.0f);
            float sc[256];
            qt_fill_f32_pos(&rng, sc, (size_t)P, 0.01f, 0.02f);
            memcpy(pg + (size_t)P * D, sc, (size_t)P * 4);
        }
        for (int64_t g = pool; g < n_pages; ++g) memcpy(kv + g * page_bytes, kv + (g % pool) * page_bytes, (size_t)page_bytes);
    }
    qt_fill_fp8(&rng, q, (size_t)B * N * H * D, FN, 4.0f);
    qt_fill_f32(&rng, w, (size_t)B * N * H, 1.0f);
    for (int64_t i = 0; i < n_pages; ++i) indices[i] = (int32_t)i;
    qt_shuffle_i32(&rng, indices, (size_t)n_pages);
    for (int b = 0; b <= B; ++b) indptr[b] = (int32_t)(b * pages_per);
    for (int b = 0; b < B; ++b) lens[b] = ctxlen;
    if (!(bufs[0] = bench_upload(ctx, q, (size_t)B * N * H * D, res)) ||
        !(bufs[1] = bench_upload(ctx, kv, (size_t)(n_pages * page_bytes), res)) ||
        !(bufs[2] = bench_upload(ctx, w, (size_t)B * N * H * 4, res)) ||
        !(bufs[3] = bench_upload(ctx, indptr, (size_t)(B + 1) * 4, res)) ||
        !(bufs[4] = bench_upload(ctx, indices, (size_t)n_pages * 4, res)) ||
        !(bufs[5] = bench_upload(ctx, lens, (size_t)B * 4, res)) ||
        !(bufs[6] = bench_upload(ctx, NULL, (size_t)B * N * lrow * 4, res)))
        goto done;
    pm_launch l = {.ctx = ctx};
    qattn_paged_mqa_logits_args *a = &l.args;
    a->q = qattn_tensor_contiguous(bufs[0], 0, FN, 4, (int64_t[]){B, N, H, D});
    a->k_cache = qattn_tensor_contiguous(bufs[1], 0, FN, 3, (int64_t[]){n_pages, P, D});
    a->k_cache.strides[0] = page_bytes;
    a->k_scale = qattn_tensor_contiguous(bufs[1], (uint64_t)P * D, QATTN_F32, 2, (int64_t[]){n_pages, P});
    a->k_scale.strides[0] = page_bytes / 4;
    a->weights = qattn_tensor_contiguous(bufs[2], 0, QATTN_F32, 3, (int64_t[]){B, N, H});
    a->kv_indptr = qattn_tensor_contiguous(bufs[3], 0, QATTN_I32, 1, (int64_t[]){B + 1});
    a->kv_indices = qattn_tensor_contiguous(bufs[4], 0, QATTN_I32, 1, (int64_t[]){n_pages});
    a->kv_lens = qattn_tensor_contiguous(bufs[5], 0, QATTN_I32, 1, (int64_t[]){B});
    a->logits = qattn_tensor_contiguous(bufs[6], 0, QATTN_F32, 3, (int64_t[]){B, N, M});
    a->logits.strides[0] = N * lrow;
    a->logits.strides[1] = lrow;
    a->page_size = P;
    a->max_kv_len = (int32_t)M;
    a->clean_logits = 1;
    if (qattn_paged_mqa_logits_plan_create(ctx, a, NULL, &l.plan) != QATTN_OK) {
        snprintf(res->error, sizeof res->error, "plan: %s", qattn_last_error(ctx));
        goto done;
    }
    snprintf(res->variant, sizeof res->variant, "%s/t%d%s", qattn_paged_mqa_variant_name(l.plan.variant),
             (int)l.plan.kv_tile, l.plan.q_staged ? "q" : "");
    res->splits = l.plan.num_splits;
    res->ceiling_tflops = matrix_ceiling(ctx, H, D);
    logits = malloc((size_t)B * N * lrow * 4);
    if (!logits || launch(&l) != QATTN_OK ||
        qattn_buffer_download(ctx, bufs[6], 0, logits, (size_t)B * N * lrow * 4) != QATTN_OK) {
        snprintf(res->error, sizeof res->error, "run: %s", qattn_last_error(ctx));
        goto done;
    }
    /* Samples: position p of row t of request b, visible iff p <= L - N + t. */
    res->verified = 1;
    res->worst_ratio = 0;
    for (int s = 0; s < 64; ++s) {
        const int b = (int)qt_int(&rng, 0, B - 1), t = (int)qt_int(&rng, 0, N - 1);
        const int p_ = s < 8 ? ctxlen - 1 - (int)qt_int(&rng, 0, N - 1) : (int)qt_int(&rng, 0, ctxlen - 1);
        const double got = logits[((size_t)b * N + t) * lrow + p_];
        if (p_ > ctxlen - N + t) {
            if (!(isinf(got) && got < 0)) res->verified = 0;
            continue;
        }
        const int32_t page = indices[indptr[b] + p_ / P];
        const uint8_t *krow = kv + page * page_bytes + (int64_t)(p_ % P) * D;
        float sc;
        memcpy(&sc, kv + page * page_bytes + (int64_t)P * D + 4 * (p_ % P), 4);
        double want = 0, A = 0;
        for (int h = 0; h < H; ++h) {
            const uint8_t *qr = q + (((size_t)b * N + t) * H + h) * D;
            double dot = 0, dabs = 0;
            for (int d = 0; d < D; ++d) {
                const double x = (double)qattn_fp8_to_f32(qr[d], FN) * qattn_fp8_to_f32(krow[d], FN);
                dot += x;
                dabs += fabs(x);
            }
            const double wt = w[((size_t)b * N + t) * H + h];
            want += wt * fmax(0.0, sc * dot);
            A += fabs(wt) * sc * dabs;
        }
        if (!qt_tol_mqa_logit(got, want, A)) res->verified = 0;
        const double ratio = fabs(got - want) / qt_tol_mqa_bound(A);
        if (ratio > res->worst_ratio || isnan(ratio)) res->worst_ratio = ratio;
    }
    res->flops = 2.0 * H * D * (double)B * N * ((double)ctxlen - (N - 1) / 2.0);
    res->floor_bytes = (double)B * ctxlen * (D + 4);
    res->bytes = res->floor_bytes + (double)B * N * H * (D + 4) + (double)B * N * M * 4;
    rc = bench_time(ctx, launch, &l, cfg, res);
done:
    for (int i = 0; i < 7; ++i) qattn_buffer_free(ctx, bufs[i]);
    free(kv); free(q); free(w); free(indptr); free(indices); free(lens); free(logits);
    return rc;
}
