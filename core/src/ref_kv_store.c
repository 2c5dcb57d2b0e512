/*
 * CPU reference of the KV store (spec section 2, "KV store"): writes new
 * bf16 or f16 tokens into a bf16 / fp8 / int8 cache at the slots of slot_mapping.
 *
 * GPU backends must match this bit for bit, so the arithmetic is the spec's
 * in f32, one operation at a time: amax over the (token, head) row, scale =
 * amax / fmax in f32 (1 when amax is 0), each element x / scale in f32, then
 * the fp8 encoder (RNE, satfinite) or, for int8, round-to-nearest-even and a
 * clamp to [-127, 127].
 *
 * Slot -1 is padding and skipped. Any other slot outside [0, N_slots) is
 * skipped too, as on every backend (the spec's defined result without the
 * index mode; with QATTN_CHECK_INDICES=1 the core refuses the call before
 * this runs).
 *
 * The cache and its scales may each be rank 3 / 2 or in the paged rank-4 /
 * rank-3 form; slot s is addressed through each tensor's view (internal.h),
 * for a paged tensor page s / P, row s % P.
 */
#include "ref_util.h"

/* Rounds a finite float to the nearest integer, ties to even, by explicit
 * comparison (independent of the floating-point rounding mode). */
static float round_half_even_f32(float x) {
    double lo = floor((double)x);
    double frac = (double)x - lo;
    if (frac > 0.5) return (float)(lo + 1.0);
    if (frac < 0.5) return (float)lo;
    return (float)(fmod(lo, 2.0) == 0.0 ? lo : lo + 1.0);
}

static uint8_t encode_i8(float y) {
    /* int8 has no NaN; a NaN input (bf16 NaN in k_new) stores 0 rather than
     * an undefined float-to-int conversion. */
    if (isnan(y)) return 0;
    float r = round_half_even_f32(y);
    if (r > 127.0f) r = 127.0f;
    if (r < -127.0f) r = -127.0f;
    return (uint8_t)(int8_t)r;
}

/* A destination: cache and scales with their views. A rank-3 (rank-2
 * scale) tensor is viewed as pages of one slot. */
typedef struct store_dst {
    const qattn_tensor *cache, *scale;
    qattn_cache_view cv, sv;
} store_dst;

static store_dst dst_of(const qattn_tensor *cache, const qattn_tensor *scale) {
    store_dst o;
    memset(&o, 0, sizeof o);
    o.cache = cache;
    o.scale = scale;
    o.cv = qattn_cache_view_of(cache, 0, 1);
    if (qattn_tensor_present(scale)) o.sv = qattn_cache_view_of(scale, 1, 1);
    return o;
}

/* Element (t, g, d) of a bf16 or f16 source, exactly. */
static float src_value(const qattn_tensor *src, int64_t t, int64_t g, int64_t d) {
    const uint16_t bits = qattn__ref_u16(qattn__ref_at(src, t, g, d, 0));
    return src->dtype == QATTN_F16 ? qattn_f16_to_f32(bits) : qattn_bf16_to_f32(bits);
}

/* Stores row (t, g) of `src` ([T, H, D] bf16 or f16) into the destination at `slot`. */
static void store_row(const qattn_tensor *src, const store_dst *o, int64_t t, int64_t g, int64_t slot) {
    const int64_t D = src->shape[2];
    const qattn_dtype dt = o->cache->dtype;
    if (dt == QATTN_BF16) { /* a bf16 source is copied bit for bit; f16 rounds to nearest even */
        for (int64_t d = 0; d < D; ++d) {
            const uint16_t bits = src->dtype == QATTN_F16 ? qattn_f32_to_bf16(src_value(src, t, g, d))
                                                          : qattn__ref_u16(qattn__ref_at(src, t, g, d, 0));
            memcpy(qattn__ref_cache_at(o->cache, &o->cv, slot, g, d), &bits, 2);
        }
        return;
    }
    /* amax in f32 (|x| is exact). NaN inputs are ignored by the comparison. */
    float amax = 0.0f;
    for (int64_t d = 0; d < D; ++d) {
        float x = src_value(src, t, g, d);
        if (fabsf(x) > amax) amax = fabsf(x);
    }
    const float fmax = dt == QATTN_I8 ? 127.0f : qattn_fp8_max(dt);
    /* Correctly rounded f32 divisions (FLT_EVAL_METHOD 0 on the targets this
     * builds for): a GPU backend must divide exactly the same way, not with
     * an approximate reciprocal, to match these codes bit for bit. */
    const float s = amax == 0.0f ? 1.0f : amax / fmax;
    for (int64_t d = 0; d < D; ++d) {
        float x = src_value(src, t, g, d);
        float y = x / s;
        uint8_t code = dt == QATTN_I8 ? encode_i8(y) : qattn_f32_to_fp8(y, dt);
        *(uint8_t *)qattn__ref_cache_at(o->cache, &o->cv, slot, g, d) = code;
    }
    memcpy(qattn__ref_cache_at(o->scale, &o->sv, slot, g, 0), &s, sizeof s);
}

qattn_status qattn__ref_kv_store(const qattn_kv_store_args *a) {
    const int64_t T = a->k_new.shape[0], Hkv = qattn__cache_heads(&a->k_cache);
    const int64_t n_slots = qattn__cache_slots(&a->k_cache, 0);
    const store_dst k = dst_of(&a->k_cache, &a->k_scale), v = dst_of(&a->v_cache, &a->v_scale);
    for (int64_t t = 0; t < T; ++t) {
        int64_t slot = qattn__ref_i32(&a->slot_mapping, t);
        if (slot < 0 || slot >= n_slots) continue; /* -1 padding, or outside: skipped */
        for (int64_t g = 0; g < Hkv; ++g) {
            store_row(&a->k_new, &k, t, g, slot);
            store_row(&a->v_new, &v, t, g, slot);
        }
    }
    return QATTN_OK;
}
