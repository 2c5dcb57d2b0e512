/* KV-store preset: `batch` new tokens written into random slots of a
 * `keys`-slot cache. Verified bit-exactly against the cpu reference. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "test_rng.h"
#include "tolerance.h"

typedef struct store_launch {
    qattn_context *ctx;
    qattn_kv_store_args args;
} store_launch;

static qattn_status launch(void *p) {
    store_launch *l = p;
    return qattn_kv_store(l->ctx, &l->args);
}

/* Runs the store on ctx over fresh poisoned caches; returns the cache bytes
 * and scales in host arrays. */
static int store_on(qattn_context *ctx, const bench_preset *p, const uint16_t *kn, const int32_t *slots,
                    uint8_t *kc_out, float *ks_out, store_launch *keep, qattn_buffer **bufs,
                    bench_result *res) {
    const int T = p->batch, Hkv = p->kv_heads, D = p->head_dim, N = p->keys;
    const size_t es = qattn_dtype_size(p->kv_dtype), cache = (size_t)N * Hkv * D * es;
    const int scaled = p->kv_dtype != QATTN_BF16;
    size_t nn = (size_t)T * Hkv * D * 2;
    if (!(bufs[0] = bench_upload(ctx, kn, nn, res)) || !(bufs[1] = bench_upload(ctx, slots, T * 4, res)) ||
        !(bufs[2] = bench_upload(ctx, NULL, cache, res)) || !(bufs[3] = bench_upload(ctx, NULL, cache, res)) ||
        (scaled && !(bufs[4] = bench_upload(ctx, NULL, (size_t)N * Hkv * 4, res))) ||
        (scaled && !(bufs[5] = bench_upload(ctx, NULL, (size_t)N * Hkv * 4, res))))
        return -1;
    qattn_kv_store_args *a = &keep->args;
    keep->ctx = ctx;
    memset(a, 0, sizeof *a);
    a->k_new = qattn_tensor_contiguous(bufs[0], 0, QATTN_BF16, 3, (int64_t[]){T, Hkv, D});
    a->v_new = a->k_new;
    a->slot_mapping = qattn_tensor_contiguous(bufs[1], 0, QATTN_I32, 1, (int64_t[]){T});
    a->k_cache = qattn_tensor_contiguous(bufs[2], 0, p->kv_dtype, 3, (int64_t[]){N, Hkv, D});
    a->v_cache = qattn_tensor_contiguous(bufs[3], 0, p->kv_dtype, 3, (int64_t[]){N, Hkv, D});
    if (scaled) {
        a->k_scale = qattn_tensor_contiguous(bufs[4], 0, QATTN_F32, 2, (int64_t[]){N, Hkv});
        a->v_scale = qattn_tensor_contiguous(bufs[5], 0, QATTN_F32, 2, (int64_t[]){N, Hkv});
    }
    if (launch(keep) != QATTN_OK || qattn_buffer_download(ctx, bufs[2], 0, kc_out, cache) != QATTN_OK ||
        (scaled && qattn_buffer_download(ctx, bufs[4], 0, ks_out, (size_t)N * Hkv * 4) != QATTN_OK)) {
        snprintf(res->error, sizeof res->error, "kv_store: %s", qattn_last_error(ctx));
        return -1;
    }
    return 0;
}

int bench_kv_store(qattn_context *ctx, const bench_preset *p, const bench_config *cfg, bench_result *res) {
    const int T = p->batch, Hkv = p->kv_heads, D = p->head_dim, N = p->keys;
    const size_t es = qattn_dtype_size(p->kv_dtype), cache = (size_t)N * Hkv * D * es;
    qt_rng rng = qt_rng_for(p->name);
    rng.state ^= cfg->seed;
    uint16_t *kn = malloc((size_t)T * Hkv * D * 2);
    int32_t *slots = malloc((size_t)N * 4);
    qt_fill_bf16(&rng, kn, (size_t)T * Hkv * D, 3.0f);
    for (int i = 0; i < N; ++i) slots[i] = i;
    qt_shuffle_i32(&rng, slots, (size_t)N);
    slots[T / 2] = -1; /* one padding token */
    uint8_t *got = malloc(cache), *want = malloc(cache);
    float *gs = malloc((size_t)N * Hkv * 4), *ws = malloc((size_t)N * Hkv * 4);
    qattn_buffer *bufs[6] = {0}, *rbufs[6] = {0};
    store_launch l, rl;
    qattn_context *cpu = NULL;
    char err[256];
    int rc = -1;
    if (store_on(ctx, p, kn, slots, got, gs, &l, bufs, res) != 0) goto done;
    snprintf(res->variant, sizeof res->variant, "store");
    res->splits = 1;
    if (qattn_context_create(qattn_backend_cpu(), NULL, &cpu, err, sizeof err) != QATTN_OK ||
        store_on(cpu, p, kn, slots, want, ws, &rl, rbufs, res) != 0)
        goto done;
    res->verified = qt_tol_kv_store_bytes(got, want, cache) < 0 &&
                    (p->kv_dtype == QATTN_BF16 || memcmp(gs, ws, (size_t)N * Hkv * 4) == 0);
    res->worst_ratio = res->verified ? 0.0 : 1e9;
    res->bytes = (double)T * Hkv * D * (2.0 * 2 + 2.0 * es) + (double)T * Hkv * 8;
    rc = bench_time(ctx, launch, &l, cfg, res);
done:
    for (int i = 0; i < 6; ++i) {
        qattn_buffer_free(ctx, bufs[i]);
        qattn_buffer_free(cpu, rbufs[i]);
    }
    qattn_context_free(cpu);
    free(kn); free(slots); free(got); free(want); free(gs); free(ws);
    return rc;
}
