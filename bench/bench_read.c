/* The ceiling qattn-bench reports decode against: the read bandwidth of the
 * device through the backend under test, measured with qattn_read_stream over
 * one buffer far larger than any cache, timed like every preset (bench_time:
 * warm-up, the backend's own timer, median). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "qattn/experimental.h"

/* Upload in pieces so neither the host nor the backend's staging memory
 * needs the whole buffer at once. */
static const uint64_t PIECE = 64ull << 20;

typedef struct read_launch {
    qattn_context *ctx;
    qattn_buffer *src, *sum;
    uint64_t bytes;
} read_launch;

static qattn_status launch(void *p) {
    const read_launch *l = p;
    return qattn_read_stream(l->ctx, l->src, 0, l->bytes, l->sum, 0);
}

int bench_read_bandwidth(qattn_context *ctx, uint64_t bytes, const bench_config *cfg, bench_result *res) {
    snprintf(res->variant, sizeof res->variant, "read_stream");
    read_launch l = {.ctx = ctx};
    bytes &= ~(uint64_t)15;
    /* A device with less memory than asked for gets the largest power-of-two
     * fraction of it that it can allocate, down to 1/16. */
    for (uint64_t b = bytes; b >= bytes / 16 && b >= 16; b /= 2)
        if (qattn_buffer_alloc(ctx, b, &l.src) == QATTN_OK) {
            l.bytes = b & ~(uint64_t)15;
            break;
        }
    if (!l.src) {
        snprintf(res->error, sizeof res->error, "alloc %llu bytes: %s", (unsigned long long)bytes,
                 qattn_last_error(ctx));
        return -1;
    }
    /* Distinct words (word i = i * 2654435761 + 1), so a kernel that reads
     * the wrong words, or some twice, gets a different sum. */
    uint32_t want = 0;
    uint32_t *piece = malloc((size_t)(l.bytes < PIECE ? l.bytes : PIECE));
    int rc = -1;
    if (!piece) {
        snprintf(res->error, sizeof res->error, "out of host memory");
        goto done;
    }
    for (uint64_t off = 0; off < l.bytes; off += PIECE) {
        const uint64_t n = l.bytes - off < PIECE ? l.bytes - off : PIECE;
        for (uint64_t i = 0; i < n / 4; ++i) {
            piece[i] = (uint32_t)((off / 4 + i) * 2654435761u + 1u);
            want += piece[i];
        }
        if (qattn_buffer_upload(ctx, l.src, off, piece, n) != QATTN_OK) {
            snprintf(res->error, sizeof res->error, "upload: %s", qattn_last_error(ctx));
            goto done;
        }
    }
    const uint32_t zero = 0;
    uint32_t got = 0;
    if (!(l.sum = bench_upload(ctx, &zero, 4, res))) goto done;
    if (launch(&l) != QATTN_OK || qattn_buffer_download(ctx, l.sum, 0, &got, 4) != QATTN_OK) {
        snprintf(res->error, sizeof res->error, "read_stream: %s", qattn_last_error(ctx));
        goto done;
    }
    res->verified = got == want;
    res->worst_ratio = res->verified ? 0.0 : 1.0;
    res->bytes = (double)l.bytes;
    rc = bench_time(ctx, launch, &l, cfg, res);
done:
    free(piece);
    qattn_buffer_free(ctx, l.src);
    qattn_buffer_free(ctx, l.sum);
    return rc;
}
