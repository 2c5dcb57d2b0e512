/* Named shapes qattn-bench runs: the seeds' workloads plus small ones that
 * finish quickly on the cpu reference, and decode shapes given on the
 * command line (--shape). */
#ifndef QATTN_BENCH_PRESETS_H
#define QATTN_BENCH_PRESETS_H

#include <stddef.h>

#include "qattn/qattn.h"

typedef enum bench_op { BENCH_DECODE, BENCH_KV_STORE, BENCH_MQA_LOGITS, BENCH_PAGED_MQA } bench_op;

typedef struct bench_preset {
    const char *name;
    bench_op op;
    int small;           /* 1: part of the quick set (cpu, demo, CI); 0: of --seeds;
                            2: run by name, or by --seeds with --op */
    /* decode / kv store; paged MQA logits: B = batch, N = rows, context =
     * keys (every request at full length), page_size, H = heads, D = mqa_dim */
    int batch, rows, q_heads, kv_heads, head_dim, keys, page_size;
    qattn_dtype kv_dtype;
    /* mqa logits: S x S_kv, H heads, D; windows are causal for a chunk of S
     * rows at the end of an S_kv-token context (prefill: S == S_kv) */
    int S, S_kv, heads, mqa_dim;
    /* decode options (0: off / planner's choice) */
    int splits;          /* num_splits pinned in the plan options */
    int window;          /* window_left >= 1; 0: no window */
    float softcap;       /* logit_softcap */
    qattn_dtype q_dtype; /* decode's q and o: QATTN_F16, else (0) bf16 */
} bench_preset;

extern const bench_preset BENCH_PRESETS[];
extern const int BENCH_PRESET_COUNT;
const char *bench_op_name(bench_op op);

/* The bytes a decode must move: the K and V codes and their per-token-head
 * scales of every key some query row can see, read once, plus q read and o
 * written once (bf16). Page tables and split workspace are not counted.
 * bench/perf_table.py recomputes the same number from the JSON's shape and
 * refuses a file where the two differ. */
double bench_decode_bytes(const bench_preset *p);

/* One line describing the shape ("B16 R1 Hq32 Hkv8 D128 fp8_e4m3fn keys
 * 32768 page 16"). */
void bench_preset_describe(const bench_preset *p, char *out, size_t n);

/* Parses a --shape value "B=16,R=1,Hq=32,Hkv=8,D=128,dtype=fp8_e4m3fn,
 * keys=32768,page=16[,splits=N][,window=W][,softcap=C][,q=f16]" into a decode
 * preset (fields not given keep the defaults of decode_b1_gqa4_8k). Returns
 * 0, or -1 with the reason in err. */
int bench_parse_shape(const char *spec, bench_preset *p, char *err, size_t n);

#endif
