/*
 * Parity cases of qattn_decode_read (qattn/experimental.h), the read of
 * decode's own access pattern that qattn-bench times as each decode
 * preset's ceiling: the word sum it adds must equal the reference's, which
 * walks the keys the reference decode reads. Every slot of the cache (seen
 * or not), every scale and q hold non-zero random words, so a key read that
 * decode does not read, or one missed, changes the sum.
 *
 * Cases cover fp8, int8 and bf16 caches, D 64/128/256, 1 and 16 slots per
 * page, several query rows, a sliding window, request lengths that are not
 * page multiples, a request whose kv_lens runs past its pages and one with
 * no keys, and a paged rank-4 cache with K and V interleaved.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parity_common.h"
#include "qattn/experimental.h"

typedef struct dread_case {
    const char *name;
    int B, R, Hq, Hkv, D;
    qattn_dtype dt;
    int P, pages_per_req, window; /* window -1: none */
    int interleaved;              /* rank-4 [pages, P, Hkv, D], K and V in one buffer */
} dread_case;

static const dread_case CASES[] = {
    {"decode_read/fp8_d128_p16", 3, 1, 8, 2, 128, QATTN_FP8_E4M3FN, 16, 5, -1, 0},
    {"decode_read/i8_d64_p1_r4", 2, 4, 8, 8, 64, QATTN_I8, 1, 70, -1, 0},
    {"decode_read/bf16_d256_window", 2, 2, 4, 1, 256, QATTN_BF16, 16, 9, 37, 0},
    {"decode_read/fnuz_d128_interleaved", 2, 1, 16, 4, 128, QATTN_FP8_E4M3FNUZ, 16, 4, -1, 1},
};

#define SUM_AT 12u
#define SUM_BYTES 32u

typedef struct side_bufs {
    qattn_buffer *b[8]; /* q, k, v, ks, vs, indptr, indices, lens */
    qattn_buffer *sum, *o; /* o: part of a valid decode call, never written */
} side_bufs;

static qattn_status put(qattn_context *ctx, const void *src, size_t bytes, qattn_buffer **out) {
    qattn_status s = qattn_buffer_alloc(ctx, bytes, out);
    return s == QATTN_OK ? qattn_buffer_upload(ctx, *out, 0, src, bytes) : s;
}

static void fill_words(qt_rng *r, void *p, size_t bytes) {
    for (size_t i = 0; i + 4 <= bytes; i += 4) {
        const uint32_t w = qt_u32(r) | 0x01010101u; /* no zero byte, no zero word */
        memcpy((char *)p + i, &w, 4);
    }
}

/* Runs the case on ctx; the u32 it leaves at SUM_AT in *got. */
static qattn_status run_side(qattn_context *ctx, const dread_case *c, void *const host[8], const size_t bytes[8],
                             uint32_t start, uint32_t *got, int *gaps_ok) {
    side_bufs sb;
    memset(&sb, 0, sizeof sb);
    qattn_status s = QATTN_OK;
    const int scaled = c->dt != QATTN_BF16;
    for (int i = 0; i < 8 && s == QATTN_OK; ++i)
        if ((i != 2 || !c->interleaved) && (scaled || (i != 3 && i != 4))) s = put(ctx, host[i], bytes[i], &sb.b[i]);
    uint8_t init[SUM_BYTES], img[SUM_BYTES];
    memset(init, PT_POISON, sizeof init);
    memcpy(init + SUM_AT, &start, 4);
    if (s == QATTN_OK) s = put(ctx, init, SUM_BYTES, &sb.sum);
    if (s == QATTN_OK) s = qattn_buffer_alloc(ctx, bytes[0], &sb.o);
    if (s == QATTN_OK) {
        const int ppr = c->pages_per_req, n_pages = c->B * ppr + 3, slots = n_pages * c->P;
        qattn_decode_args a;
        memset(&a, 0, sizeof a);
        a.q = qattn_tensor_contiguous(sb.b[0], 0, QATTN_BF16, 4, (int64_t[]){c->B, c->R, c->Hq, c->D});
        if (c->interleaved) {
            const int64_t sh[4] = {n_pages, c->P, c->Hkv, c->D};
            a.k_cache = qattn_tensor_contiguous(sb.b[1], 0, c->dt, 4, sh);
            a.k_cache.strides[0] = 2LL * c->P * c->Hkv * c->D;
            a.v_cache = a.k_cache;
            a.v_cache.offset = (uint64_t)c->P * c->Hkv * c->D * qattn_dtype_size(c->dt);
        } else {
            a.k_cache = qattn_tensor_contiguous(sb.b[1], 0, c->dt, 3, (int64_t[]){slots, c->Hkv, c->D});
            a.v_cache = qattn_tensor_contiguous(sb.b[2], 0, c->dt, 3, (int64_t[]){slots, c->Hkv, c->D});
        }
        if (scaled) {
            a.k_scale = qattn_tensor_contiguous(sb.b[3], 0, QATTN_F32, 2, (int64_t[]){slots, c->Hkv});
            a.v_scale = qattn_tensor_contiguous(sb.b[4], 0, QATTN_F32, 2, (int64_t[]){slots, c->Hkv});
        }
        a.kv_indptr = qattn_tensor_contiguous(sb.b[5], 0, QATTN_I32, 1, (int64_t[]){c->B + 1});
        a.kv_indices = qattn_tensor_contiguous(sb.b[6], 0, QATTN_I32, 1, (int64_t[]){(int64_t)c->B * ppr});
        a.kv_lens = qattn_tensor_contiguous(sb.b[7], 0, QATTN_I32, 1, (int64_t[]){c->B});
        a.o = qattn_tensor_contiguous(sb.o, 0, QATTN_BF16, 4, (int64_t[]){c->B, c->R, c->Hq, c->D});
        a.page_size = c->P;
        a.max_kv_len = ppr * c->P;
        a.sm_scale = 0.1f;
        a.window_left = c->window;
        s = qattn_decode_read(ctx, &a, sb.sum, SUM_AT);
    }
    if (s == QATTN_OK) s = qattn_buffer_download(ctx, sb.sum, 0, img, SUM_BYTES);
    if (s == QATTN_OK) {
        memcpy(got, img + SUM_AT, 4);
        *gaps_ok = 1;
        for (unsigned i = 0; i < SUM_BYTES; ++i)
            if ((i < SUM_AT || i >= SUM_AT + 4) && img[i] != PT_POISON) *gaps_ok = 0;
    }
    for (int i = 0; i < 8; ++i) qattn_buffer_free(ctx, sb.b[i]);
    qattn_buffer_free(ctx, sb.sum);
    qattn_buffer_free(ctx, sb.o);
    return s;
}

static void run_case(parity_ctx *pc, const dread_case *c) {
    if (!pt_selected(pc, c->name)) return;
    qt_rng rng = qt_rng_for(c->name);
    const int ppr = c->pages_per_req, n_pages = c->B * ppr + 3, slots = n_pages * c->P;
    const size_t es = qattn_dtype_size(c->dt), row = (size_t)c->Hkv * c->D * es;
    size_t bytes[8] = {(size_t)c->B * c->R * c->Hq * c->D * 2,
                       (size_t)slots * row * (c->interleaved ? 2 : 1),
                       (size_t)slots * row,
                       (size_t)slots * c->Hkv * 4,
                       (size_t)slots * c->Hkv * 4,
                       (size_t)(c->B + 1) * 4,
                       (size_t)c->B * ppr * 4,
                       (size_t)c->B * 4};
    void *host[8];
    for (int i = 0; i < 8; ++i) host[i] = malloc(bytes[i]);
    for (int i = 0; i < 5; ++i) fill_words(&rng, host[i], bytes[i]);
    int32_t *indptr = host[5], *indices = host[6], *lens = host[7];
    /* a shuffled pool of pages (3 never used), one per table entry */
    int32_t *pool = malloc((size_t)n_pages * 4);
    for (int i = 0; i < n_pages; ++i) pool[i] = i;
    qt_shuffle_i32(&rng, pool, (size_t)n_pages);
    for (int i = 0; i < c->B * ppr; ++i) indices[i] = pool[i];
    for (int b = 0; b <= c->B; ++b) indptr[b] = b * ppr;
    for (int b = 0; b < c->B; ++b) lens[b] = (int32_t)qt_int(&rng, (ppr - 1) * c->P + 1, ppr * c->P);
    if (c->B > 1) lens[c->B - 1] = ppr * c->P + 5; /* past its pages: bounded by them */
    if (c->B > 2) lens[1] = 0;                      /* no keys */
    free(pool);
    const uint32_t start = qt_u32(&rng);
    uint32_t want = 0, got = 0;
    int gaps_ref = 0, gaps = 0;
    qattn_status s = run_side(pc->ref, c, host, bytes, start, &want, &gaps_ref);
    if (s != QATTN_OK) {
        pt_fail(pc, &rng, c->name, "reference: %s: %s", qattn_status_name(s), qattn_last_error(pc->ref));
    } else if ((s = run_side(pc->dev, c, host, bytes, start, &got, &gaps)) != QATTN_OK) {
        pt_fail(pc, &rng, c->name, "%s: %s: %s", pc->backend, qattn_status_name(s), qattn_last_error(pc->dev));
    } else if (want == start) {
        pt_fail(pc, &rng, c->name, "the reference's sum did not move: the case reads nothing");
    } else if (got != want || !gaps || !gaps_ref) {
        pt_fail(pc, &rng, c->name, "%s: sum 0x%08x, reference 0x%08x%s", pc->backend, (unsigned)got,
                (unsigned)want, gaps && gaps_ref ? "" : "; bytes around the sum were written");
    } else {
        pt_pass(pc, c->name, "");
    }
    for (int i = 0; i < 8; ++i) free(host[i]);
}

static void run_decode_read(parity_ctx *pc) {
    if (pc->shape) return; /* --shape describes a decode case */
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; ++i) run_case(pc, &CASES[i]);
}

const parity_op parity_op_decode_read = {"decode_read", run_decode_read};
