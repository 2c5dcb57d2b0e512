/*
 * Parity cases of the KV store (spec 2; spec 4: codes and scales
 * bit-identical to the reference).
 *
 * Layouts: token-major, head-major and padded rank-3 caches; rank-4 paged
 * caches [N_pages, P, Hkv, D] stored page-major head-major ([page, head, P,
 * d], FlashInfer's HND), and K and V interleaved in one allocation ([page,
 * K|V, P, head, d], scales likewise). The images hold guard slots (a guard
 * page) past the cache the descriptors describe, so a write at slot
 * N_slots is caught. "oob" cases give some tokens slots outside the cache
 * (N_slots, -2, INT32_MIN, 2^24, INT32_MAX, ...): every backend skips them;
 * "checked" cases run them with QATTN_CHECK_INDICES=1, where every backend
 * refuses the call and nothing may change.
 *
 * Caches start as random bytes (identical on both sides), so the check
 * covers the slots written, the slots skipped (-1 padding) and every byte
 * outside the written rows. Inputs mix ordinary values with rows that
 * stress the encoders: all-zero rows (scale 1), rows scaled to very small
 * and very large magnitudes (denormal scales, saturation), and values that
 * land on exact rounding ties after the division. New tokens come in bf16
 * or f16 (f16 rows reach f16's subnormals and its largest values), K and V
 * rows may differ in length (D, Dv), and caches may be fp8 e5m2.
 */
#define _POSIX_C_SOURCE 200809L /* setenv, unsetenv */
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parity_common.h"
#include "qattn/convert.h"
#include "tolerance.h"

enum { L_TOK, L_HEAD, L_PAD, L_HND, L_KV1 }; /* cache layouts */
enum { BAD_NONE, BAD_OOB, BAD_CHECKED };      /* out-of-range slots */

typedef struct store_case {
    int T, Hkv, D;
    qattn_dtype dt;
    int layout;
    int full;
    int bad;
    int Dv;          /* v rows; 0: D */
    qattn_dtype sdt; /* k_new/v_new; 0 (INVALID): bf16 */
} store_case;

#define E5 QATTN_FP8_E5M2
#define H16 QATTN_F16
static int case_dv(const store_case *c) { return c->Dv ? c->Dv : c->D; }
static qattn_dtype case_sdt(const store_case *c) { return c->sdt ? c->sdt : QATTN_BF16; }

static const store_case CASES[] = {
    {1, 1, 64, QATTN_BF16, L_TOK, 0, 0, 0, 0},           {7, 4, 128, QATTN_FP8_E4M3FN, L_TOK, 0, 0, 0, 0},
    {33, 8, 128, QATTN_FP8_E4M3FNUZ, L_HEAD, 0, 0, 0, 0}, {9, 2, 256, QATTN_I8, L_PAD, 0, 0, 0, 0},
    {16, 8, 64, QATTN_FP8_E4M3FN, L_PAD, 0, 0, 0, 0},    {5, 1, 256, QATTN_FP8_E4M3FNUZ, L_TOK, 0, 0, 0, 0},
    {12, 3, 128, QATTN_I8, L_HEAD, 0, 0, 0, 0},          {20, 2, 256, QATTN_BF16, L_PAD, 0, 0, 0, 0},
    {21, 4, 128, QATTN_FP8_E4M3FN, L_HND, 0, 0, 0, 0},   {13, 2, 64, QATTN_BF16, L_HND, 0, 0, 0, 0},
    {19, 8, 128, QATTN_I8, L_KV1, 0, 0, 0, 0},           {11, 2, 256, QATTN_FP8_E4M3FNUZ, L_KV1, 0, 0, 0, 0},
    /* slots outside the cache: skipped, or refused under the index mode */
    {12, 2, 128, QATTN_FP8_E4M3FN, L_TOK, 0, BAD_OOB, 0, 0}, {10, 3, 64, QATTN_BF16, L_HEAD, 0, BAD_OOB, 0, 0},
    {14, 2, 64, QATTN_I8, L_HND, 0, BAD_OOB, 0, 0},       {9, 4, 128, QATTN_FP8_E4M3FNUZ, L_KV1, 0, BAD_OOB, 0, 0},
    {8, 2, 128, QATTN_FP8_E4M3FN, L_PAD, 0, BAD_CHECKED, 0, 0}, {8, 2, 64, QATTN_BF16, L_KV1, 0, BAD_CHECKED, 0, 0},
    {64, 8, 256, QATTN_FP8_E4M3FN, L_HEAD, 1, 0, 0, 0},  {128, 4, 128, QATTN_I8, L_TOK, 1, 0, 0, 0},
    {96, 8, 64, QATTN_FP8_E4M3FNUZ, L_PAD, 1, 0, 0, 0},  {40, 8, 128, QATTN_BF16, L_HEAD, 1, 0, 0, 0},
    {70, 8, 128, QATTN_FP8_E4M3FN, L_HND, 1, 0, 0, 0},   {50, 4, 128, QATTN_I8, L_KV1, 1, 0, 0, 0},
    /* e5m2 caches, f16 tokens, other head dims, Dv != D (Dv, source dtype last) */
    {7, 4, 128, E5, L_TOK, 0, 0, 0, 0},            {21, 4, 128, E5, L_HND, 0, 0, 0, H16},
    {19, 8, 64, E5, L_KV1, 0, 0, 0, 0},            {12, 2, 128, E5, L_PAD, 0, BAD_OOB, 0, H16},
    {9, 2, 96, QATTN_FP8_E4M3FN, L_TOK, 0, 0, 0, H16}, {13, 2, 80, QATTN_BF16, L_HEAD, 0, 0, 0, H16},
    {11, 3, 256, QATTN_FP8_E4M3FNUZ, L_PAD, 0, 0, 0, H16}, {10, 2, 64, QATTN_I8, L_KV1, 0, 0, 0, H16},
    {8, 4, 192, QATTN_FP8_E4M3FN, L_HND, 0, 0, 128, 0}, {9, 2, 192, E5, L_TOK, 0, 0, 128, H16},
    {6, 2, 64, QATTN_I8, L_HEAD, 0, 0, 128, 0},    {7, 1, 16, QATTN_BF16, L_PAD, 0, 0, 48, H16},
    {8, 2, 112, QATTN_FP8_E4M3FNUZ, L_HND, 0, BAD_CHECKED, 240, 0},
    {96, 8, 128, E5, L_HEAD, 1, 0, 0, H16},        {64, 4, 80, QATTN_I8, L_PAD, 1, 0, 96, H16},
};

static void case_name(const store_case *c, char *buf, size_t n) {
    static const char *const L[] = {"tok", "head", "padded", "hnd", "kv1"};
    static const char *const B[] = {"", "_oob", "_checked"};
    char dv[16] = "";
    if (case_dv(c) != c->D) snprintf(dv, sizeof dv, "_Dv%d", case_dv(c));
    snprintf(buf, n, "kv_store/T%d_Hkv%d_D%d%s_%s_%s%s%s", c->T, c->Hkv, c->D, dv, qattn_dtype_name(c->dt),
             L[c->layout], B[c->bad], case_sdt(c) == QATTN_F16 ? "_f16" : "");
}

/* Rows per page of the rank-4 layouts. */
#define PAGE_HND 16
#define PAGE_KV1 8
/* Slots (rank 3) or pages (rank 4) in the images past the described cache. */
#define GUARD 3

typedef struct store_cache {
    pt_tensor kc, vc, ks, vs;  /* the descriptors' tensors (views for kv1) */
    pt_tensor own_c, own_s;    /* kv1: the one allocation of K and V, of their scales */
    int64_t n_slots;           /* slots the descriptors hold */
} store_cache;

/* The caches of case c with at least `want` slots. Returns 0 on OOM. */
static int make_cache(const store_case *c, int64_t want, store_cache *o) {
    memset(o, 0, sizeof *o);
    const int scaled = c->dt != QATTN_BF16;
    const int64_t H = c->Hkv, D = c->D, Dv = case_dv(c);
    if (c->layout == L_KV1 && Dv != D) return 0; /* one allocation of K and V rows of one length */
    if (c->layout == L_HND || c->layout == L_KV1) {
        const int64_t P = c->layout == L_HND ? PAGE_HND : PAGE_KV1;
        const int64_t np = (want + P - 1) / P;
        o->n_slots = np * P;
        if (c->layout == L_HND) { /* [page, head, P, d] in memory */
            const int64_t cs[4] = {np + GUARD, P, H, D}, vs[4] = {np + GUARD, P, H, Dv}, ss[3] = {np + GUARD, P, H};
            pt_layout l = pt_dense();
            l.order[1] = 2;
            l.order[2] = 1;
            if (!pt_make(&o->kc, c->dt, 4, cs, &l, PT_POISON) || !pt_make(&o->vc, c->dt, 4, vs, &l, PT_POISON))
                return 0;
            if (scaled && (!pt_make(&o->ks, QATTN_F32, 3, ss, NULL, PT_POISON) ||
                           !pt_make(&o->vs, QATTN_F32, 3, ss, NULL, PT_POISON)))
                return 0;
        } else { /* [page, K|V, P, head, d] and scales [page, K|V, P, head] */
            const int64_t os[4] = {np + GUARD, 2, P * H, D}, oss[4] = {np + GUARD, 2, P, H};
            if (!pt_make(&o->own_c, c->dt, 4, os, NULL, PT_POISON)) return 0;
            const int64_t cs[4] = {np + GUARD, P, H, D}, cst[4] = {2 * P * H * D, H * D, D, 1};
            const uint64_t es = qattn_dtype_size(c->dt);
            pt_view(&o->kc, &o->own_c, c->dt, 4, cs, cst, o->own_c.offset);
            pt_view(&o->vc, &o->own_c, c->dt, 4, cs, cst, o->own_c.offset + (uint64_t)(P * H * D) * es);
            if (scaled) {
                if (!pt_make(&o->own_s, QATTN_F32, 4, oss, NULL, PT_POISON)) return 0;
                const int64_t ss[3] = {np + GUARD, P, H}, sst[3] = {2 * P * H, H, 1};
                pt_view(&o->ks, &o->own_s, QATTN_F32, 3, ss, sst, o->own_s.offset);
                pt_view(&o->vs, &o->own_s, QATTN_F32, 3, ss, sst, o->own_s.offset + (uint64_t)(P * H) * 4u);
            }
        }
        o->kc.shape[0] = o->vc.shape[0] = np; /* the guard pages are outside */
        if (scaled) o->ks.shape[0] = o->vs.shape[0] = np;
        return 1;
    }
    o->n_slots = want;
    const int64_t cs[3] = {want + GUARD, H, D}, vs[3] = {want + GUARD, H, Dv}, ss[2] = {want + GUARD, H};
    pt_layout lc = pt_dense();
    if (c->layout == L_HEAD) {
        lc.order[0] = 1;
        lc.order[1] = 0;
    } else if (c->layout == L_PAD) {
        lc.pad = 5;
        lc.lead = 3;
    }
    if (!pt_make(&o->kc, c->dt, 3, cs, &lc, PT_POISON) || !pt_make(&o->vc, c->dt, 3, vs, &lc, PT_POISON))
        return 0;
    if (scaled && (!pt_make(&o->ks, QATTN_F32, 2, ss, c->layout == L_PAD ? &lc : NULL, PT_POISON) ||
                   !pt_make(&o->vs, QATTN_F32, 2, ss, c->layout == L_PAD ? &lc : NULL, PT_POISON)))
        return 0;
    o->kc.shape[0] = o->vc.shape[0] = want; /* the guard slots are outside */
    if (scaled) o->ks.shape[0] = o->vs.shape[0] = want;
    return 1;
}

/* x in the source dtype (bf16 or f16), rounded to nearest even. */
static uint16_t src_bits(float x, qattn_dtype sdt) {
    return sdt == QATTN_F16 ? qattn_f32_to_f16(x) : qattn_f32_to_bf16(x);
}

/* One (token, head) row of new values, in one of several regimes; f16 rows
 * take f16's extremes (its subnormals, values near 65504) for bf16's. */
static void fill_row(qt_rng *rng, uint16_t *row, int D, int kind, qattn_dtype sdt) {
    const int h = sdt == QATTN_F16;
    switch (kind) {
    case 0: /* all zero: the scale must be exactly 1 */
        for (int d = 0; d < D; ++d) row[d] = (d % 3 == 0) ? 0x8000u : 0x0000u; /* +-0 */
        break;
    case 1: { /* tiny magnitudes: scales go denormal */
        for (int d = 0; d < D; ++d) row[d] = src_bits(qt_signed(rng, 1.0f, 8.0f) * (h ? 1e-7f : 1e-38f), sdt);
        break;
    }
    case 2: /* huge magnitudes */
        for (int d = 0; d < D; ++d) row[d] = src_bits(qt_signed(rng, 0.05f, 1.0f) * (h ? 65000.0f : 3e37f), sdt);
        break;
    case 3: /* small integers times a power of two: many exact ties */
        for (int d = 0; d < D; ++d) {
            float v = (float)qt_int(rng, -64, 64) * 0.25f;
            row[d] = src_bits(v, sdt);
        }
        row[0] = src_bits(16.0f, sdt); /* amax a power of two */
        break;
    default: /* ordinary activations, one outlier */
        for (int d = 0; d < D; ++d) row[d] = src_bits(qt_signed(rng, 0.001f, 4.0f), sdt);
        row[qt_int(rng, 0, D - 1)] = src_bits(qt_signed(rng, 10.0f, 60.0f), sdt);
        break;
    }
}

static void run_case(parity_ctx *pc, const store_case *c) {
    char name[96];
    case_name(c, name, sizeof name);
    if (!pt_selected(pc, name)) return;
    qt_rng rng = qt_rng_for(name);
    pt_tensor kn, vn, slots;
    store_cache sc;
    const int64_t ns[3] = {c->T, c->Hkv, c->D}, nvs[3] = {c->T, c->Hkv, case_dv(c)}, ts[1] = {c->T};
    const qattn_dtype sdt = case_sdt(c);
    pt_layout lnew = pt_dense();
    if (c->layout == L_PAD) {
        lnew.pad = 3;
        lnew.lead = 1;
    }
    int ok = pt_make(&kn, sdt, 3, ns, &lnew, PT_POISON) && pt_make(&vn, sdt, 3, nvs, &lnew, PT_POISON) &&
             pt_make(&slots, QATTN_I32, 1, ts, NULL, PT_POISON) && make_cache(c, 2 * c->T + 5, &sc);
    if (!ok) {
        pt_fail(pc, &rng, name, "out of host memory");
        return;
    }
    const int64_t n_slots = sc.n_slots;
    /* The buffers compared (an allocation once, whatever views it holds). */
    pt_tensor *bufs[4];
    int nbufs = 0;
    if (c->layout == L_KV1) {
        bufs[nbufs++] = &sc.own_c;
        if (sc.own_s.host) bufs[nbufs++] = &sc.own_s;
    } else {
        pt_tensor *t4[4] = {&sc.kc, &sc.vc, &sc.ks, &sc.vs};
        for (int i = 0; i < 4; ++i)
            if (t4[i]->host) bufs[nbufs++] = t4[i];
    }
    /* Random bytes everywhere in the caches (same on both sides). */
    for (int i = 0; i < nbufs; ++i)
        for (size_t b = 0; b < bufs[i]->bytes; ++b) bufs[i]->host[b] = (uint8_t)qt_u32(&rng);
    uint16_t *row = malloc((size_t)(c->D > case_dv(c) ? c->D : case_dv(c)) * 2);
    for (int t = 0; row && t < c->T; ++t)
        for (int h = 0; h < c->Hkv; ++h) {
            pt_tensor *src[2] = {&kn, &vn};
            for (int w = 0; w < 2; ++w) {
                const int len = w ? case_dv(c) : c->D;
                int kind = (int)qt_int(&rng, 0, 9); /* 0..3 special, else ordinary */
                fill_row(&rng, row, len, kind, sdt);
                for (int d = 0; d < len; ++d) memcpy(pt_at(src[w], t, h, d, 0), &row[d], 2);
            }
        }
    free(row);
    /* Distinct slots, some tokens padding (-1); in the oob cases some
     * outside the cache. */
    const int64_t bad[6] = {n_slots, n_slots + 3, -2, INT32_MIN, (int64_t)1 << 24, INT32_MAX};
    for (int t = 0; t < c->T; ++t) {
        int64_t s = (t % 5 == 3) ? -1 : 2 * t + qt_int(&rng, 0, 1);
        if (c->bad && t % 3 == 1) s = bad[(t / 3 + c->T) % 6]; /* the oob cases cover all six */
        int32_t s32 = (int32_t)s;
        memcpy(pt_at(&slots, t, 0, 0, 0), &s32, 4);
    }
    pt_tensor *ups[7] = {&kn, &vn, &slots, &sc.kc, &sc.vc, &sc.ks, &sc.vs};
    pt_tensor *owners[2] = {&sc.own_c, &sc.own_s};
    qattn_status s = QATTN_OK;
    for (int i = 0; i < 2 && s == QATTN_OK; ++i)
        if (owners[i]->host) s = pt_upload(pc, owners[i]);
    for (int i = 0; i < 7 && s == QATTN_OK; ++i)
        if (ups[i]->host) s = pt_upload(pc, ups[i]);
    const int checked = c->bad == BAD_CHECKED;
    const qattn_status want = checked ? QATTN_ERR_INDEX_OUT_OF_RANGE : QATTN_OK;
    for (int w = 0; w < 2 && s == QATTN_OK; ++w) {
        qattn_kv_store_args a;
        memset(&a, 0, sizeof a);
        a.k_new = pt_desc(&kn, w);
        a.v_new = pt_desc(&vn, w);
        a.slot_mapping = pt_desc(&slots, w);
        a.k_cache = pt_desc(&sc.kc, w);
        a.v_cache = pt_desc(&sc.vc, w);
        a.k_scale = pt_desc(&sc.ks, w);
        a.v_scale = pt_desc(&sc.vs, w);
        qattn_context *ctx = w ? pc->dev : pc->ref;
        if (checked) setenv("QATTN_CHECK_INDICES", "1", 1);
        qattn_status r = qattn_kv_store(ctx, &a);
        if (checked) unsetenv("QATTN_CHECK_INDICES");
        if (r == QATTN_OK) r = qattn_synchronize(ctx);
        if (r != want) {
            pt_fail(pc, &rng, name, "%s: %s (expected %s): %s", w ? pc->backend : "reference",
                    qattn_status_name(r), qattn_status_name(want), qattn_last_error(ctx));
            s = r == QATTN_OK ? QATTN_ERR_INVALID_ARGUMENT : r;
        }
    }
    if (s == QATTN_OK) {
        int bad_at = 0;
        for (int i = 0; i < nbufs && !bad_at; ++i) {
            pt_tensor *T = bufs[i];
            uint8_t *ri = malloc(T->bytes), *di = malloc(T->bytes);
            if (!ri || !di || pt_download(pc, T, 0, ri) != QATTN_OK || pt_download(pc, T, 1, di) != QATTN_OK) {
                pt_fail(pc, &rng, name, "download failed");
                bad_at = 1;
            } else {
                /* the reference's bytes, or (refused) the bytes uploaded */
                ptrdiff_t at = qt_tol_kv_store_bytes(di, checked ? T->host : ri, T->bytes);
                if (at < 0 && checked) at = qt_tol_kv_store_bytes(ri, T->host, T->bytes);
                if (at >= 0) {
                    pt_fail(pc, &rng, name, "buffer %d byte %td: got 0x%02x, reference 0x%02x, before 0x%02x%s",
                            i, at, di[at], ri[at], T->host[at], checked ? " (refused call wrote)" : "");
                    bad_at = 1;
                }
            }
            free(ri);
            free(di);
        }
        if (!bad_at) pt_pass(pc, name, "");
    }
    pt_tensor *all[9] = {&kn, &vn, &slots, &sc.kc, &sc.vc, &sc.ks, &sc.vs, &sc.own_c, &sc.own_s};
    for (int i = 0; i < 9; ++i)
        if (all[i]->host) pt_free(pc, all[i]);
}

static void run_kv_store(parity_ctx *pc) {
    if (pc->shape) return; /* --shape describes a decode case */
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; ++i)
        if (!CASES[i].full || pc->full) run_case(pc, &CASES[i]);
}

const parity_op parity_op_kv_store = {"kv_store", run_kv_store};
