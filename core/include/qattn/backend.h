/*
 * The backend interface: what a backend library implements so qattn_core can
 * drive it. Users only pass the table to qattn_context_create(); backend
 * authors fill it in.
 *
 * A backend is a const table of function pointers plus an opaque instance
 * pointer (`be` below) created by `create`. The core validates every argument
 * against the operation's contract and the plan before calling an op slot,
 * so slots may trust shapes, dtypes, bounds and alignment; they still report
 * device failures through their status.
 */
#ifndef QATTN_BACKEND_H
#define QATTN_BACKEND_H

#include <stdarg.h>
#include <string.h>

#include "qattn/kernel_args.h"
#include "qattn/qattn.h"

#ifdef __cplusplus
extern "C" {
#endif

#define QATTN_BACKEND_ABI 1

/** A buffer is the core's record (opaque, so it can change without breaking
 *  backends); a backend reaches its own part through this: the handle its
 *  buffer_alloc or buffer_wrap returned (a host pointer on cpu, the
 *  backend's own struct on GPUs). NULL for NULL. */
QATTN_API void *qattn_buffer_handle(const qattn_buffer *buf);

/** A resolved workspace range handed to op slots. buffer NULL = none. */
typedef struct qattn_workspace {
    qattn_buffer *buffer;
    uint64_t offset;
    uint64_t bytes;
} qattn_workspace;

/** Operations a device may be asked about. */
typedef enum qattn_op {
    QATTN_OP_DECODE,
    QATTN_OP_KV_STORE,
    QATTN_OP_MQA_LOGITS,
    QATTN_OP_PAGED_MQA_LOGITS
} qattn_op;

struct qattn_backend_iface {
    const char *name;      /* "cpu", "vulkan", "hip" */
    uint32_t abi_version;  /* QATTN_BACKEND_ABI */

    /* Required. Creates an instance on the device named by options (never
     * NULL here: the core passes a full-size copy of the caller's, or the
     * defaults). Writes a reason into err on failure. */
    qattn_status (*create)(const qattn_context_options *options, void **be,
                           char *err, size_t err_size);
    /* Required. Destroys an instance; be may be NULL. */
    void (*destroy)(void *be);
    /* Required. Capabilities of the instance's device. */
    qattn_status (*get_caps)(void *be, qattn_device_caps *caps);

    /* Required buffer slots. `bytes` > 0; ranges are checked by the core. */
    qattn_status (*buffer_alloc)(void *be, uint64_t bytes, void **handle);
    void (*buffer_free)(void *be, void *handle);
    qattn_status (*buffer_upload)(void *be, void *handle, uint64_t offset,
                                  const void *src, uint64_t bytes);
    qattn_status (*buffer_download)(void *be, void *handle, uint64_t offset,
                                    void *dst, uint64_t bytes);
    /* Optional. NULL: qattn_buffer_wrap returns QATTN_ERR_UNSUPPORTED.
     * buffer_free is never called on a wrapped handle. */
    qattn_status (*buffer_wrap)(void *be, void *native, uint64_t bytes, void **handle);
    /* Optional. Releases what buffer_wrap made (never the caller's memory).
     * NULL: wrapping allocated nothing. */
    void (*buffer_unwrap)(void *be, void *handle);

    /* Optional. Whether the device can run `plan` (a qattn_decode_plan or
     * qattn_mqa_logits_plan, per op; NULL for kv_store). NULL slot: every op
     * with a non-NULL entry point below is supported for every plan. A
     * backend returns 0 rather than failing inside the op. */
    int (*supports_op)(void *be, qattn_op op, const void *plan);

    /* Op entry points; NULL = op unsupported (QATTN_ERR_UNSUPPORTED). */
    qattn_status (*decode)(void *be, const qattn_decode_plan *plan,
                           const qattn_decode_args *args, const qattn_workspace *ws);
    qattn_status (*kv_store)(void *be, const qattn_kv_store_args *args);
    qattn_status (*mqa_logits)(void *be, const qattn_mqa_logits_plan *plan,
                               const qattn_mqa_logits_args *args,
                               const qattn_workspace *ws);
    /* Optional (NULL: unsupported). Paged MQA logits (spec 5); supports_op
     * gets a qattn_paged_mqa_logits_plan for QATTN_OP_PAGED_MQA_LOGITS. */
    qattn_status (*paged_mqa_logits)(void *be, const qattn_paged_mqa_logits_plan *plan,
                                     const qattn_paged_mqa_logits_args *args,
                                     const qattn_workspace *ws);

    /* Required. Waits for all enqueued work. */
    qattn_status (*synchronize)(void *be);
    /* Optional. Device time of the last op call in ms; NULL: unsupported. */
    qattn_status (*last_op_time_ms)(void *be, double *ms);
    /* Optional. Text of the backend's last failure (e.g. validation-layer
     * messages); copied into the context's last error. NULL: none. */
    const char *(*last_message)(void *be);
    /* Optional. The address of a buffer's byte 0 in one address space
     * shared by every buffer of the instance (a host pointer, a device
     * address), so the core can tell that two buffers share memory (an
     * output over an input is refused). NULL: only ranges of the same
     * buffer are compared. */
    uint64_t (*buffer_address)(void *be, void *handle);

    /* ---- experimental slots: the measurement ops of qattn/experimental.h.
     * All optional (NULL: the call returns QATTN_ERR_UNSUPPORTED), outside
     * any stability promise; new ones are added at the end. */
    /* qattn_read_stream: arguments checked by the core; adds the word sum of
     * src's range to the u32 at `sum`, timed as an op. */
    qattn_status (*read_stream)(void *be, void *src, uint64_t offset, uint64_t bytes,
                                void *sum, uint64_t sum_offset);
    /* qattn_mqa_matrix_ceiling: the matrix-unit rate (TFLOP/s) of a GEMM
     * with the tile shape of a coopmat MQA logits plan; the plan is sealed
     * and supports_op accepted it. */
    qattn_status (*mqa_matrix_ceiling)(void *be, const qattn_mqa_logits_plan *plan, double *tflops);
    /* qattn_decode_read: arguments checked by the core (a valid decode call
     * whose cache rows, page, row and head strides are 16-byte multiples);
     * reads what qattn_decode_run reads for `args` and adds its word sum to
     * the u32 at `sum`, timed as an op. */
    qattn_status (*decode_read)(void *be, const qattn_decode_args *args, void *sum, uint64_t sum_offset);
};

/* ---- for backend libraries' own public calls (e.g. qattn/vulkan.h) ----- */
/** Makes a context around an instance the backend created itself (for
 *  example on a device the caller handed it), calling iface->get_caps once.
 *  Takes ownership of `be`: on failure it is destroyed with iface->destroy. */
QATTN_API qattn_status qattn_context_adopt(const qattn_backend_iface *iface, void *be,
                                           qattn_context **out, char *err, size_t err_size);
/** For a backend's own context-creating calls (qattn_vulkan_context_create):
 *  checks options->size by the rule of qattn.h ("option structs") and writes
 *  a copy in this build's layout to *out (NULL options = the defaults), so
 *  the backend reads only *out, never past the caller's size. Returns
 *  QATTN_ERR_INVALID_ARGUMENT with the reason in err (may be NULL). */
QATTN_API qattn_status qattn_context_options_copy(const qattn_context_options *options,
                                                  qattn_context_options *out, char *err,
                                                  size_t err_size);
/** One released version of a struct that starts with `size_t size` (the
 *  rule of qattn.h, "option structs"; a backend's own structs such as those
 *  of qattn/vulkan.h follow it too): `size` is its sizeof, what a caller
 *  built against that version sets; `bytes` is where its last field ends.
 *  The bytes in between are that version's tail padding: a later version
 *  may put a field there, so they are never read from (or written to) a
 *  caller of the older one. A struct's versions are a table of these in
 *  ascending `size`, the last one this build's struct. */
typedef struct qattn_struct_version {
    size_t size;
    size_t bytes;
} qattn_struct_version;
/** For a struct's version table: a frozen copy V of each released version
 *  is kept next to it, and QATTN_STRUCT_SAME_FIELD(T, V, f) fails the build
 *  when field f of this build's struct T moved or changed size (fields are
 *  only ever appended); QATTN_STRUCT_END(V, f) is where V's last field f
 *  ends, the `bytes` of V's row. */
#ifdef __cplusplus
#define QATTN_STRUCT_STATIC_ASSERT_ static_assert
#else
#define QATTN_STRUCT_STATIC_ASSERT_ _Static_assert
#endif
#define QATTN_STRUCT_SAME_FIELD(T, V, f)                                                   \
    QATTN_STRUCT_STATIC_ASSERT_(offsetof(T, f) == offsetof(V, f) &&                        \
                                    sizeof(((T *)0)->f) == sizeof(((V *)0)->f),            \
                                #T "." #f " moved: fields are only ever appended")
#define QATTN_STRUCT_END(V, f) (offsetof(V, f) + sizeof(((V *)0)->f))
/** Reads the caller's struct `src` (NULL = all defaults) into `dst`, a
 *  struct of this build's layout (versions[n_versions - 1]): dst gets every
 *  field of the caller's version, zero for the fields of later versions,
 *  and this build's size. No byte of src past the caller's last field is
 *  read. A size that is no version's sizeof (0, below the first one's,
 *  above this build's, or in between) returns QATTN_ERR_INVALID_ARGUMENT
 *  with a message in err (may be NULL) that names `size_arg` (how the
 *  caller spells the size member: "options.size", "device->size"), `type`
 *  and what sets the size: `init` (its _INIT macro), or sizeof(type) when
 *  init is NULL; dst then holds the defaults (zeros and its size). A NULL
 *  dst, versions, size_arg or type, or a table that breaks the rule above,
 *  is refused the same way and nothing is written. */
QATTN_API qattn_status qattn_struct_read(void *dst, const void *src, const qattn_struct_version *versions,
                                         int n_versions, const char *size_arg, const char *type,
                                         const char *init, char *err, size_t err_size);
/** The other direction, for a struct the library fills and the caller
 *  sizes (qattn_vulkan_get_device's out): checks dst's size as
 *  qattn_struct_read checks src's, with the same messages, then writes the
 *  fields of the caller's version from `src` (this build's struct, filled
 *  by the backend) into dst. dst's size and any byte past the caller's
 *  last field are not written; on failure nothing is. */
QATTN_API qattn_status qattn_struct_write(void *dst, const void *src, const qattn_struct_version *versions,
                                          int n_versions, const char *size_arg, const char *type,
                                          const char *init, char *err, size_t err_size);
/** For a backend's own extension calls (qattn_hip_set_stream, the calls of
 *  qattn/vulkan.h): the backend instance of ctx when ctx runs `iface`; NULL
 *  otherwise (NULL ctx, or a context of another backend). */
QATTN_API void *qattn_context_backend_instance(qattn_context *ctx, const qattn_backend_iface *iface);
/** Records a failure of a backend-specific call on ctx's last error, with the
 *  backend's own text (iface->last_message), and returns s. */
QATTN_API qattn_status qattn_context_backend_fail(qattn_context *ctx, qattn_status s, const char *what);
/** The one shape of a failure report, shared by the core and every
 *  backend's own fail helper (qattn_vk_fail, qh_fail): formats fmt/ap into
 *  msg (n bytes, truncated; nothing when msg is NULL or n is 0) and returns
 *  s, so a helper reads `return fail(be, status, "arg: rule", ...)`. A
 *  backend keeps msg as the text its last_message slot returns. */
QATTN_API qattn_status qattn_vformat_status(char *msg, size_t n, qattn_status s, const char *fmt,
                                            va_list ap);
/** Whether `name` contains `pattern`, ASCII case-insensitively (an empty
 *  pattern matches; NULL matches nothing): the one name matcher of qattn,
 *  for device selectors ("a case-insensitive substring of the device
 *  name") and variant names alike. */
QATTN_API int qattn_name_contains(const char *name, const char *pattern);
/** The checks qattn_decode_run (qattn_mqa_logits_run) applies to a plan on
 *  its own, for a backend's calls that take plans (qattn_vulkan_warmup):
 *  made by a planner of this build and unchanged since (its digest), fits
 *  ctx's device, and the backend has the op and can run the plan. On
 *  failure records a message naming `what` (NULL: "plan") on ctx and
 *  returns its status. */
QATTN_API qattn_status qattn_context_check_decode_plan(qattn_context *ctx, const qattn_decode_plan *plan,
                                                       const char *what);
QATTN_API qattn_status qattn_context_check_mqa_logits_plan(qattn_context *ctx,
                                                           const qattn_mqa_logits_plan *plan,
                                                           const char *what);
/** Stride of dimension `dim` in elements as int32 kernels take it: 0 for an
 *  absent tensor or a dimension of extent <= 1 (its stride is free and is
 *  never multiplied by more than 0). The core bounds the span of every
 *  tensor other than the K/V caches and their scales to int32, so every
 *  other stride fits; caches go through qattn_cache_kernel_view. */
static inline int32_t qattn_stride32(const qattn_tensor *t, int dim) {
    if (!t || !t->buffer || t->shape[dim] <= 1) return 0;
    return (int32_t)t->strides[dim];
}

/** How a backend addresses a K/V cache or its scales (spec 2), whatever
 *  its form. Key row `row` of page `page` is slot page * page_rows + row;
 *  its element (head g, dim d) is at page * page_stride + row * row_stride
 *  + g * head_stride + d elements from element 0 (scales: no d). A rank-3
 *  cache [N_slots, Hkv, D] (scales [N_slots, Hkv]) reads as pages of
 *  `page_size` consecutive slots; a rank-4 cache [N_pages, P, Hkv, D]
 *  (scales [N_pages, P, Hkv]) brings its own page and row strides. A slot
 *  is inside the cache iff 0 <= slot < n_slots. Kernels take these five
 *  numbers, never the rank. A dimension of extent 1 contributes stride 0.
 *  Decode passes the call's page_size (rank-4 tensors then have
 *  P = page_size); the KV store passes 1 and addresses by slot:
 *  page = slot / page_rows, row = slot % page_rows. */
typedef struct qattn_cache_view {
    int64_t n_slots;
    int64_t page_rows;
    int64_t page_stride, row_stride, head_stride;
} qattn_cache_view;

/** The view of a validated cache (is_scale 0) or scale tensor. */
QATTN_API qattn_cache_view qattn_cache_view_of(const qattn_tensor *t, int is_scale, int64_t page_size);

/** The view as kernels take it, for caches of any size. A K/V cache or its
 *  scales may span more than 2^31 (or 2^32) elements: the base of a page
 *  (page * page_stride) and of a kv head (g * head_stride) are formed in 64
 *  bits, once per page and once per head; the offset inside a page
 *  (row * row_stride, plus d for a cache) in 32 bits, which the core keeps
 *  below 2^31 for every row of a page a slot inside the cache can have. So
 *  element (slot in page `page` at row `row`, head g, dim d) is at
 *    (int64)page * page_stride + (int64)g * head_stride
 *      + (uint32)(row * row_stride + d)
 *  elements from element 0. n_slots and page_rows fit int32 (slot ids are
 *  int32). A dimension of extent 1 contributes stride 0. */
typedef struct qattn_cache_kernel_view {
    int64_t page_stride, head_stride;
    uint32_t row_stride;
    int32_t page_rows;
    int32_t n_slots;
    int32_t reserved_; /* 0 */
} qattn_cache_kernel_view;

static inline qattn_cache_kernel_view qattn_cache_kernel_view_of(const qattn_tensor *t, int is_scale,
                                                                 int64_t page_size) {
    const qattn_cache_view v = qattn_cache_view_of(t, is_scale, page_size);
    qattn_cache_kernel_view w;
    w.page_stride = v.page_stride;
    w.head_stride = v.head_stride;
    w.row_stride = (uint32_t)(uint64_t)v.row_stride;
    w.page_rows = (int32_t)v.page_rows;
    w.n_slots = (int32_t)v.n_slots;
    w.reserved_ = 0;
    return w;
}

/** The KV store's addressing of its four cache tensors, by slot (pages of
 *  one row for a rank-3 tensor, of P rows for a rank-4 one), in the order
 *  k_cache, v_cache, k_scale, v_scale: the arrays both GPU backends copy
 *  into their kernel parameters. An absent tensor (the scales of a bf16
 *  cache, never read) gives page_rows 1 and zero strides, so no kernel
 *  divides by zero. */
typedef struct qattn_kv_store_views {
    int64_t page_stride[4], head_stride[4];
    uint32_t page_rows[4], row_stride[4];
} qattn_kv_store_views;

static inline qattn_kv_store_views qattn_kv_store_views_of(const qattn_kv_store_args *a) {
    qattn_kv_store_views r;
    memset(&r, 0, sizeof r);
    const qattn_tensor *t[4] = {&a->k_cache, &a->v_cache, &a->k_scale, &a->v_scale};
    for (int i = 0; i < 4; ++i) {
        r.page_rows[i] = 1;
        if (!t[i]->buffer) continue;
        const qattn_cache_kernel_view v = qattn_cache_kernel_view_of(t[i], i >= 2, 1);
        r.page_rows[i] = (uint32_t)v.page_rows;
        r.page_stride[i] = v.page_stride;
        r.head_stride[i] = v.head_stride;
        r.row_stride[i] = v.row_stride;
    }
    return r;
}

/** The device address of a tensor's element 0 as a backend resolves its
 *  buffers; 0 for an absent tensor (buffer NULL). */
typedef uint64_t (*qattn_address_fn)(const qattn_tensor *t);

/** Decode's kernel arguments for a plan and arguments the core validated
 *  against it: the stage's and the merge's blocks of qattn/kernel_args.h,
 *  the one marshalling every GPU backend passes unchanged. `address` gives
 *  the tensors' device addresses; `workspace` is the device address of the
 *  workspace range's first byte. Fails only with QATTN_ERR_ALIGNMENT (a
 *  reason naming k_cache/v_cache in why) when the caches' addresses are not
 *  multiples of the plan's load width; writes nothing to tile or merge
 *  then. */
QATTN_API qattn_status qattn_decode_kernel_args_of(const qattn_decode_plan *plan, const qattn_decode_args *a,
                                                   qattn_address_fn address, uint64_t workspace,
                                                   qattn_decode_tile_args *tile, qattn_decode_merge_args *merge,
                                                   char *why, size_t why_size);

/** Paged MQA logits' kernel arguments (qattn/kernel_args.h) for a plan and
 *  arguments the core validated against it: both variants take this one
 *  block. Fails only with QATTN_ERR_ALIGNMENT (a reason naming q/k_cache in
 *  why) when the plan loads 16 bytes at a time and the device addresses of
 *  q or k_cache are not 16-byte aligned; writes nothing to out then. */
QATTN_API qattn_status qattn_paged_mqa_kernel_args_of(const qattn_paged_mqa_logits_plan *plan,
                                                      const qattn_paged_mqa_logits_args *a,
                                                      qattn_address_fn address, qattn_paged_mqa_kernel_args *out,
                                                      char *why, size_t why_size);

/** The read ops' occupancy on every GPU backend: workgroups per compute
 *  unit, enough resident loads to keep every memory channel busy (on the
 *  H200 a plain 16-byte-load read streamed 4.48 TB/s with 4 loads in
 *  flight per lane at 4-16 workgroups per SM, 2.37 TB/s with one load and
 *  4 workgroups), and the compute units assumed when a device does not say
 *  (lavapipe). */
#define QATTN_READ_GROUPS_PER_CU 8u
#define QATTN_READ_DEFAULT_CUS 16u

/** Workgroups of `wg` lanes for qattn_read_stream over `words` 16-byte
 *  words: QATTN_READ_GROUPS_PER_CU per compute unit, no more than there are
 *  lanes' worth of words. */
static inline uint32_t qattn_read_stream_groups(uint32_t compute_units, uint64_t words, uint32_t wg) {
    const uint64_t cus = compute_units > 0 ? compute_units : QATTN_READ_DEFAULT_CUS;
    const uint64_t groups = cus * QATTN_READ_GROUPS_PER_CU, need = (words + wg - 1) / wg;
    return (uint32_t)(need < groups ? need : groups);
}

/** qattn_decode_read's arguments and grid (splits, kv heads, requests), the
 *  same on every GPU backend: workgroups of `wg` lanes, QATTN_READ_GROUPS_PER_CU
 *  of them per compute unit; a lane reads one 16-byte chunk of a key's K
 *  and V rows, `loads` keys in flight; each split a whole number of steps
 *  of keys over the visible range of max_kv_len (the last split runs to
 *  the request's end). `sum` is the device address of the u32 result.
 *  Fails only with QATTN_ERR_ALIGNMENT (k_cache/v_cache not 16-byte
 *  aligned), writing nothing. */
QATTN_API qattn_status qattn_decode_read_args_of(const qattn_decode_args *a, qattn_address_fn address, uint64_t sum,
                                                 uint32_t compute_units, uint32_t wg, uint32_t loads,
                                                 qattn_decode_read_args *out, uint32_t grid[3], char *why,
                                                 size_t why_size);

#ifdef __cplusplus
}
#endif
#endif /* QATTN_BACKEND_H */
