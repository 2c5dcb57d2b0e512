/*
 * Parity cases of the KV store (spec 2; spec 4: codes and scales
 * bit-identical to the reference).
 *
 * Caches start as random bytes (identical on both sides), so the check
 * covers the slots written, the slots skipped (-1 padding) and every byte
 * outside the written rows. Inputs mix ordinary values with rows that
 * stress the encoders: all-zero rows (scale 1), rows scaled to very small
 * and very large magnitudes (denormal scales, saturation), and values that
 * land on exact rounding ties after the division.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parity_common.h"
#include "qattn/convert.h"
#include "tolerance.h"

typedef struct store_case {
    int T, Hkv, D;
    qattn_dtype dt;
    int layout; /* 0 token-major, 1 head-major cache, 2 padded/unaligned */
    int full;
} store_case;

static const store_case CASES[] = {
    {1, 1, 64, QATTN_BF16, 0, 0},          {7, 4, 128, QATTN_FP8_E4M3FN, 0, 0},
    {33, 8, 128, QATTN_FP8_E4M3FNUZ, 1, 0}, {9, 2, 256, QATTN_I8, 2, 0},
    {16, 8, 64, QATTN_FP8_E4M3FN, 2, 0},   {5, 1, 256, QATTN_FP8_E4M3FNUZ, 0, 0},
    {12, 3, 128, QATTN_I8, 1, 0},          {20, 2, 256, QATTN_BF16, 2, 0},
    {64, 8, 256, QATTN_FP8_E4M3FN, 1, 1},  {128, 4, 128, QATTN_I8, 0, 1},
    {96, 8, 64, QATTN_FP8_E4M3FNUZ, 2, 1}, {40, 8, 128, QATTN_BF16, 1, 1},
};

static void case_name(const store_case *c, char *buf, size_t n) {
    static const char *const L[] = {"tok", "head", "padded"};
    snprintf(buf, n, "kv_store/T%d_Hkv%d_D%d_%s_%s", c->T, c->Hkv, c->D, qattn_dtype_name(c->dt),
             L[c->layout]);
}

/* One (token, head) row of new values, in one of several regimes. */
static void fill_row(qt_rng *rng, uint16_t *row, int D, int kind) {
    switch (kind) {
    case 0: /* all zero: the scale must be exactly 1 */
        for (int d = 0; d < D; ++d) row[d] = (d % 3 == 0) ? 0x8000u : 0x0000u; /* +-0 */
        break;
    case 1: { /* tiny magnitudes: scales go denormal */
        for (int d = 0; d < D; ++d) row[d] = qattn_f32_to_bf16(qt_signed(rng, 1.0f, 8.0f) * 1e-38f);
        break;
    }
    case 2: /* huge magnitudes */
        for (int d = 0; d < D; ++d) row[d] = qattn_f32_to_bf16(qt_signed(rng, 0.05f, 1.0f) * 3e37f);
        break;
    case 3: /* small integers times a power of two: many exact ties */
        for (int d = 0; d < D; ++d) {
            float v = (float)qt_int(rng, -64, 64) * 0.25f;
            row[d] = qattn_f32_to_bf16(v);
        }
        row[0] = qattn_f32_to_bf16(16.0f); /* amax a power of two */
        break;
    default: /* ordinary activations, one outlier */
        for (int d = 0; d < D; ++d) row[d] = qattn_f32_to_bf16(qt_signed(rng, 0.001f, 4.0f));
        row[qt_int(rng, 0, D - 1)] = qattn_f32_to_bf16(qt_signed(rng, 10.0f, 60.0f));
        break;
    }
}

static void run_case(parity_ctx *pc, const store_case *c) {
    char name[96];
    case_name(c, name, sizeof name);
    if (!pt_selected(pc, name)) return;
    qt_rng rng = qt_rng_for(name);
    const int64_t n_slots = 2 * c->T + 5;
    pt_tensor kn, vn, slots, kc, vc, ks, vs;
    memset(&ks, 0, sizeof ks);
    memset(&vs, 0, sizeof vs);
    const int64_t ns[3] = {c->T, c->Hkv, c->D}, cs[3] = {n_slots, c->Hkv, c->D}, ss[2] = {n_slots, c->Hkv};
    const int64_t ts[1] = {c->T};
    pt_layout lnew = pt_dense(), lc = pt_dense();
    if (c->layout == 1) {
        lc.order[0] = 1;
        lc.order[1] = 0;
    } else if (c->layout == 2) {
        lnew.pad = 3;
        lnew.lead = 1;
        lc.pad = 5;
        lc.lead = 3;
    }
    int ok = pt_make(&kn, QATTN_BF16, 3, ns, &lnew, PT_POISON) && pt_make(&vn, QATTN_BF16, 3, ns, &lnew, PT_POISON) &&
             pt_make(&slots, QATTN_I32, 1, ts, NULL, PT_POISON) && pt_make(&kc, c->dt, 3, cs, &lc, PT_POISON) &&
             pt_make(&vc, c->dt, 3, cs, &lc, PT_POISON);
    if (ok && c->dt != QATTN_BF16)
        ok = pt_make(&ks, QATTN_F32, 2, ss, c->layout == 2 ? &lc : NULL, PT_POISON) &&
             pt_make(&vs, QATTN_F32, 2, ss, c->layout == 2 ? &lc : NULL, PT_POISON);
    if (!ok) {
        pt_fail(pc, &rng, name, "out of host memory");
        return;
    }
    /* Random bytes everywhere in the caches (same on both sides). */
    pt_tensor *caches[4] = {&kc, &vc, &ks, &vs};
    for (int i = 0; i < 4; ++i)
        for (size_t b = 0; caches[i]->host && b < caches[i]->bytes; ++b)
            caches[i]->host[b] = (uint8_t)qt_u32(&rng);
    uint16_t *row = malloc((size_t)c->D * 2);
    for (int t = 0; t < c->T; ++t)
        for (int h = 0; h < c->Hkv; ++h) {
            pt_tensor *src[2] = {&kn, &vn};
            for (int w = 0; w < 2; ++w) {
                int kind = (int)qt_int(&rng, 0, 9); /* 0..3 special, else ordinary */
                fill_row(&rng, row, c->D, kind);
                for (int d = 0; d < c->D; ++d) memcpy(pt_at(src[w], t, h, d, 0), &row[d], 2);
            }
        }
    free(row);
    /* Distinct slots, some tokens padding (-1). */
    for (int t = 0; t < c->T; ++t) {
        int32_t s = (t % 5 == 3) ? -1 : (int32_t)(2 * t + (int)qt_int(&rng, 0, 1));
        memcpy(pt_at(&slots, t, 0, 0, 0), &s, 4);
    }
    pt_tensor *all[7] = {&kn, &vn, &slots, &kc, &vc, &ks, &vs};
    qattn_status s = QATTN_OK;
    for (int i = 0; i < 7 && s == QATTN_OK; ++i)
        if (all[i]->host) s = pt_upload(pc, all[i]);
    for (int w = 0; w < 2 && s == QATTN_OK; ++w) {
        qattn_kv_store_args a;
        memset(&a, 0, sizeof a);
        a.k_new = pt_desc(&kn, w);
        a.v_new = pt_desc(&vn, w);
        a.slot_mapping = pt_desc(&slots, w);
        a.k_cache = pt_desc(&kc, w);
        a.v_cache = pt_desc(&vc, w);
        a.k_scale = pt_desc(&ks, w);
        a.v_scale = pt_desc(&vs, w);
        qattn_context *ctx = w ? pc->dev : pc->ref;
        s = qattn_kv_store(ctx, &a);
        if (s == QATTN_OK) s = qattn_synchronize(ctx);
        if (s != QATTN_OK) {
            pt_fail(pc, &rng, name, "%s: %s: %s", w ? pc->backend : "reference", qattn_status_name(s),
                    qattn_last_error(ctx));
            break;
        }
    }
    if (s == QATTN_OK) {
        int bad = 0;
        for (int i = 0; i < 4 && !bad; ++i) {
            pt_tensor *T = caches[i];
            if (!T->host) continue;
            uint8_t *ri = malloc(T->bytes), *di = malloc(T->bytes);
            if (!ri || !di || pt_download(pc, T, 0, ri) != QATTN_OK || pt_download(pc, T, 1, di) != QATTN_OK) {
                pt_fail(pc, &rng, name, "download failed");
                bad = 1;
            } else {
                ptrdiff_t at = qt_tol_kv_store_bytes(di, ri, T->bytes);
                if (at >= 0) {
                    static const char *const nm[4] = {"k_cache", "v_cache", "k_scale", "v_scale"};
                    /* Name the element: byte -> (slot, head, d) via a scan. */
                    char where[96] = "outside every element";
                    for (int64_t n = 0; n < pt_count(T); ++n) {
                        size_t off = (size_t)((uint8_t *)pt_at_linear(T, n) - T->host);
                        if ((size_t)at >= off && (size_t)at < off + qattn_dtype_size(T->dtype)) {
                            snprintf(where, sizeof where, "element %" PRId64, n);
                            break;
                        }
                    }
                    pt_fail(pc, &rng, name, "%s byte %td (%s): got 0x%02x, reference 0x%02x", nm[i], at,
                            where, di[at], ri[at]);
                    bad = 1;
                }
            }
            free(ri);
            free(di);
        }
        if (!bad) pt_pass(pc, name, "");
    }
    for (int i = 0; i < 7; ++i)
        if (all[i]->host) pt_free(pc, all[i]);
}

static void run_kv_store(parity_ctx *pc) {
    if (pc->shape) return; /* --shape describes a decode case */
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; ++i)
        if (!CASES[i].full || pc->full) run_case(pc, &CASES[i]);
}

const parity_op parity_op_kv_store = {"kv_store", run_kv_store};
