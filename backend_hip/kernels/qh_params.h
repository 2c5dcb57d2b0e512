/*
 * Kernel parameter blocks, shared by the host launchers (C11) and the
 * kernels (HIP C++ / CUDA). Each kernel takes exactly one of these by value.
 *
 * Layout rules that keep both compilers in agreement: fixed-width fields
 * only, device addresses 8 bytes on both sides (QH_PTR), 4-byte fields in
 * runs of even length so every 8-byte field stays 8-aligned without
 * padding, and a total size that is a multiple of 8 (checked below).
 * Strides are in elements, as in qattn_tensor, and fit int32 (the validator
 * bounds every tensor but the K/V caches and their scales to INT32_MAX
 * elements); the caches come as qattn_cache_kernel_view (qattn/backend.h):
 * page and head strides in 64 bits, row strides in 32.
 */
#ifndef QH_PARAMS_H
#define QH_PARAMS_H

#include <stdint.h>

/* Device addresses: typed pointers in the kernels (on AMD the compiler then
 * knows they are global memory, not flat), plain 64-bit integers on the C
 * host side. Both are 8 bytes with 8-byte alignment. */
#ifdef __cplusplus
#define QH_PTR(T) T *
#else
#define QH_PTR(T) uint64_t
#endif

/* The core's kernel argument blocks, with typed addresses in the kernels. */
#ifdef __cplusplus
#define QATTN_KERNEL_ADDRESS(T) T *
#endif
#include "qattn/kernel_args.h"

/* Element formats (kernel template arguments, MQA's runtime q/k formats).
 * QH_E5M2: fp8 e5m2, whose code byte b is exactly the f16 with bits b << 8. */
enum { QH_BF16 = 0, QH_FN = 1, QH_FNUZ = 2, QH_I8 = 3, QH_E5M2 = 4 };

/* ---- decode: the tiled stage 1 and the split merge (docs/design.md) ---- */

/* Keys per tile the tiled kernels are built for (plan.keys_per_tile must
 * match; the loads in flight are register arrays sized by it). */
#define QH_DEC_TK 16
/* Row slots (matrix N) at most: the planner's largest block. */
#define QH_DEC_MAX_NR 16
/* The merge's largest split count (QATTN_MAX_SPLITS) and workgroup. */
#define QH_DEC_MAX_SPLITS 256
#define QH_DEC_MERGE_MAX_WG 256

/* Dynamic LDS of the tiled stage 1 for head dims d (q, K) and dv (V) and nr
 * row slots (bytes), in the kernel's order: q rows, the K and V tiles (rows
 * of d/8 + 1, dv/8 + 1 words of 16 bytes: 8 f16 or bf16 each plus one of
 * padding), S^T, the rows' 2^-e, per-key k/v scales and positions, then P^T
 * (nr rows of TK + 8 f16). The same bytes as core/src/plan_decode.c's
 * tiled_shared(): the plan's shared_bytes is what the host launches with. */
#define QH_DEC_LD4(d) ((d) / 8 + 1)
#define QH_DEC_LDP (QH_DEC_TK + 8)
#define QH_DEC_OFF_SKT(d, dv, nr) ((nr) * QH_DEC_LD4(d) * 16)
#define QH_DEC_OFF_SVT(d, dv, nr) (QH_DEC_OFF_SKT(d, dv, nr) + QH_DEC_TK * QH_DEC_LD4(d) * 16)
#define QH_DEC_OFF_SS(d, dv, nr) (QH_DEC_OFF_SVT(d, dv, nr) + QH_DEC_TK * QH_DEC_LD4(dv) * 16)
#define QH_DEC_OFF_SQF(d, dv, nr) (QH_DEC_OFF_SS(d, dv, nr) + QH_DEC_TK * (nr) * 4)
#define QH_DEC_OFF_SKS(d, dv, nr) (QH_DEC_OFF_SQF(d, dv, nr) + (nr) * 4)
#define QH_DEC_OFF_SVS(d, dv, nr) (QH_DEC_OFF_SKS(d, dv, nr) + QH_DEC_TK * 4)
#define QH_DEC_OFF_SPOS(d, dv, nr) (QH_DEC_OFF_SVS(d, dv, nr) + QH_DEC_TK * 4)
#define QH_DEC_OFF_SP(d, dv, nr) (QH_DEC_OFF_SPOS(d, dv, nr) + QH_DEC_TK * 4)
#define QH_DEC_LDS_BYTES(d, dv, nr) (QH_DEC_OFF_SP(d, dv, nr) + (nr) * QH_DEC_LDP * 2)

/* Head dims the tiled kernels are built for exactly (D = Dv, compile-time
 * constants); every other pair of multiples of 16 up to 256 runs the
 * generic kernels, whose dims are run-time values below a compiled bound
 * (qattn_decode_tiled_*_g128 for max(D, Dv) <= 128, _g256 above). */
#define QH_DEC_GEN_SMALL 128

typedef struct qh_decode_params {
    /* The core's blocks (qattn_decode_kernel_args_of), as Vulkan pushes
     * them: the stage reads t, the merge m. This kernel addresses caches of
     * fewer than 2^32 elements (hip_decode.c refuses larger ones), so it
     * forms offsets from the low 32 bits of t's page and head strides: 64-bit
     * arithmetic there costs the gfx942 matrix kernels SGPR spills. */
    qattn_decode_tile_args t;
    qattn_decode_merge_args m;
    /* The plan's values Vulkan passes as specialization constants, beyond
     * those m holds (rows, q heads per workgroup, row slots: the stage
     * reads them there too). */
    int32_t load_bytes;  /* widest K/V load (1..16) */
    int32_t merge_wg;    /* merge_workgroup_size */
    int32_t merge_dims;  /* output dims per merge workgroup */
    int32_t head_dim;    /* D of q and K (plan.head_dim) */
    int32_t head_dim_v;  /* Dv of V and o (plan.head_dim_v) */
    int32_t pad_;
} qh_decode_params;

/* ---- KV store ---- */
typedef struct qh_kv_store_params {
    QH_PTR(const uint16_t) k_new;
    QH_PTR(const uint16_t) v_new;
    QH_PTR(const int32_t) slots;
    QH_PTR(uint8_t) k_cache;
    QH_PTR(uint8_t) v_cache;
    QH_PTR(float) k_scale;
    QH_PTR(float) v_scale;
    int32_t kn_s[2], vn_s[2]; /* token, head */
    /* Views (qattn_cache_kernel_view) of k_cache, v_cache, k_scale,
     * v_scale in that order; slot s is page s / page_rows, row s % page_rows;
     * page and head bases in 64 bits, the row inside the page in 32 */
    int64_t page_stride[4], head_stride[4];
    uint32_t page_rows[4], row_stride[4];
    int32_t slots_s;
    int32_t n_slots;
    int32_t T, Hkv, D, Dv; /* k_new [T, Hkv, D], v_new [T, Hkv, Dv] */
    int32_t src_f16;       /* k_new and v_new are f16 (else bf16) */
    int32_t pad_;
} qh_kv_store_params;

/* ---- FP8 MQA logits ---- */
enum {
    QH_MQA_CLEAN = 1,    /* write -inf outside each row's window */
    QH_MQA_ALIGNED4 = 2  /* q and k rows start on 4-byte boundaries */
};

/* Columns per KV tile of the staged kernels (one LDS tile). */
#define QH_MQA_TILE 64
/* Waves per staged workgroup. */
#define QH_MQA_WAVES 4

typedef struct qh_mqa_params {
    QH_PTR(const uint8_t) q;
    QH_PTR(const uint8_t) k;
    QH_PTR(const float) k_scale;
    QH_PTR(const float) weights;
    QH_PTR(const int32_t) ks;
    QH_PTR(const int32_t) ke;
    QH_PTR(float) logits;
    int32_t q_s[2];       /* row, head */
    int32_t k_s;          /* row */
    int32_t ksc_s;
    int32_t w_s[2];       /* row, head */
    int32_t ks_s, ke_s;
    int32_t lg_s;         /* logits row stride */
    int32_t kv_per_slice; /* columns per grid.y slice */
    int32_t S, Skv, H, D;
    int32_t q_fmt, k_fmt; /* QH_FN or QH_FNUZ (qh_fp8.h) */
    int32_t rows_per_wave; /* 1, 2 or 4 */
    int32_t waves;         /* waves per workgroup */
    int32_t flags;         /* QH_MQA_* */
    int32_t pad_;
} qh_mqa_params;

/* ---- paged FP8 MQA logits (spec 5) ----
 * The core's block (qattn_paged_mqa_kernel_args, built by
 * qattn_paged_mqa_kernel_args_of) as it is: every plan value the kernels
 * need is in it. */
typedef struct qh_paged_mqa_params {
    qattn_paged_mqa_kernel_args a;
} qh_paged_mqa_params;

#ifdef __cplusplus
static_assert(sizeof(qh_decode_params) % 8 == 0, "layout");
static_assert(sizeof(qh_kv_store_params) % 8 == 0, "layout");
static_assert(sizeof(qh_mqa_params) % 8 == 0, "layout");
static_assert(sizeof(qh_paged_mqa_params) % 8 == 0, "layout");
#else
_Static_assert(sizeof(qh_decode_params) % 8 == 0, "layout");
_Static_assert(sizeof(qh_kv_store_params) % 8 == 0, "layout");
_Static_assert(sizeof(qh_mqa_params) % 8 == 0, "layout");
_Static_assert(sizeof(qh_paged_mqa_params) % 8 == 0, "layout");
#endif

#endif /* QH_PARAMS_H */
