/* The options structs' versions (the rule is in qattn.h, "option structs")
 * and the one reader of size-versioned structs (qattn_struct_read/_write,
 * qattn/backend.h), which the backends' own structs go through too. Each
 * public call copies the caller's options into a struct of this build's
 * layout before anything reads them, so no code reads past the caller's
 * size. */
#include <string.h>

#include "internal.h"

/* Each struct as its first version declared it. A later version appends
 * fields to the public struct and a frozen copy of itself here, with its
 * row in the version table; the checks below fail when the public struct
 * changes in any other way, or when a version would not grow sizeof (a
 * field placed in the tail padding of the one before could not be told
 * apart from it). */
typedef struct {
    size_t size;
    const char *device;
    int debug_validation;
    void *stream;
} context_options_v1;

typedef struct {
    size_t size;
    qattn_decode_variant variant;
    int32_t num_splits;
} decode_options_v1;

typedef struct {
    size_t size;
    qattn_mqa_variant variant;
    int32_t rows_per_subgroup;
    int32_t kv_slices;
} mqa_logits_options_v1;

typedef struct {
    size_t size;
    qattn_paged_mqa_variant variant;
    int32_t keys_per_split;
} paged_mqa_logits_options_v1;

QATTN_STRUCT_SAME_FIELD(qattn_context_options, context_options_v1, size);
QATTN_STRUCT_SAME_FIELD(qattn_context_options, context_options_v1, device);
QATTN_STRUCT_SAME_FIELD(qattn_context_options, context_options_v1, debug_validation);
QATTN_STRUCT_SAME_FIELD(qattn_context_options, context_options_v1, stream);
QATTN_STRUCT_SAME_FIELD(qattn_decode_options, decode_options_v1, size);
QATTN_STRUCT_SAME_FIELD(qattn_decode_options, decode_options_v1, variant);
QATTN_STRUCT_SAME_FIELD(qattn_decode_options, decode_options_v1, num_splits);
QATTN_STRUCT_SAME_FIELD(qattn_mqa_logits_options, mqa_logits_options_v1, size);
QATTN_STRUCT_SAME_FIELD(qattn_mqa_logits_options, mqa_logits_options_v1, variant);
QATTN_STRUCT_SAME_FIELD(qattn_mqa_logits_options, mqa_logits_options_v1, rows_per_subgroup);
QATTN_STRUCT_SAME_FIELD(qattn_mqa_logits_options, mqa_logits_options_v1, kv_slices);
QATTN_STRUCT_SAME_FIELD(qattn_paged_mqa_logits_options, paged_mqa_logits_options_v1, size);
QATTN_STRUCT_SAME_FIELD(qattn_paged_mqa_logits_options, paged_mqa_logits_options_v1, variant);
QATTN_STRUCT_SAME_FIELD(qattn_paged_mqa_logits_options, paged_mqa_logits_options_v1, keys_per_split);

static const qattn_struct_version context_versions[] = {
    {sizeof(context_options_v1), QATTN_STRUCT_END(context_options_v1, stream)},
};
static const qattn_struct_version decode_versions[] = {
    {sizeof(decode_options_v1), QATTN_STRUCT_END(decode_options_v1, num_splits)},
};
static const qattn_struct_version mqa_logits_versions[] = {
    {sizeof(mqa_logits_options_v1), QATTN_STRUCT_END(mqa_logits_options_v1, kv_slices)},
};
static const qattn_struct_version paged_mqa_logits_versions[] = {
    {sizeof(paged_mqa_logits_options_v1), QATTN_STRUCT_END(paged_mqa_logits_options_v1, keys_per_split)},
};
#define QATTN__COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* The newest row of each table is this build's struct (a version added to
 * the public struct without its row fails here); each row's size must be
 * larger than the row before it. */
_Static_assert(sizeof(qattn_context_options) == sizeof(context_options_v1),
               "qattn_context_options changed: add its version to context_versions");
_Static_assert(sizeof(qattn_decode_options) == sizeof(decode_options_v1),
               "qattn_decode_options changed: add its version to decode_versions");
_Static_assert(sizeof(qattn_mqa_logits_options) == sizeof(mqa_logits_options_v1),
               "qattn_mqa_logits_options changed: add its version to mqa_logits_versions");
_Static_assert(sizeof(qattn_paged_mqa_logits_options) == sizeof(paged_mqa_logits_options_v1),
               "qattn_paged_mqa_logits_options changed: add its version to paged_mqa_logits_versions");

/* ---- the reader -------------------------------------------------------- */

/* The arguments both directions share; the table must follow the rule of
 * qattn_struct_version (ascending sizes, each row's fields inside it). */
static qattn_status check_call(const void *dst, const qattn_struct_version *v, int n, const char *size_arg,
                               const char *type, char *err, size_t err_size) {
    if (!dst) return qattn__err(err, err_size, QATTN_ERR_INVALID_ARGUMENT, "dst: NULL");
    if (!size_arg || !type)
        return qattn__err(err, err_size, QATTN_ERR_INVALID_ARGUMENT, "%s: NULL (a struct is named in messages)",
                          !size_arg ? "size_arg" : "type");
    if (!v) return qattn__err(err, err_size, QATTN_ERR_INVALID_ARGUMENT, "versions: NULL");
    if (n < 1)
        return qattn__err(err, err_size, QATTN_ERR_INVALID_ARGUMENT, "n_versions: %d, a struct has at least one",
                          n);
    for (int i = 0; i < n; ++i) {
        if (v[i].bytes < sizeof(size_t) || v[i].bytes > v[i].size)
            return qattn__err(err, err_size, QATTN_ERR_INVALID_ARGUMENT,
                              "versions[%d].bytes: %zu is outside [sizeof(size_t), its size %zu]", i, v[i].bytes,
                              v[i].size);
        if (i > 0 && v[i].size <= v[i - 1].size)
            return qattn__err(err, err_size, QATTN_ERR_INVALID_ARGUMENT,
                              "versions[%d].size: %zu does not grow past versions[%d]'s %zu", i, v[i].size,
                              i - 1, v[i - 1].size);
    }
    return QATTN_OK;
}

/* The version whose sizeof is `size`: its index, or -1 with the reason in
 * err (naming size_arg, the type and what sets the size). */
static int version_of(size_t size, const qattn_struct_version *v, int n, const char *size_arg,
                      const char *type, const char *init, char *err, size_t err_size) {
    for (int i = 0; i < n; ++i)
        if (v[i].size == size) return i;
    const char *open = init ? " (" : "", *by = init ? init : "", *close = init ? " does)" : "";
    if (size == 0)
        qattn__err(err, err_size, QATTN_ERR_INVALID_ARGUMENT, "%s is 0: set it to sizeof(%s)%s%s%s", size_arg,
                   type, open, by, close);
    else if (size < v[0].size)
        qattn__err(err, err_size, QATTN_ERR_INVALID_ARGUMENT,
                   "%s: %zu is below the first %s's %zu bytes: set it to sizeof(%s)%s%s%s", size_arg, size, type,
                   v[0].size, type, open, by, close);
    else if (size > v[n - 1].size)
        qattn__err(err, err_size, QATTN_ERR_INVALID_ARGUMENT,
                   "%s: %zu is above this library's sizeof(%s) = %zu (a header newer than the library?): set "
                   "it to sizeof(%s)%s%s%s",
                   size_arg, size, type, v[n - 1].size, type, open, by, close);
    else
        qattn__err(err, err_size, QATTN_ERR_INVALID_ARGUMENT,
                   "%s: %zu is the sizeof of no version of %s: set it to sizeof(%s)%s%s%s", size_arg, size, type,
                   type, open, by, close);
    return -1;
}

/* Both directions: the caller's struct is src (read: dst gets the defaults
 * first, NULL src keeps them) or dst (write); its size picks the version
 * whose fields are copied. The size member itself is never copied. */
static qattn_status copy_version(void *dst, const void *src, int callers_is_dst, const qattn_struct_version *v,
                                 int n, const char *size_arg, const char *type, const char *init, char *err,
                                 size_t err_size) {
    qattn_status s = check_call(dst, v, n, size_arg, type, err, err_size);
    if (s != QATTN_OK) return s;
    if (!callers_is_dst) {
        const size_t full = v[n - 1].size;
        memset(dst, 0, full);
        memcpy(dst, &full, sizeof full);
        if (!src) return QATTN_OK;
    } else if (!src) {
        return qattn__err(err, err_size, QATTN_ERR_INVALID_ARGUMENT, "src: NULL");
    }
    size_t size;
    memcpy(&size, callers_is_dst ? dst : src, sizeof size);
    const int i = version_of(size, v, n, size_arg, type, init, err, err_size);
    if (i < 0) return QATTN_ERR_INVALID_ARGUMENT;
    memcpy((char *)dst + sizeof size, (const char *)src + sizeof size, v[i].bytes - sizeof size);
    return QATTN_OK;
}

qattn_status qattn_struct_read(void *dst, const void *src, const qattn_struct_version *versions, int n_versions,
                               const char *size_arg, const char *type, const char *init, char *err,
                               size_t err_size) {
    return copy_version(dst, src, 0, versions, n_versions, size_arg, type, init, err, err_size);
}

qattn_status qattn_struct_write(void *dst, const void *src, const qattn_struct_version *versions,
                                int n_versions, const char *size_arg, const char *type, const char *init,
                                char *err, size_t err_size) {
    return copy_version(dst, src, 1, versions, n_versions, size_arg, type, init, err, err_size);
}

/* ---- the core's option structs ----------------------------------------- */

qattn_status qattn__read_context_options(const qattn_context_options *in, qattn_context_options *out,
                                         char *err, size_t err_size) {
    return qattn_struct_read(out, in, context_versions, QATTN__COUNT(context_versions), "options.size",
                            "qattn_context_options", "QATTN_CONTEXT_OPTIONS_INIT", err, err_size);
}

qattn_status qattn__read_decode_options(const qattn_decode_options *in, qattn_decode_options *out,
                                        char *err, size_t err_size) {
    return qattn_struct_read(out, in, decode_versions, QATTN__COUNT(decode_versions), "options.size",
                             "qattn_decode_options", "QATTN_DECODE_OPTIONS_INIT", err, err_size);
}

qattn_status qattn__read_mqa_logits_options(const qattn_mqa_logits_options *in,
                                            qattn_mqa_logits_options *out, char *err,
                                            size_t err_size) {
    return qattn_struct_read(out, in, mqa_logits_versions, QATTN__COUNT(mqa_logits_versions), "options.size",
                             "qattn_mqa_logits_options", "QATTN_MQA_LOGITS_OPTIONS_INIT", err,
                        err_size);
}

qattn_status qattn__read_paged_mqa_logits_options(const qattn_paged_mqa_logits_options *in,
                                                  qattn_paged_mqa_logits_options *out, char *err,
                                                  size_t err_size) {
    return qattn_struct_read(out, in, paged_mqa_logits_versions, QATTN__COUNT(paged_mqa_logits_versions),
                             "options.size", "qattn_paged_mqa_logits_options",
                             "QATTN_PAGED_MQA_LOGITS_OPTIONS_INIT", err, err_size);
}

qattn_status qattn_context_options_copy(const qattn_context_options *options,
                                        qattn_context_options *out, char *err, size_t err_size) {
    if (!out) return qattn__err(err, err_size, QATTN_ERR_INVALID_ARGUMENT, "out: NULL");
    return qattn__read_context_options(options, out, err, err_size);
}
