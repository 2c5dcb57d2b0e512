/* Parts of qattn_big_cache (tests/big_cache/) in files of their own. */
#ifndef QATTN_TEST_BIG_CACHE_H
#define QATTN_TEST_BIG_CACHE_H

#include "qattn/qattn.h"

#define BIG_CACHE_SKIP 77

/* combined_bf16.c: decode over an 8 GiB bf16 cache in the combined layout
 * [N_pages, 2, page, 4, 256] on dev against the cpu context ref. Returns 0
 * pass, 1 fail, BIG_CACHE_SKIP when dev cannot allocate the tensor. full:
 * the 128 requests of 16384 keys (requests > 0: the first that
 * many); else 3 short requests on sparse pages. */
int qt_big_combined_bf16(qattn_context *ref, qattn_context *dev, int page, int full, int requests);

#endif
