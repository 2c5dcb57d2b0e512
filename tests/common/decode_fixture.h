/* A small valid decode on the cpu backend for API tests (cmocka setup and
 * teardown): B=2 R=1 Hq=4 Hkv=2 D=64 bf16, 32 slots in pages of 4, page
 * table {7,1,2,3 | 4,5,6,0}, kv_lens {13, 16}; q, k, v seeded random from
 * the stream `name`; o poisoned; a 1 MiB workspace. No lse (a test adds
 * one when it needs it). Header-only. */
#ifndef QATTN_TEST_DECODE_FIXTURE_H
#define QATTN_TEST_DECODE_FIXTURE_H

#include "test_ctx.h"
#include "test_rng.h"

enum { B = 2, R = 1, HQ = 4, HKV = 2, D = 64, NS = 32, P = 4, NPAGES = 8 };

static const int32_t QF_INDPTR[B + 1] = {0, 4, 8}, QF_LENS[B] = {13, 16},
                     QF_PAGES[NPAGES] = {7, 1, 2, 3, 4, 5, 6, 0};

typedef struct fix {
    qattn_context *ctx;
    qattn_buffer *q, *kc, *vc, *indptr, *indices, *lens, *o, *lse, *ws;
    qattn_decode_args a;
} fix;

static inline fix *qf_setup(const char *name) {
    fix *f = calloc(1, sizeof *f);
    qt_rng rng = qt_rng_for(name);
    f->ctx = qt_cpu_ctx();
    uint16_t q[B * R * HQ * D], kv[NS * HKV * D];
    qt_fill_bf16(&rng, q, B * R * HQ * D, 1.0f);
    f->q = qt_buf(f->ctx, q, sizeof q);
    qt_fill_bf16(&rng, kv, NS * HKV * D, 1.0f);
    f->kc = qt_buf(f->ctx, kv, sizeof kv);
    qt_fill_bf16(&rng, kv, NS * HKV * D, 1.0f);
    f->vc = qt_buf(f->ctx, kv, sizeof kv);
    f->indptr = qt_buf(f->ctx, QF_INDPTR, sizeof QF_INDPTR);
    f->indices = qt_buf(f->ctx, QF_PAGES, sizeof QF_PAGES);
    f->lens = qt_buf(f->ctx, QF_LENS, sizeof QF_LENS);
    f->o = qt_buf(f->ctx, NULL, B * R * HQ * D * 2);
    f->ws = qt_buf(f->ctx, NULL, 1 << 20);
    qattn_decode_args *a = &f->a;
    a->q = qattn_tensor_contiguous(f->q, 0, QATTN_BF16, 4, (int64_t[]){B, R, HQ, D});
    a->k_cache = qattn_tensor_contiguous(f->kc, 0, QATTN_BF16, 3, (int64_t[]){NS, HKV, D});
    a->v_cache = qattn_tensor_contiguous(f->vc, 0, QATTN_BF16, 3, (int64_t[]){NS, HKV, D});
    a->kv_indptr = qattn_tensor_contiguous(f->indptr, 0, QATTN_I32, 1, (int64_t[]){B + 1});
    a->kv_indices = qattn_tensor_contiguous(f->indices, 0, QATTN_I32, 1, (int64_t[]){NPAGES});
    a->kv_lens = qattn_tensor_contiguous(f->lens, 0, QATTN_I32, 1, (int64_t[]){B});
    a->o = qattn_tensor_contiguous(f->o, 0, QATTN_BF16, 4, (int64_t[]){B, R, HQ, D});
    a->page_size = P;
    a->max_kv_len = 16;
    a->sm_scale = 0.125f;
    a->window_left = -1;
    return f;
}

static inline int qf_teardown(void **state) {
    fix *f = *state;
    qattn_buffer *all[] = {f->q, f->kc, f->vc, f->indptr, f->indices, f->lens, f->o, f->lse, f->ws};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) qattn_buffer_free(f->ctx, all[i]);
    qattn_context_free(f->ctx);
    free(f);
    return 0;
}

#endif
