/*
 * The spec's tolerances for backend parity tests (docs/ops.md section 4),
 * in one place. Every test comparing an output with the CPU reference (or
 * the reference with an independent f64 loop) uses these functions, never a
 * tolerance of its own, and never a per-backend one.
 *
 * Each predicate returns 1 when `got` is acceptable for `ref`. NaN is never
 * acceptable (spec: no NaN unless an input holds a NaN code; tests that feed
 * NaN codes compare those bits directly). Infinities match only the same
 * infinity exactly.
 */
#ifndef QATTN_TEST_TOLERANCE_H
#define QATTN_TEST_TOLERANCE_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Equal infinities, or both finite: the caller's bound decides. */
static inline int qt_tol_inf_rule_(double got, double ref, int *decided) {
    *decided = 1;
    if (isnan(got) || isnan(ref)) return 0;
    if (isinf(ref) || isinf(got)) return got == ref;
    *decided = 0;
    return 0;
}

/* Decode attention output element: |o - ref| <= 2e-3 + 2e-2 |ref|. */
static inline double qt_tol_decode_o_bound(double ref) { return 2e-3 + 2e-2 * fabs(ref); }
static inline int qt_tol_decode_o(double got, double ref) {
    int decided;
    int v = qt_tol_inf_rule_(got, ref, &decided);
    if (decided) return v;
    return fabs(got - ref) <= qt_tol_decode_o_bound(ref);
}

/* Decode LSE: |lse - ref| <= 1e-3 + 1e-3 |ref|; -inf (a row with no
 * visible key and no sink) must be exactly -inf. */
static inline double qt_tol_decode_lse_bound(double ref) { return 1e-3 + 1e-3 * fabs(ref); }
static inline int qt_tol_decode_lse(double got, double ref) {
    int decided;
    int v = qt_tol_inf_rule_(got, ref, &decided);
    if (decided) return v;
    return fabs(got - ref) <= qt_tol_decode_lse_bound(ref);
}

/* MQA logits: |out - ref| <= 4e-5 A + 1e-6 where
 * A = sum_h |weights[i,h]| * k_scale[j] * sum_d |q[i,h,d] k[j,d]|
 * (the caller computes A; see qt_tol_mqa_a_term). -inf must match exactly. */
static inline double qt_tol_mqa_bound(double a) { return 4e-5 * a + 1e-6; }
static inline int qt_tol_mqa_logit(double got, double ref, double a) {
    int decided;
    int v = qt_tol_inf_rule_(got, ref, &decided);
    if (decided) return v;
    return fabs(got - ref) <= qt_tol_mqa_bound(a);
}
/* One head's contribution to A: |w| * |k_scale| * sum_d |q_d k_d| (k_scale
 * is taken in magnitude so a negative scale cannot shrink the bound). */
static inline double qt_tol_mqa_a_term(double w, double k_scale, double sum_abs_qk) {
    return fabs(w) * fabs(k_scale) * sum_abs_qk;
}

/* KV store: codes and scales bit-identical. Returns the index of the first
 * differing byte, or -1 when the ranges are identical. */
static inline ptrdiff_t qt_tol_kv_store_bytes(const void *got, const void *ref, size_t bytes) {
    const uint8_t *g = (const uint8_t *)got, *r = (const uint8_t *)ref;
    for (size_t i = 0; i < bytes; ++i)
        if (g[i] != r[i]) return (ptrdiff_t)i;
    return -1;
}
/* One scale: the same f32 bit pattern (so -0 != +0 and NaN is compared by
 * its bits, never by value). */
static inline int qt_tol_kv_store_scale(float got, float ref) {
    uint32_t a, b;
    memcpy(&a, &got, 4);
    memcpy(&b, &ref, 4);
    return a == b;
}

#endif /* QATTN_TEST_TOLERANCE_H */
