/*
 * Scalar number-format conversions exactly as the spec (docs/ops.md, section
 * 1) defines them. The CPU reference, the KV store and the tests use these;
 * they are public so callers can prepare and inspect caches on the host.
 */
#ifndef QATTN_CONVERT_H
#define QATTN_CONVERT_H

#include "qattn/qattn.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Largest finite value of an fp8 format: 448 (fn), 240 (fnuz), 57344
 *  (e5m2); 0 otherwise. */
QATTN_API float qattn_fp8_max(qattn_dtype fmt);
/** Decodes an fp8 code exactly; NaN codes give a quiet NaN (e5m2: its
 *  infinity codes give +-inf). fmt is QATTN_FP8_E4M3FN, QATTN_FP8_E4M3FNUZ
 *  or QATTN_FP8_E5M2 (anything else gives NaN). */
QATTN_API float qattn_fp8_to_f32(uint8_t code, qattn_dtype fmt);
/** Encodes with round-to-nearest-even, saturating overflow (infinity too)
 *  to +-max; NaN -> 0x7F (fn, e5m2) / 0x80 (fnuz); -0.0 -> 0x80 (fn,
 *  e5m2) / 0x00 (fnuz). */
QATTN_API uint8_t qattn_f32_to_fp8(float x, qattn_dtype fmt);
/** The fn -> fnuz re-encoding of spec 1: same byte except 0x80 -> 0x00 and
 *  the fn NaN codes -> 0x80. Read as fnuz it is half the fn value, so the
 *  scale doubles. */
QATTN_API uint8_t qattn_fp8_fn_code_as_fnuz(uint8_t fn_code);

QATTN_API float qattn_bf16_to_f32(uint16_t bits);
/** Round to nearest even; NaN stays a quiet NaN. */
QATTN_API uint16_t qattn_f32_to_bf16(float x);
QATTN_API float qattn_f16_to_f32(uint16_t bits);
/** Round to nearest even, overflow to inf; NaN stays a quiet NaN. */
QATTN_API uint16_t qattn_f32_to_f16(float x);

#ifdef __cplusplus
}
#endif
#endif /* QATTN_CONVERT_H */
