/* Shared machinery of the parity suite: case selection and reporting, and
 * tensors mirrored on the reference and the tested context. */
#include "parity_common.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int pt_selected(const parity_ctx *pc, const char *case_name) {
    return !pc->filter || strstr(case_name, pc->filter) != NULL;
}

void pt_fail(parity_ctx *pc, const qt_rng *rng, const char *case_name, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "FAIL %s [%s]: ", case_name, pc->backend);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n     reproduce: QATTN_TEST_SEED=0x%016llx (stream \"%s\")\n",
            (unsigned long long)rng->base_seed, rng->name);
    va_end(ap);
    pc->n_fail++;
}

void pt_pass(parity_ctx *pc, const char *case_name, const char *detail) {
    pc->n_pass++;
    if (pc->verbose) printf("ok   %s%s%s\n", case_name, detail && *detail ? "  " : "", detail ? detail : "");
}

pt_layout pt_dense(void) {
    pt_layout l = {{0, 1, 2, 3}, 0, 0};
    return l;
}

int pt_make(pt_tensor *t, qattn_dtype dt, int32_t rank, const int64_t *shape, const pt_layout *l,
            uint8_t fill) {
    memset(t, 0, sizeof *t);
    pt_layout dense = pt_dense();
    if (!l) l = &dense;
    t->dtype = dt;
    t->rank = rank;
    for (int32_t k = 0; k < rank; ++k) t->shape[k] = shape[k];
    int64_t s = 1;
    for (int32_t k = rank - 1; k >= 0; --k) {
        int32_t d = l->order[k];
        t->strides[d] = s;
        s = s * (shape[d] > 0 ? shape[d] : 1) + (k > 0 ? l->pad : 0);
    }
    const size_t es = qattn_dtype_size(dt);
    t->offset = (uint64_t)l->lead * es;
    /* A trailing element of slack so writes past the end are caught too. */
    t->bytes = (size_t)(l->lead + s + 1) * es;
    t->host = malloc(t->bytes);
    if (!t->host) return 0;
    memset(t->host, fill, t->bytes);
    return 1;
}

void pt_view(pt_tensor *t, const pt_tensor *owner, qattn_dtype dt, int32_t rank, const int64_t *shape,
             const int64_t *strides, uint64_t offset) {
    memset(t, 0, sizeof *t);
    t->dtype = dt;
    t->rank = rank;
    for (int32_t k = 0; k < rank; ++k) {
        t->shape[k] = shape[k];
        t->strides[k] = strides[k];
    }
    t->offset = offset;
    t->bytes = owner->bytes;
    t->host = owner->host;
    t->owner = owner;
}

void *pt_at(const pt_tensor *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    const int64_t idx[4] = {i0, i1, i2, i3};
    int64_t e = 0;
    for (int32_t k = 0; k < t->rank; ++k) e += idx[k] * t->strides[k];
    return t->host + t->offset + (size_t)e * qattn_dtype_size(t->dtype);
}

int64_t pt_count(const pt_tensor *t) {
    int64_t n = 1;
    for (int32_t k = 0; k < t->rank; ++k) n *= t->shape[k];
    return n;
}

void *pt_at_linear(const pt_tensor *t, int64_t n) {
    int64_t idx[4] = {0, 0, 0, 0};
    for (int32_t k = t->rank - 1; k >= 0; --k) {
        idx[k] = n % t->shape[k];
        n /= t->shape[k];
    }
    return pt_at(t, idx[0], idx[1], idx[2], idx[3]);
}

static qattn_context *side(parity_ctx *pc, int which) { return which ? pc->dev : pc->ref; }

qattn_status pt_upload(parity_ctx *pc, pt_tensor *t) {
    if (t->owner) return QATTN_OK; /* the owner carries the bytes */
    for (int w = 0; w < 2; ++w) {
        qattn_status s;
        if (!t->buf[w] && (s = qattn_buffer_alloc(side(pc, w), t->bytes, &t->buf[w])) != QATTN_OK)
            return s;
        if ((s = qattn_buffer_upload(side(pc, w), t->buf[w], 0, t->host, t->bytes)) != QATTN_OK) return s;
    }
    return QATTN_OK;
}

qattn_status pt_download(parity_ctx *pc, const pt_tensor *t, int which, uint8_t *img) {
    const pt_tensor *o = t->owner ? t->owner : t;
    return qattn_buffer_download(side(pc, which), o->buf[which], 0, img, o->bytes);
}

qattn_tensor pt_desc(const pt_tensor *t, int which) {
    qattn_tensor d;
    memset(&d, 0, sizeof d);
    if (!t->host) return d;
    d.buffer = t->owner ? t->owner->buf[which] : t->buf[which];
    d.offset = t->offset;
    d.dtype = t->dtype;
    d.rank = t->rank;
    for (int32_t k = 0; k < t->rank; ++k) {
        d.shape[k] = t->shape[k];
        d.strides[k] = t->strides[k];
    }
    return d;
}

int pt_gaps_equal(const pt_tensor *t, const uint8_t *img, uint8_t byte) {
    uint8_t *mask = calloc(t->bytes, 1);
    if (!mask) return 0;
    const size_t es = qattn_dtype_size(t->dtype);
    for (int64_t n = 0; n < pt_count(t); ++n)
        memset(mask + ((uint8_t *)pt_at_linear(t, n) - t->host), 1, es);
    int ok = 1;
    for (size_t i = 0; i < t->bytes && ok; ++i)
        if (!mask[i] && img[i] != byte) ok = 0;
    free(mask);
    return ok;
}

void pt_free(parity_ctx *pc, pt_tensor *t) {
    if (t->owner) {
        memset(t, 0, sizeof *t);
        return;
    }
    for (int w = 0; w < 2; ++w) qattn_buffer_free(side(pc, w), t->buf[w]);
    free(t->host);
    memset(t, 0, sizeof *t);
}

qattn_status pt_scratch(qattn_context *ctx, uint64_t bytes, uint8_t fill, qattn_buffer **out) {
    *out = NULL;
    if (bytes == 0) return QATTN_OK;
    qattn_status s = qattn_buffer_alloc(ctx, bytes, out);
    if (s != QATTN_OK) return s;
    uint8_t *tmp = malloc((size_t)bytes);
    if (!tmp) return QATTN_ERR_OUT_OF_MEMORY;
    memset(tmp, fill, (size_t)bytes);
    s = qattn_buffer_upload(ctx, *out, 0, tmp, bytes);
    free(tmp);
    return s;
}
