/* Vulkan embedding measurements (issue 9):
 *
 *   --embed-record N   one token of an N-layer model: N decode calls of the
 *                      preset (each on its own copy of the cache, as layers
 *                      have) recorded into one command buffer of the bench,
 *                      submitted once. Reports the wall time of that submit
 *                      (vkQueueSubmit .. fence), the GPU span between the
 *                      buffer's first and last timestamp, the sum of the N
 *                      calls' device times in the default mode, the wall time
 *                      of one empty submit, and whether
 *                      wall(recorded) <= sum(device) + one submit.
 *   --pipeline-cache F loads the pipeline cache file F before the presets
 *                      run (a first run has none), prints how many pipelines
 *                      were created and how many of them the driver compiled
 *                      (creation feedback), then saves the cache to F.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "bench_embed.h"
#include "qt_vk.h"
#include "test_rng.h"
#include "tolerance.h"

static double now_us(void) {
    struct timespec ts;
    timespec_get(&ts, TIME_UTC);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Largest total of cache copies the bench allocates (then layers share). */
static const double MAX_CACHE_BYTES = 8.0 * 1024 * 1024 * 1024;

typedef struct layer_set {
    int n_copies;
    qattn_buffer **kc, **vc, **ks, **vs;
} layer_set;

int bench_embed_record(qattn_context *ctx, const bench_preset *p, const bench_config *cfg, int n_ops,
                       bench_result *res) {
    qattn_vulkan_device dev;
    memset(&dev, 0, sizeof dev);
    dev.size = sizeof dev;
    if (qattn_vulkan_get_device(ctx, &dev) != QATTN_OK) {
        snprintf(res->error, sizeof res->error, "--embed-record needs the vulkan backend");
        return -1;
    }
    const int B = p->batch, R = p->rows, Hq = p->q_heads, Hkv = p->kv_heads, D = p->head_dim;
    const int L = p->keys, P = p->page_size, ppr = (L + P - 1) / P;
    const size_t n_slots = (size_t)B * ppr * P, es = qattn_dtype_size(p->kv_dtype);
    const size_t kv_bytes = n_slots * Hkv * D * es, qn = (size_t)B * R * Hq * D;
    const int scaled = p->kv_dtype != QATTN_BF16;
    qt_rng rng = qt_rng_for(p->name);
    rng.state ^= cfg->seed;
    uint16_t *q = malloc(qn * 2), *o = malloc(qn * 2 * (size_t)n_ops), *oref = malloc(qn * 2);
    uint8_t *kc = malloc(kv_bytes), *vc = malloc(kv_bytes);
    float *ks = malloc(n_slots * Hkv * 4), *vs = malloc(n_slots * Hkv * 4);
    int32_t *pages = malloc((size_t)B * ppr * 4), *indptr = malloc((size_t)(B + 1) * 4), *lens = malloc((size_t)B * 4);
    layer_set ls;
    memset(&ls, 0, sizeof ls);
    ls.n_copies = (int)(MAX_CACHE_BYTES / (2.0 * (double)kv_bytes));
    if (ls.n_copies < 1) ls.n_copies = 1;
    if (ls.n_copies > n_ops) ls.n_copies = n_ops;
    ls.kc = calloc((size_t)ls.n_copies, sizeof *ls.kc);
    ls.vc = calloc((size_t)ls.n_copies, sizeof *ls.vc);
    ls.ks = calloc((size_t)ls.n_copies, sizeof *ls.ks);
    ls.vs = calloc((size_t)ls.n_copies, sizeof *ls.vs);
    qattn_buffer *bq = NULL, *bip = NULL, *bpg = NULL, *bln = NULL, *bo = NULL, *bws = NULL;
    qt_vk v;
    memset(&v, 0, sizeof v);
    VkQueryPool qp = VK_NULL_HANDLE;
    double *s_def = NULL, *s_sum = NULL, *s_rec = NULL, *s_gpu = NULL, *s_empty = NULL, *s_host = NULL;
    int rc = -1;
    qattn_decode_args a;
    memset(&a, 0, sizeof a);
    qattn_decode_plan plan;

    qt_fill_bf16(&rng, q, qn, 1.0f);
    const size_t nkv = n_slots * Hkv * D;
    if (p->kv_dtype == QATTN_BF16) {
        qt_fill_bf16(&rng, (uint16_t *)kc, nkv, 1.0f);
        qt_fill_bf16(&rng, (uint16_t *)vc, nkv, 1.0f);
    } else if (p->kv_dtype == QATTN_I8) {
        qt_fill_i8(&rng, (int8_t *)kc, nkv);
        qt_fill_i8(&rng, (int8_t *)vc, nkv);
    } else {
        qt_fill_fp8(&rng, kc, nkv, p->kv_dtype, 8.0f);
        qt_fill_fp8(&rng, vc, nkv, p->kv_dtype, 8.0f);
    }
    const float amp = p->kv_dtype == QATTN_I8 ? 0.01f : 0.1f;
    qt_fill_f32_pos(&rng, ks, n_slots * Hkv, 0.5f * amp, amp);
    qt_fill_f32_pos(&rng, vs, n_slots * Hkv, 0.5f * amp, amp);
    for (int i = 0; i < B * ppr; ++i) pages[i] = i;
    qt_shuffle_i32(&rng, pages, (size_t)B * ppr);
    for (int b = 0; b <= B; ++b) indptr[b] = b * ppr;
    for (int b = 0; b < B; ++b) lens[b] = L;

    for (int c = 0; c < ls.n_copies; ++c)
        if (!(ls.kc[c] = bench_upload(ctx, kc, kv_bytes, res)) || !(ls.vc[c] = bench_upload(ctx, vc, kv_bytes, res)) ||
            (scaled && !(ls.ks[c] = bench_upload(ctx, ks, n_slots * Hkv * 4, res))) ||
            (scaled && !(ls.vs[c] = bench_upload(ctx, vs, n_slots * Hkv * 4, res))))
            goto done;
    if (!(bq = bench_upload(ctx, q, qn * 2, res)) || !(bip = bench_upload(ctx, indptr, (size_t)(B + 1) * 4, res)) ||
        !(bpg = bench_upload(ctx, pages, (size_t)B * ppr * 4, res)) || !(bln = bench_upload(ctx, lens, (size_t)B * 4, res)) ||
        !(bo = bench_upload(ctx, NULL, qn * 2 * (size_t)n_ops, res)))
        goto done;
    const qattn_dtype kd = p->kv_dtype;
    a.q = qattn_tensor_contiguous(bq, 0, QATTN_BF16, 4, (int64_t[]){B, R, Hq, D});
    a.k_cache = qattn_tensor_contiguous(ls.kc[0], 0, kd, 3, (int64_t[]){(int64_t)n_slots, Hkv, D});
    a.v_cache = qattn_tensor_contiguous(ls.vc[0], 0, kd, 3, (int64_t[]){(int64_t)n_slots, Hkv, D});
    if (scaled) {
        a.k_scale = qattn_tensor_contiguous(ls.ks[0], 0, QATTN_F32, 2, (int64_t[]){(int64_t)n_slots, Hkv});
        a.v_scale = qattn_tensor_contiguous(ls.vs[0], 0, QATTN_F32, 2, (int64_t[]){(int64_t)n_slots, Hkv});
    }
    a.kv_indptr = qattn_tensor_contiguous(bip, 0, QATTN_I32, 1, (int64_t[]){B + 1});
    a.kv_indices = qattn_tensor_contiguous(bpg, 0, QATTN_I32, 1, (int64_t[]){(int64_t)B * ppr});
    a.kv_lens = qattn_tensor_contiguous(bln, 0, QATTN_I32, 1, (int64_t[]){B});
    a.o = qattn_tensor_contiguous(bo, 0, QATTN_BF16, 4, (int64_t[]){B, R, Hq, D});
    a.page_size = P;
    a.max_kv_len = L;
    a.sm_scale = 1.0f / sqrtf((float)D);
    a.window_left = -1;
    if (qattn_decode_plan_create(ctx, &a, NULL, &plan) != QATTN_OK) {
        snprintf(res->error, sizeof res->error, "plan: %s", qattn_last_error(ctx));
        goto done;
    }
    snprintf(res->variant, sizeof res->variant, "%s", qattn_decode_variant_name(plan.variant));
    res->splits = plan.num_splits;
    if (plan.workspace_bytes && !(bws = bench_upload(ctx, NULL, plan.workspace_bytes, res))) goto done;

    /* Layer l: its own cache copy, its own slice of o. */
#define LAYER(l)                                                                   \
    do {                                                                           \
        const int c_ = (l) % ls.n_copies;                                          \
        a.k_cache.buffer = ls.kc[c_];                                              \
        a.v_cache.buffer = ls.vc[c_];                                              \
        a.k_scale.buffer = scaled ? ls.ks[c_] : NULL;                              \
        a.v_scale.buffer = scaled ? ls.vs[c_] : NULL;                              \
        a.o.offset = (uint64_t)(l) * qn * 2;                                       \
    } while (0)

    if (!qt_vk_attach(&v, &dev)) {
        snprintf(res->error, sizeof res->error, "cannot reach the context's Vulkan device");
        goto done;
    }
    VkQueryPoolCreateInfo qci = {VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
    qci.queryType = VK_QUERY_TYPE_TIMESTAMP;
    qci.queryCount = 2;
    if (v.vkCreateQueryPool(v.device, &qci, NULL, &qp) != VK_SUCCESS) {
        snprintf(res->error, sizeof res->error, "vkCreateQueryPool failed");
        goto done;
    }
    const int iters = cfg->iters, warm = cfg->warmup > 0 ? cfg->warmup : 1;
    s_def = calloc((size_t)iters, sizeof *s_def);
    s_sum = calloc((size_t)iters, sizeof *s_sum);
    s_rec = calloc((size_t)iters, sizeof *s_rec);
    s_gpu = calloc((size_t)iters, sizeof *s_gpu);
    s_empty = calloc((size_t)iters, sizeof *s_empty);
    s_host = calloc((size_t)iters, sizeof *s_host);

    /* Recorded, once, checked against the reference. */
    const double t_warm = now_us();
    /* it -1: the checked run; then warm-up (a count and a minimum time, so
     * the GPU clocks are up), then the timed runs. */
    int n_warm = 0, k = 0;
    for (int it = -1;; ++it) {
        int timed = 0;
        if (it >= 0) {
            if (n_warm < warm || now_us() - t_warm < cfg->warmup_min_ms * 1e3) ++n_warm;
            else if (k < iters) timed = 1;
            else break;
        }
        if (!qt_vk_cmd_begin(&v)) goto vkfail;
        v.vkCmdResetQueryPool(v.cmd, qp, 0, 2);
        v.vkCmdWriteTimestamp(v.cmd, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, qp, 0);
        /* Uploads happened through qattn's own queue submissions, which
         * completed; an engine would put its own barrier here. */
        const double h0 = now_us();
        if (qattn_vulkan_record_begin(ctx, v.cmd) != QATTN_OK) goto qfail;
        for (int l = 0; l < n_ops; ++l) {
            LAYER(l);
            if (qattn_decode_run(ctx, &plan, &a, bws, 0) != QATTN_OK) {
                qattn_vulkan_record_end(ctx, NULL);
                goto qfail;
            }
        }
        if (qattn_vulkan_record_end(ctx, NULL) != QATTN_OK) goto qfail;
        const double h1 = now_us();
        v.vkCmdWriteTimestamp(v.cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, qp, 1);
        qt_vk_cmd_barrier(&v, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
                          VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_READ_BIT);
        const double t0 = now_us();
        if (!qt_vk_cmd_submit_wait(&v)) goto vkfail;
        const double t1 = now_us();
        uint64_t ts[2];
        if (v.vkGetQueryPoolResults(v.device, qp, 0, 2, sizeof ts, ts, sizeof ts[0],
                                    VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT) != VK_SUCCESS)
            goto vkfail;
        if (it == -1) {
            /* Every layer's o equals the reference of layer 0 (same data). */
            if (qattn_buffer_download(ctx, bo, 0, o, qn * 2 * (size_t)n_ops) != QATTN_OK) goto qfail;
            qattn_context *cpu = NULL;
            char err[256];
            qattn_buffer *cb[9] = {0};
            int ok = qattn_context_create(qattn_backend_cpu(), NULL, &cpu, err, sizeof err) == QATTN_OK;
            const void *src[9] = {q, kc, vc, ks, vs, indptr, pages, lens, oref};
            const size_t sz[9] = {qn * 2, kv_bytes, kv_bytes, n_slots * Hkv * 4, n_slots * Hkv * 4,
                                  (size_t)(B + 1) * 4, (size_t)B * ppr * 4, (size_t)B * 4, qn * 2};
            for (int i = 0; ok && i < 9; ++i) ok = qattn_buffer_wrap(cpu, (void *)src[i], sz[i], &cb[i]) == QATTN_OK;
            if (ok) {
                qattn_decode_args r = a;
                r.q.buffer = cb[0];
                r.k_cache.buffer = cb[1];
                r.v_cache.buffer = cb[2];
                r.k_scale.buffer = scaled ? cb[3] : NULL;
                r.v_scale.buffer = scaled ? cb[4] : NULL;
                r.kv_indptr.buffer = cb[5];
                r.kv_indices.buffer = cb[6];
                r.kv_lens.buffer = cb[7];
                r.o.buffer = cb[8];
                r.o.offset = 0;
                qattn_decode_options ro = QATTN_DECODE_OPTIONS_INIT;
                ro.variant = QATTN_DECODE_SIMT;
                qattn_decode_plan rp;
                qattn_buffer *rws = NULL;
                ok = qattn_decode_plan_create(cpu, &r, &ro, &rp) == QATTN_OK &&
                     qattn_buffer_alloc(cpu, rp.workspace_bytes, &rws) == QATTN_OK &&
                     qattn_decode_run(cpu, &rp, &r, rws, 0) == QATTN_OK;
                qattn_buffer_free(cpu, rws);
            }
            for (int i = 0; i < 9; ++i) qattn_buffer_free(cpu, cb[i]);
            qattn_context_free(cpu);
            if (!ok) {
                snprintf(res->error, sizeof res->error, "reference failed");
                goto done;
            }
            res->verified = 1;
            res->worst_ratio = 0.0;
            for (int l = 0; l < n_ops; ++l)
                for (size_t e = 0; e < qn; ++e) {
                    const double g = qattn_bf16_to_f32(o[(size_t)l * qn + e]), rf = qattn_bf16_to_f32(oref[e]);
                    const double ratio = fabs(g - rf) / qt_tol_decode_o_bound(rf);
                    if (!qt_tol_decode_o(g, rf)) res->verified = 0;
                    if (ratio > res->worst_ratio || isnan(ratio)) res->worst_ratio = ratio;
                }
        }
        if (timed) {
            s_rec[k] = t1 - t0;
            s_host[k] = h1 - h0;
            s_gpu[k] = (double)(ts[1] - ts[0]) * v.props.limits.timestampPeriod * 1e-3;
            ++k;
        }
    }
    /* One empty submit: the floor of any submission. */
    for (int it = 0; it < warm + iters; ++it) {
        if (!qt_vk_cmd_begin(&v)) goto vkfail;
        const double t0 = now_us();
        if (!qt_vk_cmd_submit_wait(&v)) goto vkfail;
        if (it >= warm) s_empty[it - warm] = now_us() - t0;
    }
    /* The default mode: N calls, each submitted and waited for. */
    for (int it = 0; it < warm + iters; ++it) {
        double sum = 0.0;
        const double t0 = now_us();
        for (int l = 0; l < n_ops; ++l) {
            LAYER(l);
            double ms = 0.0;
            if (qattn_decode_run(ctx, &plan, &a, bws, 0) != QATTN_OK || qattn_last_op_time_ms(ctx, &ms) != QATTN_OK)
                goto qfail;
            sum += ms * 1e3;
        }
        if (it >= warm) {
            s_def[it - warm] = now_us() - t0;
            s_sum[it - warm] = sum;
        }
    }
#undef LAYER
    const double rec = median(s_rec, iters), gpu = median(s_gpu, iters), host = median(s_host, iters);
    const double sum = median(s_sum, iters), def = median(s_def, iters), empty = median(s_empty, iters);
    printf("%-24s embed-record: %d decodes (%s, %d split%s, %d cache cop%s) in one command buffer\n", p->name, n_ops,
           res->variant, res->splits, res->splits == 1 ? "" : "s", ls.n_copies, ls.n_copies == 1 ? "y" : "ies");
    printf("%-24s   recorded: wall %.1f us (one submit .. fence), GPU span %.1f us, host recording %.1f us\n", "", rec,
           gpu, host);
    printf("%-24s   default:  wall %.1f us for %d submit-and-wait calls, summed device time %.1f us\n", "", def, n_ops,
           sum);
    printf("%-24s   one empty submit %.1f us; bar wall(recorded) <= sum(device) + one submit = %.1f us: %s\n", "",
           empty, sum + empty, rec <= sum + empty ? "MET" : "NOT MET");
    printf("%-24s   check vs cpu reference (all %d outputs): %s (worst err/tol %.3g)\n", "", n_ops,
           res->verified ? "matched" : "MISMATCH", res->worst_ratio);
    res->median_us = rec;
    res->min_us = rec;
    res->max_us = rec;
    res->bytes = (double)n_ops * B * L * Hkv * (2.0 * D * es + (scaled ? 8.0 : 0.0));
    snprintf(res->timer, sizeof res->timer, "host");
    rc = 0;
    goto done;
qfail:
    snprintf(res->error, sizeof res->error, "%s", qattn_last_error(ctx));
    goto done;
vkfail:
    snprintf(res->error, sizeof res->error, "a Vulkan call of the bench failed");
done:
    if (qp) v.vkDestroyQueryPool(v.device, qp, NULL);
    if (v.device) qt_vk_close(&v);
    for (int c = 0; c < ls.n_copies; ++c) {
        qattn_buffer_free(ctx, ls.kc[c]);
        qattn_buffer_free(ctx, ls.vc[c]);
        qattn_buffer_free(ctx, ls.ks[c]);
        qattn_buffer_free(ctx, ls.vs[c]);
    }
    qattn_buffer *all[] = {bq, bip, bpg, bln, bo, bws};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) qattn_buffer_free(ctx, all[i]);
    free(ls.kc); free(ls.vc); free(ls.ks); free(ls.vs);
    free(s_def); free(s_sum); free(s_rec); free(s_gpu); free(s_empty); free(s_host);
    free(q); free(o); free(oref); free(kc); free(vc); free(ks); free(vs); free(pages); free(indptr); free(lens);
    return rc;
}

void bench_embed_cache_load(qattn_context *ctx, const char *path) {
    if (qattn_vulkan_pipeline_cache_load_file(ctx, path) == QATTN_OK)
        printf("pipeline cache: loaded %s\n", path);
    else
        printf("pipeline cache: nothing loaded (%s)\n", qattn_last_error(ctx));
}

int bench_embed_cache_save(qattn_context *ctx, const char *path) {
    qattn_vulkan_pipeline_stats st;
    memset(&st, 0, sizeof st);
    st.size = sizeof st;
    if (qattn_vulkan_pipeline_stats_get(ctx, &st) != QATTN_OK) {
        fprintf(stderr, "qattn-bench: %s\n", qattn_last_error(ctx));
        return -1;
    }
    printf("pipelines: created %llu, compiled by the driver %llu, pipeline-cache hits %llu, no feedback %llu, "
           "%.1f ms creating them\n",
           (unsigned long long)st.created, (unsigned long long)st.compiled, (unsigned long long)st.cache_hits,
           (unsigned long long)st.no_feedback, st.create_ms);
    size_t bytes = 0;
    qattn_vulkan_pipeline_cache_save(ctx, NULL, &bytes);
    if (qattn_vulkan_pipeline_cache_save_file(ctx, path) != QATTN_OK) {
        fprintf(stderr, "qattn-bench: %s\n", qattn_last_error(ctx));
        return -1;
    }
    printf("pipeline cache: saved %zu bytes to %s\n", bytes, path);
    return 0;
}
