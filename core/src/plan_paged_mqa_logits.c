/*
 * The paged FP8 MQA logits planner (spec section 5): the variant and every
 * launch decision, from shapes, strides, device capabilities and
 * max_kv_len alone. It never sees kv_lens or the page table, so a plan made
 * once serves every decode step of that shape, and a graph-captured launch
 * and an eager one are the same.
 *
 * The launch (shaders/paged_mqa_logits_simt.comp mirrors the geometry):
 * - A workgroup owns one request and one split, a range of keys_per_split
 *   context positions; grid[0] = num_splits covers max_kv_len, grid[1]
 *   walks the requests. A split that starts past its request's length only
 *   writes -inf (clean_logits) and leaves: that decision is on the device.
 * - Each tile of kv_tile keys is read once: the workgroup looks every key's
 *   slot up in the page table, decodes its codes to f16 (exact for fp8) and
 *   its scale into shared memory, and all N rows of the request score the
 *   tile from there. K is read once per request, never once per row.
 * - One thread per key of the tile, so kv_tile = workgroup_size.
 * - q_staged: per tile and row, the workgroup decodes the row's H x D q
 *   codes once into shared memory (f16, exact), so the threads' inner loop
 *   is two shared reads and a dot per four products instead of an fp8
 *   decode per product. Taken when the q row fits beside a tile of at
 *   least Q_STAGE_MIN_TILE keys; otherwise each thread decodes q itself.
 *
 * Choices
 * - workgroup_size 128 (four 32-lane or two 64-lane subgroups: enough
 *   threads to keep 16-byte loads of one tile in flight), halved while the
 *   tile's shared memory exceeds the device's limit (D = 512 on a 48 KiB
 *   device), down to 16.
 * - Splits: enough workgroups to fill the device SPLIT_WAVES times over
 *   (compute units x workgroups per unit the shared memory allows, at most
 *   4), shared among the B requests, each split at least MIN_SPLIT_TILES
 *   tiles so its page-table and clean-logits work stays small beside its
 *   keys; never more splits than tiles or than the grid's 65535.
 * - load_bytes 16 when q's rows and heads and every key row start 16-byte
 *   aligned (offsets and strides of the descriptors; run checks the device
 *   addresses), so keys and q move in 16-byte loads; 1 otherwise.
 *
 * The matrix variant (shaders/paged_mqa_logits_matrix.comp,
 * backend_hip/kernels/paged_mqa_logits.hip) scores on the matrix unit, the
 * keys on M and q's (row, head) columns on N:
 * - A workgroup of MX_SUBGROUPS subgroups of 32 lanes steps through its
 *   split kv_tile keys at a time; subgroup s holds key_tiles 16-key
 *   fragments of the step (keys 16 key_tiles s ..), converted once from
 *   fp8 (exact) and kept for every column of the request.
 * - q's columns are (row, head slot) pairs, head_slots = H rounded up to 16
 *   per row (padding slots zero, weight zero), staged as f16 in shared
 *   memory pass_rows rows at a time, at most MX_PASS_COLS columns a pass
 *   unless one row is wider. passes = 1 (the common N x H) stages q once
 *   per request; otherwise every step stages each pass again around two
 *   barriers and the step's fragments serve all of them.
 * - key_tiles from the registers a lane keeps for its fragments (D / 16
 *   blocks x 4 of them per 16 keys): 2 up to D 128, 1 at D 256; 1 when the
 *   fragments go through shared memory (fragment_layout 0).
 * - fragment_layout 1 when the device reports QATTN_FEAT_FRAGMENT_LAYOUT
 *   with a 16x16x16 shape: lanes build the key fragments from their own
 *   loads and apply ReLU x weight and the head sum to the accumulator in
 *   registers. Otherwise each subgroup stages its keys' f16 rows in shared
 *   memory for the matrix loads and stores each accumulator tile there for
 *   the epilogue (16 x 16 floats per tile, summed by lanes).
 * - Splits: requests x chunks of at least MX_MIN_SPLIT_KEYS keys, enough
 *   workgroups for MX_WG_PER_CU per compute unit SPLIT_WAVES times over.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

#define PM_THREADS 128      /* workgroup size before the shared-memory fit */
#define PM_MIN_THREADS 16   /* smallest tile the fit may reach */
#define Q_STAGE_MIN_TILE 32 /* staging q is worth no smaller tile */
#define MIN_SPLIT_TILES 4   /* a split keeps at least this many tiles */
#define SPLIT_WAVES 2       /* workgroups in flight x this = split target */
#define MAX_GRID 65535      /* Vulkan's guaranteed maxComputeWorkGroupCount */
#define MX_SUBGROUPS 4      /* matrix: subgroups per workgroup (four warps share q) */
#define MX_SG 32            /* matrix: the lanes its fragment mapping is written for */
#define MX_PASS_COLS 128    /* matrix: q columns staged at once (unless one row is wider) */
#define MX_MIN_SPLIT_KEYS 256 /* matrix: keys per split at least (page-table and -inf work stays small) */
#define MX_WG_PER_CU 4      /* matrix: resident workgroups per compute unit the splits aim at */

const char *qattn_paged_mqa_variant_name(qattn_paged_mqa_variant v) {
    switch (v) {
    case QATTN_PAGED_MQA_AUTO: return "auto";
    case QATTN_PAGED_MQA_SIMT: return "simt";
    case QATTN_PAGED_MQA_MATRIX: return "matrix";
    default: return "invalid";
    }
}

static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

#define add_reason(p, ...) qattn__append_reason((p)->reason, sizeof (p)->reason, __VA_ARGS__)

/* Shared bytes of the SIMT kernel for a tile of kt keys: the keys as f16,
 * their scales, 64-bit element offsets and slot-validity flags (the shader
 * declares exactly these). */
static int64_t simt_shared(int64_t kt, int64_t D) { return kt * D * 2 + kt * (4 + 8 + 4); }

/* Whether every start of a 16-code chunk a kernel loads lies on 16 bytes:
 * the tensor's offset and each stride of a dimension of extent > 1 (the
 * last dimension is contiguous and D is a multiple of 16). */
static int aligned16(const qattn_tensor *t) {
    if (t->offset % 16 != 0) return 0;
    for (int32_t i = 0; i + 1 < t->rank; ++i)
        if (t->shape[i] > 1 && t->strides[i] % 16 != 0) return 0;
    return 1;
}

/* The f16 x f16 -> f32 shape 16 x n x 16 the device lists, or NULL. */
static const qattn_matrix_shape *f16_shape(const qattn_device_caps *c, int n) {
    for (int32_t i = 0; i < c->n_matrix_shapes && i < QATTN_MAX_MATRIX_SHAPES; ++i) {
        const qattn_matrix_shape *s = &c->matrix_shapes[i];
        if (s->m == 16 && s->n == n && s->k == 16 && s->a_type == QATTN_F16 && s->c_type == QATTN_F32) return s;
    }
    return NULL;
}

/* Shared bytes of the matrix kernel (the shader declares exactly these):
 * pass_rows rows of staged q (head_slots columns of qr f16 each) and their
 * weights, and with fragment_layout 0 per subgroup its 16 keys' f16 rows
 * and one 16 x 16 f32 accumulator tile. */
static int64_t mx_shared(int64_t rows, int64_t hp, int64_t qr, int fragment_layout) {
    const int64_t per_row = hp * qr * 2 + hp * 4;
    return rows * per_row + (fragment_layout ? 0 : (int64_t)MX_SUBGROUPS * (16 * qr * 2 + 16 * 16 * 4));
}

/* The matrix variant's gate and geometry into p (whose shape fields are
 * set); 0 with the failed condition in why. */
static int matrix_plan(const qattn_device_caps *caps, const qattn_paged_mqa_logits_args *a,
                       qattn_paged_mqa_logits_plan *p, char *why, size_t n) {
    const int64_t N = p->rows, H = p->heads, D = p->head_dim;
    if (!(caps->features & QATTN_FEAT_COOPMAT)) {
        snprintf(why, n, "matrix gate: device %s has no matrix unit", caps->arch);
        return 0;
    }
    const qattn_matrix_shape *s16 = f16_shape(caps, 16), *s8 = f16_shape(caps, 8);
    if (!s16 && !s8) {
        snprintf(why, n, "matrix gate: device %s offers no 16x16x16 or 16x8x16 f16 -> f32 shape", caps->arch);
        return 0;
    }
    if (caps->subgroup_size_min > MX_SG || caps->subgroup_size_max < MX_SG) {
        snprintf(why, n, "matrix gate: device %s runs subgroups of %u..%u lanes, the kernel is written for %d",
                 caps->arch, (unsigned)caps->subgroup_size_min, (unsigned)caps->subgroup_size_max, MX_SG);
        return 0;
    }
    if (caps->subgroup_size_min != caps->subgroup_size_max && !(caps->features & QATTN_FEAT_SUBGROUP_SIZE_CONTROL)) {
        snprintf(why, n, "matrix gate: device %s runs subgroups of %u..%u lanes and cannot pin %d", caps->arch,
                 (unsigned)caps->subgroup_size_min, (unsigned)caps->subgroup_size_max, MX_SG);
        return 0;
    }
    if (MX_SUBGROUPS * MX_SG > (int64_t)caps->max_workgroup_size) {
        snprintf(why, n, "matrix gate: workgroups of %d lanes exceed the device's %u", MX_SUBGROUPS * MX_SG,
                 (unsigned)caps->max_workgroup_size);
        return 0;
    }
    if (D > 256) {
        snprintf(why, n, "matrix gate: D = %" PRId64 " (a lane keeps a 16-key fragment of D <= 256 dims)", D);
        return 0;
    }
    if (!aligned16(&a->q) || !aligned16(&a->k_cache)) {
        snprintf(why, n, "matrix gate: a q or k_cache row start is not 16-byte aligned (lanes load 16 bytes)");
        return 0;
    }
    const int layout = (caps->features & QATTN_FEAT_FRAGMENT_LAYOUT) && s16;
    const int64_t hp = (H + 15) / 16 * 16, qr = D + 8;
    const int64_t fixed = mx_shared(0, hp, qr, layout), per_row = mx_shared(1, hp, qr, 1);
    const int64_t rmax = ((int64_t)caps->max_shared_bytes - fixed) / per_row;
    if (rmax < 1) {
        snprintf(why, n, "matrix gate: one row of q (%" PRId64 " head slots x D = %" PRId64
                 ") staged as f16 needs %" PRId64 " B of shared memory, device allows %u",
                 hp, D, fixed + per_row, (unsigned)caps->max_shared_bytes);
        return 0;
    }
    int64_t rows = min64(N, min64(rmax, max64(1, MX_PASS_COLS / hp)));
    const int64_t passes = cdiv(N, rows);
    rows = cdiv(N, passes); /* as even as the passes allow */
    p->matrix_shape = s16 ? *s16 : *s8;
    p->subgroup_size = MX_SG;
    p->subgroups = MX_SUBGROUPS;
    p->workgroup_size = MX_SUBGROUPS * MX_SG;
    p->key_tiles = !layout || D > 128 ? 1 : 2;
    p->kv_tile = 16 * p->key_tiles * MX_SUBGROUPS;
    p->head_slots = (int32_t)hp;
    p->pass_rows = (int32_t)rows;
    p->passes = (int32_t)passes;
    p->fragment_layout = layout;
    p->q_row_halves = (int32_t)qr;
    p->q_staged = 1;
    p->q_stage_bytes = (int32_t)(rows * hp * qr * 2);
    p->shared_bytes = (uint32_t)mx_shared(rows, hp, qr, layout);
    p->load_bytes = 16;
    if (!layout)
        add_reason(p, "matrix: fragments and accumulators through shared memory (%s)",
                   !(caps->features & QATTN_FEAT_FRAGMENT_LAYOUT) ? "the fragment layout is not known"
                                                                   : "no 16x16x16 shape");
    if (passes > 1)
        add_reason(p, "matrix: q staged in %" PRId64 " passes of %" PRId64 " rows", passes, rows);
    return 1;
}

/* The SIMT variant's geometry into p: the largest tile (threads) that
 * fits with q staged, unless that is below Q_STAGE_MIN_TILE; then the
 * largest that fits without. */
static qattn_status simt_plan(const qattn_device_caps *caps, const qattn_paged_mqa_logits_args *args,
                              qattn_paged_mqa_logits_plan *pp, char *err, size_t err_size) {
    qattn_paged_mqa_logits_plan p = *pp;
    const int64_t H = p.heads, D = p.head_dim;
    p.variant = QATTN_PAGED_MQA_SIMT;
    const int64_t threads = min64(PM_THREADS, caps->max_workgroup_size ? caps->max_workgroup_size : 128);
    const int64_t qb = H * D * 2;
    int64_t kt = threads;
    while (kt > Q_STAGE_MIN_TILE && simt_shared(kt, D) + qb > caps->max_shared_bytes) kt /= 2;
    p.q_staged = simt_shared(kt, D) + qb <= caps->max_shared_bytes;
    if (!p.q_staged) {
        add_reason(&p, "q not staged: its %" PRId64 " B and a %" PRId64 "-key tile exceed the %u B of shared memory",
                   qb, kt, (unsigned)caps->max_shared_bytes);
        kt = threads;
        while (kt > PM_MIN_THREADS && simt_shared(kt, D) > caps->max_shared_bytes) kt /= 2;
        if (simt_shared(kt, D) > caps->max_shared_bytes)
            return qattn__err(err, err_size, QATTN_ERR_VARIANT_GATE,
                              "simt: a %" PRId64 "-key tile of D = %" PRId64 " needs %" PRId64
                              " B of shared memory, device allows %u",
                              kt, D, simt_shared(kt, D), (unsigned)caps->max_shared_bytes);
    }
    if (kt < threads) add_reason(&p, "simt: %" PRId64 "-key tiles fit the shared memory", kt);
    p.workgroup_size = (int32_t)kt;
    p.kv_tile = (int32_t)kt;
    p.q_stage_bytes = p.q_staged ? (int32_t)qb : 0;
    p.shared_bytes = (uint32_t)(simt_shared(kt, D) + p.q_stage_bytes);
    p.load_bytes = aligned16(&args->q) && aligned16(&args->k_cache) ? 16 : 1;
    if (p.load_bytes == 1) add_reason(&p, "byte loads: a q or k_cache row start is not 16-byte aligned");
    *pp = p;
    return QATTN_OK;
}

qattn_status qattn_paged_mqa_logits_plan_compute(const qattn_device_caps *caps,
                                                 const qattn_paged_mqa_logits_args *args,
                                                 const qattn_paged_mqa_logits_options *options,
                                                 qattn_paged_mqa_logits_plan *plan, char *err,
                                                 size_t err_size) {
    if (!args) return qattn__err(err, err_size, QATTN_ERR_INVALID_ARGUMENT, "args: NULL");
    if (!plan) return qattn__err(err, err_size, QATTN_ERR_INVALID_ARGUMENT, "plan: NULL");
    qattn_status st = qattn__check_caps(caps, err, err_size);
    if (st == QATTN_OK) st = qattn__check_paged_mqa_logits_shapes(args, err, err_size);
    if (st != QATTN_OK) return st;
    qattn_paged_mqa_logits_options opt;
    st = qattn__read_paged_mqa_logits_options(options, &opt, err, err_size);
    if (st != QATTN_OK) return st;
    if ((int)opt.variant < QATTN_PAGED_MQA_AUTO || opt.variant >= QATTN_PAGED_MQA_VARIANT_COUNT)
        return qattn__err(err, err_size, QATTN_ERR_INVALID_ARGUMENT,
                          "options.variant: %d is not a qattn_paged_mqa_variant", (int)opt.variant);
    if (opt.keys_per_split < 0)
        return qattn__err(err, err_size, QATTN_ERR_INVALID_ARGUMENT,
                          "options.keys_per_split: %d, expected 0 (planner) or a positive multiple of the key tile",
                          (int)opt.keys_per_split);
    if (!qattn__is_fp8(args->q.dtype) || !qattn__is_fp8(args->k_cache.dtype))
        return qattn__err(err, err_size, QATTN_ERR_DTYPE, "q/k_cache: dtypes %s/%s, expected fp8",
                          qattn_dtype_name(args->q.dtype), qattn_dtype_name(args->k_cache.dtype));
    const int64_t B = args->q.shape[0], N = args->q.shape[1], H = args->q.shape[2], D = args->q.shape[3];
    if (B < 1 || N < 1 || N > 8 || H < 1 || (D != 64 && D != 128 && D != 256 && D != 512))
        return qattn__err(err, err_size, QATTN_ERR_SHAPE,
                          "q: B=%" PRId64 " N=%" PRId64 " H=%" PRId64 " D=%" PRId64
                          ", expected B, H >= 1, N in 1..8, D in {64,128,256,512}", B, N, H, D);
    const int64_t M = args->max_kv_len;

    qattn_paged_mqa_logits_plan p;
    memset(&p, 0, sizeof p);
    p.batch = (int32_t)B;
    p.rows = (int32_t)N;
    p.heads = (int32_t)H;
    p.head_dim = (int32_t)D;
    p.q_dtype = args->q.dtype;
    p.k_dtype = args->k_cache.dtype;
    p.page_size = args->page_size;
    p.max_kv_len = args->max_kv_len;

    /* The variant: matrix where its gate passes (AUTO), or as pinned. */
    if (opt.variant != QATTN_PAGED_MQA_SIMT) {
        char why[QATTN_REASON_BYTES];
        if (matrix_plan(caps, args, &p, why, sizeof why)) {
            p.variant = QATTN_PAGED_MQA_MATRIX;
        } else {
            if (opt.variant == QATTN_PAGED_MQA_MATRIX)
                return qattn__err(err, err_size, QATTN_ERR_VARIANT_GATE, "%s", why);
            add_reason(&p, "%s", why);
        }
    }
    if (p.variant != QATTN_PAGED_MQA_MATRIX) {
        st = simt_plan(caps, args, &p, err, err_size);
        if (st != QATTN_OK) return st;
    }
    const int64_t kt = p.kv_tile;

    const int64_t tiles = cdiv(M, kt);
    int64_t splits;
    if (opt.keys_per_split > 0) {
        if (opt.keys_per_split % kt != 0)
            return qattn__err(err, err_size, QATTN_ERR_INVALID_ARGUMENT,
                              "options.keys_per_split: %d is not a multiple of the %" PRId64 "-key tile",
                              (int)opt.keys_per_split, kt);
        splits = cdiv(M, opt.keys_per_split);
        if (splits > MAX_GRID)
            return qattn__err(err, err_size, QATTN_ERR_INVALID_ARGUMENT,
                              "options.keys_per_split: %d makes %" PRId64 " splits of max_kv_len %" PRId64
                              ", above the grid's %d", (int)opt.keys_per_split, splits, M, MAX_GRID);
        p.keys_per_split = opt.keys_per_split;
    } else {
        const int64_t cus = caps->compute_units > 0 ? caps->compute_units : 1;
        int64_t per_cu, min_tiles;
        if (p.variant == QATTN_PAGED_MQA_MATRIX) {
            per_cu = MX_WG_PER_CU;
            min_tiles = cdiv(MX_MIN_SPLIT_KEYS, kt);
        } else {
            per_cu = max64(1, min64(4, (int64_t)caps->max_shared_bytes / p.shared_bytes));
            min_tiles = MIN_SPLIT_TILES;
        }
        const int64_t target = SPLIT_WAVES * cus * per_cu;
        splits = cdiv(target, B);
        splits = min64(splits, max64(1, tiles / min_tiles));
        splits = max64(splits, cdiv(tiles, MAX_GRID));
        splits = max64(1, min64(splits, MAX_GRID));
        p.keys_per_split = (int32_t)(cdiv(tiles, splits) * kt);
        splits = cdiv(M, p.keys_per_split);
        add_reason(&p, "splits: %" PRId64 " of %d keys (target %" PRId64 " workgroups over %" PRId64
                   " requests)", splits, (int)p.keys_per_split, target, B);
    }
    if (splits * p.keys_per_split + kt > INT32_MAX) /* the kernel's tile starts pass the end by < kt */
        return qattn__err(err, err_size, QATTN_ERR_OVERFLOW,
                          "max_kv_len: %" PRId64 " rounded up to %d-key splits exceeds int32", M,
                          (int)p.keys_per_split);
    p.num_splits = (int32_t)splits;
    p.grid[0] = (uint32_t)splits;
    p.grid[1] = (uint32_t)min64(B, MAX_GRID);
    p.grid[2] = 1;
    p.workspace_bytes = 0;
    qattn__seal_paged_mqa_logits_plan(plan, &p, args);
    return QATTN_OK;
}

qattn_status qattn_paged_mqa_logits_plan_create(qattn_context *ctx, const qattn_paged_mqa_logits_args *args,
                                                const qattn_paged_mqa_logits_options *options,
                                                qattn_paged_mqa_logits_plan *plan) {
    if (!ctx) return QATTN_ERR_INVALID_ARGUMENT;
    if (!plan) return qattn__fail(ctx, QATTN_ERR_INVALID_ARGUMENT, "plan: NULL");
    qattn_status s = qattn__validate_paged_mqa_logits(args, ctx->last_error, sizeof ctx->last_error);
    if (s != QATTN_OK) return s;
    qattn_paged_mqa_logits_plan p;
    s = qattn_paged_mqa_logits_plan_compute(&ctx->caps, args, options, &p, ctx->last_error,
                                            sizeof ctx->last_error);
    if (s != QATTN_OK) return s;
    const qattn_backend_iface *ifc = ctx->iface;
    if (!ifc->paged_mqa_logits)
        return qattn__fail(ctx, QATTN_ERR_UNSUPPORTED, "paged_mqa_logits: the %s backend has no paged_mqa_logits op",
                           ifc->name);
    /* The backend may refuse a plan its caps allowed (a kernel it lacks):
     * a pinned variant is then a gate failure, AUTO steps down from matrix
     * to simt with the refusal in the reason (docs/design.md). */
    qattn_paged_mqa_logits_options o;
    s = qattn__read_paged_mqa_logits_options(options, &o, ctx->last_error, sizeof ctx->last_error);
    if (s != QATTN_OK) return s;
    const int pinned = o.variant != QATTN_PAGED_MQA_AUTO;
    if (!pinned && p.variant == QATTN_PAGED_MQA_MATRIX && ifc->supports_op &&
        !ifc->supports_op(ctx->be, QATTN_OP_PAGED_MQA_LOGITS, &p)) {
        o.variant = QATTN_PAGED_MQA_SIMT;
        qattn_paged_mqa_logits_plan q;
        s = qattn_paged_mqa_logits_plan_compute(&ctx->caps, args, &o, &q, ctx->last_error, sizeof ctx->last_error);
        if (s != QATTN_OK) return s;
        char reason[QATTN_REASON_BYTES];
        snprintf(reason, sizeof reason, "matrix refused by the backend; %.200s", q.reason);
        memcpy(q.reason, reason, sizeof reason);
        qattn__seal_paged_mqa_logits_plan(&p, &q, args); /* the reason changed */
    }
    if (ifc->supports_op && !ifc->supports_op(ctx->be, QATTN_OP_PAGED_MQA_LOGITS, &p))
        return qattn__fail(ctx, pinned ? QATTN_ERR_VARIANT_GATE : QATTN_ERR_UNSUPPORTED,
                           "paged_mqa_logits: the %s backend cannot run variant %s on %s%s", ifc->name,
                           qattn_paged_mqa_variant_name(p.variant), ctx->caps.arch, pinned ? " (pinned)" : "");
    memmove(plan, &p, sizeof p);
    return QATTN_OK;
}
