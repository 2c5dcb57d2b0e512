/*
 * Number-format primitives of the HIP kernels (spec section 1).
 *
 * Decoding: four fp8 codes arrive in one 32-bit word (byte i = element i).
 *   gfx942 and gfx12 have a native packed converter, v_cvt_pk_f32_fp8, that
 *   turns two codes (one 16-bit half of the word, chosen by the word-select
 *   operand) into two f32. Its input format is the target's native fp8:
 *     gfx942: E4M3 FNUZ (bias 8)       gfx12: OCP E4M3 FN (bias 7)
 *   The other format goes through exact bit arithmetic, except fn codes on
 *   gfx942, which use the spec-1 re-encoding: the same bytes read as fnuz
 *   after 0x80 -> 0x00 and NaN -> 0x80 are exactly half the fn value, so the
 *   kernel doubles the scale it multiplies by (qh_fp8_factor).
 *   Everywhere else (NVIDIA) both formats use the bit arithmetic.
 * Encoding (KV store): RNE with satfinite, bit-exact with the reference
 *   encoder in core/src/convert.c; done in integer/f32 arithmetic on every
 *   target so no converter's rounding or NaN convention can differ.
 */
#ifndef QH_FP8_H
#define QH_FP8_H

#include "qh_device.h"
#include "qh_params.h" /* QH_BF16, QH_FN, QH_FNUZ, QH_I8 */

/* ---- exact bit-arithmetic decode of one E4M3 code ----
 * The 7 magnitude bits shifted to an f32's exponent/mantissa position read
 * as 2^(e-127) (1 + m/8) for e > 0 and as the f32 subnormal m/8 * 2^-126 for
 * e = 0; one multiply by 2^(127 - bias) turns both into the E4M3 value
 * exactly (a power-of-two scaling; f32 subnormals are kept, never flushed,
 * in every build of these kernels). Then the sign, and the format's NaN. */
template <int FMT> QH_DEV float qh_fp8_decode_bits(uint32_t c) {
    constexpr float scale = FMT == QH_FN ? 0x1p120f : 0x1p119f; /* 2^(127 - bias) */
    const uint32_t mag = c & 0x7Fu;
    const float v = qh_bits_f32(qh_f32_bits(qh_bits_f32(mag << 20) * scale) | ((c & 0x80u) << 24));
    const bool nan = FMT == QH_FN ? mag == 0x7Fu : c == 0x80u;
    return nan ? __builtin_nanf("") : v;
}

/* The fn -> fnuz re-encoding of four codes at once (spec 1): bytes 0x80
 * become 0x00, bytes 0x7F/0xFF (fn NaN) become 0x80 (fnuz NaN), all others
 * stay. Read as fnuz, the result is exactly half the fn value. */
QH_DEV uint32_t qh_fn_to_fnuz_x4(uint32_t w) {
    const uint32_t low7 = w & 0x7F7F7F7Fu;
    const uint32_t nan_hi = (low7 + 0x01010101u) & 0x80808080u;   /* low7 == 0x7F */
    const uint32_t nonzero_hi = (low7 + 0x7F7F7F7Fu) & 0x80808080u; /* low7 != 0 */
    const uint32_t negzero_hi = w & 0x80808080u & ~nonzero_hi;
    const uint32_t nan_full = (nan_hi >> 7) * 0xFFu;
    return (w & ~negzero_hi & ~nan_full) | nan_hi;
}

/* Which path a format takes on this target. */
template <int FMT> struct qh_fp8_path {
#if defined(QH_GFX942)
    static constexpr bool native = true; /* fnuz native, fn re-encoded */
    static constexpr bool reencode = FMT == QH_FN;
#elif defined(QH_GFX12)
    static constexpr bool native = FMT == QH_FN;
    static constexpr bool reencode = false;
#else
    static constexpr bool native = false;
    static constexpr bool reencode = false;
#endif
};

/* The factor by which decoded values must be multiplied (folded into the
 * per-token scale by callers): 2 for re-encoded fn on gfx942, else 1. */
template <int FMT> QH_DEV constexpr float qh_fp8_factor() {
    return qh_fp8_path<FMT>::reencode ? 2.0f : 1.0f;
}

#if defined(QH_GFX942) || defined(QH_GFX12)
/* V_CVT_PK_F32_FP8: the two codes of one 16-bit half of w (HI selects the
 * upper half, the instruction's word-select / OPSEL bit) in the target's
 * native fp8 format (fnuz on gfx942, fn on gfx12) -> two f32, lower byte
 * first. The host simulation decodes them exactly as the ISA defines. */
template <bool HI> QH_DEV void qh_cvt_pk_f32_fp8(uint32_t w, float out[2]) {
#if defined(QH_AMD)
    typedef float v2f __attribute__((ext_vector_type(2)));
    const v2f r = __builtin_amdgcn_cvt_pk_f32_fp8((int)w, HI);
    out[0] = r.x;
    out[1] = r.y;
#else
#if defined(QH_GFX942)
    constexpr int NATIVE = QH_FNUZ;
#else
    constexpr int NATIVE = QH_FN;
#endif
    const uint32_t h = HI ? w >> 16 : w;
    out[0] = qh_fp8_decode_bits<NATIVE>(h & 0xFFu);
    out[1] = qh_fp8_decode_bits<NATIVE>((h >> 8) & 0xFFu);
#endif
}
#endif

/* Four codes of one word -> four f32 (times 1/qh_fp8_factor). */
template <int FMT> QH_DEV void qh_fp8x4_to_f32(uint32_t w, float out[4]) {
#if defined(QH_GFX942) || defined(QH_GFX12)
    if constexpr (qh_fp8_path<FMT>::native) {
        if constexpr (qh_fp8_path<FMT>::reencode) w = qh_fn_to_fnuz_x4(w);
        qh_cvt_pk_f32_fp8<false>(w, out);     /* bytes 0, 1 */
        qh_cvt_pk_f32_fp8<true>(w, out + 2);  /* bytes 2, 3 */
        return;
    }
#endif
    for (int i = 0; i < 4; ++i) out[i] = qh_fp8_decode_bits<FMT>((w >> (8 * i)) & 0xFFu);
}

/* ---- encoding (KV store) ---- */
/* f32 -> e5m2 code (bias 15, 2 mantissa bits), RNE, finite values at or
 * beyond 57344 saturate to +-57344 (0x7B / 0xFB); NaN -> 0x7F; a value that
 * rounds to zero keeps its sign (-0 -> 0x80). */
QH_DEV uint32_t qh_f32_to_e5m2(float x) {
    if (qh_isnan(x)) return 0x7Fu;
    const uint32_t neg = qh_f32_bits(x) >> 31;
    const float a = qh_fabsf(x);
    uint32_t c;
    if (a >= 57344.0f) {
        c = 0x7Bu;
    } else if (a < 0x1p-14f) {
        c = (uint32_t)qh_rintf(a * 0x1p16f); /* subnormal steps of 2^-16: exact scaling, RNE */
    } else {
        const uint32_t u = qh_f32_bits(a);
        /* keep 2 mantissa bits, ties to even, carry into the exponent */
        const uint32_t r = (u + 0xFFFFFu + ((u >> 21) & 1u)) >> 21;
        c = r - ((127u - 15u) << 2);
    }
    if (c > 0x7Bu) c = 0x7Bu;
    return (neg << 7) | c;
}

/* f32 -> fp8 code, RNE, satfinite; NaN -> 0x7F (fn) / 0x80 (fnuz); a value
 * that rounds to zero keeps its sign in fn (0x80) and is 0x00 in fnuz.
 * e5m2: qh_f32_to_e5m2. */
template <int FMT> QH_DEV uint32_t qh_f32_to_fp8(float x) {
    if constexpr (FMT == QH_E5M2) return qh_f32_to_e5m2(x);
    constexpr uint32_t bias = FMT == QH_FN ? 7u : 8u;
    constexpr uint32_t max_code = FMT == QH_FN ? 0x7Eu : 0x7Fu;
    constexpr float max_value = FMT == QH_FN ? 448.0f : 240.0f;
    /* 2^(1 - bias): the smallest normal; below it the step is 2^(1-bias-3). */
    constexpr float min_normal = FMT == QH_FN ? 1.0f / 64.0f : 1.0f / 128.0f;
    constexpr float to_sub_units = FMT == QH_FN ? 512.0f : 1024.0f;
    if (qh_isnan(x)) return FMT == QH_FN ? 0x7Fu : 0x80u;
    const uint32_t neg = qh_f32_bits(x) >> 31;
    const float a = qh_fabsf(x);
    uint32_t c;
    if (a >= max_value) {
        c = max_code; /* infinity too: the format has none */
    } else if (a < min_normal) {
        c = (uint32_t)qh_rintf(a * to_sub_units); /* exact scaling, RNE */
    } else {
        const uint32_t u = qh_f32_bits(a);
        /* keep 3 mantissa bits, ties to even, carry into the exponent */
        const uint32_t r = (u + 0x7FFFFu + ((u >> 20) & 1u)) >> 20;
        c = r - ((127u - bias) << 3);
    }
    if (c > max_code) c = max_code;
    if (FMT == QH_FNUZ && c == 0) return 0u;
    return (neg << 7) | c;
}

#endif /* QH_FP8_H */
