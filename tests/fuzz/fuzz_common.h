/*
 * Shared pieces of the libFuzzer harnesses (tests/fuzz/): reading the input
 * as a stream of choices, and building operation arguments around a valid
 * baseline. Every value is "the baseline's unless the next byte picks a
 * mutation", so an all-zero input is the valid baseline call and the fuzzer
 * explores outward from it: edge values (0, -1, int32 and int64 limits,
 * powers of two) and arbitrary words.
 *
 * A harness reports a broken promise with fz_fail(), which aborts: libFuzzer
 * then keeps the input as a crash. The library itself must never abort.
 */
#ifndef QATTN_FUZZ_COMMON_H
#define QATTN_FUZZ_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qattn/qattn.h"

typedef struct fz {
    const uint8_t *p;
    size_t n;
} fz;

static inline uint8_t fz_u8(fz *f) {
    if (!f->n) return 0;
    f->n--;
    return *f->p++;
}

static inline uint64_t fz_bits(fz *f, int bytes) {
    uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) v |= (uint64_t)fz_u8(f) << (8 * i);
    return v;
}

/* One of n choices (0 when the input is exhausted). */
static inline int fz_pick(fz *f, int n) { return n > 0 ? fz_u8(f) % n : 0; }

/* base, or a mutation of it when the next byte's top bit is set. */
static inline int64_t fz_i64(fz *f, int64_t base) {
    const uint8_t sel = fz_u8(f);
    if (sel < 128) return base;
    switch (sel & 15) {
    case 0: return 0;
    case 1: return 1;
    case 2: return -1;
    case 3: return base == INT64_MAX ? base : base + 1;
    case 4: return base == INT64_MIN ? base : base - 1;
    case 5: return INT32_MAX;
    case 6: return (int64_t)INT32_MAX + 1;
    case 7: return (int64_t)1 << 32;
    case 8: return INT64_MAX;
    case 9: return INT64_MIN;
    case 10: return base > INT64_MAX / 2 || base < INT64_MIN / 2 ? base : base * 2;
    case 11: return (int64_t)(int32_t)fz_bits(f, 4);
    case 12: return (int64_t)fz_bits(f, 8);
    case 13: return base / 2;
    case 14: return (int64_t)1 << (fz_u8(f) % 63);
    default: return -(int64_t)fz_u8(f);
    }
}

/* x + 1 without overflow (shapes derived from fuzzed ones). */
static inline int64_t fz_inc(int64_t x) { return x == INT64_MAX ? x : x + 1; }

static inline int32_t fz_i32(fz *f, int32_t base) { return (int32_t)fz_i64(f, base); }
static inline uint32_t fz_u32(fz *f, uint32_t base) { return (uint32_t)fz_i64(f, base); }
static inline uint64_t fz_u64v(fz *f, uint64_t base) { return (uint64_t)fz_i64(f, (int64_t)base); }

static inline float fz_f32(fz *f, float base) {
    const uint8_t sel = fz_u8(f);
    if (sel < 160) return base;
    switch (sel & 7) {
    case 0: return 0.0f;
    case 1: return -base;
    case 2: return 1e30f;
    case 3: {
        uint32_t b = (uint32_t)fz_bits(f, 4);
        float x;
        memcpy(&x, &b, 4);
        return x; /* NaN and inf included */
    }
    default: return base * (float)(1 + fz_u8(f));
    }
}

/* Mutates every field of a descriptor the validators look at. */
static inline void fz_tensor(fz *f, qattn_tensor *t) {
    t->offset = fz_u64v(f, t->offset);
    t->dtype = (qattn_dtype)fz_i32(f, (int32_t)t->dtype);
    t->rank = fz_i32(f, t->rank);
    for (int i = 0; i < QATTN_MAX_RANK; ++i) {
        t->shape[i] = fz_i64(f, t->shape[i]);
        t->strides[i] = fz_i64(f, t->strides[i]);
    }
}

/* Aborts with a message: the harness found a broken promise. */
#define fz_fail(...)                                                                              \
    do {                                                                                          \
        fprintf(stderr, "fuzz: " __VA_ARGS__);                                                    \
        fputc('\n', stderr);                                                                      \
        abort();                                                                                  \
    } while (0)

/* A status must be a known one and a failure must say why. */
static inline void fz_check_status(qattn_status s, const char *msg, const char *what) {
    if ((int)s < 0 || s >= QATTN_STATUS_COUNT) fz_fail("%s: status %d outside the list", what, (int)s);
    if (s != QATTN_OK && msg && msg[0] == '\0') fz_fail("%s: %s with an empty message", what, qattn_status_name(s));
}

/* Small valid shapes for the baseline calls. */
typedef struct fz_decode_shape {
    int64_t B, R, Hq, Hkv, D, slots, pages, P;
    qattn_dtype kv;
} fz_decode_shape;

static inline fz_decode_shape fz_decode_shape_of(fz *f) {
    static const qattn_dtype KV[4] = {QATTN_BF16, QATTN_FP8_E4M3FN, QATTN_FP8_E4M3FNUZ, QATTN_I8};
    static const int64_t DIMS[3] = {64, 128, 256};
    fz_decode_shape s;
    s.B = 1 + fz_pick(f, 3);
    s.R = 1 + fz_pick(f, 3);
    s.Hkv = 1 + fz_pick(f, 2);
    s.Hq = s.Hkv * (1 + fz_pick(f, 4));
    s.D = DIMS[fz_pick(f, 2)];
    s.kv = KV[fz_pick(f, 4)];
    s.P = 1 + fz_pick(f, 8);
    s.pages = 2 + fz_pick(f, 6);
    s.slots = s.pages * s.P;
    return s;
}

#endif
