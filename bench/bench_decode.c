/* Decode attention preset: a paged cache of `keys` tokens per request,
 * random pages, fp8/int8/bf16 codes with per-token-head scales, q and o in
 * bf16 or f16. Verifies the first and last request against the cpu
 * reference, then times the plan. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "qattn/experimental.h"
#include "test_rng.h"
#include "tolerance.h"

/* Copies of the cache the timed runs rotate through, so a cache smaller than
 * the GPU's last-level cache is read from memory, as in serving, not from a
 * cache warmed by the previous run: up to 16 copies over at least 256 MB,
 * five times the H200's 50 MB L2 (a B1 8K preset, 17 MB, gets 16 copies,
 * 272 MB), so each run's cache was last touched 15 runs and 255 MB before.
 * Nothing is written between runs, so the device timer covers the op
 * alone. */
enum { MAX_COPIES = 16 };
static const double ROTATE_BYTES = 256.0 * 1024 * 1024;

typedef struct decode_launch {
    qattn_context *ctx;
    qattn_decode_plan plan;
    qattn_decode_args args;
    qattn_buffer *ws;
    int copies, next;
    qattn_buffer *kc[MAX_COPIES], *vc[MAX_COPIES], *ks[MAX_COPIES], *vs[MAX_COPIES];
    qattn_buffer *sum; /* qattn_decode_read's word sum */
} decode_launch;

static void rotate(decode_launch *l) {
    const int c = l->next;
    l->next = (c + 1) % l->copies;
    l->args.k_cache.buffer = l->kc[c];
    l->args.v_cache.buffer = l->vc[c];
    l->args.k_scale.buffer = l->ks[c];
    l->args.v_scale.buffer = l->vs[c];
}

static qattn_status launch(void *p) {
    decode_launch *l = p;
    rotate(l);
    return qattn_decode_run(l->ctx, &l->plan, &l->args, l->ws, 0);
}

/* Decode's own access pattern over the same call and rotation. */
static qattn_status launch_read(void *p) {
    decode_launch *l = p;
    rotate(l);
    return qattn_decode_read(l->ctx, &l->args, l->sum, 0);
}

static uint32_t words_sum(const void *p, size_t bytes) {
    uint32_t s = 0, w;
    for (size_t i = 0; i + 4 <= bytes; i += 4) {
        memcpy(&w, (const char *)p + i, 4);
        s += w;
    }
    return s;
}

/* What qattn_decode_read adds to its sum (qattn/experimental.h) for this
 * preset's dense cache: K and V row words, scale bits of every visible key
 * of every request and kv head, and q's 16-bit elements. */
static uint32_t pattern_sum(const bench_preset *p, const uint16_t *q, const void *kc, const void *vc,
                            const float *ks, const float *vs, const int32_t *pages) {
    const int B = p->batch, R = p->rows, Hkv = p->kv_heads, D = p->head_dim, L = p->keys, P = p->page_size;
    const int ppr = (L + P - 1) / P;
    const size_t row = (size_t)D * qattn_dtype_size(p->kv_dtype);
    const int lo = p->window > 0 && L - R - p->window > 0 ? L - R - p->window : 0;
    uint32_t s = 0;
    for (int b = 0; b < B; ++b)
        for (int k = lo; k < L; ++k) {
            const size_t slot = (size_t)pages[(size_t)b * ppr + k / P] * P + k % P;
            for (int g = 0; g < Hkv; ++g) {
                const size_t at = slot * Hkv + g;
                s += words_sum((const char *)kc + at * row, row) + words_sum((const char *)vc + at * row, row);
                if (ks) s += words_sum(ks + at, 4) + words_sum(vs + at, 4);
            }
        }
    const size_t qn = (size_t)B * R * p->q_heads * D;
    for (size_t i = 0; i < qn; ++i) s += q[i];
    return s;
}

/* Times qattn_decode_read over the launch's call: pattern_us, and whether
 * its sum matched. A backend without the op leaves pattern_us 0. */
static void time_pattern(decode_launch *l, const bench_config *cfg, uint32_t want, bench_result *res) {
    const uint32_t zero = 0;
    uint32_t got = 0;
    qattn_status s = qattn_buffer_alloc(l->ctx, 4, &l->sum);
    if (s == QATTN_OK) s = qattn_buffer_upload(l->ctx, l->sum, 0, &zero, 4);
    if (s == QATTN_OK) s = launch_read(l);
    if (s == QATTN_OK) s = qattn_buffer_download(l->ctx, l->sum, 0, &got, 4);
    if (s != QATTN_OK) {
        snprintf(res->pattern_note, sizeof res->pattern_note, "decode-pattern read: %s", qattn_last_error(l->ctx));
        return;
    }
    res->pattern_verified = got == want;
    if (!res->pattern_verified)
        snprintf(res->pattern_note, sizeof res->pattern_note,
                 "decode-pattern read: sum 0x%08x, the host's 0x%08x", (unsigned)got, (unsigned)want);
    bench_result pr;
    memset(&pr, 0, sizeof pr);
    if (bench_time(l->ctx, launch_read, l, cfg, &pr) == 0) res->pattern_us = pr.median_us;
    else snprintf(res->pattern_note, sizeof res->pattern_note, "decode-pattern read: %s", pr.error);
    free(pr.samples_us);
}

/* Reference output of requests `reqs` on the cpu backend, over the same
 * host cache (wrapped, not copied). */
static int reference(const decode_launch *l, const void *q, const void *kc, const void *vc,
                     const float *ks, const float *vs, const int32_t *pages, int pages_per_req,
                     const int *reqs, int nreq, uint16_t *o_ref, size_t kv_bytes, size_t n_slots) {
    const qattn_decode_args *a = &l->args;
    const int R = (int)a->q.shape[1], Hq = (int)a->q.shape[2], D = (int)a->q.shape[3];
    qattn_context *cpu = NULL;
    char err[256];
    if (qattn_context_create(qattn_backend_cpu(), NULL, &cpu, err, sizeof err) != QATTN_OK) return -1;
    size_t qrow = (size_t)R * Hq * D;
    uint16_t *qs = malloc(nreq * qrow * 2);
    int32_t *ip = malloc((nreq + 1) * 4), *ln = malloc(nreq * 4),
            *pg = malloc((size_t)nreq * pages_per_req * 4);
    ip[0] = 0;
    for (int i = 0; i < nreq; ++i) {
        memcpy(qs + i * qrow, (const uint16_t *)q + (size_t)reqs[i] * qrow, qrow * 2);
        memcpy(pg + (size_t)i * pages_per_req, pages + (size_t)reqs[i] * pages_per_req,
               (size_t)pages_per_req * 4);
        ip[i + 1] = (i + 1) * pages_per_req;
        ln[i] = a->max_kv_len;
    }
    qattn_decode_args r = *a;
    qattn_buffer *bq, *bkc, *bvc, *bks = NULL, *bvs = NULL, *bip, *bln, *bpg, *bo;
    qattn_buffer_wrap(cpu, qs, nreq * qrow * 2, &bq);
    qattn_buffer_wrap(cpu, (void *)kc, kv_bytes, &bkc);
    qattn_buffer_wrap(cpu, (void *)vc, kv_bytes, &bvc);
    if (ks) {
        qattn_buffer_wrap(cpu, (void *)ks, n_slots * a->k_cache.shape[1] * 4, &bks);
        qattn_buffer_wrap(cpu, (void *)vs, n_slots * a->k_cache.shape[1] * 4, &bvs);
    }
    qattn_buffer_wrap(cpu, ip, (nreq + 1) * 4, &bip);
    qattn_buffer_wrap(cpu, ln, nreq * 4, &bln);
    qattn_buffer_wrap(cpu, pg, (size_t)nreq * pages_per_req * 4, &bpg);
    qattn_buffer_wrap(cpu, o_ref, nreq * qrow * 2, &bo);
    r.q = qattn_tensor_contiguous(bq, 0, a->q.dtype, 4, (int64_t[]){nreq, R, Hq, D});
    r.k_cache.buffer = bkc;
    r.v_cache.buffer = bvc;
    r.k_scale.buffer = bks;
    r.v_scale.buffer = bvs;
    r.kv_indptr = qattn_tensor_contiguous(bip, 0, QATTN_I32, 1, (int64_t[]){nreq + 1});
    r.kv_lens = qattn_tensor_contiguous(bln, 0, QATTN_I32, 1, (int64_t[]){nreq});
    r.kv_indices = qattn_tensor_contiguous(bpg, 0, QATTN_I32, 1, (int64_t[]){(int64_t)nreq * pages_per_req});
    r.o = qattn_tensor_contiguous(bo, 0, a->o.dtype, 4, (int64_t[]){nreq, R, Hq, D});
    r.lse.buffer = NULL;
    /* The reference ignores plans; pinning the simt variant keeps a
     * QATTN_DECODE_VARIANT meant for the measured backend from reaching it. */
    qattn_decode_options ref_opt = QATTN_DECODE_OPTIONS_INIT;
    ref_opt.variant = QATTN_DECODE_SIMT;
    qattn_decode_plan plan;
    qattn_buffer *rws = NULL;
    int rc = (qattn_decode_plan_create(cpu, &r, &ref_opt, &plan) == QATTN_OK &&
              (plan.workspace_bytes == 0 || qattn_buffer_alloc(cpu, plan.workspace_bytes, &rws) == QATTN_OK) &&
              qattn_decode_run(cpu, &plan, &r, rws, 0) == QATTN_OK) ? 0 : -1;
    qattn_buffer_free(cpu, rws);
    qattn_buffer *all[] = {bq, bkc, bvc, bks, bvs, bip, bln, bpg, bo};
    for (int i = 0; i < 9; ++i) qattn_buffer_free(cpu, all[i]);
    qattn_context_free(cpu);
    free(qs); free(ip); free(ln); free(pg);
    return rc;
}

/* The caches are gigabytes, and the test helpers' per-element draw (a
 * float, then the library's encoder) takes seconds per preset on the GPU
 * machine's clock. The bench draws codes of the same distribution from a
 * table of 65536 made by that helper, four per random word; the reference
 * check sees whatever was drawn. */
enum { FILL_TABLE = 65536 };
static void fill_codes(qt_rng *r, void *dst, size_t n, qattn_dtype dt) {
    static uint8_t t8[FILL_TABLE];
    static uint16_t t16[FILL_TABLE];
    if (dt == QATTN_BF16) qt_fill_bf16(r, t16, FILL_TABLE, 1.0f);
    else if (dt == QATTN_I8) qt_fill_i8(r, (int8_t *)t8, FILL_TABLE);
    else qt_fill_fp8(r, t8, FILL_TABLE, dt, 8.0f);
    for (size_t i = 0; i < n; i += 4) {
        uint64_t w = qt_u64(r);
        for (size_t k = 0; k < 4 && i + k < n; ++k, w >>= 16) {
            if (dt == QATTN_BF16) ((uint16_t *)dst)[i + k] = t16[w & 0xFFFFu];
            else ((uint8_t *)dst)[i + k] = t8[w & 0xFFFFu];
        }
    }
}

typedef struct ref_job {
    decode_launch l; /* a copy: only its args and shapes are read */
    const void *q, *kc, *vc;
    const float *ks, *vs;
    const int32_t *pages;
    int ppr, reqs[2], nreq;
    size_t kv_bytes, n_slots;
    uint16_t *oref;
    int rc;
} ref_job;

static void *ref_thread(void *arg) {
    ref_job *j = arg;
    j->rc = reference(&j->l, j->q, j->kc, j->vc, j->ks, j->vs, j->pages, j->ppr, j->reqs, j->nreq, j->oref,
                      j->kv_bytes, j->n_slots);
    return NULL;
}

int bench_decode(qattn_context *ctx, const bench_preset *p, const bench_config *cfg, bench_result *res) {
    const int B = p->batch, R = p->rows, Hq = p->q_heads, Hkv = p->kv_heads, D = p->head_dim;
    const int L = p->keys, P = p->page_size, ppr = (L + P - 1) / P;
    const size_t n_slots = (size_t)B * ppr * P, es = qattn_dtype_size(p->kv_dtype);
    const size_t kv_bytes = n_slots * Hkv * D * es, qn = (size_t)B * R * Hq * D;
    const int scaled = p->kv_dtype != QATTN_BF16;
    const qattn_dtype qdt = p->q_dtype == QATTN_F16 ? QATTN_F16 : QATTN_BF16; /* q's and o's */
    qt_rng rng = qt_rng_for(p->name);
    rng.state ^= cfg->seed;
    uint16_t *q = malloc(qn * 2), *o = malloc(qn * 2);
    void *kc = malloc(kv_bytes), *vc = malloc(kv_bytes);
    float *ks = scaled ? malloc(n_slots * Hkv * 4) : NULL, *vs = scaled ? malloc(n_slots * Hkv * 4) : NULL;
    int32_t *pages = malloc((size_t)B * ppr * 4), *indptr = malloc((B + 1) * 4), *lens = malloc(B * 4);
    qt_fill_bf16(&rng, q, qn, 1.0f);
    if (qdt == QATTN_F16) /* the same values (bf16's 8 bits fit f16's 11 at these magnitudes) */
        for (size_t i = 0; i < qn; ++i) q[i] = qattn_f32_to_f16(qattn_bf16_to_f32(q[i]));
    size_t nkv = n_slots * Hkv * D;
    fill_codes(&rng, kc, nkv, p->kv_dtype);
    fill_codes(&rng, vc, nkv, p->kv_dtype);
    if (scaled) {
        float amp = p->kv_dtype == QATTN_I8 ? 0.01f : 0.1f;
        qt_fill_f32_pos(&rng, ks, n_slots * Hkv, 0.5f * amp, amp);
        qt_fill_f32_pos(&rng, vs, n_slots * Hkv, 0.5f * amp, amp);
    }
    for (int i = 0; i < B * ppr; ++i) pages[i] = i;
    if (!cfg->pages_in_order) qt_shuffle_i32(&rng, pages, (size_t)B * ppr);
    for (int b = 0; b <= B; ++b) indptr[b] = b * ppr;
    for (int b = 0; b < B; ++b) lens[b] = L;

    decode_launch l = {.ctx = ctx};
    qattn_decode_args *a = &l.args;
    qattn_buffer *bufs[10] = {0};
    int rc = -1;
    qattn_dtype kd = p->kv_dtype;
    l.copies = (int)(ROTATE_BYTES / (2.0 * kv_bytes)) + 1;
    if (l.copies > MAX_COPIES) l.copies = MAX_COPIES;
    for (int c = 0; c < l.copies; ++c) {
        if (!(l.kc[c] = bench_upload(ctx, kc, kv_bytes, res)) || !(l.vc[c] = bench_upload(ctx, vc, kv_bytes, res)) ||
            (scaled && !(l.ks[c] = bench_upload(ctx, ks, n_slots * Hkv * 4, res))) ||
            (scaled && !(l.vs[c] = bench_upload(ctx, vs, n_slots * Hkv * 4, res))))
            goto done;
    }
    bufs[1] = l.kc[0];
    bufs[2] = l.vc[0];
    bufs[3] = l.ks[0];
    bufs[4] = l.vs[0];
    if (!(bufs[0] = bench_upload(ctx, q, qn * 2, res)) ||
        !(bufs[5] = bench_upload(ctx, indptr, (B + 1) * 4, res)) ||
        !(bufs[6] = bench_upload(ctx, pages, (size_t)B * ppr * 4, res)) ||
        !(bufs[7] = bench_upload(ctx, lens, B * 4, res)) || !(bufs[8] = bench_upload(ctx, NULL, qn * 2, res)))
        goto done;
    a->q = qattn_tensor_contiguous(bufs[0], 0, qdt, 4, (int64_t[]){B, R, Hq, D});
    a->k_cache = qattn_tensor_contiguous(bufs[1], 0, kd, 3, (int64_t[]){(int64_t)n_slots, Hkv, D});
    a->v_cache = qattn_tensor_contiguous(bufs[2], 0, kd, 3, (int64_t[]){(int64_t)n_slots, Hkv, D});
    if (scaled) {
        a->k_scale = qattn_tensor_contiguous(bufs[3], 0, QATTN_F32, 2, (int64_t[]){(int64_t)n_slots, Hkv});
        a->v_scale = qattn_tensor_contiguous(bufs[4], 0, QATTN_F32, 2, (int64_t[]){(int64_t)n_slots, Hkv});
    }
    a->kv_indptr = qattn_tensor_contiguous(bufs[5], 0, QATTN_I32, 1, (int64_t[]){B + 1});
    a->kv_indices = qattn_tensor_contiguous(bufs[6], 0, QATTN_I32, 1, (int64_t[]){(int64_t)B * ppr});
    a->kv_lens = qattn_tensor_contiguous(bufs[7], 0, QATTN_I32, 1, (int64_t[]){B});
    a->o = qattn_tensor_contiguous(bufs[8], 0, qdt, 4, (int64_t[]){B, R, Hq, D});
    a->page_size = P;
    a->max_kv_len = L;
    a->sm_scale = 1.0f / sqrtf((float)D);
    a->window_left = p->window > 0 ? p->window : -1;
    a->logit_softcap = p->softcap;
    qattn_decode_options opt = QATTN_DECODE_OPTIONS_INIT;
    opt.num_splits = p->splits;
    if (qattn_decode_plan_create(ctx, a, &opt, &l.plan) != QATTN_OK) {
        snprintf(res->error, sizeof res->error, "plan: %s", qattn_last_error(ctx));
        goto done;
    }
    snprintf(res->variant, sizeof res->variant, "%s", qattn_decode_variant_name(l.plan.variant));
    res->splits = l.plan.num_splits;
    if (l.plan.workspace_bytes && !(bufs[9] = l.ws = bench_upload(ctx, NULL, l.plan.workspace_bytes, res)))
        goto done;
    if (launch(&l) != QATTN_OK ||
        qattn_buffer_download(ctx, bufs[8], 0, o, qn * 2) != QATTN_OK) {
        snprintf(res->error, sizeof res->error, "run: %s", qattn_last_error(ctx));
        goto done;
    }
    /* Requests 0 and B-1 are checked against the cpu reference, which runs
     * on a host thread while the device is timed (it takes seconds at
     * these sizes, and device-machine time is what a bench run is short
     * of). It works on its own copy of the launch: timing rotates the
     * cache buffers in `l`. */
    ref_job job = {.l = l, .q = q, .kc = kc, .vc = vc, .ks = ks, .vs = vs, .pages = pages, .ppr = ppr,
                   .reqs = {0, B - 1}, .nreq = B > 1 ? 2 : 1, .kv_bytes = kv_bytes, .n_slots = n_slots};
    const size_t qrow = (size_t)R * Hq * D;
    job.oref = malloc((size_t)job.nreq * qrow * 2);
    pthread_t th;
    const int threaded = job.oref && pthread_create(&th, NULL, ref_thread, &job) == 0;
    if (!threaded && job.oref) ref_thread(&job);
    res->bytes = bench_decode_bytes(p);
    res->flops = 4.0 * B * R * Hq * (double)L * D;
    rc = bench_time(ctx, launch, &l, cfg, res);
    if (rc == 0) time_pattern(&l, cfg, pattern_sum(p, q, kc, vc, ks, vs, pages), res);
    if (threaded) pthread_join(th, NULL);
    if (!job.oref || job.rc != 0) {
        snprintf(res->error, sizeof res->error, "reference failed");
        rc = -1;
    } else {
        res->verified = 1;
        res->worst_ratio = 0;
        for (int i = 0; i < job.nreq; ++i)
            for (size_t e = 0; e < qrow; ++e) {
                const uint16_t gb = o[(size_t)job.reqs[i] * qrow + e], rb = job.oref[(size_t)i * qrow + e];
                double got = qdt == QATTN_F16 ? qattn_f16_to_f32(gb) : qattn_bf16_to_f32(gb);
                double ref = qdt == QATTN_F16 ? qattn_f16_to_f32(rb) : qattn_bf16_to_f32(rb);
                double ratio = fabs(got - ref) / qt_tol_decode_o_bound(ref);
                if (!qt_tol_decode_o(got, ref)) res->verified = 0;
                if (ratio > res->worst_ratio || isnan(ratio)) res->worst_ratio = ratio;
            }
    }
    free(job.oref);
done:
    for (int i = 0; i < 10; ++i)
        if (i < 1 || i > 4) qattn_buffer_free(ctx, bufs[i]);
    qattn_buffer_free(ctx, l.sum);
    for (int c = 0; c < MAX_COPIES; ++c) {
        qattn_buffer_free(ctx, l.kc[c]);
        qattn_buffer_free(ctx, l.vc[c]);
        qattn_buffer_free(ctx, l.ks[c]);
        qattn_buffer_free(ctx, l.vs[c]);
    }
    free(q); free(o); free(kc); free(vc); free(ks); free(vs); free(pages); free(indptr); free(lens);
    return rc;
}
