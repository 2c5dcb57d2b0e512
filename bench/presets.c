#include "presets.h"

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
    /* seeds: MQA logits D128 */
    {"mqa_1024x131072_h64", BENCH_MQA_LOGITS, 0, 0, 0, 0, 0, 0, 0, 0, FN, 1024, 131072, 64, 128},
    {"mqa_1024x131072_h32", BENCH_MQA_LOGITS, 0, 0, 0, 0, 0, 0, 0, 0, FN, 1024, 131072, 32, 128},
    {"mqa_2048x65536_h64", BENCH_MQA_LOGITS, 0, 0, 0, 0, 0, 0, 0, 0, FN, 2048, 65536, 64, 128},
    {"mqa_4096x32768_h64", BENCH_MQA_LOGITS, 0, 0, 0, 0, 0, 0, 0, 0, FN, 4096, 32768, 64, 128},
    {"mqa_prefill_4096_h64", BENCH_MQA_LOGITS, 0, 0, 0, 0, 0, 0, 0, 0, FN, 4096, 4096, 64, 128},
};
const int BENCH_PRESET_COUNT = (int)(sizeof BENCH_PRESETS / sizeof BENCH_PRESETS[0]);

const char *bench_op_name(bench_op op) {
    switch (op) {
    case BENCH_DECODE: return "decode";
    case BENCH_KV_STORE: return "kv_store";
    case BENCH_MQA_LOGITS: return "mqa_logits";
    }
    return "?";
}
