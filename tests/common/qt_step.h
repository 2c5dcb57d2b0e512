/*
 * One engine step for embedding tests: a KV store of one new token per
 * request into an fp8 paged cache, a decode over that cache (which reads the
 * new tokens), and an FP8 MQA logits call; seeded random inputs, the CPU
 * reference of all three, and the comparison with the spec's tolerances
 * (tests/common/tolerance.h).
 *
 * Tensors are dense and each lives in its own buffer (ids QS_*), so a test
 * can place them anywhere (its own VkBuffers, a HIP allocation) and build
 * the ops' arguments with qt_step_*_args. Header-only.
 */
#ifndef QATTN_TEST_QT_STEP_H
#define QATTN_TEST_QT_STEP_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qattn/convert.h"
#include "qattn/qattn.h"
#include "test_rng.h"
#include "tolerance.h"

enum {
    QS_Q, QS_KC, QS_VC, QS_KS, QS_VS, QS_INDPTR, QS_INDICES, QS_LENS, QS_O,   /* decode */
    QS_KNEW, QS_VNEW, QS_SLOTS,                                               /* kv store */
    QS_MQ, QS_MK, QS_MKSCALE, QS_MW, QS_MKS, QS_MKE, QS_LOGITS,               /* mqa */
    QS_COUNT
};

/* Outputs: poisoned (0xFF: NaN as bf16/f32) before every run. */
static inline int qs_is_output(int id) { return id == QS_O || id == QS_LOGITS; }
/* Written by the step (outputs and the cache the KV store updates). */
static inline int qs_is_written(int id) {
    return qs_is_output(id) || id == QS_KC || id == QS_VC || id == QS_KS || id == QS_VS;
}

typedef struct qt_step {
    int B, Hq, Hkv, D, P, ppr, n_slots; /* decode: ppr pages per request */
    int S, Skv, H, Dm;                  /* mqa */
    qattn_dtype kv_dtype, mqa_dtype;
    int32_t lens[8];
    void *host[QS_COUNT];  /* the inputs (outputs poisoned) */
    void *ref[QS_COUNT];   /* after qt_step_reference: what the step must leave */
    size_t bytes[QS_COUNT];
    qt_rng rng;
} qt_step;

static inline int qt_step_make(qt_step *s, const char *name) {
    memset(s, 0, sizeof *s);
    s->B = 2, s->Hq = 8, s->Hkv = 2, s->D = 128, s->P = 16, s->ppr = 4;
    s->S = 8, s->Skv = 64, s->H = 16, s->Dm = 64;
    s->kv_dtype = QATTN_FP8_E4M3FN;
    s->mqa_dtype = QATTN_FP8_E4M3FN;
    s->n_slots = s->B * s->ppr * s->P;
    s->rng = qt_rng_for(name);
    const size_t B = (size_t)s->B, Hq = (size_t)s->Hq, Hkv = (size_t)s->Hkv, D = (size_t)s->D;
    const size_t N = (size_t)s->n_slots, S = (size_t)s->S, Skv = (size_t)s->Skv, H = (size_t)s->H,
                 Dm = (size_t)s->Dm;
    const size_t sz[QS_COUNT] = {
        [QS_Q] = B * Hq * D * 2, [QS_KC] = N * Hkv * D, [QS_VC] = N * Hkv * D, [QS_KS] = N * Hkv * 4,
        [QS_VS] = N * Hkv * 4, [QS_INDPTR] = (B + 1) * 4, [QS_INDICES] = B * (size_t)s->ppr * 4,
        [QS_LENS] = B * 4, [QS_O] = B * Hq * D * 2, [QS_KNEW] = B * Hkv * D * 2,
        [QS_VNEW] = B * Hkv * D * 2, [QS_SLOTS] = B * 4, [QS_MQ] = S * H * Dm, [QS_MK] = Skv * Dm,
        [QS_MKSCALE] = Skv * 4, [QS_MW] = S * H * 4, [QS_MKS] = S * 4, [QS_MKE] = S * 4,
        [QS_LOGITS] = S * Skv * 4};
    for (int i = 0; i < QS_COUNT; ++i) {
        s->bytes[i] = sz[i];
        s->host[i] = malloc(sz[i]);
        s->ref[i] = malloc(sz[i]);
        if (!s->host[i] || !s->ref[i]) return 0;
        memset(s->host[i], 0xFF, sz[i]);
    }
    qt_rng *r = &s->rng;
    qt_fill_bf16(r, s->host[QS_Q], B * Hq * D, 1.0f);
    qt_fill_fp8(r, s->host[QS_KC], N * Hkv * D, s->kv_dtype, 8.0f);
    qt_fill_fp8(r, s->host[QS_VC], N * Hkv * D, s->kv_dtype, 8.0f);
    qt_fill_f32_pos(r, s->host[QS_KS], N * Hkv, 0.01f, 0.1f);
    qt_fill_f32_pos(r, s->host[QS_VS], N * Hkv, 0.01f, 0.1f);
    int32_t *indptr = s->host[QS_INDPTR], *pages = s->host[QS_INDICES], *lens = s->host[QS_LENS];
    int32_t *slots = s->host[QS_SLOTS];
    for (int p = 0; p < s->B * s->ppr; ++p) pages[p] = p;
    qt_shuffle_i32(r, pages, B * (size_t)s->ppr);
    for (int b = 0; b <= s->B; ++b) indptr[b] = b * s->ppr;
    for (int b = 0; b < s->B; ++b) {
        /* At least two pages' worth, so several tiles run; the new token
         * is the request's last key. */
        lens[b] = (int32_t)qt_int(r, 2 * s->P + 1, s->ppr * s->P);
        s->lens[b] = lens[b];
        const int pos = lens[b] - 1;
        slots[b] = pages[b * s->ppr + pos / s->P] * s->P + pos % s->P;
    }
    qt_fill_bf16(r, s->host[QS_KNEW], B * Hkv * D, 2.0f);
    qt_fill_bf16(r, s->host[QS_VNEW], B * Hkv * D, 2.0f);
    qt_fill_fp8(r, s->host[QS_MQ], S * H * Dm, s->mqa_dtype, 4.0f);
    qt_fill_fp8(r, s->host[QS_MK], Skv * Dm, s->mqa_dtype, 4.0f);
    qt_fill_f32_pos(r, s->host[QS_MKSCALE], Skv, 0.05f, 0.5f);
    qt_fill_f32(r, s->host[QS_MW], S * H, 1.0f);
    int32_t *ks = s->host[QS_MKS], *ke = s->host[QS_MKE];
    for (size_t i = 0; i < S; ++i) {
        ks[i] = (int32_t)qt_int(r, 0, s->Skv / 2 - 1);
        ke[i] = (int32_t)qt_int(r, ks[i] + 1, s->Skv);
    }
    return 1;
}

static inline void qt_step_free(qt_step *s) {
    for (int i = 0; i < QS_COUNT; ++i) {
        free(s->host[i]);
        free(s->ref[i]);
    }
    memset(s, 0, sizeof *s);
}

/* The ops' arguments with tensor `id` at byte `off` of buf[id]. */
static inline qattn_tensor qs_t(qattn_buffer *const *buf, uint64_t off, int id, qattn_dtype dt, int32_t rank,
                                int64_t d0, int64_t d1, int64_t d2, int64_t d3) {
    const int64_t shape[4] = {d0, d1, d2, d3};
    return qattn_tensor_contiguous(buf[id], off, dt, rank, shape);
}

static inline qattn_kv_store_args qt_step_kv_args(const qt_step *s, qattn_buffer *const *buf, uint64_t off) {
    qattn_kv_store_args a;
    memset(&a, 0, sizeof a);
    a.k_new = qs_t(buf, off, QS_KNEW, QATTN_BF16, 3, s->B, s->Hkv, s->D, 0);
    a.v_new = qs_t(buf, off, QS_VNEW, QATTN_BF16, 3, s->B, s->Hkv, s->D, 0);
    a.slot_mapping = qs_t(buf, off, QS_SLOTS, QATTN_I32, 1, s->B, 0, 0, 0);
    a.k_cache = qs_t(buf, off, QS_KC, s->kv_dtype, 3, s->n_slots, s->Hkv, s->D, 0);
    a.v_cache = qs_t(buf, off, QS_VC, s->kv_dtype, 3, s->n_slots, s->Hkv, s->D, 0);
    a.k_scale = qs_t(buf, off, QS_KS, QATTN_F32, 2, s->n_slots, s->Hkv, 0, 0);
    a.v_scale = qs_t(buf, off, QS_VS, QATTN_F32, 2, s->n_slots, s->Hkv, 0, 0);
    return a;
}

static inline qattn_decode_args qt_step_decode_args(const qt_step *s, qattn_buffer *const *buf, uint64_t off) {
    qattn_decode_args a;
    memset(&a, 0, sizeof a);
    a.q = qs_t(buf, off, QS_Q, QATTN_BF16, 4, s->B, 1, s->Hq, s->D);
    a.k_cache = qs_t(buf, off, QS_KC, s->kv_dtype, 3, s->n_slots, s->Hkv, s->D, 0);
    a.v_cache = qs_t(buf, off, QS_VC, s->kv_dtype, 3, s->n_slots, s->Hkv, s->D, 0);
    a.k_scale = qs_t(buf, off, QS_KS, QATTN_F32, 2, s->n_slots, s->Hkv, 0, 0);
    a.v_scale = qs_t(buf, off, QS_VS, QATTN_F32, 2, s->n_slots, s->Hkv, 0, 0);
    a.kv_indptr = qs_t(buf, off, QS_INDPTR, QATTN_I32, 1, s->B + 1, 0, 0, 0);
    a.kv_indices = qs_t(buf, off, QS_INDICES, QATTN_I32, 1, (int64_t)s->B * s->ppr, 0, 0, 0);
    a.kv_lens = qs_t(buf, off, QS_LENS, QATTN_I32, 1, s->B, 0, 0, 0);
    a.o = qs_t(buf, off, QS_O, QATTN_BF16, 4, s->B, 1, s->Hq, s->D);
    a.page_size = s->P;
    a.max_kv_len = s->ppr * s->P;
    a.sm_scale = 1.0f / sqrtf((float)s->D);
    a.window_left = -1;
    return a;
}

static inline qattn_mqa_logits_args qt_step_mqa_args(const qt_step *s, qattn_buffer *const *buf, uint64_t off) {
    qattn_mqa_logits_args a;
    memset(&a, 0, sizeof a);
    a.q = qs_t(buf, off, QS_MQ, s->mqa_dtype, 3, s->S, s->H, s->Dm, 0);
    a.k = qs_t(buf, off, QS_MK, s->mqa_dtype, 2, s->Skv, s->Dm, 0, 0);
    a.k_scale = qs_t(buf, off, QS_MKSCALE, QATTN_F32, 1, s->Skv, 0, 0, 0);
    a.weights = qs_t(buf, off, QS_MW, QATTN_F32, 2, s->S, s->H, 0, 0);
    a.ks = qs_t(buf, off, QS_MKS, QATTN_I32, 1, s->S, 0, 0, 0);
    a.ke = qs_t(buf, off, QS_MKE, QATTN_I32, 1, s->S, 0, 0, 0);
    a.logits = qs_t(buf, off, QS_LOGITS, QATTN_F32, 2, s->S, s->Skv, 0, 0);
    a.clean_logits = 1;
    return a;
}

/* Runs the step on the cpu reference over copies of the inputs; s->ref then
 * holds every tensor as the step must leave it. 1 on success. */
static inline int qt_step_reference(qt_step *s, char *err, size_t n) {
    qattn_context *cpu = NULL;
    if (qattn_context_create(qattn_backend_cpu(), NULL, &cpu, err, n) != QATTN_OK) return 0;
    qattn_buffer *buf[QS_COUNT] = {0};
    int ok = 1;
    for (int i = 0; i < QS_COUNT && ok; ++i) {
        memcpy(s->ref[i], s->host[i], s->bytes[i]);
        ok = qattn_buffer_wrap(cpu, s->ref[i], s->bytes[i], &buf[i]) == QATTN_OK;
    }
    qattn_kv_store_args kv = qt_step_kv_args(s, buf, 0);
    qattn_decode_args de = qt_step_decode_args(s, buf, 0);
    qattn_mqa_logits_args mq = qt_step_mqa_args(s, buf, 0);
    qattn_decode_options dopt = QATTN_DECODE_OPTIONS_INIT;
    dopt.variant = QATTN_DECODE_SIMT;
    qattn_decode_plan dp;
    qattn_mqa_logits_plan mp;
    qattn_buffer *dws = NULL;
    const char *what = "wrap";
    if (ok && (what = "kv_store", qattn_kv_store(cpu, &kv) != QATTN_OK)) ok = 0;
    if (ok && (what = "decode", qattn_decode_plan_create(cpu, &de, &dopt, &dp) != QATTN_OK ||
                                    qattn_buffer_alloc(cpu, dp.workspace_bytes, &dws) != QATTN_OK ||
                                    qattn_decode_run(cpu, &dp, &de, dws, 0) != QATTN_OK))
        ok = 0;
    qattn_buffer_free(cpu, dws);
    if (ok && (what = "mqa_logits", qattn_mqa_logits_plan_create(cpu, &mq, NULL, &mp) != QATTN_OK ||
                                        qattn_mqa_logits_run(cpu, &mp, &mq, NULL, 0) != QATTN_OK))
        ok = 0;
    if (!ok) snprintf(err, n, "reference %s: %s", what, qattn_last_error(cpu));
    for (int i = 0; i < QS_COUNT; ++i) qattn_buffer_free(cpu, buf[i]);
    qattn_context_free(cpu);
    return ok;
}

/* Compares what a backend left (got[id]: that tensor's bytes) with the
 * reference: cache codes and scales bit-identical, decode o and MQA logits
 * within tolerance, inputs unchanged. 1 when all match; err names the
 * first mismatch. */
static inline int qt_step_check(const qt_step *s, void *const *got, char *err, size_t n) {
    static const char *const names[QS_COUNT] = {
        "q", "k_cache", "v_cache", "k_scale", "v_scale", "kv_indptr", "kv_indices", "kv_lens", "o",
        "k_new", "v_new", "slot_mapping", "mqa q", "mqa k", "mqa k_scale", "mqa weights", "mqa ks",
        "mqa ke", "logits"};
    for (int i = 0; i < QS_COUNT; ++i) {
        if (qs_is_output(i)) continue;
        ptrdiff_t at = qt_tol_kv_store_bytes(got[i], s->ref[i], s->bytes[i]);
        if (at >= 0) {
            snprintf(err, n, "%s differs from the reference at byte %td (%s)", names[i], at,
                     qs_is_written(i) ? "KV store result" : "an input was modified");
            return 0;
        }
    }
    const uint16_t *o = got[QS_O], *oref = s->ref[QS_O];
    for (size_t e = 0; e < s->bytes[QS_O] / 2; ++e) {
        const double g = qattn_bf16_to_f32(o[e]), r = qattn_bf16_to_f32(oref[e]);
        if (!qt_tol_decode_o(g, r)) {
            snprintf(err, n, "decode o[%zu] = %g, reference %g (bound %g)", e, g, r, qt_tol_decode_o_bound(r));
            return 0;
        }
    }
    const float *lg = got[QS_LOGITS], *lref = s->ref[QS_LOGITS];
    const uint8_t *q = s->host[QS_MQ], *k = s->host[QS_MK];
    const float *w = s->host[QS_MW], *ksc = s->host[QS_MKSCALE];
    for (int i = 0; i < s->S; ++i)
        for (int j = 0; j < s->Skv; ++j) {
            double A = 0.0;
            for (int h = 0; h < s->H; ++h) {
                double sum = 0.0;
                for (int d = 0; d < s->Dm; ++d)
                    sum += fabs((double)qattn_fp8_to_f32(q[((size_t)i * s->H + h) * s->Dm + d], s->mqa_dtype) *
                                qattn_fp8_to_f32(k[(size_t)j * s->Dm + d], s->mqa_dtype));
                A += qt_tol_mqa_a_term(w[i * s->H + h], ksc[j], sum);
            }
            const double g = lg[(size_t)i * s->Skv + j], r = lref[(size_t)i * s->Skv + j];
            if (!qt_tol_mqa_logit(g, r, A)) {
                snprintf(err, n, "logits[%d][%d] = %g, reference %g (bound %g)", i, j, g, r, qt_tol_mqa_bound(A));
                return 0;
            }
        }
    return 1;
}

#endif /* QATTN_TEST_QT_STEP_H */
