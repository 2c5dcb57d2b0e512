/*
 * qattn_big_cache --layout combined: decode over a bf16 cache in
 * FlashInfer's combined layout, one tensor [N_pages, 2, P, Hkv, D] whose
 * halves of each page are K and V, at issue 24's shape: 4 kv heads of 256
 * dims and N_pages x P = 128 x 16384 slots, an 8 GiB tensor. Each view (K,
 * V) spans just under 2^32 elements, so its bytes pass 4 GiB: a kernel that
 * forms byte offsets in 32 bits wraps there (the HIP decode kernel did:
 * outputs off by up to 0.095 on the H200 twin, for page sizes 1, 8, 16),
 * while element offsets still fit 32 bits.
 *
 *   --page P   page size (1, 8, 16, ...; default 16)
 *   --full     128 requests of 16384 keys (GQA 4: 16 query heads), every
 *              page of the cache read (the H200 step); --requests N runs
 *              only the first N of them (their pages still span the whole
 *              cache: a quicker check of the same path); without it, 3
 *              requests of 64 keys on pages drawn from the last 1/16 of the
 *              cache (the very last page included) and anywhere, only those
 *              pages written (CI, the HIP host simulation)
 *
 * The device's o and lse are checked against the cpu reference within the
 * spec's tolerances (tests/common/tolerance.h), guard bytes around both
 * untouched. A device that cannot allocate the tensor (lavapipe's 4 GiB
 * maxBufferSize) skips, naming its reason; one that refuses the plan with
 * QATTN_ERR_UNSUPPORTED passes with a note (refusing is allowed, wrong
 * answers are not).
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "big_cache.h"
#include "qattn/convert.h"
#include "test_rng.h"
#include "tolerance.h"

enum { CB_HKV = 4, CB_D = 256, CB_GQA = 4, CB_HQ = CB_HKV * CB_GQA, CB_SLOTS_PER_REQ = 16384, CB_FULL_B = 128 };
#define CB_GUARD 256
#define CB_CHUNK ((uint64_t)64 << 20) /* bytes generated and uploaded at once (full mode) */

typedef struct cb_side {
    qattn_context *ctx;
    qattn_buffer *kv, *q, *indptr, *indices, *lens, *o, *lse, *ws;
} cb_side;

static void cb_free(cb_side *s) {
    qattn_buffer *all[] = {s->kv, s->q, s->indptr, s->indices, s->lens, s->o, s->lse, s->ws};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) qattn_buffer_free(s->ctx, all[i]);
}

static qattn_buffer *cb_small(qattn_context *ctx, const void *src, size_t bytes, int fill) {
    qattn_buffer *b = NULL;
    if (qattn_buffer_alloc(ctx, bytes, &b) != QATTN_OK) return NULL;
    void *tmp = NULL;
    if (!src) {
        tmp = malloc(bytes);
        memset(tmp, fill, bytes);
        src = tmp;
    }
    if (qattn_buffer_upload(ctx, b, 0, src, bytes) != QATTN_OK) {
        qattn_buffer_free(ctx, b);
        b = NULL;
    }
    free(tmp);
    return b;
}

/* Uploads bytes at off to both sides' cache tensors. */
static int cb_put(cb_side *sd, uint64_t off, const void *src, uint64_t bytes) {
    for (int i = 0; i < 2; ++i) {
        qattn_status st = qattn_buffer_upload(sd[i].ctx, sd[i].kv, off, src, bytes);
        if (st != QATTN_OK) {
            printf("FAIL upload of %" PRIu64 " bytes at %" PRIu64 ": %s: %s\n", bytes, off, qattn_status_name(st),
                   qattn_last_error(sd[i].ctx));
            return 0;
        }
    }
    return 1;
}

/* Random bf16 values of magnitude in [0.05, 1) (K) or [0.05, 0.5) (V), fast
 * enough for 4 G elements: a splitmix stream, four codes per word. */
static void cb_fill(uint64_t *state, uint16_t *x, size_t n, float amp) {
    for (size_t i = 0; i < n; i += 4) {
        const uint64_t w = qt_splitmix64(state);
        for (size_t j = 0; j < 4 && i + j < n; ++j) {
            const uint32_t u = (uint32_t)(w >> (16 * j)) & 0xFFFFu;
            const float mag = 0.05f + 0.95f * (float)(u & 0x7FFFu) / 32768.0f;
            x[i + j] = qattn_f32_to_bf16((u & 0x8000u) ? -amp * mag : amp * mag);
        }
    }
}

int qt_big_combined_bf16(qattn_context *ref, qattn_context *dev, int page, int full, int requests) {
    const int64_t P = page;
    if (P < 1 || CB_SLOTS_PER_REQ % P) {
        printf("FAIL combined: page size %d does not divide %d\n", page, CB_SLOTS_PER_REQ);
        return 1;
    }
    const int64_t n_pages = (int64_t)CB_FULL_B * CB_SLOTS_PER_REQ / P;
    const uint64_t half = (uint64_t)P * CB_HKV * CB_D;           /* elements of K (or V) in a page */
    const uint64_t bytes = (uint64_t)n_pages * 2 * half * 2;     /* the whole tensor: 8 GiB */
    const uint64_t span = (uint64_t)(n_pages - 1) * 2 * half + half; /* elements a view spans */
    char name[96];
    snprintf(name, sizeof name, "big_cache/combined_bf16/p%d/%s", page,
             !full ? "sparse" : requests > 0 && requests < CB_FULL_B ? "full-subset" : "full");
    qt_rng r = qt_rng_for(name);
    printf("case %s: [%" PRId64 ", 2, %d, %d, %d] bf16, %" PRIu64 " bytes; each view spans %" PRIu64
           " elements (%" PRIu64 " bytes; 2^32 = 4294967296)\n",
           name, n_pages, page, CB_HKV, CB_D, bytes, span, span * 2);

    cb_side sd[2];
    memset(sd, 0, sizeof sd);
    sd[0].ctx = ref;
    sd[1].ctx = dev;
    int rc = 1;
    for (int i = 1; i >= 0; --i) {
        qattn_status st = qattn_buffer_alloc(sd[i].ctx, bytes, &sd[i].kv);
        if (st != QATTN_OK) {
            printf("%s %s: the %s did not allocate %" PRIu64 " bytes: %s\n", i ? "SKIP" : "FAIL", name,
                   i ? "device" : "reference", bytes, qattn_last_error(sd[i].ctx));
            rc = i ? BIG_CACHE_SKIP : 1;
            goto out;
        }
    }

    /* the page table: full, request b reads pages b, b + B, b + 2B, ... (so
     * every request reads from the start to the end of the cache); sparse,
     * pages of the last 1/16 and anywhere, mixed, each written once */
    const int64_t B = full ? (requests > 0 && requests < CB_FULL_B ? requests : CB_FULL_B) : 3;
    const int64_t keys = full ? CB_SLOTS_PER_REQ : 64;
    const int64_t ppr = (keys + P - 1) / P;
    int32_t *indptr = malloc((size_t)(B + 1) * sizeof *indptr);
    int32_t *indices = malloc((size_t)(B * ppr) * sizeof *indices);
    int32_t *lens = malloc((size_t)B * sizeof *lens);
    uint16_t *q = malloc((size_t)B * CB_HQ * CB_D * 2);
    uint16_t *tmp = malloc(full ? CB_CHUNK : half * 2); /* >= half * 2 bytes either way */
    uint8_t *img[2][2] = {{0}};
    for (int64_t b = 0; b <= B; ++b) indptr[b] = (int32_t)(b * ppr);
    int max_len = 0;
    for (int64_t b = 0; b < B; ++b) {
        lens[b] = (int32_t)(full ? keys - qt_int(&r, 0, 7) : qt_int(&r, keys - P + 1, keys));
        if (lens[b] > max_len) max_len = lens[b];
    }
    uint64_t state = qt_u64(&r);
    if (full) {
        for (int64_t b = 0; b < B; ++b)
            for (int64_t j = 0; j < ppr; ++j) indices[b * ppr + j] = (int32_t)(b + CB_FULL_B * j);
    }
    if (full && B < CB_FULL_B) { /* a subset: only its pages */
        for (int64_t i = 0; i < B * ppr; ++i)
            for (int w = 0; w < 2; ++w) {
                cb_fill(&state, tmp, half, w ? 0.5f : 1.0f);
                if (!cb_put(sd, ((uint64_t)indices[i] * 2 + (uint64_t)w) * half * 2, tmp, half * 2)) goto out_host;
            }
    } else if (full) {
        for (uint64_t off = 0; off < bytes; off += CB_CHUNK) {
            const uint64_t n = bytes - off < CB_CHUNK ? bytes - off : CB_CHUNK;
            cb_fill(&state, tmp, n / 2, 1.0f);
            if (!cb_put(sd, off, tmp, n)) goto out_host;
        }
    } else {
        const int64_t n = B * ppr;
        for (int64_t i = 0; i < n; ++i) {
            int64_t p;
            int again;
            do {
                p = i == 0 ? n_pages - 1
                    : i % 2 ? n_pages - 1 - qt_int(&r, 0, n_pages / 16 - 1)
                            : qt_int(&r, 0, n_pages - 1);
                again = 0;
                for (int64_t j = 0; j < i; ++j) again |= indices[j] == p;
            } while (again);
            indices[i] = (int32_t)p;
        }
        for (int64_t i = n - 1; i > 0; --i) { /* mix near-end and anywhere pages in every request */
            const int64_t j = qt_int(&r, 0, i);
            const int32_t t = indices[i];
            indices[i] = indices[j];
            indices[j] = t;
        }
        for (int64_t i = 0; i < n; ++i)
            for (int w = 0; w < 2; ++w) {
                cb_fill(&state, tmp, half, w ? 0.5f : 1.0f);
                if (!cb_put(sd, ((uint64_t)indices[i] * 2 + (uint64_t)w) * half * 2, tmp, half * 2)) goto out_host;
            }
    }
    qt_fill_bf16(&r, q, (size_t)B * CB_HQ * CB_D, 1.0f);

    const size_t o_bytes = (size_t)B * CB_HQ * CB_D * 2, lse_bytes = (size_t)B * CB_HQ * 4;
    for (int i = 0; i < 2; ++i) {
        cb_side *s = &sd[i];
        s->q = cb_small(s->ctx, q, (size_t)B * CB_HQ * CB_D * 2, 0);
        s->indptr = cb_small(s->ctx, indptr, (size_t)(B + 1) * 4, 0);
        s->indices = cb_small(s->ctx, indices, (size_t)(B * ppr) * 4, 0);
        s->lens = cb_small(s->ctx, lens, (size_t)B * 4, 0);
        s->o = cb_small(s->ctx, NULL, CB_GUARD + o_bytes + CB_GUARD, 0xFF);
        s->lse = cb_small(s->ctx, NULL, CB_GUARD + lse_bytes + CB_GUARD, 0xFF);
        qattn_decode_args a;
        memset(&a, 0, sizeof a);
        a.q = qattn_tensor_contiguous(s->q, 0, QATTN_BF16, 4, (const int64_t[]){B, 1, CB_HQ, CB_D});
        const int64_t shape[4] = {n_pages, P, CB_HKV, CB_D};
        a.k_cache = qattn_tensor_contiguous(s->kv, 0, QATTN_BF16, 4, shape);
        a.k_cache.strides[0] = (int64_t)(2 * half);
        a.v_cache = a.k_cache;
        a.v_cache.offset = half * 2;
        a.kv_indptr = qattn_tensor_contiguous(s->indptr, 0, QATTN_I32, 1, (const int64_t[]){B + 1});
        a.kv_indices = qattn_tensor_contiguous(s->indices, 0, QATTN_I32, 1, (const int64_t[]){B * ppr});
        a.kv_lens = qattn_tensor_contiguous(s->lens, 0, QATTN_I32, 1, (const int64_t[]){B});
        a.o = qattn_tensor_contiguous(s->o, CB_GUARD, QATTN_BF16, 4, (const int64_t[]){B, 1, CB_HQ, CB_D});
        a.lse = qattn_tensor_contiguous(s->lse, CB_GUARD, QATTN_F32, 3, (const int64_t[]){B, 1, CB_HQ});
        a.page_size = (int32_t)P;
        a.max_kv_len = max_len;
        a.sm_scale = 1.0f / sqrtf((float)CB_D);
        a.window_left = -1;
        qattn_decode_plan plan;
        qattn_status st = qattn_decode_plan_create(s->ctx, &a, NULL, &plan);
        if (st == QATTN_OK && plan.workspace_bytes) st = qattn_buffer_alloc(s->ctx, plan.workspace_bytes, &s->ws);
        if (st == QATTN_OK) st = qattn_decode_run(s->ctx, &plan, &a, s->ws, 0);
        if (st == QATTN_OK) st = qattn_synchronize(s->ctx);
        if (st == QATTN_ERR_UNSUPPORTED && i) {
            printf("refused %s: %s\n", name, qattn_last_error(s->ctx));
            rc = 0;
            goto out_host;
        }
        if (st != QATTN_OK) {
            printf("FAIL %s: %s decode: %s: %s\n", name, i ? "device" : "reference", qattn_status_name(st),
                   qattn_last_error(s->ctx));
            goto out_host;
        }
        if (i) printf("     %s: device plan %s, %d splits\n", name, qattn_decode_variant_name(plan.variant),
                      (int)plan.num_splits);
        img[i][0] = malloc(CB_GUARD + o_bytes + CB_GUARD);
        img[i][1] = malloc(CB_GUARD + lse_bytes + CB_GUARD);
        if (qattn_buffer_download(s->ctx, s->o, 0, img[i][0], CB_GUARD + o_bytes + CB_GUARD) != QATTN_OK ||
            qattn_buffer_download(s->ctx, s->lse, 0, img[i][1], CB_GUARD + lse_bytes + CB_GUARD) != QATTN_OK) {
            printf("FAIL %s: download: %s\n", name, qattn_last_error(s->ctx));
            goto out_host;
        }
    }
    {
        int bad = 0;
        for (int t = 0; t < 2; ++t) {
            const size_t body = t ? lse_bytes : o_bytes;
            for (size_t k = 0; k < CB_GUARD; ++k)
                if (img[1][t][k] != 0xFF || img[1][t][CB_GUARD + body + k] != 0xFF) {
                    printf("FAIL %s: a guard byte of %s was written\n", name, t ? "lse" : "o");
                    bad = 1;
                    break;
                }
        }
        double worst_o = 0.0, worst_lse = 0.0, err_o = 0.0, err_lse = 0.0;
        size_t n_bad = 0;
        for (size_t k = 0; k < (size_t)B * CB_HQ * CB_D; ++k) {
            uint16_t gb, rb;
            memcpy(&gb, img[1][0] + CB_GUARD + 2 * k, 2);
            memcpy(&rb, img[0][0] + CB_GUARD + 2 * k, 2);
            const double got = qattn_bf16_to_f32(gb), want = qattn_bf16_to_f32(rb);
            if (isnan(got) || isnan(want) || !qt_tol_decode_o(got, want)) {
                if (!n_bad++)
                    printf("FAIL %s: o[b %zu, head %zu, d %zu] = %g, reference %g\n", name, k / (CB_HQ * CB_D),
                           k / CB_D % CB_HQ, k % CB_D, got, want);
                bad = 1;
            }
            const double e = fabs(got - want);
            if (e > err_o) err_o = e;
            if (e / qt_tol_decode_o_bound(want) > worst_o) worst_o = e / qt_tol_decode_o_bound(want);
        }
        for (size_t k = 0; k < (size_t)B * CB_HQ; ++k) {
            float got, want;
            memcpy(&got, img[1][1] + CB_GUARD + 4 * k, 4);
            memcpy(&want, img[0][1] + CB_GUARD + 4 * k, 4);
            if (isnan(got) || !qt_tol_decode_lse(got, want)) {
                if (!n_bad++)
                    printf("FAIL %s: lse[b %zu, head %zu] = %g, reference %g\n", name, k / CB_HQ, k % CB_HQ,
                           (double)got, (double)want);
                bad = 1;
            }
            const double e = fabs((double)got - (double)want);
            if (e > err_lse) err_lse = e;
            if (e / qt_tol_decode_lse_bound(want) > worst_lse) worst_lse = e / qt_tol_decode_lse_bound(want);
        }
        int64_t top = 0;
        for (int64_t i = 0; i < B * ppr; ++i)
            if (indices[i] > top) top = indices[i];
        printf("%s %s: %" PRId64 " requests of up to %d keys on pages up to %" PRId64 " (its K bytes end at %" PRIu64
               "); max |o - ref| %.3g (%.2f of the tolerance), max |lse - ref| %.3g (%.2f)%s\n",
               bad ? "FAIL" : "ok  ", name, B, max_len, top, ((uint64_t)top * 2 + 1) * half * 2, err_o, worst_o,
               err_lse, worst_lse,
               n_bad > 1 ? " (more values out of tolerance)" : "");
        rc = bad;
    }
out_host:
    for (int i = 0; i < 2; ++i) {
        free(img[i][0]);
        free(img[i][1]);
    }
    free(indptr);
    free(indices);
    free(lens);
    free(q);
    free(tmp);
out:
    cb_free(&sd[1]);
    cb_free(&sd[0]);
    return rc;
}
