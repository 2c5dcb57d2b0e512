/* The sizes every struct that starts with `size_t size` (qattn.h, "option
 * structs") must refuse, given its sizeof: 0, one that covers only the size
 * member, one byte short, and larger ones (a newer header's); with words of
 * the message each gets. Header-only. */
#ifndef QATTN_TEST_SIZES_H
#define QATTN_TEST_SIZES_H

#include <stddef.h>
#include <stdint.h>

typedef struct qt_refused_size {
    size_t size;
    const char *says; /* in the message */
} qt_refused_size;

#define QT_REFUSED_SIZES 5

/* Fills out[QT_REFUSED_SIZES]; returns how many. */
static inline int qt_refused_sizes(size_t full, qt_refused_size *out) {
    int n = 0;
    out[n++] = (qt_refused_size){0, "size is 0: set it to sizeof("};
    out[n++] = (qt_refused_size){sizeof(size_t), "is below the first"};
    out[n++] = (qt_refused_size){full - 1, "is below the first"};
    out[n++] = (qt_refused_size){full + 8, "is above this library's sizeof("};
    out[n++] = (qt_refused_size){SIZE_MAX, "is above this library's sizeof("};
    return n;
}

#endif
