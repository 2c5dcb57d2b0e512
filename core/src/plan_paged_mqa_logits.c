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

const char *qattn_paged_mqa_variant_name(qattn_paged_mqa_variant v) {
    switch (v) {
    case QATTN_PAGED_MQA_AUTO: return "auto";
    case QATTN_PAGED_MQA_SIMT: return "simt";
    default: return "invalid";
    }
}

static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

#define add_reason(p, ...) qattn__append_reason((p)->reason, sizeof (p)->reason, __VA_ARGS__)

/* Shared bytes of the SIMT kernel for a tile of kt keys: the keys as f16,
 * their scales, byte offsets and slot-validity flags (the shader declares
 * exactly these). */
static int64_t simt_shared(int64_t kt, int64_t D) { return kt * D * 2 + kt * 4 * 3; }

/* Whether every start of a 16-code chunk a kernel loads lies on 16 bytes:
 * the tensor's offset and each stride of a dimension of extent > 1 (the
 * last dimension is contiguous and D is a multiple of 16). */
static int aligned16(const qattn_tensor *t) {
    if (t->offset % 16 != 0) return 0;
    for (int32_t i = 0; i + 1 < t->rank; ++i)
        if (t->shape[i] > 1 && t->strides[i] % 16 != 0) return 0;
    return 1;
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
    p.variant = QATTN_PAGED_MQA_SIMT; /* the one variant; AUTO and a pin agree */
    p.batch = (int32_t)B;
    p.rows = (int32_t)N;
    p.heads = (int32_t)H;
    p.head_dim = (int32_t)D;
    p.q_dtype = args->q.dtype;
    p.k_dtype = args->k_cache.dtype;
    p.page_size = args->page_size;
    p.max_kv_len = args->max_kv_len;

    /* The largest tile (threads) that fits with q staged, unless that is
     * below Q_STAGE_MIN_TILE; then the largest that fits without. */
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
        const int64_t per_cu = max64(1, min64(4, (int64_t)caps->max_shared_bytes / p.shared_bytes));
        const int64_t target = SPLIT_WAVES * cus * per_cu;
        splits = cdiv(target, B);
        splits = min64(splits, max64(1, tiles / MIN_SPLIT_TILES));
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
    if (ifc->supports_op && !ifc->supports_op(ctx->be, QATTN_OP_PAGED_MQA_LOGITS, &p))
        return qattn__fail(ctx, QATTN_ERR_UNSUPPORTED,
                           "paged_mqa_logits: the %s backend cannot run variant %s on %s", ifc->name,
                           qattn_paged_mqa_variant_name(p.variant), ctx->caps.arch);
    memmove(plan, &p, sizeof p);
    return QATTN_OK;
}
