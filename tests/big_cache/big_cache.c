/*
 * qattn_big_cache: decode and the KV store over a K/V cache that spans more
 * than 2^31 elements (spec 2; kernels form page and head bases in 64 bits),
 * on one backend against the cpu reference.
 *
 *   qattn_big_cache --backend cpu|vulkan|hip [--part store|decode|all]
 *                   [--layout paged|headmajor|all] [--size large|medium]
 *   qattn_big_cache --backend NAME --layout combined [--page P] [--full [--requests N]]
 *
 * --layout combined is decode over an 8 GiB bf16 cache in the combined
 * layout (combined_bf16.c, issue 24 item 0); the rest of this file is the
 * fp8 cache below.
 *
 * The cache is fp8 e4m3fn, 8 kv heads of 128 dims, 16 slots per page, in
 * one of two layouts:
 *   paged      rank 4 [N_pages, P, Hkv, D], K and V interleaved page by
 *              page in one allocation (page stride 2 P Hkv D);
 *   headmajor  rank 3 [N_slots, Hkv, D] with strides (D, N_slots D, 1), K
 *              and V in allocations of their own: the head stride alone is
 *              over 2^28 and g x head stride over 2^31.
 * Sizes: `large` makes each cache tensor span more than 2^32 elements (so
 * 32-bit unsigned offsets wrap), `medium` more than 2^31 but less than 2^32
 * (within a 4 GiB maxBufferSize, lavapipe's). Without --size the test tries
 * large, then medium; a device that can allocate neither is skipped with
 * the backend's reason. Nothing but the pages used is touched: the buffers
 * are allocated, then only the pages a request reads (random codes and
 * scales) and the pages the store writes (a poison pattern) are uploaded,
 * and only those are read back.
 *
 * Checks
 * - store: T new tokens at slots on pages near the end of the cache (and
 *   one near the start, one -1 padding) written on both sides; every byte
 *   of every written page (K, V, both scales) equals the reference's, so
 *   rows and heads that were not written keep the poison on both sides.
 * - decode: B requests whose page tables mix pages past 2^31 (and 2^32)
 *   elements with pages near the start; o and lse within the spec's
 *   tolerance of the reference, guard bytes before and after o and lse
 *   untouched, no NaN.
 * The decode checks on a GPU backend depend on the decode kernel forming
 * its page and head bases in 64 bits (qattn_cache_kernel_view); the store
 * checks depend only on the KV store kernels.
 *
 * The Vulkan context runs without the validation layer: the layer reports
 * every allocation above maxMemoryAllocationSize (2 GiB on lavapipe), which
 * this test makes on purpose; the library refuses buffers above
 * maxBufferSize itself. Exit: 0 pass, 1 fail, 77 skipped (no backend,
 * device or memory for the cache).
 */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "big_cache.h"
#include "qattn/backends.h"
#include "qattn/convert.h"
#include "qattn/qattn.h"
#include "test_rng.h"
#include "tolerance.h"

#define SKIP BIG_CACHE_SKIP
enum { HKV = 8, D = 128, P = 16, GQA = 4, HQ = HKV * GQA, B = 3, PAGES_PER_REQ = 6, T_NEW = 8 };
#define FMT QATTN_FP8_E4M3FN
#define POISON 0xA5
#define GUARD 256 /* bytes before and after o and lse */

typedef struct side {
    qattn_context *ctx;
    qattn_buffer *kv[2];    /* paged: kv[0] holds both; headmajor: K, V */
    qattn_buffer *sc[2];    /* k_scale, v_scale */
} side;

typedef struct layout {
    int headmajor;
    int64_t n_pages, n_slots;
    uint64_t kv_bytes[2], sc_bytes; /* per buffer */
} layout;

static int failures;

static void fail(const qt_rng *r, const char *what, const char *fmt, ...) {
    char seed[160];
    va_list ap;
    va_start(ap, fmt);
    printf("FAIL %s: ", what);
    vprintf(fmt, ap);
    printf(" (%s)\n", qt_rng_describe(r, seed, sizeof seed));
    va_end(ap);
    ++failures;
}

/* ---- the layouts: descriptors and byte offsets, written out here rather
 * than taken from the library, so the test does not share its addressing */

static layout layout_of(int headmajor, int large) {
    layout l;
    memset(&l, 0, sizeof l);
    l.headmajor = headmajor;
    /* paged: K spans (N_pages - 1) 2PHD + PHD elements; headmajor: Hkv N D */
    l.n_pages = headmajor ? (large ? (4718592 / P) : (3145728 / P)) : (large ? 139264 : 98304);
    l.n_slots = l.n_pages * P;
    if (headmajor) {
        l.kv_bytes[0] = l.kv_bytes[1] = (uint64_t)l.n_slots * HKV * D;
    } else {
        l.kv_bytes[0] = (uint64_t)l.n_pages * 2 * P * HKV * D;
    }
    l.sc_bytes = (uint64_t)l.n_slots * HKV * 4;
    return l;
}

/* Buffer and byte offset of element (slot, g, d) of K (w 0) or V (w 1). */
static uint64_t kv_off(const layout *l, int w, int64_t slot, int g, int d) {
    if (l->headmajor) return ((uint64_t)g * (uint64_t)l->n_slots + (uint64_t)slot) * D + (uint64_t)d;
    const uint64_t page = (uint64_t)(slot / P), row = (uint64_t)(slot % P);
    return page * 2 * P * HKV * D + (uint64_t)w * P * HKV * D + (row * HKV + (uint64_t)g) * D + (uint64_t)d;
}
static int kv_buf(const layout *l, int w) { return l->headmajor ? w : 0; }

/* Byte offset of the scale of (slot, g): paged [N_pages, P, Hkv], headmajor
 * [N_slots, Hkv], both dense (a scale's head dimension is its last, which
 * stays contiguous). */
static uint64_t sc_off(const layout *l, int64_t slot, int g) {
    (void)l;
    return ((uint64_t)slot * HKV + (uint64_t)g) * 4;
}

static void descriptors(const layout *l, const side *s, qattn_tensor *kc, qattn_tensor *vc, qattn_tensor *ks,
                        qattn_tensor *vs) {
    if (l->headmajor) {
        const int64_t shape[3] = {l->n_slots, HKV, D}, str[3] = {D, l->n_slots * D, 1};
        const int64_t sshape[2] = {l->n_slots, HKV};
        qattn_tensor *c[2] = {kc, vc}, *sc[2] = {ks, vs};
        for (int w = 0; w < 2; ++w) {
            *c[w] = qattn_tensor_contiguous(s->kv[w], 0, FMT, 3, shape);
            memcpy(c[w]->strides, str, sizeof str);
            *sc[w] = qattn_tensor_contiguous(s->sc[w], 0, QATTN_F32, 2, sshape);
        }
        return;
    }
    const int64_t shape[4] = {l->n_pages, P, HKV, D}, str[4] = {2 * P * HKV * D, HKV * D, D, 1};
    *kc = qattn_tensor_contiguous(s->kv[0], 0, FMT, 4, shape);
    memcpy(kc->strides, str, sizeof str);
    *vc = *kc;
    vc->offset = (uint64_t)P * HKV * D;
    const int64_t sshape[3] = {l->n_pages, P, HKV};
    *ks = qattn_tensor_contiguous(s->sc[0], 0, QATTN_F32, 3, sshape);
    *vs = qattn_tensor_contiguous(s->sc[1], 0, QATTN_F32, 3, sshape);
}

/* ---- pages: the byte ranges of one page in every buffer --------------- */

typedef struct range {
    int buf;  /* 0, 1: kv buffers; 2, 3: scale buffers */
    uint64_t off, bytes;
} range;

/* The byte ranges of page p: its K and V rows (one run per kv head when
 * head-major, one run otherwise) and its scales. Returns the count. */
static int page_ranges(const layout *l, int64_t p, range *out) {
    int n = 0;
    const int64_t s0 = p * P;
    for (int w = 0; w < 2; ++w) {
        if (l->headmajor)
            for (int g = 0; g < HKV; ++g) out[n++] = (range){w, kv_off(l, w, s0, g, 0), (uint64_t)P * D};
        else
            out[n++] = (range){0, kv_off(l, w, s0, 0, 0), (uint64_t)P * HKV * D};
        out[n++] = (range){2 + w, sc_off(l, s0, 0), (uint64_t)P * HKV * 4};
    }
    return n;
}

static qattn_buffer *buf_of(const side *s, int b) { return b < 2 ? s->kv[b] : s->sc[b - 2]; }

/* Uploads `bytes` of src at range r to both sides. */
static qattn_status put_both(side *sd, const range *r, const void *src) {
    for (int i = 0; i < 2; ++i) {
        qattn_status st = qattn_buffer_upload(sd[i].ctx, buf_of(&sd[i], r->buf), r->off, src, r->bytes);
        if (st != QATTN_OK) {
            printf("FAIL upload: %s: %s\n", qattn_status_name(st), qattn_last_error(sd[i].ctx));
            return st;
        }
    }
    return QATTN_OK;
}

/* Random page contents: fp8 codes for K/V, positive scales. */
static qattn_status fill_page(side *sd, const layout *l, int64_t p, qt_rng *r, uint8_t *tmp) {
    range rs[2 * HKV + 2];
    const int n = page_ranges(l, p, rs);
    for (int i = 0; i < n; ++i) {
        if (rs[i].buf < 2) qt_fill_fp8(r, tmp, rs[i].bytes, FMT, 400.0f);
        else qt_fill_f32_pos(r, (float *)tmp, rs[i].bytes / 4, 1.0f / 512, 1.0f / 64);
        if (put_both(sd, &rs[i], tmp) != QATTN_OK) return QATTN_ERR_DEVICE;
    }
    return QATTN_OK;
}

static qattn_status poison_page(side *sd, const layout *l, int64_t p, uint8_t *tmp) {
    range rs[2 * HKV + 2];
    const int n = page_ranges(l, p, rs);
    for (int i = 0; i < n; ++i) {
        memset(tmp, POISON, rs[i].bytes);
        if (put_both(sd, &rs[i], tmp) != QATTN_OK) return QATTN_ERR_DEVICE;
    }
    return QATTN_OK;
}

/* ---- small buffers ----------------------------------------------------- */

static qattn_buffer *small(side *s, const void *src, size_t bytes, int fill) {
    qattn_buffer *b = NULL;
    if (qattn_buffer_alloc(s->ctx, bytes, &b) != QATTN_OK) return NULL;
    if (src) {
        qattn_buffer_upload(s->ctx, b, 0, src, bytes);
    } else {
        void *tmp = malloc(bytes);
        memset(tmp, fill, bytes);
        qattn_buffer_upload(s->ctx, b, 0, tmp, bytes);
        free(tmp);
    }
    return b;
}

/* ---- the two parts ---------------------------------------------------- */

/* Pages drawn for the test: the first `hi` from the last 1/16 of the cache
 * (past 2^31, and for `large` past 2^32, elements), the rest anywhere;
 * distinct. */
static void draw_pages(qt_rng *r, const layout *l, int64_t *pages, int n, int hi, const int64_t *avoid,
                       int n_avoid) {
    for (int i = 0; i < n; ++i) {
        int64_t p;
        int again;
        do {
            p = i < hi ? l->n_pages - 1 - qt_int(r, 0, l->n_pages / 16 - 1) : qt_int(r, 0, l->n_pages - 1);
            again = 0;
            for (int j = 0; j < i; ++j) again |= pages[j] == p;
            for (int j = 0; j < n_avoid; ++j) again |= avoid[j] == p;
        } while (again);
        pages[i] = p;
    }
    if (hi > 0) pages[0] = l->n_pages - 1; /* the very last page */
}

static void run_store(side *sd, const layout *l, const int64_t *avoid, int n_avoid, const char *tag) {
    char name[96];
    snprintf(name, sizeof name, "big_cache/store/%s", tag);
    qt_rng r = qt_rng_for(name);
    int64_t pages[T_NEW];
    draw_pages(&r, l, pages, 3, 2, avoid, n_avoid); /* two high, one anywhere */
    pages[3] = 0; /* and the first page */
    const int n_pages = 4;
    uint8_t *tmp = malloc((size_t)P * HKV * D * 4);
    for (int i = 0; i < n_pages; ++i)
        if (poison_page(sd, l, pages[i], tmp) != QATTN_OK) goto out;
    int32_t slots[T_NEW];
    for (int t = 0; t < T_NEW; ++t)
        slots[t] = (int32_t)(pages[t % n_pages] * P + (t * 5 + 3) % P);
    slots[T_NEW - 1] = -1; /* padding */
    uint16_t knew[T_NEW * HKV * D], vnew[T_NEW * HKV * D];
    qt_fill_bf16(&r, knew, T_NEW * HKV * D, 3.0f);
    qt_fill_bf16(&r, vnew, T_NEW * HKV * D, 0.5f);
    qattn_buffer *tiny[2][3] = {{0}};
    for (int i = 0; i < 2; ++i) {
        side *s = &sd[i];
        tiny[i][0] = small(s, knew, sizeof knew, 0);
        tiny[i][1] = small(s, vnew, sizeof vnew, 0);
        tiny[i][2] = small(s, slots, sizeof slots, 0);
        qattn_kv_store_args a;
        memset(&a, 0, sizeof a);
        const int64_t nshape[3] = {T_NEW, HKV, D}, sshape[1] = {T_NEW};
        a.k_new = qattn_tensor_contiguous(tiny[i][0], 0, QATTN_BF16, 3, nshape);
        a.v_new = qattn_tensor_contiguous(tiny[i][1], 0, QATTN_BF16, 3, nshape);
        a.slot_mapping = qattn_tensor_contiguous(tiny[i][2], 0, QATTN_I32, 1, sshape);
        descriptors(l, s, &a.k_cache, &a.v_cache, &a.k_scale, &a.v_scale);
        qattn_status st = qattn_kv_store(s->ctx, &a);
        if (st != QATTN_OK) {
            fail(&r, name, "%s kv_store: %s: %s", i ? "device" : "reference", qattn_status_name(st),
                 qattn_last_error(s->ctx));
            goto out_bufs;
        }
    }
    {
        /* every byte of every written page against the reference */
        uint8_t *got = malloc((size_t)P * HKV * D), *want = malloc((size_t)P * HKV * D);
        int bad = 0;
        for (int i = 0; i < n_pages && !bad; ++i) {
            range rs[2 * HKV + 2];
            const int n = page_ranges(l, pages[i], rs);
            for (int j = 0; j < n && !bad; ++j) {
                if (qattn_buffer_download(sd[0].ctx, buf_of(&sd[0], rs[j].buf), rs[j].off, want, rs[j].bytes) ||
                    qattn_buffer_download(sd[1].ctx, buf_of(&sd[1], rs[j].buf), rs[j].off, got, rs[j].bytes)) {
                    fail(&r, name, "download: %s", qattn_last_error(sd[1].ctx));
                    bad = 1;
                    break;
                }
                for (uint64_t k = 0; k < rs[j].bytes; ++k)
                    if (got[k] != want[k]) {
                        fail(&r, name, "page %" PRId64 " (%s), byte %" PRIu64 " of the buffer: 0x%02x, reference 0x%02x",
                             pages[i], rs[j].buf < 2 ? "K/V codes" : "scales", rs[j].off + k, got[k], want[k]);
                        bad = 1;
                        break;
                    }
            }
        }
        /* the reference wrote every non-padding token: a page without a
         * change would make the comparison vacuous */
        if (!bad) {
            const range hi = {kv_buf(l, 0), kv_off(l, 0, slots[0], 0, 0), D};
            qattn_buffer_download(sd[0].ctx, buf_of(&sd[0], hi.buf), hi.off, want, D);
            int poisoned = 1;
            for (int k = 0; k < D; ++k) poisoned &= want[k] == POISON;
            if (poisoned) fail(&r, name, "the reference left slot %d unwritten", (int)slots[0]);
            else printf("ok   %s: %d tokens on pages up to %" PRId64 " (V element %" PRIu64 ") bit-identical\n",
                        name, T_NEW - 1, pages[0], kv_off(l, 1, pages[0] * P + P - 1, HKV - 1, D - 1));
        }
        free(got);
        free(want);
    }
out_bufs:
    for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 3; ++j) qattn_buffer_free(sd[i].ctx, tiny[i][j]);
out:
    free(tmp);
}

static int read_back(side *s, qattn_buffer *b, size_t bytes, uint8_t **out) {
    *out = malloc(bytes);
    return qattn_buffer_download(s->ctx, b, 0, *out, bytes) == QATTN_OK;
}

static void run_decode(side *sd, const layout *l, int64_t *used, int *n_used, const char *tag) {
    char name[96];
    snprintf(name, sizeof name, "big_cache/decode/%s", tag);
    qt_rng r = qt_rng_for(name);
    int64_t pages[B * PAGES_PER_REQ];
    draw_pages(&r, l, pages, B * PAGES_PER_REQ, B * PAGES_PER_REQ / 2, NULL, 0);
    /* shuffled, so pages near the end and anywhere mix in every request */
    for (int i = B * PAGES_PER_REQ - 1; i > 0; --i) {
        const int j = (int)qt_int(&r, 0, i);
        const int64_t t = pages[i];
        pages[i] = pages[j];
        pages[j] = t;
    }
    memcpy(used, pages, sizeof pages);
    /* the last page was drawn (draw_pages): its last element is the
     * furthest one read */
    const uint64_t top = kv_off(l, 0, l->n_slots - 1, HKV - 1, D - 1);
    *n_used = B * PAGES_PER_REQ;
    uint8_t *tmp = malloc((size_t)P * HKV * D * 4);
    for (int i = 0; i < B * PAGES_PER_REQ; ++i)
        if (fill_page(sd, l, pages[i], &r, tmp) != QATTN_OK) {
            free(tmp);
            return;
        }
    free(tmp);
    int32_t indptr[B + 1], indices[B * PAGES_PER_REQ], lens[B];
    int max_len = 0;
    for (int b = 0; b <= B; ++b) indptr[b] = b * PAGES_PER_REQ;
    for (int i = 0; i < B * PAGES_PER_REQ; ++i) indices[i] = (int32_t)pages[i];
    for (int b = 0; b < B; ++b) {
        lens[b] = (int32_t)qt_int(&r, (PAGES_PER_REQ - 1) * P + 1, PAGES_PER_REQ * P);
        if (lens[b] > max_len) max_len = lens[b];
    }
    uint16_t q[B * HQ * D];
    qt_fill_bf16(&r, q, B * HQ * D, 1.0f);
    const size_t o_bytes = (size_t)B * HQ * D * 2, lse_bytes = (size_t)B * HQ * 4;
    qattn_buffer *tiny[2][6] = {{0}}, *ws[2] = {0};
    uint8_t *img[2][2] = {{0}};
    for (int i = 0; i < 2; ++i) {
        side *s = &sd[i];
        tiny[i][0] = small(s, q, sizeof q, 0);
        tiny[i][1] = small(s, indptr, sizeof indptr, 0);
        tiny[i][2] = small(s, indices, sizeof indices, 0);
        tiny[i][3] = small(s, lens, sizeof lens, 0);
        tiny[i][4] = small(s, NULL, GUARD + o_bytes + GUARD, 0xFF); /* NaN as bf16 */
        tiny[i][5] = small(s, NULL, GUARD + lse_bytes + GUARD, 0xFF);
        qattn_decode_args a;
        memset(&a, 0, sizeof a);
        a.q = qattn_tensor_contiguous(tiny[i][0], 0, QATTN_BF16, 4, (const int64_t[]){B, 1, HQ, D});
        descriptors(l, s, &a.k_cache, &a.v_cache, &a.k_scale, &a.v_scale);
        a.kv_indptr = qattn_tensor_contiguous(tiny[i][1], 0, QATTN_I32, 1, (const int64_t[]){B + 1});
        a.kv_indices = qattn_tensor_contiguous(tiny[i][2], 0, QATTN_I32, 1, (const int64_t[]){B * PAGES_PER_REQ});
        a.kv_lens = qattn_tensor_contiguous(tiny[i][3], 0, QATTN_I32, 1, (const int64_t[]){B});
        a.o = qattn_tensor_contiguous(tiny[i][4], GUARD, QATTN_BF16, 4, (const int64_t[]){B, 1, HQ, D});
        a.lse = qattn_tensor_contiguous(tiny[i][5], GUARD, QATTN_F32, 3, (const int64_t[]){B, 1, HQ});
        a.page_size = P;
        a.max_kv_len = max_len;
        a.sm_scale = 1.0f / sqrtf((float)D);
        a.window_left = -1;
        qattn_decode_plan plan;
        qattn_status st = qattn_decode_plan_create(s->ctx, &a, NULL, &plan);
        if (st == QATTN_OK && plan.workspace_bytes) st = qattn_buffer_alloc(s->ctx, plan.workspace_bytes, &ws[i]);
        if (st == QATTN_OK) st = qattn_decode_run(s->ctx, &plan, &a, ws[i], 0);
        if (st == QATTN_ERR_UNSUPPORTED && i) {
            /* a backend that cannot address this cache says so (the HIP
             * tiled kernels: 32-bit offsets); it must not compute it wrong */
            printf("refused %s: %s\n", name, qattn_last_error(s->ctx));
            goto out;
        }
        if (st != QATTN_OK) {
            fail(&r, name, "%s decode: %s: %s", i ? "device" : "reference", qattn_status_name(st),
                 qattn_last_error(s->ctx));
            goto out;
        }
        if (!read_back(s, tiny[i][4], GUARD + o_bytes + GUARD, &img[i][0]) ||
            !read_back(s, tiny[i][5], GUARD + lse_bytes + GUARD, &img[i][1])) {
            fail(&r, name, "download: %s", qattn_last_error(s->ctx));
            goto out;
        }
    }
    {
        int bad = 0;
        for (int t = 0; t < 2 && !bad; ++t) {
            const size_t body = t ? lse_bytes : o_bytes;
            for (size_t k = 0; k < GUARD && !bad; ++k)
                if (img[1][t][k] != 0xFF || img[1][t][GUARD + body + k] != 0xFF) {
                    fail(&r, name, "%s: a guard byte was written", t ? "lse" : "o");
                    bad = 1;
                }
        }
        double worst = 0.0;
        for (size_t k = 0; k < (size_t)B * HQ * D && !bad; ++k) {
            uint16_t gb, rb;
            memcpy(&gb, img[1][0] + GUARD + 2 * k, 2);
            memcpy(&rb, img[0][0] + GUARD + 2 * k, 2);
            const double got = qattn_bf16_to_f32(gb), ref = qattn_bf16_to_f32(rb);
            if (isnan(got) || isnan(ref) || !qt_tol_decode_o(got, ref)) {
                fail(&r, name, "o[b %zu, head %zu, d %zu] = %g, reference %g", k / (HQ * D), k / D % HQ, k % D,
                     got, ref);
                bad = 1;
            }
            const double e = fabs(got - ref) / qt_tol_decode_o_bound(ref);
            if (e > worst) worst = e;
        }
        for (size_t k = 0; k < (size_t)B * HQ && !bad; ++k) {
            float got, ref;
            memcpy(&got, img[1][1] + GUARD + 4 * k, 4);
            memcpy(&ref, img[0][1] + GUARD + 4 * k, 4);
            if (isnan(got) || !qt_tol_decode_lse(got, ref)) {
                fail(&r, name, "lse[b %zu, head %zu] = %g, reference %g", k / HQ, k % HQ, (double)got, (double)ref);
                bad = 1;
            }
        }
        if (!bad)
            printf("ok   %s: %d requests over pages up to %" PRId64 " (K element %" PRIu64
                   "), worst error %.2f of the tolerance\n",
                   name, B, l->n_pages - 1, top, worst);
    }
out:
    for (int i = 0; i < 2; ++i) {
        for (int j = 0; j < 6; ++j) qattn_buffer_free(sd[i].ctx, tiny[i][j]);
        qattn_buffer_free(sd[i].ctx, ws[i]);
        free(img[i][0]);
        free(img[i][1]);
    }
}

/* ---- allocation: the largest size both sides hold ---------------------- */

static void free_side(side *s) {
    for (int i = 0; i < 2; ++i) {
        qattn_buffer_free(s->ctx, s->kv[i]);
        qattn_buffer_free(s->ctx, s->sc[i]);
        s->kv[i] = s->sc[i] = NULL;
    }
}

static qattn_status alloc_side(side *s, const layout *l, char *why, size_t n) {
    for (int i = 0; i < 2; ++i) {
        qattn_status st = QATTN_OK;
        if (l->kv_bytes[i]) st = qattn_buffer_alloc(s->ctx, l->kv_bytes[i], &s->kv[i]);
        if (st == QATTN_OK) st = qattn_buffer_alloc(s->ctx, l->sc_bytes, &s->sc[i]);
        if (st != QATTN_OK) {
            snprintf(why, n, "%s", qattn_last_error(s->ctx));
            free_side(s);
            return st;
        }
    }
    return QATTN_OK;
}

static int run_layout(side *sd, int headmajor, int size, int parts) {
    const char *lname = headmajor ? "headmajor" : "paged";
    char why[1024] = "";
    for (int large = size < 0 ? 1 : size; large >= (size < 0 ? 0 : size); --large) {
        const layout l = layout_of(headmajor, large);
        if (alloc_side(&sd[1], &l, why, sizeof why) != QATTN_OK) {
            printf("note %s/%s: the device did not allocate %" PRIu64 " bytes: %s\n", lname,
                   large ? "large" : "medium", l.kv_bytes[0], why);
            continue;
        }
        if (alloc_side(&sd[0], &l, why, sizeof why) != QATTN_OK) {
            printf("note %s/%s: the reference did not allocate %" PRIu64 " bytes: %s\n", lname,
                   large ? "large" : "medium", l.kv_bytes[0], why);
            free_side(&sd[1]);
            continue;
        }
        char tag[64];
        snprintf(tag, sizeof tag, "%s/%s", lname, large ? "large" : "medium");
        printf("case %s: %" PRId64 " slots, K spans %" PRIu64 " elements (2^31 = 2147483648, 2^32 = 4294967296)\n",
               tag, l.n_slots, kv_off(&l, 0, l.n_slots - 1, HKV - 1, D - 1) + 1);
        int64_t used[B * PAGES_PER_REQ];
        int n_used = 0;
        if (parts & 2) run_decode(sd, &l, used, &n_used, tag);
        if (parts & 1) run_store(sd, &l, used, n_used, tag);
        free_side(&sd[1]);
        free_side(&sd[0]);
        return 1;
    }
    printf("SKIP %s: no cache over 2^31 elements could be allocated (last reason: %s)\n", lname, why);
    return 0;
}

int main(int argc, char **argv) {
    const char *backend = NULL, *part = "all", *lay = "all", *size = NULL;
    int page = P, full = 0, requests = 0;
    for (int i = 1; i < argc; ++i) {
        const char *next = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(argv[i], "--backend") && next) backend = argv[++i];
        else if (!strcmp(argv[i], "--part") && next) part = argv[++i];
        else if (!strcmp(argv[i], "--layout") && next) lay = argv[++i];
        else if (!strcmp(argv[i], "--size") && next) size = argv[++i];
        else if (!strcmp(argv[i], "--page") && next) page = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--full")) full = 1;
        else if (!strcmp(argv[i], "--requests") && next) requests = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: qattn_big_cache --backend NAME [--part store|decode|all] "
                            "[--layout paged|headmajor|all] [--size large|medium]\n"
                            "       qattn_big_cache --backend NAME --layout combined [--page P] [--full [--requests N]]\n");
            return 2;
        }
    }
    if (!backend) return 2;
    const int parts = !strcmp(part, "store") ? 1 : !strcmp(part, "decode") ? 2 : 3;
    const int sz = !size ? -1 : !strcmp(size, "large");
    const qattn_backend_iface *iface = qattn_backend_by_name(backend);
    if (!iface) {
        printf("SKIP: backend %s is not built into this binary\n", backend);
        return SKIP;
    }
    side sd[2];
    memset(sd, 0, sizeof sd);
    char err[1024] = "";
    if (qattn_context_create(qattn_backend_cpu(), NULL, &sd[0].ctx, err, sizeof err) != QATTN_OK) {
        printf("FAIL: cpu reference context: %s\n", err);
        return 1;
    }
    qattn_status s = qattn_context_create(iface, NULL, &sd[1].ctx, err, sizeof err);
    if (s != QATTN_OK) {
        printf("SKIP: %s context: %s\n", backend, err);
        qattn_context_free(sd[0].ctx);
        return SKIP;
    }
    qattn_device_caps caps;
    qattn_get_caps(sd[1].ctx, &caps);
    printf("big_cache: %s on %s, seed 0x%016llx (set QATTN_TEST_SEED to change)\n", backend, caps.device_name,
           (unsigned long long)qt_base_seed());
    if (!strcmp(lay, "combined")) {
        const int rc = qt_big_combined_bf16(sd[0].ctx, sd[1].ctx, page, full, requests);
        qattn_context_free(sd[1].ctx);
        qattn_context_free(sd[0].ctx);
        printf("big_cache: %s\n", rc == 0 ? "passed" : rc == SKIP ? "skipped" : "failed");
        return rc;
    }
    int ran = 0;
    if (strcmp(lay, "headmajor")) ran += run_layout(sd, 0, sz, parts);
    if (strcmp(lay, "paged")) ran += run_layout(sd, 1, sz, parts);
    qattn_context_free(sd[1].ctx);
    qattn_context_free(sd[0].ctx);
    if (failures) {
        printf("big_cache: %d failures\n", failures);
        return 1;
    }
    if (!ran) return SKIP;
    printf("big_cache: passed\n");
    return 0;
}
