#include "presets.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FN QATTN_FP8_E4M3FN
/* name, op, small, B, R, Hq, Hkv, D, keys, P, kv dtype, S, S_kv, H, D */
const bench_preset BENCH_PRESETS[] = {
    {"decode_small", BENCH_DECODE, 1, 2, 1, 32, 8, 128, 1024, 16, FN, 0, 0, 0, 0},
    {"decode_small_r4_int8", BENCH_DECODE, 1, 2, 4, 16, 2, 64, 777, 1, QATTN_I8, 0, 0, 0, 0},
    {"kv_store_small", BENCH_KV_STORE, 1, 64, 1, 0, 8, 128, 4096, 1, FN, 0, 0, 0, 0},
    {"mqa_small", BENCH_MQA_LOGITS, 1, 0, 0, 0, 0, 0, 0, 0, FN, 64, 1024, 16, 128},
    /* seeds: decode D128, 32 query heads, FP8 KV */
    {"decode_b1_gqa4_8k", BENCH_DECODE, 0, 1, 1, 32, 8, 128, 8192, 16, FN, 0, 0, 0, 0},
    {"decode_b1_gqa8_8k", BENCH_DECODE, 0, 1, 1, 32, 4, 128, 8192, 16, FN, 0, 0, 0, 0},
    {"decode_b1_gqa4_32k", BENCH_DECODE, 0, 1, 1, 32, 8, 128, 32768, 16, FN, 0, 0, 0, 0},
    {"decode_b1_gqa8_32k", BENCH_DECODE, 0, 1, 1, 32, 4, 128, 32768, 16, FN, 0, 0, 0, 0},
    {"decode_b16_gqa4_32k", BENCH_DECODE, 0, 16, 1, 32, 8, 128, 32768, 16, FN, 0, 0, 0, 0},
    {"decode_b16_gqa8_32k", BENCH_DECODE, 0, 16, 1, 32, 4, 128, 32768, 16, FN, 0, 0, 0, 0},
    /* issue 8: the other cache formats, query rows and head dims at B16 GQA4 32K */
    {"decode_b16_gqa4_32k_int8", BENCH_DECODE, 0, 16, 1, 32, 8, 128, 32768, 16, QATTN_I8, 0, 0, 0, 0},
    {"decode_b16_gqa4_32k_bf16", BENCH_DECODE, 0, 16, 1, 32, 8, 128, 32768, 16, QATTN_BF16, 0, 0, 0, 0},
    {"decode_b16_gqa4_32k_r4", BENCH_DECODE, 0, 16, 4, 32, 8, 128, 32768, 16, FN, 0, 0, 0, 0},
    {"decode_b16_gqa4_32k_d64", BENCH_DECODE, 0, 16, 1, 32, 8, 64, 32768, 16, FN, 0, 0, 0, 0},
    {"decode_b16_gqa4_32k_d256", BENCH_DECODE, 0, 16, 1, 32, 8, 256, 32768, 16, FN, 0, 0, 0, 0},
    /* issue 27: a head dim between the compiled-in ones, and f16 q and o */
    {"decode_b16_gqa4_32k_d96", BENCH_DECODE, 0, 16, 1, 32, 8, 96, 32768, 16, FN, 0, 0, 0, 0},
    {"decode_b16_gqa4_32k_qf16", BENCH_DECODE, 0, 16, 1, 32, 8, 128, 32768, 16, FN, 0, 0, 0, 0, 0, 0, 0.0f,
     QATTN_F16},
    /* seeds: MQA logits D128 */
    {"mqa_1024x131072_h64", BENCH_MQA_LOGITS, 0, 0, 0, 0, 0, 0, 0, 0, FN, 1024, 131072, 64, 128},
    {"mqa_1024x131072_h32", BENCH_MQA_LOGITS, 0, 0, 0, 0, 0, 0, 0, 0, FN, 1024, 131072, 32, 128},
    {"mqa_2048x65536_h64", BENCH_MQA_LOGITS, 0, 0, 0, 0, 0, 0, 0, 0, FN, 2048, 65536, 64, 128},
    {"mqa_4096x32768_h64", BENCH_MQA_LOGITS, 0, 0, 0, 0, 0, 0, 0, 0, FN, 4096, 32768, 64, 128},
    {"mqa_prefill_4096_h64", BENCH_MQA_LOGITS, 0, 0, 0, 0, 0, 0, 0, 0, FN, 4096, 4096, 64, 128},
    /* issue 20: paged MQA logits at decode time, H64 D128, pages of 64 (the
     * fused page layout); every B x N at 32K, B1/B16 x N1/N8 at 128K; run
     * by name or with --seeds --op paged_mqa_logits, so the seeds' run keeps
     * its time */
    {"paged_mqa_small", BENCH_PAGED_MQA, 1, 2, 2, 0, 0, 0, 1000, 16, FN, 0, 0, 16, 128},
#define PAGED(name, b, n, ctx) {name, BENCH_PAGED_MQA, 2, b, n, 0, 0, 0, ctx, 64, FN, 0, 0, 64, 128}
    PAGED("paged_mqa_b1_n1_32k", 1, 1, 32768),    PAGED("paged_mqa_b1_n2_32k", 1, 2, 32768),
    PAGED("paged_mqa_b1_n4_32k", 1, 4, 32768),    PAGED("paged_mqa_b1_n8_32k", 1, 8, 32768),
    PAGED("paged_mqa_b4_n1_32k", 4, 1, 32768),    PAGED("paged_mqa_b4_n2_32k", 4, 2, 32768),
    PAGED("paged_mqa_b4_n4_32k", 4, 4, 32768),    PAGED("paged_mqa_b4_n8_32k", 4, 8, 32768),
    PAGED("paged_mqa_b16_n1_32k", 16, 1, 32768),  PAGED("paged_mqa_b16_n2_32k", 16, 2, 32768),
    PAGED("paged_mqa_b16_n4_32k", 16, 4, 32768),  PAGED("paged_mqa_b16_n8_32k", 16, 8, 32768),
    PAGED("paged_mqa_b64_n1_32k", 64, 1, 32768),  PAGED("paged_mqa_b64_n2_32k", 64, 2, 32768),
    PAGED("paged_mqa_b64_n4_32k", 64, 4, 32768),  PAGED("paged_mqa_b64_n8_32k", 64, 8, 32768),
    PAGED("paged_mqa_b1_n1_128k", 1, 1, 131072),  PAGED("paged_mqa_b1_n8_128k", 1, 8, 131072),
    PAGED("paged_mqa_b16_n1_128k", 16, 1, 131072), PAGED("paged_mqa_b16_n8_128k", 16, 8, 131072),
#undef PAGED
};
const int BENCH_PRESET_COUNT = (int)(sizeof BENCH_PRESETS / sizeof BENCH_PRESETS[0]);

const char *bench_op_name(bench_op op) {
    switch (op) {
    case BENCH_DECODE: return "decode";
    case BENCH_KV_STORE: return "kv_store";
    case BENCH_MQA_LOGITS: return "mqa_logits";
    case BENCH_PAGED_MQA: return "paged_mqa_logits";
    }
    return "?";
}

double bench_decode_bytes(const bench_preset *p) {
    const double es = (double)qattn_dtype_size(p->kv_dtype);
    const double scales = p->kv_dtype == QATTN_BF16 ? 0.0 : 8.0; /* f32 k and v scale */
    /* Row r of R sits at position L - R + r; with a window it sees keys back
     * to position - window, so the rows together see the last window + R. */
    double visible = p->keys;
    if (p->window > 0 && p->window + p->rows < p->keys) visible = p->window + p->rows;
    const double qo = 2.0 * 2.0 * p->batch * p->rows * p->q_heads * p->head_dim;
    return (double)p->batch * visible * p->kv_heads * (2.0 * p->head_dim * es + scales) + qo;
}

void bench_preset_describe(const bench_preset *p, char *out, size_t n) {
    switch (p->op) {
    case BENCH_DECODE: {
        int k = snprintf(out, n, "B%d R%d Hq%d Hkv%d D%d %s keys %d page %d", p->batch, p->rows, p->q_heads,
                         p->kv_heads, p->head_dim, qattn_dtype_name(p->kv_dtype), p->keys, p->page_size);
        if (k > 0 && (size_t)k < n && p->splits) k += snprintf(out + k, n - (size_t)k, " splits %d", p->splits);
        if (k > 0 && (size_t)k < n && p->window) k += snprintf(out + k, n - (size_t)k, " window %d", p->window);
        if (k > 0 && (size_t)k < n && p->softcap != 0.0f)
            k += snprintf(out + k, n - (size_t)k, " softcap %g", (double)p->softcap);
        if (k > 0 && (size_t)k < n && p->q_dtype == QATTN_F16) snprintf(out + k, n - (size_t)k, " q f16");
        break;
    }
    case BENCH_KV_STORE:
        snprintf(out, n, "T%d Hkv%d D%d %s into %d slots", p->batch, p->kv_heads, p->head_dim,
                 qattn_dtype_name(p->kv_dtype), p->keys);
        break;
    case BENCH_MQA_LOGITS:
        snprintf(out, n, "S%d x S_kv%d H%d D%d %s", p->S, p->S_kv, p->heads, p->mqa_dim,
                 qattn_dtype_name(p->kv_dtype));
        break;
    case BENCH_PAGED_MQA:
        snprintf(out, n, "B%d N%d H%d D%d %s context %d page %d", p->batch, p->rows, p->heads, p->mqa_dim,
                 qattn_dtype_name(p->kv_dtype), p->keys, p->page_size);
        break;
    }
}

static int parse_int(const char *v, int lo, int *out) {
    char *end = NULL;
    long x = strtol(v, &end, 10);
    if (!end || end == v || *end != '\0' || x < lo || x > 1 << 30) return -1;
    *out = (int)x;
    return 0;
}

static qattn_dtype parse_dtype(const char *v) {
    static const struct { const char *name; qattn_dtype t; } T[] = {
        {"fp8", QATTN_FP8_E4M3FN},   {"fp8_e4m3fn", QATTN_FP8_E4M3FN}, {"fn", QATTN_FP8_E4M3FN},
        {"fp8_e4m3fnuz", QATTN_FP8_E4M3FNUZ}, {"fnuz", QATTN_FP8_E4M3FNUZ},
        {"fp8_e5m2", QATTN_FP8_E5M2},     {"e5m2", QATTN_FP8_E5M2},
        {"int8", QATTN_I8},          {"i8", QATTN_I8},                 {"bf16", QATTN_BF16},
    };
    for (size_t i = 0; i < sizeof T / sizeof T[0]; ++i)
        if (!strcmp(v, T[i].name)) return T[i].t;
    return QATTN_DTYPE_INVALID;
}

int bench_parse_shape(const char *spec, bench_preset *p, char *err, size_t n) {
    const bench_preset def = {"shape", BENCH_DECODE, 0, 1, 1, 32, 8, 128, 8192, 16, FN, 0, 0, 0, 0};
    *p = def;
    char buf[512];
    if (snprintf(buf, sizeof buf, "%s", spec) >= (int)sizeof buf) {
        snprintf(err, n, "--shape: longer than %zu characters", sizeof buf - 1);
        return -1;
    }
    for (char *kv = buf, *next; kv; kv = next) {
        next = strchr(kv, ',');
        if (next) *next++ = '\0';
        char *eq = strchr(kv, '=');
        if (!eq) {
            snprintf(err, n, "--shape: \"%s\" is not key=value", kv);
            return -1;
        }
        *eq = '\0';
        const char *k = kv, *v = eq + 1;
        int bad = 0;
        if (!strcmp(k, "B")) bad = parse_int(v, 1, &p->batch);
        else if (!strcmp(k, "R")) bad = parse_int(v, 1, &p->rows);
        else if (!strcmp(k, "Hq")) bad = parse_int(v, 1, &p->q_heads);
        else if (!strcmp(k, "Hkv")) bad = parse_int(v, 1, &p->kv_heads);
        else if (!strcmp(k, "D")) bad = parse_int(v, 1, &p->head_dim);
        else if (!strcmp(k, "keys")) bad = parse_int(v, 1, &p->keys);
        else if (!strcmp(k, "page")) bad = parse_int(v, 1, &p->page_size);
        else if (!strcmp(k, "splits")) bad = parse_int(v, 1, &p->splits);
        else if (!strcmp(k, "window")) bad = parse_int(v, 1, &p->window);
        else if (!strcmp(k, "softcap")) {
            char *end = NULL;
            p->softcap = strtof(v, &end);
            bad = !end || end == v || *end != '\0' || !(p->softcap > 0.0f);
        } else if (!strcmp(k, "dtype")) {
            p->kv_dtype = parse_dtype(v);
            bad = p->kv_dtype == QATTN_DTYPE_INVALID;
        } else if (!strcmp(k, "q")) {
            p->q_dtype = !strcmp(v, "f16") ? QATTN_F16 : !strcmp(v, "bf16") ? QATTN_BF16 : QATTN_DTYPE_INVALID;
            bad = p->q_dtype == QATTN_DTYPE_INVALID;
        } else {
            snprintf(err, n, "--shape: unknown key \"%s\" (B R Hq Hkv D dtype keys page splits window softcap q)",
                     k);
            return -1;
        }
        if (bad) {
            snprintf(err, n, "--shape: bad value \"%s\" for %s (integers >= 1; softcap > 0; dtype "
                             "fp8_e4m3fn, fp8_e4m3fnuz, fp8_e5m2, int8 or bf16; q bf16 or f16)", v, k);
            return -1;
        }
    }
    return 0;
}
