/*
 * The backend parity suite (one suite for every backend): each op file
 * (parity_<op>.c) holds a table of cases and runs each one on the CPU
 * reference and on the backend under test with the same seeded inputs,
 * then compares with the spec's tolerances (tests/common/tolerance.h).
 *
 * An op registers itself by defining `const parity_op parity_op_<op>` in
 * tests/parity/parity_<op>.c; the build generates the table of all of them
 * (tests/parity/parity.cmake), so adding an op is adding its file.
 *
 * Conventions every op follows
 * - Inputs are drawn fresh per case from qt_rng_for("<op>/<case name>")
 *   (seeded; QATTN_TEST_SEED reproduces), never all-zero.
 * - Outputs are poisoned (0xFF bytes: NaN as bf16/f32) on both sides before
 *   each run; bytes of a tensor's buffer outside its elements must come back
 *   untouched.
 * - A failure prints the case name, the seed and the first mismatches.
 */
#ifndef QATTN_PARITY_COMMON_H
#define QATTN_PARITY_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "qattn/qattn.h"
#include "test_rng.h"

#define PT_POISON 0xFF

typedef struct parity_ctx {
    qattn_context *ref;       /* cpu reference */
    qattn_context *dev;       /* backend under test */
    const char *backend;      /* its name */
    qattn_device_caps caps;   /* of dev */
    int full;                 /* --full: the larger sweep */
    const char *filter;       /* --filter: substring of case names, or NULL */
    const char *variant;      /* --variant: forced variant name, or NULL */
    int verbose;
    /* Ad-hoc case and timing (printed only; never part of pass/fail). */
    const char *shape;        /* --shape: op-specific ad-hoc case, or NULL */
    int time_iters;           /* --time N: time the tested op N times */
    int no_check;             /* --no-check: skip the reference (timing only) */
    /* Totals over the run. */
    int n_pass, n_fail, n_refused;
} parity_ctx;

typedef struct parity_op {
    const char *name; /* "decode", "kv_store", "mqa_logits" */
    /* Runs every selected case; updates the totals in pc. */
    void (*run)(parity_ctx *pc);
} parity_op;

/* 1 when the case is selected by --filter (NULL filter: all). */
int pt_selected(const parity_ctx *pc, const char *case_name);
/* Prints a case failure with the seed to reproduce it. */
void pt_fail(parity_ctx *pc, const qt_rng *rng, const char *case_name, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
void pt_pass(parity_ctx *pc, const char *case_name, const char *detail);

/* ---- tensors living on both contexts ----------------------------------- */

/* Memory layout of a tensor: dimension order outermost first (ends with the
 * last dimension, which stays contiguous), elements of padding after each
 * block of a non-innermost dimension, elements before element 0. */
typedef struct pt_layout {
    int32_t order[4];
    int64_t pad;
    int64_t lead;
} pt_layout;

pt_layout pt_dense(void);

typedef struct pt_tensor {
    qattn_dtype dtype;
    int32_t rank;
    int64_t shape[4];
    int64_t strides[4];
    uint64_t offset;      /* bytes */
    size_t bytes;         /* size of the buffer image */
    uint8_t *host;        /* image of the whole buffer */
    qattn_buffer *buf[2]; /* [0] on ref, [1] on dev */
    /* A view into another tensor's buffer (K and V interleaved in one
     * allocation, a broadcast scale): host and bytes are the owner's, the
     * buffers are the owner's, and only the owner is uploaded and freed. */
    const struct pt_tensor *owner;
} pt_tensor;

/* Host image of `shape` with layout l (NULL = dense), all bytes = fill.
 * Returns 0 on allocation failure. */
int pt_make(pt_tensor *t, qattn_dtype dt, int32_t rank, const int64_t *shape, const pt_layout *l,
            uint8_t fill);
/* A view of `owner`'s buffer: shape and strides (elements of dt), element 0
 * at byte `offset` of the owner's buffer. */
void pt_view(pt_tensor *t, const pt_tensor *owner, qattn_dtype dt, int32_t rank, const int64_t *shape,
             const int64_t *strides, uint64_t offset);
void *pt_at(const pt_tensor *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3);
int64_t pt_count(const pt_tensor *t);
void *pt_at_linear(const pt_tensor *t, int64_t n);
/* Copies the image into a buffer on each context (allocating on first use). */
qattn_status pt_upload(parity_ctx *pc, pt_tensor *t);
/* Downloads side `which` (0 ref, 1 dev) of the whole buffer into img. */
qattn_status pt_download(parity_ctx *pc, const pt_tensor *t, int which, uint8_t *img);
/* The descriptor on side `which`; an absent tensor (no image) gives a
 * zeroed descriptor. */
qattn_tensor pt_desc(const pt_tensor *t, int which);
/* 1 when every byte of img outside the tensor's elements equals byte. */
int pt_gaps_equal(const pt_tensor *t, const uint8_t *img, uint8_t byte);
void pt_free(parity_ctx *pc, pt_tensor *t);

/* Element of an image laid out like t. */
static inline const void *pt_img_at(const pt_tensor *t, const uint8_t *img, int64_t n) {
    return img + ((const uint8_t *)pt_at_linear(t, n) - t->host);
}

/* A buffer of `bytes` on one context filled with `fill` (workspace). */
qattn_status pt_scratch(qattn_context *ctx, uint64_t bytes, uint8_t fill, qattn_buffer **out);

#endif /* QATTN_PARITY_COMMON_H */
