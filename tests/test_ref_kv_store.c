/*
 * KV store on the cpu backend (the reference), through the public API,
 * against spec section 2 ("KV store"):
 *  (a) hand-worked rows: fp8 fn / fnuz codes including an RNE tie, int8
 *      round-half-even ties, an all-zero row (scale 1), a bf16 copy;
 *  (b) seeded random tokens against an independent f32 loop in this file,
 *      codes and scales compared bit for bit (spec section 4);
 *  (c) slot -1 skipped, slots never named left untouched, token-major and
 *      head-major caches with padding, and a slot outside the cache skipped
 *      (or, with QATTN_CHECK_INDICES=1, the call refused with nothing
 *      written), guard slots past the cache untouched;
 *  (d) issue 27: f16 k_new / v_new (into every cache format, a bf16 cache
 *      by rounding), fp8 e5m2 caches (an RNE tie row by hand, and rows of
 *      e5m2 values times a power of two stored value-exact), Dv != D.
 * Caches and scales are poisoned with 0xFF before every run.
 */
#define _POSIX_C_SOURCE 200809L /* setenv, unsetenv */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fenv.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host_tensor.h"
#include "qattn/convert.h"
#include "qattn/qattn.h"
#include "test_rng.h"
#include "tolerance.h"

#define POISON 0xFF
#define MAX_T 64

typedef struct kcfg {
    const char *name;
    int T, Hkv, D;
    qattn_dtype kv;
    int n_slots;
    int head_major; /* cache laid out [head, slot, d] */
    int pad;
    int Dv;          /* v_new's and v_cache's head dim; 0: D */
    qattn_dtype src; /* k_new's and v_new's dtype; 0 (INVALID): bf16 */
} kcfg;

static int cfg_dv(const kcfg *c) { return c->Dv ? c->Dv : c->D; }
static qattn_dtype cfg_src(const kcfg *c) { return c->src ? c->src : QATTN_BF16; }

/* A 16-bit float (bf16 or f16) from f32 with one rounding, and its value. */
static uint16_t half_bits(float x, qattn_dtype dt) {
    return dt == QATTN_F16 ? qattn_f32_to_f16(x) : qattn_f32_to_bf16(x);
}
static float half_value(uint16_t b, qattn_dtype dt) {
    return dt == QATTN_F16 ? qattn_f16_to_f32(b) : qattn_bf16_to_f32(b);
}

typedef struct kfix {
    kcfg c;
    int32_t slots[MAX_T]; /* the test's copy of slot_mapping */
    qt_ht kn, vn, map, kc, vc, ks, vs;
} kfix;

/* Random tokens; distinct random slots, every third token padding (-1). */
static kfix kfix_make(qt_rng *rng, const kcfg *c) {
    kfix f;
    memset(&f, 0, sizeof f);
    f.c = *c;
    qt_layout padded = {{0, 1, 2, 3}, c->pad, c->pad};
    qt_layout cache = {{c->head_major ? 1 : 0, c->head_major ? 0 : 1, 2, 3}, c->pad, c->pad};
    const int64_t ns[3] = {c->T, c->Hkv, c->D}, cs[3] = {c->n_slots, c->Hkv, c->D};
    const int64_t vns[3] = {c->T, c->Hkv, cfg_dv(c)}, vcs[3] = {c->n_slots, c->Hkv, cfg_dv(c)};
    const int64_t ss[2] = {c->n_slots, c->Hkv}, ts[1] = {c->T};
    f.kn = qt_ht_make(cfg_src(c), 3, ns, &padded, POISON);
    f.vn = qt_ht_make(cfg_src(c), 3, vns, &padded, POISON);
    qt_ht *const srcs[2] = {&f.kn, &f.vn};
    for (int w = 0; w < 2; ++w)
        for (int64_t n = 0; n < qt_ht_count(srcs[w]); ++n) {
            /* magnitudes over several binades so per-row amax varies */
            float amp = ldexpf(1.0f, (int)qt_int(rng, -3, 3));
            uint16_t a = half_bits(amp * qt_signed(rng, 0.05f, 1.0f), cfg_src(c));
            memcpy(qt_ht_at_linear(srcs[w], n), &a, 2);
        }
    int32_t perm[256];
    assert_true(c->n_slots <= 256 && c->T <= MAX_T && c->T <= c->n_slots);
    for (int i = 0; i < c->n_slots; ++i) perm[i] = i;
    qt_shuffle_i32(rng, perm, (size_t)c->n_slots);
    f.map = qt_ht_make(QATTN_I32, 1, ts, &padded, POISON);
    for (int t = 0; t < c->T; ++t) {
        f.slots[t] = (t % 3 == 1) ? -1 : perm[t];
        qt_ht_set_i32(&f.map, t, f.slots[t]);
    }
    f.kc = qt_ht_make(c->kv, 3, cs, &cache, POISON);
    f.vc = qt_ht_make(c->kv, 3, vcs, &cache, POISON);
    if (c->kv != QATTN_BF16) {
        f.ks = qt_ht_make(QATTN_F32, 2, ss, &padded, POISON);
        f.vs = qt_ht_make(QATTN_F32, 2, ss, &padded, POISON);
    }
    return f;
}

/* Every tensor of the fixture, listed once (see qt_ht_upload_present). */
static size_t kfix_tensors(kfix *f, qt_ht **out) {
    qt_ht *const all[] = {&f->kn, &f->vn, &f->map, &f->kc, &f->vc, &f->ks, &f->vs};
    memcpy(out, all, sizeof all);
    return sizeof all / sizeof all[0];
}

static void kfix_free(qattn_context *ctx, kfix *f) {
    qt_ht *ts[QT_HT_MAX_LIST];
    qt_ht_free_present(ctx, ts, kfix_tensors(f, ts));
}

/* Uploads everything, runs qattn_kv_store, downloads caches and scales. */
static qattn_status kfix_run(qattn_context *ctx, kfix *f) {
    qt_ht *ts[QT_HT_MAX_LIST];
    qt_ht_upload_present(ctx, ts, kfix_tensors(f, ts));
    qattn_kv_store_args a;
    memset(&a, 0, sizeof a);
    a.k_new = qt_ht_desc(&f->kn);
    a.v_new = qt_ht_desc(&f->vn);
    a.slot_mapping = qt_ht_desc(&f->map);
    a.k_cache = qt_ht_desc(&f->kc);
    a.v_cache = qt_ht_desc(&f->vc);
    if (f->ks.data) {
        a.k_scale = qt_ht_desc(&f->ks);
        a.v_scale = qt_ht_desc(&f->vs);
    }
    qattn_status s = qattn_kv_store(ctx, &a);
    qt_ht *outs[] = {&f->kc, &f->vc, &f->ks, &f->vs};
    for (size_t i = 0; i < 4; ++i)
        if (outs[i]->data) qt_ht_download(ctx, outs[i]);
    return s;
}

static qattn_context *cpu_ctx(void) {
    qattn_context *ctx = NULL;
    char err[256] = "";
    qattn_status s = qattn_context_create(qattn_backend_cpu(), NULL, &ctx, err, sizeof err);
    if (s != QATTN_OK) fail_msg("cpu context: %s", err);
    return ctx;
}

/* ---- the independent expectation ------------------------------------------ */

/* One (token, head) row as the spec says, in f32: amax, scale = amax / fmax
 * (1 when amax = 0), code = encode(x / scale); int8 rounds with the C
 * library's nearbyintf in the default round-to-nearest-even mode. A bf16
 * cache takes bf16 bits as they are and f16 values rounded to bf16. */
static void expected_row(const qt_ht *src, int t, int g, qattn_dtype dt, uint8_t *codes,
                         uint16_t *bf16, float *scale) {
    const int64_t D = src->shape[2];
    if (dt == QATTN_BF16) {
        for (int64_t d = 0; d < D; ++d)
            bf16[d] = src->dtype == QATTN_BF16 ? qt_ht_u16(src, t, g, d, 0)
                                               : qattn_f32_to_bf16(qattn_f16_to_f32(qt_ht_u16(src, t, g, d, 0)));
        return;
    }
    float amax = 0.0f;
    for (int64_t d = 0; d < D; ++d) amax = fmaxf(amax, fabsf(half_value(qt_ht_u16(src, t, g, d, 0), src->dtype)));
    const float fmax = dt == QATTN_I8             ? 127.0f
                       : dt == QATTN_FP8_E4M3FN   ? 448.0f
                       : dt == QATTN_FP8_E4M3FNUZ ? 240.0f
                                                  : 57344.0f; /* e5m2: 2^15 * 1.75 */
    const float s = amax == 0.0f ? 1.0f : amax / fmax;
    *scale = s;
    for (int64_t d = 0; d < D; ++d) {
        float y = half_value(qt_ht_u16(src, t, g, d, 0), src->dtype) / s;
        if (dt == QATTN_I8) {
            float r = nearbyintf(y);
            r = r > 127.0f ? 127.0f : r < -127.0f ? -127.0f : r;
            codes[d] = (uint8_t)(int8_t)r;
        } else {
            codes[d] = qattn_f32_to_fp8(y, dt);
        }
    }
}

/* Checks one cache (k or v) and its scales against expected_row for every
 * stored token, and that every slot not stored to still holds the poison. */
static void check_cache(qt_rng *rng, const kfix *f, const qt_ht *src, const qt_ht *cache,
                        const qt_ht *scale, const char *which) {
    const kcfg *c = &f->c;
    const int D = (int)cache->shape[2];
    uint8_t codes[256];
    uint16_t bf16[256];
    for (int slot = 0; slot < c->n_slots; ++slot) {
        int t = -1;
        for (int i = 0; i < c->T; ++i)
            if (f->slots[i] == slot) t = i;
        for (int g = 0; g < c->Hkv; ++g) {
            if (t < 0) { /* untouched: still poison */
                for (int d = 0; d < D; ++d) {
                    const uint8_t *p = qt_ht_at(cache, slot, g, d, 0);
                    for (size_t b = 0; b < qattn_dtype_size(cache->dtype); ++b)
                        QT_CHECK(rng, p[b] == POISON, "%s: %s slot %d (no token) was written", c->name, which, slot);
                }
                if (scale->data) {
                    const uint8_t *p = qt_ht_at(scale, slot, g, 0, 0);
                    QT_CHECK(rng, p[0] == POISON && p[1] == POISON && p[2] == POISON && p[3] == POISON,
                             "%s: %s scale of slot %d (no token) was written", c->name, which, slot);
                }
                continue;
            }
            float s = 0.0f;
            expected_row(src, t, g, cache->dtype, codes, bf16, &s);
            for (int d = 0; d < D; ++d) {
                if (cache->dtype == QATTN_BF16) {
                    uint16_t got = qt_ht_u16(cache, slot, g, d, 0);
                    QT_CHECK(rng, qt_tol_kv_store_bytes(&got, &bf16[d], 2) < 0,
                             "%s: %s[%d,%d,%d] = 0x%04X, want 0x%04X", c->name, which, slot, g, d, got, bf16[d]);
                } else {
                    uint8_t got = qt_ht_u8(cache, slot, g, d, 0);
                    QT_CHECK(rng, qt_tol_kv_store_bytes(&got, &codes[d], 1) < 0,
                             "%s: %s[%d,%d,%d] = 0x%02X, want 0x%02X (token %d)", c->name, which, slot,
                             g, d, got, codes[d], t);
                }
            }
            if (scale->data) {
                float got = qt_ht_f32(scale, slot, g, 0, 0);
                QT_CHECK(rng, qt_tol_kv_store_scale(got, s), "%s: %s scale[%d,%d] = %a, want %a", c->name,
                         which, slot, g, got, s);
            }
        }
    }
    QT_CHECK(rng, qt_ht_gaps_equal(cache, POISON), "%s: %s written outside its elements", c->name, which);
    if (scale->data) QT_CHECK(rng, qt_ht_gaps_equal(scale, POISON), "%s: %s scales written outside", c->name, which);
}

static void check_all(qt_rng *rng, const kfix *f) {
    check_cache(rng, f, &f->kn, &f->kc, &f->ks, "k_cache");
    check_cache(rng, f, &f->vn, &f->vc, &f->vs, "v_cache");
}

/* ---- (a) hand-worked rows ------------------------------------------------- */

/* Sets token 0, head 0 of src to the listed values, the rest to `tail`. */
static void set_row(qt_ht *src, const float *vals, int n, float tail) {
    for (int64_t d = 0; d < src->shape[2]; ++d)
        qt_ht_set_u16(src, 0, 0, d, 0, half_bits(d < n ? vals[d] : tail, src->dtype));
}

static void test_hand_rows(void **state) {
    (void)state;
    qattn_context *ctx = cpu_ctx();
    qt_rng rng = qt_rng_for("kv_store.hand");
    /* fp8 fn, row (2, -1, 0.5, 2^-7, 2^-7, ...): amax = 2, scale = 2/448.
     * x/scale: 2 -> 448 = 2^8 * 1.75 (e = 15, m = 6) -> 0x7E;
     * -1 -> -224 = -(2^7 * 1.75) -> 0x80 | 0x76 = 0xF6;
     * 0.5 -> 112 = 2^6 * 1.75 -> 0x6E; 2^-7 -> 1.75 = 2^0 * 1.75 -> 0x3E.
     * The v row is all zero: amax = 0, scale = 1, codes 0x00. */
    {
        kcfg c = {"hand_fn", 1, 1, 64, QATTN_FP8_E4M3FN, 4, 0, 0, 0, 0};
        kfix f = kfix_make(&rng, &c);
        f.slots[0] = 2;
        qt_ht_set_i32(&f.map, 0, 2);
        const float k[3] = {2.0f, -1.0f, 0.5f};
        set_row(&f.kn, k, 3, 0x1p-7f);
        set_row(&f.vn, k, 0, 0.0f);
        QT_ASSERT_EQ(&rng, kfix_run(ctx, &f), QATTN_OK);
        QT_ASSERT_EQ(&rng, qt_ht_u8(&f.kc, 2, 0, 0, 0), 0x7E);
        QT_ASSERT_EQ(&rng, qt_ht_u8(&f.kc, 2, 0, 1, 0), 0xF6);
        QT_ASSERT_EQ(&rng, qt_ht_u8(&f.kc, 2, 0, 2, 0), 0x6E);
        for (int d = 3; d < 64; ++d) QT_ASSERT_EQ(&rng, qt_ht_u8(&f.kc, 2, 0, d, 0), 0x3E);
        QT_ASSERT(&rng, qt_tol_kv_store_scale(qt_ht_f32(&f.ks, 2, 0, 0, 0), 2.0f / 448.0f));
        for (int d = 0; d < 64; ++d) QT_ASSERT_EQ(&rng, qt_ht_u8(&f.vc, 2, 0, d, 0), 0x00);
        QT_ASSERT(&rng, qt_tol_kv_store_scale(qt_ht_f32(&f.vs, 2, 0, 0, 0), 1.0f));
        check_all(&rng, &f);
        kfix_free(ctx, &f);
    }
    /* int8, row (127/64, -15.5/64, 14.5/64, 32/64, -1/64, ...): amax = 127/64,
     * scale = amax / 127 = 1/64 exactly, so x/scale = x * 64 exactly:
     * 127, -15.5 -> -16 (tie to even), 14.5 -> 14 (tie to even), 32, -1. */
    {
        kcfg c = {"hand_i8", 1, 1, 64, QATTN_I8, 3, 1, 1, 0, 0};
        kfix f = kfix_make(&rng, &c);
        f.slots[0] = 0;
        qt_ht_set_i32(&f.map, 0, 0);
        const float k[4] = {1.984375f, -0.2421875f, 0.2265625f, 0.5f};
        set_row(&f.kn, k, 4, -0.015625f);
        set_row(&f.vn, k, 4, -0.015625f);
        QT_ASSERT_EQ(&rng, kfix_run(ctx, &f), QATTN_OK);
        const int8_t want[5] = {127, -16, 14, 32, -1};
        for (int d = 0; d < 64; ++d) {
            QT_ASSERT_EQ(&rng, (int8_t)qt_ht_u8(&f.kc, 0, 0, d, 0), want[d < 4 ? d : 4]);
            QT_ASSERT_EQ(&rng, (int8_t)qt_ht_u8(&f.vc, 0, 0, d, 0), want[d < 4 ? d : 4]);
        }
        QT_ASSERT(&rng, qt_tol_kv_store_scale(qt_ht_f32(&f.ks, 0, 0, 0, 0), 0.015625f));
        check_all(&rng, &f);
        kfix_free(ctx, &f);
    }
    /* fnuz, row (3.75, -1, 1.0625, 1.1875, -2^-7, ...): amax = 3.75, scale =
     * 3.75 / 240 = 1/64 exactly. 240 -> 0x7F; -64 = -(2^6) (e = 14) -> 0xF0;
     * 68 is the tie between 64 (m = 0) and 72 (m = 1) -> 64 = 0x70; 76 ties
     * 72 (m = 1) and 80 (m = 2) -> 80 = 0x72; -0.5 = -(2^-1) (e = 7) -> 0xB8. */
    {
        kcfg c = {"hand_fnuz", 1, 1, 128, QATTN_FP8_E4M3FNUZ, 2, 1, 0, 0, 0};
        kfix f = kfix_make(&rng, &c);
        f.slots[0] = 1;
        qt_ht_set_i32(&f.map, 0, 1);
        const float k[4] = {3.75f, -1.0f, 1.0625f, 1.1875f};
        set_row(&f.kn, k, 4, -0x1p-7f);
        set_row(&f.vn, k, 4, -0x1p-7f);
        QT_ASSERT_EQ(&rng, kfix_run(ctx, &f), QATTN_OK);
        const uint8_t want[5] = {0x7F, 0xF0, 0x70, 0x72, 0xB8};
        for (int d = 0; d < 128; ++d) QT_ASSERT_EQ(&rng, qt_ht_u8(&f.kc, 1, 0, d, 0), want[d < 4 ? d : 4]);
        QT_ASSERT(&rng, qt_tol_kv_store_scale(qt_ht_f32(&f.vs, 1, 0, 0, 0), 0.015625f));
        check_all(&rng, &f);
        kfix_free(ctx, &f);
    }
    /* e5m2 from f16 inputs, row (7, -1, 0.75, 1.125, 1.375, 2^-7, ...):
     * amax = 7, scale = 7 / 57344 = 2^-13 exactly, so x / scale = x * 8192
     * exactly: 57344 = 2^15 * 1.75 -> 0x7B; -8192 = -(2^13) (e = 28) ->
     * 0x80 | 0x70 = 0xF0; 6144 = 2^12 * 1.5 (e = 27, m = 2) -> 0x6E; 9216 is
     * the tie of 8192 (m = 0) and 10240 (m = 1) -> 0x70; 11264 ties 10240
     * (m = 1) and 12288 (m = 2) -> 0x72; 64 = 2^6 (e = 21) -> 0x54. The v
     * row (a cache of Dv = 48) is all zero: scale 1, codes 0x00 (+0) and
     * 0x80 (-0). */
    {
        kcfg c = {"hand_e5m2_f16", 1, 1, 64, QATTN_FP8_E5M2, 3, 1, 1, 48, QATTN_F16};
        kfix f = kfix_make(&rng, &c);
        f.slots[0] = 1;
        qt_ht_set_i32(&f.map, 0, 1);
        const float k[5] = {7.0f, -1.0f, 0.75f, 1.125f, 1.375f};
        set_row(&f.kn, k, 5, 0x1p-7f);
        const float vz[1] = {-0.0f};
        set_row(&f.vn, vz, 1, 0.0f);
        QT_ASSERT_EQ(&rng, kfix_run(ctx, &f), QATTN_OK);
        const uint8_t want[6] = {0x7B, 0xF0, 0x6E, 0x70, 0x72, 0x54};
        for (int d = 0; d < 64; ++d) QT_ASSERT_EQ(&rng, qt_ht_u8(&f.kc, 1, 0, d, 0), want[d < 5 ? d : 5]);
        QT_ASSERT(&rng, qt_tol_kv_store_scale(qt_ht_f32(&f.ks, 1, 0, 0, 0), 0x1p-13f));
        for (int d = 0; d < 48; ++d) QT_ASSERT_EQ(&rng, qt_ht_u8(&f.vc, 1, 0, d, 0), d == 0 ? 0x80 : 0x00);
        QT_ASSERT(&rng, qt_tol_kv_store_scale(qt_ht_f32(&f.vs, 1, 0, 0, 0), 1.0f));
        check_all(&rng, &f);
        kfix_free(ctx, &f);
    }
    /* A bf16 cache from f16 inputs rounds each value to bf16 (nearest even):
     * 1 + 2^-8 is the tie of 1 (0x3F80, even) and 1 + 2^-7 -> 0x3F80;
     * 1 + 3 * 2^-8 -> 0x3F82; -(1 + 2^-8 + 2^-10) -> 0xBF81; 2^-14 (the
     * smallest normal f16) -> 0x3880. v (Dv = 192) the same. */
    {
        kcfg c = {"hand_bf16_from_f16", 1, 1, 64, QATTN_BF16, 2, 0, 0, 192, QATTN_F16};
        kfix f = kfix_make(&rng, &c);
        f.slots[0] = 0;
        qt_ht_set_i32(&f.map, 0, 0);
        const float k[3] = {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, -(1.0f + 0x1p-8f + 0x1p-10f)};
        set_row(&f.kn, k, 3, 0x1p-14f);
        set_row(&f.vn, k, 3, 0x1p-14f);
        QT_ASSERT_EQ(&rng, kfix_run(ctx, &f), QATTN_OK);
        const uint16_t want[4] = {0x3F80, 0x3F82, 0xBF81, 0x3880};
        for (int d = 0; d < 64; ++d) QT_ASSERT_EQ(&rng, qt_ht_u16(&f.kc, 0, 0, d, 0), want[d < 3 ? d : 3]);
        for (int d = 0; d < 192; ++d) QT_ASSERT_EQ(&rng, qt_ht_u16(&f.vc, 0, 0, d, 0), want[d < 3 ? d : 3]);
        check_all(&rng, &f);
        kfix_free(ctx, &f);
    }
    /* bf16: plain copy of the bits, tokens 0 and 2 to slots 5 and 2, token 1
     * is padding (-1); nothing else in the cache changes. */
    {
        kcfg c = {"hand_bf16", 3, 2, 64, QATTN_BF16, 6, 1, 2, 0, 0};
        kfix f = kfix_make(&rng, &c);
        const int32_t map[3] = {5, -1, 2};
        for (int t = 0; t < 3; ++t) {
            f.slots[t] = map[t];
            qt_ht_set_i32(&f.map, t, map[t]);
        }
        QT_ASSERT_EQ(&rng, kfix_run(ctx, &f), QATTN_OK);
        for (int g = 0; g < 2; ++g)
            for (int d = 0; d < 64; ++d) {
                QT_ASSERT_EQ(&rng, qt_ht_u16(&f.kc, 5, g, d, 0), qt_ht_u16(&f.kn, 0, g, d, 0));
                QT_ASSERT_EQ(&rng, qt_ht_u16(&f.vc, 2, g, d, 0), qt_ht_u16(&f.vn, 2, g, d, 0));
            }
        check_all(&rng, &f); /* slots 0, 1, 3, 4 untouched */
        kfix_free(ctx, &f);
    }
    qattn_context_free(ctx);
}

/* ---- (b), (c) -------------------------------------------------------------- */

static const kcfg RANDOM_CASES[] = {
    /* name          T   Hkv D    kv                   slots hm pad */
    {"bf16_tm",      5,  2,  64,  QATTN_BF16,          8,    0, 0, 0, 0},
    {"fn_tm_pad",    12, 4,  128, QATTN_FP8_E4M3FN,    20,   0, 3, 0, 0},
    {"fn_hm",        7,  1,  256, QATTN_FP8_E4M3FN,    7,    1, 0, 0, 0},
    {"fnuz_hm_pad",  9,  2,  64,  QATTN_FP8_E4M3FNUZ,  30,   1, 2, 0, 0},
    {"fnuz_tm",      16, 8,  128, QATTN_FP8_E4M3FNUZ,  17,   0, 0, 0, 0},
    {"i8_tm",        11, 3,  64,  QATTN_I8,            11,   0, 1, 0, 0},
    {"i8_hm_pad",    6,  2,  256, QATTN_I8,            40,   1, 5, 0, 0},
    {"bf16_hm_pad",  4,  4,  128, QATTN_BF16,          9,    1, 1, 0, 0},
    /* issue 27: e5m2 caches, f16 inputs, Dv != D (Dv, src last) */
    /* name          T   Hkv D    kv                   slots hm pad Dv   src */
    {"e5m2_tm",      10, 2,  128, QATTN_FP8_E5M2,      16,   0, 0,  0,   0},
    {"e5m2_hm_f16",  7,  3,  96,  QATTN_FP8_E5M2,      12,   1, 2,  0,   QATTN_F16},
    {"e5m2_192_128", 9,  2,  192, QATTN_FP8_E5M2,      20,   0, 1,  128, QATTN_F16},
    {"fn_f16_80",    6,  4,  80,  QATTN_FP8_E4M3FN,    9,    0, 0,  0,   QATTN_F16},
    {"fnuz_64_128",  8,  2,  64,  QATTN_FP8_E4M3FNUZ,  10,   1, 1,  128, QATTN_F16},
    {"i8_f16_hm",    5,  2,  256, QATTN_I8,            7,    1, 3,  0,   QATTN_F16},
    {"i8_128_64",    12, 1,  128, QATTN_I8,            30,   0, 0,  64,  0},
    {"bf16_f16",     6,  2,  128, QATTN_BF16,          8,    0, 2,  0,   QATTN_F16},
    {"bf16_192_128", 5,  4,  192, QATTN_BF16,          6,    1, 0,  128, 0},
};

static void test_random_vs_f32(void **state) {
    (void)state;
    qattn_context *ctx = cpu_ctx();
    qt_rng rng = qt_rng_for("kv_store.random");
    QT_ASSERT_EQ(&rng, fegetround(), FE_TONEAREST); /* nearbyintf rounds half to even */
    const size_t n = sizeof RANDOM_CASES / sizeof RANDOM_CASES[0];
    for (size_t i = 0; i < n; ++i)
        for (int rep = 0; rep < 3; ++rep) {
            qt_rng_case(&rng, i * 3 + (size_t)rep);
            kfix f = kfix_make(&rng, &RANDOM_CASES[i]);
            qattn_status s = kfix_run(ctx, &f);
            QT_CHECK(&rng, s == QATTN_OK, "%s: %s: %s", RANDOM_CASES[i].name, qattn_status_name(s),
                     qattn_last_error(ctx));
            check_all(&rng, &f);
            kfix_free(ctx, &f);
        }
    qattn_context_free(ctx);
}

/* e5m2 rows that are e5m2 values times a power of two 2^k, with one element
 * at +-57344 (the largest code): the scale is amax / 57344 = 2^k exactly,
 * x / scale is the e5m2 value itself, so the store gives back the very
 * codes and decode(code) x scale is x, bit for bit. bf16 holds every such
 * x for k in [-20, 20]; f16 for k in [-8, 0] (57344 <= 65504, and the
 * smallest subnormal 2^-16 x 2^-8 is f16's own). Codes drawn over every
 * finite code, zeros of both signs included. */
static void test_e5m2_value_exact(void **state) {
    (void)state;
    qattn_context *ctx = cpu_ctx();
    qt_rng rng = qt_rng_for("kv_store.e5m2_exact");
    for (int rep = 0; rep < 8; ++rep) {
        const qattn_dtype src = rep % 2 ? QATTN_F16 : QATTN_BF16;
        kcfg c = {"e5m2_exact", 6, 2, rep < 4 ? 128 : 192, QATTN_FP8_E5M2, 8, rep % 3 == 0, rep % 2,
                  rep < 4 ? 0 : 64, src};
        qt_rng_case(&rng, (uint64_t)rep);
        kfix f = kfix_make(&rng, &c);
        uint8_t want[2][MAX_T][4][256];
        float scale[2][MAX_T][4];
        qt_ht *srcs[2] = {&f.kn, &f.vn};
        for (int w = 0; w < 2; ++w) {
            const int D = (int)srcs[w]->shape[2];
            for (int t = 0; t < c.T; ++t)
                for (int g = 0; g < c.Hkv; ++g) {
                    const int k = src == QATTN_F16 ? (int)qt_int(&rng, -8, 0) : (int)qt_int(&rng, -20, 20);
                    for (int d = 0; d < D; ++d) {
                        uint8_t code;
                        do {
                            code = (uint8_t)qt_u32(&rng);
                        } while ((code & 0x7C) == 0x7C); /* finite codes */
                        want[w][t][g][d] = code;
                    }
                    want[w][t][g][qt_int(&rng, 0, D - 1)] = (qt_u64(&rng) & 1) ? 0xFB : 0x7B;
                    scale[w][t][g] = ldexpf(1.0f, k);
                    for (int d = 0; d < D; ++d) {
                        const float x = ldexpf(qattn_fp8_to_f32(want[w][t][g][d], QATTN_FP8_E5M2), k);
                        const uint16_t b = half_bits(x, src);
                        QT_ASSERT(&rng, half_value(b, src) == x && (signbit(x) != 0) == ((b >> 15) != 0));
                        qt_ht_set_u16(srcs[w], t, g, d, 0, b);
                    }
                }
        }
        QT_ASSERT_EQ(&rng, kfix_run(ctx, &f), QATTN_OK);
        const qt_ht *caches[2] = {&f.kc, &f.vc}, *scales[2] = {&f.ks, &f.vs};
        for (int w = 0; w < 2; ++w) {
            const int D = (int)srcs[w]->shape[2];
            for (int t = 0; t < c.T; ++t) {
                const int slot = f.slots[t];
                if (slot < 0) continue;
                for (int g = 0; g < c.Hkv; ++g) {
                    const float s = qt_ht_f32(scales[w], slot, g, 0, 0);
                    QT_CHECK(&rng, qt_tol_kv_store_scale(s, scale[w][t][g]), "%s token %d head %d: scale %a, want %a",
                             w ? "v" : "k", t, g, s, scale[w][t][g]);
                    for (int d = 0; d < D; ++d) {
                        const uint8_t got = qt_ht_u8(caches[w], slot, g, d, 0);
                        const float back = qattn_fp8_to_f32(got, QATTN_FP8_E5M2) * s;
                        const float x = half_value(qt_ht_u16(srcs[w], t, g, d, 0), src);
                        QT_CHECK(&rng, got == want[w][t][g][d] && memcmp(&back, &x, 4) == 0,
                                 "%s token %d head %d dim %d: code 0x%02X (want 0x%02X), back %a, x %a",
                                 w ? "v" : "k", t, g, d, got, want[w][t][g][d], back, x);
                    }
                }
            }
        }
        check_all(&rng, &f);
        kfix_free(ctx, &f);
    }
    qattn_context_free(ctx);
}

/* A slot outside [0, N_slots) other than -1 (spec 2, issue 11 rows 11-12):
 * without the index mode that token is skipped and every other token is
 * stored; with QATTN_CHECK_INDICES=1 the call fails and writes nothing. The
 * images hold GUARD slots past the described cache (and the slack after
 * them), which must keep the poison: a write at slot N_slots lands there. */
#define GUARD 4
static void test_bad_slot(void **state) {
    (void)state;
    qattn_context *ctx = cpu_ctx();
    qt_rng rng = qt_rng_for("kv_store.bad_slot");
    const int32_t N = 10;
    const int32_t bad[] = {N, N + 1, -2, INT32_MIN, INT32_MAX, 1 << 24};
    for (int check = 0; check < 2; ++check) {
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
            kcfg c = {"bad_slot", 4, 2, 64, i % 3 == 1 ? QATTN_I8 : i % 3 ? QATTN_BF16 : QATTN_FP8_E4M3FN,
                      N + GUARD, (int)(i % 2), 1, 0, 0};
            qt_rng_case(&rng, (uint64_t)(check * 16 + (int)i));
            kfix f = kfix_make(&rng, &c);
            qt_ht *desc[4] = {&f.kc, &f.vc, &f.ks, &f.vs};
            for (int k = 0; k < 4; ++k) desc[k]->shape[0] = N; /* the guard slots are outside */
            /* token 0 the bad slot, 1 padding, 2 and 3 inside the cache;
             * f.slots (the expectation) names no slot for token 0 */
            const int32_t map[4] = {bad[i], -1, 3, 7}, want[4] = {2 * N, -1, 3, 7};
            for (int t = 0; t < c.T; ++t) {
                f.slots[t] = want[t];
                qt_ht_set_i32(&f.map, t, map[t]);
            }
            if (check) setenv("QATTN_CHECK_INDICES", "1", 1);
            qattn_status s = kfix_run(ctx, &f);
            unsetenv("QATTN_CHECK_INDICES");
            if (check) {
                QT_CHECK(&rng, s == QATTN_ERR_INDEX_OUT_OF_RANGE, "index mode, slot %d: got %s", bad[i],
                         qattn_status_name(s));
                QT_CHECK(&rng, strstr(qattn_last_error(ctx), "slot_mapping[0]") != NULL,
                         "index mode: message \"%s\" does not name slot_mapping[0]", qattn_last_error(ctx));
                for (int k = 0; k < 4; ++k)
                    QT_CHECK(&rng, !desc[k]->data || qt_ht_all_bytes(desc[k], POISON),
                             "index mode, slot %d: tensor %d written", bad[i], k);
            } else {
                QT_CHECK(&rng, s == QATTN_OK, "slot %d: got %s: %s", bad[i], qattn_status_name(s),
                         qattn_last_error(ctx));
                check_all(&rng, &f); /* the other tokens stored; guard slots and gaps poison */
            }
            kfix_free(ctx, &f);
        }
    }
    qattn_context_free(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hand_rows),
        cmocka_unit_test(test_random_vs_f32),
        cmocka_unit_test(test_e5m2_value_exact),
        cmocka_unit_test(test_bad_slot),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
