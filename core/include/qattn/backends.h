/*
 * The backends a program links, by name: the one place that knows which
 * backend libraries exist, so programs pick a backend at run time without
 * #ifdef ladders of their own.
 *
 * Linking qattn::vulkan or qattn::hip (CMake, installed or in-tree) defines
 * QATTN_LINKS_VULKAN / QATTN_LINKS_HIP for the program (the targets'
 * interface compile definitions); pkg-config's qattn-vulkan / qattn-hip put
 * the same define in their Cflags. This header then names exactly the
 * backends the program links, and references no symbol of one it does not.
 *
 *   const qattn_backend_iface *b = qattn_backend_by_name("vulkan");
 *   for (int i = 0; (b = qattn_backend_at(i, &name)); ++i) ... // hip, vulkan, cpu
 */
#ifndef QATTN_BACKENDS_H
#define QATTN_BACKENDS_H

#include <string.h>

#include "qattn/qattn.h"
#ifdef QATTN_LINKS_VULKAN
#include "qattn/vulkan.h"
#endif
#ifdef QATTN_LINKS_HIP
#include "qattn/hip.h"
#endif

typedef struct qattn_linked_backend {
    const char *name;
    const qattn_backend_iface *(*get)(void);
} qattn_linked_backend;

/** The i-th linked backend in order of preference for "auto" (hip, vulkan,
 *  then cpu, which is always there); its name in *name when name is not
 *  NULL. NULL past the last. */
static inline const qattn_backend_iface *qattn_backend_at(int i, const char **name) {
    static const qattn_linked_backend linked[] = {
#ifdef QATTN_LINKS_HIP
        {"hip", qattn_backend_hip},
#endif
#ifdef QATTN_LINKS_VULKAN
        {"vulkan", qattn_backend_vulkan},
#endif
        {"cpu", qattn_backend_cpu},
    };
    if (i < 0 || i >= (int)(sizeof linked / sizeof linked[0])) return NULL;
    if (name) *name = linked[i].name;
    return linked[i].get();
}

/** The linked backend named `name` ("cpu", "vulkan", "hip"); NULL when this
 *  program does not link it. */
static inline const qattn_backend_iface *qattn_backend_by_name(const char *name) {
    const qattn_backend_iface *b;
    const char *n = NULL;
    for (int i = 0; name && (b = qattn_backend_at(i, &n)); ++i)
        if (strcmp(n, name) == 0) return b;
    return NULL;
}

#endif /* QATTN_BACKENDS_H */
