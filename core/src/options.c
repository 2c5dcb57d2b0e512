/* The options structs' versions (the rule is in qattn.h, "option structs").
 * Each public call copies the caller's options into a struct of this
 * build's layout before anything reads them, so no code reads past the
 * caller's size. */
#include "options.h"

#include "internal.h"

/* Each struct as its first version declared it. A later version appends
 * fields to the public struct and a frozen copy of itself here, with its
 * row in the layout table; the checks below fail when the public struct
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

#define QATTN__SAME_FIELD(T, V, f)                                                                \
    _Static_assert(offsetof(T, f) == offsetof(V, f) && sizeof(((T *)0)->f) == sizeof(((V *)0)->f), \
                   #T "." #f " moved: fields are only ever appended")
#define QATTN__END(V, f) (offsetof(V, f) + sizeof(((V *)0)->f))

QATTN__SAME_FIELD(qattn_context_options, context_options_v1, size);
QATTN__SAME_FIELD(qattn_context_options, context_options_v1, device);
QATTN__SAME_FIELD(qattn_context_options, context_options_v1, debug_validation);
QATTN__SAME_FIELD(qattn_context_options, context_options_v1, stream);
QATTN__SAME_FIELD(qattn_decode_options, decode_options_v1, size);
QATTN__SAME_FIELD(qattn_decode_options, decode_options_v1, variant);
QATTN__SAME_FIELD(qattn_decode_options, decode_options_v1, num_splits);
QATTN__SAME_FIELD(qattn_mqa_logits_options, mqa_logits_options_v1, size);
QATTN__SAME_FIELD(qattn_mqa_logits_options, mqa_logits_options_v1, variant);
QATTN__SAME_FIELD(qattn_mqa_logits_options, mqa_logits_options_v1, rows_per_subgroup);
QATTN__SAME_FIELD(qattn_mqa_logits_options, mqa_logits_options_v1, kv_slices);
QATTN__SAME_FIELD(qattn_paged_mqa_logits_options, paged_mqa_logits_options_v1, size);
QATTN__SAME_FIELD(qattn_paged_mqa_logits_options, paged_mqa_logits_options_v1, variant);
QATTN__SAME_FIELD(qattn_paged_mqa_logits_options, paged_mqa_logits_options_v1, keys_per_split);

static const qattn__options_layout context_layouts[] = {
    {sizeof(context_options_v1), QATTN__END(context_options_v1, stream)},
};
static const qattn__options_layout decode_layouts[] = {
    {sizeof(decode_options_v1), QATTN__END(decode_options_v1, num_splits)},
};
static const qattn__options_layout mqa_logits_layouts[] = {
    {sizeof(mqa_logits_options_v1), QATTN__END(mqa_logits_options_v1, kv_slices)},
};
static const qattn__options_layout paged_mqa_logits_layouts[] = {
    {sizeof(paged_mqa_logits_options_v1), QATTN__END(paged_mqa_logits_options_v1, keys_per_split)},
};
#define QATTN__COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* The newest row of each table is this build's struct (a version added to
 * the public struct without its row fails here); each row's size must be
 * larger than the row before it. */
_Static_assert(sizeof(qattn_context_options) == sizeof(context_options_v1),
               "qattn_context_options changed: add its version to context_layouts");
_Static_assert(sizeof(qattn_decode_options) == sizeof(decode_options_v1),
               "qattn_decode_options changed: add its version to decode_layouts");
_Static_assert(sizeof(qattn_mqa_logits_options) == sizeof(mqa_logits_options_v1),
               "qattn_mqa_logits_options changed: add its version to mqa_logits_layouts");
_Static_assert(sizeof(qattn_paged_mqa_logits_options) == sizeof(paged_mqa_logits_options_v1),
               "qattn_paged_mqa_logits_options changed: add its version to paged_mqa_logits_layouts");

static qattn_status read_options(void *dst, const void *src, const qattn__options_layout *layouts,
                                 int n, const char *arg, const char *type, const char *init,
                                 char *err, size_t err_size) {
    size_t got = 0;
    const qattn__options_size r = qattn__options_copy(dst, src, layouts, n, &got);
    const size_t full = layouts[n - 1].size;
    switch (r) {
    case QATTN__OPTIONS_OK:
        return QATTN_OK;
    case QATTN__OPTIONS_ZERO:
        return qattn__err(err, err_size, QATTN_ERR_INVALID_ARGUMENT,
                          "%s.size is 0: set it to sizeof(%s) (%s does)", arg, type, init);
    case QATTN__OPTIONS_SMALL:
        return qattn__err(err, err_size, QATTN_ERR_INVALID_ARGUMENT,
                          "%s.size: %zu is below the first %s's %zu bytes: set it to sizeof(%s) "
                          "(%s does)",
                          arg, got, type, layouts[0].size, type, init);
    case QATTN__OPTIONS_LARGE:
        return qattn__err(err, err_size, QATTN_ERR_INVALID_ARGUMENT,
                          "%s.size: %zu is above this library's sizeof(%s) = %zu (a header newer "
                          "than the library?): set it to sizeof(%s) (%s does)",
                          arg, got, type, full, type, init);
    case QATTN__OPTIONS_BETWEEN:
    default:
        return qattn__err(err, err_size, QATTN_ERR_INVALID_ARGUMENT,
                          "%s.size: %zu is the sizeof of no version of %s: set it to sizeof(%s) "
                          "(%s does)",
                          arg, got, type, type, init);
    }
}

qattn_status qattn__read_context_options(const qattn_context_options *in, qattn_context_options *out,
                                         char *err, size_t err_size) {
    return read_options(out, in, context_layouts, QATTN__COUNT(context_layouts), "options",
                        "qattn_context_options", "QATTN_CONTEXT_OPTIONS_INIT", err, err_size);
}

qattn_status qattn__read_decode_options(const qattn_decode_options *in, qattn_decode_options *out,
                                        char *err, size_t err_size) {
    return read_options(out, in, decode_layouts, QATTN__COUNT(decode_layouts), "options",
                        "qattn_decode_options", "QATTN_DECODE_OPTIONS_INIT", err, err_size);
}

qattn_status qattn__read_mqa_logits_options(const qattn_mqa_logits_options *in,
                                            qattn_mqa_logits_options *out, char *err,
                                            size_t err_size) {
    return read_options(out, in, mqa_logits_layouts, QATTN__COUNT(mqa_logits_layouts), "options",
                        "qattn_mqa_logits_options", "QATTN_MQA_LOGITS_OPTIONS_INIT", err,
                        err_size);
}

qattn_status qattn__read_paged_mqa_logits_options(const qattn_paged_mqa_logits_options *in,
                                                  qattn_paged_mqa_logits_options *out, char *err,
                                                  size_t err_size) {
    return read_options(out, in, paged_mqa_logits_layouts, QATTN__COUNT(paged_mqa_logits_layouts),
                        "options", "qattn_paged_mqa_logits_options",
                        "QATTN_PAGED_MQA_LOGITS_OPTIONS_INIT", err, err_size);
}

qattn_status qattn_context_options_copy(const qattn_context_options *options,
                                        qattn_context_options *out, char *err, size_t err_size) {
    if (!out) return qattn__err(err, err_size, QATTN_ERR_INVALID_ARGUMENT, "out: NULL");
    return qattn__read_context_options(options, out, err, err_size);
}
