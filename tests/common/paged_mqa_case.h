/* Cases of paged FP8 MQA logits (spec 5) for the reference test and the
 * parity suite: host images of every input, descriptors that name which
 * image each tensor lives in, and an independent f64 oracle (its own fp8
 * decoder and its own walk over the page table, entry by entry).
 * Header-only; needs test_rng.h. */
#ifndef QATTN_PAGED_MQA_CASE_H
#define QATTN_PAGED_MQA_CASE_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "qattn/qattn.h"
#include "test_rng.h"

/* The images a case lives in. PM_KV holds k_cache, and k_scale too in the
 * fused layout (codes then the f32 scale in one slot or page row). */
enum { PM_Q, PM_KV, PM_SCALE, PM_W, PM_TABLE, PM_LOGITS, PM_NBUF };

/* Page-table faults (spec 2's out-of-range indices). */
enum { PM_OK, PM_BAD_PAGE, PM_NEG_PAGE, PM_INDPTR_PAST, PM_LEN_PAST_PAGES, PM_LEN_PAST_MAX, PM_BAD_COUNT };

typedef struct pm_cfg {
    int B, N, H, D, P;
    qattn_dtype qt, kt;
    int clean;
    int fused;   /* k codes and scale in one row of one buffer */
    int paged3;  /* the rank-3 [N_pages, P, D] cache form */
    int pad;     /* padding elements in q, weights, logits rows; unaligned offsets */
    int max_len; /* longest request */
    int bad;     /* PM_* fault */
    int neg;     /* some scales negative (every third slot) */
} pm_cfg;

typedef struct pm_case {
    pm_cfg c;
    int64_t M, n_pages, n_slots, n_idx;
    uint8_t *img[PM_NBUF];
    size_t bytes[PM_NBUF];
    /* descriptors with buffer NULL; pm_bind sets them */
    qattn_paged_mqa_logits_args a;
    int buf_of[8]; /* image of q, k_cache, k_scale, weights, indptr, indices, lens, logits */
    int32_t *indptr, *indices, *lens; /* into img[PM_TABLE] */
} pm_case;

static inline qattn_tensor pm_tensor_(qattn_dtype dt, int32_t rank, const int64_t *shape,
                                      const int64_t *strides, uint64_t offset) {
    qattn_tensor t;
    memset(&t, 0, sizeof t);
    t.dtype = dt;
    t.rank = rank;
    t.offset = offset;
    for (int i = 0; i < rank; ++i) {
        t.shape[i] = shape[i];
        t.strides[i] = strides[i];
    }
    return t;
}

static inline void pm_free(pm_case *k) {
    for (int i = 0; i < PM_NBUF; ++i) free(k->img[i]);
    memset(k, 0, sizeof *k);
}

/* Builds case c with data from rng; logits are all `poison` bytes. */
static inline int pm_make(pm_case *k, const pm_cfg *c, qt_rng *rng, uint8_t poison) {
    memset(k, 0, sizeof *k);
    k->c = *c;
    const int64_t B = c->B, N = c->N, H = c->H, D = c->D, P = c->P;
    const int64_t pad = c->pad, lead = c->pad ? 3 : 0; /* lead elements: unaligned starts */
    int32_t *lens = malloc((size_t)B * sizeof *lens), *need = malloc((size_t)B * sizeof *need);
    int64_t maxL = 0, total = 0;
    for (int64_t b = 0; b < B; ++b) {
        int64_t L;
        switch (b % 5) {
        case 0: L = b == 0 ? c->max_len : 0; break;            /* the longest; then empty requests */
        case 1: L = qt_int(rng, 0, N - 1 < c->max_len ? N - 1 : c->max_len); break; /* L < N */
        case 2: L = c->max_len; break;
        default: L = qt_int(rng, N < c->max_len ? N : c->max_len, c->max_len); break;
        }
        lens[b] = (int32_t)L;
        need[b] = (int32_t)((L + P - 1) / P + qt_int(rng, 0, 1)); /* sometimes a spare page */
        if (L > maxL) maxL = L;
        total += need[b];
    }
    k->M = maxL + (qt_int(rng, 0, 1) ? 0 : qt_int(rng, 1, 9)); /* columns past every request */
    if (k->M < 1) k->M = 1;
    k->n_pages = total + 3;
    k->n_slots = k->n_pages * P;
    k->n_idx = total;
    /* q [B, N, H, D], rows of H * D + pad */
    {
        const int64_t sh[4] = {B, N, H, D}, hs = D + pad, ts = H * hs + pad, bs = N * ts + pad;
        const int64_t st[4] = {bs, ts, hs, 1};
        k->bytes[PM_Q] = (size_t)(lead + B * bs);
        k->img[PM_Q] = calloc(k->bytes[PM_Q], 1);
        k->a.q = pm_tensor_(c->qt, 4, sh, st, (uint64_t)lead);
        for (int64_t b = 0; b < B; ++b)
            for (int64_t t = 0; t < N; ++t)
                for (int64_t h = 0; h < H; ++h)
                    qt_fill_fp8(rng, k->img[PM_Q] + lead + b * bs + t * ts + h * hs, (size_t)D, c->qt, 8.0f);
    }
    /* cache and scales */
    {
        const int64_t np = k->n_pages;
        int64_t row, page, soff, srow, spage, kv_bytes;
        if (c->fused && c->paged3) { /* a page: P rows of codes, then P scales */
            row = D;
            page = P * (D + 4);
            soff = P * D;
            srow = 1;
            spage = page / 4;
        } else if (c->fused) {       /* a slot row: D codes, then its scale */
            row = D + 4;
            page = P * row;
            soff = D;
            srow = row / 4;
            spage = P * srow;
        } else {
            row = D + 16 * pad;
            page = P * row;
            soff = 0;
            srow = 1 + pad;
            spage = P * srow;
        }
        kv_bytes = np * page + 16;
        k->bytes[PM_KV] = (size_t)kv_bytes;
        k->img[PM_KV] = calloc(k->bytes[PM_KV], 1);
        if (c->paged3) {
            const int64_t sh[3] = {np, P, D}, st[3] = {page, row, 1};
            k->a.k_cache = pm_tensor_(c->kt, 3, sh, st, 0);
        } else {
            const int64_t sh[2] = {k->n_slots, D}, st[2] = {row, 1};
            k->a.k_cache = pm_tensor_(c->kt, 2, sh, st, 0);
        }
        uint8_t *simg;
        int sbuf;
        if (c->fused) {
            sbuf = PM_KV;
            simg = k->img[PM_KV] + soff;
        } else {
            sbuf = PM_SCALE;
            k->bytes[PM_SCALE] = (size_t)(np * spage * 4 + 16);
            k->img[PM_SCALE] = calloc(k->bytes[PM_SCALE], 1);
            simg = k->img[PM_SCALE];
        }
        if (c->paged3) {
            const int64_t sh[2] = {np, P}, st[2] = {spage, srow};
            k->a.k_scale = pm_tensor_(QATTN_F32, 2, sh, st, c->fused ? (uint64_t)soff : 0);
        } else {
            const int64_t sh[1] = {k->n_slots}, st[1] = {srow};
            k->a.k_scale = pm_tensor_(QATTN_F32, 1, sh, st, c->fused ? (uint64_t)soff : 0);
        }
        for (int64_t s = 0; s < k->n_slots; ++s) {
            qt_fill_fp8(rng, k->img[PM_KV] + s / P * page + s % P * row, (size_t)D, c->kt, 8.0f);
            float sc = qt_uniform(rng, 0.01f, 0.2f);
            if (c->neg && s % 3 == 1) sc = -sc;
            memcpy(simg + 4 * (s / P * spage + s % P * srow), &sc, 4);
        }
        k->buf_of[1] = PM_KV;
        k->buf_of[2] = sbuf;
    }
    /* weights [B, N, H] */
    {
        const int64_t sh[3] = {B, N, H}, ts = H + pad, bs = N * ts + pad, st[3] = {bs, ts, 1};
        k->bytes[PM_W] = (size_t)(4 * (lead + B * bs));
        k->img[PM_W] = calloc(k->bytes[PM_W], 1);
        k->a.weights = pm_tensor_(QATTN_F32, 3, sh, st, (uint64_t)(4 * lead));
        for (int64_t b = 0; b < B; ++b)
            for (int64_t t = 0; t < N; ++t)
                for (int64_t h = 0; h < H; ++h) {
                    const float w = qt_signed(rng, 0.1f, 1.0f);
                    memcpy(k->img[PM_W] + 4 * (lead + b * bs + t * ts + h), &w, 4);
                }
    }
    /* page table: indptr [B + 1], indices [n_idx], lens [B] in one image */
    {
        const int64_t n_idx_alloc = k->n_idx > 0 ? k->n_idx : 1;
        k->bytes[PM_TABLE] = (size_t)(4 * (B + 1 + n_idx_alloc + B));
        k->img[PM_TABLE] = calloc(k->bytes[PM_TABLE], 1);
        k->indptr = (int32_t *)k->img[PM_TABLE];
        k->indices = k->indptr + B + 1;
        k->lens = k->indices + n_idx_alloc;
        int32_t *perm = malloc((size_t)k->n_pages * sizeof *perm);
        for (int64_t i = 0; i < k->n_pages; ++i) perm[i] = (int32_t)i;
        qt_shuffle_i32(rng, perm, (size_t)k->n_pages); /* shuffled pages */
        int64_t e = 0;
        for (int64_t b = 0; b < B; ++b) {
            k->indptr[b] = (int32_t)e;
            for (int32_t j = 0; j < need[b]; ++j, ++e) k->indices[e] = perm[e];
            k->lens[b] = lens[b];
        }
        k->indptr[B] = (int32_t)e;
        free(perm);
        const int64_t one[1] = {1};
        int64_t sh[1] = {B + 1};
        k->a.kv_indptr = pm_tensor_(QATTN_I32, 1, sh, one, 0);
        sh[0] = k->n_idx;
        k->a.kv_indices = pm_tensor_(QATTN_I32, 1, sh, one, (uint64_t)(4 * (B + 1)));
        sh[0] = B;
        k->a.kv_lens = pm_tensor_(QATTN_I32, 1, sh, one, (uint64_t)(4 * (B + 1 + n_idx_alloc)));
        /* the fault, on request 0 (the longest) */
        switch (c->bad) {
        case PM_BAD_PAGE:
            if (k->n_idx) k->indices[0] = (int32_t)(k->n_pages + 5);
            break;
        case PM_NEG_PAGE:
            if (k->n_idx) k->indices[0] = -1;
            break;
        case PM_INDPTR_PAST:
            k->indptr[B] = (int32_t)(k->n_idx + 2);
            break;
        case PM_LEN_PAST_PAGES:
            k->lens[0] = (int32_t)((k->indptr[1] - k->indptr[0]) * P + 1);
            if (k->lens[0] > k->M) k->M = k->lens[0];
            break;
        case PM_LEN_PAST_MAX:
            k->lens[0] = (int32_t)(k->M + 3);
            break;
        default: break;
        }
    }
    /* logits [B, N, M], rows of M + pad */
    {
        const int64_t M = k->M, ts = M + pad, bs = N * ts + pad;
        const int64_t sh[3] = {B, N, M}, st[3] = {bs, ts, 1};
        k->bytes[PM_LOGITS] = (size_t)(4 * (lead + B * bs + 8));
        k->img[PM_LOGITS] = malloc(k->bytes[PM_LOGITS]);
        memset(k->img[PM_LOGITS], poison, k->bytes[PM_LOGITS]);
        k->a.logits = pm_tensor_(QATTN_F32, 3, sh, st, (uint64_t)(4 * lead));
    }
    k->a.page_size = (int32_t)P;
    k->a.max_kv_len = (int32_t)k->M;
    k->a.clean_logits = c->clean;
    k->buf_of[0] = PM_Q;
    k->buf_of[3] = PM_W;
    k->buf_of[4] = k->buf_of[5] = k->buf_of[6] = PM_TABLE;
    k->buf_of[7] = PM_LOGITS;
    free(lens);
    free(need);
    return 1;
}

/* The args with each tensor in bufs[its image]. */
static inline qattn_paged_mqa_logits_args pm_bind(const pm_case *k, qattn_buffer *const bufs[PM_NBUF]) {
    qattn_paged_mqa_logits_args a = k->a;
    qattn_tensor *ts[8] = {&a.q, &a.k_cache, &a.k_scale, &a.weights, &a.kv_indptr, &a.kv_indices,
                           &a.kv_lens, &a.logits};
    for (int i = 0; i < 8; ++i) ts[i]->buffer = bufs[k->buf_of[i]];
    return a;
}

/* The oracle's fp8 decoder, from the bit fields (spec 1). */
static inline double pm_fp8(uint8_t c, qattn_dtype dt) {
    const int fnuz = dt == QATTN_FP8_E4M3FNUZ;
    const int s = c >> 7, e = (c >> 3) & 15, m = c & 7, bias = fnuz ? 8 : 7;
    if (fnuz && c == 0x80) return NAN;
    if (!fnuz && (c & 0x7F) == 0x7F) return NAN;
    const double v = e == 0 ? ldexp(m / 8.0, 1 - bias) : ldexp(1.0 + m / 8.0, e - bias);
    return s ? -v : v;
}

static inline int64_t pm_off(const qattn_tensor *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    const int64_t ix[4] = {i0, i1, i2, i3};
    int64_t e = 0;
    for (int i = 0; i < t->rank; ++i) e += ix[i] * t->strides[i];
    return (int64_t)t->offset + e * (int64_t)qattn_dtype_size(t->dtype);
}

/* Byte offsets of slot s's row of codes and of its scale in their images. */
static inline int64_t pm_slot_off(const qattn_tensor *t, int64_t P, int64_t s) {
    if ((t->dtype == QATTN_F32 && t->rank == 2) || (t->dtype != QATTN_F32 && t->rank == 3))
        return pm_off(t, s / P, s % P, 0, 0);
    return pm_off(t, s, 0, 0, 0);
}

/* Spec 5 in f64, walking the page table entry by entry: ref[b, t, p] and
 * the tolerance term A (spec 4) where visible[] is 1, 0 elsewhere. Arrays
 * are [B][N][M]. */
static inline void pm_oracle(const pm_case *k, double *ref, double *A, uint8_t *visible) {
    const pm_cfg *c = &k->c;
    const int64_t B = c->B, N = c->N, H = c->H, D = c->D, P = c->P, M = k->M;
    memset(visible, 0, (size_t)(B * N * M));
    const uint8_t *simg = k->img[k->buf_of[2]];
    for (int64_t b = 0; b < B; ++b) {
        const int64_t lo = k->indptr[b], hi = k->indptr[b + 1], L = k->lens[b];
        for (int64_t e = lo < 0 ? 0 : lo; e < hi && e < k->n_idx; ++e) {
            const int64_t page = k->indices[e];
            for (int64_t r = 0; r < P; ++r) {
                const int64_t p = (e - lo) * P + r, s = page * P + r;
                if (page < 0 || s >= k->n_slots || p >= M) continue;
                const uint8_t *krow = k->img[PM_KV] + pm_slot_off(&k->a.k_cache, P, s);
                float sc;
                memcpy(&sc, simg + pm_slot_off(&k->a.k_scale, P, s), 4);
                for (int64_t t = 0; t < N; ++t) {
                    if (p > L - N + t) continue;
                    double sum = 0.0, a = 0.0;
                    for (int64_t h = 0; h < H; ++h) {
                        const uint8_t *qr = k->img[PM_Q] + pm_off(&k->a.q, b, t, h, 0);
                        double dot = 0.0, dabs = 0.0;
                        for (int64_t d = 0; d < D; ++d) {
                            const double x = pm_fp8(qr[d], c->qt) * pm_fp8(krow[d], c->kt);
                            dot += x;
                            dabs += fabs(x);
                        }
                        float w;
                        memcpy(&w, k->img[PM_W] + pm_off(&k->a.weights, b, t, h, 0), 4);
                        sum += (double)w * fmax(0.0, (double)sc * dot);
                        a += fabs((double)w) * fabs((double)sc) * dabs;
                    }
                    const int64_t o = (b * N + t) * M + p;
                    ref[o] = sum;
                    A[o] = a;
                    visible[o] = 1;
                }
            }
        }
    }
}

/* Checks logits image `img` of case k against the oracle: visible columns
 * within 4e-5 A + 1e-6; the rest -inf exactly (clean) or `poison` bytes
 * (not clean, when strict_unwritten); every byte outside the tensor's
 * elements still `poison`. Returns the number of mismatches, describing the
 * first in msg. */
static inline int64_t pm_check(const pm_case *k, const uint8_t *img, const double *ref, const double *A,
                               const uint8_t *visible, uint8_t poison, int strict_unwritten, char *msg,
                               size_t msg_size) {
    const int64_t B = k->c.B, N = k->c.N, M = k->M;
    int64_t bad = 0;
    uint8_t *inside = calloc(k->bytes[PM_LOGITS], 1);
    msg[0] = '\0';
    for (int64_t b = 0; b < B; ++b)
        for (int64_t t = 0; t < N; ++t)
            for (int64_t p = 0; p < M; ++p) {
                const int64_t off = pm_off(&k->a.logits, b, t, p, 0), o = (b * N + t) * M + p;
                memset(inside + off, 1, 4);
                float g;
                memcpy(&g, img + off, 4);
                int ok;
                if (visible[o]) ok = isfinite(g) && fabs((double)g - ref[o]) <= 4e-5 * A[o] + 1e-6;
                else if (k->c.clean) ok = isinf(g) && g < 0;
                else if (strict_unwritten) {
                    ok = 1;
                    for (int i = 0; i < 4; ++i) ok &= img[off + i] == poison;
                } else ok = 1;
                if (!ok && bad++ == 0)
                    snprintf(msg, msg_size, "logits[%lld, %lld, %lld] = %.9g, want %s%.9g (A %.3g)",
                             (long long)b, (long long)t, (long long)p, (double)g,
                             visible[o] ? "" : (k->c.clean ? "-inf, not " : "untouched, not "),
                             visible[o] ? ref[o] : 0.0, visible[o] ? A[o] : 0.0);
            }
    for (size_t i = 0; i < k->bytes[PM_LOGITS]; ++i)
        if (!inside[i] && img[i] != poison && bad++ == 0)
            snprintf(msg, msg_size, "logits byte %zu outside the tensor was written", i);
    free(inside);
    return bad;
}

#endif
