/* CHECK(cond, fmt, ...) for the plain-C Vulkan tests: on failure prints
 * file:line, the condition and the message, and counts it in qt_failures
 * (atomic: worker threads check too). Header-only; one counter per test
 * program. */
#ifndef QATTN_TEST_CHECK_H
#define QATTN_TEST_CHECK_H

#include <stdatomic.h>
#include <stdio.h>

static atomic_int qt_failures;

#define CHECK(cond, ...)                                                    \
    do {                                                                    \
        if (!(cond)) {                                                      \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                   \
            fprintf(stderr, "\n");                                          \
            atomic_fetch_add(&qt_failures, 1);                              \
        }                                                                   \
    } while (0)

#endif
