/*
 * qattn: attention kernels for LLM inference over quantized, paged KV caches.
 *
 * This header is the whole user-facing API of qattn_core: status codes, dtypes,
 * tensor descriptors, contexts (one backend instance on one device), buffers,
 * device capabilities, and the three operations with their plan/run split.
 * The exact math of every operation is in docs/ops.md (mirrors the spec).
 *
 * Conventions
 * - Every function that can fail returns a qattn_status. The library never
 *   aborts, exits or prints. On failure, qattn_last_error(ctx) names the
 *   argument and the rule it broke; outputs are left untouched.
 * - Free functions accept NULL.
 * - No global mutable state: use one context per thread.
 * - Option structs carry their size (see "option structs" below), so fields
 *   can be added without breaking programs built against an older header.
 */
#ifndef QATTN_QATTN_H
#define QATTN_QATTN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32) && defined(QATTN_BUILD_SHARED)
#define QATTN_API __declspec(dllexport)
#elif defined(__GNUC__)
#define QATTN_API __attribute__((visibility("default")))
#else
#define QATTN_API
#endif

/* ---- version -------------------------------------------------------- */
#define QATTN_VERSION_MAJOR 0
#define QATTN_VERSION_MINOR 1
#define QATTN_VERSION_PATCH 0
#define QATTN_VERSION_NUMBER \
    (QATTN_VERSION_MAJOR * 10000 + QATTN_VERSION_MINOR * 100 + QATTN_VERSION_PATCH)
#define QATTN_STRINGIFY_(x) #x
#define QATTN_STRINGIFY(x) QATTN_STRINGIFY_(x)
#define QATTN_VERSION_STRING                                             \
    QATTN_STRINGIFY(QATTN_VERSION_MAJOR) "." QATTN_STRINGIFY(            \
        QATTN_VERSION_MINOR) "." QATTN_STRINGIFY(QATTN_VERSION_PATCH)

/** Returns QATTN_VERSION_NUMBER of the library actually linked. */
QATTN_API unsigned qattn_version_number(void);
/** Returns the "MAJOR.MINOR.PATCH" string of the library actually linked. */
QATTN_API const char *qattn_version_string(void);

/* ---- status ----------------------------------------------------------- */
/* One list; the enum and qattn_status_name() are both generated from it. */
#define QATTN_STATUS_LIST(X)                                                  \
    X(QATTN_OK, "ok")                                                         \
    X(QATTN_ERR_INVALID_ARGUMENT, "invalid argument")                         \
    X(QATTN_ERR_NULL_BUFFER, "null buffer")                                   \
    X(QATTN_ERR_DTYPE, "wrong dtype")                                         \
    X(QATTN_ERR_SHAPE, "shape mismatch")                                      \
    X(QATTN_ERR_STRIDE, "unsupported stride")                                 \
    X(QATTN_ERR_ALIGNMENT, "misaligned address or stride")                    \
    X(QATTN_ERR_OUT_OF_BOUNDS, "tensor exceeds its buffer")                   \
    X(QATTN_ERR_OVERFLOW, "size overflows the index type")                    \
    X(QATTN_ERR_WORKSPACE, "workspace missing or too small")                  \
    X(QATTN_ERR_INDEX_OUT_OF_RANGE, "index out of range")                     \
    X(QATTN_ERR_UNSUPPORTED, "not supported by this backend or device")       \
    X(QATTN_ERR_VARIANT_GATE, "pinned variant cannot run this shape")         \
    X(QATTN_ERR_BACKEND_UNAVAILABLE, "backend or device unavailable")         \
    X(QATTN_ERR_OUT_OF_MEMORY, "out of memory")                               \
    X(QATTN_ERR_DEVICE, "device error")

typedef enum qattn_status {
#define QATTN_STATUS_ENUM_(name, text) name,
    QATTN_STATUS_LIST(QATTN_STATUS_ENUM_)
#undef QATTN_STATUS_ENUM_
    QATTN_STATUS_COUNT
} qattn_status;

/** Returns the enumerator's name ("QATTN_ERR_SHAPE"); "QATTN_STATUS_UNKNOWN"
 *  for a value outside the list. Never NULL. */
QATTN_API const char *qattn_status_name(qattn_status s);
/** Returns a short English description; never NULL. */
QATTN_API const char *qattn_status_text(qattn_status s);

/* ---- dtypes ----------------------------------------------------------- */
typedef enum qattn_dtype {
    QATTN_DTYPE_INVALID = 0,
    QATTN_BF16,
    QATTN_F16,
    QATTN_F32,
    QATTN_I32,
    QATTN_I8,
    QATTN_FP8_E4M3FN,
    QATTN_FP8_E4M3FNUZ,
    QATTN_FP8_E5M2, /* the top byte of an IEEE f16: value = f16(code << 8) */
    QATTN_DTYPE_COUNT
} qattn_dtype;

/** Returns the size in bytes of one element, or 0 for an invalid dtype. */
QATTN_API size_t qattn_dtype_size(qattn_dtype t);
/** Returns "bf16", "fp8_e4m3fn", ...; "invalid" for anything else. */
QATTN_API const char *qattn_dtype_name(qattn_dtype t);

/* ---- option structs ---------------------------------------------------
 * Every options struct (qattn_context_options, qattn_decode_options,
 * qattn_mqa_logits_options) starts with `size_t size`: the struct's sizeof
 * as the caller's header declares it. Start from the struct's _INIT macro,
 * which sets the size and every default, then set what you need:
 *
 *     qattn_decode_options o = QATTN_DECODE_OPTIONS_INIT;
 *     o.num_splits = 4;
 *
 * Later versions add fields only at the end, each version's sizeof larger
 * than the one before, and a field's zero is always its default. The
 * library accepts the sizeof of any version up to its own: it reads the
 * fields of that version and takes the later ones as zero, so a program
 * built against an older header keeps its meaning. Any other size (0, one
 * below the first version's, one above this library's sizeof: a header
 * newer than the library) fails with QATTN_ERR_INVALID_ARGUMENT, naming
 * the argument and the struct, and nothing is done. A NULL options pointer
 * means all defaults. The structs of qattn/vulkan.h follow the same rule. */

/* ---- contexts and buffers -------------------------------------------- */
typedef struct qattn_context qattn_context;
typedef struct qattn_buffer qattn_buffer;
/** A backend: a const table of entry points (see qattn/backend.h). Obtain one
 *  from qattn_backend_cpu() here, qattn_backend_vulkan() in qattn/vulkan.h or
 *  qattn_backend_hip() in qattn/hip.h. */
typedef struct qattn_backend_iface qattn_backend_iface;

/** The reference backend, always present in qattn_core. Exact, slow. */
QATTN_API const qattn_backend_iface *qattn_backend_cpu(void);

typedef struct qattn_context_options {
    size_t size; /* sizeof(qattn_context_options): see "option structs" */
    /** Device selector: NULL or "" = backend default (for Vulkan the env var
     *  QATTN_VULKAN_DEVICE, then device 0); a decimal index; or a
     *  case-insensitive substring of the device name. */
    const char *device;
    /** Non-zero: enable the backend's debug validation (Vulkan validation
     *  layer). Messages it reports make the next call fail with
     *  QATTN_ERR_DEVICE and are kept in the last-error text. */
    int debug_validation;
    /** HIP only: the stream to enqueue on (hipStream_t); NULL = default. */
    void *stream;
} qattn_context_options;

/** The defaults: the backend's default device, no validation, the default
 *  stream. `qattn_context_options o = QATTN_CONTEXT_OPTIONS_INIT;` */
#define QATTN_CONTEXT_OPTIONS_INIT {sizeof(qattn_context_options), NULL, 0, NULL}

/** Creates a context owning one instance of `backend` on one device.
 *  `options` may be NULL (all defaults). On failure *out is NULL and the status says why;
 *  the reason text is returned in `err` when non-NULL (contexts that failed
 *  to be created have no last-error of their own).
 *  Returns QATTN_OK, QATTN_ERR_INVALID_ARGUMENT, QATTN_ERR_BACKEND_UNAVAILABLE
 *  (no loader, no device, no matching device) or QATTN_ERR_OUT_OF_MEMORY. */
QATTN_API qattn_status qattn_context_create(const qattn_backend_iface *backend,
                                            const qattn_context_options *options,
                                            qattn_context **out, char *err,
                                            size_t err_size);
/** Destroys the context; NULL is accepted. Buffers must be freed first. */
QATTN_API void qattn_context_free(qattn_context *ctx);
/** Returns the message of the last failed call on ctx ("" if none). */
QATTN_API const char *qattn_last_error(const qattn_context *ctx);
/** Returns the backend's name ("cpu", "vulkan", "hip"). */
QATTN_API const char *qattn_backend_name(const qattn_context *ctx);

/** Allocates `bytes` of device memory. Returns QATTN_OK or
 *  QATTN_ERR_INVALID_ARGUMENT (bytes == 0), QATTN_ERR_OUT_OF_MEMORY. */
QATTN_API qattn_status qattn_buffer_alloc(qattn_context *ctx, uint64_t bytes,
                                          qattn_buffer **out);
/** Wraps memory the caller owns (a HIP device pointer, a VkBuffer) without
 *  copying; qattn_buffer_free then releases only the wrapper. Returns
 *  QATTN_ERR_UNSUPPORTED on backends without the optional wrap slot. */
QATTN_API qattn_status qattn_buffer_wrap(qattn_context *ctx, void *native,
                                         uint64_t bytes, qattn_buffer **out);
/** Frees a buffer allocated or wrapped on ctx; NULL is accepted. */
QATTN_API void qattn_buffer_free(qattn_context *ctx, qattn_buffer *buf);
/** Returns the size in bytes the buffer was created with (0 for NULL). */
QATTN_API uint64_t qattn_buffer_size(const qattn_buffer *buf);
/** Copies host memory into [offset, offset + bytes) of buf; completes before
 *  returning. Returns QATTN_ERR_OUT_OF_BOUNDS if the range exceeds buf. */
QATTN_API qattn_status qattn_buffer_upload(qattn_context *ctx, qattn_buffer *buf,
                                           uint64_t offset, const void *src,
                                           uint64_t bytes);
/** Copies [offset, offset + bytes) of buf to host memory after all work
 *  enqueued on ctx has finished. */
QATTN_API qattn_status qattn_buffer_download(qattn_context *ctx,
                                             const qattn_buffer *buf,
                                             uint64_t offset, void *dst,
                                             uint64_t bytes);
/** Waits until all work enqueued on ctx has finished. */
QATTN_API qattn_status qattn_synchronize(qattn_context *ctx);
/** Device time in milliseconds of the most recent op call on ctx, measured by
 *  the backend's own timer (timestamp queries, events; wall clock on cpu).
 *  Waits for that op. Returns QATTN_ERR_UNSUPPORTED when the backend has no
 *  timer, QATTN_ERR_INVALID_ARGUMENT when no op has run yet. */
QATTN_API qattn_status qattn_last_op_time_ms(qattn_context *ctx, double *ms);

/* ---- device capabilities --------------------------------------------- */
enum {
    QATTN_FEAT_SHADER_F16 = 1u << 0,       /* 16-bit float arithmetic */
    QATTN_FEAT_STORAGE_8BIT = 1u << 1,     /* 8-bit loads/stores from buffers */
    QATTN_FEAT_STORAGE_16BIT = 1u << 2,    /* 16-bit loads/stores */
    QATTN_FEAT_COOPMAT = 1u << 3,          /* cooperative matrix / MFMA / WMMA */
    QATTN_FEAT_BF16 = 1u << 6,             /* bf16 arithmetic/conversion */
    QATTN_FEAT_TIMESTAMPS = 1u << 7,       /* device timer for ops */
    QATTN_FEAT_SUBGROUP_SIZE_CONTROL = 1u << 8, /* can pin a subgroup size */
    /* The backend knows which lane holds which element of its 16x16x16 f16
     * matrix fragments: probed at context creation on Vulkan (the KHR
     * extension leaves it to the implementation), from the ISA on HIP. The
     * register-resident decode variant builds fragments lane by lane. */
    QATTN_FEAT_FRAGMENT_LAYOUT = 1u << 9
};

/** One matrix-unit shape: C[MxN] (c_type) += A[MxK] (a_type) x B[KxN]. */
typedef struct qattn_matrix_shape {
    uint16_t m, n, k;
    qattn_dtype a_type; /* also the B type */
    qattn_dtype c_type;
} qattn_matrix_shape;

#define QATTN_MAX_MATRIX_SHAPES 16

typedef struct qattn_device_caps {
    /** "cpu", "gfx942", "gfx1201", "vulkan:<device name>". */
    char arch[96];
    char device_name[128];
    int32_t compute_units;        /* SMs / CUs / host cores */
    uint32_t subgroup_size_min;   /* wave / subgroup sizes the device runs */
    uint32_t subgroup_size_max;
    /** The largest shared memory (LDS) one workgroup can really launch with,
     *  in bytes: the device's limit, not a nominal figure. */
    uint32_t max_shared_bytes;
    uint32_t max_workgroup_size;
    uint32_t features;            /* QATTN_FEAT_* */
    int32_t n_matrix_shapes;
    qattn_matrix_shape matrix_shapes[QATTN_MAX_MATRIX_SHAPES];
} qattn_device_caps;

/** Fills *caps for the context's device. */
QATTN_API qattn_status qattn_get_caps(qattn_context *ctx, qattn_device_caps *caps);

/* ---- tensors ---------------------------------------------------------- */
#define QATTN_MAX_RANK 4

/** A view of device memory: buffer + byte offset, logical shape, strides in
 *  elements. An optional operand is given as a descriptor with buffer NULL
 *  (a zero-initialised struct). */
typedef struct qattn_tensor {
    qattn_buffer *buffer;
    uint64_t offset;              /* bytes from the start of buffer */
    qattn_dtype dtype;
    int32_t rank;                 /* 1..QATTN_MAX_RANK */
    int64_t shape[QATTN_MAX_RANK];
    int64_t strides[QATTN_MAX_RANK]; /* elements */
} qattn_tensor;

/** Returns a row-major contiguous descriptor of the given shape. */
QATTN_API qattn_tensor qattn_tensor_contiguous(qattn_buffer *buffer, uint64_t offset,
                                               qattn_dtype dtype, int32_t rank,
                                               const int64_t *shape);
/** Returns true when t names a buffer (an optional operand is present). */
QATTN_API int qattn_tensor_present(const qattn_tensor *t);

/* ---- operation: decode attention ------------------------------------- */
/** Inputs and outputs of decode attention over a paged KV cache (spec 2). */
typedef struct qattn_decode_args {
    qattn_tensor q;          /* [B, R, Hq, D] bf16 | f16; D and Dv: multiples of 16 in [16, 256] */
    qattn_tensor k_cache;    /* [N_slots, Hkv, D]  bf16 | fp8 fn | fp8 fnuz | fp8 e5m2 | i8,
                                or paged [N_pages, page_size, Hkv, D] (free strides:
                                HND [page, head, P, d], K/V in one allocation) */
    qattn_tensor v_cache;    /* [N_slots, Hkv, Dv] same dtype and form choice */
    qattn_tensor k_scale;    /* [N_slots, Hkv] or [N_pages, P, Hkv] f32; required unless
                                bf16; stride 0 broadcasts (per token / per tensor) */
    qattn_tensor v_scale;    /* as k_scale */
    qattn_tensor kv_indptr;  /* [B + 1] i32 */
    qattn_tensor kv_indices; /* [n_pages] i32 */
    qattn_tensor kv_lens;    /* [B] i32 */
    qattn_tensor sinks;      /* optional [Hq] f32 */
    qattn_tensor o;          /* [B, R, Hq, Dv] bf16 | f16 (either, whatever q is) */
    qattn_tensor lse;        /* optional [B, R, Hq] f32 */
    int32_t page_size;       /* P >= 1 */
    int32_t max_kv_len;      /* >= every kv_lens[b]; drives the split policy */
    float sm_scale;
    int32_t window_left;     /* -1 = no window */
    float logit_softcap;     /* 0 = off */
} qattn_decode_args;

typedef enum qattn_decode_variant {
    QATTN_DECODE_AUTO = 0,  /* let the planner choose (options only) */
    /* The tiled kernel (docs/design.md) with its dot products on the vector
     * units: any Vulkan 1.3 device, every cache dtype and head dim. */
    QATTN_DECODE_SIMT,
    /* The same tiles on the matrix unit (f16 x f16 -> f32): fp8 and int8
     * caches, every head dim, on devices with a 16x8x16 or 16x16x16 f16
     * matrix shape. */
    QATTN_DECODE_MATRIX,
    /* Register-resident (docs/design.md, "Decode"): query rows on the
     * matrix M side, keys on N; K and V go from memory straight into
     * fragment registers, S and P never leave them. fp8 and int8 caches,
     * D = Dv in {64, 128} (compiled in: other head dims take matrix),
     * pages of a multiple of 16 rows, on a device whose fragment layout is
     * known (QATTN_FEAT_FRAGMENT_LAYOUT). AUTO prefers it to matrix. */
    QATTN_DECODE_REGS,
    QATTN_DECODE_VARIANT_COUNT
} qattn_decode_variant;

/** Returns "simt", "matrix", "regs"; "auto" for AUTO; "invalid" otherwise. */
QATTN_API const char *qattn_decode_variant_name(qattn_decode_variant v);

typedef struct qattn_decode_options {
    size_t size;                  /* sizeof(qattn_decode_options): see "option structs" */
    qattn_decode_variant variant; /* AUTO, or pin one (gate failure = error) */
    int32_t num_splits;           /* 0 = planner's choice, else 1..QATTN_MAX_SPLITS */
} qattn_decode_options;

/** The defaults: the planner chooses the variant and the splits.
 *  `qattn_decode_options o = QATTN_DECODE_OPTIONS_INIT;` */
#define QATTN_DECODE_OPTIONS_INIT {sizeof(qattn_decode_options), QATTN_DECODE_AUTO, 0}

#define QATTN_MAX_SPLITS 256
#define QATTN_REASON_BYTES 256

/* Plans are sealed over their bytes (see `integrity`), so they hold no
 * padding: a copy by assignment keeps every byte. The core's own build
 * turns padding in them into an error. */
#if defined(QATTN_CHECK_PLAN_PADDING) && defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic error "-Wpadded"
#endif

/** The planner's decision for one decode shape: every launch decision, so a
 *  backend launches exactly this. Pure data; inspectable but
 *  read-only: qattn_decode_run refuses a plan changed after planning.
 *
 *  Stage 1 runs grid[0] x grid[1] x grid[2] workgroups of workgroup_size
 *  lanes (one subgroup of subgroup_size lanes each): grid[0] = num_splits
 *  KV ranges of keys_per_split keys (the last one runs to the request's
 *  end), grid[1] = kv heads x blocks of q_heads_per_workgroup query heads,
 *  grid[2] = requests. Each writes its partial output and (m, l) for
 *  row_slots query rows into the workspace at the named offsets; the merge
 *  runs merge_grid workgroups of merge_workgroup_size lanes and writes o
 *  and lse. */
typedef struct qattn_decode_plan {
    qattn_decode_variant variant;
    /* what the plan was made for; run refuses arguments that differ */
    int32_t batch, rows, q_heads, kv_heads, head_dim, head_dim_v;
    qattn_dtype kv_dtype;
    /** args.max_kv_len at planning; a run may pass at most this. */
    int32_t max_kv_len;
    /* stage-1 geometry */
    int32_t subgroup_size;
    int32_t workgroup_size;
    int32_t keys_per_tile;
    /** 1: page_size is a multiple of keys_per_tile, so every tile is rows of
     *  one page; 0: every key looks up its own page. */
    int32_t page_tiled;
    int32_t load_bytes;           /* widest K/V load every row start allows: 1..16 */
    int32_t q_heads_per_workgroup;
    int32_t row_slots;            /* matrix N >= q_heads_per_workgroup * rows */
    int32_t head_blocks;          /* blocks of query heads per kv head: grid[1] / kv_heads */
    qattn_matrix_shape matrix_shape; /* MATRIX: the f16 shape; zero for SIMT */
    uint32_t shared_bytes;        /* exact shared memory of the stage-1 launch */
    uint32_t grid[3];
    /* split-KV and merge */
    int32_t num_splits;
    int32_t keys_per_split;
    uint32_t merge_grid[3];
    int32_t merge_workgroup_size;
    int32_t merge_dims;           /* output dims per merge workgroup: merge_grid[0] = rows x Dv / merge_dims */
    /* workspace: partial outputs [slot][split][Dv] f32 at partial_o_offset,
     * (m, l) pairs [slot][split][2] f32 at partial_ml_offset; a slot is one
     * of row_slots rows of one (request, kv head, head block) */
    uint64_t partial_o_offset;
    uint64_t partial_ml_offset;
    uint64_t workspace_bytes;
    /** Why the variant is not the preferred one, or "" (e.g.
     *  "matrix gate: a bf16 cache needs bf16 matrix operands"). */
    char reason[QATTN_REASON_BYTES];
    /** A digest of the layout the planner saw (dtypes, shapes, strides and
     *  16-byte alignment of every tensor but the page table, page_size);
     *  run refuses args of another layout. */
    uint64_t args_layout;
    /** A digest of every byte above, set when the plan is made; keep it
     *  last. Run refuses a plan whose digest does not match. */
    uint64_t integrity;
} qattn_decode_plan;
#if defined(QATTN_CHECK_PLAN_PADDING) && defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

/** Plans decode attention for ctx's device. Validates every descriptor
 *  first. `options` may be NULL; QATTN_DECODE_VARIANT in the environment pins
 *  a variant when options do not. Returns QATTN_ERR_VARIANT_GATE when a
 *  pinned variant cannot run, naming the failed condition. When the backend
 *  refuses an AUTO plan, the plan steps down regs -> matrix -> simt ("regs
 *  refused by the backend" in its reason); QATTN_ERR_UNSUPPORTED only when
 *  it refuses simt too. */
QATTN_API qattn_status qattn_decode_plan_create(qattn_context *ctx,
                                                const qattn_decode_args *args,
                                                const qattn_decode_options *options,
                                                qattn_decode_plan *plan);
/** The pure planner behind qattn_decode_plan_create: no context, no
 *  environment, no validation of buffers; a function of shape/strides and
 *  caps alone. `err` (may be NULL) receives the reason of a failure. */
QATTN_API qattn_status qattn_decode_plan_compute(const qattn_device_caps *caps,
                                                 const qattn_decode_args *args,
                                                 const qattn_decode_options *options,
                                                 qattn_decode_plan *plan, char *err,
                                                 size_t err_size);
/** Runs a plan. `workspace` must hold plan->workspace_bytes from
 *  `workspace_offset` (may be NULL when that is 0). Never allocates.
 *  Validates args against the plan's shape before launching. Every op
 *  refuses (QATTN_ERR_INVALID_ARGUMENT, naming both) an output whose bytes
 *  overlap an input's, another output's or the workspace's (docs/ops.md,
 *  "Memory"). */
QATTN_API qattn_status qattn_decode_run(qattn_context *ctx,
                                        const qattn_decode_plan *plan,
                                        const qattn_decode_args *args,
                                        qattn_buffer *workspace,
                                        uint64_t workspace_offset);

/* ---- operation: KV store --------------------------------------------- */
typedef struct qattn_kv_store_args {
    qattn_tensor k_new;        /* [T, Hkv, D] bf16 or f16 */
    qattn_tensor v_new;        /* [T, Hkv, Dv] the same dtype as k_new */
    qattn_tensor slot_mapping; /* [T] i32; -1 = skip */
    qattn_tensor k_cache, v_cache; /* as in decode (rank 4: slot s = page s / P, row s % P) */
    qattn_tensor k_scale, v_scale; /* as in decode, unless bf16 cache; no broadcast */
} qattn_kv_store_args;

/** Writes new tokens into the cache in its format (spec 2, KV store). A slot
 *  outside [0, N_slots) is skipped (-1 is padding); with
 *  QATTN_CHECK_INDICES=1 any slot other than -1 outside it fails the call
 *  first, and nothing is written. */
QATTN_API qattn_status qattn_kv_store(qattn_context *ctx, const qattn_kv_store_args *args);

/* ---- operation: FP8 MQA logits --------------------------------------- */
typedef struct qattn_mqa_logits_args {
    qattn_tensor q;        /* [S, H, D] fp8 fn|fnuz */
    qattn_tensor k;        /* [S_kv, D] fp8 fn|fnuz */
    qattn_tensor k_scale;  /* [S_kv] f32 */
    qattn_tensor weights;  /* [S, H] f32 */
    qattn_tensor ks, ke;   /* [S] i32 */
    qattn_tensor logits;   /* [S, S_kv] f32, row stride >= S_kv */
    int32_t clean_logits;  /* non-zero: -inf outside each row's window */
} qattn_mqa_logits_args;

typedef enum qattn_mqa_variant {
    QATTN_MQA_AUTO = 0,
    QATTN_MQA_DIRECT,      /* each subgroup reads its own KV slice */
    QATTN_MQA_STAGED,      /* subgroups share KV tiles via shared memory */
    QATTN_MQA_COOPMAT,     /* matrix-unit q.k */
    QATTN_MQA_VARIANT_COUNT
} qattn_mqa_variant;

QATTN_API const char *qattn_mqa_variant_name(qattn_mqa_variant v);

typedef struct qattn_mqa_logits_options {
    size_t size;                /* sizeof(qattn_mqa_logits_options): see "option structs" */
    qattn_mqa_variant variant;  /* AUTO or pinned */
    int32_t rows_per_subgroup;  /* 0 = planner, else 1, 2 or 4 */
    int32_t kv_slices;          /* 0 = planner */
} qattn_mqa_logits_options;

/** The defaults: the planner chooses variant, rows per subgroup and slices.
 *  `qattn_mqa_logits_options o = QATTN_MQA_LOGITS_OPTIONS_INIT;` */
#define QATTN_MQA_LOGITS_OPTIONS_INIT {sizeof(qattn_mqa_logits_options), QATTN_MQA_AUTO, 0, 0}

#if defined(QATTN_CHECK_PLAN_PADDING) && defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic error "-Wpadded"
#endif
/** The planner's decision for one MQA logits shape; read-only like the
 *  decode plan. */
typedef struct qattn_mqa_logits_plan {
    qattn_mqa_variant variant;
    int32_t rows, kv_len, heads, head_dim; /* S, S_kv, H, D */
    qattn_dtype q_dtype, k_dtype;
    int32_t rows_per_subgroup;
    int32_t subgroups_per_workgroup;
    int32_t rows_per_workgroup;
    int32_t kv_tile;              /* KV columns per tile */
    int32_t kv_slices;            /* grid.y slices of the KV range */
    int32_t kv_per_slice;         /* columns per slice (int32-safe) */
    int32_t grid_x, grid_y;
    uint32_t shared_bytes;
    uint64_t workspace_bytes;     /* 0: the op needs none */
    /** Lanes per subgroup the kernel's layout assumes; the backend pins the
     *  device to it where the variant needs real subgroups (coopmat). */
    int32_t subgroup_size;
    /** 1: some row base (row x row stride, or column x k row stride) passes
     *  int32, so the kernel forms those offsets in 64 bits; 0: all fit. */
    int32_t index64;
    /** Coopmat: the 16-pair m-tiles of q each subgroup holds (1, 2 or 4),
     *  the subgroups one row's heads spread over, and the 16-column n-tiles
     *  of a KV tile (kv_tile = 16 * n_tiles); 0 for the other variants. */
    int32_t m_tiles, subgroups_per_row, n_tiles;
    /** ceil(rows / rows_per_workgroup): the row blocks grid_x strides over;
     *  ceil(kv_len / kv_tile): the KV tiles the grid_y slices deal out. */
    int32_t row_blocks, kv_tiles;
    /** The widest q and k load (bytes: 1, 2, 4, 8 or 16) every row start
     *  allows, from the offsets and strides; run refuses buffers whose
     *  device addresses break it. */
    int32_t load_bytes;
    /** The matrix-unit shape the plan runs on: a coopmat plan's f16 shape,
     *  or a staged plan's fp8 shape where the backend's staged kernel uses
     *  the matrix unit (gfx942's MFMA); zero otherwise. Backends run exactly
     *  what was planned. */
    qattn_matrix_shape matrix_shape;
    char reason[QATTN_REASON_BYTES];
    /** A digest of the layout the planner saw (dtypes, shapes, strides and
     *  16-byte alignment of every tensor; index64 depends on the strides);
     *  run refuses args of another layout. */
    uint64_t args_layout;
    /** A digest of every byte above, set when the plan is made; keep it
     *  last. Run refuses a plan whose digest does not match. */
    uint64_t integrity;
} qattn_mqa_logits_plan;

#if defined(QATTN_CHECK_PLAN_PADDING) && defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

/** Plans MQA logits for ctx's device; QATTN_MQA_VARIANT in the environment
 *  pins a variant when options do not. A variant the backend refuses is
 *  answered as in qattn_decode_plan_create: pinned, QATTN_ERR_VARIANT_GATE;
 *  AUTO steps down (coopmat, staged, direct) with the refusal in the reason. */
QATTN_API qattn_status qattn_mqa_logits_plan_create(qattn_context *ctx,
                                                    const qattn_mqa_logits_args *args,
                                                    const qattn_mqa_logits_options *options,
                                                    qattn_mqa_logits_plan *plan);
/** The pure planner: a function of shapes and caps only. */
QATTN_API qattn_status qattn_mqa_logits_plan_compute(const qattn_device_caps *caps,
                                                     const qattn_mqa_logits_args *args,
                                                     const qattn_mqa_logits_options *options,
                                                     qattn_mqa_logits_plan *plan,
                                                     char *err, size_t err_size);
/** Runs a plan; never allocates; workspace as for decode. */
QATTN_API qattn_status qattn_mqa_logits_run(qattn_context *ctx,
                                            const qattn_mqa_logits_plan *plan,
                                            const qattn_mqa_logits_args *args,
                                            qattn_buffer *workspace,
                                            uint64_t workspace_offset);
/* Tuning and measurement calls (geometry-pinned MQA plans, device
 * ceilings) are in qattn/experimental.h, outside this header's stability
 * promise. */

/* ---- operation: paged FP8 MQA logits --------------------------------- */
/** Inputs and outputs of the indexer at decode time (spec 5): each request
 *  scores its own paged context with its N new rows. */
typedef struct qattn_paged_mqa_logits_args {
    qattn_tensor q;          /* [B, N, H, D] fp8 fn|fnuz; N = 1..8 */
    qattn_tensor k_cache;    /* [N_slots, D] fp8 fn|fnuz, or paged [N_pages, P, D]
                                (P = page_size); free strides */
    qattn_tensor k_scale;    /* [N_slots] or [N_pages, P] f32; free strides (a fused
                                layout, codes then the scale in one slot row, is two
                                views of one buffer); stride 0 broadcasts */
    qattn_tensor weights;    /* [B, N, H] f32 */
    qattn_tensor kv_indptr;  /* [B + 1] i32 */
    qattn_tensor kv_indices; /* [n_pages] i32 */
    qattn_tensor kv_lens;    /* [B] i32, L_b keys including the N new rows */
    qattn_tensor logits;     /* [B, N, max_kv_len] f32, last dim contiguous */
    int32_t page_size;       /* P >= 1 */
    int32_t max_kv_len;      /* >= every kv_lens[b]; the logits' columns */
    int32_t clean_logits;    /* non-zero: -inf in every column a row does not see */
} qattn_paged_mqa_logits_args;

typedef enum qattn_paged_mqa_variant {
    QATTN_PAGED_MQA_AUTO = 0, /* let the planner choose (options only) */
    /* Key tiles decoded once into shared memory and scored by every row of
     * the request on the vector units: any Vulkan 1.3 device. */
    QATTN_PAGED_MQA_SIMT,
    /* Scores on the matrix unit (f16 16x16x16 or 16x8x16 -> f32, the fp8
     * codes converted exactly): the keys of a step are the M side, the
     * request's rows x heads the N side; each subgroup converts its keys'
     * fragments once and reuses them for every row and head; ReLU x weight
     * and the head sum on the accumulator, then the key's scale, one store.
     * Needs a 16x16x16 or 16x8x16 f16 shape, subgroups of 32 lanes, D 64,
     * 128 or 256 and 16-byte aligned q and key rows; AUTO prefers it. */
    QATTN_PAGED_MQA_MATRIX,
    QATTN_PAGED_MQA_VARIANT_COUNT
} qattn_paged_mqa_variant;

/** Returns "simt", "matrix"; "auto" for AUTO; "invalid" otherwise. */
QATTN_API const char *qattn_paged_mqa_variant_name(qattn_paged_mqa_variant v);

typedef struct qattn_paged_mqa_logits_options {
    size_t size;                     /* sizeof(qattn_paged_mqa_logits_options) */
    qattn_paged_mqa_variant variant; /* AUTO, or pin one (gate failure = error) */
    int32_t keys_per_split;          /* 0 = planner, else a multiple of the key tile */
} qattn_paged_mqa_logits_options;

/** The defaults: the planner chooses the variant and the splits. */
#define QATTN_PAGED_MQA_LOGITS_OPTIONS_INIT \
    {sizeof(qattn_paged_mqa_logits_options), QATTN_PAGED_MQA_AUTO, 0}

#if defined(QATTN_CHECK_PLAN_PADDING) && defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic error "-Wpadded"
#endif
/** The planner's decision for one paged MQA logits shape: every launch
 *  decision; read-only like the decode plan.
 *
 *  One launch of grid[0] x grid[1] x grid[2] workgroups of workgroup_size
 *  lanes: grid[0] = num_splits ranges of keys_per_split context positions
 *  (num_splits x keys_per_split >= max_kv_len), grid[1] walks the requests
 *  (grid-stride past 65535), grid[2] = 1. A workgroup decodes each tile of
 *  kv_tile keys of its range once and scores it for all N rows of its
 *  request. Sized from shapes, device and max_kv_len only: the run reads no
 *  length on the host, so the launch can be captured in a graph. */
typedef struct qattn_paged_mqa_logits_plan {
    qattn_paged_mqa_variant variant;
    /* what the plan was made for; run refuses arguments that differ */
    int32_t batch, rows, heads, head_dim; /* B, N, H, D */
    qattn_dtype q_dtype, k_dtype;
    int32_t page_size;
    int32_t max_kv_len;
    int32_t workgroup_size;
    int32_t kv_tile;              /* keys per tile */
    int32_t load_bytes;           /* 16: q and key rows start 16-byte aligned; else 1 */
    /** 1: each row's q is decoded once per tile into shared memory
     *  (q_stage_bytes of shared_bytes) rather than by every thread */
    int32_t q_staged;
    int32_t q_stage_bytes;
    int32_t num_splits;
    int32_t keys_per_split;       /* a multiple of kv_tile */
    uint32_t grid[3];
    uint32_t shared_bytes;        /* exact shared memory of the launch */
    uint64_t workspace_bytes;     /* 0: logits are written directly */
    /* The matrix variant's geometry (0 for simt). A step of the workgroup
     * is kv_tile = 16 x key_tiles x subgroups keys; subgroup s holds keys
     * [16 key_tiles s, 16 key_tiles (s + 1)) of it as A fragments. q's
     * columns are (row, head slot) pairs, head_slots per row (heads rounded
     * up to 16, the extra slots zero); pass_rows rows of them are staged in
     * shared memory as f16 at a time: passes = 1 stages q once per request,
     * more stage each pass in every step, the fragments of the step kept. */
    int32_t subgroup_size;        /* lanes the kernel is written for (32) */
    int32_t subgroups;            /* per workgroup: workgroup_size / subgroup_size */
    int32_t key_tiles;            /* 16-key fragments per subgroup per step */
    int32_t head_slots;           /* q columns per row */
    int32_t pass_rows;
    int32_t passes;
    /** 1: fragments are built and accumulators read lane by lane in the
     *  layout QATTN_FEAT_FRAGMENT_LAYOUT names (the epilogue in registers);
     *  0: both go through shared memory with matrix loads and stores */
    int32_t fragment_layout;
    int32_t q_row_halves;         /* f16 per staged q column (D + 8: rows apart in banks) */
    qattn_matrix_shape matrix_shape; /* the product's shape; zero for simt */
    char reason[QATTN_REASON_BYTES];
    /** A digest of the layout the planner saw (dtypes, shapes, strides and
     *  16-byte alignment of every tensor but the page table, page_size);
     *  run refuses args of another layout. */
    uint64_t args_layout;
    /** A digest of every byte above; keep it last. */
    uint64_t integrity;
} qattn_paged_mqa_logits_plan;
#if defined(QATTN_CHECK_PLAN_PADDING) && defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

/** Plans paged MQA logits for ctx's device. Validates every descriptor
 *  first; `options` may be NULL. Returns QATTN_ERR_VARIANT_GATE when a
 *  pinned variant cannot run, naming the failed condition. */
QATTN_API qattn_status qattn_paged_mqa_logits_plan_create(qattn_context *ctx,
                                                          const qattn_paged_mqa_logits_args *args,
                                                          const qattn_paged_mqa_logits_options *options,
                                                          qattn_paged_mqa_logits_plan *plan);
/** The pure planner behind _plan_create: no context, no environment, no
 *  validation of buffers; a function of shapes, strides and caps alone. */
QATTN_API qattn_status qattn_paged_mqa_logits_plan_compute(const qattn_device_caps *caps,
                                                           const qattn_paged_mqa_logits_args *args,
                                                           const qattn_paged_mqa_logits_options *options,
                                                           qattn_paged_mqa_logits_plan *plan,
                                                           char *err, size_t err_size);
/** Runs a plan; never allocates; workspace as for decode (this op needs
 *  none: plan->workspace_bytes is 0). Indices are handled as decode handles
 *  them (spec 2), QATTN_CHECK_INDICES=1 included. */
QATTN_API qattn_status qattn_paged_mqa_logits_run(qattn_context *ctx,
                                                  const qattn_paged_mqa_logits_plan *plan,
                                                  const qattn_paged_mqa_logits_args *args,
                                                  qattn_buffer *workspace,
                                                  uint64_t workspace_offset);

#ifdef __cplusplus
}
#endif
#endif /* QATTN_QATTN_H */
