/* Element access for the CPU reference (core/src/ref_*.c): host addresses
 * from a descriptor's strides, and loads/stores of each dtype as f64/f32.
 * Not installed; static inline so each reference file stays self-contained. */
#ifndef QATTN_REF_UTIL_H
#define QATTN_REF_UTIL_H

#include <math.h>
#include <string.h>

#include "internal.h"

/* Address of element (i0, i1, i2, i3); indices past the tensor's rank are
 * ignored. Strides are in elements, as validated (non-negative). */
static inline char *qattn__ref_at(const qattn_tensor *t, int64_t i0, int64_t i1, int64_t i2,
                                  int64_t i3) {
    const int64_t idx[QATTN_MAX_RANK] = {i0, i1, i2, i3};
    int64_t e = 0;
    for (int32_t k = 0; k < t->rank; ++k) e += idx[k] * t->strides[k];
    return (char *)qattn__host_ptr(t) + e * (int64_t)qattn_dtype_size(t->dtype);
}

/* Address of element d of (slot, head g) of a cache, or of the scale of
 * (slot, g) with d = 0, through the tensor's view (internal.h): the one
 * addressing every backend uses. */
static inline char *qattn__ref_cache_at(const qattn_tensor *t, const qattn_cache_view *v,
                                        int64_t slot, int64_t g, int64_t d) {
    const int64_t e = qattn__cache_offset(v, slot, g) + d;
    return (char *)qattn__host_ptr(t) + e * (int64_t)qattn_dtype_size(t->dtype);
}

static inline int32_t qattn__ref_i32(const qattn_tensor *t, int64_t i0) {
    int32_t v;
    memcpy(&v, qattn__ref_at(t, i0, 0, 0, 0), sizeof v);
    return v;
}

static inline float qattn__ref_f32(const qattn_tensor *t, int64_t i0, int64_t i1, int64_t i2,
                                   int64_t i3) {
    float v;
    memcpy(&v, qattn__ref_at(t, i0, i1, i2, i3), sizeof v);
    return v;
}

static inline void qattn__ref_put_f32(const qattn_tensor *t, int64_t i0, int64_t i1, int64_t i2,
                                      int64_t i3, float v) {
    memcpy(qattn__ref_at(t, i0, i1, i2, i3), &v, sizeof v);
}

static inline uint16_t qattn__ref_u16(const void *p) {
    uint16_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* The value an element holds, decoded exactly (no scale applied): bf16 and
 * f32 as themselves, fp8 per spec 1, int8 as its integer. */
static inline double qattn__ref_decode_elem(const void *p, qattn_dtype dt) {
    switch (dt) {
    case QATTN_BF16: return qattn_bf16_to_f32(qattn__ref_u16(p));
    case QATTN_F16: return qattn_f16_to_f32(qattn__ref_u16(p));
    case QATTN_FP8_E4M3FN:
    case QATTN_FP8_E4M3FNUZ:
    case QATTN_FP8_E5M2: return qattn_fp8_to_f32(*(const uint8_t *)p, dt);
    case QATTN_I8: return (double)*(const int8_t *)p;
    case QATTN_F32: {
        float v;
        memcpy(&v, p, sizeof v);
        return v;
    }
    default: return NAN;
    }
}

/* f64 -> bf16 with a single rounding to nearest even. Going through f32
 * first could round twice: when the f32 result lands exactly on a bf16
 * midpoint, the true value is on one side of it and decides. */
static inline uint16_t qattn__ref_f64_to_bf16(double x) {
    float f = (float)x;
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if (!isnan(f) && !isinf(f) && (u & 0xFFFFu) == 0x8000u && (double)f != x) {
        /* Exactly between two bf16 codes in f32 but not in f64: take the side
         * the exact value lies on (magnitudes: further out -> round up). */
        return (uint16_t)(fabs(x) > fabs((double)f) ? (u >> 16) + 1u : (u >> 16));
    }
    return qattn_f32_to_bf16(f);
}

/* f64 -> f16 with a single rounding to nearest even (overflow to inf): the
 * f32 route gives a neighbour of the answer, and the nearest of it and its
 * two neighbours to x (ties to the even code) is the answer, since every
 * f16 value is exact in f64. */
static inline uint16_t qattn__ref_f64_to_f16(double x) {
    if (isnan(x)) return qattn_f32_to_f16((float)x);
    const uint16_t sign = signbit(x) ? 0x8000u : 0u;
    const double a = fabs(x);
    if (a >= 65520.0) return (uint16_t)(sign | 0x7C00u); /* half-way past 65504 and beyond */
    const int32_t c = (int32_t)(qattn_f32_to_f16((float)a) & 0x7FFFu);
    int32_t best = c;
    double best_d = fabs((double)qattn_f16_to_f32((uint16_t)c) - a);
    for (int32_t n = c - 1; n <= c + 1; n += 2) {
        if (n < 0 || n > 0x7BFF) continue;
        const double d = fabs((double)qattn_f16_to_f32((uint16_t)n) - a);
        if (d < best_d || (d == best_d && (n & 1) == 0)) {
            best = n;
            best_d = d;
        }
    }
    return (uint16_t)(sign | (uint16_t)best);
}

/* f64 -> the output dtype of decode's o (bf16 or f16), one rounding. */
static inline uint16_t qattn__ref_f64_to_half(double x, qattn_dtype dt) {
    return dt == QATTN_F16 ? qattn__ref_f64_to_f16(x) : qattn__ref_f64_to_bf16(x);
}

#endif /* QATTN_REF_UTIL_H */
