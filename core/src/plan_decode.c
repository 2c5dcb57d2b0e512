/*
 * The decode planner: which variant runs a decode shape on a device, with
 * what geometry, how many KV splits, and how much workspace. Pure: a function
 * of shapes, strides, offsets and capabilities (qattn_decode_plan_compute);
 * qattn_decode_plan_create adds validation and the QATTN_DECODE_VARIANT pin.
 *
 * Variants and their downgrade chain (AUTO):
 *   coopmat     when the device has a usable f16 matrix shape, the cache is
 *               not bf16 (f16 operands cannot hold bf16's range) and enough
 *               query rows share each KV tile to fill the matrix unit
 *               (QATTN_DECODE_COOPMAT_MIN_ROWS, decided by measurement,
 *               docs/perf_decode_notes.md) ->
 *   packed_fp8  one query row, fp8 cache, D 128, GQA 4/8, 16-byte aligned
 *               layout (every condition below) ->
 *   multirow    R > 1 (rows share each K/V load) ->
 *   generic     anything valid.
 * stream (shaders/decode_stream.comp) runs any valid shape on a device
 * with subgroups of >= 8 lanes; AUTO does not pick it yet (it runs when
 * pinned), see docs/perf_decode_notes.md.
 * A pinned variant whose gate fails is an error naming the condition.
 *
 * Geometry of the scalar kernels (shaders/decode.comp): a workgroup of
 * `workgroup_size` threads handles one (split, kv head, block of
 * q_heads_per_workgroup query heads, request). Lanes form key groups of
 * LPK = workgroup_size * pipeline_depth / keys_per_tile lanes; each group
 * reads one key row per step (D / LPK elements per lane) and keeps
 * pipeline_depth keys in flight. Shared memory holds one partial (m, l, o)
 * per subgroup and row: (workgroup_size / subgroup_size_min) * rows *
 * (Dv + 2) * 4 bytes.
 *
 * Split-KV: splits = the number of KV ranges of keys_per_split keys each;
 * with more than one, stage 1 writes partials to the workspace, laid out as
 * partial outputs [B, R, Hq, splits, Dv] f32 followed by partial LSEs
 * [B, R, Hq, splits] f32, and a merge launch combines them.
 *
 * Geometry of the coopmat kernel (shaders/decode_coopmat.comp): NS
 * subgroups of subgroup_size_min lanes, each streaming its own tiles of NK
 * keys (keys_per_tile = NS * NK) through f16 matrix products for up to 16
 * query rows; shared bytes are given by coopmat_shared() below, which
 * mirrors the shader's declarations.
 *
 * Geometry of the stream kernel (shaders/decode_stream.comp): STREAM_WG
 * threads per (split, kv head, block of q_heads_per_workgroup query heads,
 * request), all R rows of those heads (at most STREAM_MAX_ROWS rows);
 * keys_per_tile = (STREAM_WG / 8) * pipeline_depth, where pipeline_depth
 * is the keys each 8-lane key group scores per tile; shared bytes are given
 * by stream_shared() below, which mirrors the shader's declarations.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

/* Query rows (q heads x R) a workgroup must hold before the coopmat path is
 * preferred. Decided by measurement on the H200 (docs/perf_decode_notes.md):
 * see the value's history there. */
#ifndef QATTN_DECODE_COOPMAT_MIN_ROWS
#define QATTN_DECODE_COOPMAT_MIN_ROWS 1000 /* coopmat never chosen by AUTO (measured) */
#endif
/* Register budget of the scalar kernels: rows * (D / LPK) values of q and
 * of the accumulator per lane each. */
#define SCALAR_ROW_DIMS_MAX 64
#define SCALAR_WG 128
#define COOP_M 16 /* matrix rows = query rows per coopmat workgroup */
#define COOP_PAD 8 /* f16 elements of padding per shared row (bank spread) */
#define STREAM_WG 128      /* threads per stream workgroup */
#define STREAM_LPK 8       /* lanes per key in its score phase (shuffle width) */
#define STREAM_MAX_ROWS 16 /* query rows per workgroup: one 8-lane softmax group each */

const char *qattn_decode_variant_name(qattn_decode_variant v) {
    switch (v) {
    case QATTN_DECODE_AUTO: return "auto";
    case QATTN_DECODE_GENERIC: return "generic";
    case QATTN_DECODE_PACKED_FP8: return "packed_fp8";
    case QATTN_DECODE_MULTIROW: return "multirow";
    case QATTN_DECODE_COOPMAT: return "coopmat";
    case QATTN_DECODE_STREAM: return "stream";
    default: return "invalid";
    }
}

/* ---- gates ---------------------------------------------------------------- */

static int aligned16(uint64_t bytes) { return bytes % 16u == 0; }

/* The packed fp8 reader's gate: each condition in turn; on failure writes
 * which one into why and returns 0. */
static int packed_gate(const qattn_device_caps *caps, const qattn_decode_args *a, char *why,
                       size_t n) {
    const qattn_tensor *k = &a->k_cache, *v = &a->v_cache, *ks = &a->k_scale, *vs = &a->v_scale;
    const int64_t R = a->q.shape[1], Hq = a->q.shape[2], Hkv = k->shape[1], D = k->shape[2];
    if (!qattn__is_fp8(k->dtype)) {
        snprintf(why, n, "packed_fp8 gate: kv dtype %s is not fp8", qattn_dtype_name(k->dtype));
        return 0;
    }
    if (!qattn_tensor_present(ks) || !qattn_tensor_present(vs) || ks->dtype != QATTN_F32 ||
        vs->dtype != QATTN_F32 || ks->rank != 2 || vs->rank != 2) {
        snprintf(why, n, "packed_fp8 gate: needs per-token-head f32 scales [N_slots, Hkv]");
        return 0;
    }
    if (a->q.dtype != QATTN_BF16) {
        snprintf(why, n, "packed_fp8 gate: q dtype %s is not bf16", qattn_dtype_name(a->q.dtype));
        return 0;
    }
    if (D != 128 || v->shape[2] != 128) {
        snprintf(why, n, "packed_fp8 gate: head dim %" PRId64 " is not 128", D);
        return 0;
    }
    if (Hq % Hkv != 0 || (Hq / Hkv != 4 && Hq / Hkv != 8)) {
        snprintf(why, n, "packed_fp8 gate: GQA ratio %" PRId64 "/%" PRId64 " is not 4 or 8", Hq, Hkv);
        return 0;
    }
    if (R != 1) {
        snprintf(why, n, "packed_fp8 gate: %" PRId64 " query rows, needs 1", R);
        return 0;
    }
    const qattn_tensor *t4[4] = {k, v, ks, vs};
    const char *names[4] = {"k_cache", "v_cache", "k_scale", "v_scale"};
    for (int i = 0; i < 4; ++i) {
        const qattn_tensor *t = t4[i];
        const uint64_t es = qattn_dtype_size(t->dtype);
        if (!aligned16(t->offset)) {
            snprintf(why, n, "packed_fp8 gate: %s base offset %" PRIu64 " B not 16-byte aligned",
                     names[i], t->offset);
            return 0;
        }
        if (t->shape[0] > 1 && !aligned16((uint64_t)t->strides[0] * es)) {
            snprintf(why, n, "packed_fp8 gate: %s row stride %" PRIu64 " B not 16-byte aligned",
                     names[i], (uint64_t)t->strides[0] * es);
            return 0;
        }
        /* K/V: each head's row starts 16-byte aligned. Scales: one f32 per
         * head, so "aligned" means the heads of a token are contiguous. */
        if (i < 2 && t->shape[1] > 1 && !aligned16((uint64_t)t->strides[1] * es)) {
            snprintf(why, n, "packed_fp8 gate: %s head stride %" PRIu64 " B not 16-byte aligned",
                     names[i], (uint64_t)t->strides[1] * es);
            return 0;
        }
        if (i >= 2 && t->shape[1] > 1 && t->strides[1] != 1) {
            snprintf(why, n, "packed_fp8 gate: %s heads not contiguous (head stride %" PRId64 ")",
                     names[i], t->strides[1]);
            return 0;
        }
    }
    if (!(caps->features & QATTN_FEAT_PACKED_FP8_CVT)) {
        snprintf(why, n, "packed_fp8 gate: device %s has no packed fp8 conversion", caps->arch);
        return 0;
    }
    if (caps->subgroup_size_min < 8) {
        snprintf(why, n, "packed_fp8 gate: subgroup size %u < 8 lanes per key",
                 (unsigned)caps->subgroup_size_min);
        return 0;
    }
    return 1;
}

/* A 16x16x16 f16 x f16 -> f32 shape, which the coopmat kernel is written for. */
static int has_coop_shape(const qattn_device_caps *caps) {
    for (int i = 0; i < caps->n_matrix_shapes && i < QATTN_MAX_MATRIX_SHAPES; ++i) {
        const qattn_matrix_shape *s = &caps->matrix_shapes[i];
        if (s->m == COOP_M && s->n == 16 && s->k == 16 && s->a_type == QATTN_F16 &&
            s->c_type == QATTN_F32)
            return 1;
    }
    return 0;
}

/* Shared bytes of decode_coopmat.comp for ns subgroups, nk keys per tile:
 * mirrors its shared declarations. */
static uint64_t coopmat_shared(int64_t D, int64_t ns, int64_t nk) {
    const uint64_t ld = (uint64_t)(D + COOP_PAD), sld = (uint64_t)(nk > D ? nk : D);
    const uint64_t q = (uint64_t)COOP_M * ld * 2u + COOP_M * 4u;          /* Q f16, row scales */
    const uint64_t kv = 2u * (uint64_t)nk * ld * 2u;                      /* K and V tiles, f16 */
    const uint64_t s = (uint64_t)COOP_M * sld * 4u;                       /* scores / O scratch */
    const uint64_t p = (uint64_t)COOP_M * (uint64_t)(nk + COOP_PAD) * 2u; /* probabilities, f16 */
    const uint64_t sc = 3u * (uint64_t)nk * 4u;                           /* k/v scales, slots */
    const uint64_t st = 2u * COOP_M * 4u;                                 /* m, l per row */
    return q + (uint64_t)ns * (kv + s + p + sc + st);
}

static int coopmat_gate(const qattn_device_caps *caps, const qattn_decode_args *a, char *why,
                        size_t n) {
    if (!(caps->features & QATTN_FEAT_COOPMAT)) {
        snprintf(why, n, "coopmat gate: device %s has no cooperative matrix", caps->arch);
        return 0;
    }
    if (!has_coop_shape(caps)) {
        snprintf(why, n, "coopmat gate: device %s offers no 16x16x16 f16->f32 matrix shape", caps->arch);
        return 0;
    }
    if (a->k_cache.dtype == QATTN_BF16) {
        snprintf(why, n, "coopmat gate: a bf16 cache needs bf16 operands (f16 cannot hold its range)");
        return 0;
    }
    if (caps->subgroup_size_min < COOP_M) {
        snprintf(why, n, "coopmat gate: subgroup size %u < %d (one lane per matrix row)",
                 (unsigned)caps->subgroup_size_min, COOP_M);
        return 0;
    }
    if (caps->subgroup_size_min != caps->subgroup_size_max &&
        !(caps->features & QATTN_FEAT_SUBGROUP_SIZE_CONTROL)) {
        snprintf(why, n, "coopmat gate: subgroup size varies (%u..%u) and cannot be pinned",
                 (unsigned)caps->subgroup_size_min, (unsigned)caps->subgroup_size_max);
        return 0;
    }
    if (coopmat_shared(a->k_cache.shape[2], 1, 16) > caps->max_shared_bytes) {
        snprintf(why, n, "coopmat gate: the smallest tile needs %" PRIu64 " B of shared memory > %u",
                 coopmat_shared(a->k_cache.shape[2], 1, 16), (unsigned)caps->max_shared_bytes);
        return 0;
    }
    return 1;
}

/* ---- geometry ------------------------------------------------------------- */

/* Measurement overrides of the scalar geometry (0 = the planner's choice),
 * from QATTN_DECODE_TUNE="wg=128,depth=2,lpk=8,qh=4" in plan_create only:
 * what docs/perf_decode_notes.md's sweeps used. Invalid values are an
 * error, never silently ignored. */
typedef struct decode_tune {
    int64_t wg, depth, lpk, qh;
} decode_tune;

static int64_t largest_divisor_upto(int64_t g, int64_t cap) {
    if (cap < 1) cap = 1;
    for (int64_t d = cap < g ? cap : g; d >= 1; --d)
        if (g % d == 0) return d;
    return 1;
}

/* Appends a sentence to plan->reason ("; "-separated). */
static void note(qattn_decode_plan *p, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static void note(qattn_decode_plan *p, const char *fmt, ...) {
    size_t used = strlen(p->reason);
    if (used + 4 >= sizeof p->reason) return;
    if (used) {
        snprintf(p->reason + used, sizeof p->reason - used, "; ");
        used += 2;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->reason + used, sizeof p->reason - used, fmt, ap);
    va_end(ap);
}

static uint64_t scalar_shared(uint32_t wg, uint32_t sg, int64_t rows, int64_t dv) {
    return (uint64_t)(wg / sg) * (uint64_t)rows * (uint64_t)(dv + 2) * 4u;
}

static qattn_status scalar_geometry(const qattn_device_caps *caps, const qattn_decode_args *a,
                                    const decode_tune *tune, qattn_decode_plan *p, char *err,
                                    size_t n) {
    const int64_t R = a->q.shape[1], D = a->k_cache.shape[2], Dv = a->v_cache.shape[2];
    const int64_t G = a->q.shape[2] / a->k_cache.shape[1];
    const uint32_t sg = caps->subgroup_size_min ? caps->subgroup_size_min : 1;
    /* Query rows of one request per workgroup: all of them for multirow
     * (they share each K/V load), one for generic. */
    const int64_t rb = p->variant == QATTN_DECODE_GENERIC ? 1 : R;
    /* Lanes per key: 8 elements per lane (the packed reader: two words, one
     * 8-byte load; 16 lanes cover a D-128 row in one 128-byte transaction),
     * which leaves registers for up to 8 query rows, two tiles of raw codes
     * in flight and the scores (measured on the H200: 16 lanes with 4 or 8
     * rows were the fastest packed geometries). Never more lanes than a
     * subgroup has. */
    int64_t lpk = D / 8;
    while (lpk > (int64_t)sg) lpk /= 2;
    if (lpk < 1) lpk = 1;
    if (tune->lpk) {
        const int64_t l = tune->lpk;
        if (l < 1 || l > (int64_t)sg || (l & (l - 1)) || D % l ||
            (p->variant == QATTN_DECODE_PACKED_FP8 && (D / l) % 4))
            return qattn__err(err, n, QATTN_ERR_INVALID_ARGUMENT,
                              "QATTN_DECODE_TUNE lpk=%" PRId64 ": needs a power of two <= subgroup %u "
                              "dividing D (packed: D/lpk a multiple of 4)", l, (unsigned)sg);
        lpk = l;
    }
    const int64_t dpl = D / lpk;
    /* Query heads per workgroup: as many of the group as the register
     * budget allows, so each K/V load serves all of them. */
    int64_t qh = largest_divisor_upto(G, (SCALAR_ROW_DIMS_MAX / dpl) / rb);
    if (tune->qh) {
        if (tune->qh < 1 || G % tune->qh)
            return qattn__err(err, n, QATTN_ERR_INVALID_ARGUMENT,
                              "QATTN_DECODE_TUNE qh=%" PRId64 ": must divide the GQA ratio %" PRId64,
                              tune->qh, G);
        qh = tune->qh;
    }
    uint32_t wg = SCALAR_WG;
    if (tune->wg) {
        if (tune->wg < (int64_t)sg || tune->wg % (int64_t)sg || tune->wg > (int64_t)caps->max_workgroup_size)
            return qattn__err(err, n, QATTN_ERR_INVALID_ARGUMENT,
                              "QATTN_DECODE_TUNE wg=%" PRId64 ": needs whole subgroups of %u, at most %u",
                              tune->wg, (unsigned)sg, (unsigned)caps->max_workgroup_size);
        wg = (uint32_t)tune->wg;
    }
    if (wg > caps->max_workgroup_size) wg = caps->max_workgroup_size;
    if (wg < sg) wg = sg;
    while (wg % sg) --wg; /* whole subgroups */
    if ((int64_t)wg < lpk) {
        return qattn__err(err, n, QATTN_ERR_UNSUPPORTED,
                          "decode: workgroups of %u lanes cannot hold a %" PRId64 "-lane key group",
                          (unsigned)wg, lpk);
    }
    /* Fit the exact shared memory of the launch under the device's limit:
     * fewer query heads per workgroup first (more workgroups, same tile),
     * then fewer subgroups per workgroup. */
    uint64_t sh = scalar_shared(wg, sg, qh * rb, Dv);
    const int64_t qh0 = qh;
    const uint32_t wg0 = wg;
    while (sh > caps->max_shared_bytes) {
        if (qh > 1) qh = largest_divisor_upto(G, qh - 1);
        else if (wg / 2 >= sg && wg / 2 >= (uint32_t)lpk) wg /= 2;
        else
            return qattn__err(err, n, QATTN_ERR_UNSUPPORTED,
                              "decode: even one query head and one subgroup need %" PRIu64
                              " B of shared memory > the device's %u",
                              sh, (unsigned)caps->max_shared_bytes);
        sh = scalar_shared(wg, sg, qh * rb, Dv);
    }
    if (qh != qh0)
        note(p, "shared memory: q heads per workgroup %d -> %d to fit %u B", (int)qh0, (int)qh,
             (unsigned)caps->max_shared_bytes);
    if (wg != wg0)
        note(p, "shared memory: workgroup %u -> %u lanes to fit %u B", (unsigned)wg0, (unsigned)wg,
             (unsigned)caps->max_shared_bytes);
    /* Two keys per group and tile (with two tiles in flight): on the H200,
     * 4 and 8 were slower (more registers, fewer resident workgroups);
     * docs/perf_decode_notes.md. */
    int64_t depth = 2;
    if (tune->depth) {
        if (tune->depth < 1 || tune->depth > 8)
            return qattn__err(err, n, QATTN_ERR_INVALID_ARGUMENT,
                              "QATTN_DECODE_TUNE depth=%" PRId64 ": must be 1..8", tune->depth);
        depth = tune->depth;
    }
    p->workgroup_size = (int32_t)wg;
    p->pipeline_depth = (int32_t)depth;
    p->keys_per_tile = (int32_t)(((int64_t)wg / lpk) * depth);
    p->q_heads_per_workgroup = (int32_t)qh;
    p->shared_bytes = (uint32_t)sh;
    return QATTN_OK;
}

static qattn_status coopmat_geometry(const qattn_device_caps *caps, const qattn_decode_args *a,
                                     qattn_decode_plan *p, char *err, size_t n) {
    const int64_t R = a->q.shape[1], D = a->k_cache.shape[2];
    const int64_t G = a->q.shape[2] / a->k_cache.shape[1];
    const uint32_t sg = caps->subgroup_size_min;
    int64_t qh = largest_divisor_upto(G, COOP_M / R);
    int64_t ns = 4, nk = 32;
    while ((uint64_t)ns * sg > caps->max_workgroup_size && ns > 1) ns /= 2;
    const int64_t ns0 = ns, nk0 = nk;
    uint64_t sh = coopmat_shared(D, ns, nk);
    while (sh > caps->max_shared_bytes) {
        if (ns > 1) ns /= 2;
        else if (nk > 16) nk = 16;
        else
            return qattn__err(err, n, QATTN_ERR_UNSUPPORTED,
                              "decode coopmat: %" PRIu64 " B of shared memory > the device's %u", sh,
                              (unsigned)caps->max_shared_bytes);
        sh = coopmat_shared(D, ns, nk);
    }
    if (ns != ns0 || nk != nk0)
        note(p, "shared memory: tile shrunk to fit %u B (%d x %d keys -> %d x %d)",
             (unsigned)caps->max_shared_bytes, (int)ns0, (int)nk0, (int)ns, (int)nk);
    p->workgroup_size = (int32_t)(ns * sg);
    p->pipeline_depth = 1;
    p->keys_per_tile = (int32_t)(ns * nk);
    p->q_heads_per_workgroup = (int32_t)qh;
    p->shared_bytes = (uint32_t)sh;
    return QATTN_OK;
}

/* Shared bytes of decode_stream.comp: q rows (np, f32), two score tiles
 * [tk][max(np, 4)], the tile's v scales, per-row rescale factors, m and l,
 * and two tiles of slots. Mirrors its shared declarations. */
static uint64_t stream_shared(int64_t D, int64_t np, int64_t tk) {
    const uint64_t rp = (uint64_t)(np < 4 ? 4 : np);
    return (uint64_t)np * (uint64_t)D * 4u + 2u * (uint64_t)tk * rp * 4u + (uint64_t)tk * 4u +
           3u * (uint64_t)np * 4u + 2u * (uint64_t)tk * 4u;
}

static int64_t pow2_at_least(int64_t x) {
    int64_t p = 1;
    while (p < x) p *= 2;
    return p;
}

/* Query heads per stream workgroup: the largest divisor of G whose rows
 * (heads x R) fit STREAM_MAX_ROWS; R <= 8 so one head always fits. */
static int64_t stream_qh(int64_t G, int64_t R) { return largest_divisor_upto(G, STREAM_MAX_ROWS / R); }

static int stream_gate(const qattn_device_caps *caps, const qattn_decode_args *a, char *why, size_t n) {
    const int64_t R = a->q.shape[1], D = a->k_cache.shape[2];
    if (caps->subgroup_size_min < STREAM_LPK) {
        snprintf(why, n, "stream gate: subgroup size %u < %d lanes per key",
                 (unsigned)caps->subgroup_size_min, STREAM_LPK);
        return 0;
    }
    if (caps->max_workgroup_size < STREAM_WG) {
        snprintf(why, n, "stream gate: workgroups of %u threads < %d", (unsigned)caps->max_workgroup_size,
                 STREAM_WG);
        return 0;
    }
    /* The smallest launch: one query head, one key per group and tile. */
    const uint64_t least = stream_shared(D, pow2_at_least(R), STREAM_WG / STREAM_LPK);
    if (least > caps->max_shared_bytes) {
        snprintf(why, n, "stream gate: the smallest tile needs %" PRIu64 " B of shared memory > %u", least,
                 (unsigned)caps->max_shared_bytes);
        return 0;
    }
    return 1;
}

static qattn_status stream_geometry(const qattn_device_caps *caps, const qattn_decode_args *a,
                                    const decode_tune *tune, qattn_decode_plan *p, char *err, size_t n) {
    const int64_t R = a->q.shape[1], D = a->k_cache.shape[2];
    const int64_t G = a->q.shape[2] / a->k_cache.shape[1];
    const int64_t es = (int64_t)qattn_dtype_size(a->k_cache.dtype);
    if (tune->wg || tune->lpk)
        return qattn__err(err, n, QATTN_ERR_INVALID_ARGUMENT,
                          "QATTN_DECODE_TUNE: the stream variant takes only depth and qh");
    int64_t qh = stream_qh(G, R);
    if (tune->qh) {
        if (tune->qh < 1 || G % tune->qh || tune->qh * R > STREAM_MAX_ROWS)
            return qattn__err(err, n, QATTN_ERR_INVALID_ARGUMENT,
                              "QATTN_DECODE_TUNE qh=%" PRId64 ": must divide the GQA ratio %" PRId64
                              " with qh x R <= %d", tune->qh, G, STREAM_MAX_ROWS);
        qh = tune->qh;
    }
    /* Keys per key group and tile: 16 words (64 bytes) of K codes per lane,
     * whatever D and the element size (TK * D * es = 8 KiB of K per tile),
     * which leaves registers for the next tile's loads while many
     * workgroups stay resident. */
    int64_t kpg = 512 / (D * es);
    if (kpg < 1) kpg = 1;
    if (tune->depth) {
        if (tune->depth < 1 || tune->depth > STREAM_LPK || (tune->depth & (tune->depth - 1)))
            return qattn__err(err, n, QATTN_ERR_INVALID_ARGUMENT,
                              "QATTN_DECODE_TUNE depth=%" PRId64 ": stream keys per group 1, 2, 4 or 8",
                              tune->depth);
        kpg = tune->depth;
    }
    /* Fit the exact shared memory under the device's limit: smaller tiles
     * first, then fewer query heads per workgroup (the gate checked that
     * one head and one key per group fit). */
    const int64_t qh0 = qh, kpg0 = kpg;
    uint64_t sh = stream_shared(D, pow2_at_least(qh * R), (STREAM_WG / STREAM_LPK) * kpg);
    while (sh > caps->max_shared_bytes) {
        if (kpg > 1) kpg /= 2;
        else if (qh > 1) qh = largest_divisor_upto(G, qh - 1);
        else
            return qattn__err(err, n, QATTN_ERR_UNSUPPORTED,
                              "decode stream: %" PRIu64 " B of shared memory > the device's %u", sh,
                              (unsigned)caps->max_shared_bytes);
        sh = stream_shared(D, pow2_at_least(qh * R), (STREAM_WG / STREAM_LPK) * kpg);
    }
    if (kpg != kpg0 || qh != qh0)
        note(p, "shared memory: stream tile %d -> %d keys, q heads per workgroup %d -> %d to fit %u B",
             (int)(16 * kpg0), (int)(16 * kpg), (int)qh0, (int)qh, (unsigned)caps->max_shared_bytes);
    p->workgroup_size = STREAM_WG;
    p->pipeline_depth = (int32_t)kpg;
    p->keys_per_tile = (int32_t)((STREAM_WG / STREAM_LPK) * kpg);
    p->q_heads_per_workgroup = (int32_t)qh;
    p->shared_bytes = (uint32_t)sh;
    return QATTN_OK;
}

/* ---- split-KV ------------------------------------------------------------ */

static qattn_status splits(const qattn_device_caps *caps, const qattn_decode_args *a,
                           const qattn_decode_options *o, qattn_decode_plan *p, char *err, size_t n) {
    const int64_t B = a->q.shape[0], R = a->q.shape[1], Hq = a->q.shape[2];
    const int64_t Hkv = a->k_cache.shape[1], Dv = a->v_cache.shape[2];
    const int64_t L = a->max_kv_len;
    const int64_t qblocks = (Hq / Hkv) / p->q_heads_per_workgroup;
    int64_t s;
    if (o && o->num_splits != 0) {
        if (o->num_splits < 1 || o->num_splits > QATTN_MAX_SPLITS)
            return qattn__err(err, n, QATTN_ERR_INVALID_ARGUMENT,
                              "options.num_splits: %d outside 1..%d (0 = planner's choice)",
                              (int)o->num_splits, QATTN_MAX_SPLITS);
        s = o->num_splits;
    } else {
        /* Enough workgroups to give every compute unit a few to overlap
         * their memory latency, but splits of at least two tiles so the
         * merge and per-split overhead stay small against the reading. */
        const int64_t cu = caps->compute_units > 0 ? caps->compute_units : 16;
        /* The stream kernel is light on registers: more of its workgroups
         * are resident per compute unit. */
        const int64_t want = cu * (p->variant == QATTN_DECODE_STREAM ? 8 : 4);
        const int64_t rblocks = p->variant == QATTN_DECODE_GENERIC ? R : 1;
        const int64_t units = B * Hkv * qblocks * rblocks;
        s = (want + units - 1) / units;
        const int64_t min_keys = 2 * (int64_t)p->keys_per_tile;
        const int64_t by_len = L > 0 ? (L + min_keys - 1) / min_keys : 1;
        if (s > by_len) s = by_len;
        if (s > QATTN_MAX_SPLITS) s = QATTN_MAX_SPLITS;
        if (s < 1) s = 1;
    }
    int64_t kps = L > 0 ? (L + s - 1) / s : 1;
    if (!(o && o->num_splits != 0)) {
        /* Whole tiles per split, then drop splits that would start past L. */
        kps = (kps + p->keys_per_tile - 1) / p->keys_per_tile * p->keys_per_tile;
        s = L > 0 ? (L + kps - 1) / kps : 1;
    }
    if (kps > INT32_MAX) kps = INT32_MAX;
    p->num_splits = (int32_t)s;
    p->keys_per_split = (int32_t)kps;
    p->workspace_bytes = 0;
    if (s > 1) {
        const uint64_t rows = (uint64_t)B * (uint64_t)R * (uint64_t)Hq * (uint64_t)s;
        const uint64_t o_bytes = rows * (uint64_t)Dv * 4u;
        p->workspace_bytes = o_bytes + (rows * 4u + 15u) / 16u * 16u;
    }
    return QATTN_OK;
}

/* ---- the planner ---------------------------------------------------------- */

static qattn_status check_shapes(const qattn_decode_args *a, char *err, size_t n) {
    const qattn_status bounds = qattn__check_decode_shapes(a, err, n);
    if (bounds != QATTN_OK) return bounds;
    if (a->q.rank != 4 || a->k_cache.rank != 3 || a->v_cache.rank != 3)
        return qattn__err(err, n, QATTN_ERR_SHAPE, "q must be rank 4 and the caches rank 3");
    const int64_t R = a->q.shape[1], Hq = a->q.shape[2], Hkv = a->k_cache.shape[1];
    const int64_t D = a->k_cache.shape[2];
    if (a->q.shape[0] < 1 || R < 1 || R > 8 || Hq < 1 || Hkv < 1 || Hq % Hkv != 0)
        return qattn__err(err, n, QATTN_ERR_SHAPE,
                          "decode shape: need B >= 1, R in 1..8, Hq a multiple of Hkv >= 1");
    if ((D != 64 && D != 128 && D != 256) || a->v_cache.shape[2] != D || a->q.shape[3] != D)
        return qattn__err(err, n, QATTN_ERR_SHAPE, "decode shape: D = Dv in {64, 128, 256}");
    if (a->max_kv_len < 0)
        return qattn__err(err, n, QATTN_ERR_INVALID_ARGUMENT, "max_kv_len: %d < 0", (int)a->max_kv_len);
    return QATTN_OK;
}

static qattn_status plan_tuned(const qattn_device_caps *caps, const qattn_decode_args *args,
                               const qattn_decode_options *options, const decode_tune *tune,
                               qattn_decode_plan *plan, char *err, size_t err_size) {
    if (!plan) return qattn__err(err, err_size, QATTN_ERR_INVALID_ARGUMENT, "plan: NULL");
    qattn_status s = qattn__check_caps(caps, err, err_size);
    if (s != QATTN_OK) return s;
    s = check_shapes(args, err, err_size);
    if (s != QATTN_OK) return s;
    const qattn_decode_variant pin = options ? options->variant : QATTN_DECODE_AUTO;
    if ((int)pin < 0 || pin >= QATTN_DECODE_VARIANT_COUNT)
        return qattn__err(err, err_size, QATTN_ERR_INVALID_ARGUMENT, "options.variant: %d unknown",
                          (int)pin);

    qattn_decode_plan p;
    memset(&p, 0, sizeof p);
    p.batch = (int32_t)args->q.shape[0];
    p.rows = (int32_t)args->q.shape[1];
    p.q_heads = (int32_t)args->q.shape[2];
    p.kv_heads = (int32_t)args->k_cache.shape[1];
    p.head_dim = (int32_t)args->k_cache.shape[2];
    p.head_dim_v = (int32_t)args->v_cache.shape[2];
    p.kv_dtype = args->k_cache.dtype;
    const int64_t R = p.rows, G = p.q_heads / p.kv_heads;

    char why_packed[QATTN_REASON_BYTES] = "", why_coop[QATTN_REASON_BYTES] = "";
    char why_stream[QATTN_REASON_BYTES] = "";
    const int packed_ok = packed_gate(caps, args, why_packed, sizeof why_packed);
    const int coop_ok = coopmat_gate(caps, args, why_coop, sizeof why_coop);
    const int stream_ok = stream_gate(caps, args, why_stream, sizeof why_stream);

    if (pin == QATTN_DECODE_PACKED_FP8 && !packed_ok)
        return qattn__err(err, err_size, QATTN_ERR_VARIANT_GATE, "pinned %s", why_packed);
    if (pin == QATTN_DECODE_COOPMAT && !coop_ok)
        return qattn__err(err, err_size, QATTN_ERR_VARIANT_GATE, "pinned %s", why_coop);
    if (pin == QATTN_DECODE_STREAM && !stream_ok)
        return qattn__err(err, err_size, QATTN_ERR_VARIANT_GATE, "pinned %s", why_stream);

    if (pin != QATTN_DECODE_AUTO) {
        p.variant = pin;
        snprintf(p.reason, sizeof p.reason, "pinned");
    } else {
        /* Rows sharing one KV tile if the coopmat kernel ran it. */
        const int64_t coop_rows = largest_divisor_upto(G, COOP_M / R) * R;
        if (coop_ok && coop_rows >= QATTN_DECODE_COOPMAT_MIN_ROWS) {
            p.variant = QATTN_DECODE_COOPMAT;
        } else if (R == 1 && packed_ok) {
            p.variant = QATTN_DECODE_PACKED_FP8;
        } else {
            p.variant = R > 1 ? QATTN_DECODE_MULTIROW : QATTN_DECODE_GENERIC;
            /* Say why the faster reader was not taken (for R == 1 the
             * packed reader; for R > 1 multirow is the preferred scalar). */
            if (R == 1) snprintf(p.reason, sizeof p.reason, "%s", why_packed);
        }
    }
    if (p.variant == QATTN_DECODE_COOPMAT) s = coopmat_geometry(caps, args, &p, err, err_size);
    else if (p.variant == QATTN_DECODE_STREAM) s = stream_geometry(caps, args, tune, &p, err, err_size);
    else s = scalar_geometry(caps, args, tune, &p, err, err_size);
    if (s != QATTN_OK) return s;
    if ((s = splits(caps, args, options, &p, err, err_size)) != QATTN_OK) return s;
    qattn__seal_decode_plan(plan, &p, args);
    return QATTN_OK;
}

qattn_status qattn_decode_plan_compute(const qattn_device_caps *caps, const qattn_decode_args *args,
                                       const qattn_decode_options *options, qattn_decode_plan *plan,
                                       char *err, size_t err_size) {
    const decode_tune none = {0, 0, 0, 0};
    return plan_tuned(caps, args, options, &none, plan, err, err_size);
}

/* Parses QATTN_DECODE_TUNE (see decode_tune). */
static int parse_tune(const char *s, decode_tune *t) {
    memset(t, 0, sizeof *t);
    while (s && *s) {
        char key[16];
        long long v;
        int used = 0;
        if (sscanf(s, "%15[a-z]=%lld%n", key, &v, &used) != 2) return 0;
        if (!strcmp(key, "wg")) t->wg = v;
        else if (!strcmp(key, "depth")) t->depth = v;
        else if (!strcmp(key, "lpk")) t->lpk = v;
        else if (!strcmp(key, "qh")) t->qh = v;
        else return 0;
        s += used;
        if (*s == ',') ++s;
        else if (*s) return 0;
    }
    return 1;
}

static int parse_variant(const char *s, qattn_decode_variant *v) {
    for (int i = 0; i < QATTN_DECODE_VARIANT_COUNT; ++i)
        if (strcmp(s, qattn_decode_variant_name((qattn_decode_variant)i)) == 0) {
            *v = (qattn_decode_variant)i;
            return 1;
        }
    return 0;
}

qattn_status qattn_decode_plan_create(qattn_context *ctx, const qattn_decode_args *args,
                                      const qattn_decode_options *options, qattn_decode_plan *plan) {
    if (!ctx) return QATTN_ERR_INVALID_ARGUMENT;
    if (!plan) return qattn__fail(ctx, QATTN_ERR_INVALID_ARGUMENT, "plan: NULL");
    qattn_status s = qattn__validate_decode(args, ctx->last_error, sizeof ctx->last_error);
    if (s != QATTN_OK) return s;
    qattn_decode_options o;
    memset(&o, 0, sizeof o);
    if (options) o = *options;
    if (o.variant == QATTN_DECODE_AUTO) {
        const char *env = qattn__getenv("QATTN_DECODE_VARIANT");
        if (env && !parse_variant(env, &o.variant))
            return qattn__fail(ctx, QATTN_ERR_INVALID_ARGUMENT,
                               "QATTN_DECODE_VARIANT=%s: not one of auto, generic, packed_fp8, "
                               "multirow, coopmat, stream",
                               env);
    }
    decode_tune tune;
    const char *tenv = qattn__getenv("QATTN_DECODE_TUNE");
    if (!parse_tune(tenv, &tune))
        return qattn__fail(ctx, QATTN_ERR_INVALID_ARGUMENT,
                           "QATTN_DECODE_TUNE=%s: want key=value pairs of wg, depth, lpk, qh", tenv);
    qattn_decode_plan p;
    s = plan_tuned(&ctx->caps, args, &o, &tune, &p, ctx->last_error, sizeof ctx->last_error);
    if (s != QATTN_OK) return s;
    if (ctx->iface->supports_op && !ctx->iface->supports_op(ctx->be, QATTN_OP_DECODE, &p))
        return qattn__fail(ctx, QATTN_ERR_UNSUPPORTED, "decode: the %s backend on %s cannot run variant %s",
                           ctx->iface->name, ctx->caps.arch, qattn_decode_variant_name(p.variant));
    *plan = p;
    return QATTN_OK;
}
