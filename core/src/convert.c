/*
 * Scalar number-format conversions, exactly spec section 1.
 *
 * Written for obvious correctness, not speed: every encoder computes the
 * quantum (distance between neighbouring codes) at the value's binade, divides
 * by it exactly (a power of two), and rounds the quotient to the nearest
 * integer with ties to even by explicit comparison. The code word then
 * follows from the binade and the rounded integer, so there is no bit trick
 * to get wrong and no dependence on the floating-point rounding mode.
 */
#include <math.h>
#include <string.h>

#include "qattn/convert.h"

/* Rounds a non-negative double to the nearest integer, ties to even. */
static double round_half_even(double x) {
    double lo = floor(x);
    double frac = x - lo; /* exact: x and lo share a binade or lo is 0 */
    if (frac > 0.5) return lo + 1.0;
    if (frac < 0.5) return lo;
    return fmod(lo, 2.0) == 0.0 ? lo : lo + 1.0;
}

/* floor(log2(a)) for finite a > 0. */
static int floor_log2(double a) {
    int e;
    (void)frexp(a, &e); /* a = f * 2^e, f in [0.5, 1) */
    return e - 1;
}

/*
 * Encodes the magnitude a >= 0 (finite) into a sign-less code of a binary
 * format with `mbits` mantissa bits and minimum normal exponent `emin`.
 * With E = max(floor(log2 a), emin) and quantum 2^(E - mbits), the code is
 * ((E - emin) << mbits) + round(a / quantum). This single formula covers
 * subnormals (E = emin, integer below 2^mbits) and the carry into the next
 * binade (integer == 2^(mbits+1) gives the next exponent's first code).
 * Returns the code as int64 so the caller can saturate.
 */
static int64_t encode_magnitude(double a, int mbits, int emin) {
    if (a == 0.0) return 0;
    int e = floor_log2(a);
    if (e < emin) e = emin;
    double n = round_half_even(ldexp(a, mbits - e)); /* exact scaling */
    return ((int64_t)(e - emin) << mbits) + (int64_t)n;
}

/* ---- fp8 ----------------------------------------------------------------- */

/* Format facts of spec section 1's table. */
typedef struct fp8_format {
    int bias;
    uint8_t max_code; /* sign-less code of the largest finite value */
    float max_value;
} fp8_format;

static int fp8_format_of(qattn_dtype fmt, fp8_format *f) {
    if (fmt == QATTN_FP8_E4M3FN) {
        f->bias = 7;
        f->max_code = 0x7E; /* 0x7F is NaN: 2^8 * 1.75 = 448 */
        f->max_value = 448.0f;
        return 1;
    }
    if (fmt == QATTN_FP8_E4M3FNUZ) {
        f->bias = 8;
        f->max_code = 0x7F; /* 2^7 * 1.875 = 240 */
        f->max_value = 240.0f;
        return 1;
    }
    if (fmt == QATTN_FP8_E5M2) {
        f->bias = 15;
        f->max_code = 0x7B; /* 0x7C is inf: 2^15 * 1.75 = 57344 */
        f->max_value = 57344.0f;
        return 1;
    }
    return 0;
}

QATTN_API float qattn_fp8_max(qattn_dtype fmt) {
    fp8_format f;
    return fp8_format_of(fmt, &f) ? f.max_value : 0.0f;
}

QATTN_API float qattn_fp8_to_f32(uint8_t code, qattn_dtype fmt) {
    fp8_format f;
    if (!fp8_format_of(fmt, &f)) return NAN;
    if (fmt == QATTN_FP8_E4M3FN && (code & 0x7Fu) == 0x7Fu) return NAN;
    if (fmt == QATTN_FP8_E4M3FNUZ && code == 0x80u) return NAN;
    if (fmt == QATTN_FP8_E5M2) return qattn_f16_to_f32((uint16_t)(code << 8)); /* exact, inf and NaN too */
    int s = code >> 7, e = (code >> 3) & 0xF, m = code & 0x7;
    /* Both forms are exact in f32: at most 4 significant bits, exponent
     * within [-10, 8]. */
    float v = e == 0 ? ldexpf((float)m, 1 - f.bias - 3)      /* 2^(1-bias) * m/8 */
                     : ldexpf((float)(8 + m), e - f.bias - 3); /* 2^(e-bias) * (1 + m/8) */
    return s ? -v : v;
}

QATTN_API uint8_t qattn_f32_to_fp8(float x, qattn_dtype fmt) {
    fp8_format f;
    if (!fp8_format_of(fmt, &f)) return 0;
    if (isnan(x)) return fmt == QATTN_FP8_E4M3FNUZ ? 0x80 : 0x7F;
    int neg = signbit(x) != 0;
    double a = fabs((double)x);
    int64_t c;
    /* satfinite: anything at or beyond the largest finite (infinity too,
     * the format has none) becomes +-max. */
    if (isinf(a) || a >= (double)f.max_value)
        c = f.max_code;
    else if (fmt == QATTN_FP8_E5M2)
        c = encode_magnitude(a, 2, 1 - f.bias);
    else
        c = encode_magnitude(a, 3, 1 - f.bias);
    if (c > f.max_code) c = f.max_code; /* defensive: a < max never rounds past it */
    /* fnuz has no -0: a negative value that rounds to zero is plain 0x00
     * (0x80 is its NaN). fn keeps the sign, so -0.0 -> 0x80. */
    if (c == 0 && fmt == QATTN_FP8_E4M3FNUZ) return 0x00;
    return (uint8_t)((neg ? 0x80u : 0u) | (uint8_t)c);
}

QATTN_API uint8_t qattn_fp8_fn_code_as_fnuz(uint8_t fn_code) {
    if (fn_code == 0x80u) return 0x00;              /* -0 -> the only zero */
    if ((fn_code & 0x7Fu) == 0x7Fu) return 0x80;    /* fn NaNs -> fnuz NaN */
    return fn_code; /* bias 8 instead of 7: same bits, half the value */
}

/* ---- bf16 ---------------------------------------------------------------- */

static uint32_t f32_bits(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static float f32_from_bits(uint32_t u) {
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

QATTN_API float qattn_bf16_to_f32(uint16_t bits) { return f32_from_bits((uint32_t)bits << 16); }

QATTN_API uint16_t qattn_f32_to_bf16(float x) {
    uint32_t u = f32_bits(x);
    if (isnan(x)) return (uint16_t)((u >> 16) | 0x0040u); /* keep sign/payload, set quiet bit */
    /* bf16 is f32 with the low 16 bits dropped: round those 16 bits to
     * nearest, ties to the even upper half. Carries propagate through the
     * exponent, so the largest values round to infinity as IEEE requires. */
    uint32_t upper = u >> 16, lower = u & 0xFFFFu;
    if (lower > 0x8000u || (lower == 0x8000u && (upper & 1u))) upper += 1u;
    return (uint16_t)upper;
}

/* ---- f16 ----------------------------------------------------------------- */

QATTN_API float qattn_f16_to_f32(uint16_t bits) {
    int s = bits >> 15, e = (bits >> 10) & 0x1F, m = bits & 0x3FF;
    float v;
    if (e == 0x1F)
        v = m ? NAN : INFINITY;
    else if (e == 0)
        v = ldexpf((float)m, -24); /* 2^-14 * m/1024 */
    else
        v = ldexpf((float)(1024 + m), e - 25); /* 2^(e-15) * (1 + m/1024) */
    return s ? -v : v;
}

QATTN_API uint16_t qattn_f32_to_f16(float x) {
    uint16_t sign = signbit(x) ? 0x8000u : 0u;
    if (isnan(x)) /* quiet NaN; keep the top payload bits */
        return (uint16_t)(sign | 0x7E00u | ((f32_bits(x) >> 13) & 0x3FFu));
    double a = fabs((double)x);
    if (isinf(a)) return (uint16_t)(sign | 0x7C00u);
    /* f16: 10 mantissa bits, minimum normal exponent -14. Past the largest
     * finite (65504) the rounded code reaches 0x7C00 or beyond: infinity. */
    int64_t c = a >= 65536.0 ? 0x7C00 : encode_magnitude(a, 10, -14);
    if (c > 0x7C00) c = 0x7C00;
    return (uint16_t)(sign | (uint16_t)c);
}
