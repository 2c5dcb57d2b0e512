/*
 * Parity cases of qattn_read_stream, the streaming read qattn-bench times to
 * find the device's read bandwidth: the sum it adds must be the wrapping sum
 * of exactly the range's 32-bit words (no word skipped, none read twice, none
 * from outside the range), on the reference and on the backend under test.
 *
 * Sizes cover less than one workgroup step, exact multiples of a step,
 * steps plus a ragged tail, and ranges that start inside the buffer and end
 * before its end (the bytes around the range hold different random words,
 * so reading them changes the sum). The sum lands in the middle of a
 * poisoned buffer that starts with a non-zero value; every other byte must
 * come back untouched. Calls that break a rule must fail and write nothing.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parity_common.h"
#include "qattn/experimental.h"

typedef struct read_case {
    uint64_t words;  /* 16-byte words read */
    uint64_t before; /* words of the buffer before the range */
    uint64_t after;  /* words after it */
} read_case;

static const read_case CASES[] = {
    {1, 0, 0},          {7, 1, 3},          {255, 0, 1},       {1024, 0, 0},
    {1024 * 3, 2, 0},   {1024 * 37 + 513, 5, 7}, {100003, 1, 1},  {1 << 20, 0, 2},
};

/* Byte offset of the u32 the sum goes to, in a 64-byte buffer. */
#define SUM_AT 20u
#define SUM_BYTES 64u

static uint32_t host_sum(const uint8_t *p, uint64_t bytes) {
    uint32_t s = 0;
    for (uint64_t i = 0; i < bytes; i += 4) {
        uint32_t w;
        memcpy(&w, p + i, 4);
        s += w;
    }
    return s;
}

/* Runs one read on ctx; checks the sum and that nothing else changed. */
static int check_side(parity_ctx *pc, const qt_rng *rng, const char *name, qattn_context *ctx,
                      const char *side, const uint8_t *img, uint64_t bytes, const read_case *c,
                      uint32_t start) {
    qattn_buffer *src = NULL, *sum = NULL;
    uint8_t init[SUM_BYTES], got[SUM_BYTES];
    memset(init, PT_POISON, sizeof init);
    memcpy(init + SUM_AT, &start, 4);
    int ok = 0;
    qattn_status s = qattn_buffer_alloc(ctx, bytes, &src);
    if (s == QATTN_OK) s = qattn_buffer_upload(ctx, src, 0, img, bytes);
    if (s == QATTN_OK) s = qattn_buffer_alloc(ctx, SUM_BYTES, &sum);
    if (s == QATTN_OK) s = qattn_buffer_upload(ctx, sum, 0, init, SUM_BYTES);
    if (s == QATTN_OK)
        s = qattn_read_stream(ctx, src, c->before * 16, c->words * 16, sum, SUM_AT);
    if (s == QATTN_OK) s = qattn_buffer_download(ctx, sum, 0, got, SUM_BYTES);
    if (s != QATTN_OK) {
        pt_fail(pc, rng, name, "%s: %s: %s", side, qattn_status_name(s), qattn_last_error(ctx));
    } else {
        const uint32_t want = start + host_sum(img + c->before * 16, c->words * 16);
        uint32_t have;
        memcpy(&have, got + SUM_AT, 4);
        int gaps = 1;
        for (unsigned i = 0; i < SUM_BYTES; ++i)
            if ((i < SUM_AT || i >= SUM_AT + 4) && got[i] != PT_POISON) gaps = 0;
        if (have != want)
            pt_fail(pc, rng, name, "%s: sum 0x%08x, want 0x%08x", side, (unsigned)have, (unsigned)want);
        else if (!gaps)
            pt_fail(pc, rng, name, "%s: wrote outside the sum's 4 bytes", side);
        else
            ok = 1;
    }
    qattn_buffer_free(ctx, src);
    qattn_buffer_free(ctx, sum);
    return ok;
}

static void run_case(parity_ctx *pc, const read_case *c) {
    char name[96];
    snprintf(name, sizeof name, "read_stream/w%" PRIu64 "_b%" PRIu64 "_a%" PRIu64, c->words, c->before,
             c->after);
    if (!pt_selected(pc, name)) return;
    qt_rng rng = qt_rng_for(name);
    const uint64_t bytes = (c->before + c->words + c->after) * 16;
    uint8_t *img = malloc((size_t)bytes);
    if (!img) {
        pt_fail(pc, &rng, name, "out of host memory");
        return;
    }
    for (uint64_t i = 0; i < bytes; i += 4) {
        uint32_t w = qt_u32(&rng) | 1u; /* never zero: every word moves the sum */
        memcpy(img + i, &w, 4);
    }
    const uint32_t start = qt_u32(&rng) | 0x80000000u;
    if (check_side(pc, &rng, name, pc->ref, "reference", img, bytes, c, start) &&
        check_side(pc, &rng, name, pc->dev, pc->backend, img, bytes, c, start))
        pt_pass(pc, name, "");
    free(img);
}

/* Each call breaks one rule; it must fail with that status and leave the
 * sum buffer as it was. */
static void run_refusals(parity_ctx *pc) {
    const char *name = "read_stream/refusals";
    if (!pt_selected(pc, name)) return;
    qt_rng rng = qt_rng_for(name);
    qattn_context *ctx = pc->dev;
    qattn_buffer *src = NULL, *sum = NULL;
    uint8_t img[256], init[SUM_BYTES], got[SUM_BYTES];
    for (size_t i = 0; i < sizeof img; ++i) img[i] = (uint8_t)(qt_u32(&rng) | 1u);
    memset(init, PT_POISON, sizeof init);
    if (pt_scratch(ctx, sizeof img, 0, &src) != QATTN_OK || qattn_buffer_upload(ctx, src, 0, img, sizeof img) ||
        pt_scratch(ctx, SUM_BYTES, PT_POISON, &sum) != QATTN_OK) {
        pt_fail(pc, &rng, name, "setup: %s", qattn_last_error(ctx));
        qattn_buffer_free(ctx, src);
        qattn_buffer_free(ctx, sum);
        return;
    }
    const struct {
        uint64_t offset, bytes, sum_offset;
        qattn_status want;
        const char *rule;
    } bad[] = {
        {0, 0, 0, QATTN_ERR_INVALID_ARGUMENT, "bytes 0"},
        {0, 24, 0, QATTN_ERR_INVALID_ARGUMENT, "bytes not a multiple of 16"},
        {8, 16, 0, QATTN_ERR_ALIGNMENT, "offset not a multiple of 16"},
        {0, 16, 2, QATTN_ERR_ALIGNMENT, "sum_offset not a multiple of 4"},
        {16, 256, 0, QATTN_ERR_OUT_OF_BOUNDS, "range past the end of src"},
        {0, 16, SUM_BYTES - 2, QATTN_ERR_ALIGNMENT, "sum misaligned at the end"},
        {0, 16, SUM_BYTES, QATTN_ERR_OUT_OF_BOUNDS, "sum past the end of its buffer"},
        {0, (uint64_t)1 << 35, 0, QATTN_ERR_OVERFLOW, "2^31 words"},
    };
    int ok = 1;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0] && ok; ++i) {
        qattn_status s = qattn_read_stream(ctx, src, bad[i].offset, bad[i].bytes, sum, bad[i].sum_offset);
        if (s != bad[i].want) {
            pt_fail(pc, &rng, name, "%s: got %s, want %s (%s)", bad[i].rule, qattn_status_name(s),
                    qattn_status_name(bad[i].want), qattn_last_error(ctx));
            ok = 0;
        } else if (strstr(qattn_last_error(ctx), "qattn_read_stream") == NULL) {
            pt_fail(pc, &rng, name, "%s: message does not name the call: %s", bad[i].rule, qattn_last_error(ctx));
            ok = 0;
        }
    }
    if (ok && (qattn_read_stream(ctx, NULL, 0, 16, sum, 0) != QATTN_ERR_NULL_BUFFER ||
               qattn_read_stream(ctx, src, 0, 16, NULL, 0) != QATTN_ERR_NULL_BUFFER)) {
        pt_fail(pc, &rng, name, "a NULL buffer was not refused with QATTN_ERR_NULL_BUFFER");
        ok = 0;
    }
    if (ok && qattn_buffer_download(ctx, sum, 0, got, SUM_BYTES) == QATTN_OK && memcmp(got, init, SUM_BYTES)) {
        pt_fail(pc, &rng, name, "a refused call wrote into the sum buffer");
        ok = 0;
    }
    if (ok) pt_pass(pc, name, "");
    qattn_buffer_free(ctx, src);
    qattn_buffer_free(ctx, sum);
}

static void run_read_stream(parity_ctx *pc) {
    if (pc->shape) return; /* --shape describes a decode case */
    run_refusals(pc);
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; ++i) run_case(pc, &CASES[i]);
}

const parity_op parity_op_read_stream = {"read_stream", run_read_stream};
