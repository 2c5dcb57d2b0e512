/* Shared pieces of qattn-bench: results, timing, host->device helpers. */
#ifndef QATTN_BENCH_H
#define QATTN_BENCH_H

#include <stddef.h>
#include <stdint.h>

#include "presets.h"
#include "qattn/qattn.h"

typedef struct bench_config {
    int warmup, iters;
    double warmup_min_ms; /* warm-up lasts at least this long (wall clock) */
    unsigned long long seed;
    /* Decode page tables: 0 = one shuffled pool over every request's pages
     * (what an engine's free list tends to), 1 = each request's pages in
     * order (the layout of FlashInfer's decode benchmark). */
    int pages_in_order;
} bench_config;

typedef struct bench_result {
    char variant[32];
    int splits;
    double *samples_us;    /* every timed sample, in run order (kept for A/B) */
    int n_samples;
    double median_us, min_us, max_us;
    double bytes;          /* bytes moved per call (see docs/perf.md) */
    double flops;          /* useful flops per call (0: not a compute op) */
    int verified;          /* 1: sampled outputs matched the cpu reference */
    double worst_ratio;    /* worst |err| / tolerance among checked values */
    double ceiling_tflops; /* >0: the plan's matrix ceiling (bench_mqa.c) */
    /* decode: qattn_decode_read over the same call (its own access pattern),
     * median us with the same timer and rotation; 0 when not measured */
    double pattern_us;
    int pattern_verified;  /* 1: its word sum matched the host's */
    char pattern_note[160]; /* why it was not measured or did not match */
    double floor_bytes;    /* >0: the bytes whose single read is the op's memory floor */
    char timer[16];        /* "device" or "host" */
    char error[256];       /* non-empty: the preset failed to run */
} bench_result;

/* A launch the timing loop repeats; returns a status. */
typedef qattn_status (*bench_launch_fn)(void *arg);

/* Runs warmup + iters launches, reading the backend's timer after each. */
int bench_time(qattn_context *ctx, bench_launch_fn fn, void *arg, const bench_config *cfg,
               bench_result *res);

/* Allocates a buffer on ctx holding `bytes` from host (poison 0xFF if NULL). */
qattn_buffer *bench_upload(qattn_context *ctx, const void *host, size_t bytes, bench_result *res);

int bench_decode(qattn_context *ctx, const bench_preset *p, const bench_config *cfg, bench_result *res);
int bench_kv_store(qattn_context *ctx, const bench_preset *p, const bench_config *cfg, bench_result *res);
/* Read bandwidth through the backend: qattn_read_stream over `bytes` (or
 * the largest power-of-two fraction down to 1/16 that allocates); res->bytes
 * holds the size used, res->verified whether the kernel's sum was right. */
int bench_read_bandwidth(qattn_context *ctx, uint64_t bytes, const bench_config *cfg, bench_result *res);
int bench_mqa_logits(qattn_context *ctx, const bench_preset *p, const bench_config *cfg,
                     bench_result *res);
/* Paged MQA logits (bench_paged_mqa.c): res->floor_bytes = the K codes and
 * scales every request reads once; res->ceiling_tflops = the matrix ceiling
 * qattn_mqa_matrix_ceiling measures for the prefill op's coopmat plan of H
 * and D (the device's f16 matrix rate), 0 where there is none. */
int bench_paged_mqa_logits(qattn_context *ctx, const bench_preset *p, const bench_config *cfg,
                           bench_result *res);

#endif
