/*
 * Number-format conversions against spec section 1.
 *
 * Expected values are derived here independently of core/src/convert.c:
 * fp8/f16 values from the spec's formula with pow() in f64, and encoders
 * checked against a brute-force "nearest representable value" search over
 * all codes (ties to the code with the even mantissa), so a bug shared by
 * the encoder and this test would have to be made twice in different ways.
 */
#include <float.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "qattn/convert.h"
#include "test_rng.h"

/* ---- independent expectations --------------------------------------------- */

static int is_fn(qattn_dtype f) { return f == QATTN_FP8_E4M3FN; }

static int fp8_is_nan_code(uint8_t c, qattn_dtype f) {
    return is_fn(f) ? (c & 0x7F) == 0x7F : c == 0x80;
}

/* Spec: e = 0: (-1)^s 2^(1-bias) m/8; else (-1)^s 2^(e-bias) (1 + m/8). */
static double fp8_expected(uint8_t c, qattn_dtype f) {
    int bias = is_fn(f) ? 7 : 8;
    int s = (c >> 7) & 1, e = (c >> 3) & 15, m = c & 7;
    double v = e == 0 ? pow(2.0, 1 - bias) * (m / 8.0) : pow(2.0, e - bias) * (1.0 + m / 8.0);
    return s ? -v : v;
}

/* The code RNE-with-satfinite must give for x, by brute force: the nearest
 * finite code's value; on an exact tie the code with the even mantissa
 * (lowest bit 0); beyond max, +-max. Zero results: fn keeps the sign of x,
 * fnuz has only 0x00. */
static uint8_t fp8_brute_encode(float x, qattn_dtype f) {
    if (isnan(x)) return is_fn(f) ? 0x7F : 0x80;
    int neg = signbit(x) != 0;
    double a = fabs((double)x);
    int best = -1;
    double best_d = INFINITY;
    for (int c = 0; c < 0x80; ++c) { /* non-negative codes */
        if (fp8_is_nan_code((uint8_t)c, f)) continue;
        double d = fabs(fp8_expected((uint8_t)c, f) - a);
        if (d < best_d || (d == best_d && (c & 1) == 0)) {
            best = c;
            best_d = d;
        }
    }
    /* The search above already saturates: max is the nearest finite code. */
    if (best == 0) return (neg && is_fn(f)) ? 0x80 : 0x00;
    return (uint8_t)((neg ? 0x80 : 0) | best);
}

static const qattn_dtype FP8[2] = {QATTN_FP8_E4M3FN, QATTN_FP8_E4M3FNUZ};
static const char *fp8_name(qattn_dtype f) { return is_fn(f) ? "fn" : "fnuz"; }

/* ---- fp8 decode ----------------------------------------------------------- */

static void test_fp8_decode_all_codes(void **state) {
    (void)state;
    qt_rng rng = qt_rng_for("convert.fp8_decode");
    for (int fi = 0; fi < 2; ++fi) {
        qattn_dtype f = FP8[fi];
        int nans = 0;
        for (int c = 0; c < 256; ++c) {
            float got = qattn_fp8_to_f32((uint8_t)c, f);
            if (fp8_is_nan_code((uint8_t)c, f)) {
                QT_CHECK(&rng, isnan(got), "%s code 0x%02X must decode to NaN, got %g",
                         fp8_name(f), c, got);
                ++nans;
                continue;
            }
            double want = fp8_expected((uint8_t)c, f);
            QT_CHECK(&rng, (double)got == want && (signbit(got) != 0) == (signbit(want) != 0),
                     "%s code 0x%02X: got %.9g want %.9g", fp8_name(f), c, got, want);
        }
        assert_int_equal(nans, is_fn(f) ? 2 : 1);
    }
    /* The table of spec section 1. */
    assert_true(qattn_fp8_to_f32(0x7E, QATTN_FP8_E4M3FN) == 448.0f);
    assert_true(qattn_fp8_to_f32(0x01, QATTN_FP8_E4M3FN) == 0x1p-9f);
    assert_true(qattn_fp8_to_f32(0x80, QATTN_FP8_E4M3FN) == 0.0f);
    assert_true(signbit(qattn_fp8_to_f32(0x80, QATTN_FP8_E4M3FN)));
    assert_true(qattn_fp8_to_f32(0x7F, QATTN_FP8_E4M3FNUZ) == 240.0f);
    assert_true(qattn_fp8_to_f32(0xFF, QATTN_FP8_E4M3FNUZ) == -240.0f);
    assert_true(qattn_fp8_to_f32(0x01, QATTN_FP8_E4M3FNUZ) == 0x1p-10f);
    assert_true(qattn_fp8_max(QATTN_FP8_E4M3FN) == 448.0f);
    assert_true(qattn_fp8_max(QATTN_FP8_E4M3FNUZ) == 240.0f);
    assert_true(qattn_fp8_max(QATTN_BF16) == 0.0f);
    assert_true(isnan(qattn_fp8_to_f32(0x10, QATTN_I8)));
}

/* ---- fp8 encode ----------------------------------------------------------- */

static void test_fp8_roundtrip_every_code(void **state) {
    (void)state;
    qt_rng rng = qt_rng_for("convert.fp8_roundtrip");
    for (int fi = 0; fi < 2; ++fi) {
        qattn_dtype f = FP8[fi];
        for (int c = 0; c < 256; ++c) {
            if (fp8_is_nan_code((uint8_t)c, f)) continue;
            uint8_t got = qattn_f32_to_fp8(qattn_fp8_to_f32((uint8_t)c, f), f);
            QT_CHECK(&rng, got == c, "%s code 0x%02X re-encodes to 0x%02X", fp8_name(f), c, got);
        }
    }
}

/* Every exact midpoint between neighbouring codes, plus the floats just
 * either side of it, in both signs. */
static void test_fp8_ties_and_neighbours(void **state) {
    (void)state;
    qt_rng rng = qt_rng_for("convert.fp8_ties");
    for (int fi = 0; fi < 2; ++fi) {
        qattn_dtype f = FP8[fi];
        uint8_t maxc = is_fn(f) ? 0x7E : 0x7F;
        int ties = 0;
        for (int c = 0; c < maxc; ++c) {
            double lo = fp8_expected((uint8_t)c, f), hi = fp8_expected((uint8_t)(c + 1), f);
            float mid = (float)((lo + hi) / 2); /* exact: few significant bits */
            assert_true((double)mid == (lo + hi) / 2);
            uint8_t even = (c & 1) ? (uint8_t)(c + 1) : (uint8_t)c;
            for (int sgn = 0; sgn < 2; ++sgn) {
                float x = sgn ? -mid : mid;
                uint8_t want = (uint8_t)((sgn ? 0x80 : 0) | even);
                if (even == 0) want = (sgn && is_fn(f)) ? 0x80 : 0x00;
                uint8_t got = qattn_f32_to_fp8(x, f);
                QT_CHECK(&rng, got == want, "%s tie %.9g between 0x%02X and 0x%02X: got 0x%02X want 0x%02X",
                         fp8_name(f), x, c, c + 1, got, want);
                /* One f32 ulp either side of the tie breaks it. */
                float below = nextafterf(mid, 0.0f), above = nextafterf(mid, INFINITY);
                uint8_t wl = (uint8_t)c, wh = (uint8_t)(c + 1);
                uint8_t gl = qattn_f32_to_fp8(sgn ? -below : below, f);
                uint8_t gh = qattn_f32_to_fp8(sgn ? -above : above, f);
                uint8_t el = wl == 0 ? ((sgn && is_fn(f)) ? 0x80 : 0x00)
                                     : (uint8_t)((sgn ? 0x80 : 0) | wl);
                uint8_t eh = (uint8_t)((sgn ? 0x80 : 0) | wh);
                QT_CHECK(&rng, gl == el, "%s just below tie %.9g: got 0x%02X want 0x%02X",
                         fp8_name(f), below, gl, el);
                QT_CHECK(&rng, gh == eh, "%s just above tie %.9g: got 0x%02X want 0x%02X",
                         fp8_name(f), above, gh, eh);
                ++ties;
            }
        }
        assert_int_equal(ties, 2 * maxc);
    }
    /* Written out: fn 1.0 = 0x38, 1.125 = 0x39, tie 1.0625 -> 0x38 (even);
     * 1.1875 (between 0x39 and 0x3A = 1.25) -> 0x3A. fn min subnormal 2^-9:
     * half of it (2^-10) is a tie with 0 -> 0x00 / -0 -> 0x80. */
    assert_int_equal(qattn_f32_to_fp8(1.0625f, QATTN_FP8_E4M3FN), 0x38);
    assert_int_equal(qattn_f32_to_fp8(1.1875f, QATTN_FP8_E4M3FN), 0x3A);
    assert_int_equal(qattn_f32_to_fp8(0x1p-10f, QATTN_FP8_E4M3FN), 0x00);
    assert_int_equal(qattn_f32_to_fp8(-0x1p-10f, QATTN_FP8_E4M3FN), 0x80);
    assert_int_equal(qattn_f32_to_fp8(0x1.8p-9f, QATTN_FP8_E4M3FN), 0x02); /* 1.5 * 2^-9: tie -> 2 */
    /* fnuz: 1.0 = 0x40 (e = 8), min subnormal 2^-10, -tiny -> 0x00. */
    assert_int_equal(qattn_f32_to_fp8(1.0f, QATTN_FP8_E4M3FNUZ), 0x40);
    assert_int_equal(qattn_f32_to_fp8(-0x1p-11f, QATTN_FP8_E4M3FNUZ), 0x00);
    assert_int_equal(qattn_f32_to_fp8(-0x1.8p-10f, QATTN_FP8_E4M3FNUZ), 0x82);
}

static void test_fp8_saturation_zero_nan(void **state) {
    (void)state;
    /* fn: max 448 = 0x7E. 464 is the midpoint to the (NaN) code 0x7F and
     * everything beyond saturates. */
    const float big[] = {448.0f, 448.5f, 464.0f, 479.0f, 480.0f, 1e6f, FLT_MAX, INFINITY};
    for (size_t i = 0; i < sizeof big / sizeof big[0]; ++i) {
        assert_int_equal(qattn_f32_to_fp8(big[i], QATTN_FP8_E4M3FN), 0x7E);
        assert_int_equal(qattn_f32_to_fp8(-big[i], QATTN_FP8_E4M3FN), 0xFE);
    }
    const float bigz[] = {240.0f, 241.0f, 248.0f, 256.0f, 1e6f, FLT_MAX, INFINITY};
    for (size_t i = 0; i < sizeof bigz / sizeof bigz[0]; ++i) {
        assert_int_equal(qattn_f32_to_fp8(bigz[i], QATTN_FP8_E4M3FNUZ), 0x7F);
        assert_int_equal(qattn_f32_to_fp8(-bigz[i], QATTN_FP8_E4M3FNUZ), 0xFF);
    }
    /* Just below max stays below: fn 416 (0x7D) .. 448 midpoint 432 -> even 0x7E. */
    assert_int_equal(qattn_f32_to_fp8(432.0f, QATTN_FP8_E4M3FN), 0x7E);
    assert_int_equal(qattn_f32_to_fp8(431.0f, QATTN_FP8_E4M3FN), 0x7D);
    /* zeros */
    assert_int_equal(qattn_f32_to_fp8(0.0f, QATTN_FP8_E4M3FN), 0x00);
    assert_int_equal(qattn_f32_to_fp8(-0.0f, QATTN_FP8_E4M3FN), 0x80);
    assert_int_equal(qattn_f32_to_fp8(0.0f, QATTN_FP8_E4M3FNUZ), 0x00);
    assert_int_equal(qattn_f32_to_fp8(-0.0f, QATTN_FP8_E4M3FNUZ), 0x00);
    assert_int_equal(qattn_f32_to_fp8(FLT_TRUE_MIN, QATTN_FP8_E4M3FN), 0x00);
    assert_int_equal(qattn_f32_to_fp8(-FLT_TRUE_MIN, QATTN_FP8_E4M3FN), 0x80);
    /* NaN of either sign, quiet or signalling */
    uint32_t nan_bits[] = {0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0xFFBFFFFFu};
    for (size_t i = 0; i < 4; ++i) {
        float n;
        memcpy(&n, &nan_bits[i], 4);
        assert_int_equal(qattn_f32_to_fp8(n, QATTN_FP8_E4M3FN), 0x7F);
        assert_int_equal(qattn_f32_to_fp8(n, QATTN_FP8_E4M3FNUZ), 0x80);
    }
}

/* Random floats over the whole fp8 range and beyond, against brute force. */
static void test_fp8_encode_random_vs_bruteforce(void **state) {
    (void)state;
    qt_rng rng = qt_rng_for("convert.fp8_random");
    for (int fi = 0; fi < 2; ++fi) {
        qattn_dtype f = FP8[fi];
        for (int i = 0; i < 60000; ++i) {
            /* log-uniform magnitude in [2^-13, 2^10), random sign */
            float x = (float)ldexp(1.0 + qt_unit(&rng), (int)qt_int(&rng, -13, 9));
            if (qt_u64(&rng) & 1) x = -x;
            uint8_t got = qattn_f32_to_fp8(x, f), want = fp8_brute_encode(x, f);
            QT_CHECK(&rng, got == want, "%s encode(%a): got 0x%02X want 0x%02X", fp8_name(f), x,
                     got, want);
        }
    }
}

/* ---- fp8 e5m2 ------------------------------------------------------------- */

/* e5m2 from its own formula (bias 15, two mantissa bits): e = 0:
 * (-1)^s 2^-14 m/4; e = 31: inf (m = 0) or NaN; else (-1)^s 2^(e-15) (1 + m/4). */
static double e5m2_expected(uint8_t c) {
    int s = (c >> 7) & 1, e = (c >> 2) & 31, m = c & 3;
    double v = e == 31 ? (m ? NAN : INFINITY)
                       : e == 0 ? pow(2.0, -14) * (m / 4.0) : pow(2.0, e - 15) * (1.0 + m / 4.0);
    return s ? -v : v;
}

static int e5m2_finite(uint8_t c) { return (c & 0x7C) != 0x7C; }

/* Nearest finite code by brute force, ties to the even code, beyond the
 * largest finite (57344 = 0x7B) saturating, -0 / negative underflow 0x80. */
static uint8_t e5m2_brute_encode(float x) {
    if (isnan(x)) return 0x7F;
    int neg = signbit(x) != 0;
    double a = fabs((double)x);
    int best = -1;
    double best_d = INFINITY;
    for (int c = 0; c <= 0x7B; ++c) {
        double d = fabs(e5m2_expected((uint8_t)c) - a);
        if (d < best_d || (d == best_d && (c & 1) == 0)) {
            best = c;
            best_d = d;
        }
    }
    if (isinf(a)) best = 0x7B; /* the search above gives NaN distances for inf */
    return (uint8_t)((neg ? 0x80 : 0) | best);
}

/* Every code is the top byte of an f16: f16(code << 8), bit for bit, inf
 * and NaN codes too; and the values agree with the formula. */
static void test_e5m2_decode_all_codes(void **state) {
    (void)state;
    qt_rng rng = qt_rng_for("convert.e5m2_decode");
    int nans = 0, infs = 0;
    for (int c = 0; c < 256; ++c) {
        float got = qattn_fp8_to_f32((uint8_t)c, QATTN_FP8_E5M2);
        float as_f16 = qattn_f16_to_f32((uint16_t)(c << 8));
        double want = e5m2_expected((uint8_t)c);
        if (isnan(want)) {
            QT_CHECK(&rng, isnan(got) && isnan(as_f16), "e5m2 code 0x%02X must decode to NaN, got %g", c, got);
            ++nans;
            continue;
        }
        if (isinf(want)) ++infs;
        QT_CHECK(&rng, memcmp(&got, &as_f16, 4) == 0, "e5m2 code 0x%02X: got %a, f16(0x%04X) is %a", c, got,
                 c << 8, as_f16);
        QT_CHECK(&rng, (double)got == want && (signbit(got) != 0) == (signbit(want) != 0),
                 "e5m2 code 0x%02X: got %.9g want %.9g", c, got, want);
    }
    assert_int_equal(nans, 6);
    assert_int_equal(infs, 2);
    /* Written out: 1.0 = 0x3C (e = 15); max 0x7B = 2^15 * 1.75 = 57344; min
     * subnormal 0x01 = 2^-16; 0x80 = -0. */
    assert_true(qattn_fp8_to_f32(0x3C, QATTN_FP8_E5M2) == 1.0f);
    assert_true(qattn_fp8_to_f32(0x7B, QATTN_FP8_E5M2) == 57344.0f);
    assert_true(qattn_fp8_to_f32(0xFB, QATTN_FP8_E5M2) == -57344.0f);
    assert_true(qattn_fp8_to_f32(0x01, QATTN_FP8_E5M2) == 0x1p-16f);
    assert_true(qattn_fp8_to_f32(0x80, QATTN_FP8_E5M2) == 0.0f && signbit(qattn_fp8_to_f32(0x80, QATTN_FP8_E5M2)));
    assert_true(qattn_fp8_to_f32(0x7C, QATTN_FP8_E5M2) == INFINITY);
    assert_true(qattn_fp8_to_f32(0xFC, QATTN_FP8_E5M2) == -INFINITY);
    assert_true(qattn_fp8_max(QATTN_FP8_E5M2) == 57344.0f);
}

static void test_e5m2_roundtrip_every_code(void **state) {
    (void)state;
    qt_rng rng = qt_rng_for("convert.e5m2_roundtrip");
    int n = 0;
    for (int c = 0; c < 256; ++c) {
        if (!e5m2_finite((uint8_t)c)) continue;
        uint8_t got = qattn_f32_to_fp8(qattn_fp8_to_f32((uint8_t)c, QATTN_FP8_E5M2), QATTN_FP8_E5M2);
        QT_CHECK(&rng, got == c, "e5m2 code 0x%02X re-encodes to 0x%02X", c, got);
        ++n;
    }
    assert_int_equal(n, 248);
}

/* Every midpoint between neighbouring finite codes goes to the even code;
 * one f32 ulp either side goes to the nearer one. */
static void test_e5m2_ties_and_neighbours(void **state) {
    (void)state;
    qt_rng rng = qt_rng_for("convert.e5m2_ties");
    int ties = 0;
    for (int c = 0; c < 0x7B; ++c) {
        double lo = e5m2_expected((uint8_t)c), hi = e5m2_expected((uint8_t)(c + 1));
        float mid = (float)((lo + hi) / 2);
        assert_true((double)mid == (lo + hi) / 2);
        uint8_t even = (c & 1) ? (uint8_t)(c + 1) : (uint8_t)c;
        for (int sgn = 0; sgn < 2; ++sgn) {
            const uint8_t s = sgn ? 0x80 : 0x00;
            float x = sgn ? -mid : mid;
            uint8_t got = qattn_f32_to_fp8(x, QATTN_FP8_E5M2);
            QT_CHECK(&rng, got == (s | even), "e5m2 tie %.9g between 0x%02X and 0x%02X: got 0x%02X want 0x%02X", x,
                     c, c + 1, got, s | even);
            float below = nextafterf(mid, 0.0f), above = nextafterf(mid, INFINITY);
            uint8_t gl = qattn_f32_to_fp8(sgn ? -below : below, QATTN_FP8_E5M2);
            uint8_t gh = qattn_f32_to_fp8(sgn ? -above : above, QATTN_FP8_E5M2);
            QT_CHECK(&rng, gl == (s | c), "e5m2 just below tie %.9g: got 0x%02X want 0x%02X", below, gl, s | c);
            QT_CHECK(&rng, gh == (s | (c + 1)), "e5m2 just above tie %.9g: got 0x%02X want 0x%02X", above, gh,
                     s | (c + 1));
            ++ties;
        }
    }
    assert_int_equal(ties, 2 * 0x7B);
    /* Written out: 1.0 = 0x3C, 1.25 = 0x3D: tie 1.125 -> 0x3C (even);
     * 1.375 (between 0x3D and 0x3E = 1.5) -> 0x3E. Half the smallest
     * subnormal (2^-17) ties with 0 -> 0x00 / -0 -> 0x80; 1.5 * 2^-16 ->
     * 0x02. 53248 is the tie of 49152 (0x7A) and 57344 (0x7B) -> 0x7A. */
    assert_int_equal(qattn_f32_to_fp8(1.125f, QATTN_FP8_E5M2), 0x3C);
    assert_int_equal(qattn_f32_to_fp8(1.375f, QATTN_FP8_E5M2), 0x3E);
    assert_int_equal(qattn_f32_to_fp8(0x1p-17f, QATTN_FP8_E5M2), 0x00);
    assert_int_equal(qattn_f32_to_fp8(-0x1p-17f, QATTN_FP8_E5M2), 0x80);
    assert_int_equal(qattn_f32_to_fp8(0x1.8p-16f, QATTN_FP8_E5M2), 0x02);
    assert_int_equal(qattn_f32_to_fp8(53248.0f, QATTN_FP8_E5M2), 0x7A);
    assert_int_equal(qattn_f32_to_fp8(53249.0f, QATTN_FP8_E5M2), 0x7B);
}

/* Saturation at +-57344 (infinity included: e5m2 has an infinity code, the
 * KV store never writes it), NaN -> 0x7F, the zeros. */
static void test_e5m2_saturation_zero_nan(void **state) {
    (void)state;
    const float big[] = {57344.0f, 57345.0f, 61439.0f, 61440.0f, 65504.0f, 65536.0f, 1e6f, FLT_MAX, INFINITY};
    for (size_t i = 0; i < sizeof big / sizeof big[0]; ++i) {
        assert_int_equal(qattn_f32_to_fp8(big[i], QATTN_FP8_E5M2), 0x7B);
        assert_int_equal(qattn_f32_to_fp8(-big[i], QATTN_FP8_E5M2), 0xFB);
    }
    assert_int_equal(qattn_f32_to_fp8(0.0f, QATTN_FP8_E5M2), 0x00);
    assert_int_equal(qattn_f32_to_fp8(-0.0f, QATTN_FP8_E5M2), 0x80);
    assert_int_equal(qattn_f32_to_fp8(FLT_TRUE_MIN, QATTN_FP8_E5M2), 0x00);
    assert_int_equal(qattn_f32_to_fp8(-FLT_TRUE_MIN, QATTN_FP8_E5M2), 0x80);
    uint32_t nan_bits[] = {0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0xFFBFFFFFu};
    for (size_t i = 0; i < 4; ++i) {
        float n;
        memcpy(&n, &nan_bits[i], 4);
        assert_int_equal(qattn_f32_to_fp8(n, QATTN_FP8_E5M2), 0x7F);
    }
}

/* Random floats over the whole e5m2 range and beyond, against brute force;
 * and every f16 value: its e5m2 code is the f16 rounded to its top byte. */
static void test_e5m2_encode_random_vs_bruteforce(void **state) {
    (void)state;
    qt_rng rng = qt_rng_for("convert.e5m2_random");
    for (int i = 0; i < 60000; ++i) {
        /* log-uniform magnitude in [2^-19, 2^17), random sign */
        float x = (float)ldexp(1.0 + qt_unit(&rng), (int)qt_int(&rng, -19, 16));
        if (qt_u64(&rng) & 1) x = -x;
        uint8_t got = qattn_f32_to_fp8(x, QATTN_FP8_E5M2), want = e5m2_brute_encode(x);
        QT_CHECK(&rng, got == want, "e5m2 encode(%a): got 0x%02X want 0x%02X", x, got, want);
    }
    for (uint32_t h = 0; h < 0x10000u; ++h) {
        float x = qattn_f16_to_f32((uint16_t)h);
        if (isnan(x)) continue;
        uint8_t got = qattn_f32_to_fp8(x, QATTN_FP8_E5M2), want = e5m2_brute_encode(x);
        QT_CHECK(&rng, got == want, "e5m2 encode(f16 0x%04X = %a): got 0x%02X want 0x%02X", h, x, got, want);
    }
}

/* ---- fn -> fnuz ----------------------------------------------------------- */

static void test_fn_as_fnuz(void **state) {
    (void)state;
    qt_rng rng = qt_rng_for("convert.fn_as_fnuz");
    float scales[16];
    qt_fill_f32_pos(&rng, scales, 16, 1e-3f, 10.0f);
    scales[0] = 1.0f;
    for (int c = 0; c < 256; ++c) {
        uint8_t z = qattn_fp8_fn_code_as_fnuz((uint8_t)c);
        if ((c & 0x7F) == 0x7F) {
            assert_int_equal(z, 0x80);
            assert_true(isnan(qattn_fp8_to_f32(z, QATTN_FP8_E4M3FNUZ)));
            continue;
        }
        if (c == 0x80) assert_int_equal(z, 0x00);
        else assert_int_equal(z, c);
        double vfn = fp8_expected((uint8_t)c, QATTN_FP8_E4M3FN);
        double vz = qattn_fp8_to_f32(z, QATTN_FP8_E4M3FNUZ);
        QT_CHECK(&rng, 2.0 * vz == vfn, "fn 0x%02X = %g but as fnuz 0x%02X = %g (want half)", c,
                 vfn, z, vz);
        /* value-exact with the doubled scale, in f32 as a kernel computes it */
        for (int s = 0; s < 16; ++s) {
            float a = qattn_fp8_to_f32((uint8_t)c, QATTN_FP8_E4M3FN) * scales[s];
            float b = qattn_fp8_to_f32(z, QATTN_FP8_E4M3FNUZ) * (2.0f * scales[s]);
            QT_CHECK(&rng, a == b, "fn 0x%02X * %g = %a but fnuz * 2s = %a", c, scales[s], a, b);
        }
    }
}

/* ---- bf16 ----------------------------------------------------------------- */

static uint32_t bits_of(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
}
static float float_of(uint32_t u) {
    float x;
    memcpy(&x, &u, 4);
    return x;
}

/* Nearest bf16 by comparing distances in f64 to the two candidates that
 * bracket x (truncation and the next code away from zero). */
static uint16_t bf16_brute(float x) {
    uint32_t u = bits_of(x);
    uint16_t t = (uint16_t)(u >> 16);
    if ((u & 0xFFFFu) == 0) return t;
    uint16_t n = (uint16_t)(t + 1); /* next magnitude (may become inf) */
    double dx = fabs((double)x);
    double dt = fabs((double)float_of((uint32_t)t << 16)), dn = fabs((double)float_of((uint32_t)n << 16));
    double et = dx - dt, en = dn - dx;
    if (isinf(dn)) en = (double)0x1p128 - dx; /* inf sits where 2^128 would */
    if (et < en) return t;
    if (en < et) return n;
    return (t & 1) ? n : t;
}

static void test_bf16(void **state) {
    (void)state;
    qt_rng rng = qt_rng_for("convert.bf16");
    /* 1.0 = 0x3F80; bf16 ulp at 1 is 2^-7. 1 + 2^-8 is the tie between
     * 0x3F80 (even) and 0x3F81: -> 0x3F80. 1 + 3*2^-8 ties 0x3F81 / 0x3F82
     * -> 0x3F82 (even). */
    assert_int_equal(qattn_f32_to_bf16(1.0f), 0x3F80);
    assert_int_equal(qattn_f32_to_bf16(1.0f + 0x1p-8f), 0x3F80);
    assert_int_equal(qattn_f32_to_bf16(1.0f + 3 * 0x1p-8f), 0x3F82);
    assert_int_equal(qattn_f32_to_bf16(-(1.0f + 3 * 0x1p-8f)), 0xBF82);
    assert_int_equal(qattn_f32_to_bf16(nextafterf(1.0f + 0x1p-8f, 2.0f)), 0x3F81);
    assert_int_equal(qattn_f32_to_bf16(nextafterf(1.0f + 3 * 0x1p-8f, 0.0f)), 0x3F81);
    assert_int_equal(qattn_f32_to_bf16(-0.0f), 0x8000);
    assert_int_equal(qattn_f32_to_bf16(FLT_MAX), 0x7F80); /* rounds up to inf */
    assert_int_equal(qattn_f32_to_bf16(-INFINITY), 0xFF80);
    assert_int_equal(qattn_f32_to_bf16(float_of(0x00008000u)), 0x0000); /* subnormal tie -> even 0 */
    assert_int_equal(qattn_f32_to_bf16(float_of(0x00018000u)), 0x0002);
    /* NaN: stays NaN and quiet, even a signalling NaN whose payload lives
     * only in the dropped low bits (truncation would make it inf). */
    uint32_t nans[] = {0x7FC00000u, 0xFFC00001u, 0x7F800001u, 0xFF80FFFFu, 0x7FBF0000u};
    for (size_t i = 0; i < 5; ++i) {
        uint16_t b = qattn_f32_to_bf16(float_of(nans[i]));
        assert_true(isnan(qattn_bf16_to_f32(b)));
        assert_true(b & 0x0040); /* quiet bit */
        assert_int_equal(b >> 15, nans[i] >> 31);
    }
    /* decode is the top half of f32 */
    for (uint32_t b = 0; b < 0x10000u; ++b) {
        float v = qattn_bf16_to_f32((uint16_t)b);
        assert_true(bits_of(v) == b << 16);
        if (!isnan(v)) assert_int_equal(qattn_f32_to_bf16(v), b);
    }
    for (int i = 0; i < 200000; ++i) {
        float x = float_of(qt_u32(&rng));
        if (isnan(x)) continue;
        uint16_t got = qattn_f32_to_bf16(x), want = bf16_brute(x);
        QT_CHECK(&rng, got == want, "bf16(%a): got 0x%04X want 0x%04X", x, got, want);
    }
}

/* ---- f16 ------------------------------------------------------------------ */

static double f16_expected(uint16_t c) {
    int s = c >> 15, e = (c >> 10) & 31, m = c & 1023;
    double v = e == 0 ? pow(2.0, -14) * (m / 1024.0) : pow(2.0, e - 15) * (1.0 + m / 1024.0);
    return s ? -v : v;
}

static void test_f16(void **state) {
    (void)state;
    qt_rng rng = qt_rng_for("convert.f16");
    for (uint32_t c = 0; c < 0x10000u; ++c) {
        float v = qattn_f16_to_f32((uint16_t)c);
        int e = (c >> 10) & 31, m = c & 1023;
        if (e == 31) {
            if (m) {
                assert_true(isnan(v));
            } else {
                assert_true(isinf(v) && (signbit(v) != 0) == ((c >> 15) != 0));
                assert_int_equal(qattn_f32_to_f16(v), c);
            }
            continue;
        }
        QT_CHECK(&rng, (double)v == f16_expected((uint16_t)c) && (signbit(v) != 0) == ((c >> 15) != 0),
                 "f16 0x%04X -> %a", c, v);
        QT_CHECK(&rng, qattn_f32_to_f16(v) == c, "f16 0x%04X re-encodes to 0x%04X", c,
                 qattn_f32_to_f16(v));
        /* ties: midpoint to the next code (not across inf) */
        if ((c & 0x7FFF) < 0x7BFF) {
            double lo = f16_expected((uint16_t)c), hi = f16_expected((uint16_t)(c + 1));
            float mid = (float)((lo + hi) / 2);
            assert_true((double)mid == (lo + hi) / 2);
            uint16_t even = (c & 1) ? (uint16_t)(c + 1) : (uint16_t)c;
            QT_CHECK(&rng, qattn_f32_to_f16(mid) == even, "f16 tie %a: got 0x%04X want 0x%04X",
                     mid, qattn_f32_to_f16(mid), even);
            float above = (c & 0x8000) ? nextafterf(mid, -INFINITY) : nextafterf(mid, INFINITY);
            QT_CHECK(&rng, qattn_f32_to_f16(above) == c + 1, "f16 past tie %a: got 0x%04X", above,
                     qattn_f32_to_f16(above));
        }
    }
    /* overflow: 65504 max; 65520 is the tie to "65536" -> inf */
    assert_int_equal(qattn_f32_to_f16(65504.0f), 0x7BFF);
    assert_int_equal(qattn_f32_to_f16(65519.0f), 0x7BFF);
    assert_int_equal(qattn_f32_to_f16(65520.0f), 0x7C00);
    assert_int_equal(qattn_f32_to_f16(-1e30f), 0xFC00);
    assert_int_equal(qattn_f32_to_f16(0x1p-25f), 0x0000);   /* tie with 0 -> even */
    assert_int_equal(qattn_f32_to_f16(-0x1p-25f), 0x8000);
    assert_int_equal(qattn_f32_to_f16(0x1.8p-24f), 0x0002); /* tie 1/2 -> 2 */
    assert_int_equal(qattn_f32_to_f16(-0.0f), 0x8000);
    uint16_t n = qattn_f32_to_f16(float_of(0x7F800001u));
    assert_true(isnan(qattn_f16_to_f32(n)) && (n & 0x0200));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fp8_decode_all_codes),
        cmocka_unit_test(test_fp8_roundtrip_every_code),
        cmocka_unit_test(test_fp8_ties_and_neighbours),
        cmocka_unit_test(test_fp8_saturation_zero_nan),
        cmocka_unit_test(test_fp8_encode_random_vs_bruteforce),
        cmocka_unit_test(test_e5m2_decode_all_codes),
        cmocka_unit_test(test_e5m2_roundtrip_every_code),
        cmocka_unit_test(test_e5m2_ties_and_neighbours),
        cmocka_unit_test(test_e5m2_saturation_zero_nan),
        cmocka_unit_test(test_e5m2_encode_random_vs_bruteforce),
        cmocka_unit_test(test_fn_as_fnuz),
        cmocka_unit_test(test_bf16),
        cmocka_unit_test(test_f16),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
