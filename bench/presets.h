/* Named shapes qattn-bench runs: the seeds' workloads plus small ones that
 * finish quickly on the cpu reference. */
#ifndef QATTN_BENCH_PRESETS_H
#define QATTN_BENCH_PRESETS_H

#include "qattn/qattn.h"

typedef enum bench_op { BENCH_DECODE, BENCH_KV_STORE, BENCH_MQA_LOGITS } bench_op;

typedef struct bench_preset {
    const char *name;
    bench_op op;
    int small;           /* 1: part of the quick set (cpu, demo, CI) */
    /* decode / kv store */
    int batch, rows, q_heads, kv_heads, head_dim, keys, page_size;
    qattn_dtype kv_dtype;
    /* mqa logits: S x S_kv, H heads, D; windows are causal for a chunk of S
     * rows at the end of an S_kv-token context (prefill: S == S_kv) */
    int S, S_kv, heads, mqa_dim;
} bench_preset;

extern const bench_preset BENCH_PRESETS[];
extern const int BENCH_PRESET_COUNT;
const char *bench_op_name(bench_op op);

#endif
