/*
 * Parity cases of decode attention (spec 2, tolerances spec 4).
 *
 * The default table covers every value of every dimension of the issue's
 * matrix at least once, in pairwise-style combinations (keys {1, 17, 513,
 * 4099}, GQA {1, 4, 8}, D {64, 128, 256}, the four kv dtypes, R {1, 3, 8},
 * page size {1, 16}, window none/odd, softcap and sinks on/off, token-major,
 * head-major, padded (still 16-byte aligned) and unaligned layouts, forced
 * splits {1, 8, 64} or the planner's, batch {1, 5}), and what engines pass
 * in besides: fp8 e5m2 caches, f16 q and o (each on its own), head dims
 * 16 to 240 other than the three and Dv != D both ways; --full adds a sweep of
 * the cartesian product of the main dimensions. Layouts whose rows are only
 * 1-, 4- or 8-byte aligned reach every load width of the tiled kernel, and
 * GQA 16 / 16 rows per kv head its widest row blocks.
 *
 * Cache forms engines use, without a copy (spec 2): rank-4 paged caches
 * [N_pages, P, Hkv, D] stored page-major head-major ([page, head, P, d],
 * FlashInfer's HND), dense ([page, P, head, d]), and K and V interleaved in
 * one allocation ([page, K|V, P, head, d], their scales likewise); scales
 * per token (head stride 0) and per tensor (every stride 0). For the rank-4
 * forms the reference's result must also equal, bit for bit, its result on
 * a rank-3 copy of the same cache: the addressing is checked independently
 * of the view every backend shares.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parity_common.h"
#include "qattn/convert.h"
#include "tolerance.h"

enum { TOK, HEAD, PAD, UNAL, AL4, AL8 }; /* cache/q/o layouts */
static const char *const LAYOUT_NAMES[] = {"tok", "head", "pad", "unal", "al4", "al8"};

typedef struct decode_case {
    int B, R, Hkv, G, D;
    qattn_dtype dt;
    int page, keys, window;
    int softcap, sinks, lse;
    int layout, splits;
    int same_lens; /* every request has `keys` keys (ad-hoc --shape cases) */
    int form;      /* F3 (rank 3, the layouts above), F_HND, F_NHD4, F_KV1 */
    int scales;    /* S_ROW per (token, head), S_TOKEN per token, S_TENSOR one */
    int Dv;        /* V's and o's head dim; 0: D */
    qattn_dtype qdt, odt; /* q's and o's dtypes; 0 (INVALID): bf16 */
} decode_case;

static int case_dv(const decode_case *c) { return c->Dv ? c->Dv : c->D; }
static qattn_dtype case_qdt(const decode_case *c) { return c->qdt ? c->qdt : QATTN_BF16; }
static qattn_dtype case_odt(const decode_case *c) { return c->odt ? c->odt : QATTN_BF16; }

/* A half-precision element of q or o from an f32, and back. */
static uint16_t half_bits(float x, qattn_dtype dt) {
    return dt == QATTN_F16 ? qattn_f32_to_f16(x) : qattn_f32_to_bf16(x);
}
static float half_value(uint16_t b, qattn_dtype dt) {
    return dt == QATTN_F16 ? qattn_f16_to_f32(b) : qattn_bf16_to_f32(b);
}

enum { F3, F_HND, F_NHD4, F_KV1 };           /* cache forms */
enum { S_ROW, S_TOKEN, S_TENSOR };           /* scale granularity */
static const char *const FORM_NAMES[] = {"", "_hnd", "_nhd4", "_kv1"};
static const char *const SCALE_NAMES[] = {"", "_tokscale", "_tensorscale"};

#define FN QATTN_FP8_E4M3FN
#define FNUZ QATTN_FP8_E4M3FNUZ
#define BF QATTN_BF16
#define I8 QATTN_I8
#define E5 QATTN_FP8_E5M2
#define H16 QATTN_F16

/* B R Hkv G D dtype page keys window softcap sinks lse layout splits same_lens form scales */
static const decode_case CASES[] = {
    {1, 1, 8, 4, 128, FN, 16, 513, -1, 0, 0, 1, TOK, 0, 0, F3, S_ROW, 0, 0, 0},   /* GQA 4: 16x8x16 matrix */
    {1, 1, 4, 8, 128, FNUZ, 1, 4099, -1, 0, 1, 1, TOK, 0, 0, F3, S_ROW, 0, 0, 0},   /* GQA 8, long, 1-slot pages */
    {5, 1, 4, 4, 128, FN, 16, 513, -1, 0, 0, 1, PAD, 8, 0, F3, S_ROW, 0, 0, 0},   /* padded strides */
    {1, 1, 8, 4, 128, FN, 16, 513, -1, 0, 0, 1, UNAL, 0, 0, F3, S_ROW, 0, 0, 0},   /* unaligned: 1-byte loads */
    {1, 1, 4, 1, 64, BF, 1, 17, -1, 0, 0, 1, TOK, 1, 0, F3, S_ROW, 0, 0, 0},
    {5, 3, 2, 4, 64, I8, 16, 513, 37, 1, 1, 1, HEAD, 0, 0, F3, S_ROW, 0, 0, 0},
    {1, 8, 1, 8, 128, BF, 16, 4099, 101, 0, 1, 1, TOK, 64, 0, F3, S_ROW, 0, 0, 0},
    {1, 8, 2, 1, 256, FN, 1, 17, -1, 1, 0, 1, HEAD, 8, 0, F3, S_ROW, 0, 0, 0},
    {5, 1, 1, 4, 256, FNUZ, 16, 1, -1, 0, 1, 0, TOK, 64, 0, F3, S_ROW, 0, 0, 0},
    {1, 3, 2, 8, 256, I8, 1, 513, -1, 1, 1, 1, PAD, 1, 0, F3, S_ROW, 0, 0, 0},
    {5, 8, 1, 4, 64, FN, 16, 17, 5, 0, 0, 1, UNAL, 8, 0, F3, S_ROW, 0, 0, 0},
    {1, 1, 2, 1, 128, I8, 16, 4099, 511, 1, 0, 1, HEAD, 0, 0, F3, S_ROW, 0, 0, 0},
    {5, 3, 1, 1, 128, FNUZ, 1, 513, -1, 0, 0, 0, UNAL, 64, 0, F3, S_ROW, 0, 0, 0},
    {1, 1, 1, 8, 64, BF, 16, 513, -1, 1, 1, 1, PAD, 8, 0, F3, S_ROW, 0, 0, 0},
    {1, 3, 4, 4, 256, BF, 16, 17, 3, 0, 1, 1, TOK, 0, 0, F3, S_ROW, 0, 0, 0},
    {5, 1, 2, 8, 128, I8, 1, 17, -1, 0, 1, 1, TOK, 1, 0, F3, S_ROW, 0, 0, 0},
    {1, 8, 1, 4, 128, FNUZ, 16, 513, -1, 1, 1, 1, HEAD, 0, 0, F3, S_ROW, 0, 0, 0},
    {1, 1, 1, 1, 256, FN, 16, 4099, -1, 0, 0, 1, UNAL, 8, 0, F3, S_ROW, 0, 0, 0},
    {5, 3, 2, 8, 64, FN, 1, 4099, 63, 0, 0, 1, PAD, 64, 0, F3, S_ROW, 0, 0, 0},
    {1, 1, 1, 4, 64, FNUZ, 1, 1, -1, 1, 1, 1, HEAD, 1, 0, F3, S_ROW, 0, 0, 0},
    {5, 8, 2, 1, 64, I8, 16, 1, -1, 0, 1, 1, TOK, 0, 0, F3, S_ROW, 0, 0, 0},
    {1, 1, 4, 4, 128, FNUZ, 16, 4099, 1023, 1, 1, 1, PAD, 0, 0, F3, S_ROW, 0, 0, 0},   /* window/softcap/sinks */
    {5, 1, 4, 8, 128, FN, 16, 513, -1, 0, 0, 1, HEAD, 0, 0, F3, S_ROW, 0, 0, 0},   /* head-major */
    {1, 1, 2, 4, 128, FN, 16, 513, -1, 0, 0, 1, TOK, 0, 0, F3, S_ROW, 0, 0, 0},   /* Hkv 2: scale rows 8 B */
    {1, 3, 1, 1, 256, BF, 1, 4099, -1, 0, 0, 0, UNAL, 0, 0, F3, S_ROW, 0, 0, 0},
    {1, 2, 2, 8, 128, FN, 16, 513, -1, 0, 0, 1, AL8, 0, 0, F3, S_ROW, 0, 0, 0},   /* 16 rows: 16x16x16, 8-byte loads */
    {5, 1, 2, 16, 64, I8, 1, 513, 37, 1, 1, 1, AL4, 0, 0, F3, S_ROW, 0, 0, 0},   /* GQA 16: two head blocks, 4-byte loads */
    {1, 8, 1, 2, 256, BF, 16, 4099, -1, 0, 1, 1, AL4, 8, 0, F3, S_ROW, 0, 0, 0},   /* bf16, 16 rows, 4-byte loads */
    {1, 1, 4, 2, 128, FNUZ, 16, 4099, 255, 1, 0, 1, TOK, 0, 0, F3, S_ROW, 0, 0, 0},   /* GQA 2: two rows per kv head */
    /* cache forms and broadcast scales (form, scales last) */
    {5, 1, 4, 4, 128, FN, 16, 513, -1, 0, 0, 1, TOK, 0, 0, F_HND, S_ROW, 0, 0, 0},   /* HND */
    {1, 3, 2, 4, 64, BF, 16, 200, 37, 1, 1, 1, TOK, 0, 0, F_HND, S_ROW, 0, 0, 0},
    {5, 1, 2, 8, 128, I8, 8, 513, -1, 0, 1, 1, TOK, 8, 0, F_KV1, S_ROW, 0, 0, 0},    /* interleaved K/V */
    {1, 8, 1, 4, 256, FNUZ, 16, 1000, -1, 1, 0, 1, TOK, 0, 0, F_KV1, S_TENSOR, 0, 0, 0},
    {5, 1, 4, 1, 64, FN, 1, 300, -1, 0, 0, 1, TOK, 0, 0, F_NHD4, S_TOKEN, 0, 0, 0},  /* P = 1 as rank 4 */
    {5, 1, 4, 4, 128, FN, 16, 513, -1, 0, 0, 1, TOK, 0, 0, F3, S_TOKEN, 0, 0, 0},    /* per-token scale */
    {1, 3, 2, 4, 128, I8, 1, 513, 63, 0, 1, 1, HEAD, 1, 0, F3, S_TENSOR, 0, 0, 0},   /* per-tensor scale */
    {5, 1, 4, 4, 128, FNUZ, 16, 513, -1, 0, 0, 1, TOK, 64, 0, F_HND, S_TENSOR, 0, 0, 0},
    /* What engines pass in (Dv, q dtype, o dtype last): e5m2 caches, f16 q
     * and o, head dims other than 64/128/256 and Dv != D. */
    {1, 1, 8, 4, 128, E5, 16, 513, -1, 0, 0, 1, TOK, 0, 0, F3, S_ROW, 0, 0, 0},              /* e5m2, GQA 4 */
    {5, 3, 2, 8, 64, E5, 1, 4099, 63, 1, 1, 1, PAD, 8, 0, F3, S_ROW, 0, 0, 0},
    {1, 8, 1, 4, 256, E5, 16, 1000, -1, 0, 1, 1, TOK, 0, 0, F_KV1, S_TENSOR, 0, 0, 0},
    {5, 1, 4, 4, 128, E5, 16, 513, -1, 0, 0, 1, UNAL, 0, 0, F_HND, S_TOKEN, 0, 0, 0},
    {1, 1, 8, 4, 128, FN, 16, 513, -1, 0, 0, 1, TOK, 0, 0, F3, S_ROW, 0, H16, H16}, /* f16 q and o */
    {5, 3, 2, 4, 64, I8, 16, 513, 37, 1, 1, 1, HEAD, 0, 0, F3, S_ROW, 0, H16, 0},   /* f16 q, bf16 o */
    {1, 8, 1, 8, 128, BF, 16, 4099, 101, 0, 1, 1, TOK, 64, 0, F3, S_ROW, 0, 0, H16}, /* bf16 q, f16 o */
    {5, 1, 2, 4, 128, E5, 1, 513, -1, 0, 1, 1, PAD, 0, 0, F3, S_ROW, 0, H16, H16},
    {1, 1, 8, 4, 96, FN, 16, 513, -1, 0, 0, 1, TOK, 0, 0, F3, S_ROW, 0, 0, 0},               /* D 96 */
    {5, 3, 2, 8, 96, BF, 1, 513, 37, 1, 1, 1, PAD, 8, 0, F3, S_ROW, 0, H16, H16},
    {1, 1, 4, 4, 80, I8, 16, 4099, -1, 0, 1, 1, HEAD, 0, 0, F3, S_ROW, 0, 0, 0},             /* D 80 */
    {5, 8, 1, 2, 80, E5, 16, 200, -1, 1, 0, 1, TOK, 0, 0, F_HND, S_ROW, 0, 0, 0},
    {1, 3, 2, 4, 192, FNUZ, 16, 513, -1, 0, 1, 1, UNAL, 8, 0, F3, S_ROW, 0, 0, 0},           /* D 192 */
    {1, 1, 4, 4, 192, FN, 16, 513, -1, 0, 1, 1, TOK, 0, 0, F3, S_ROW, 128, 0, 0},         /* 192 / 128 */
    {5, 1, 2, 8, 192, BF, 16, 513, -1, 1, 0, 1, TOK, 0, 0, F_NHD4, S_ROW, 128, H16, H16},
    {1, 3, 2, 4, 128, I8, 1, 513, 63, 0, 1, 1, PAD, 8, 0, F3, S_ROW, 64, 0, 0},           /* 128 / 64 */
    {5, 1, 4, 4, 64, E5, 16, 4099, -1, 0, 0, 1, TOK, 0, 0, F3, S_TOKEN, 128, 0, H16}, /* 64 / 128 */
    {1, 1, 4, 4, 16, FN, 16, 513, -1, 0, 0, 1, TOK, 0, 0, F3, S_ROW, 48, 0, 0},           /* the smallest: 16 / 48 */
    {5, 3, 1, 4, 48, BF, 1, 513, -1, 0, 1, 1, AL4, 0, 0, F3, S_ROW, 16, 0, 0},
    {1, 1, 2, 8, 112, FNUZ, 16, 513, -1, 1, 1, 1, AL8, 1, 0, F3, S_ROW, 240, 0, 0},
    {5, 3, 2, 4, 64, E5, 1, 513, -1, 0, 0, 1, UNAL, 0, 0, F3, S_ROW, 192, H16, 0},     /* Dv > D, key-wise rows */
    {1, 2, 2, 4, 80, BF, 8, 1000, -1, 1, 1, 1, HEAD, 0, 0, F3, S_ROW, 208, 0, H16},
};

static void case_name(const decode_case *c, char *buf, size_t n) {
    char win[16];
    if (c->window < 0) snprintf(win, sizeof win, "none");
    else snprintf(win, sizeof win, "%d", c->window);
    char dv[16] = "";
    if (case_dv(c) != c->D) snprintf(dv, sizeof dv, "_Dv%d", case_dv(c));
    snprintf(buf, n, "decode/B%d_R%d_Hkv%d_G%d_D%d%s_%s_P%d_L%d_win%s_cap%d_sink%d_lse%d_%s_s%d%s%s%s%s", c->B,
             c->R, c->Hkv, c->G, c->D, dv, qattn_dtype_name(c->dt), c->page, c->keys, win, c->softcap,
             c->sinks, c->lse, LAYOUT_NAMES[c->layout], c->splits, FORM_NAMES[c->form],
             SCALE_NAMES[c->scales], case_qdt(c) == QATTN_F16 ? "_qf16" : "",
             case_odt(c) == QATTN_F16 ? "_of16" : "");
}

/* Layout of a cache [N, H, D] (order = memory order of dims). */
static pt_layout cache_layout(int layout, qattn_dtype dt, qt_rng *rng) {
    pt_layout l = pt_dense();
    const int64_t es = (int64_t)qattn_dtype_size(dt);
    switch (layout) {
    case HEAD: /* [H, N, D] in memory */
        l.order[0] = 1;
        l.order[1] = 0;
        l.order[2] = 2;
        break;
    case PAD: /* rows padded by a multiple of 16 bytes, base 16-byte aligned */
        l.pad = 16 / es * qt_int(rng, 1, 3);
        l.lead = 32 / es;
        break;
    case UNAL: /* odd padding and an odd leading offset: nothing 16-byte aligned */
        l.pad = 2 * qt_int(rng, 0, 3) + 1;
        l.lead = 2 * qt_int(rng, 0, 3) + 1;
        break;
    case AL4: /* rows and base 4-byte aligned, not 8 */
    case AL8: /* rows and base 8-byte aligned, not 16 */
        l.pad = (layout == AL4 ? 4 : 8) / es;
        l.lead = l.pad;
        break;
    default: break;
    }
    return l;
}

/* Layout of q / o [B, R, Hq, D], and of lse [B, R, Hq]. */
static pt_layout act_layout(int layout, int rank, qt_rng *rng) {
    pt_layout l = pt_dense();
    if (layout == HEAD && rank == 4) { /* [B, Hq, R, D] in memory */
        l.order[0] = 0;
        l.order[1] = 2;
        l.order[2] = 1;
        l.order[3] = 3;
    } else if (layout == PAD || layout == UNAL) {
        l.pad = qt_int(rng, 1, 5);
        l.lead = qt_int(rng, 1, 7);
    }
    return l;
}

typedef struct decode_data {
    pt_tensor q, k, v, ks, vs, indptr, indices, lens, sinks, o, lse;
    /* owners of the views k, v (interleaved) and ks, vs (interleaved or
     * broadcast); absent otherwise */
    pt_tensor own_kv, own_ks, own_vs;
    int max_len;
} decode_data;

static void data_free(parity_ctx *pc, decode_data *d) {
    pt_tensor *all[] = {&d->q, &d->k, &d->v, &d->ks, &d->vs, &d->indptr, &d->indices,
                        &d->lens, &d->sinks, &d->o, &d->lse, &d->own_kv, &d->own_ks, &d->own_vs};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) pt_free(pc, all[i]);
}

static void fill_cache(pt_tensor *t, qt_rng *rng) {
    for (int64_t n = 0; n < pt_count(t); ++n) {
        void *p = pt_at_linear(t, n);
        switch (t->dtype) {
        case QATTN_BF16: {
            uint16_t b = qattn_f32_to_bf16(qt_signed(rng, 0.05f, 2.0f));
            memcpy(p, &b, 2);
            break;
        }
        case QATTN_I8: qt_fill_i8(rng, (int8_t *)p, 1); break;
        default: qt_fill_fp8_codes(rng, (uint8_t *)p, 1, t->dtype); break;
        }
    }
}

/* Scales put decoded values around 0.05..3 whatever the format. */
static void fill_scales(pt_tensor *t, qattn_dtype dt, qt_rng *rng) {
    const float fmax = dt == QATTN_I8 ? 127.0f : qattn_fp8_max(dt);
    for (int64_t n = 0; n < pt_count(t); ++n) {
        float a = qt_uniform(rng, 0.3f, 3.0f) / fmax;
        memcpy(pt_at_linear(t, n), &a, 4);
    }
}

/* A per-(token, head) scale tensor of the case's form, unfilled. */
static int make_scale_image(const decode_case *c, int64_t n_pages, pt_tensor *t) {
    if (c->form != F3) {
        const int64_t sh[3] = {n_pages, c->page, c->Hkv};
        return pt_make(t, QATTN_F32, 3, sh, NULL, PT_POISON);
    }
    /* Scales keep heads contiguous (the contract's last dimension);
     * unaligned layouts offset and pad them. */
    const int64_t sh[2] = {n_pages * c->page, c->Hkv};
    pt_layout ls = pt_dense();
    if (c->layout == UNAL) {
        ls.lead = 1;
        ls.pad = 1;
    }
    return pt_make(t, QATTN_F32, 2, sh, &ls, PT_POISON);
}

/* Scales of one cache in the case's form and granularity: [N_slots, Hkv]
 * (rank-3 caches) or [N_pages, P, Hkv] (rank 4); per token or per tensor
 * as a view with stride 0 of a smaller allocation `own`. */
static int make_scale(const decode_case *c, int64_t n_pages, qt_rng *rng, pt_tensor *t, pt_tensor *own) {
    const int64_t P = c->page, H = c->Hkv, n_slots = n_pages * P;
    const int paged = c->form != F3;
    if (c->scales != S_ROW) {
        const int64_t n1[1] = {c->scales == S_TOKEN ? n_slots : 1};
        if (!pt_make(own, QATTN_F32, 1, n1, NULL, PT_POISON)) return 0;
        fill_scales(own, c->dt, rng);
        const int tok = c->scales == S_TOKEN;
        if (paged) {
            const int64_t sh[3] = {n_pages, P, H}, st[3] = {tok ? P : 0, tok ? 1 : 0, 0};
            pt_view(t, own, QATTN_F32, 3, sh, st, own->offset);
        } else {
            const int64_t sh[2] = {n_slots, H}, st[2] = {tok ? 1 : 0, 0};
            pt_view(t, own, QATTN_F32, 2, sh, st, own->offset);
        }
        return 1;
    }
    if (!make_scale_image(c, n_pages, t)) return 0;
    fill_scales(t, c->dt, rng);
    return 1;
}

/* K, V and their scales in the case's form. */
static int make_cache(const decode_case *c, int64_t n_pages, qt_rng *rng, decode_data *d) {
    const int64_t P = c->page, H = c->Hkv, D = c->D, Dv = case_dv(c), n_slots = n_pages * P;
    const uint64_t es = qattn_dtype_size(c->dt);
    if (c->form == F3) {
        const int64_t cs[3] = {n_slots, H, D}, vs[3] = {n_slots, H, Dv};
        pt_layout lk = cache_layout(c->layout, c->dt, rng), lv = cache_layout(c->layout, c->dt, rng);
        if (!pt_make(&d->k, c->dt, 3, cs, &lk, PT_POISON) || !pt_make(&d->v, c->dt, 3, vs, &lv, PT_POISON))
            return 0;
    } else if (c->form == F_HND || c->form == F_NHD4) {
        const int64_t cs[4] = {n_pages, P, H, D}, vs[4] = {n_pages, P, H, Dv};
        pt_layout l = pt_dense();
        if (c->form == F_HND) { /* [page, head, P, d] in memory */
            l.order[1] = 2;
            l.order[2] = 1;
        }
        if (!pt_make(&d->k, c->dt, 4, cs, &l, PT_POISON) || !pt_make(&d->v, c->dt, 4, vs, &l, PT_POISON))
            return 0;
    } else if (Dv != D) { /* the interleaved form holds K and V rows of one length */
        return 0;
    } else { /* [page, K|V, P, head, d]: K of a page, then its V */
        const int64_t os[4] = {n_pages, 2, P * H, D};
        if (!pt_make(&d->own_kv, c->dt, 4, os, NULL, PT_POISON)) return 0;
        const int64_t cs[4] = {n_pages, P, H, D}, st[4] = {2 * P * H * D, H * D, D, 1};
        pt_view(&d->k, &d->own_kv, c->dt, 4, cs, st, d->own_kv.offset);
        pt_view(&d->v, &d->own_kv, c->dt, 4, cs, st, d->own_kv.offset + (uint64_t)(P * H * D) * es);
    }
    fill_cache(&d->k, rng);
    fill_cache(&d->v, rng);
    if (c->dt == QATTN_BF16) return 1;
    if (c->form == F3 && c->scales == S_ROW) { /* k and v scales drawn in turn */
        if (!make_scale_image(c, n_pages, &d->ks) || !make_scale_image(c, n_pages, &d->vs)) return 0;
        const float fmax = c->dt == QATTN_I8 ? 127.0f : qattn_fp8_max(c->dt);
        for (int64_t n = 0; n < pt_count(&d->ks); ++n) {
            float a = qt_uniform(rng, 0.3f, 3.0f) / fmax, b = qt_uniform(rng, 0.3f, 3.0f) / fmax;
            memcpy(pt_at_linear(&d->ks, n), &a, 4);
            memcpy(pt_at_linear(&d->vs, n), &b, 4);
        }
        return 1;
    }
    if (c->form == F_KV1 && c->scales == S_ROW) { /* [page, K|V, P, head] */
        const int64_t os[3] = {n_pages, 2, P * H};
        if (!pt_make(&d->own_ks, QATTN_F32, 3, os, NULL, PT_POISON)) return 0;
        const int64_t sh[3] = {n_pages, P, H}, st[3] = {2 * P * H, H, 1};
        pt_view(&d->ks, &d->own_ks, QATTN_F32, 3, sh, st, d->own_ks.offset);
        pt_view(&d->vs, &d->own_ks, QATTN_F32, 3, sh, st, d->own_ks.offset + (uint64_t)(P * H) * 4u);
        fill_scales(&d->ks, c->dt, rng);
        fill_scales(&d->vs, c->dt, rng);
        return 1;
    }
    return make_scale(c, n_pages, rng, &d->ks, &d->own_ks) && make_scale(c, n_pages, rng, &d->vs, &d->own_vs);
}

/* Builds every input on the host: random requests over a shuffled page pool,
 * caches with a few extra pages nobody references. Returns 0 on OOM. */
static int make_inputs(const decode_case *c, qt_rng *rng, decode_data *d) {
    memset(d, 0, sizeof *d);
    const int Hq = c->Hkv * c->G;
    int lens[64];
    int64_t pages_total = 0;
    for (int b = 0; b < c->B; ++b) {
        if (b == 0 || c->same_lens) lens[b] = c->keys;
        else if (b == 3) lens[b] = (int)qt_int(rng, 0, c->R - 1 < c->keys ? c->R - 1 : c->keys); /* rows with nothing visible */
        else lens[b] = (int)qt_int(rng, 0, c->keys);
        pages_total += (lens[b] + c->page - 1) / c->page;
    }
    d->max_len = c->keys;
    const int64_t n_pages = pages_total + 3;

    const int64_t qs[4] = {c->B, c->R, Hq, c->D}, os[4] = {c->B, c->R, Hq, case_dv(c)};
    pt_layout la = act_layout(c->layout, 4, rng);
    if (!pt_make(&d->q, case_qdt(c), 4, qs, &la, PT_POISON)) return 0;
    const float amp = (float)qt_uniform(rng, 0.5f, 2.0f); /* how peaked the softmax gets */
    for (int64_t n = 0; n < pt_count(&d->q); ++n) {
        uint16_t b = half_bits(amp * qt_signed(rng, 0.05f, 1.0f), case_qdt(c));
        memcpy(pt_at_linear(&d->q, n), &b, 2);
    }
    if (!make_cache(c, n_pages, rng, d)) return 0;
    /* Paging: a shuffled pool of page ids, handed out to requests in order. */
    const int64_t one[1] = {c->B + 1}, nb[1] = {c->B}, np[1] = {pages_total > 0 ? pages_total : 1};
    if (!pt_make(&d->indptr, QATTN_I32, 1, one, NULL, PT_POISON) ||
        !pt_make(&d->lens, QATTN_I32, 1, nb, NULL, PT_POISON) ||
        !pt_make(&d->indices, QATTN_I32, 1, np, NULL, PT_POISON))
        return 0;
    int32_t *pool = malloc((size_t)n_pages * sizeof *pool);
    if (!pool) return 0;
    for (int64_t i = 0; i < n_pages; ++i) pool[i] = (int32_t)i;
    for (int64_t i = n_pages - 1; i > 0; --i) {
        int64_t j = qt_int(rng, 0, i);
        int32_t t = pool[i];
        pool[i] = pool[j];
        pool[j] = t;
    }
    int32_t at = 0;
    for (int b = 0; b < c->B; ++b) {
        memcpy(pt_at(&d->indptr, b, 0, 0, 0), &at, 4);
        memcpy(pt_at(&d->lens, b, 0, 0, 0), &lens[b], 4);
        int32_t np_b = (lens[b] + c->page - 1) / c->page;
        for (int32_t j = 0; j < np_b; ++j) memcpy(pt_at(&d->indices, at + j, 0, 0, 0), &pool[at + j], 4);
        at += np_b;
    }
    memcpy(pt_at(&d->indptr, c->B, 0, 0, 0), &at, 4);
    if (pages_total == 0) { /* one unused entry keeps the tensor non-empty */
        int32_t z = 0;
        memcpy(pt_at(&d->indices, 0, 0, 0, 0), &z, 4);
    }
    free(pool);
    if (c->sinks) {
        const int64_t hs[1] = {Hq};
        if (!pt_make(&d->sinks, QATTN_F32, 1, hs, NULL, PT_POISON)) return 0;
        for (int h = 0; h < Hq; ++h) {
            float s = qt_uniform(rng, -2.0f, 3.0f);
            memcpy(pt_at(&d->sinks, h, 0, 0, 0), &s, 4);
        }
    }
    pt_layout lo = act_layout(c->layout, 4, rng);
    if (!pt_make(&d->o, case_odt(c), 4, os, &lo, PT_POISON)) return 0;
    if (c->lse) {
        const int64_t ls[3] = {c->B, c->R, Hq};
        pt_layout ll = act_layout(c->layout, 3, rng);
        if (!pt_make(&d->lse, QATTN_F32, 3, ls, &ll, PT_POISON)) return 0;
    }
    return 1;
}

static qattn_decode_args args_of(const decode_case *c, decode_data *d, int w) {
    qattn_decode_args a;
    memset(&a, 0, sizeof a);
    a.q = pt_desc(&d->q, w);
    a.k_cache = pt_desc(&d->k, w);
    a.v_cache = pt_desc(&d->v, w);
    a.k_scale = pt_desc(&d->ks, w);
    a.v_scale = pt_desc(&d->vs, w);
    a.kv_indptr = pt_desc(&d->indptr, w);
    a.kv_indices = pt_desc(&d->indices, w);
    a.kv_lens = pt_desc(&d->lens, w);
    a.sinks = pt_desc(&d->sinks, w);
    a.o = pt_desc(&d->o, w);
    a.lse = pt_desc(&d->lse, w);
    a.page_size = c->page;
    a.max_kv_len = d->max_len;
    a.sm_scale = 1.0f / sqrtf((float)c->D);
    a.window_left = c->window;
    a.logit_softcap = c->softcap ? 2.5f : 0.0f;
    return a;
}

static int parse_variant(const char *s, qattn_decode_variant *v) {
    for (int i = 0; i < QATTN_DECODE_VARIANT_COUNT; ++i)
        if (!strcmp(s, qattn_decode_variant_name((qattn_decode_variant)i))) {
            *v = (qattn_decode_variant)i;
            return 1;
        }
    return 0;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Bytes a decode must move at least: every visible K/V row and its scales
 * read once, the output written once. */
static double decode_bytes(const decode_case *c, const decode_data *d) {
    double keys = 0.0;
    for (int b = 0; b < c->B; ++b) {
        int32_t L;
        memcpy(&L, pt_at(&d->lens, b, 0, 0, 0), 4);
        keys += L;
    }
    const double row = (double)(c->D + case_dv(c)) * (double)qattn_dtype_size(c->dt) + (c->dt == BF ? 0.0 : 8.0);
    return keys * c->Hkv * row + (double)c->B * c->R * c->Hkv * c->G * case_dv(c) * 2.0;
}

/* Runs one side; returns a status and fills plan. With `iters` > 0 the run
 * is then repeated and timed with the backend's timer (printed only). */
static qattn_status run_side(parity_ctx *pc, int w, const decode_case *c, decode_data *d,
                             const qattn_decode_options *o, qattn_decode_plan *plan, int iters,
                             const char *name) {
    qattn_context *ctx = w ? pc->dev : pc->ref;
    qattn_decode_args a = args_of(c, d, w);
    qattn_status s;
    if (w) {
        s = qattn_decode_plan_create(ctx, &a, o, plan);
    } else {
        /* The reference plans with the pure planner: the environment's
         * variant pin and tuning are for the tested backend only. */
        qattn_device_caps caps;
        qattn_get_caps(ctx, &caps);
        s = qattn_decode_plan_compute(&caps, &a, NULL, plan, NULL, 0);
    }
    if (s != QATTN_OK) return s;
    qattn_buffer *ws = NULL;
    if ((s = pt_scratch(ctx, plan->workspace_bytes, PT_POISON, &ws)) != QATTN_OK) return s;
    s = qattn_decode_run(ctx, plan, &a, ws, 0);
    if (s == QATTN_OK) s = qattn_synchronize(ctx);
    double *t = iters > 0 ? calloc((size_t)iters, sizeof *t) : NULL;
    int n = 0;
    /* As many untimed runs first: clocks ramp up and caches settle. */
    for (int i = 0; s == QATTN_OK && t && i < iters; ++i) s = qattn_decode_run(ctx, plan, &a, ws, 0);
    for (int i = 0; s == QATTN_OK && t && i < iters; ++i) {
        double ms;
        s = qattn_decode_run(ctx, plan, &a, ws, 0);
        if (s == QATTN_OK && qattn_last_op_time_ms(ctx, &ms) == QATTN_OK) t[n++] = ms * 1e3;
    }
    if (n > 0) {
        qsort(t, (size_t)n, sizeof *t, cmp_double);
        const double med = n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
        const double gb = decode_bytes(c, d) / (med * 1e-6) * 1e-9;
        printf("time %s: variant %s splits %d wg %d qh %d slots %d load %d B: median %.2f us, min %.2f us "
               "(%d runs after as many warm-up runs), %.0f GB/s\n",
               name, qattn_decode_variant_name(plan->variant), plan->num_splits, plan->workgroup_size,
               plan->q_heads_per_workgroup, plan->row_slots, plan->load_bytes, med, t[0], n, gb);
    }
    free(t);
    qattn_buffer_free(ctx, ws);
    return s;
}

/* The reference on a rank-3 token-major copy of a rank-4 cache (slot s =
 * page s / P, row s % P, by the spec's words, not the view) must give the
 * same bytes as on the cache itself. Fails the case and returns 0 if not. */
static int flat_matches(parity_ctx *pc, const decode_case *c, decode_data *d, qt_rng *rng,
                        const char *name) {
    const int64_t np = d->k.shape[0], P = d->k.shape[1], H = c->Hkv, D = c->D, Dv = case_dv(c);
    const int64_t cs[3] = {np * P, H, D}, vs[3] = {np * P, H, Dv}, ss[2] = {np * P, H};
    pt_tensor k3, v3, ks3, vs3, o2, lse2;
    memset(&ks3, 0, sizeof ks3);
    memset(&vs3, 0, sizeof vs3);
    memset(&lse2, 0, sizeof lse2);
    const size_t es = qattn_dtype_size(c->dt);
    int ok = pt_make(&k3, c->dt, 3, cs, NULL, PT_POISON) && pt_make(&v3, c->dt, 3, vs, NULL, PT_POISON) &&
             pt_make(&o2, case_odt(c), 4, d->o.shape, NULL, PT_POISON);
    if (ok && d->ks.host)
        ok = pt_make(&ks3, QATTN_F32, 2, ss, NULL, PT_POISON) && pt_make(&vs3, QATTN_F32, 2, ss, NULL, PT_POISON);
    if (ok && d->lse.host) ok = pt_make(&lse2, QATTN_F32, 3, d->lse.shape, NULL, PT_POISON);
    for (int64_t slot = 0; ok && slot < np * P; ++slot)
        for (int64_t g = 0; g < H; ++g) {
            for (int64_t e = 0; e < D; ++e)
                memcpy(pt_at(&k3, slot, g, e, 0), pt_at(&d->k, slot / P, slot % P, g, e), es);
            for (int64_t e = 0; e < Dv; ++e)
                memcpy(pt_at(&v3, slot, g, e, 0), pt_at(&d->v, slot / P, slot % P, g, e), es);
            if (d->ks.host) {
                memcpy(pt_at(&ks3, slot, g, 0, 0), pt_at(&d->ks, slot / P, slot % P, g, 0), 4);
                memcpy(pt_at(&vs3, slot, g, 0, 0), pt_at(&d->vs, slot / P, slot % P, g, 0), 4);
            }
        }
    pt_tensor *ts[6] = {&k3, &v3, &ks3, &vs3, &o2, &lse2};
    qattn_status s = ok ? QATTN_OK : QATTN_ERR_OUT_OF_MEMORY;
    for (int i = 0; i < 6 && s == QATTN_OK; ++i)
        if (ts[i]->host) s = pt_upload(pc, ts[i]);
    qattn_decode_args a = args_of(c, d, 0);
    a.k_cache = pt_desc(&k3, 0);
    a.v_cache = pt_desc(&v3, 0);
    a.k_scale = pt_desc(&ks3, 0);
    a.v_scale = pt_desc(&vs3, 0);
    a.o = pt_desc(&o2, 0);
    a.lse = pt_desc(&lse2, 0);
    qattn_decode_plan plan;
    qattn_device_caps caps;
    qattn_get_caps(pc->ref, &caps);
    if (s == QATTN_OK) s = qattn_decode_plan_compute(&caps, &a, NULL, &plan, NULL, 0);
    qattn_buffer *ws = NULL;
    if (s == QATTN_OK) s = pt_scratch(pc->ref, plan.workspace_bytes, PT_POISON, &ws);
    if (s == QATTN_OK) s = qattn_decode_run(pc->ref, &plan, &a, ws, 0);
    qattn_buffer_free(pc->ref, ws);
    int same = 0;
    if (s == QATTN_OK) {
        pt_tensor *pairs[2][2] = {{&d->o, &o2}, {&d->lse, &lse2}};
        same = 1;
        for (int t = 0; t < 2 && same; ++t) {
            if (!pairs[t][0]->host) continue;
            uint8_t *x = malloc(pairs[t][0]->bytes), *y = malloc(pairs[t][1]->bytes);
            same = x && y && pt_download(pc, pairs[t][0], 0, x) == QATTN_OK &&
                   pt_download(pc, pairs[t][1], 0, y) == QATTN_OK;
            for (int64_t n = 0; same && n < pt_count(pairs[t][0]); ++n)
                same = !memcmp(pt_img_at(pairs[t][0], x, n), pt_img_at(pairs[t][1], y, n),
                               qattn_dtype_size(pairs[t][0]->dtype));
            free(x);
            free(y);
        }
        if (!same) pt_fail(pc, rng, name, "reference on the rank-4 cache differs from its rank-3 copy");
    } else {
        pt_fail(pc, rng, name, "reference on the rank-3 copy: %s: %s", qattn_status_name(s),
                qattn_last_error(pc->ref));
    }
    for (int i = 0; i < 6; ++i)
        if (ts[i]->host) pt_free(pc, ts[i]);
    return same;
}

static void run_case(parity_ctx *pc, const decode_case *c, int idx) {
    char name[160];
    case_name(c, name, sizeof name);
    if (!pt_selected(pc, name)) return;
    qt_rng rng = qt_rng_for(name);
    (void)idx;
    decode_data d;
    if (!make_inputs(c, &rng, &d)) {
        pt_fail(pc, &rng, name, "out of host memory building inputs");
        data_free(pc, &d);
        return;
    }
    pt_tensor *ins[] = {&d.q,       &d.k,   &d.v,      &d.ks,     &d.vs,     &d.indptr, &d.indices,
                        &d.lens,    &d.sinks, &d.o,    &d.lse,    &d.own_kv, &d.own_ks, &d.own_vs};
    for (size_t i = 0; i < sizeof ins / sizeof ins[0]; ++i) {
        if (!ins[i]->host) continue;
        qattn_status s = pt_upload(pc, ins[i]);
        if (s != QATTN_OK) {
            pt_fail(pc, &rng, name, "upload: %s", qattn_status_name(s));
            data_free(pc, &d);
            return;
        }
    }
    qattn_decode_options dev_o = QATTN_DECODE_OPTIONS_INIT;
    dev_o.num_splits = c->splits;
    if (pc->variant && !parse_variant(pc->variant, &dev_o.variant)) {
        pt_fail(pc, &rng, name, "--variant %s is not a decode variant", pc->variant);
        data_free(pc, &d);
        return;
    }
    qattn_decode_plan ref_plan, dev_plan;
    qattn_status s = pc->no_check ? QATTN_OK : run_side(pc, 0, c, &d, NULL, &ref_plan, 0, name);
    if (s != QATTN_OK) {
        pt_fail(pc, &rng, name, "reference: %s: %s", qattn_status_name(s), qattn_last_error(pc->ref));
        data_free(pc, &d);
        return;
    }
    if (!pc->no_check && c->form != F3 && !flat_matches(pc, c, &d, &rng, name)) {
        data_free(pc, &d);
        return;
    }
    s = run_side(pc, 1, c, &d, &dev_o, &dev_plan, pc->time_iters, name);
    if (s == QATTN_ERR_VARIANT_GATE && dev_o.variant != QATTN_DECODE_AUTO) {
        pc->n_refused++;
        if (pc->verbose) printf("gate %s: %s\n", name, qattn_last_error(pc->dev));
        data_free(pc, &d);
        return;
    }
    if (s != QATTN_OK) {
        pt_fail(pc, &rng, name, "%s: %s", qattn_status_name(s), qattn_last_error(pc->dev));
        data_free(pc, &d);
        return;
    }
    if (dev_o.variant != QATTN_DECODE_AUTO && dev_plan.variant != dev_o.variant) {
        pt_fail(pc, &rng, name, "forced %s but the plan ran %s", pc->variant,
                qattn_decode_variant_name(dev_plan.variant));
        data_free(pc, &d);
        return;
    }
    if (c->splits && dev_plan.num_splits != c->splits) {
        pt_fail(pc, &rng, name, "forced %d splits but the plan has %d", c->splits, dev_plan.num_splits);
        data_free(pc, &d);
        return;
    }

    if (pc->no_check) { /* timing only: neither passed nor failed */
        data_free(pc, &d);
        return;
    }
    /* Compare o and lse element-wise; gaps must keep the poison. */
    int bad = 0;
    char first[256] = "";
    pt_tensor *outs[2] = {&d.o, &d.lse};
    for (int t = 0; t < 2 && !bad; ++t) {
        pt_tensor *T = outs[t];
        if (!T->host) continue;
        uint8_t *ri = malloc(T->bytes), *di = malloc(T->bytes);
        if (!ri || !di || pt_download(pc, T, 0, ri) != QATTN_OK || pt_download(pc, T, 1, di) != QATTN_OK) {
            snprintf(first, sizeof first, "download of %s failed", t ? "lse" : "o");
            bad = 1;
        } else if (!pt_gaps_equal(T, di, PT_POISON)) {
            snprintf(first, sizeof first, "%s: bytes outside the tensor were written", t ? "lse" : "o");
            bad = 1;
        } else {
            for (int64_t n = 0; n < pt_count(T) && bad < 4; ++n) {
                double rv, dv;
                if (t == 0) {
                    uint16_t rb, db;
                    memcpy(&rb, pt_img_at(T, ri, n), 2);
                    memcpy(&db, pt_img_at(T, di, n), 2);
                    rv = half_value(rb, case_odt(c));
                    dv = half_value(db, case_odt(c));
                } else {
                    float rf, df;
                    memcpy(&rf, pt_img_at(T, ri, n), 4);
                    memcpy(&df, pt_img_at(T, di, n), 4);
                    rv = rf;
                    dv = df;
                }
                int ok = t == 0 ? qt_tol_decode_o(dv, rv) : qt_tol_decode_lse(dv, rv);
                if (!ok) {
                    if (!bad)
                        snprintf(first, sizeof first, "%s[%" PRId64 "] = %.6g, reference %.6g", t ? "lse" : "o", n,
                                 dv, rv);
                    bad++;
                }
            }
        }
        free(ri);
        free(di);
    }
    char detail[512];
    snprintf(detail, sizeof detail, "variant %s, %d splits x %d keys, wg %d, %u B shared%s%s",
             qattn_decode_variant_name(dev_plan.variant), dev_plan.num_splits, dev_plan.keys_per_split,
             dev_plan.workgroup_size, (unsigned)dev_plan.shared_bytes, dev_plan.reason[0] ? "; " : "",
             dev_plan.reason);
    if (bad) pt_fail(pc, &rng, name, "%s (%s)", first, detail);
    else pt_pass(pc, name, detail);
    data_free(pc, &d);
}

/* The --full sweep: the cartesian product of the main dimensions, with the
 * remaining ones cycled so each takes all its values. */
static void run_full(parity_ctx *pc) {
    static const int keys[] = {1, 17, 513, 4099};
    static const int gqa[] = {1, 4, 8};
    static const int dims[] = {64, 128, 256};
    static const qattn_dtype dts[] = {BF, FN, FNUZ, I8, E5};
    static const int rows[] = {1, 3, 8};
    static const int splits[] = {0, 1, 8, 64};
    int idx = 0;
    for (int ki = 0; ki < 4; ++ki)
        for (int gi = 0; gi < 3; ++gi)
            for (int di = 0; di < 3; ++di)
                for (int ti = 0; ti < 5; ++ti)
                    for (int ri = 0; ri < 3; ++ri) {
                        decode_case c;
                        c.B = idx % 2 ? 5 : 1;
                        c.R = rows[ri];
                        c.Hkv = 1 + idx % 2;
                        c.G = gqa[gi];
                        c.D = dims[di];
                        c.dt = dts[ti];
                        c.page = idx % 3 ? 16 : 1;
                        c.keys = keys[ki];
                        c.window = idx % 4 == 1 ? 2 * (idx % 50) + 1 : -1;
                        c.softcap = idx % 5 == 2;
                        c.sinks = idx % 3 == 1;
                        c.lse = idx % 7 != 3;
                        c.layout = idx % 4;
                        c.splits = splits[idx % 4];
                        c.same_lens = 0;
                        c.form = F3;
                        c.scales = S_ROW;
                        c.Dv = 0;
                        c.qdt = idx % 5 == 4 ? QATTN_F16 : QATTN_DTYPE_INVALID;
                        c.odt = idx % 6 == 5 ? QATTN_F16 : QATTN_DTYPE_INVALID;
                        run_case(pc, &c, idx++);
                    }
}

/* --shape B,R,Hkv,G,D,dtype,keys[,page[,splits]]: one token-major case with
 * LSE, no window/softcap/sinks. Returns 0 when the text does not parse. */
static int parse_shape(const char *spec, decode_case *c) {
    char dt[16] = "";
    memset(c, 0, sizeof *c);
    c->page = 16;
    c->window = -1;
    c->lse = 1;
    c->layout = TOK;
    int n = sscanf(spec, "%d,%d,%d,%d,%d,%15[^,],%d,%d,%d", &c->B, &c->R, &c->Hkv, &c->G, &c->D, dt,
                   &c->keys, &c->page, &c->splits);
    c->same_lens = 1;
    if (n < 7 || c->B < 1 || c->B > 64 || c->R < 1 || c->R > 8) return 0;
    if (!strcmp(dt, "bf16")) c->dt = BF;
    else if (!strcmp(dt, "fn")) c->dt = FN;
    else if (!strcmp(dt, "fnuz")) c->dt = FNUZ;
    else if (!strcmp(dt, "i8")) c->dt = I8;
    else if (!strcmp(dt, "e5m2")) c->dt = E5;
    else return 0;
    return 1;
}

static void run_decode(parity_ctx *pc) {
    if (pc->shape) {
        decode_case c;
        if (!parse_shape(pc->shape, &c)) {
            fprintf(stderr, "--shape %s: want B,R,Hkv,G,D,bf16|fn|fnuz|e5m2|i8,keys[,page[,splits]] (B <= 64)\n",
                    pc->shape);
            pc->n_fail++;
            return;
        }
        run_case(pc, &c, 0);
        return;
    }
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; ++i) run_case(pc, &CASES[i], (int)i);
    if (pc->full) run_full(pc);
}

const parity_op parity_op_decode = {"decode", run_decode};
