/*
 * CPU reference of FP8 MQA logits (spec section 3), on host memory.
 *
 * logits[i, j] = sum_h weights[i, h] * max(0, k_scale[j] * q[i, h, :] . k[j, :])
 * for j in row i's window [ks[i], ke[i]) clamped to [0, S_kv]. The dot
 * product and the head sum are f64 (fp8 products are exact there); the
 * result is rounded once to f32. Outside the window the row is -inf when
 * clean_logits is set and left untouched otherwise.
 */
#include <stdlib.h>

#include "ref_util.h"

#define REF_MAX_MQA_DIM 512 /* the validator allows D <= 512 */

static int64_t clamp64(int64_t x, int64_t lo, int64_t hi) { return x < lo ? lo : x > hi ? hi : x; }

qattn_status qattn__ref_mqa_logits(const qattn_mqa_logits_args *a) {
    const int64_t S = a->q.shape[0], H = a->q.shape[1], D = a->q.shape[2];
    const int64_t S_kv = a->k.shape[0];
    const qattn_dtype qt = a->q.dtype, kt = a->k.dtype;
    if (D > REF_MAX_MQA_DIM) return QATTN_ERR_UNSUPPORTED;
    /* Each row's q and each column's k are decoded once (exactly, as the
     * spec defines) and reused across heads and columns: the same sums, in
     * the same order, as decoding inside the dot product. */
    double *qrow = malloc((size_t)(H * D) * sizeof *qrow);
    if (!qrow) return QATTN_ERR_OUT_OF_MEMORY;
    double krow[REF_MAX_MQA_DIM];

    for (int64_t i = 0; i < S; ++i) {
        const int64_t ks = clamp64(qattn__ref_i32(&a->ks, i), 0, S_kv);
        const int64_t ke = clamp64(qattn__ref_i32(&a->ke, i), 0, S_kv);
        for (int64_t h = 0; h < H; ++h)
            for (int64_t d = 0; d < D; ++d)
                qrow[h * D + d] = qattn__ref_decode_elem(qattn__ref_at(&a->q, i, h, d, 0), qt);
        for (int64_t j = 0; j < S_kv; ++j) {
            if (j < ks || j >= ke) { /* outside the window (ks >= ke: all of it) */
                if (a->clean_logits) qattn__ref_put_f32(&a->logits, i, j, 0, 0, -INFINITY);
                continue;
            }
            for (int64_t d = 0; d < D; ++d)
                krow[d] = qattn__ref_decode_elem(qattn__ref_at(&a->k, j, d, 0, 0), kt);
            const double kscale = (double)qattn__ref_f32(&a->k_scale, j, 0, 0, 0);
            double sum = 0.0;
            for (int64_t h = 0; h < H; ++h) {
                double dot = 0.0;
                for (int64_t d = 0; d < D; ++d) dot += qrow[h * D + d] * krow[d];
                double act = kscale * dot;
                if (act < 0.0) act = 0.0;
                sum += (double)qattn__ref_f32(&a->weights, i, h, 0, 0) * act;
            }
            qattn__ref_put_f32(&a->logits, i, j, 0, 0, (float)sum);
        }
    }
    free(qrow);
    return QATTN_OK;
}
