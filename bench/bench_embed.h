/* Vulkan embedding modes of qattn-bench (bench/bench_embed.c). */
#ifndef QATTN_BENCH_EMBED_H
#define QATTN_BENCH_EMBED_H

#include "bench.h"

/* --embed-record N: N decodes of preset p recorded into one command buffer
 * of the bench and submitted once, against the same N in the default mode. */
int bench_embed_record(qattn_context *ctx, const bench_preset *p, const bench_config *cfg, int n_ops,
                       bench_result *res);
/* --pipeline-cache FILE: load before the presets (a missing file loads
 * nothing), then print the pipeline counters and save. */
void bench_embed_cache_load(qattn_context *ctx, const char *path);
int bench_embed_cache_save(qattn_context *ctx, const char *path);

#endif
