/* Reading a size-versioned options struct (the rule is in qattn.h, "option
 * structs"). Header-only and free of the rest of the core, so a test can
 * drive it with layouts of versions that do not exist yet. Not installed. */
#ifndef QATTN_OPTIONS_H
#define QATTN_OPTIONS_H

#include <stddef.h>
#include <string.h>

/* One released layout of a struct: `size` is its sizeof (what a caller
 * built against that version sets), `bytes` where its last field ends. The
 * bytes in between are that version's tail padding: a later version may
 * put a field there, so they are never read from a caller of the older
 * one. */
typedef struct qattn__options_layout {
    size_t size;
    size_t bytes;
} qattn__options_layout;

typedef enum qattn__options_size {
    QATTN__OPTIONS_OK,
    QATTN__OPTIONS_ZERO,    /* size 0: never set */
    QATTN__OPTIONS_SMALL,   /* below the first version's */
    QATTN__OPTIONS_LARGE,   /* above this build's sizeof */
    QATTN__OPTIONS_BETWEEN  /* within the range but no version's sizeof */
} qattn__options_size;

/* Copies the options at `src` (a struct whose first member is its size_t
 * size; NULL = all defaults) into `dst`, a struct of the newest layout
 * (layouts[n - 1], ascending sizes): dst gets every field of the caller's
 * version, zero for the fields of later versions, and its own size. Reads
 * no byte of src past the caller's last field. On any result but OK, dst
 * holds the defaults (zeros and its size) and *got the size found. */
static inline qattn__options_size qattn__options_copy(void *dst, const void *src,
                                                      const qattn__options_layout *layouts,
                                                      int n, size_t *got) {
    const size_t full = layouts[n - 1].size;
    memset(dst, 0, full);
    memcpy(dst, &full, sizeof full);
    *got = full;
    if (!src) return QATTN__OPTIONS_OK;
    size_t size;
    memcpy(&size, src, sizeof size);
    *got = size;
    if (size == 0) return QATTN__OPTIONS_ZERO;
    if (size < layouts[0].size) return QATTN__OPTIONS_SMALL;
    if (size > full) return QATTN__OPTIONS_LARGE;
    for (int i = 0; i < n; ++i) {
        if (layouts[i].size != size) continue;
        memcpy((char *)dst + sizeof size, (const char *)src + sizeof size,
               layouts[i].bytes - sizeof size);
        return QATTN__OPTIONS_OK;
    }
    return QATTN__OPTIONS_BETWEEN;
}

#endif /* QATTN_OPTIONS_H */
