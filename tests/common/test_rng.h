/*
 * Seeded randomness for tests: a splitmix64 generator plus fill helpers.
 *
 * Every test draws its inputs from a qt_rng made by qt_rng_for(name). The
 * stream depends only on the base seed and the name, so a failure is
 * reproduced by rerunning with QATTN_TEST_SEED=<base seed> (decimal or 0x
 * hex). QT_FAIL(rng, ...) reports a failure with the seed and the name so
 * the message always says how to reproduce it.
 *
 * The fill helpers never produce all-zero data: floats are drawn away from
 * zero and codes exclude zero and NaN codes unless a caller asks otherwise.
 *
 * Header-only, C11, no dependencies beyond libc and qattn/convert.h.
 */
#ifndef QATTN_TEST_RNG_H
#define QATTN_TEST_RNG_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qattn/convert.h"

/* Used when QATTN_TEST_SEED is unset: runs are reproducible by default. */
#define QT_DEFAULT_SEED 0x9E3779B97F4A7C15ull

typedef struct qt_rng {
    uint64_t state;
    uint64_t base_seed; /* what QATTN_TEST_SEED must be set to to reproduce */
    char name[160];      /* the stream's name, printed on failure */
} qt_rng;

static inline uint64_t qt_splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* The base seed: QATTN_TEST_SEED when set (strtoull base 0), else the
 * default. */
static inline uint64_t qt_base_seed(void) {
    const char *e = getenv("QATTN_TEST_SEED");
    if (e && *e) {
        char *end = NULL;
        unsigned long long v = strtoull(e, &end, 0);
        if (end && *end == '\0') return (uint64_t)v;
        fprintf(stderr, "test_rng: ignoring malformed QATTN_TEST_SEED=%s\n", e);
    }
    return QT_DEFAULT_SEED;
}

/* A generator for the stream `name` (a test or case name): independent of
 * every other name, reproducible from the base seed. */
static inline qt_rng qt_rng_for(const char *name) {
    qt_rng r;
    uint64_t h = 1469598103934665603ull; /* FNV-1a of the name */
    for (const char *p = name; *p; ++p) h = (h ^ (uint8_t)*p) * 1099511628211ull;
    r.base_seed = qt_base_seed();
    r.state = r.base_seed ^ h;
    (void)qt_splitmix64(&r.state);
    snprintf(r.name, sizeof r.name, "%s", name);
    return r;
}

/* Re-keys r for case number `idx` inside its test, so each case draws fresh
 * inputs that do not depend on how many numbers earlier cases consumed. */
static inline void qt_rng_case(qt_rng *r, uint64_t idx) {
    uint64_t h = 1469598103934665603ull;
    for (const char *p = r->name; *p; ++p) h = (h ^ (uint8_t)*p) * 1099511628211ull;
    r->state = r->base_seed ^ h ^ (0xD1B54A32D192ED03ull * (idx + 1));
    (void)qt_splitmix64(&r->state);
}

static inline uint64_t qt_u64(qt_rng *r) { return qt_splitmix64(&r->state); }
static inline uint32_t qt_u32(qt_rng *r) { return (uint32_t)(qt_u64(r) >> 32); }

/* Uniform integer in [lo, hi] (inclusive); lo <= hi. */
static inline int64_t qt_int(qt_rng *r, int64_t lo, int64_t hi) {
    uint64_t span = (uint64_t)(hi - lo) + 1u;
    if (span == 0) return (int64_t)qt_u64(r); /* full 64-bit range */
    return lo + (int64_t)(qt_u64(r) % span);
}

/* Uniform double in [0, 1) with 53 random bits. */
static inline double qt_unit(qt_rng *r) { return (double)(qt_u64(r) >> 11) * 0x1.0p-53; }

/* Uniform float in [lo, hi). */
static inline float qt_uniform(qt_rng *r, float lo, float hi) {
    return (float)((double)lo + ((double)hi - (double)lo) * qt_unit(r));
}

/* A float with magnitude uniform in [lo_mag, hi_mag) and a random sign:
 * never zero when lo_mag > 0. */
static inline float qt_signed(qt_rng *r, float lo_mag, float hi_mag) {
    float m = qt_uniform(r, lo_mag, hi_mag);
    return (qt_u64(r) & 1u) ? -m : m;
}

/* f32 values of magnitude in [0.05, 1) * amp, random sign. */
static inline void qt_fill_f32(qt_rng *r, float *x, size_t n, float amp) {
    for (size_t i = 0; i < n; ++i) x[i] = amp * qt_signed(r, 0.05f, 1.0f);
}

/* Positive f32 values uniform in [lo, hi); lo > 0 keeps them non-zero. */
static inline void qt_fill_f32_pos(qt_rng *r, float *x, size_t n, float lo, float hi) {
    for (size_t i = 0; i < n; ++i) x[i] = qt_uniform(r, lo, hi);
}

/* bf16 codes of values with magnitude in [0.05, 1) * amp, random sign. */
static inline void qt_fill_bf16(qt_rng *r, uint16_t *x, size_t n, float amp) {
    for (size_t i = 0; i < n; ++i) x[i] = qattn_f32_to_bf16(amp * qt_signed(r, 0.05f, 1.0f));
}

/* Uniformly random fp8 codes of `fmt`, excluding zero codes (0x00, and 0x80
 * for fn) and NaN codes: every representable non-zero magnitude appears. */
static inline void qt_fill_fp8_codes(qt_rng *r, uint8_t *x, size_t n, qattn_dtype fmt) {
    for (size_t i = 0; i < n; ++i) {
        uint8_t c;
        do {
            c = (uint8_t)(qt_u64(r) & 0xFFu);
        } while ((c & 0x7Fu) == 0x00u || (fmt == QATTN_FP8_E4M3FN && (c & 0x7Fu) == 0x7Fu) ||
                 (fmt == QATTN_FP8_E5M2 && (c & 0x7Cu) == 0x7Cu)); /* e5m2: inf and NaN */
        x[i] = c;
    }
}

/* fp8 codes of values with magnitude in [0.05, 1) * amp (amp <= fp8 max),
 * encoded with the library's RNE encoder; zero codes are redrawn. */
static inline void qt_fill_fp8(qt_rng *r, uint8_t *x, size_t n, qattn_dtype fmt, float amp) {
    for (size_t i = 0; i < n; ++i) {
        uint8_t c;
        do {
            c = qattn_f32_to_fp8(amp * qt_signed(r, 0.05f, 1.0f), fmt);
        } while ((c & 0x7Fu) == 0x00u);
        x[i] = c;
    }
}

/* int8 values in [-127, 127] excluding 0. */
static inline void qt_fill_i8(qt_rng *r, int8_t *x, size_t n) {
    for (size_t i = 0; i < n; ++i) {
        int64_t v;
        do {
            v = qt_int(r, -127, 127);
        } while (v == 0);
        x[i] = (int8_t)v;
    }
}

/* int32 values uniform in [lo, hi]. */
static inline void qt_fill_i32(qt_rng *r, int32_t *x, size_t n, int32_t lo, int32_t hi) {
    for (size_t i = 0; i < n; ++i) x[i] = (int32_t)qt_int(r, lo, hi);
}

/* Fisher-Yates shuffle of an int32 array (e.g. a page table). */
static inline void qt_shuffle_i32(qt_rng *r, int32_t *x, size_t n) {
    for (size_t i = n; i > 1; --i) {
        size_t j = (size_t)qt_int(r, 0, (int64_t)i - 1);
        int32_t t = x[i - 1];
        x[i - 1] = x[j];
        x[j] = t;
    }
}

/* Writes "seed=<base> stream=<name>" plus a reproduce hint into buf. */
static inline const char *qt_rng_describe(const qt_rng *r, char *buf, size_t n) {
    snprintf(buf, n, "[stream '%s', rerun with QATTN_TEST_SEED=0x%016llx]", r->name,
             (unsigned long long)r->base_seed);
    return buf;
}

/* Fails the current test with a message and the seed. With cmocka included
 * first it uses fail_msg(); otherwise it prints and exits 1. */
#if defined(CMOCKA_H_)
#define QT_FAIL(rng, ...)                                                        \
    do {                                                                         \
        char qt_fail_seed_[256];                                                 \
        print_message("FAIL %s\n", qt_rng_describe((rng), qt_fail_seed_,        \
                                                   sizeof qt_fail_seed_));       \
        fail_msg(__VA_ARGS__);                                                   \
    } while (0)
#else
#define QT_FAIL(rng, ...)                                                        \
    do {                                                                         \
        char qt_fail_seed_[256];                                                 \
        fprintf(stderr, "FAIL %s: ",                                             \
                qt_rng_describe((rng), qt_fail_seed_, sizeof qt_fail_seed_));    \
        fprintf(stderr, __VA_ARGS__);                                            \
        fputc('\n', stderr);                                                     \
        exit(1);                                                                 \
    } while (0)
#endif

/* QT_CHECK(rng, cond, fmt, ...): QT_FAIL unless cond holds. */
#define QT_CHECK(rng, cond, ...)                                                 \
    do {                                                                         \
        if (!(cond)) QT_FAIL(rng, __VA_ARGS__);                                  \
    } while (0)

/* Seed-printing forms of assert_true / assert_int_equal for tests whose
 * data comes from `rng`: the message names the failed expression. */
#define QT_ASSERT(rng, cond) QT_CHECK(rng, cond, "%s", #cond)
#define QT_ASSERT_EQ(rng, a, b)                                                  \
    do {                                                                         \
        long long qt_a_ = (long long)(a), qt_b_ = (long long)(b);                \
        QT_CHECK(rng, qt_a_ == qt_b_, "%s == %s: 0x%llx != 0x%llx", #a, #b,      \
                 (unsigned long long)qt_a_, (unsigned long long)qt_b_);          \
    } while (0)

#endif /* QATTN_TEST_RNG_H */
