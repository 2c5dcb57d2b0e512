/*
 * The decode planner: every launch decision of decode attention for a shape
 * on a device (qattn_decode_plan_compute, pure: shapes and capabilities
 * only); qattn_decode_plan_create adds validation and the
 * QATTN_DECODE_VARIANT pin. Backends launch what the plan says.
 *
 * One design, two variants (shaders/decode_tiled.comp, docs/design.md):
 *   matrix  the tiles' products on the matrix unit (f16 operands): fp8 and
 *           int8 caches on a device with a 16x8x16 or 16x16x16 f16 -> f32
 *           shape; AUTO takes it whenever its gate passes;
 *   simt    the same tiles with dot products on the vector units: any
 *           device, every dtype.
 * A pinned variant whose gate fails is an error naming the condition.
 *
 * Geometry: a workgroup is one subgroup (so the kernel's barriers are cheap
 * and its reductions are subgroup operations) handling one (split, kv head,
 * block of q_heads_per_workgroup query heads, request); its query rows
 * (heads x R, at most 16) are the N columns of the products, padded to
 * row_slots. Keys go through in tiles of 16. Every stage-1 workgroup writes
 * its partial output, and one merge launch combines the splits (and applies
 * the sink), so the workspace is always needed.
 *
 * Splits: enough workgroups to keep every compute unit busy with several
 * (their loads overlap), but at least MIN_SPLIT_KEYS keys each, so a
 * workgroup's fixed costs (q staging, partial writes) stay small against
 * its reading, and no more than splits of LONG_SPLIT_KEYS once a few
 * workgroups per compute unit exist (the merge's cost grows with splits).
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

/* Keys per tile (the matrix M of S^T = K Q^T, 16): the kernel's loads in
 * flight and its registers scale with it (32 was slower on every preset
 * measured, docs/perf_decode_notes.md). */
#define TILE_KEYS 16
#define MAX_BLOCK_ROWS 16  /* query rows per workgroup: the largest matrix N */
#define MIN_SPLIT_KEYS 128 /* keys per split at least (8 tiles) */
#define WG_PER_CU 32       /* stage-1 workgroups to aim for per compute unit (measured: more hide more latency) */
#define LONG_SPLIT_KEYS 256 /* a split this long needs no further splitting ... */
#define MIN_WG_PER_CU 4     /* ... while the device keeps this many workgroups per compute unit */
#define MERGE_WG 256
#define MERGE_DIMS 32      /* output dims per merge workgroup (its threads split the splits) */
#define MAX_GRID 65535     /* Vulkan's guaranteed maxComputeWorkGroupCount */

const char *qattn_decode_variant_name(qattn_decode_variant v) {
    switch (v) {
    case QATTN_DECODE_AUTO: return "auto";
    case QATTN_DECODE_SIMT: return "simt";
    case QATTN_DECODE_MATRIX: return "matrix";
    case QATTN_DECODE_REGS: return "regs";
    default: return "invalid";
    }
}

#define note(p, ...) qattn__append_reason((p)->reason, sizeof (p)->reason, __VA_ARGS__)

static int64_t largest_divisor_upto(int64_t g, int64_t cap) {
    if (cap < 1) cap = 1;
    for (int64_t d = cap < g ? cap : g; d >= 1; --d)
        if (g % d == 0) return d;
    return 1;
}

/* Exact shared bytes of decode_tiled.comp (mirrors its declarations): q rows
 * and their factors, the K and V tiles (rows of D/8 + 1 uvec4), S^T, P^T,
 * per-key scales and positions. */
static uint64_t tiled_shared(int64_t D, int64_t Dv, int64_t nr) {
    const uint64_t ld4 = (uint64_t)(D / 8 + 1) * 16u, ldv4 = (uint64_t)(Dv / 8 + 1) * 16u, tk = TILE_KEYS;
    return (uint64_t)nr * ld4 + (uint64_t)nr * 4u + tk * ld4 + tk * ldv4 + tk * (uint64_t)nr * 4u +
           (uint64_t)nr * (tk + 8) * 2u + 3u * tk * 4u;
}

/* The f16 -> f32 matrix shape 16 x n x 16 of the device, or NULL. */
static const qattn_matrix_shape *f16_shape(const qattn_device_caps *caps, int n) {
    for (int i = 0; i < caps->n_matrix_shapes && i < QATTN_MAX_MATRIX_SHAPES; ++i) {
        const qattn_matrix_shape *s = &caps->matrix_shapes[i];
        if (s->m == 16 && s->n == n && s->k == 16 && s->a_type == QATTN_F16 && s->c_type == QATTN_F32)
            return s;
    }
    return NULL;
}

/* The subgroup size the kernel is built for: one subgroup is the whole
 * workgroup, so the device must run exactly that many lanes per subgroup
 * (a fixed size, or a pinned one). 32 where the device allows it. */
static int subgroup_of(const qattn_device_caps *caps, uint32_t *sg, char *why, size_t n) {
    const uint32_t lo = caps->subgroup_size_min, hi = caps->subgroup_size_max;
    if (lo == 0 || hi < lo) {
        snprintf(why, n, "decode: device %s reports no subgroup size", caps->arch);
        return 0;
    }
    if (lo != hi && !(caps->features & QATTN_FEAT_SUBGROUP_SIZE_CONTROL)) {
        snprintf(why, n, "decode: device %s runs subgroups of %u..%u lanes and cannot pin one", caps->arch,
                 (unsigned)lo, (unsigned)hi);
        return 0;
    }
    uint32_t s = 32;
    if (s < lo) s = lo;
    if (s > hi) s = hi;
    if (s > caps->max_workgroup_size) {
        snprintf(why, n, "decode: subgroups of %u lanes exceed workgroups of %u", (unsigned)s,
                 (unsigned)caps->max_workgroup_size);
        return 0;
    }
    *sg = s;
    return 1;
}

/* The matrix variant's gate for a block of `rows` query rows; on success
 * *shape is the shape to use (16x8x16 when the rows fit it, else 16x16x16). */
static int matrix_gate(const qattn_device_caps *caps, const qattn_decode_args *a, int64_t rows,
                       const qattn_matrix_shape **shape, char *why, size_t n) {
    if (a->k_cache.dtype == QATTN_BF16) {
        snprintf(why, n, "matrix gate: a bf16 cache needs bf16 matrix operands (f16 cannot hold its "
                         "range; the shader compiler has no bf16 matrix type)");
        return 0;
    }
    if (!(caps->features & QATTN_FEAT_COOPMAT)) {
        snprintf(why, n, "matrix gate: device %s has no matrix unit", caps->arch);
        return 0;
    }
    const qattn_matrix_shape *s = rows <= 8 ? f16_shape(caps, 8) : NULL;
    if (!s) s = f16_shape(caps, 16);
    if (!s) {
        snprintf(why, n, "matrix gate: device %s offers no 16x%dx16 f16 -> f32 shape", caps->arch,
                 rows <= 8 ? 8 : 16);
        return 0;
    }
    const int64_t D = a->k_cache.shape[a->k_cache.rank - 1], Dv = a->v_cache.shape[a->v_cache.rank - 1];
    if (tiled_shared(D, Dv, s->n) > caps->max_shared_bytes) {
        snprintf(why, n, "matrix gate: %d padded row slots need %" PRIu64 " B of shared memory > %u",
                 (int)s->n, tiled_shared(D, Dv, s->n), (unsigned)caps->max_shared_bytes);
        return 0;
    }
    *shape = s;
    return 1;
}

/* The register-resident variant's gate (shaders/decode_regs.comp): every
 * query row of a workgroup on the M side of one 16x16x16 f16 fragment, each
 * lane building its K and V fragments from its own 16-byte loads, which
 * needs the device's fragment layout, subgroups of 32 (or the HIP
 * backend's gfx942 wave64), whole 16-byte K/V chunks, and tiles that lie
 * in one page. */
static int regs_gate(const qattn_device_caps *caps, const qattn_decode_args *a, uint32_t sg, int32_t load,
                     char *why, size_t n) {
    const int cr = a->k_cache.rank;
    const int64_t D = a->k_cache.shape[cr - 1];
    if (a->k_cache.dtype == QATTN_BF16) {
        snprintf(why, n, "regs gate: a bf16 cache needs bf16 matrix operands");
        return 0;
    }
    if (!(caps->features & QATTN_FEAT_COOPMAT) || !f16_shape(caps, 16)) {
        snprintf(why, n, "regs gate: device %s offers no 16x16x16 f16 -> f32 matrix shape", caps->arch);
        return 0;
    }
    if (!(caps->features & QATTN_FEAT_FRAGMENT_LAYOUT)) {
        snprintf(why, n, "regs gate: the fragment layout of device %s is not one the kernel knows", caps->arch);
        return 0;
    }
    /* 32 lanes: the layout the Vulkan kernel knows (probed) and the HIP
     * backend's wave32 kernels; 64 only for the HIP backend's gfx942 kernel
     * (MFMA fragments of a wave64; a HIP device's arch is its ISA name, a
     * Vulkan one's reads "vulkan:..."). */
    const int wave64_ok = sg == 64 && strcmp(caps->arch, "gfx942") == 0;
    if (sg != 32 && !wave64_ok) {
        snprintf(why, n, "regs gate: subgroups of %u lanes (the kernel's fragments need 32)", (unsigned)sg);
        return 0;
    }
    /* The head dim is compiled into the kernel (its fragments are arrays):
     * the two sizes most models use; any other D takes the matrix variant. */
    const int64_t Dv = a->v_cache.shape[a->v_cache.rank - 1];
    if ((D != 64 && D != 128) || Dv != D) {
        snprintf(why, n, "regs gate: head dims %d/%d (the kernel is built for D = Dv in {64, 128})", (int)D,
                 (int)Dv);
        return 0;
    }
    if (a->page_size % TILE_KEYS != 0) {
        snprintf(why, n, "regs gate: page_size %d is not a multiple of %d", (int)a->page_size, TILE_KEYS);
        return 0;
    }
    if (load < 16) {
        snprintf(why, n, "regs gate: K/V rows allow %d-byte loads (16 needed)", (int)load);
        return 0;
    }
    return 1;
}

/* ---- the planner ---------------------------------------------------------- */

/* The planner's own shape rules, on args whose bounds are checked
 * (qattn__check_decode_shapes, run by validation and by the pure planner). */
static qattn_status check_shapes(const qattn_decode_args *a, char *err, size_t n) {
    if (a->q.rank != 4 || (a->k_cache.rank != 3 && a->k_cache.rank != 4) ||
        a->v_cache.rank != a->k_cache.rank)
        return qattn__err(err, n, QATTN_ERR_SHAPE, "q must be rank 4 and the caches rank 3 or 4");
    const int cr = a->k_cache.rank;
    const int64_t R = a->q.shape[1], Hq = a->q.shape[2], Hkv = a->k_cache.shape[cr - 2];
    const int64_t D = a->k_cache.shape[cr - 1];
    if (a->q.shape[0] < 1 || R < 1 || R > 8 || Hq < 1 || Hkv < 1 || Hq % Hkv != 0)
        return qattn__err(err, n, QATTN_ERR_SHAPE,
                          "decode shape: need B >= 1, R in 1..8, Hq a multiple of Hkv >= 1");
    const int64_t Dv = a->v_cache.shape[cr - 1];
    if (D < 16 || D > 256 || D % 16 != 0 || Dv < 16 || Dv > 256 || Dv % 16 != 0 || a->q.shape[3] != D)
        return qattn__err(err, n, QATTN_ERR_SHAPE,
                          "decode shape: D and Dv multiples of 16 in [16, 256], q's last dim = D");
    if (a->max_kv_len < 0)
        return qattn__err(err, n, QATTN_ERR_INVALID_ARGUMENT, "max_kv_len: %d < 0", (int)a->max_kv_len);
    if (a->page_size < 1)
        return qattn__err(err, n, QATTN_ERR_INVALID_ARGUMENT, "page_size: %d, must be >= 1", (int)a->page_size);
    if (cr == 4 && (a->k_cache.shape[1] != a->page_size || a->v_cache.shape[1] != a->page_size))
        return qattn__err(err, n, QATTN_ERR_SHAPE,
                          "page_size: %d, but the rank-4 caches hold pages of %" PRId64 " rows",
                          (int)a->page_size, a->k_cache.shape[1]);
    if (a->q.shape[0] > MAX_GRID)
        return qattn__err(err, n, QATTN_ERR_UNSUPPORTED, "q: batch %" PRId64 " > %d requests per launch",
                          a->q.shape[0], MAX_GRID);
    return QATTN_OK;
}

/* The widest load (bytes, 16 at most) every K/V row start allows: offsets
 * and strides (the backend checks the buffers' own addresses). */
static int32_t load_bytes(const qattn_decode_args *a) {
    const qattn_tensor *t2[2] = {&a->k_cache, &a->v_cache};
    uint64_t bits = 16;
    for (int i = 0; i < 2; ++i) {
        const qattn_tensor *t = t2[i];
        const uint64_t es = qattn_dtype_size(t->dtype);
        bits |= t->offset;
        for (int d = 0; d + 1 < t->rank; ++d)
            if (t->shape[d] > 1) bits |= (uint64_t)t->strides[d] * es;
    }
    return (int32_t)(bits & (~bits + 1)); /* lowest set bit */
}

/* The planner proper: args bounded (qattn__check_decode_shapes passed) and
 * options already read into this build's layout, each done once by the
 * caller (qattn_decode_plan_create or _compute). */
static qattn_status plan_checked(const qattn_device_caps *caps, const qattn_decode_args *args,
                                 const qattn_decode_options *options, qattn_decode_plan *plan,
                                 char *err, size_t err_size) {
    qattn_status s = qattn__check_caps(caps, err, err_size);
    if (s != QATTN_OK) return s;
    s = check_shapes(args, err, err_size);
    if (s != QATTN_OK) return s;
    const qattn_decode_variant pin = options->variant;
    if ((int)pin < 0 || pin >= QATTN_DECODE_VARIANT_COUNT)
        return qattn__err(err, err_size, QATTN_ERR_INVALID_ARGUMENT, "options.variant: %d unknown",
                          (int)pin);
    const int cr = args->k_cache.rank;
    qattn_decode_plan p;
    memset(&p, 0, sizeof p);
    p.batch = (int32_t)args->q.shape[0];
    p.rows = (int32_t)args->q.shape[1];
    p.q_heads = (int32_t)args->q.shape[2];
    p.kv_heads = (int32_t)args->k_cache.shape[cr - 2];
    p.head_dim = (int32_t)args->k_cache.shape[cr - 1];
    p.head_dim_v = (int32_t)args->v_cache.shape[cr - 1];
    p.kv_dtype = args->k_cache.dtype;
    p.max_kv_len = args->max_kv_len;
    const int64_t B = p.batch, R = p.rows, Hkv = p.kv_heads, D = p.head_dim;
    const int64_t G = p.q_heads / p.kv_heads;

    char why[QATTN_REASON_BYTES] = "";
    if (!(caps->features & QATTN_FEAT_SHADER_F16))
        return qattn__err(err, err_size, QATTN_ERR_UNSUPPORTED,
                          "decode: device %s has no f16 arithmetic (the tiles are staged in f16)", caps->arch);
    uint32_t sg = 0;
    if (!subgroup_of(caps, &sg, why, sizeof why))
        return qattn__err(err, err_size, QATTN_ERR_UNSUPPORTED, "%s", why);

    /* Query heads per workgroup: as many of the group as fit 16 rows, so
     * each K/V tile serves all of them. */
    const int64_t qh = largest_divisor_upto(G, MAX_BLOCK_ROWS / R);
    const int64_t rows = qh * R;
    const qattn_matrix_shape *shape = NULL;
    char why_matrix[QATTN_REASON_BYTES] = "";
    const int matrix_ok = matrix_gate(caps, args, rows, &shape, why_matrix, sizeof why_matrix);
    const int32_t load = load_bytes(args);
    char why_regs[QATTN_REASON_BYTES] = "";
    const int regs_ok = regs_gate(caps, args, sg, load, why_regs, sizeof why_regs);
    if (pin == QATTN_DECODE_MATRIX && !matrix_ok)
        return qattn__err(err, err_size, QATTN_ERR_VARIANT_GATE, "pinned %s", why_matrix);
    if (pin == QATTN_DECODE_REGS && !regs_ok)
        return qattn__err(err, err_size, QATTN_ERR_VARIANT_GATE, "pinned %s", why_regs);
    if (pin != QATTN_DECODE_AUTO) {
        p.variant = pin;
        snprintf(p.reason, sizeof p.reason, "pinned");
    } else if (regs_ok) {
        p.variant = QATTN_DECODE_REGS;
    } else if (matrix_ok) {
        p.variant = QATTN_DECODE_MATRIX;
        snprintf(p.reason, sizeof p.reason, "%s", why_regs);
    } else {
        p.variant = QATTN_DECODE_SIMT;
        snprintf(p.reason, sizeof p.reason, "%s", why_matrix);
    }
    p.subgroup_size = (int32_t)sg;
    p.workgroup_size = (int32_t)sg;
    p.keys_per_tile = TILE_KEYS;
    /* Pages of a multiple of the tile's keys: each tile is rows of one page
     * (one page id, one base per tile); otherwise each key finds its own. */
    p.page_tiled = args->page_size % TILE_KEYS == 0;
    if (!p.page_tiled) {
        /* The per-key path forms a key's row offset from its head's base in
         * 32 bits (exact modulo 2^32): every cache tensor must span fewer
         * than 2^32 elements. */
        const qattn_tensor *t4[4] = {&args->k_cache, &args->v_cache, &args->k_scale, &args->v_scale};
        for (int i = 0; i < 4; ++i) {
            uint64_t first = 0, end = 0;
            if (!qattn_tensor_present(t4[i])) continue;
            const uint64_t es = qattn_dtype_size(t4[i]->dtype) ? qattn_dtype_size(t4[i]->dtype) : 1u;
            if (qattn__tensor_extent(t4[i], &first, &end) != QATTN_OK || (end - first) / es > UINT32_MAX)
                return qattn__err(err, err_size, QATTN_ERR_UNSUPPORTED,
                                  "decode: %s spans 2^32 elements or more; such a cache needs page_size a "
                                  "multiple of %d (page_size %d: each key is addressed in 32 bits)",
                                  i == 0 ? "k_cache" : i == 1 ? "v_cache" : i == 2 ? "k_scale" : "v_scale",
                                  TILE_KEYS, (int)args->page_size);
        }
    }
    p.load_bytes = load;
    if (p.load_bytes < 16) note(&p, "K/V rows allow %d-byte loads", (int)p.load_bytes);
    p.q_heads_per_workgroup = (int32_t)qh;
    p.head_blocks = (int32_t)(G / qh);
    if (p.variant == QATTN_DECODE_MATRIX) {
        p.matrix_shape = *shape;
        p.row_slots = shape->n;
    } else if (p.variant == QATTN_DECODE_REGS) {
        p.matrix_shape = *f16_shape(caps, 16);
        p.row_slots = 16; /* the fragments' M */
    } else {
        p.row_slots = (int32_t)rows;
    }
    /* The register-resident kernel stages only q, once. */
    const uint64_t sh = p.variant == QATTN_DECODE_REGS ? QATTN_DECODE_REGS_SHARED_BYTES(D)
                                                       : tiled_shared(D, p.head_dim_v, p.row_slots);
    if (sh > caps->max_shared_bytes)
        return qattn__err(err, err_size, QATTN_ERR_UNSUPPORTED,
                          "decode: a tile of D %" PRId64 " for %d rows needs %" PRIu64
                          " B of shared memory > the device's %u",
                          D, (int)p.row_slots, sh, (unsigned)caps->max_shared_bytes);
    p.shared_bytes = (uint32_t)sh;
    const int64_t blocks = Hkv * (G / qh);
    /* The merge takes Dv in chunks of MERGE_DIMS dims, or of 16 when Dv
     * is an odd number of 16s. */
    const int32_t merge_dims = p.head_dim_v % MERGE_DIMS == 0 ? MERGE_DIMS : 16;
    if (G * R * (p.head_dim_v / merge_dims) > MAX_GRID)
        return qattn__err(err, err_size, QATTN_ERR_UNSUPPORTED,
                          "decode: %" PRId64 " query rows per kv head x %d-dim chunks > %d per merge launch",
                          G * R, (int)merge_dims, MAX_GRID);
    if (blocks > MAX_GRID)
        return qattn__err(err, err_size, QATTN_ERR_UNSUPPORTED,
                          "decode: %" PRId64 " kv heads x head blocks > %d per launch", blocks, MAX_GRID);

    /* Splits. */
    const int64_t L = args->max_kv_len;
    int64_t splits;
    if (options->num_splits != 0) {
        if (options->num_splits < 1 || options->num_splits > QATTN_MAX_SPLITS)
            return qattn__err(err, err_size, QATTN_ERR_INVALID_ARGUMENT,
                              "options.num_splits: %d outside 1..%d (0 = planner's choice)",
                              (int)options->num_splits, QATTN_MAX_SPLITS);
        splits = options->num_splits;
    } else {
        const int64_t cu = caps->compute_units > 0 ? caps->compute_units : 1;
        const int64_t units = B * blocks;
        splits = (cu * WG_PER_CU + units - 1) / units;
        /* Few requests: each split adds partials that the merge of a row
         * reads one after another, so once splits hold LONG_SPLIT_KEYS keys
         * and every compute unit has MIN_WG_PER_CU workgroups, more splits
         * cost more than they hide (the split sweeps behind both numbers:
         * docs/perf_decode_notes.md). */
        int64_t enough = L / LONG_SPLIT_KEYS;
        if (enough < (cu * MIN_WG_PER_CU + units - 1) / units) enough = (cu * MIN_WG_PER_CU + units - 1) / units;
        if (splits > enough) splits = enough;
        const int64_t by_len = L / MIN_SPLIT_KEYS;
        if (splits > by_len) splits = by_len;
        if (splits > QATTN_MAX_SPLITS) splits = QATTN_MAX_SPLITS;
        if (splits < 1) splits = 1;
    }
    /* Whole tiles per split; a planner's choice drops splits that would
     * start past max_kv_len. */
    int64_t kps = L > 0 ? (L + splits - 1) / splits : TILE_KEYS;
    kps = (kps + TILE_KEYS - 1) / TILE_KEYS * TILE_KEYS;
    /* The last split runs to the request's end, so a clamp loses no key. */
    if (kps > INT32_MAX / TILE_KEYS * TILE_KEYS) kps = INT32_MAX / TILE_KEYS * TILE_KEYS;
    if (options->num_splits == 0) splits = L > 0 ? (L + kps - 1) / kps : 1;
    p.num_splits = (int32_t)splits;
    p.keys_per_split = (int32_t)kps;
    p.grid[0] = (uint32_t)splits;
    p.grid[1] = (uint32_t)blocks;
    p.grid[2] = (uint32_t)B;
    p.merge_grid[0] = (uint32_t)(G * R * (p.head_dim_v / merge_dims));
    p.merge_grid[1] = (uint32_t)Hkv;
    p.merge_grid[2] = (uint32_t)B;
    p.merge_workgroup_size = MERGE_WG;
    p.merge_dims = merge_dims;

    /* Workspace; the kernels address partials in 32-bit element offsets. */
    const uint64_t slots = (uint64_t)B * (uint64_t)blocks * (uint64_t)p.row_slots;
    const uint64_t o_elems = slots * (uint64_t)splits * (uint64_t)p.head_dim_v;
    if (o_elems >= (1ull << 32))
        return qattn__err(err, err_size, QATTN_ERR_OVERFLOW,
                          "decode: %" PRIu64 " partial output elements do not fit 32-bit offsets", o_elems);
    p.partial_o_offset = 0;
    p.partial_ml_offset = (o_elems * 4u + 255u) / 256u * 256u;
    p.workspace_bytes = p.partial_ml_offset + slots * (uint64_t)splits * 8u;
    qattn__seal_decode_plan(plan, &p, args);
    return QATTN_OK;
}

qattn_status qattn_decode_plan_compute(const qattn_device_caps *caps, const qattn_decode_args *args,
                                       const qattn_decode_options *options, qattn_decode_plan *plan,
                                       char *err, size_t err_size) {
    if (!plan) return qattn__err(err, err_size, QATTN_ERR_INVALID_ARGUMENT, "plan: NULL");
    if (!args) return qattn__err(err, err_size, QATTN_ERR_INVALID_ARGUMENT, "args: NULL");
    /* Every size the planner computes with fits its type first. */
    qattn_status s = qattn__check_decode_shapes(args, err, err_size);
    if (s != QATTN_OK) return s;
    qattn_decode_options opt; /* what follows reads this build's layout only */
    s = qattn__read_decode_options(options, &opt, err, err_size);
    if (s != QATTN_OK) return s;
    return plan_checked(caps, args, &opt, plan, err, err_size);
}

static int parse_variant(const char *s, qattn_decode_variant *v) {
    for (int i = 0; i < QATTN_DECODE_VARIANT_COUNT; ++i)
        if (qattn__name_is(s, qattn_decode_variant_name((qattn_decode_variant)i))) {
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
    s = qattn__read_decode_options(options, &o, ctx->last_error, sizeof ctx->last_error);
    if (s != QATTN_OK) return s;
    if (o.variant == QATTN_DECODE_AUTO) {
        const char *env = qattn__getenv("QATTN_DECODE_VARIANT");
        if (env && !parse_variant(env, &o.variant))
            return qattn__fail(ctx, QATTN_ERR_INVALID_ARGUMENT,
                               "QATTN_DECODE_VARIANT=%s: not one of auto, simt, matrix, regs", env);
    }
    qattn_decode_plan p;
    /* validation checked the shapes' bounds and o is read: plan directly */
    s = plan_checked(&ctx->caps, args, &o, &p, ctx->last_error, sizeof ctx->last_error);
    if (s != QATTN_OK) return s;
    /* The backend may refuse a plan its caps allowed (a shader it lacks).
     * The one policy of every planner (docs/design.md): a pinned variant is
     * then a gate failure; AUTO steps down to the next variant (matrix to
     * simt, with the refusal in the reason); only a refused simt plan is
     * unsupported. */
    const int pinned = o.variant != QATTN_DECODE_AUTO;
    const qattn_backend_iface *ifc = ctx->iface;
    /* AUTO steps down regs -> matrix -> simt while the backend refuses;
     * each step's plan passes its own gate or is skipped. */
    static const qattn_decode_variant order[] = {QATTN_DECODE_REGS, QATTN_DECODE_MATRIX, QATTN_DECODE_SIMT};
    for (int i = 0; i < 2 && !pinned && ifc->supports_op; ++i) {
        if (p.variant != order[i] || ifc->supports_op(ctx->be, QATTN_OP_DECODE, &p)) continue;
        const qattn_decode_variant refused = p.variant;
        qattn_decode_options next = o;
        qattn_decode_plan q;
        next.variant = order[i + 1];
        if (plan_checked(&ctx->caps, args, &next, &q, ctx->last_error, sizeof ctx->last_error) != QATTN_OK) {
            if (order[i + 1] == QATTN_DECODE_SIMT) return QATTN_ERR_UNSUPPORTED;
            next.variant = QATTN_DECODE_SIMT;
            s = plan_checked(&ctx->caps, args, &next, &q, ctx->last_error, sizeof ctx->last_error);
            if (s != QATTN_OK) return s;
        }
        qattn_decode_plan stepped = q;
        snprintf(stepped.reason, sizeof stepped.reason, "%s refused by the backend",
                 qattn_decode_variant_name(refused));
        qattn__seal_decode_plan(&p, &stepped, args); /* the reason changed */
    }
    if (ifc->supports_op && !ifc->supports_op(ctx->be, QATTN_OP_DECODE, &p))
        return qattn__fail(ctx, pinned ? QATTN_ERR_VARIANT_GATE : QATTN_ERR_UNSUPPORTED,
                           "decode: the %s backend on %s cannot run variant %s%s", ifc->name,
                           ctx->caps.arch, qattn_decode_variant_name(p.variant), pinned ? " (pinned)" : "");
    *plan = p;
    return QATTN_OK;
}
